"""A dependency-free progress bar for long work (calibration, pruning sensitivity,
QEMU profiling, reports): drawn on stderr only when stderr is a terminal (or when
asked), silent otherwise, so logs and pipes stay clean."""
from __future__ import annotations

import sys
import time


class Progress:
    """`label [#########.........] done/total 3.2s`, redrawn at most ten times a second.
    enabled None means "when stderr is a terminal"."""

    def __init__(self, label: str, total: int, enabled: bool | None = None, stream=None):
        self.label, self.total = label, max(int(total), 1)
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = _isatty(self.stream) if enabled is None else bool(enabled)
        self.t0 = time.perf_counter()
        self.last = -1.0
        self.done = 0
        self.finished = False

    def update(self, done: int) -> None:
        self.done = min(int(done), self.total)
        if not self.enabled or self.finished:
            return
        now = time.perf_counter()
        if self.done < self.total and now - self.last < 0.1:
            return
        self.last = now
        width = 30
        fill = width * self.done // self.total
        self.stream.write(f"\r{self.label} [{'#' * fill}{'.' * (width - fill)}] {self.done}/{self.total} "
                          f"{now - self.t0:.1f}s")
        if self.done >= self.total:
            self.stream.write("\n")
            self.finished = True
        self.stream.flush()

    def step(self, n: int = 1) -> None:
        self.update(self.done + n)

    def close(self) -> None:
        """Ends the line (as if complete) so that later output starts clean."""
        if self.enabled and not self.finished and self.done > 0:
            self.stream.write("\n")
            self.stream.flush()
        self.finished = True

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _isatty(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False
