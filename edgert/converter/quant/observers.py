"""Range observers: from the values a tensor takes on the calibration samples to the
real range [lo, hi] its int8 quantization covers.

minmax      the smallest and largest value seen.
percentile  the 0.01 and 99.99 percentiles (outliers clipped), from a histogram.
entropy     the range whose 8-bit quantization loses the least information: the
            Kullback-Leibler divergence between the histogram and its quantized copy
            is minimized over clipping thresholds (one-sided for non-negative tensors,
            symmetric around 0 otherwise). The bin holding 0 is left out: exact zeros
            (a ReLU's spike) quantize exactly and would otherwise dominate.
mse         the range minimizing the expected squared error of quantize-dequantize
            (rounding plus clipping) over the histogram.

Histogram methods need two passes over the data: the first finds min/max (the
histogram's span), the second fills BINS bins. `Observer.needs_histogram` says which.
"""
from __future__ import annotations

import numpy as np

BINS = 2048
PERCENTILE = 99.99


class Observer:
    """Collects one tensor's statistics. Pass 1: update_range; pass 2 (histogram
    methods): update_hist. Then range() gives [lo, hi]."""

    def __init__(self, method: str):
        if method not in ("minmax", "percentile", "entropy", "mse"):
            raise ValueError(f"unknown calibration method {method!r}")
        self.method = method
        self.lo = np.inf
        self.hi = -np.inf
        self.hist: np.ndarray | None = None
        self.edges: tuple[float, float] | None = None

    @property
    def needs_histogram(self) -> bool:
        return self.method != "minmax"

    def update_range(self, x: np.ndarray) -> None:
        x = np.asarray(x, np.float32)
        x = x[np.isfinite(x)]
        if x.size:
            self.lo = min(self.lo, float(x.min()))
            self.hi = max(self.hi, float(x.max()))

    def _span(self) -> tuple[float, float]:
        """Histogram span: [0, amax] over |x| for signed tensors in the symmetric methods
        (entropy), otherwise [min(lo, 0), max(hi, 0)]."""
        lo, hi = min(self.lo, 0.0), max(self.hi, 0.0)
        if self.method == "entropy" and lo < 0:
            return 0.0, max(-lo, hi)
        return lo, hi

    def update_hist(self, x: np.ndarray) -> None:
        if not np.isfinite(self.lo):
            return
        if self.edges is None:
            self.edges = self._span()
            self.hist = np.zeros(BINS, np.float64)
        a, b = self.edges
        if b <= a:
            return
        x = np.asarray(x, np.float32).reshape(-1)
        x = x[np.isfinite(x)]
        if self.method == "entropy" and self.lo < 0:
            x = np.abs(x)
        h, _ = np.histogram(x, bins=BINS, range=(a, b))
        self.hist += h

    def range(self) -> tuple[float, float]:
        if not np.isfinite(self.lo):
            return 0.0, 0.0
        if self.method == "minmax" or self.hist is None or self.hist.sum() == 0:
            return self.lo, self.hi
        if self.method == "percentile":
            return self._percentile()
        if self.method == "entropy":
            return self._entropy()
        return self._mse()

    # ---- methods ------------------------------------------------------------------

    def _centers(self) -> np.ndarray:
        a, b = self.edges
        w = (b - a) / BINS
        return a + w * (np.arange(BINS) + 0.5)

    def _percentile(self) -> tuple[float, float]:
        a, b = self.edges
        cdf = np.cumsum(self.hist) / self.hist.sum()
        w = (b - a) / BINS
        lo_i = int(np.searchsorted(cdf, (100.0 - PERCENTILE) / 100.0))
        hi_i = int(np.searchsorted(cdf, PERCENTILE / 100.0))
        lo = a + w * lo_i if self.lo < 0 else self.lo
        hi = a + w * (hi_i + 1)
        return max(lo, self.lo), min(hi, self.hi)

    def _entropy(self) -> tuple[float, float]:
        a, b = self.edges
        hist = self.hist.copy()
        signed = self.lo < 0
        hist[0] = 0.0  # exact zeros (a ReLU's spike) quantize exactly and would dominate
        levels = 128 if signed else 256
        w = (b - a) / BINS
        best_t, best_kl = b, np.inf
        total = hist.sum()
        for i in range(levels, BINS + 1, 16 if BINS > 512 else 1):
            p = hist[:i].copy()
            p[i - 1] += hist[i:].sum()  # clipped mass lands in the last bin
            # quantize the first i bins to `levels` levels, spread back over non-empty bins
            idx = (np.arange(i) * levels) // i
            sums = np.bincount(idx, weights=hist[:i], minlength=levels)
            nz = np.bincount(idx, weights=(hist[:i] > 0).astype(np.float64), minlength=levels)
            q = np.where(hist[:i] > 0, sums[idx] / np.maximum(nz[idx], 1), 0.0)
            ps, qs = p.sum(), q.sum()
            if ps <= 0 or qs <= 0:
                continue
            pn, qn = p / ps, q / qs
            m = pn > 0
            kl = float(np.sum(pn[m] * np.log(pn[m] / np.maximum(qn[m], 1e-12))))
            if kl < best_kl:
                best_kl, best_t = kl, a + w * i
        del total
        if signed:
            return max(self.lo, -best_t), min(self.hi, best_t)
        return self.lo, min(self.hi, best_t)

    def _mse(self) -> tuple[float, float]:
        c = self._centers()
        n = self.hist
        lo0, hi0 = min(self.lo, 0.0), max(self.hi, 0.0)
        best, best_err = (self.lo, self.hi), np.inf
        for f in np.linspace(1.0, 0.2, 81):
            lo, hi = lo0 * f, hi0 * f
            s = (hi - lo) / 255.0
            if s <= 0:
                continue
            zp = np.round(-128 - lo / s)
            q = (np.clip(np.round(c / s) + zp, -128, 127) - zp) * s
            err = float(np.sum(n * (c - q) ** 2))
            if err < best_err:
                best_err, best = err, (float(lo), float(hi))
        return best
