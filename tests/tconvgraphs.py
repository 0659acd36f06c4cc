"""Quantized single transpose_conv2d graphs (int8 and int16x8) the op's tests and the Cortex-M tests share."""

from __future__ import annotations

import numpy as np

from rlx_edge.ir.graph import Graph
from rlx_edge.ir.types import QuantParams


def _q(scale, zp, storage):
    return QuantParams(np.float32(scale), zp, storage=storage)


def g_tconv(storage="i8", bias=True, padding="same", strides=(2, 2), out_hw=(9, 7), act="none", kernel=(3, 3)):
    rng = np.random.default_rng(11)
    g = Graph("tconv")
    in_q = _q(0.05, -4, "i8") if storage == "i8" else _q(0.0004, 0, "i16")
    out_q = _q(0.3, 6, "i8") if storage == "i8" else _q(0.004, 0, "i16")
    x = g.input("x", (1, 4, 4, 3), storage, quant=in_q)
    o = 5
    w = rng.integers(-127, 128, (o, *kernel, 3)).astype(np.int8)
    ws = rng.uniform(0.002, 0.02, o).astype(np.float32)
    wq = QuantParams(ws, np.zeros(o, np.int64), axis=0, storage="i8")
    b = None
    if bias:
        bdt, bst = (np.int32, "i32") if storage == "i8" else (np.int64, "i64")
        bq = QuantParams(
            (np.float32(in_q.scale[0]) * ws).astype(np.float32), np.zeros(o, np.int64), axis=0, storage=bst
        )
        b = g.param("b", rng.integers(-3000, 3000, o).astype(bdt), quant=bq)
    y = g.transpose_conv2d(
        x, g.param("w", w, quant=wq), b, output_shape=(1, *out_hw, o), strides=strides, padding=padding,
        activation=act, out_quant=out_q,
    )  # fmt: skip
    g.output(y)
    return g


CASES = {
    "int8_same_s2": dict(),
    "int8_same_s2_relu6_no_bias": dict(bias=False, act="relu6"),
    "int8_same_s3_k5": dict(strides=(3, 3), kernel=(5, 5), out_hw=(11, 12)),
    "int8_valid_s21_5x2": dict(padding="valid", strides=(2, 1), out_hw=(11, 6), kernel=(5, 2)),
    "int8_valid_s1_larger_output": dict(padding="valid", strides=(1, 1), out_hw=(8, 9)),
    "int16_same_s2": dict(storage="i16"),
    "int16_same_s2_no_bias": dict(storage="i16", bias=False, act="relu"),
    "int16_valid_s12": dict(storage="i16", padding="valid", strides=(1, 2), out_hw=(6, 10)),
}
