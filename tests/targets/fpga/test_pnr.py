"""Place and route (Yosys + nextpnr) of tiny models for iCE40 UP5K: Fmax, utilization, latency, fit errors.

The routed result is cached by the hash of the Verilog and the tool versions
(``<cache_root>/pnr``), so only the first run after a change of the generator
or the tools pays for Yosys and nextpnr (about 15 s each for these designs on
two cores); a rerun takes a second.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from rlx_edge.cli import main
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.serialize import save
from rlx_edge.targets.fpga import build_fpga
from rlx_edge.targets.fpga.devices import DEVICES
from rlx_edge.targets.fpga.pnr import FitError, _fit_error_from_log, shell_verilog, top_ports

from ._graphs import act_q, fc_chain, weights


def _conv_pool() -> Graph:
    """conv 3x3 (4 -> 4 channels) then max pool 2x2: one multiplier and one requantizer, 5 of UP5K's 8 DSPs."""
    rng = np.random.default_rng(3)
    g = Graph("pnr_conv_pool")
    x = g.input("x", (1, 6, 6, 4), "i8", quant=act_q(rng))
    w, wq = weights(rng, (4, 3, 3, 4), 0)
    b = g.param("b", rng.integers(-2000, 2000, 4).astype(np.int32))
    y = g.conv2d(x, g.param("w", w, quant=wq), b, padding="same", activation="relu", out_quant=act_q(rng))
    g.output(g.max_pool2d(y, kernel=(2, 2), strides=(2, 2), padding="valid"))
    return g


def _three_fc() -> Graph:
    """Three fully connected layers: 9 DSPs (a multiplier and a two-DSP requantizer each: their accumulators
    fit 21 bits), UP5K has 8."""
    return fc_chain("pnr_three_fc", 4, ((16, 8), (8, 8), (8, 4)))


@pytest.fixture(scope="module")
def routed(tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("pnr") / "up5k"
    return build_fpga(_conv_pool(), out, parallelism="area", pnr="up5k")


def test_tiny_model_routes_on_up5k_with_fmax_and_latency(routed):
    dev = DEVICES["up5k"]
    # the pipelined datapath (products, partial products, rounding and clamp in stages of their own):
    # 36 MHz on UP5K; the datapath before it, one combinational requantizer stage, routed at 9.9 MHz
    assert routed["fmax_mhz"] >= 25
    util = routed["utilization"]
    for what in ("lut", "ff", "bram", "dsp", "io"):
        assert 0 <= util[what]["used"] <= util[what]["available"], what
    # nextpnr's report of the part agrees with the device table the fit check uses
    assert [util[k]["available"] for k in ("lut", "bram", "dsp", "io")] == [dev.lut, dev.bram, dev.dsp, dev.io]
    assert util["lut"]["used"] > 100 and util["ff"]["used"] > routed["pnr"]["shell_ff"]
    # the conv's multiplier and its requantizer's two (the accumulators fit 21 bits: two DSPs, not four)
    assert util["dsp"]["used"] == 3 and util["io"]["used"] == 4  # clk, rst, scan in, xor out: the shell's pins
    assert routed["cycles_source"] == "model"
    # each layer's loop steps and pipeline fill, plus the input and output beats
    assert routed["cycles"] == sum(r["steps"] + r["fill"] for r in routed["per_layer"]) + 144 + 36
    assert routed["latency_us"] == routed["cycles"] / routed["fmax_mhz"]
    for row in routed["per_layer"]:
        assert row["latency_us"] == row["cycles"] / routed["fmax_mhz"]
    assert routed["pnr"]["caveats"]  # combinational SB_MAC16s are not timed by nextpnr: said so
    for key in ("pnr_report", "pnr_log", "pnr_shell"):
        assert Path(routed["files"][key]).is_file(), key
    report = json.loads(Path(routed["files"]["pnr_report"]).read_text())
    assert routed["fmax_mhz"] == min(c["achieved"] for c in report["fmax"].values())


def test_rerun_is_served_from_the_cache(routed, tmp_path: Path):
    again = build_fpga(_conv_pool(), tmp_path / "again", parallelism="area", pnr="up5k")
    assert again["pnr"]["cached"]
    assert again["fmax_mhz"] == routed["fmax_mhz"] and again["utilization"] == routed["utilization"]
    assert Path(again["files"]["pnr_report"]).parent == tmp_path / "again" / "pnr"


def test_cli_pnr_json_with_simulation(routed, tmp_path: Path, capsys):
    model = tmp_path / "m.rlx"
    save(_conv_pool(), model)
    rc = main(["fpga", str(model), "-o", str(tmp_path / "f"), "--parallelism", "area", "--device", "up5k", "--pnr",
               "--clock-mhz", "24", "--simulate", "--json"])  # fmt: skip
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["mismatches"] == 0
    assert out["cycles_source"] == "simulation" and out["fmax_mhz"] == routed["fmax_mhz"]
    assert out["latency_us"] == out["cycles"] / out["fmax_mhz"]
    # UP5K's default target: the routed result of the fixture is reused from the cache
    assert out["pnr"]["cached"] and out["pnr"]["target_mhz"] == 24
    assert out["latency_us_at_clock"] == out["cycles"] / 24 and out["timing_met"] is (out["fmax_mhz"] >= 24)
    assert out["utilization"] == routed["utilization"]


def test_design_too_large_for_up5k_names_the_resource(tmp_path: Path, capsys):
    """Yosys' counts against the device, before nextpnr; the verdict is cached like a routed result."""
    model = tmp_path / "m.rlx"
    save(_three_fc(), model)
    out = tmp_path / "f"
    assert main(["fpga", str(model), "-o", str(out), "--parallelism", "2", "--device", "up5k", "--pnr"]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.endswith(
        "pnr_three_fc does not fit up5k (iCE40UP5K-SG48): needs 9 DSP (SB_MAC16), the device has 8; "
        "lower --parallelism or choose a larger --device"
    )
    assert not out.exists()  # nothing half-written
    with pytest.raises(FitError, match="needs 9 DSP") as info:
        build_fpga(_three_fc(), tmp_path / "again", parallelism=2, pnr="up5k")
    assert info.value.cells["SB_MAC16"] == 9 and info.value.cells["SB_LUT4"] > 100  # for reports of misfits


def test_nextpnr_placer_overflow_is_a_fit_error():
    """nextpnr 0.11's own words when its packer finds too many cells (the check Yosys' counts cannot make)."""
    log = (
        "Info: Device utilisation:\n"
        "Info: \t         ICESTORM_LC:    6012/   5280   113%\n"
        "Info: \t        ICESTORM_RAM:       2/     30     6%\n"
        "ERROR: Unable to place cell 'x_LC', no BELs remaining to implement cell type 'ICESTORM_LC'\n"
    )
    err = _fit_error_from_log(log, DEVICES["up5k"], "top")
    assert err is not None and "needs 6012 ICESTORM_LC (nextpnr), the device has 5280" in str(err)
    err = _fit_error_from_log("ERROR: Unable to place cell 'd', no BELs remaining\n", DEVICES["up5k"], "top")
    assert err is not None and "Unable to place cell 'd'" in str(err)
    assert _fit_error_from_log("ERROR: something else\n", DEVICES["up5k"], "top") is None


def test_shell_registers_every_port():
    verilog = "module t(clk, rst, a, y);\n  input clk;\n  input rst;\n  input [7:0] a;\n  output [9:0] y;\nendmodule\n"
    ports = top_ports(verilog, "t")
    assert [(p.name, p.direction, p.width) for p in ports] == [
        ("clk", "input", 1), ("rst", "input", 1), ("a", "input", 8), ("y", "output", 10)
    ]  # fmt: skip
    text, ff = shell_verilog("t", ports)
    assert ".a(scan[7:0])" in text and ".rst(rst_q)" in text and ".y(q[9:0])" in text
    assert ff == 1 + 8 + 10 + 3 + 1  # reset, scan chain, output register, XOR levels 10 -> 3 -> 1


def test_ecp5_design_has_registered_dsps_routes_at_100mhz_and_is_bit_exact(tmp_path: Path):
    """Built for ECP5, every multiplier is a MULT18X18D with its input and output registers (and its
    simulation model appended); Verilator runs that Verilog bit-exact, and the routed design keeps
    100 MHz (the same graph at 78.6 MHz when its multipliers sat between fabric registers)."""
    res = build_fpga(_conv_pool(), tmp_path / "ecp5", parallelism="latency", pnr="ecp5-25k", simulate=True)
    assert res["mismatches"] == 0
    text = Path(res["files"]["verilog"]).read_text()
    instances = text.count("MULT18X18D #(")
    assert instances == res["utilization"]["dsp"]["used"] + 1  # every DSP, and the model's module header
    assert '.REG_INPUTA_CLK("CLK0")' in text and '.REG_OUTPUT_CLK("CLK0")' in text
    assert res["fmax_mhz"] >= 100, res["pnr"]["critical_path"]
