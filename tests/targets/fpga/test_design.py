"""Configuration checks, deterministic Verilog, the SystemVerilog wrapper, Yosys resource counts."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from rlx_edge.targets.fpga import FpgaConfigError, FpgaDesign, to_verilog, wrapper_sv
from rlx_edge.targets.fpga.design import _pick_pe_simd
from rlx_edge.targets.fpga.sim import _tool_env
from rlx_edge.targets.fpga.synth import synthesize

from ._graphs import BUILDERS


def _fc(seed: int = 0):
    return BUILDERS["fully_connected"](np.random.default_rng(seed))


def test_pe_that_does_not_divide_names_the_layer():
    g = _fc()
    node = g.nodes[0]
    o = g.params[node.inputs[1]].shape[0]
    with pytest.raises(FpgaConfigError, match=rf"{node.name}.*PE={o + 1} does not divide its {o} output"):
        FpgaDesign(g, {node.name: (o + 1, 1)})


def test_simd_that_does_not_divide_names_the_layer():
    g = _fc()
    node = g.nodes[0]
    i = g.params[node.inputs[1]].shape[1]
    with pytest.raises(FpgaConfigError, match=rf"{node.name}.*SIMD={i + 1} does not divide its {i} input"):
        FpgaDesign(g, {node.name: (1, i + 1)})


def test_unknown_layer_and_bad_preset_are_errors():
    g = _fc()
    with pytest.raises(FpgaConfigError, match="unknown layer"):
        FpgaDesign(g, {"no_such_layer": (1, 1)})
    with pytest.raises(FpgaConfigError, match="parallelism must be"):
        FpgaDesign(g, "fastest")


def test_unsupported_op_is_named():
    from rlx_edge.ir.graph import Graph
    from rlx_edge.ir.types import QuantParams

    g = Graph("mul_only")
    x = g.input("x", (1, 4), "i8", quant=QuantParams(0.1, 0))
    y = g.input("y", (1, 4), "i8", quant=QuantParams(0.1, 0))
    g.output(g.mul(x, y, out_quant=QuantParams(0.05, 0)))
    with pytest.raises(FpgaConfigError, match=r"'mul_0' \(mul\) has no FPGA implementation"):
        FpgaDesign(g)


def test_depth_multiplier_on_several_channels_is_named():
    from ._graphs import depthwise_multiplier

    g = depthwise_multiplier(np.random.default_rng(0), c=3)
    want = r"depth multiplier \d is supported on one input channel only, this layer has 3"
    with pytest.raises(FpgaConfigError, match=want):
        FpgaDesign(g)


def test_presets_pick_largest_balanced_parallelism():
    assert _pick_pe_simd(128, 640, 64) == (8, 8)
    assert _pick_pe_simd(64, 1, 64) == (64, 1)
    assert _pick_pe_simd(16, 3, 64) == (16, 3)
    d = FpgaDesign(_fc(), "area")
    assert all(layer.pe * layer.simd == 1 for layer in d.layers)


def test_verilog_is_byte_identical_across_runs():
    g = _fc(3)
    a = to_verilog(FpgaDesign(g, 4))
    b = to_verilog(FpgaDesign(g, 4))
    assert a == b
    assert "module rand_fc" in a
    # a different parallelism is a different design
    assert to_verilog(FpgaDesign(g, 1)) != a


def test_wrapper_documents_ports_and_compiles(tmp_path: Path):
    d = FpgaDesign(_fc(4), 4)
    v = tmp_path / "core.v"
    sv = tmp_path / "wrap.sv"
    v.write_text(to_verilog(d))
    text = wrapper_sv(d)
    sv.write_text(text)
    for port in ("aclk", "aresetn", "s0_axis_tdata", "s0_axis_tready", "m0_axis_tdata", "m0_axis_tlast"):
        assert port in text
    _tool_env()
    lint = subprocess.run(
        [shutil.which("verilator"), "--lint-only", "-Wno-fatal", "-Wno-lint", "-Wno-style", str(v), str(sv)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert lint.returncode == 0, lint.stderr
    ivl = subprocess.run(
        ["iverilog", "-g2012", "-o", str(tmp_path / "a.vvp"), str(v), str(sv)], capture_output=True, text=True
    )
    assert ivl.returncode == 0, ivl.stderr


def test_yosys_counts_resources(tmp_path: Path):
    from ._graphs import requantize

    g = requantize(np.random.default_rng(7))
    d = FpgaDesign(g, "area")
    v = tmp_path / "rq.v"
    v.write_text(to_verilog(d))
    res = synthesize(v, d.top_name, "ice40")
    assert res["lut"] > 10 and res["ff"] > 10
    assert res["dsp"] >= 1  # the Q31 multiplier maps to SB_MAC16s
    assert sum(res["cells"].values()) >= res["lut"]


def test_weights_live_in_readmemh_files_not_in_the_verilog(tmp_path: Path):
    """Equal geometry, other weights: byte-identical Verilog (a cached simulator build is reused), other ROM files."""
    import copy

    from rlx_edge.targets.fpga import rom_files, write

    g = _fc(5)
    g2 = copy.deepcopy(g)
    wname = g.nodes[0].inputs[1]
    g2.params[wname] = (-g.params[wname].astype(np.int16)).clip(-127, 127).astype(np.int8)
    d, d2 = FpgaDesign(g, 4), FpgaDesign(g2, 4)
    v, v2 = to_verilog(d), to_verilog(d2)
    assert v == v2
    assert "$readmemh" in v and f"module {d.top_name}_rom" in v
    roms, roms2 = rom_files(d), rom_files(d2)
    assert roms.keys() == roms2.keys() and roms != roms2
    # the weight ROM holds every weight byte once: words of PE x SIMD lanes in hex
    w = g.params[wname]
    hex_digits = sum(len(line) for text in roms.values() for line in text.split())
    assert hex_digits >= 2 * w.size
    files = write(d, tmp_path)
    assert {p.name for p in files["roms"]} == set(roms)
    assert all((tmp_path / name).read_text() == text for name, text in roms.items())


def test_a_stuck_datapath_fails_instead_of_hanging(tmp_path: Path, monkeypatch):
    """The bench's watchdog: an inference past its cycle budget is an error naming the phase."""
    from rlx_edge.errors import RlxError
    from rlx_edge.targets.fpga import build_fpga

    real = FpgaDesign.stream_info
    monkeypatch.setattr(FpgaDesign, "stream_info", lambda self: {**real(self), "cycle_budget": 3})
    with pytest.raises(RlxError, match=r"inference 0 did not finish within 3 cycles \(stuck in phase \d+\)"):
        build_fpga(_fc(), tmp_path, simulate=True, inferences=1, simulator="icarus")
