"""Shared fixtures of the Cortex-M target tests.

Host builds are cached by content hash under one session directory, so each
model's library is compiled once per session (and the kernel objects once
per flag set).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from modelfiles import MLPERF as MLPERF_DIR
from rlx_edge.ir.dtype import DType
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.types import QuantParams
from rlx_edge.targets.cortexm import compile_host
from rlx_edge.targets.reference.compare import make_inputs
from rlx_edge.targets.reference.interpreter import run

MODELS = MLPERF_DIR
MLPERF = {
    "kws": "kws_ref_model.tflite",
    "vww": "vww_96_int8.tflite",
    "ic": "pretrainedResnet_quant.tflite",
    "ad": "ad01_int8.tflite",
}


@pytest.fixture(scope="session")
def host_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("cortexm-host")


_GRAPHS: dict[str, Graph] = {}


@pytest.fixture(scope="session")
def mlperf_graph():
    from rlx_edge.frontends.tflite import load_tflite

    def load(key: str) -> Graph:
        if key not in _GRAPHS:
            _GRAPHS[key] = load_tflite(MODELS / MLPERF[key])
        return _GRAPHS[key]

    return load


def q(scale: float, zp: int = 0) -> QuantParams:
    return QuantParams(np.float32(scale), zp)


def q16(scale: float, zp: int = 0) -> QuantParams:
    return QuantParams(np.float32(scale), zp, storage=DType.i16)


def rand_q(rng: np.random.Generator, lo: float = 0.005, hi: float = 0.2) -> QuantParams:
    return q(float(rng.uniform(lo, hi)), int(rng.integers(-128, 128)))


def wq(rng: np.random.Generator, n: int, axis: int) -> QuantParams:
    return QuantParams(rng.uniform(0.002, 0.02, n).astype(np.float32), np.zeros(n, np.int64), axis=axis)


def check_host(graph: Graph, host_dir: Path, n_inputs: int = 6, seed: int = 0, optimize: str = "balanced") -> int:
    """Both host builds (portable C, emulated DSP path) of the C at layout level ``optimize`` against the
    reference; returns inputs compared."""
    samples = make_inputs(graph, n_inputs, seed)
    refs = [run(graph, s) for s in samples]
    for dsp in (False, True):
        model = compile_host(graph, host_dir, dsp_emulate=dsp, optimize=optimize)
        for k, (s, ref) in enumerate(zip(samples, refs)):
            got = model.run(s)
            for name, want in ref.items():
                assert got[name].dtype == want.dtype
                assert np.array_equal(got[name], want), (
                    f"{'dsp' if dsp else 'portable'} build differs on input {k}, output {name}: "
                    f"{int((got[name] != want).sum())} of {want.size} elements"
                )
    return len(samples)


def check_qemu(graph: Graph, workdir: Path, n_inputs: int, seed: int, board: str = "mps2-an386") -> list[np.ndarray]:
    """``graph`` (one input, one output) as firmware under QEMU against the reference on ``n_inputs`` seeded
    inputs; returns the reference outputs, which must not all be equal (a stuck output cannot pass)."""
    from rlx_edge.hil.qemu import run_qemu
    from rlx_edge.targets.cortexm import build_model_firmware

    elf, _info = build_model_firmware(graph, board, workdir)
    samples = make_inputs(graph, n_inputs, seed=seed)
    (x_name,), out = graph.inputs, graph.outputs[0]
    t = graph.types[out]
    got = run_qemu(elf, board, [s[x_name] for s in samples], output_dtype=t.dtype.numpy, output_shape=t.shape)
    refs = [run(graph, s)[out] for s in samples]
    for k, (y, ref) in enumerate(zip(got, refs)):
        assert np.array_equal(y, ref), f"{board}, input {k}"
    assert len({r.tobytes() for r in refs}) >= 4
    return refs


def check_feed(graph: Graph, host_dir: Path, feed: dict[str, np.ndarray], equal_nan: bool = False) -> dict:
    """Both host builds (portable C, emulated DSP path) on one hand-made feed, every output bit-exact against
    the reference (``equal_nan``: a NaN equals a NaN, for float outputs); returns the reference's outputs."""
    want = run(graph, feed)
    for dsp in (False, True):
        got = compile_host(graph, host_dir, dsp_emulate=dsp).run(feed)
        for name, w in want.items():
            build = "dsp" if dsp else "portable"
            assert got[name].dtype == w.dtype, f"{build} {name}: {got[name].dtype} vs {w.dtype}"
            assert np.array_equal(got[name], w, equal_nan=equal_nan), (
                f"{build} {name}: {int((got[name] != w).sum())} of {w.size} differ"
            )
    return want


@pytest.fixture
def check(host_dir):
    return lambda graph, n_inputs=6, seed=0, optimize="balanced": check_host(graph, host_dir, n_inputs, seed, optimize)
