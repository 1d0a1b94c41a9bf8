"""The board side: what runs a converted file. `Session` (session.py), the fallback
backends that run partitions (backends.py), the file reader (reader.py) and the cffi
ABI-mode loading of a prebuilt library (_abi.py).

Imports only numpy, cffi, the package's base modules (errors, dtypes, _oplist,
fileformat, _version) and the compiled library; never anything of edgert.converter or
edgert.cli (docs/design.md, "Layout"; tests/test_layout.py checks it)."""
from .session import Session, TensorInfo, alloc_count, runtime_info, version

__all__ = ["Session", "TensorInfo", "alloc_count", "runtime_info", "version"]
