"""Builds the C runtime for the host as the cffi extension edgert._edgert_c (out-of-line
API mode), and copies the C sources, board descriptions and linker map into the package
(edgert/_src/) so that an installed edgert can cross-build (`edgert build`); everything
else is in pyproject.toml."""
import importlib.util
import os
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py

_spec = importlib.util.spec_from_file_location(
    "edgert_sources", os.path.join(os.path.dirname(os.path.abspath(__file__)), "edgert", "cli", "sources.py"))
sources = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sources)


class BuildPyWithSources(build_py):
    def run(self):
        super().run()
        here = os.path.dirname(os.path.abspath(__file__))
        dest = os.path.join(self.build_lib, "edgert", "_src")
        shutil.rmtree(dest, ignore_errors=True)
        for tree in sources.SHIPPED_TREES:
            shutil.copytree(os.path.join(here, tree), os.path.join(dest, tree),
                            ignore=shutil.ignore_patterns("__pycache__", "*.o", "*.d", "*.so"))
        for name in sources.SHIPPED_FILES:
            os.makedirs(os.path.dirname(os.path.join(dest, name)), exist_ok=True)
            shutil.copyfile(os.path.join(here, name), os.path.join(dest, name))


setup(cffi_modules=["edgert/_ffi_build.py:ffibuilder"], cmdclass={"build_py": BuildPyWithSources})
