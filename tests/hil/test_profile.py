"""`rlx-edge profile`: per-layer instructions (exact), estimated cycles and bytes from one QEMU run (issue #17)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from modelfiles import MLPERF, TFLM
from rlx_edge.frontends import load_model
from rlx_edge.hil.profile import (
    CYCLE_TABLES,
    call_sites,
    instruction_class,
    instruction_cycles,
    profile,
)
from rlx_edge.hil.qemu import QemuSession
from rlx_edge.pipeline import AS_GIVEN, optimize_graph
from rlx_edge.targets.cortexm import build_model_firmware
from rlx_edge.targets.cortexm.qemu import InstructionCounter, disassemble
from rlx_edge.targets.reference.compare import make_inputs

ENV = {**os.environ, "PYTHONWARNINGS": "ignore"}
HELLO = TFLM / "hello_world_int8.tflite"


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "rlx_edge.cli", "profile", *args], capture_output=True, text=True, env=ENV, timeout=300
    )


def _graph(path: Path):
    return optimize_graph(load_model(path), AS_GIVEN)[0]


def test_hello_world_table_checked_by_hand():
    """hello_world: three fully connected layers 1 -> 16 -> 16 -> 1, int8, one byte per value."""
    p = profile(_graph(HELLO), "m3", seed=4)
    assert p.bit_exact
    assert [(r.op, r.macs) for r in p.layers] == [("fully_connected", 16), ("fully_connected", 256)] + [
        ("fully_connected", 16)
    ]
    assert [r.kernel for r in p.layers] == ["rlx_fully_connected_s8"] * 3
    # live while each layer runs: its input and its output (1 + 16, 16 + 16, 16 + 1 bytes)
    assert [r.arena_bytes for r in p.layers] == [17, 32, 17]
    # constants on the portable (M3) build: int8 weights, int32 biases, int32 multipliers and shifts per channel
    # plus the folded bias; at least the weights and biases of each layer
    assert all(r.flash_bytes >= w + 4 * b for r, (w, b) in zip(p.layers, [(16, 16), (256, 16), (16, 1)]))
    assert sum(r.instructions for r in p.layers) == p.instructions > 0
    assert abs(sum(r.share for r in p.layers) - 1) < 1e-9
    # every class costs at least one cycle on the M3
    assert all(r.est_cycles >= r.instructions > 0 for r in p.layers)
    assert p.est_cycles == sum(r.est_cycles for r in p.layers)
    assert p.clock_mhz == 25.0 and abs(p.est_latency_ms - p.est_cycles / 25e3) < 1e-12


def test_a_layer_is_the_window_from_the_previous_return_to_its_own():
    """The middle layer's count, measured again by a plain window over the same addresses."""
    g = _graph(HELLO)
    p = profile(g, "m4", seed=1)
    elf, _ = build_model_firmware(g, "qemu-mps2-an386")
    (a0, _), (a1, _), _ = call_sites(disassemble(elf))
    x = make_inputs(g, 1, seed=1)[0][g.inputs[0]]
    with tempfile.TemporaryDirectory() as tmp:
        counter = InstructionCounter.window(elf, Path(tmp) / "n.txt", a0 + 4, [a1 + 4])
        with QemuSession(elf, "qemu-mps2-an386", timeout=60, plugin=counter.qemu_args) as s:
            s.invoke(x)
            s.exit(0)
        assert counter.windows() == [p.layers[1].instructions]
        # and the call alone, from its BL to its return
        counter = InstructionCounter.window(elf, Path(tmp) / "k.txt", a1, [a1 + 4])
        with QemuSession(elf, "qemu-mps2-an386", timeout=60, plugin=counter.qemu_args) as s:
            s.invoke(x)
            s.exit(0)
        assert counter.windows() == [p.layers[1].kernel_instructions]
    assert all(0 < r.kernel_instructions < r.instructions for r in p.layers)


def test_instruction_classes_and_cycles():
    assert instruction_class("smlad", "r0, r1, r2, r0") == ("mac", 0)
    assert instruction_class("ldr.w", "r3, [r2, #4]") == ("load", 0)
    assert instruction_class("ldr", "pc, [sp], #4") == ("branch", 0)
    assert instruction_class("pop", "{r4, r5, r6, pc}") == ("ldm", 4)
    assert instruction_class("stmia.w", "r0!, {r1, r2}") == ("stm", 2)
    assert instruction_class("bne.n", "8000 <x>") == ("branch", 0)
    assert instruction_class("bl", "8000 <rlx_add_s8>") == ("call", 0)
    assert instruction_class("smull", "r0, r1, r2, r3") == ("long_mul", 0)
    assert instruction_class("adds", "r0, #1") == ("alu", 0)
    # the M4 multiplies and accumulates in one cycle, the M3 in two (long multiplies 3-5)
    assert instruction_cycles("m4", "mla", "r0, r1, r2, r3") == 1
    assert instruction_cycles("m3", "mla", "r0, r1, r2, r3") == 2
    assert instruction_cycles("m3", "smull", "r0, r1, r2, r3") == CYCLE_TABLES["m3"]["long_mul"] == 4
    assert instruction_cycles("m4", "push", "{r4, r5, lr}") == 4


@pytest.mark.parametrize("model", ["ad01_int8", "kws_ref_model", "pretrainedResnet_quant", "vww_96_int8"])
def test_cli_on_mlperf_models_sums_to_the_invoke(model, tmp_path):
    png = tmp_path / "layers.png"
    r = _cli(str(MLPERF / f"{model}.tflite"), "--target", "qemu-m4", "--json", "--plot", str(png), "--clock-mhz", "80")
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["bit_exact"] is True and rep["core"] == "m4" and rep["clock_mhz"] == 80
    layers = rep["layers"]
    assert {"name", "op", "macs", "instructions", "est_cycles", "flash_bytes", "arena_bytes"} <= set(layers[0])
    assert sum(x["instructions"] for x in layers) == rep["instructions"] > 0
    assert sum(x["macs"] for x in layers) == rep["macs"] > 0
    assert all(x["instructions"] > 0 for x in layers if x["kernel"])
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_text_output_and_bad_arguments(tmp_path):
    r = _cli(str(HELLO), "--target", "qemu-m33")
    assert r.returncode == 0, r.stderr
    assert "bit-exact with the reference" in r.stdout and "(estimate)" in r.stdout
    assert "sequential/dense_1/MatMul" in r.stdout
    bad = _cli(str(HELLO), "--clock-mhz", "0")
    assert bad.returncode == 2 and "--clock-mhz must be positive" in bad.stderr and "Traceback" not in bad.stderr
    flt = _cli(str(TFLM / "hello_world_float.tflite"))
    assert flt.returncode == 2 and "needs quantized int8 tensors" in flt.stderr
    plot = _cli(str(HELLO), "--plot", str(tmp_path / "p.jpg"))
    assert plot.returncode == 2 and "must be a .png or .svg" in plot.stderr
    assert not (tmp_path / "p.jpg").exists()
