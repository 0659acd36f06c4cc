"""Firmware at every ``--opt`` level: the asm kernels compile, sit where their PC-relative code needs, and run
bit-exact; -O0 (the C paths) runs bit-exact too.

The asm blocks of the DSP kernels take up to 14 registers; whether GCC finds
them depends on the optimization level, the core's tuning and what is inlined
around them. Each level is compiled here for the M4 and M7, so a kernel change
that only builds at -O2 fails a test instead of a user's ``--opt O3`` build.

The level also sets GCC's function alignment: 4 bytes at -O2 and -O3, 2 at -Os,
-O1 and -Og. An ADR (or literal load) whose target is in its own section is
resolved by the assembler against PC rounded down to a word, which is right
only if the section is linked at a word boundary; in a 2-byte aligned section
it is right or off by 2 depending on what the linker placed before it (#17:
the FC row kernel's jumps went wrong at -O1 and faulted at -Og). The compile
test checks every code section of the objects for that, whatever the link
does; the QEMU test runs every asm kernel at the 2-byte levels.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from rlx_edge.boards import get_board
from rlx_edge.hil import qemu
from rlx_edge.ir.graph import Graph, Tensor
from rlx_edge.ir.types import QuantParams
from rlx_edge.targets.cortexm import build_model_firmware, emit
from rlx_edge.targets.cortexm.firmware import OPT_LEVELS, IoLayout
from rlx_edge.targets.reference.compare import make_inputs
from rlx_edge.targets.reference.interpreter import run

from .conftest import rand_q, wq

KERNELS = Path(__file__).resolve().parents[3] / "rlx_edge" / "targets" / "cortexm" / "kernels"
# Cortex-M4 and M7 (the M33's DSP build is the M4's kernels under other tuning; each core costs
# ~10 s of compiles).
DSP_BOARDS = ("qemu-m4", "qemu-m7")
# every level that compiles the asm (at -O0 the kernels take their C paths)
LEVELS = [o for o in OPT_LEVELS if o != "-O0"]
# An instruction that reads PC rounded down to a word (Align(PC, 4)), as objdump prints it: ADR
# ("adr", or "add"/"addw"/"subw" rd, pc, #imm) and the literal loads ([pc, #imm]). TBB/TBH
# ([pc, rm]), LDR pc and POP {pc} are not PC-relative that way.
_WORD_PC = re.compile(r"\tadr|\bpc, #|\[pc(, #-?\d+)?\]")
# the kernels whose asm takes its jump targets with ADR (rlx_convolve_s8.c, rlx_convolve_1x1_k4_s8.c): the
# audit must see them
_ADR_KERNELS = {"rlx_gemm_row_s8", "rlx_gemm_2px_sat", "rlx_gemm_2px_clamp", "rlx_gemm_2px_part",
                "rlx_k4_pairs_relu", "rlx_k4_pairs_sign", "rlx_k4_pairs_clamp", "rlx_gemm_2px_lo",
                "rlx_gemm_2px_part_lo", "rlx_kw_pass_relu", "rlx_kw_pass_clamp", "rlx_kw_pass_sign"}  # fmt: skip


def _asm_kernels() -> list[Path]:
    return sorted(p for p in KERNELS.glob("*.c") if "__asm__" in p.read_text())


def _word_pc_sections(obj: Path) -> tuple[set[str], list[str]]:
    """The functions of ``obj`` (compiled with -ffunction-sections) whose code reads PC rounded down to
    a word, and a line for each section of such code aligned to less than a word."""
    heads = subprocess.run(["arm-none-eabi-objdump", "-h", str(obj)], capture_output=True, text=True, check=True)
    log2_align = {m[1]: int(m[2]) for m in re.finditer(r"^\s*\d+ (\S+)\s+(?:\S+\s+){4}2\*\*(\d+)", heads.stdout, re.M)}
    dis = subprocess.run(["arm-none-eabi-objdump", "-d", str(obj)], capture_output=True, text=True, check=True)
    seen, bad, section = set(), {}, ""
    for line in dis.stdout.splitlines():
        if line.startswith("Disassembly of section "):
            section = line.removeprefix("Disassembly of section ").rstrip(":")
        elif _WORD_PC.search(line.split("@")[0]):
            seen.add(section.removeprefix(".text.").split(".")[0])
            if log2_align[section] < 2:  # the first such instruction of the section
                bad.setdefault(section, f"{section} aligned to {2 ** log2_align[section]}: {' '.join(line.split())}")
    return seen, list(bad.values())


@pytest.mark.parametrize("board", DSP_BOARDS)
def test_asm_kernels_compile_pc_relative_code_word_aligned(board, tmp_path):
    gcc = shutil.which("arm-none-eabi-gcc")
    assert gcc and shutil.which("arm-none-eabi-objdump"), "the Arm GNU toolchain is not installed (make setup)"
    # the firmware's own flags for the kernels (firmware.build_firmware): a section per function
    flags = [*get_board(board).cpu_flags, "-std=gnu11", "-Wall", "-Wextra", "-Werror", f"-I{KERNELS}"]
    flags += ["-ffunction-sections", "-fdata-sections", "-c"]
    jobs = [(src, opt) for src in _asm_kernels() for opt in LEVELS]
    assert len(jobs) >= 3 * len(LEVELS)  # convolve, depthwise and int4 kernels at least

    def compile_one(job: tuple[Path, str]) -> tuple[str, set[str], list[str]]:
        src, opt = job
        out = tmp_path / f"{src.stem}{opt}.o"
        r = subprocess.run([gcc, *flags, opt, str(src), "-o", str(out)], capture_output=True, text=True, check=False)
        if r.returncode != 0:
            return opt, set(), [f"{src.name} {opt}: {r.stderr.strip()[-600:]}"]
        seen, bad = _word_pc_sections(out)
        return opt, seen, [f"{src.name} {opt}: {b}" for b in bad]

    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(compile_one, jobs))
    failed = [msg for _, _, bad in results for msg in bad]
    assert not failed, "\n".join(failed)
    for opt in LEVELS:  # the audit found the ADR kernels (a pattern that matches nothing passes nothing)
        missing = _ADR_KERNELS - set().union(*(seen for o, seen, _ in results if o == opt))
        assert not missing, f"{opt}: no PC-relative code seen in {sorted(missing)}"


def _layer_params(g: Graph, rng: np.random.Generator, name: str, wshape: tuple, axis: int) -> tuple[Tensor, Tensor]:
    w = g.param(f"w_{name}", rng.integers(-127, 128, wshape).astype(np.int8), quant=wq(rng, wshape[axis], axis))
    return w, g.param(f"b_{name}", rng.integers(-3000, 3000, wshape[axis]).astype(np.int32))


def _conv(g: Graph, rng, x: Tensor, o: int, k: int, act: str, name: str, padding: str = "same",
          out_q: QuantParams | None = None) -> Tensor:  # fmt: skip
    w, b = _layer_params(g, rng, name, (o, k, k, x.shape[-1]), 0)
    out_q = rand_q(rng, 0.05, 0.3) if out_q is None else out_q
    return g.conv2d(x, w, b, name=name, out_quant=out_q, strides=(1, 1), padding=padding,
                    activation=act)  # fmt: skip


def _dw(g: Graph, rng, x: Tensor, kh: int, kw: int, act: str, name: str, s: int = 1, m: int = 1,
        zp: int | None = None, padding: str = "same") -> Tensor:  # fmt: skip
    w, b = _layer_params(g, rng, name, (1, kh, kw, x.shape[-1] * m), 3)
    out_q = rand_q(rng, 0.05, 0.3) if zp is None else QuantParams(np.float32(rng.uniform(0.05, 0.3)), zp)
    return g.depthwise_conv2d(x, w, b, name=name, out_quant=out_q, strides=(s, s),
                              dilations=(1, 1), padding=padding, activation=act, depth_multiplier=m)  # fmt: skip


def _fc(g: Graph, rng, x: Tensor, o: int, act: str, name: str) -> Tensor:
    w, b = _layer_params(g, rng, name, (o, x.shape[-1]), 0)
    return g.fully_connected(x, w, b, activation=act, name=name, out_quant=rand_q(rng, 0.5, 2.0))  # not saturated


# every asm kernel's entry, as model.c calls it (and the 2-pixel GEMM's instances, as it names them)
_BALANCED = ("rlx_fully_connected_s8(", "rlx_fc_small_s8(", "rlx_fc_small_clamp_s8(",
             "rlx_convolve_1x1_s8(", "rlx_gemm_2px_sat", "rlx_gemm_2px_clamp", "rlx_gemm_2px_part",
             "rlx_depthwise_conv_3x3_pair_s8(", "rlx_depthwise_conv_3x3_pair_clamp_s8(", "rlx_depthwise_conv_3x3_s8(",
             "rlx_depthwise_conv_px_s8(", "rlx_depthwise_conv_line_s8(", "rlx_depthwise_conv_ring_s8(",
             "rlx_convolve_1x1_k4_relu12_s8(", "rlx_convolve_1x1_k4_clamp_s8(", "rlx_convolve_1x1_k4_s8(",
             "rlx_convolve_pad_s8(", "rlx_convolve_small_pad_s8(")  # fmt: skip
_BALANCED2 = ("rlx_convolve_s8(", "rlx_convolve_small_s8(", "rlx_gemm_2px_lo", "rlx_gemm_2px_part_lo",
              "rlx_convolve_1x1_k4_relu_s8(", "rlx_convolve_1x1_kw_relu_s8(", "rlx_convolve_1x1_kw_clamp_s8(",
              "rlx_convolve_1x1_kw_s8(", "rlx_depthwise_conv_3x3_pair_gen_s8(", "rlx_depthwise_conv_small_s8(",
              "rlx_depthwise_conv_3x3_pair_clamp_s8(", "rlx_depthwise_conv_line_s8(")  # fmt: skip
_SPEED = ("rlx_depthwise_conv_3x3_wide_s8(",)


@cache
def _asm_graphs() -> tuple[tuple[Graph, str, tuple[str, ...]], ...]:
    """Models that run every asm kernel (balanced), and the wide 3x3 (speed: int16 layouts, and the group
    ring where channels are not a multiple of 4), each kernel with a fast output rule (rq_mode 1 or 2)."""
    rng = np.random.default_rng(23)
    g = Graph("asm_balanced")
    # FC: the row kernel (21 inputs: odd whole quads and a partial one; 7 rows: a partial block),
    # then rlx_fc_small_s8 and its clamp (4 to 8 inputs)
    x = g.input("x0", (2, 21), "i8", quant=rand_q(rng, 0.01, 0.2))
    rows = _fc(g, rng, x, 7, "relu", "fc_rows")
    g.output(rows)
    g.output(_fc(g, rng, _fc(g, rng, rows, 6, "none", "fc_small"), 5, "relu", "fc_small_clamp"))
    # 1x1 on at most 4 inputs (rlx_convolve_1x1_k4's instances: relu, a clamp below 127, none), then the
    # 2-pixel GEMM's instances (saturating, clamped, a partial block), then 1x1
    x = g.input("x1", (1, 6, 7, 3), "i8", quant=rand_q(rng, 0.01, 0.1))
    for act in ("relu", "relu6", "none"):
        x = _conv(g, rng, x, 3, 1, act, f"c_k4_{act}")
    y = _conv(g, rng, _conv(g, rng, x, 8, 3, "none", "c_sat"), 8, 3, "relu6", "c_clamp")
    g.output(_conv(g, rng, _conv(g, rng, y, 6, 3, "relu", "c_part"), 5, 1, "none", "c_1x1"))

    # depthwise: the pair kernel (saturating, clamped), the 3x3 group ring (stride 3), the pixel kernel
    # (5x5), the line kernel (7x1), the ring (multiplier 3)
    x = g.input("x2", (1, 9, 8, 8), "i8", quant=rand_q(rng, 0.01, 0.1))
    # (the saturating pair lines leave out the sign correction: only where out_zp is -128, rules._depthwise)
    g.output(_dw(g, rng, _dw(g, rng, x, 3, 3, "none", "dw_pair", zp=-128), 3, 3, "relu6", "dw_pair_clamp"))
    x = g.input("x3", (1, 9, 9, 8), "i8", quant=rand_q(rng, 0.01, 0.1))
    g.output(_dw(g, rng, x, 3, 3, "relu6", "dw_3x3", s=3))
    x = g.input("x4", (1, 8, 9, 8), "i8", quant=rand_q(rng, 0.01, 0.1))
    g.output(_dw(g, rng, x, 5, 5, "relu6", "dw_px"))
    x = g.input("x5", (1, 12, 3, 8), "i8", quant=rand_q(rng, 0.01, 0.1))
    g.output(_dw(g, rng, x, 7, 1, "none", "dw_line"))
    x = g.input("x6", (1, 6, 7, 3), "i8", quant=rand_q(rng, 0.01, 0.1))
    g.output(_dw(g, rng, x, 3, 3, "relu6", "dw_ring", m=3))
    # (the runner takes at most 8 inputs and 8 outputs: the newer kernels are in a second model)
    g2 = Graph("asm_balanced2")
    # the pair kernel's general entry (multiplier 2)
    x = g2.input("x0", (1, 8, 8, 4), "i8", quant=rand_q(rng, 0.01, 0.1))
    g2.output(_dw(g2, rng, x, 3, 3, "relu6", "dw_pair_gen", m=2))
    # conv without padding: the generic kernel (4k channels; ReLU: the GEMM's lower-bound instances, a
    # whole and a partial block) and 3 rows of 9 bytes read in place
    x = g2.input("x1", (1, 6, 7, 8), "i8", quant=rand_q(rng, 0.01, 0.1))
    g2.output(_conv(g2, rng, _conv(g2, rng, x, 8, 3, "relu", "c_lo", "valid"), 6, 3, "relu", "c_part_lo", "valid"))
    x = g2.input("x2", (1, 7, 7, 3), "i8", quant=rand_q(rng, 0.01, 0.1))
    g2.output(_conv(g2, rng, x, 8, 3, "relu", "c_small", "valid"))
    # 1x1 on 3 inputs to more than 8 outputs (k4's general ReLU), then on 8 and 16 inputs (the kw
    # kernel's instances: relu, a clamp below 127 (ReLU6 at scale 0.1 from -128), none)
    x = g2.input("x3", (1, 5, 6, 3), "i8", quant=rand_q(rng, 0.01, 0.1))
    x = _conv(g2, rng, x, 11, 1, "relu", "c_k4_relu_wide")
    x = _conv(g2, rng, _conv(g2, rng, x, 8, 1, "none", "c_to8"), 16, 1, "relu", "c_kw_relu")
    x = _conv(g2, rng, x, 8, 1, "relu6", "c_kw_clamp", out_q=QuantParams(np.float32(0.1), -128))
    g2.output(_conv(g2, rng, x, 8, 1, "none", "c_kw_none"))
    # the small-image depthwise kernel: multiplier 2 on 5 channels (the odd last channel; padding: the
    # input copied with its zero point around it), and multiplier 1 on 4 pixels read in place
    x = g2.input("x4", (1, 9, 9, 5), "i8", quant=rand_q(rng, 0.01, 0.1))
    g2.output(_dw(g2, rng, x, 3, 3, "relu6", "dw_small_m2", s=2, m=2))
    x = g2.input("x5", (1, 5, 5, 16), "i8", quant=rand_q(rng, 0.01, 0.1))
    g2.output(_dw(g2, rng, x, 3, 3, "relu", "dw_small", s=2, padding="valid"))
    # the pair kernel's stride-2 lines of 8 outputs (ReLU: 8 a step)
    x = g2.input("x6", (1, 16, 16, 4), "i8", quant=rand_q(rng, 0.01, 0.1))
    g2.output(_dw(g2, rng, x, 3, 3, "relu", "dw_pair_s2_oct", s=2))
    # the line kernel on 5 taps (two outputs a step; ReLU: a group's one-shift requantization)
    x = g2.input("x7", (1, 15, 1, 12), "i8", quant=rand_q(rng, 0.01, 0.1))
    g2.output(_dw(g2, rng, x, 5, 1, "relu", "dw_line5"))
    s = Graph("asm_speed")
    x = s.input("x0", (1, 7, 6, 8), "i8", quant=rand_q(rng, 0.01, 0.1))
    s.output(_dw(s, rng, _dw(s, rng, x, 3, 3, "none", "dw_wide"), 3, 3, "relu", "dw_wide_clamp"))
    x = s.input("x1", (1, 7, 6, 6), "i8", quant=rand_q(rng, 0.01, 0.1))
    s.output(_dw(s, rng, x, 3, 3, "relu6", "dw_wide_ring", s=2))
    return (g, "balanced", _BALANCED), (g2, "balanced", _BALANCED2), (s, "speed", _SPEED)


# the levels that align functions to 2 bytes; every other QEMU test runs the kernels at -O2, which
# aligns them to 4 as -O3 and -Ofast do (the compile test above checks every level's sections)
@pytest.mark.parametrize("opt", ["-Os", "-O1", "-Og"])
def test_asm_kernels_bit_exact_at_level_on_m4(opt, tmp_path):
    board = "qemu-m4"
    for g, optimize, kernels in _asm_graphs():
        model_c = emit(g, optimize).files["model.c"]
        assert [k for k in kernels if k not in model_c] == []
        assert {m for m in (1, 2) if f".rq_mode = {m}," in model_c} == {1, 2}
        elf, _ = build_model_firmware(g, board, tmp_path, opt=opt, optimize=optimize)
        layout = IoLayout.of(g)
        samples = make_inputs(g, 2, seed=9)  # and all-min, all-max, all-zero-point
        got = qemu.run_qemu(elf, board, [layout.pack(s) for s in samples], output_dtype=np.uint8)
        for k, (raw, sample) in enumerate(zip(got, samples, strict=True)):
            outputs = layout.unpack(raw.tobytes())
            for name, want in run(g, sample).items():
                assert np.array_equal(outputs[name], want), f"{g.name} {opt}: input {k}, output {name}"


def test_kws_at_O0_builds_and_runs_bit_exact_on_m4(mlperf_graph, tmp_path):
    # An unoptimized build (--opt O0, to step through in a debugger) takes the kernels' C paths:
    # at -O0 GCC cannot find registers for their asm blocks.
    graph, board = mlperf_graph("kws"), get_board("qemu-m4")
    elf, _ = build_model_firmware(graph, board, tmp_path, opt="-O0")
    sample = make_inputs(graph, 1, seed=5)[0]
    out_t = graph.types[graph.outputs[0]]
    (y,) = qemu.run_qemu(
        elf, board, [sample[graph.inputs[0]]], output_dtype=out_t.dtype.numpy, output_shape=out_t.shape
    )
    assert np.array_equal(y, run(graph, sample)[graph.outputs[0]])
