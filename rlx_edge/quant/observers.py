"""Range observers: they watch a value over calibration batches and choose its real range.

========================  ==========================================================
``minmax``                smallest and largest value seen
``moving_average``        exponential moving average of per-batch min and max
``percentile``            the given percentile of the values (histogram)
``entropy``               TensorRT-style: the clipping threshold that minimizes the
                          KL divergence between the histogram and its quantized form
``mse``                   the clipping range that minimizes the expected squared
                          quantization error over the histogram
========================  ==========================================================

Every observer works per tensor (``axis=None``) or per channel (``axis`` is
the channel axis); ranges come back as 1-D arrays (one entry, or one per
channel). The histogram observers keep a streaming histogram whose range
doubles when a batch exceeds it; doubling merges bin pairs, which is exact.
"""

from __future__ import annotations

import numpy as np

from rlx_edge.errors import RlxError

METHODS = ("minmax", "moving_average", "percentile", "entropy", "mse")


def _channels(x: np.ndarray, axis: int | None) -> np.ndarray:
    """``x`` as [C, values] (C = 1 per tensor), float64."""
    x = np.asarray(x, dtype=np.float64)
    if axis is None:
        return x.reshape(1, -1)
    return np.moveaxis(x, axis, 0).reshape(x.shape[axis], -1)


class Observer:
    """Base class: ``update`` with arrays, then read ``range()``."""

    def __init__(self, axis: int | None = None) -> None:
        self.axis = axis
        self.count = 0

    def update(self, x: np.ndarray) -> None:
        x2 = _channels(x, self.axis)
        if x2.shape[1] == 0:
            return
        self._update(x2)
        self.count += 1

    def _update(self, x2: np.ndarray) -> None:
        raise NotImplementedError

    def range(self) -> tuple[np.ndarray, np.ndarray]:
        if self.count == 0:
            raise RlxError(f"{type(self).__name__} saw no data")
        return self._range()

    def _range(self) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError


class MinMaxObserver(Observer):
    """The smallest and largest value seen."""

    def __init__(self, axis: int | None = None) -> None:
        super().__init__(axis)
        self.lo: np.ndarray | None = None
        self.hi: np.ndarray | None = None

    def _update(self, x2: np.ndarray) -> None:
        lo, hi = x2.min(axis=1), x2.max(axis=1)
        self.lo = lo if self.lo is None else np.minimum(self.lo, lo)
        self.hi = hi if self.hi is None else np.maximum(self.hi, hi)

    def _range(self) -> tuple[np.ndarray, np.ndarray]:
        return self.lo.copy(), self.hi.copy()


class MovingAverageMinMaxObserver(MinMaxObserver):
    """Exponential moving average of per-batch min and max (``momentum`` weighs the new batch)."""

    def __init__(self, axis: int | None = None, momentum: float = 0.01) -> None:
        super().__init__(axis)
        if not 0.0 < momentum <= 1.0:
            raise RlxError(f"momentum must be in (0, 1], got {momentum}")
        self.momentum = momentum

    def _update(self, x2: np.ndarray) -> None:
        lo, hi = x2.min(axis=1), x2.max(axis=1)
        if self.lo is None:
            self.lo, self.hi = lo, hi
        else:
            self.lo = self.lo + self.momentum * (lo - self.lo)
            self.hi = self.hi + self.momentum * (hi - self.hi)


class HistogramObserver(Observer):
    """A streaming signed histogram over [-R, R] per channel; subclasses choose the range from it."""

    def __init__(self, axis: int | None = None, bins: int = 2048) -> None:
        super().__init__(axis)
        if bins < 8 or bins % 4:
            raise RlxError(f"bins must be a multiple of 4 and >= 8, got {bins}")
        self.bins = bins
        self.hist: np.ndarray | None = None  # [C, bins]
        self.radius: np.ndarray | None = None  # [C]
        self.lo: np.ndarray | None = None
        self.hi: np.ndarray | None = None

    def _update(self, x2: np.ndarray) -> None:
        c = x2.shape[0]
        lo, hi = x2.min(axis=1), x2.max(axis=1)
        amax = np.maximum(np.abs(lo), np.abs(hi))
        if self.hist is None:
            self.hist = np.zeros((c, self.bins))
            self.radius = np.where(amax > 0, amax, 1e-8)
            self.lo, self.hi = lo, hi
        else:
            self.lo, self.hi = np.minimum(self.lo, lo), np.maximum(self.hi, hi)
        for ch in np.nonzero(amax > self.radius)[0]:
            while amax[ch] > self.radius[ch]:
                self._double(ch)
        # bin index per value, per channel (the channel's own radius)
        r = self.radius[:, None]
        idx = np.floor((x2 + r) / (2 * r) * self.bins).astype(np.int64)
        idx = np.clip(idx, 0, self.bins - 1) + np.arange(c)[:, None] * self.bins
        self.hist += np.bincount(idx.ravel(), minlength=c * self.bins).reshape(c, self.bins)

    def _double(self, ch: int) -> None:
        old = self.hist[ch]
        new = np.zeros_like(old)
        b = self.bins
        new[b // 4 : 3 * b // 4] = old.reshape(b // 2, 2).sum(axis=1)
        self.hist[ch] = new
        self.radius[ch] *= 2

    def edges(self, ch: int) -> np.ndarray:
        r = self.radius[ch]
        return np.linspace(-r, r, self.bins + 1)

    def _range(self) -> tuple[np.ndarray, np.ndarray]:
        out = [self._choose(ch) for ch in range(self.hist.shape[0])]
        lo = np.array([max(a, float(self.lo[i])) for i, (a, _) in enumerate(out)])
        hi = np.array([min(b, float(self.hi[i])) for i, (_, b) in enumerate(out)])
        return lo, np.maximum(hi, lo)

    def _choose(self, ch: int) -> tuple[float, float]:
        raise NotImplementedError


class PercentileObserver(HistogramObserver):
    """Clip to the ``percentile`` (upper) and ``100 - percentile`` (lower) points of the values."""

    def __init__(self, axis: int | None = None, percentile: float = 99.99, bins: int = 2048) -> None:
        super().__init__(axis, bins)
        if not 50.0 < percentile <= 100.0:
            raise RlxError(f"percentile must be in (50, 100], got {percentile}")
        self.percentile = percentile

    def _choose(self, ch: int) -> tuple[float, float]:
        h = self.hist[ch]
        cdf = np.cumsum(h) / h.sum()
        e = self.edges(ch)
        q = self.percentile / 100.0
        lo = self._quantile(cdf, e, 1.0 - q) if q < 1.0 else float(self.lo[ch])
        hi = self._quantile(cdf, e, q) if q < 1.0 else float(self.hi[ch])
        return lo, hi

    @staticmethod
    def _quantile(cdf: np.ndarray, e: np.ndarray, p: float) -> float:
        """The value below which a fraction ``p`` lies, interpolating linearly inside its bin."""
        i = int(np.searchsorted(cdf, p, side="left"))
        i = min(i, len(cdf) - 1)
        before = cdf[i - 1] if i else 0.0
        inside = cdf[i] - before
        frac = (p - before) / inside if inside > 0 else 0.0
        return float(e[i] + frac * (e[i + 1] - e[i]))


def _kl(p: np.ndarray, q: np.ndarray) -> float:
    p = p / p.sum()
    q = q / q.sum()
    m = p > 0
    if np.any(q[m] == 0):
        return np.inf
    return float(np.sum(p[m] * np.log(p[m] / q[m])))


class EntropyObserver(HistogramObserver):
    """TensorRT's entropy calibration on the magnitude histogram.

    For each candidate threshold T (a bin edge), the reference distribution P
    is the histogram up to T with the clipped tail added to its last bin; Q
    is P merged into ``levels`` bins and expanded back uniformly over P's
    non-empty bins. T minimizing KL(P || Q) wins. ``levels`` defaults to 128
    (one sign of int8) for signed data and 256 for non-negative data, which an
    asymmetric int8 tensor spends entirely on [0, T].
    """

    def __init__(self, axis: int | None = None, bins: int = 2048, bits: int = 8) -> None:
        super().__init__(axis, bins)
        self.bits = bits

    def _choose(self, ch: int) -> tuple[float, float]:
        h = self.hist[ch]
        half = self.bins // 2
        mag = h[half:] + h[:half][::-1]  # |x| histogram over [0, R], `half` bins
        nonneg = float(self.lo[ch]) >= 0
        levels = 2**self.bits if nonneg else 2 ** (self.bits - 1)
        width = float(self.radius[ch]) / half
        last = int(np.nonzero(mag)[0].max()) + 1 if mag.any() else 1
        if last <= levels:  # every value fits without clipping
            t = last * width
            return (-t if not nonneg else 0.0), t
        best, best_i = np.inf, last
        step = max(1, (last - levels) // 256)  # at most ~256 candidates keeps this fast
        for i in range(levels, last + 1, step):
            p = mag[:i].copy()
            p[-1] += mag[i:].sum()
            # merge into `levels` chunks, then spread each chunk over its non-empty bins
            ids = (np.arange(i) * levels) // i
            nz = mag[:i] > 0
            sums = np.bincount(ids, weights=mag[:i], minlength=levels)
            cnt = np.bincount(ids, weights=nz, minlength=levels)
            q = np.where(nz, sums[ids] / np.maximum(cnt[ids], 1), 0.0)
            kl = _kl(p, q)
            if kl < best:
                best, best_i = kl, i
        t = best_i * width
        return (0.0 if nonneg else -t), t


class MSEObserver(HistogramObserver):
    """The range [a*lo, a*hi] (a in (0, 1]) with the least expected squared error after quantization.

    The error of each candidate is evaluated on the histogram's bin centres
    with the same zero-point nudging the quantizer uses.
    """

    def __init__(self, axis: int | None = None, bins: int = 2048, bits: int = 8, steps: int = 100) -> None:
        super().__init__(axis, bins)
        self.bits = bits
        self.steps = steps

    def _choose(self, ch: int) -> tuple[float, float]:
        from rlx_edge.quant.ptq import choose_qparams

        h = self.hist[ch]
        e = self.edges(ch)
        centres = (e[:-1] + e[1:]) / 2
        m = h > 0
        c, n = centres[m], h[m]
        lo0, hi0 = float(self.lo[ch]), float(self.hi[ch])
        qmin, qmax = -(2 ** (self.bits - 1)), 2 ** (self.bits - 1) - 1
        best, best_r = np.inf, (lo0, hi0)
        for a in np.linspace(1.0 / self.steps, 1.0, self.steps):
            lo, hi = lo0 * a, hi0 * a
            s, zp = choose_qparams(lo, hi, qmin, qmax)
            q = np.clip(np.round(c / s) + zp, qmin, qmax)
            err = float(np.sum(n * (c - s * (q - zp)) ** 2))
            if err < best:
                best, best_r = err, (lo, hi)
        return best_r


def make_observer(method: str, axis: int | None = None, **options) -> Observer:
    """An observer for ``method`` (see :data:`METHODS`); options go to its constructor."""
    cls = {
        "minmax": MinMaxObserver,
        "moving_average": MovingAverageMinMaxObserver,
        "percentile": PercentileObserver,
        "entropy": EntropyObserver,
        "mse": MSEObserver,
    }.get(method)
    if cls is None:
        raise RlxError(f"unknown calibration method {method!r}; use one of {', '.join(METHODS)}")
    try:
        return cls(axis=axis, **options)
    except TypeError as e:
        raise RlxError(f"calibration method {method!r}: {e}") from None
