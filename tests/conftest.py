"""Fixtures for tests that need the real models of tools/models.py (fetched into the cache
by tools/fetch_models.py)."""
from __future__ import annotations

import os
import pathlib
from typing import Callable

import pytest


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
