"""``--bind NAME=SIZE``: one symbolic graph compiled and run for two bindings, each bit-exact.

The graph is a small sequence model, x [seq, 8] -> fully_connected -> softmax,
built with a symbolic ``seq``. It is quantized once (the quantized .rlx keeps
the symbol), then bound to seq=4 and seq=16: the Cortex-M host build and JAX
must match the integer reference of that binding bit for bit, and one QEMU M4
run checks the firmware. The float graph runs on JAX for both bindings too.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rlx_edge.cli import main
from rlx_edge.errors import IRError
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.passes.bind_symbols import BindingError, bind_symbols, bindings, graph_symbols, parse_binding
from rlx_edge.ir.serialize import load, save
from rlx_edge.quant.calibrate import calibrate
from rlx_edge.quant.ptq import quantize
from rlx_edge.targets.reference import run

SEQS = (4, 16)


def _sequence_model() -> Graph:
    rng = np.random.default_rng(0)
    g = Graph("seqmodel")
    x = g.input("x", ("seq", 8), "f32")
    w = g.param("w", (rng.standard_normal((6, 8)) / 3).astype(np.float32))
    b = g.param("b", (rng.standard_normal(6) / 3).astype(np.float32))
    g.output(g.softmax(g.fully_connected(x, w, b)))
    return g


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("bind")
    g = _sequence_model()
    # calibration samples of one length; the quantized graph keeps the symbol
    data = np.random.default_rng(1).standard_normal((16, 5, 8)).astype(np.float32)
    q = quantize(g, calibrate(g, data))
    assert graph_symbols(q) == {"seq"}
    save(g, d / "float.rlx")
    save(q, d / "int8.rlx")
    return {"float": d / "float.rlx", "int8": d / "int8.rlx", "dir": d}


def _input(path: Path, seq: int, tmp: Path) -> Path:
    t = load(path).types["x"]
    rng = np.random.default_rng(seq)
    x = rng.standard_normal((seq, 8)).astype(np.float32)
    if not t.dtype.is_float:
        x = rng.integers(-128, 128, (seq, 8)).astype(np.int8)
    p = tmp / f"x_{path.stem}_{seq}.npy"
    np.save(p, x)
    return p


def _run(model: Path, x: Path, out: Path, *extra: str) -> np.ndarray:
    assert main(["run", str(model), "--input", str(x), "-o", str(out), *extra]) == 0
    return np.load(out)


@pytest.mark.parametrize("seq", SEQS)
def test_int8_binding_is_bit_exact_on_cortexm_host_and_jax(models, tmp_path, seq):
    x = _input(models["int8"], seq, tmp_path)
    want = _run(models["int8"], x, tmp_path / "ref.npy")  # the reference takes seq from the input
    assert want.shape == (seq, 6) and want.dtype == np.int8
    bound = bind_symbols(load(models["int8"]), {"seq": seq})
    np.testing.assert_array_equal(run(bound, np.load(x))[bound.outputs[0]], want)
    for target in ("cortexm-host", "jax"):
        got = _run(models["int8"], x, tmp_path / f"{target}.npy", "--target", target, "--bind", f"seq={seq}")
        assert got.dtype == want.dtype and np.array_equal(got, want), target


def test_int8_binding_is_bit_exact_on_qemu_m4(models, tmp_path):
    x = _input(models["int8"], 16, tmp_path)
    want = _run(models["int8"], x, tmp_path / "ref.npy")
    got = _run(models["int8"], x, tmp_path / "m4.npy", "--target", "qemu-m4", "--bind", "seq=16")
    assert np.array_equal(got, want)


@pytest.mark.parametrize("seq", SEQS)
def test_float_binding_runs_on_jax(models, tmp_path, seq):
    x = _input(models["float"], seq, tmp_path)
    want = _run(models["float"], x, tmp_path / "ref.npy")
    got = _run(models["float"], x, tmp_path / "jax.npy", "--target", "jax", "--bind", f"seq={seq}")
    assert got.shape == want.shape == (seq, 6)
    # float32 sums in another order (XLA's dot vs numpy's) differ in the last bits
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_compile_reports_the_binding_and_plans_its_sizes(models, tmp_path, capsys):
    # one firmware build (slow); the plans of both bindings show the sizes differ
    assert main(["compile", str(models["int8"]), "-o", str(tmp_path / "c"), "--bind", "seq=16", "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["bindings"] == {"seq": 16}
    arenas = {}
    for seq in SEQS:
        assert main(["plan", str(models["int8"]), "--target", "cortexm-host", "--bind", f"seq={seq}", "--json"]) == 0
        arenas[seq] = json.loads(capsys.readouterr().out)["arena_bytes"]
    assert arenas[16] == rep["arena_bytes"] and arenas[16] > arenas[4]


def test_inspect_and_plan_show_the_bound_sizes(models, capsys):
    assert main(["inspect", str(models["int8"]), "--bind", "seq=4"]) == 0
    assert "i8[4,8]" in capsys.readouterr().out
    assert main(["inspect", str(models["int8"]), "--bind", "seq=16", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["macs"] == 16 * 8 * 6


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    return subprocess.run([sys.executable, "-m", "rlx_edge.cli", *args], capture_output=True, text=True, env=env)


@pytest.mark.parametrize(
    ("bind", "message"),
    [
        ("len=4", "graph 'seqmodel' has no symbol len; its symbols are seq"),
        ("seq=0", "seq=0: the size must be a positive integer, not 0"),
        ("seq=-3", "the size must be a positive integer, not -3"),
        ("seq=2.5", "seq=2.5: the size must be a positive integer"),
        ("seq", "'seq' is not NAME=SIZE"),
    ],
)
def test_bad_bindings_are_one_line_errors(models, bind, message):
    r = _cli("compile", str(models["int8"]), "-o", str(models["dir"] / "bad"), f"--bind={bind}")
    assert r.returncode == 2 and "Traceback" not in r.stderr and r.stderr.count("\n") == 1, r.stderr
    assert message in r.stderr


def test_an_unbound_symbol_names_the_bind_that_fixes_it(models, capsys):
    assert main(["compile", str(models["int8"]), "-o", str(models["dir"] / "unbound")]) == 2
    err = capsys.readouterr().err
    assert "symbol(s) seq are unbound ('x' is [seq,8]); give --bind seq=N" in err
    assert not (models["dir"] / "unbound").exists()
    x = _input(models["int8"], 4, models["dir"])
    y = str(models["dir"] / "y.npy")
    assert main(["run", str(models["int8"]), "--input", str(x), "-o", y, "--target", "cortexm-host"]) == 2
    assert "give --bind seq=N" in capsys.readouterr().err


def test_binding_parser_and_python_api():
    assert parse_binding("seq=16") == ("seq", 16) and parse_binding(" n = 3 ") == ("n", 3)
    with pytest.raises(BindingError, match="twice"):
        bindings([("seq", 4), ("seq", 5)])
    g = _sequence_model()
    with pytest.raises(IRError, match="no symbol N; its symbols are seq"):
        bind_symbols(g, {"N": 2})
    with pytest.raises(IRError, match="positive int"):
        bind_symbols(g, {"seq": True})
    b = bind_symbols(g, {"seq": 3})
    assert graph_symbols(b) == set() and b.types[b.outputs[0]].shape == (3, 6)
    assert graph_symbols(g) == {"seq"}  # the original is untouched
