"""int16 activations on Cortex-M (TFLite's 16x8 scheme): int16 activations, int8 weights, int64 bias.

One seeded model quantized int16x8 that runs every int16 kernel on edge cases
(padding, strides, dilation, a conv without bias, a depth multiplier,
broadcasting add / sub / mul, both poolings with a clipped window, every
rescaling activation, softmax, pad, concat, reshape), and the MLPerf KWS float
model quantized int16x8: host builds (portable and emulated DSP) and QEMU M4
(DSP) and M3 (portable) must equal the reference bit for bit. The same
reference is held equal to TFLite Micro on int16x8 models in
tests/frontends (the exported .tflite).
"""

from __future__ import annotations

import numpy as np
import pytest

from modelfiles import MLPERF
from rlx_edge.boards import ALIASES
from rlx_edge.errors import UnsupportedOpError
from rlx_edge.hil.qemu import run_qemu
from rlx_edge.ir.graph import Graph
from rlx_edge.quant.calibrate import calibrate
from rlx_edge.quant.ptq import quantize
from rlx_edge.targets.cortexm import build_model_firmware, emit
from rlx_edge.targets.cortexm.rules import layer_for
from rlx_edge.targets.reference import run
from rlx_edge.targets.reference.compare import make_inputs

S16_KERNELS = {
    "rlx_convolve_s16", "rlx_depthwise_conv_s16", "rlx_fully_connected_s16", "rlx_add_s16", "rlx_mul_s16",
    "rlx_avgpool_s16", "rlx_maxpool_s16", "rlx_rescale_s16", "rlx_softmax_s16",
}  # fmt: skip


def _edges() -> Graph:
    rng = np.random.default_rng(16)
    g = Graph("s16-edges")

    def w(name: str, *shape: int, scale: float = 0.5):
        return g.param(name, (scale * rng.standard_normal(shape)).astype(np.float32))

    x = g.input("x", (1, 9, 8, 3))
    y = g.conv2d(x, w("w0", 5, 3, 3, 3), w("b0", 5), padding="same", activation="relu", name="conv")
    y = g.conv2d(y, w("w1", 4, 2, 3, 5), strides=(2, 1), dilations=(1, 2), padding="same", name="conv_nobias")
    y = g.depthwise_conv2d(y, w("w2", 1, 3, 3, 8), w("b2", 8), depth_multiplier=2, padding="same",
                           activation="relu6", name="dw_m2")  # fmt: skip
    y = g.leaky_relu(y, alpha=0.2, name="leaky")
    a = g.avg_pool2d(y, kernel=(3, 3), strides=(2, 2), padding="same", name="avg")
    m = g.max_pool2d(y, kernel=(2, 3), strides=(2, 2), padding="same", name="max")
    s = g.add(a, m, name="add")
    s = g.mul(s, g.clamp(a, min=-0.5, max=1.0, name="clamp"), name="mul")
    s = g.sub(s, w("c", 1, 1, 1, 8, scale=1.0), name="sub_bcast")
    s = g.pad(s, pads=(0, 0, 1, 0, 0, 1, 0, 0), name="pad")
    s = g.concat(s, s, axis=-1, name="cat")  # equal parameters: a copy (TFLite Micro's int16 concat)
    f = g.reshape(s, shape=(1, -1), name="flat")
    f = g.fully_connected(f, w("w3", 10, 320), w("b3", 10), name="fc")
    g.output(g.softmax(g.relu(f, name="relu"), axis=-1, name="softmax"))
    data = rng.standard_normal((16, 9, 8, 3)).astype(np.float32)
    return quantize(g, calibrate(g, data), scheme="int16x8")


def _kws() -> Graph:
    from rlx_edge.frontends.tflite import load_tflite

    g = load_tflite(MLPERF / "kws_ref_model_float32.tflite")
    shape = tuple(int(d) for d in g.types[g.inputs[0]].shape[1:])
    data = np.random.default_rng(0).standard_normal((8, *shape)).astype(np.float32)
    return quantize(g, calibrate(g, data), scheme="int16x8")


@pytest.fixture(scope="module")
def edges() -> Graph:
    return _edges()


@pytest.fixture(scope="module")
def kws() -> Graph:
    return _kws()


def _kernels(graph: Graph) -> set[str]:
    prog = emit(graph).program
    return {layer_for(prog.graph, n, prog.quant.get(n.name)).kernel for n in prog.nodes()}


def test_every_int16_kernel_is_used(edges: Graph) -> None:
    assert S16_KERNELS <= _kernels(edges)
    assert all(edges.types[v].dtype.numpy == np.int16 for n in edges.nodes for v in n.outputs)


def test_edges_host_builds_are_bit_exact(edges: Graph, check) -> None:
    assert check(edges, n_inputs=6, seed=1) >= 6


def test_kws_host_builds_are_bit_exact(kws: Graph, check) -> None:
    assert {"rlx_convolve_s16", "rlx_depthwise_conv_s16", "rlx_softmax_s16"} <= _kernels(kws)
    assert check(kws, n_inputs=3, seed=2) >= 3


def _qemu(graph: Graph, core: str, tmp_path_factory, n: int) -> None:
    board = ALIASES[f"qemu-{core}"]
    elf, _info = build_model_firmware(graph, board, tmp_path_factory.getbasetemp() / f"fw-s16-{graph.name}")
    samples = make_inputs(graph, n, seed=5)
    out = graph.outputs[0]
    t = graph.types[out]
    got = run_qemu(elf, board, [s[graph.inputs[0]] for s in samples], output_dtype=t.dtype.numpy, output_shape=t.shape)
    refs = [run(graph, s)[out] for s in samples]
    for k, (y, ref) in enumerate(zip(got, refs)):
        np.testing.assert_array_equal(y, ref, err_msg=f"{board}, input {k}")
    assert len({r.tobytes() for r in refs}) >= n  # a stuck output cannot pass


@pytest.mark.parametrize("core", ["m4", "m3"])
def test_edges_qemu_is_bit_exact(edges: Graph, core: str, tmp_path_factory) -> None:
    _qemu(edges, core, tmp_path_factory, 3)


def test_kws_qemu_m4_is_bit_exact(kws: Graph, tmp_path_factory) -> None:
    _qemu(kws, "m4", tmp_path_factory, 2)


def test_missing_int16_kernel_names_node_and_op() -> None:
    g = Graph("s16-missing")
    x = g.input("x", (1, 4, 8))
    y = g.fully_connected(x, g.param("w", np.ones((8, 8), np.float32)), name="fc")
    # prelu has an int16 reference but no int16 kernel here (TFLite Micro has no int16 PRELU)
    alpha = g.param("alpha", np.full(8, 0.25, np.float32))
    g.output(g.fully_connected(g.prelu(y, alpha, name="act"), g.param("w2", np.ones((2, 8), np.float32))))
    data = np.random.default_rng(0).standard_normal((4, 1, 4, 8)).astype(np.float32)
    q = quantize(g, calibrate(g, data), scheme="int16x8")
    assert q.types["act"].dtype.numpy == np.int16  # the reference runs it in int16; the target has no kernel
    with pytest.raises(
        UnsupportedOpError, match=r"node 'act' \(prelu\): the cortexm target has no int16 kernel for prelu; "
    ) as err:
        emit(q)
    listed = str(err.value).split("int16 activations run ")[1].split(" and data movement")[0].split(", ")
    assert {"abs", "quantize", "dequantize", "mean", "sum", "squared_difference", "maximum", "select_v2"} <= set(listed)
    assert "prelu" not in listed
