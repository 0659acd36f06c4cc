"""The bundled digits CNN: trained weights, held-out accuracy float / int8 / int4, the trainer, the demo."""

from __future__ import annotations

import numpy as np
import pytest

from rlx_edge.ir.ops.quant import affine_quantize
from rlx_edge.models import build_digits_cnn, default_weights, digits_data
from rlx_edge.models.train_digits import backward, forward, softmax_xent, train
from rlx_edge.quant.calibrate import calibrate
from rlx_edge.quant.ptq import quantize
from rlx_edge.targets.reference import run


@pytest.fixture(scope="module")
def split():
    return digits_data("train"), digits_data("test")


def _accuracy(g, x, y) -> float:
    t = g.types["image"]
    if t.quant is not None:
        x = affine_quantize(x, t.quant, t.dtype)
    return float((run(g, x)["probs"].argmax(1) == y).mean())


def test_split_is_fixed_and_disjoint(split):
    (xtr, _ytr), (xte, _yte) = split
    assert len(xtr) + len(xte) == 1797 and len(xte) == 359
    assert xtr.dtype == np.float32 and xtr.shape[1:] == (8, 8, 1) and 0 <= xtr.min() and xtr.max() <= 1
    again = digits_data("test")
    np.testing.assert_array_equal(again[0], xte)
    rows = {r.tobytes() for r in xtr.reshape(len(xtr), -1)}
    assert sum(r.tobytes() in rows for r in xte.reshape(len(xte), -1)) < 10  # sklearn has a few duplicates


def test_bundled_weights_and_accuracies(split):
    (xtr, _), (xte, yte) = split
    g = build_digits_cnn(batch="N")
    assert set(default_weights()) == {"conv1.w", "conv1.b", "conv2.w", "conv2.b", "fc.w", "fc.b"}
    acc_f = _accuracy(g, xte, yte)
    assert acc_f >= 0.97
    rec = calibrate(g, xtr[:500])
    acc8 = _accuracy(quantize(g, rec), xte, yte)
    acc4 = _accuracy(quantize(g, rec, scheme="int4w"), xte, yte)
    assert acc8 >= acc_f - 0.01, (acc_f, acc8)
    assert acc4 >= acc_f - 0.03, (acc_f, acc4)


def test_gradients_match_finite_differences():
    rng = np.random.default_rng(0)
    from rlx_edge.models.digits import init_weights

    p = {k: v.astype(np.float64) for k, v in init_weights(1).items()}
    x = rng.random((3, 8, 8, 1))
    y = np.array([1, 2, 3])
    logits, cache = forward(p, x)
    _, d = softmax_xent(logits, y)
    grads = backward(p, cache, d)
    for k, idx in [("conv1.w", (2, 1, 1, 0)), ("conv2.w", (5, 0, 2, 3)), ("fc.w", (4, 7)), ("conv2.b", (3,))]:
        eps = 1e-6
        p[k][idx] += eps
        up = softmax_xent(forward(p, x)[0], y)[0]
        p[k][idx] -= 2 * eps
        down = softmax_xent(forward(p, x)[0], y)[0]
        p[k][idx] += eps
        assert abs((up - down) / (2 * eps) - grads[k][idx]) < 1e-6


def test_training_is_deterministic():
    a, info_a = train(epochs=1)
    b, _ = train(epochs=1)
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])
    assert info_a["test_accuracy"] > 0.2  # one epoch already beats chance (0.1)
