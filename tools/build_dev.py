#!/usr/bin/env python3
"""Fast in-place build of edgert._edgert_c for development.

Compiles each C file to its own object (cached by content and flags, in build/dev-obj),
in parallel, then links the extension next to the sources. A C file that fails to
compile is reported and left out (its ops fall back to the "no kernel in this build"
definitions in csrc/src/ops.c) unless --strict is given. Holds a lock so concurrent
builds do not collide.
"""
from __future__ import annotations

import concurrent.futures
import fcntl
import hashlib
import os
import subprocess
import sys
import sysconfig
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.append(ROOT)  # the installed edgert first; tools/ from the checkout


def main() -> int:
    strict = "--strict" in sys.argv
    from edgert import _ffi_build as fb

    objdir = os.path.join(ROOT, "build", "dev-obj")
    os.makedirs(objdir, exist_ok=True)
    lock = open(os.path.join(ROOT, "build", ".dev-lock"), "w")
    fcntl.flock(lock, fcntl.LOCK_EX)
    try:
        gen = os.path.join(objdir, "_edgert_c.c")
        fb.ffibuilder.emit_c_code(gen)
        cc = os.environ.get("CC", "gcc")
        inc = ["-I", fb.INCLUDE, "-I", os.path.join(fb.CSRC, "src"), "-I", sysconfig.get_paths()["include"]]
        flags = fb.COMPILE_ARGS + ["-fPIC", "-Werror"]
        srcs = [os.path.join(ROOT, s) for s in fb.sources()] + [gen]

        def compile_one(src):
            data = open(src, "rb").read()
            hdrs = b"".join(open(os.path.join(d, f), "rb").read()
                            for d in (fb.INCLUDE, os.path.join(fb.CSRC, "src"), os.path.join(fb.CSRC, "kernels", "ref"))
                            for f in sorted(os.listdir(d))
                            if f.endswith((".h", ".def")))
            key = hashlib.sha1(data + hdrs + " ".join(flags).encode()).hexdigest()[:16]
            obj = os.path.join(objdir, os.path.basename(src)[:-2] + "-" + key + ".o")
            if os.path.exists(obj):
                return src, obj, ""
            f = flags if src != gen else [x for x in flags if x not in ("-Werror", "-Wextra")]
            r = subprocess.run([cc, *f, *inc, "-c", src, "-o", obj + ".tmp"], capture_output=True, text=True)
            if r.returncode != 0:
                return src, None, r.stderr
            os.replace(obj + ".tmp", obj)
            return src, obj, r.stderr

        with concurrent.futures.ThreadPoolExecutor(max_workers=2) as ex:
            results = list(ex.map(compile_one, srcs))
        objs, failed = [], []
        for src, obj, err in results:
            if obj is None:
                failed.append(src)
                print(f"--- {os.path.relpath(src, ROOT)} failed to compile:\n{err}", file=sys.stderr)
            else:
                objs.append(obj)
                if err.strip():
                    print(err, file=sys.stderr)
        if failed and strict:
            return 1
        suffix = sysconfig.get_config_var("EXT_SUFFIX")
        out = os.path.join(ROOT, "edgert", "_edgert_c" + suffix)
        fd, tmp = tempfile.mkstemp(dir=os.path.join(ROOT, "edgert"), suffix=".so.tmp")
        os.close(fd)
        r = subprocess.run([cc, "-shared", "-pthread", *objs, "-o", tmp, "-lm"], capture_output=True, text=True)
        if r.returncode != 0:
            print(r.stderr, file=sys.stderr)
            os.unlink(tmp)
            return 1
        os.replace(tmp, out)
        print(f"built {os.path.relpath(out, ROOT)}" + (f" WITHOUT {len(failed)} file(s)" if failed else ""))
        return 1 if failed else 0
    finally:
        fcntl.flock(lock, fcntl.LOCK_UN)


if __name__ == "__main__":
    sys.exit(main())
