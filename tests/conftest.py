"""Which edgert the tests run against, and fixtures for the real models of tools/models.py
(fetched into the cache by tools/fetch_models.py).

The tests exercise the installed package, as users get it. pytest puts the checkout on
sys.path (for tests/ and tools/), so edgert is imported here first with the checkout
hidden: every later `import edgert...` then resolves to that installed copy. With
EDGERT_TEST_INSTALLED=1 (tools/test.sh, CI) a package that resolves into the checkout is
an error; otherwise (an editable install while developing) it is allowed.
"""
from __future__ import annotations

import os
import pathlib
import sys
from typing import Callable

import pytest

CHECKOUT = pathlib.Path(__file__).resolve().parent.parent


def _import_installed_edgert():
    def in_checkout(entry: str) -> bool:
        return pathlib.Path(entry or os.getcwd()).resolve() == CHECKOUT

    saved = list(sys.path)
    sys.path[:] = [p for p in sys.path if not in_checkout(p)]
    try:
        import edgert
    finally:
        sys.path[:] = saved
    where = pathlib.Path(edgert.__file__).resolve()
    if os.environ.get("EDGERT_TEST_INSTALLED") == "1" and where.parent == CHECKOUT / "edgert":
        raise pytest.UsageError(f"EDGERT_TEST_INSTALLED=1 but edgert resolves to the checkout ({where}); "
                                "install the wheel (tools/test.sh does)")
    return edgert


_import_installed_edgert()


def pytest_report_header(config) -> str:
    import edgert

    info = edgert.runtime_info()
    return (f"edgert {info['version']} from {pathlib.Path(edgert.__file__).parent} "
            f"({info['build']}, kernels {info['kernels']})")


@pytest.fixture(scope="session")
def real_model() -> Callable[[str], pathlib.Path]:
    """real_model(name) -> path of a cached real model. Skips when it is not cached, unless
    EDGERT_REQUIRE_MODELS is set (as in CI), where a missing model fails the test."""
    from tools import models

    def get(name: str) -> pathlib.Path:
        path = models.model_path(name)
        if not path.is_file():
            msg = f"model {name!r} is not cached at {path}; run `python tools/fetch_models.py`"
            if os.environ.get("EDGERT_REQUIRE_MODELS"):
                pytest.fail(msg + " (EDGERT_REQUIRE_MODELS is set)")
            pytest.skip(msg)
        return path

    return get
