"""softmax's optional mask (#19): inference, the float reference, the int8 / int16 integer semantics
(TFLite Micro's arithmetic over the kept positions; all kept is TFLite Micro's SOFTMAX exactly) and
derivatives through a mask."""

from __future__ import annotations

import numpy as np
import pytest

from rlx_edge.autodiff import grad, jvp, vjp
from rlx_edge.errors import OpError, UnsupportedOpError
from rlx_edge.frontends._tflite_export import export_tflite
from rlx_edge.frontends.tflm import TflmModel
from rlx_edge.ir.dtype import DType
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.interpret import run
from rlx_edge.ir.ops import QContext, get_op
from rlx_edge.ir.types import QuantParams, TensorType

SOFTMAX = get_op("softmax")
Q8_IN = QuantParams(np.float32(0.11), 7, storage=DType.i8)
Q8_OUT = QuantParams(np.float32(1 / 256), -128, storage=DType.i8)
Q16_IN = QuantParams(np.float32(0.0005), 0, storage=DType.i16)
Q16_OUT = QuantParams(np.float32(1 / 32768), 0, storage=DType.i16)


def _infer(x: TensorType, mask: TensorType | None, **attrs) -> TensorType:
    return SOFTMAX.run_infer([x, mask], SOFTMAX.normalize_attrs(attrs))[0]


def _ref(x, mask, **attrs) -> np.ndarray:
    return SOFTMAX.run_reference([x, mask], SOFTMAX.normalize_attrs(attrs))[0]


def _int(x, mask, in_q, out_q, out_dtype="same", **attrs) -> np.ndarray:
    attrs = SOFTMAX.normalize_attrs({**attrs, "out_dtype": out_dtype})
    xt = TensorType(x.shape, in_q.storage, in_q)
    mt = None if mask is None else TensorType(mask.shape, DType.bool)
    ctx = QContext("sm", (xt, mt), (TensorType(x.shape, out_q.storage, out_q),))
    return SOFTMAX.run_int_reference(ctx, [x, mask], attrs)[0]


def test_mask_must_be_bool_and_broadcast_to_x():
    x = TensorType((2, 3, 4), DType.f32)
    assert _infer(x, TensorType((3, 1), DType.bool)).shape == (2, 3, 4)
    with pytest.raises(OpError, match="mask must be bool"):
        _infer(x, TensorType((3, 4), DType.f32))
    with pytest.raises(OpError, match=r"mask of shape \[2, 4\] does not broadcast to the input's \[2, 3, 4\]"):
        _infer(x, TensorType((2, 4), DType.bool))
    with pytest.raises(OpError, match="does not broadcast"):  # a mask may not grow x
        _infer(x, TensorType((5, 2, 3, 4), DType.bool))


def test_float_masked_positions_are_zero_and_the_rest_a_softmax_of_the_kept():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 6)).astype(np.float32) * 4
    mask = rng.random((3, 6)) < 0.5
    mask[0] = False  # nothing kept: all 0 (documented), not NaN
    mask[1, 2] = True
    for axis_x, axis in ((x, -1), (x.T.copy(), 0)):
        m = mask if axis == -1 else mask.T
        y = _ref(axis_x, m, axis=axis, beta=0.7)
        y = y if axis == -1 else y.T
        assert np.all(y[~mask] == 0)
        for r in range(1, 3):
            kept = x[r, mask[r]] * np.float32(0.7)
            e = np.exp(kept - kept.max())
            np.testing.assert_allclose(y[r, mask[r]], e / e.sum(), rtol=1e-6)  # float32 rounding of exp / sum
        assert np.all(y[0] == 0)
    # an all-True mask is the plain softmax, bit for bit
    assert np.array_equal(_ref(x, np.ones((6,), bool)), _ref(x, None))


def _tflm_kernel_on_kept(x, mask, in_q, out_q, out_dtype="same"):
    """The definition: per row, the unmasked integer kernel on the kept positions alone, the output's
    zero (its storage minimum for int8 input, 0 for int16) elsewhere."""
    zero = np.int64(out_q.zero_point[0])
    y = np.full(x.shape, zero, dtype=out_q.storage.numpy)
    for r in range(x.shape[0]):
        keep = mask[r]
        if keep.any():
            sub = np.ascontiguousarray(x[r, keep][None])
            y[r, keep] = _int(sub, None, in_q, out_q, out_dtype)[0]
    return y


@pytest.mark.parametrize(
    "in_q,out_q,out_dtype",
    [
        (Q8_IN, Q8_OUT, "same"),
        (Q8_IN, QuantParams(np.float32(2**-16), -32768, storage=DType.i16), "i16"),
        (Q16_IN, Q16_OUT, "same"),
    ],
    ids=["i8", "i8_to_i16", "i16"],
)
def test_integer_masked_softmax_is_the_kernel_over_the_kept_positions(in_q, out_q, out_dtype):
    rng = np.random.default_rng(3)
    info = np.iinfo(in_q.storage.numpy)
    x = rng.integers(info.min, info.max + 1, (40, 9)).astype(in_q.storage.numpy)
    x[:5] = info.max  # ties at the top, and masked values above every kept one
    x[5:10, 0] = info.min
    mask = rng.random((40, 9)) < 0.5
    mask[3] = False  # an empty row
    mask[4] = True
    got = _int(x, mask, in_q, out_q, out_dtype)
    assert got.dtype == out_q.storage.numpy
    assert np.array_equal(got, _tflm_kernel_on_kept(x, mask, in_q, out_q, out_dtype))
    assert np.array_equal(_int(x, np.ones(9, bool), in_q, out_q, out_dtype), _int(x, None, in_q, out_q, out_dtype))
    # a masked value above the kept ones changes nothing: the max is the kept positions'
    lifted = np.where(mask, x, info.max).astype(x.dtype)
    assert np.array_equal(_int(lifted, mask, in_q, out_q, out_dtype), got)


def test_int8_all_true_mask_equals_tflite_micro_softmax(tmp_path):
    """The TFLM-exact claim: the masked kernel with every position kept is TFLite Micro's SOFTMAX."""
    g = Graph("softmax")
    x = g.input("x", (4, 10), "i8", quant=Q8_IN)
    g.output(g.softmax(x, beta=0.6, out_quant=Q8_OUT))
    path = export_tflite(g, tmp_path / "softmax.tflite")
    rng = np.random.default_rng(11)
    samples = [rng.integers(-128, 128, (4, 10)).astype(np.int8) for _ in range(30)]
    samples += [np.full((4, 10), v, np.int8) for v in (-128, 0, 127)]
    masked = Graph("masked")
    xm = masked.input("x", (4, 10), "i8", quant=Q8_IN)
    masked.output(masked.softmax(xm, masked.param("keep", np.ones((1, 10), bool)), beta=0.6, out_quant=Q8_OUT))
    with TflmModel(path) as tflm:
        for s in samples:
            want = tflm([s])[0]
            got = run(masked, {"x": s})[masked.outputs[0]]
            assert np.array_equal(got, want)


def test_masked_softmax_derivatives():
    """Masked outputs are constant 0: their rows' derivatives come from the kept positions only. Checked
    against central differences of the reference (float64)."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 5))
    mask = rng.random((3, 5)) < 0.6
    mask[0] = False
    mask[1, 1] = True
    weights = rng.standard_normal((3, 5))
    g = Graph("masked_loss")
    xi = g.input("x", (3, 5), "f64")
    y = g.softmax(xi, g.param("keep", mask), beta=1.5, name="sm")
    g.output(g.reshape(g.sum(g.mul(y, g.param("r", weights)), axes=(0, 1)), shape=(), name="loss"))
    got = run(grad(g, "loss", ["x"]), {"x": x})["grad/x"]
    h = 1e-6
    fd = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        d = np.zeros_like(x)
        d[idx] = h
        fd[idx] = (run(g, {"x": x + d})["loss"] - run(g, {"x": x - d})["loss"]) / (2 * h)
    np.testing.assert_allclose(got, fd, rtol=1e-6, atol=1e-8)  # central differences: O(h^2) error
    assert np.all(got[~mask] == 0) and np.all(got[0] == 0)
    # forward mode: the tangent of a masked output is 0
    t = rng.standard_normal((3, 5))
    sg = Graph("masked")
    si = sg.input("x", (3, 5), "f64")
    sg.output(sg.softmax(si, sg.param("keep", mask), beta=1.5, name="y"))
    tan = run(jvp(sg, ["x"]), {"x": x, "tangent/x": t})["tangent/y"]
    fd_t = (run(sg, {"x": x + h * t})["y"] - run(sg, {"x": x - h * t})["y"]) / (2 * h)
    np.testing.assert_allclose(tan, fd_t, rtol=1e-6, atol=1e-8)  # central differences: O(h^2) error
    assert np.all(tan[~mask] == 0)
    ct = run(vjp(sg, ["x"]), {"x": x, "ct/y": weights})["grad/x"]
    np.testing.assert_allclose(ct, got, rtol=1e-12, atol=1e-15)  # the same linear map, same float64 ops


def _masked_graph() -> Graph:
    g = Graph("masked")
    x = g.input("x", (2, 4), "i8", quant=Q8_IN)
    g.output(g.softmax(x, g.param("keep", np.array([True, False, True, True])), out_quant=Q8_OUT, name="sm"))
    return g


def test_tflite_export_refuses_a_mask(tmp_path):
    with pytest.raises(UnsupportedOpError, match=r"softmax with a mask \(TFLite's SOFTMAX takes none\) \(at 'sm'\)"):
        export_tflite(_masked_graph(), tmp_path / "masked.tflite")


def test_fpga_refuses_a_mask():
    from rlx_edge.targets.fpga.design import FpgaConfigError, FpgaDesign

    with pytest.raises(FpgaConfigError, match="layer 'sm' \\(softmax\\): a masked softmax has no FPGA unit"):
        FpgaDesign(_masked_graph())
