"""Builds the C runtime for the host as the cffi extension edgert._edgert_c
(out-of-line API mode); everything else is in pyproject.toml."""
from setuptools import setup

setup(cffi_modules=["edgert/_ffi_build.py:ffibuilder"])
