"""``rlx-edge compile``: --opt spellings, the RAM split, and the Pico image keeping its weights in flash."""

from __future__ import annotations

import json
import re
import subprocess
import zlib

import pytest

from modelfiles import MLPERF, TFLM
from rlx_edge.cli import _glue_dash_values, build_parser, main
from rlx_edge.targets.cortexm.firmware import rp2040_boot2_crc

TOYCAR = MLPERF / "ad01_int8.tflite"
# Small enough to build in a second or two: the --opt and RAM split tests.
HELLO = TFLM / "hello_world_int8.tflite"
XIP_FLASH = range(0x10000000, 0x10000000 + 2 * 1024 * 1024)
PICO_SRAM = range(0x20000000, 0x20042000)


def _compile(capsys, tmp_path, model, *args: str, json_out: bool = True) -> dict | str:
    out = tmp_path / f"proj{len(list(tmp_path.iterdir()))}"
    rc = main(["compile", str(model), "-o", str(out), *args, *(["--json"] if json_out else [])])
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    return json.loads(captured.out) if json_out else captured.out


def _check_ram_split(report: dict) -> None:
    ram = report["ram"]
    assert set(ram) == {"arena", "stack", "other"}
    assert ram["arena"] + ram["stack"] + ram["other"] == report["ram_bytes"]
    # The runner's arena array is the planned arena; the stack is board.ld's __stack_size__.
    assert ram["arena"] == report["arena_bytes"]
    assert ram["other"] > 0


@pytest.mark.parametrize("spelling", [["--opt", "-Os"], ["--opt=-Os"], ["--opt", "Os"], ["--opt=Os"]])
def test_opt_spellings(spelling, tmp_path):
    # -o is checked while parsing: a fresh folder, not whatever "out" holds in the working directory
    argv = _glue_dash_values(["compile", "m.tflite", "-o", str(tmp_path / "out"), *spelling, "--json"])
    args = build_parser().parse_args(argv)
    assert (args.opt, args.json) == ("-Os", True)


def test_opt_os_builds_smaller_code_than_O2(capsys, tmp_path):
    os_ = _compile(capsys, tmp_path, HELLO, "--opt", "-Os")
    o2 = _compile(capsys, tmp_path, HELLO, "--opt", "O2")
    assert os_["flash_bytes"] < o2["flash_bytes"]
    assert o2["optimize"] == "balanced"  # the default layout level, reported (test_optimize_level_is_reported)
    _check_ram_split(os_)
    assert os_["ram"]["stack"] == 32 * 1024  # qemu-mps2-an386's stack_bytes in rlx_edge.boards


def test_unknown_opt_level_is_one_line_usage_error(capsys, tmp_path):
    assert main(["compile", str(HELLO), "-o", str(tmp_path / "p"), "--opt", "-O9"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "unknown optimization level '-O9'; use one of O0, O1, O2, O3, Os, Ofast, Og" in err
    assert not (tmp_path / "p").exists()


def test_text_output_shows_the_ram_split(capsys, tmp_path):
    text = _compile(capsys, tmp_path, HELLO, json_out=False)
    m = re.search(r"RAM ([\d,]+) B \(arena ([\d,]+) B, stack ([\d,]+) B, other ([\d,]+) B\)", text)
    assert m, text
    total, arena, stack, other = (int(g.replace(",", "")) for g in m.groups())
    assert arena + stack + other == total
    assert arena > 0 and stack > 0 and other > 0


def _mpeg2_crc(data: bytes) -> int:
    """The boot ROM's CRC from zlib's reflected CRC-32: reflect every byte in, the result out, undo the final XOR."""
    rev8 = bytes(int(f"{b:08b}"[::-1], 2) for b in data)
    return int(f"{zlib.crc32(rev8) ^ 0xFFFFFFFF:032b}"[::-1], 2)


def test_boot2_crc_matches_the_standard_check_value():
    # CRC-32/MPEG-2 check value (the parameters of the RP2040 boot ROM's check).
    assert rp2040_boot2_crc(b"123456789") == 0x0376E6E7 == _mpeg2_crc(b"123456789")


def _portable_weights(weights_c: str) -> list[str]:
    """Names of the arrays in weights.c outside ``#if RLX_USE_DSP`` blocks."""
    names, dsp_only = [], False
    for line in weights_c.splitlines():
        if line.startswith("#if"):
            dsp_only = line.strip() == "#if RLX_USE_DSP"
        elif line.startswith("#endif"):
            dsp_only = False
        elif not dsp_only and (m := re.match(r"const \w+ (rlx_\w+)\[", line)):
            names.append(m[1])
    return names


def _readelf_sections(elf) -> dict[str, tuple[int, int]]:
    text = subprocess.run(["arm-none-eabi-readelf", "-S", "-W", str(elf)], capture_output=True, text=True, check=True)
    out = {}
    for line in text.stdout.splitlines():
        m = re.match(r"\s*\[\s*\d+\]\s+(\S+)\s+\S+\s+([0-9a-f]+)\s+[0-9a-f]+\s+([0-9a-f]+)", line)
        if m:
            out[m[1]] = (int(m[2], 16), int(m[3], 16))
    return out


def test_toycar_on_pico_keeps_weights_in_flash(capsys, tmp_path):
    report = _compile(capsys, tmp_path, TOYCAR, "--target", "cortex-m0plus", "--firmware")
    assert report["board"] == "rpi-pico"
    _check_ram_split(report)
    # 290 KB of weights do not fit the 264 KB of SRAM; the RAM holds arena, buffers, stack only.
    assert report["weight_bytes"] > 264 * 1024 > report["ram_bytes"]
    elf = report["elf"]
    nm = subprocess.run(["arm-none-eabi-nm", "-S", "--defined-only", elf], capture_output=True, text=True, check=True)
    syms = {p[3]: int(p[0], 16) for p in (line.split() for line in nm.stdout.splitlines()) if len(p) == 4}
    # Every constant array of the generated weights.c the M0+ build compiles (no DSP variants).
    names = _portable_weights((tmp_path / "proj0" / "weights.c").read_text())
    assert len(names) > 10
    for name in names:
        assert syms[name] in XIP_FLASH, name
    sections = _readelf_sections(elf)
    assert sections[".rodata"][0] in XIP_FLASH
    assert sections[".boot2"] == (0x10000000, 256)
    assert sections[".vectors"][0] == 0x10000100
    for writable in (".bss", ".stack"):
        assert sections[writable][0] in PICO_SRAM
    # boot2: the code, then the CRC-32 the boot ROM checks over the first 252 bytes.
    raw = tmp_path / "boot2.bin"
    subprocess.run(["arm-none-eabi-objcopy", "-O", "binary", "-j", ".boot2", elf, str(raw)], check=True)
    boot2 = raw.read_bytes()
    assert len(boot2) == 256
    assert int.from_bytes(boot2[252:], "little") == _mpeg2_crc(boot2[:252])


def test_optimize_level_is_reported(capsys, tmp_path):
    # the default, "balanced", is asserted on test_opt_os_builds_smaller_code_than_O2's default build:
    # one hello_world firmware build fewer
    assert _compile(capsys, tmp_path, HELLO, "--optimize", "size")["optimize"] == "size"


def test_unknown_optimize_level_is_one_line_usage_error(capsys, tmp_path):
    assert main(["compile", str(HELLO), "-o", str(tmp_path / "p"), "--optimize", "fast", "--json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1
    assert "--optimize" in captured.err and "'fast'" in captured.err
