"""Building the Cortex-M firmware of ``firmware/`` for every board: flags, memory map, vector table, sizes, errors."""

from __future__ import annotations

import dataclasses
import importlib.util
import subprocess
from pathlib import Path

import numpy as np
import pytest

from rlx_edge.boards import BOARDS, Region, get_board
from rlx_edge.errors import RlxError, ToolchainError
from rlx_edge.targets.cortexm import build_firmware, firmware_dir, size_report

_spec = importlib.util.spec_from_file_location("_standin", Path(__file__).with_name("_standin.py"))
_standin = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_standin)
FIXTURES = _standin.FIXTURES

HARD_FLOAT = {"qemu-mps2-an386", "qemu-mps2-an500", "qemu-mps2-an505", "nucleo-l4r5zi"}


@pytest.fixture(scope="module")
def elves(tmp_path_factory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("fw")
    return {name: build_firmware(FIXTURES / "standin", name, out / name) for name in BOARDS}


def _tool(name: str, *args: str) -> str:
    return subprocess.run([name, *args], capture_output=True, text=True, check=True).stdout


def _section_addr(elf: Path, section: str) -> int:
    for line in _tool("arm-none-eabi-readelf", "-S", "-W", str(elf)).splitlines():
        parts = line.replace("[ ", "[").split()
        if len(parts) > 3 and parts[1] == section:
            return int(parts[3], 16)
    raise AssertionError(f"no {section} in {elf}")


@pytest.mark.parametrize("board", sorted(BOARDS))
def test_vector_table_at_board_address(elves, board, tmp_path):
    elf = elves[board]
    b = get_board(board)
    assert _section_addr(elf, ".vectors") == b.vector_table
    raw = tmp_path / "vectors.bin"
    subprocess.run(["arm-none-eabi-objcopy", "-O", "binary", "-j", ".vectors", str(elf), str(raw)], check=True)
    words = np.frombuffer(raw.read_bytes(), dtype="<u4")
    syms = {p[2]: int(p[0], 16) for p in (line.split() for line in _tool("arm-none-eabi-nm", str(elf)).splitlines())}
    assert words[0] == syms["__stack_top__"]
    # The reset vector is Reset_Handler with the Thumb bit set.
    assert words[1] == syms["Reset_Handler"] | 1
    assert words[15] == syms["SysTick_Handler"] | 1


@pytest.mark.parametrize("board", sorted(BOARDS))
def test_float_abi_and_cpu(elves, board):
    attrs = _tool("arm-none-eabi-readelf", "-A", str(elves[board]))
    assert ("Tag_ABI_VFP_args: VFP registers" in attrs) == (board in HARD_FLOAT)
    cpu = {"cortex-m0plus": "v6S-M", "cortex-m3": "v7", "cortex-m4": "v7E-M", "cortex-m7": "v7E-M"}
    assert f"Tag_CPU_arch: {cpu.get(get_board(board).core, 'v8-M.mainline')}" in attrs


@pytest.mark.parametrize("board", sorted(BOARDS))
def test_size_report(elves, board):
    rep = size_report(elves[board], board)
    s = rep["sections"]
    stored = s[".vectors"] + s[".text"] + s[".rodata"] + s.get(".data", 0) + s.get(".ARM.exidx", 0)
    stored += s.get(".boot2", 0)  # the RP2040's second-stage boot, in front of the vectors
    assert rep["flash_bytes"] == stored + s.get(".init_array", 0)
    writable = s.get(".data", 0) + s[".bss"] + s[".stack"]
    if get_board(board).runs_from_ram:
        assert rep["ram_bytes"] == rep["flash_bytes"] + s[".bss"] + s[".stack"]
    else:
        assert rep["ram_bytes"] == writable
    # Arena (64 B), input (16 B) and output (4 B) buffers are static.
    assert s[".bss"] >= 64 + 16 + 4
    assert rep["stack_bytes"] == s[".stack"] > 0
    # Dead code is collected: the runner and the stand-in are small.
    assert 600 < s[".text"] < 8000


def test_size_grows_with_the_arena(tmp_path):
    model = tmp_path / "big"
    model.mkdir()
    (model / "model.c").write_text((FIXTURES / "standin" / "model.c").read_text())
    (model / "model.h").write_text(
        (FIXTURES / "standin" / "model.h").read_text().replace("RLX_ARENA_SIZE 64", "RLX_ARENA_SIZE 100000")
    )
    small = size_report(build_firmware(FIXTURES / "standin", "qemu-m4", tmp_path / "a"))
    big = size_report(build_firmware(model, "qemu-m4", tmp_path / "b"))
    assert big["ram_bytes"] - small["ram_bytes"] == 100000 - 64
    # Only the constant holding the arena size may change in the code.
    assert abs(big["flash_bytes"] - small["flash_bytes"]) <= 8


def test_arena_that_does_not_fit_fails_to_link(tmp_path):
    model = tmp_path / "huge"
    model.mkdir()
    (model / "model.c").write_text((FIXTURES / "standin" / "model.c").read_text())
    (model / "model.h").write_text(
        (FIXTURES / "standin" / "model.h").read_text().replace("RLX_ARENA_SIZE 64", "RLX_ARENA_SIZE 700000")
    )
    # 640 KB of RAM on the STM32L4R5.
    with pytest.raises(ToolchainError, match="overflow"):
        build_firmware(model, "nucleo-l4r5zi", tmp_path / "out")


def test_outputs_next_to_the_elf(elves):
    elf = elves["nucleo-l4r5zi"]
    assert elf.with_suffix(".map").is_file()
    hex_text = elf.with_suffix(".hex").read_text()
    # Intel HEX extended linear address record for 0x0800xxxx: the image is in flash.
    assert ":020000040800F2" in hex_text


def test_rp2040_image_is_in_flash_with_boot2_first(elves):
    elf = elves["rpi-pico"]
    assert _section_addr(elf, ".boot2") == 0x10000000
    assert all(0x10000100 <= _section_addr(elf, s) < 0x10200000 for s in (".vectors", ".text", ".rodata"))
    assert all(0x20000000 <= _section_addr(elf, s) < 0x20042000 for s in (".bss", ".stack"))


def test_missing_compiler_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ToolchainError, match="apt-get install gcc-arm-none-eabi"):
        build_firmware(FIXTURES / "standin", "qemu-m3", tmp_path / "out")


def test_compile_error_is_reported(tmp_path):
    (tmp_path / "model.h").write_text("#define RLX_ARENA_SIZE 4\n")
    (tmp_path / "model.c").write_text('#include "model.h"\n')
    with pytest.raises(ToolchainError, match="defines no input size"):
        build_firmware(tmp_path, "qemu-m3", tmp_path / "out")


def test_warnings_are_errors(tmp_path):
    (tmp_path / "model.h").write_text((FIXTURES / "standin" / "model.h").read_text())
    (tmp_path / "model.c").write_text(
        '#include "model.h"\nint rlx_model_invoke(const int8_t *i, int8_t *o, uint8_t *a)\n'
        "{ int unused; (void)i; (void)o; (void)a; return 0; }\n"
    )
    with pytest.raises(ToolchainError, match="unused"):
        build_firmware(tmp_path, "qemu-m3", tmp_path / "out")


def test_bad_arguments():
    with pytest.raises(RlxError, match="unknown board"):
        get_board("arduino-uno")
    with pytest.raises(RlxError, match="optimization level"):
        build_firmware(FIXTURES / "standin", "qemu-m3", "/nonexistent", opt="-O9")
    with pytest.raises(RlxError, match="go together"):
        build_firmware(FIXTURES / "standin", "qemu-m3", "/nonexistent", test_input=np.zeros(16, np.int8))
    with pytest.raises(RlxError, match="not a directory"):
        build_firmware(FIXTURES / "does-not-exist", "qemu-m3", "/nonexistent")


def test_test_vector_sizes_are_checked(tmp_path):
    with pytest.raises(ToolchainError, match="test input size"):
        build_firmware(
            FIXTURES / "standin",
            "qemu-m3",
            tmp_path,
            test_input=np.zeros(15, np.int8),
            expected_output=np.zeros(4, np.int8),
        )


def _sections(elf: Path) -> dict[str, tuple[int, int]]:
    """Allocated sections: name -> (address, size)."""
    out = {}
    for line in _tool("arm-none-eabi-readelf", "-S", "-W", str(elf)).splitlines():
        parts = line.replace("[ ", "[").split()
        if len(parts) > 7 and parts[0].startswith("[") and "A" in parts[7]:
            out[parts[1]] = (int(parts[3], 16), int(parts[5], 16))
    return out


@pytest.mark.parametrize("board", sorted(BOARDS))
def test_sections_lie_in_the_board_tables_regions(elves, board):
    b = get_board(board)
    for name, (addr, size) in _sections(elves[board]).items():
        if name == ".boot2":
            continue  # the RP2040's boot2, in front of the table's FLASH region (boards/rpi-pico/board.ld)
        region = b.ram if name in (".data", ".bss", ".stack") else b.flash
        assert region.origin <= addr and addr + size <= region.end, (name, hex(addr), size)


def test_memory_map_comes_from_the_board_table(tmp_path):
    """A smaller RAM region in the table is what the linker checks the arena against."""
    model = tmp_path / "model"
    model.mkdir()
    (model / "model.c").write_text((FIXTURES / "standin" / "model.c").read_text())
    (model / "model.h").write_text(
        (FIXTURES / "standin" / "model.h").read_text().replace("RLX_ARENA_SIZE 64", "RLX_ARENA_SIZE 40000")
    )
    an386 = get_board("qemu-mps2-an386")
    build_firmware(model, an386, tmp_path / "fits")
    small = dataclasses.replace(an386, ram=Region(an386.ram.origin, 64 * 1024))
    with pytest.raises(ToolchainError, match="overflow"):
        build_firmware(model, small, tmp_path / "too-small")
    script = (tmp_path / "too-small" / "firmware.gen" / "memory.ld").read_text()
    assert "RAM   (rwx) : ORIGIN = 0x20000000, LENGTH = 0x10000" in script
    assert "__stack_size__ = 0x8000;" in script


def test_every_board_has_its_sources():
    fw = firmware_dir()
    for name in ("startup.c", "main.c", "sections.ld", "ticks.c", "console.c", "rlx_board.h"):
        assert (fw / "runtime" / name).is_file()
    assert (fw / "qemu_plugin" / "rlx_icount.c").is_file()
    for b in BOARDS.values():
        assert (fw / "boards" / b.name / "README.md").is_file(), b.name
        for source in (*b.sources, b.boot2, b.linker_extra):
            assert source is None or (fw / source).is_file(), (b.name, source)
