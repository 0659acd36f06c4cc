"""Range observers: known distributions give known ranges."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlx_edge.errors import RlxError
from rlx_edge.quant.observers import METHODS, HistogramObserver, make_observer
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
