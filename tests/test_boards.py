"""The board table: lookups by name, alias and definition file; what a definition file may change."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from rlx_edge import boards
from rlx_edge.boards import ALIASES, BOARDS, DEFAULT_BOARD, QEMU_TARGETS, get_board, load_board_file
from rlx_edge.errors import RlxError

ROOT = Path(__file__).resolve().parents[1]
HIL_BOARDS = ROOT / "hil" / "boards"


def test_lookup_by_name_alias_and_board():
    an386 = BOARDS["qemu-mps2-an386"]
    assert get_board("qemu-mps2-an386") is an386
    assert get_board("qemu-m4") is an386
    assert get_board(an386) is an386
    with pytest.raises(RlxError, match=r"unknown board 'arduino-uno'; known boards: qemu-mps2-an385, .*rpi-pico"):
        get_board("arduino-uno")


def test_aliases_are_the_qemu_run_targets():
    assert set(ALIASES).isdisjoint(BOARDS)
    assert QEMU_TARGETS == ("qemu-m3", "qemu-m4", "qemu-m7", "qemu-m33")
    assert all(get_board(t).is_qemu for t in QEMU_TARGETS)
    assert {get_board(t).core for t in QEMU_TARGETS} == {"cortex-m3", "cortex-m4", "cortex-m7", "cortex-m33"}


def test_default_board_of_each_core_is_its_first_in_the_table():
    assert DEFAULT_BOARD == {
        "cortex-m3": "qemu-mps2-an385",
        "cortex-m4": "qemu-mps2-an386",
        "cortex-m7": "qemu-mps2-an500",
        "cortex-m33": "qemu-mps2-an505",
        "cortex-m0plus": "rpi-pico",
    }


def test_every_board_is_consistent():
    for b in BOARDS.values():
        assert b.core in " ".join(b.cpu_flags), b.name
        assert b.flash.size > 0 and b.ram.size > b.stack_bytes > 0, b.name
        assert b.flash.end <= b.ram.origin or b.ram.end <= b.flash.origin, f"{b.name}: regions overlap"
        assert b.is_qemu == (b.flasher is None) == (b.console.port is None), b.name
        assert b.vector_table in b.flash
        assert b.clock_hz > 0 and b.console.baudrate > 0


def test_with_port():
    b = get_board("nucleo-l4r5zi")
    assert b.with_port("/dev/ttyUSB3").console.port == "/dev/ttyUSB3"
    assert b.with_port(None) is b


def test_board_files_name_boards_of_the_table():
    files = sorted(HIL_BOARDS.glob("*.toml"))
    assert files
    for p in files:
        b = load_board_file(p)
        table = BOARDS[b.name]
        # A definition file changes how a lab reaches and programs the board, never what is built.
        assert (b.core, b.cpu_flags, b.clock_hz, b.flash, b.ram, b.stack_bytes) == (
            table.core,
            table.cpu_flags,
            table.clock_hz,
            table.flash,
            table.ram,
            table.stack_bytes,
        ), p.name
        assert get_board(p) == b == get_board(str(p))


def test_board_file_overrides(tmp_path):
    p = tmp_path / "lab.toml"
    p.write_text(
        'name = "rpi-pico"\ncore = "cortex-m0plus"\nclock_hz = 12000000\n'
        '[uart]\nport = "socket://lab:4000"\nbaudrate = 57600\n'
        '[flash]\ntool = "pyocd"\nram_image = true\n'
    )
    b = load_board_file(p)
    pico = BOARDS["rpi-pico"]
    assert b.console.port == "socket://lab:4000" and b.console.baudrate == 57600
    assert b.flash_tool == "pyocd" and b.flasher.pyocd_target == pico.flasher.pyocd_target
    assert b.runs_from_ram and b.vector_table == pico.ram.origin
    p.write_text('name = "qemu-m3"\n')
    assert load_board_file(p) == BOARDS["qemu-mps2-an385"]


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ('name = "qemu-mps2-an386"\n[flash]\ntool = "jlink"\n', "flash tool 'jlink'; use one of qemu, pyocd, openocd"),
        ('core = "cortex-m4"\n', "no name"),
        ('name = "uno"\n', "unknown board 'uno'"),
        ('name = "qemu-mps2-an386"\ncore = "cortex-m7"\n', "core 'cortex-m7'; qemu-mps2-an386 has 'cortex-m4'"),
        ('name = "nucleo-l4r5zi"\nclock_hz = 80000000\n', "clock_hz 80000000; nucleo-l4r5zi has 4000000"),
        ('name = "nucleo-l4r5zi"\n[flash]\ntool = "qemu"\n', "nucleo-l4r5zi is a real board"),
        ('name = "qemu-mps2-an386"\n[flash]\ntool = "pyocd"\n', "qemu-mps2-an386 is a QEMU machine"),
        ('name = "qemu-mps2-an386"\n[uart]\nbaudrate = "fast"\n', "bad field"),
        ("name = ", "board definition"),
    ],
)
def test_board_definition_errors(tmp_path, text, error):
    p = tmp_path / "b.toml"
    p.write_text(text)
    with pytest.raises(RlxError, match=error):
        load_board_file(p)


def test_the_table_imports_nothing_above_it():
    tree = ast.parse(Path(boards.__file__).read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert {m for m in imported if m and m.startswith("rlx_edge")} == {"rlx_edge.errors"}


def test_board_flags_include_the_cores_library_flags():
    """The generated library's Makefile (CORES) and the firmware (the table) compile a core alike."""
    from rlx_edge.targets.cortexm import CORES

    for b in BOARDS.values():
        assert set(CORES[b.core].split()) <= set(b.cpu_flags), b.name
