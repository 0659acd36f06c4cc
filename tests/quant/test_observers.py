"""Range observers: known distributions give known ranges."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlx_edge.errors import RlxError
from rlx_edge.quant.observers import METHODS, HistogramObserver, kl_search, kl_thresholds, make_observer
from rlx_edge.quant.ptq import choose_qparams

RNG = np.random.default_rng(0)


def test_minmax_per_tensor_and_per_channel():
    o = make_observer("minmax")
    o.update(np.array([1.0, -2.0]))
    o.update(np.array([3.0, 0.5]))
    lo, hi = o.range()
    assert lo.tolist() == [-2.0] and hi.tolist() == [3.0]
    pc = make_observer("minmax", axis=1)
    pc.update(np.array([[1.0, -5.0], [2.0, 7.0]]))
    lo, hi = pc.range()
    assert lo.tolist() == [1.0, -5.0] and hi.tolist() == [2.0, 7.0]


def test_moving_average_weighs_new_batches():
    o = make_observer("moving_average", momentum=0.5)
    o.update(np.array([0.0, 2.0]))
    o.update(np.array([0.0, 4.0]))
    assert o.range()[1].tolist() == [3.0]


def test_histogram_growth_is_exact():
    o = HistogramObserver(bins=16)
    o.update(np.array([0.1, -0.2, 0.3]))
    o.update(np.array([5.0]))  # forces doublings
    assert o.hist.sum() == 4 and o.radius[0] >= 5.0
    assert o.lo[0] == -0.2 and o.hi[0] == 5.0


def test_streamed_histogram_equals_one_shot_histogram_on_its_final_bins():
    # batches that grow the range on both sides (re-placing and widening the bins) lose no count and misplace none
    batches = [RNG.uniform(0, 1, 500), RNG.uniform(-0.3, 2.0, 500), RNG.normal(0, 9, 500), np.zeros(7)]
    o = HistogramObserver(bins=256)
    for b in batches:
        o.update(b)
    allx = np.concatenate(batches)
    expect, _ = np.histogram(allx, bins=o.edges(0))
    np.testing.assert_array_equal(o.hist[0], expect)
    assert o.zeros[0] == 7 and o.width[0] > 0
    # one-signed data spends all its bins on its own side of 0
    r = HistogramObserver(bins=64)
    r.update(RNG.uniform(0, 3, 1000))
    assert r.offset[0] == 0 and r.edges(0)[-1] >= 3.0 > r.edges(0)[-2] * 0.9


def _kl_direct(h: np.ndarray, zero: int, levels: int, nl: int, nr: int) -> float:
    """KL(P || Q) of one window, the TensorRT way, written plainly."""
    s, e = zero - nl, zero + nr
    p = h[s:e].copy()
    p[0] += h[:s].sum()
    p[-1] += h[e:].sum()
    n = e - s
    chunk = np.array([int(np.floor(j * levels / n)) for j in range(n)])
    q = np.zeros(n)
    for k in range(levels):
        m = chunk == k
        nz = m & (p > 0)
        if nz.any():  # a chunk holding only clipped counts gets a floor of 1e-6 counts
            q[nz] = max(h[s:e][m].sum(), 1e-6) / nz.sum()
    p, q = p / p.sum(), q / h[s:e].sum()
    m = p > 0
    return float(np.sum(p[m] * np.log(p[m] / q[m])))


def test_vectorized_kl_matches_the_plain_definition():
    rng = np.random.default_rng(1)
    h = np.floor(rng.exponential(50, 300) * (rng.random(300) > 0.2))  # empty bins too
    h[:40] = 0  # nothing far below 0
    zero = 100
    l, r, kl = kl_thresholds(h, zero, 32)
    assert len(kl) > 50 and np.all(l + r >= 32)
    assert np.allclose(l / np.maximum(r, 1), 60 / 200, atol=0.02)  # windows keep the data's proportions
    for i in range(0, len(kl), 7):
        assert kl[i] == pytest.approx(_kl_direct(h, zero, 32, int(l[i]), int(r[i])), rel=1e-9, abs=1e-12)


def test_kl_search_finds_the_exhaustive_optimum_on_a_smooth_distribution():
    x = RNG.standard_normal(400_000)
    o = HistogramObserver(bins=2048)
    o.update(np.concatenate([x, [40.0, -40.0]]))
    h, off = o.hist[0], int(o.offset[0])
    l, r, kl = kl_thresholds(h, off, 255)
    best = int(np.argmin(kl))
    sl, sr = kl_search(h, off, 255)
    assert abs(sr - int(r[best])) <= 8 and abs(sl - int(l[best])) <= 8  # 8 bins: one int8 step at this range


def test_entropy_threshold_on_gaussian_with_outliers():
    # N(0, 1) with a few far outliers: minmax would keep +-50; KL over 255 steps keeps about 6.5 sigma
    x = RNG.standard_normal(500_000)
    x[:4] = [50.0, -50.0, 45.0, -48.0]
    o = make_observer("entropy")
    for b in np.split(x, 10):  # streamed: the outliers arrive in the first batch only
        o.update(b)
    lo, hi = o.range()
    assert 5.0 < hi[0] < 8.0 and -8.0 < lo[0] < -5.0
    assert abs(hi[0] + lo[0]) < 0.1 * hi[0]  # symmetric data, symmetric range
    # fewer levels (4 bits) clip harder: coarser steps cost more than clipping
    o4 = make_observer("entropy", bits=4)
    o4.update(x)
    assert 1.0 < o4.range()[1][0] < hi[0]


def test_entropy_relu_range_ignores_the_zero_spike_and_stays_non_negative():
    g = np.abs(RNG.standard_normal(200_000))
    g[:2] = [30.0, 28.0]
    a = make_observer("entropy")
    a.update(np.concatenate([g, np.zeros(200_000)]))  # a ReLU output: half of it exactly 0
    lo, hi = a.range()
    assert lo[0] == 0.0 and 2.5 < hi[0] < 6.0
    b = make_observer("entropy")
    b.update(np.concatenate([g, np.zeros(2_000_000)]))  # ten times the zeros: same range
    assert b.range()[1][0] == pytest.approx(hi[0])
    # a spike at 0 merged with its neighbours would pull the threshold far down (to ~0.25 here)
    u = make_observer("entropy")
    u.update(np.concatenate([RNG.uniform(0, 1, 200_000), np.zeros(2_000_000)]))
    assert u.range()[0][0] == 0.0 and u.range()[1][0] > 0.99


def test_entropy_asymmetric_range_keeps_its_proportions():
    x = np.concatenate([-np.abs(RNG.standard_normal(100_000)), 3 * np.abs(RNG.standard_normal(100_000))])
    x[:2] = [-25.0, 75.0]
    o = make_observer("entropy")
    o.update(x)
    lo, hi = o.range()
    assert 6.0 < hi[0] < 20.0 and hi[0] / -lo[0] == pytest.approx(3.0, rel=0.05)


def test_percentile_clips_outliers():
    x = RNG.standard_normal(100_000)
    x[0] = 1000.0
    o = make_observer("percentile", percentile=99.0)
    o.update(x)
    lo, hi = o.range()
    assert 2.0 < hi[0] < 2.7 and -2.7 < lo[0] < -2.0


@pytest.mark.parametrize("method", ["entropy", "mse"])
def test_clipping_methods_clip_heavy_tails_but_not_uniform_data(method: str):
    x = RNG.laplace(size=200_000)
    x[:3] = [60.0, -60.0, 55.0]
    o = make_observer(method)
    o.update(x)
    lo, hi = o.range()
    # both clip the far outliers (the MSE optimum keeps more of the tail: it pays for clipping squared)
    limit = 20.0 if method == "entropy" else 50.0
    assert 3.0 < hi[0] < limit and -limit < lo[0] < -3.0
    u = make_observer(method)
    u.update(RNG.uniform(0, 1, 100_000))
    lo, hi = u.range()
    assert lo[0] < 1e-3 and hi[0] > 0.9


def test_per_channel_histograms():
    x = np.stack([RNG.uniform(-1, 1, 5000), RNG.uniform(-10, 10, 5000)], axis=1)
    o = make_observer("percentile", axis=1, percentile=99.9)
    o.update(x)
    _lo, hi = o.range()
    assert 0.9 < hi[0] <= 1.0 and 9.0 < hi[1] <= 10.0


def test_bad_options():
    with pytest.raises(RlxError, match="unknown calibration method"):
        make_observer("magic")
    with pytest.raises(RlxError, match="percentile"):
        make_observer("percentile", percentile=20)
    with pytest.raises(RlxError, match="momentum"):
        make_observer("minmax", momentum=0.5)
    with pytest.raises(RlxError, match="saw no data"):
        make_observer("minmax").range()
    assert set(METHODS) == {"minmax", "moving_average", "percentile", "entropy", "mse"}


@settings(max_examples=200, deadline=None)
@given(
    st.floats(-1e4, 1e4, allow_nan=False, allow_subnormal=False),
    st.floats(-1e4, 1e4, allow_nan=False, allow_subnormal=False),
)
def test_zero_is_exactly_representable(a: float, b: float):
    lo, hi = min(a, b), max(a, b)
    s, zp = choose_qparams(lo, hi, -128, 127)
    assert s > 0 and -128 <= zp <= 127
    # real 0 is the integer zp exactly; the range is covered up to one step lost to nudging
    assert s * (0 - zp) + s * zp == 0.0
    if hi - lo > 1e-6:
        assert s * (127 - zp) >= hi - 1.01 * s
        assert s * (-128 - zp) <= lo + 1.01 * s
