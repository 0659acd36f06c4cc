"""The compile-time walks of the generic data-movement kernel (``cortexm/_gather.py``, ``rlx_gather.c``).

A Python model of the kernel's walk runs each plan on the input's bytes and must give
the op's own reference output byte for byte, for sampler draws of every op the
kernel serves; the op x target test runs the C itself.
"""

from __future__ import annotations

import numpy as np
import pytest

from rlx_edge.boards import ALIASES
from rlx_edge.hil.qemu import run_qemu
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.ops import REGISTRY
from rlx_edge.ir.types import QuantParams
from rlx_edge.quant.calibrate import calibrate
from rlx_edge.quant.ptq import quantize
from rlx_edge.targets.cortexm import build_model_firmware, compile_host, rules
from rlx_edge.targets.cortexm._gather import FILL, WALK_INTS, kernel_tables, source_maps, walk
from rlx_edge.targets.reference import run
from rlx_edge.targets.reference.compare import make_inputs

OPS = sorted(op for op, rule in rules.RULES.items() if rule is rules.RULES["slice"])


def simulate(walks: np.ndarray, rows: np.ndarray, fill: bytes, src: bytes, k: int) -> bytes:
    """What rlx_gather writes for output ``k`` (kernels/rlx_gather.c, step for step)."""
    w = [int(v) for v in walks[k * WALK_INTS : (k + 1) * WALK_INTS]]
    eb, shape, stride, at, rows_at = w[0], w[1:7], w[7:13], w[13], w[14]
    out = bytearray()
    idx = [0] * 5
    for r in range(int(np.prod(shape[:5]))):
        base = int(rows[rows_at + r]) if rows_at >= 0 else at
        for j in range(shape[5]):
            out += fill[:eb] if base < 0 else src[base + j * stride[5] : base + j * stride[5] + eb]
        for d in range(4, -1, -1):
            at += stride[d]
            idx[d] += 1
            if idx[d] < shape[d]:
                break
            at -= stride[d] * shape[d]
            idx[d] = 0
    return bytes(out)


def test_the_kernel_serves_the_data_movement_ops() -> None:
    assert {"slice", "split", "unstack", "mirror_pad", "gather", "broadcast_to"} <= set(OPS)


@pytest.mark.parametrize("op", OPS)
def test_walks_reproduce_the_reference(op: str) -> None:
    rng = np.random.default_rng(11)
    for _ in range(40):
        inputs, attrs, *_ = REGISTRY[op].draw(rng)
        x = np.asarray(inputs[0]).astype(np.int16)  # two-byte elements: byte strides must be right
        attrs = REGISTRY[op].normalize_attrs(attrs)
        want = REGISTRY[op].run_reference([x, *inputs[1:]], attrs)
        plans = [walk(m, 2) for m in source_maps(op, x.shape, attrs, inputs[1:])]
        walks, rows = kernel_tables(plans)
        fill = np.zeros(64, np.uint8).tobytes()
        for k, w in enumerate(want):
            assert simulate(walks, rows, fill, x.tobytes(), k) == np.ascontiguousarray(w).tobytes(), (op, attrs)


def test_affine_moves_need_no_table() -> None:
    # a reversal with a stride: negative byte strides, one walk, no rows
    m = source_maps("slice", (4, 6), {"begin": (-1, 0), "end": (-(2**31), 6), "strides": (-1, 2)})[0]
    p = walk(m, 1)
    assert p.rows is None and p.stride[-2:] == [-6, 2] and p.offset == 18
    # space_to_depth is a transpose of block rows: runs of block_size * C bytes become one element
    m = source_maps("space_to_depth", (1, 4, 4, 3), {"block_size": 2})[0]
    p = walk(m, 1)
    assert p.rows is None and p.elem_bytes == 6 and p.shape == [1, 1, 1, 2, 2, 2]
    # broadcasting repeats with stride 0
    p = walk(source_maps("broadcast_to", (1, 3), {"shape": (4, 3)})[0], 1)
    assert p.rows is None and 0 in p.stride and p.elem_bytes == 3


def test_mirrored_and_padded_moves_use_row_tables() -> None:
    p = walk(source_maps("mirror_pad", (3, 4), {"pads": (1, 1, 0, 0), "mode": "reflect"})[0], 1)
    assert p.rows is not None and p.rows.tolist() == [4, 0, 4, 8, 4] and p.elem_bytes == 4  # whole rows
    m = source_maps("space_to_batch_nd", (1, 3, 2), {"block_shape": (2,), "pads": (1, 0)})[0]
    assert (m == FILL).sum() == 2
    p = walk(m, 1)
    assert p.rows is not None and FILL in p.rows.tolist()


def _take_model() -> Graph:
    """gather and gather_nd fed indices the model computes (here: its inputs), one from a constant table."""
    q = QuantParams(np.float32(0.1), 3, storage="i8")
    g = Graph("take")
    x = g.input("x", (2, 5, 3), "i8", quant=q)
    i = g.input("i", (2, 4), "i32")
    j = g.input("j", (3, 2), "i64")
    table = g.param("table", np.arange(-60, 60, 2, dtype=np.int8).reshape(6, 10), quant=q)
    g.output(
        g.gather(x, i, axis=1, batch_dims=1, out_quant=q),
        g.gather(table, i, axis=0, out_quant=q),
        g.gather_nd(x, j, out_quant=q),
    )
    return g


def test_computed_indices_run_the_take_modes(tmp_path) -> None:
    g = _take_model()
    assert all(rules.layer_for(g, n).fields["indexed"] in (1, 2) for n in g.nodes)
    model = compile_host(g, tmp_path)
    rng = np.random.default_rng(2)
    for _ in range(4):
        feeds = {
            "x": rng.integers(-128, 128, (2, 5, 3)).astype(np.int8),
            "i": rng.integers(-5, 5, (2, 4)).astype(np.int32),  # negatives count from the end
            "j": np.stack([rng.integers(-2, 2, 3), rng.integers(0, 5, 3)], axis=1).astype(np.int64),
        }
        want, got = run(g, feeds), model.run(feeds)
        for o in g.outputs:
            np.testing.assert_array_equal(got[o], want[o], err_msg=o)


def _movement_model() -> Graph:
    """Every op the kernel serves, chained: each one's walk (strided or tabled) on the real cores."""
    g = Graph("movement")
    x = g.input("x", (1, 4, 4, 3), "f32")
    a = g.mirror_pad(x, pads=(0, 0, 1, 1, 1, 1, 0, 0), mode="reflect")  # (1, 6, 6, 3): rows tabled
    b = g.space_to_depth(a, block_size=2)  # (1, 3, 3, 12)
    c = g.slice(b, begin=(0, -1, 0, 0), end=(1, -(2**31), 3, 12), strides=(1, -1, 2, 1))  # (1, 3, 2, 12)
    _, d = g.split(c, axis=3, sizes=(4, 8))
    e = g.gather(d, g.param("idx", np.array([2, 0, 1, 1], np.int32)), axis=1)  # (1, 4, 2, 8)
    f = g.depth_to_space(e, block_size=2)  # (1, 8, 4, 2)
    u0, u1 = g.unstack(f, axis=3, num=2)
    s = g.stack(u1, u0, axis=-1)
    t = g.space_to_batch_nd(s, block_shape=(2, 2), pads=(0, 0, 1, 1))  # (4, 4, 3, 2)
    v = g.batch_to_space_nd(t, block_shape=(2, 2), crops=(0, 0, 1, 1))
    w = g.gather_nd(v, g.param("nd", np.array([[0, 7], [0, 0], [0, 3]], np.int32)))  # (3, 4, 2)
    g.output(g.broadcast_to(w, shape=(2, 3, 4, 2)))
    return g


@pytest.mark.parametrize("core", ["m4", "m3"])
def test_qemu_is_bit_exact(core: str, tmp_path_factory) -> None:
    fg = _movement_model()
    data = {"x": np.random.default_rng(3).standard_normal((8, 1, 4, 4, 3)).astype(np.float32)}
    g = quantize(fg, calibrate(fg, data, optimize=False), scheme="int8")
    board = ALIASES[f"qemu-{core}"]
    elf, _ = build_model_firmware(g, board, tmp_path_factory.getbasetemp() / "fw-gather")
    samples = make_inputs(g, 3, seed=5)
    out = g.outputs[0]
    t = g.types[out]
    got = run_qemu(elf, board, [s[g.inputs[0]] for s in samples], output_dtype=t.dtype.numpy, output_shape=t.shape)
    refs = [run(g, s)[out] for s in samples]
    for k, (y, ref) in enumerate(zip(got, refs)):
        np.testing.assert_array_equal(y, ref, err_msg=f"{board}, input {k}")
    assert len({r.tobytes() for r in refs}) >= 3  # a stuck output cannot pass
