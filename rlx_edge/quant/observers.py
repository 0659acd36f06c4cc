"""Range observers: they watch a value over calibration batches and choose its real range.

========================  ==========================================================
``minmax``                smallest and largest value seen
``moving_average``        exponential moving average of per-batch min and max
``percentile``            the given percentile of the values (histogram)
``entropy``               TensorRT-style: the clipping range that minimizes the KL
                          divergence between the histogram and its quantized form
``mse``                   the clipping range that minimizes the expected squared
                          quantization error over the histogram
========================  ==========================================================

Every observer works per tensor (``axis=None``) or per channel (``axis`` is
the channel axis); ranges come back as 1-D arrays (one entry, or one per
channel). The histogram observers keep a streaming histogram whose bin edges
are aligned to 0; when a batch exceeds its range the bin width doubles, which
merges bin pairs exactly.
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
    """A streaming histogram per channel; subclasses choose the range from it.

    Each channel keeps ``bins`` bins of one width ``width[c]`` whose edges are
    aligned to 0: bin ``j`` covers ``[(j - offset[c]) * width[c], (j - offset[c] + 1) * width[c])``.
    The first batch sets the width so that its range fills the bins; when a
    later batch falls outside, the bins are placed anew around 0 and, if the
    range no longer fits, the width doubles (as often as needed), which merges
    bin pairs: both are exact because the edges stay aligned to 0. The
    histogram therefore always spends at least ``bins / 2`` bins on the
    observed range ``[min(lo, 0), max(hi, 0)]``, whatever its sign. Exact
    zeros are also counted apart (``zeros``): they quantize without error.
    """

    def __init__(self, axis: int | None = None, bins: int = 2048) -> None:
        super().__init__(axis)
        if bins < 8 or bins % 4:
            raise RlxError(f"bins must be a multiple of 4 and >= 8, got {bins}")
        self.bins = bins
        self.hist: np.ndarray | None = None  # [C, bins] counts
        self.width: np.ndarray | None = None  # [C] bin width
        self.offset: np.ndarray | None = None  # [C] index of the bin whose left edge is 0
        self.zeros: np.ndarray | None = None  # [C] exact zeros seen
        self.lo: np.ndarray | None = None
        self.hi: np.ndarray | None = None

    @property
    def radius(self) -> np.ndarray:
        """Per channel, the largest magnitude the bins cover."""
        return np.maximum(self.offset, self.bins - self.offset) * self.width

    def _update(self, x2: np.ndarray) -> None:
        c = x2.shape[0]
        lo, hi = x2.min(axis=1), x2.max(axis=1)
        if self.hist is None:
            span = np.maximum(hi, 0.0) - np.minimum(lo, 0.0)
            self.hist = np.zeros((c, self.bins))
            # bins - 2: a range [lo, hi] spans at most span / width + 2 bins once its ends are rounded out
            self.width = np.where(span > 0, span / (self.bins - 2), 1e-12)
            self.offset = np.zeros(c, dtype=np.int64)
            self.zeros = np.zeros(c)
            self.lo, self.hi = lo, hi
            self._place(np.arange(c), first=True)
        else:
            self.lo, self.hi = np.minimum(self.lo, lo), np.maximum(self.hi, hi)
            neg, pos = self._extent()
            out = (neg > self.offset) | (self.offset + pos > self.bins)
            if out.any():
                self._place(np.nonzero(out)[0])
        # bin of each value: floor(x / width) + offset, clipped against rounding at the outer edges
        t = x2 * (1.0 / self.width)[:, None]
        t += self.offset[:, None]
        np.floor(t, out=t)
        np.clip(t, 0, self.bins - 1, out=t)
        if c > 1:
            t += (np.arange(c) * self.bins)[:, None]
        self.hist += np.bincount(t.astype(np.int64).ravel(), minlength=c * self.bins).reshape(c, self.bins)
        self.zeros += np.count_nonzero(x2 == 0, axis=1)

    def _extent(self) -> tuple[np.ndarray, np.ndarray]:
        """Bins needed below and from 0 (per channel) to hold [lo, hi] at the current width."""
        neg = np.ceil(-np.minimum(self.lo, 0.0) / self.width).astype(np.int64)
        pos = np.floor(np.maximum(self.hi, 0.0) / self.width).astype(np.int64) + 1
        return neg, pos

    def _place(self, channels: np.ndarray, first: bool = False) -> None:
        """Re-place (and where needed widen) the bins of ``channels`` so [lo, hi] fits; exact."""
        for ch in channels:
            w = float(self.width[ch])
            lo, hi = min(float(self.lo[ch]), 0.0), max(float(self.hi[ch]), 0.0)
            k = 0
            while True:
                neg = int(np.ceil(-lo / (w * 2**k)))
                pos = int(np.floor(hi / (w * 2**k))) + 1
                if neg + pos <= self.bins:
                    break
                k += 1
            # free bins go to each side in proportion to its extent (all of them to a one-signed tensor)
            off = neg + ((self.bins - neg - pos) * neg) // (neg + pos)
            if not first:
                old = self.hist[ch]
                i = np.arange(self.bins) - int(self.offset[ch])  # signed index: bin i covers [i w, (i+1) w)
                j = np.floor_divide(i, 2**k) + off
                keep = old > 0
                self.hist[ch] = np.bincount(j[keep], weights=old[keep], minlength=self.bins)[: self.bins]
            self.width[ch] = w * 2**k
            self.offset[ch] = off

    def edges(self, ch: int) -> np.ndarray:
        return (np.arange(self.bins + 1) - float(self.offset[ch])) * float(self.width[ch])

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


def _xlogx(v: np.ndarray) -> np.ndarray:
    v = np.asarray(v, dtype=np.float64)
    return v * np.log(np.where(v > 0, v, 1.0))


def kl_thresholds(
    hist: np.ndarray, zero: int, levels: int, steps: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """KL(P || Q) of every candidate clipping window of ``hist``, all at once.

    ``hist`` holds counts of equal-width bins; bin ``zero`` is the first at or
    above 0. A candidate keeps ``l`` bins below 0 and ``r`` from 0 on, with
    ``l / r`` in the proportion of the data's own extent, so an asymmetric
    tensor keeps its shape and a non-negative one is never given a negative
    half. As in TensorRT's entropy calibration, P is the kept window with the
    clipped counts added to its end bins, and Q is the window (without the
    clipped counts) merged into ``levels`` equal chunks, each chunk's count
    spread evenly over the bins where P is non-zero. Every sum is a difference
    of cumulative sums, so the cost is O(candidates x levels).

    ``steps`` picks candidates by the bins kept on the longer side (default:
    every one). Returns (l, r, kl) per candidate; only windows of at least
    ``levels`` bins are candidates (narrower ones lose nothing to merging).
    """
    h = np.asarray(hist, dtype=np.float64)
    nzb = np.nonzero(h)[0]
    first, last = int(nzb[0]), int(nzb[-1]) + 1
    nl, nr = max(zero - first, 0), max(last - zero, 0)
    # one free parameter: the side with more bins steps by one bin, the other follows in proportion
    big = max(nl, nr)
    steps = np.arange(1, big + 1) if steps is None else np.asarray(steps, dtype=np.int64)
    steps = steps[(steps >= 1) & (steps <= big)]
    other = np.round(steps * (min(nl, nr) / big)).astype(np.int64)
    l, r = (steps, other) if nl >= nr else (other, steps)
    ok = (l + r >= levels) & (zero - l >= 0) & (zero + r <= len(h))
    l, r = l[ok], r[ok]
    if len(l) == 0:
        return l, r, np.zeros(0)
    s, e = zero - l, zero + r  # window [s, e)
    n = e - s
    cs = np.concatenate([[0.0], np.cumsum(h)])
    cnz = np.concatenate([[0.0], np.cumsum(h > 0, dtype=np.float64)])
    hlogh = _xlogx(h)
    chl = np.concatenate([[0.0], np.cumsum(hlogh)])
    total = cs[-1]
    left, right = cs[s], total - cs[e]
    # chunk k of a window covers bins [s + ceil(k n / L), s + ceil((k+1) n / L))
    # (float ceil is exact here: k n / L is an integer or at least 1 / L away from one)
    frac = np.arange(levels + 1) / levels
    bnd = s[:, None] + np.ceil(n[:, None] * frac[None, :] - 1e-9).astype(np.int64)  # [M, L+1]
    sums = np.diff(cs[bnd], axis=1)  # Q's chunk counts (no clipped counts)
    nnz = np.diff(cnz[bnd], axis=1)  # bins of each chunk where P is non-zero
    # P's counts per chunk add the clipped counts to the end chunks; an end bin empty in the
    # histogram is non-zero in P when clipped counts land on it
    end_l, end_r = h[s] + left, h[e - 1] + right
    nnz[:, 0] += (h[s] == 0) & (left > 0)
    nnz[:, -1] += (h[e - 1] == 0) & (right > 0)
    # sum of p log p over the window, end bins carrying the clipped counts
    plogp = chl[e] - chl[s] - hlogh[s] - hlogh[e - 1] + _xlogx(end_l) + _xlogx(end_r)
    # sum over bins of p log q, q = sums / nnz per chunk (floored where a chunk holds only clipped counts)
    logq = np.log(np.maximum(sums, 1e-6)) - np.log(np.maximum(nnz, 1.0))
    cross = np.einsum("mk,mk->m", sums, logq) + left * logq[:, 0] + right * logq[:, -1]
    qsum = np.maximum(sums.sum(axis=1), 1e-6)
    kl = (plogp - cross) / total - np.log(total) + np.log(qsum)
    return l, r, kl


def kl_search(hist: np.ndarray, zero: int, levels: int, coarse: int = 64) -> tuple[int | None, int | None]:
    """The window (bins kept below 0, bins kept from 0) of least KL divergence; (None, None) if none qualifies.

    Coarse to fine: ``coarse`` evenly spaced window sizes, then as many between
    the best one's neighbours, until the spacing is one bin. Each pass costs
    O(coarse x levels), so a 2048-bin histogram takes three passes instead of
    some two thousand windows; the KL curve's wiggles finer than a quantization
    step (which the first pass's spacing about matches) do not move the result
    by more than one.
    """
    h = np.asarray(hist, dtype=np.float64)
    nzb = np.nonzero(h)[0]
    lo_s, hi_s = 1, max(zero - int(nzb[0]), int(nzb[-1]) + 1 - zero)
    best_l = best_r = None
    best_kl = np.inf
    while True:
        grid = np.unique(np.round(np.linspace(lo_s, hi_s, min(coarse, hi_s - lo_s + 1))).astype(np.int64))
        l, r, kl = kl_thresholds(h, zero, levels, grid)
        if len(kl) == 0:
            return best_l, best_r
        i = int(np.argmin(kl))
        if kl[i] <= best_kl:
            best_l, best_r, best_kl = int(l[i]), int(r[i]), float(kl[i])
        if len(grid) == hi_s - lo_s + 1:  # every window in the span was tried
            return best_l, best_r
        side = np.maximum(l, r)
        lo_s = int(side[i - 1]) if i > 0 else int(side[i])
        hi_s = int(side[i + 1]) if i + 1 < len(side) else int(side[i])


class EntropyObserver(HistogramObserver):
    """Entropy calibration (TensorRT's KL method) for asymmetric ranges.

    The threshold search (:func:`kl_thresholds`) looks at every clipping window
    of the histogram that keeps the data's proportion of negative to positive
    extent, merging each into ``levels`` chunks: ``2**bits - 1`` by default,
    the steps an asymmetric ``bits``-bit tensor has over its whole range (a
    ReLU output spends them all on [0, T], not half of them on a negative side
    it never has). Exact zeros are left out of the histogram: the zero point
    represents 0 exactly, so the ReLU spike at 0 costs nothing and must not
    pull the threshold down.
    """

    def __init__(self, axis: int | None = None, bins: int = 2048, bits: int = 8, levels: int | None = None) -> None:
        super().__init__(axis, bins)
        self.bits = bits
        self.levels = levels if levels is not None else 2**bits - 1
        if self.levels < 2:
            raise RlxError(f"levels must be at least 2, got {self.levels}")

    def _choose(self, ch: int) -> tuple[float, float]:
        lo, hi = float(self.lo[ch]), float(self.hi[ch])
        h = self.hist[ch].copy()
        off = int(self.offset[ch])
        h[off] -= self.zeros[ch]
        if not (h > 0).any():
            return lo, hi
        l, r = kl_search(h, off, self.levels)
        if l is None:  # the data spans fewer bins than there are levels: nothing to gain by clipping
            return lo, hi
        w = float(self.width[ch])
        return -l * w + 0.0, r * w


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
