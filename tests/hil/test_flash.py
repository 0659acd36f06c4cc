"""Flashers for real boards (pyOCD, OpenOCD): command lines, dry runs, missing tools and probes.

Neither tool is installed here: real flashing is exercised with stand-in
executables on PATH that behave as the tools do without a probe.
"""

from __future__ import annotations

import dataclasses
import os
import stat
from pathlib import Path

import pytest

from rlx_edge.boards import get_board
from rlx_edge.errors import ToolchainError
from rlx_edge.hil.flash import FlashError, NoProbeError, flash, flash_command
from rlx_edge.targets.cortexm import build_firmware
from rlx_edge.targets.cortexm.firmware import symbols

FIXTURES = Path(__file__).resolve().parents[1] / "firmware" / "fixtures"


@pytest.fixture(scope="module")
def elves(tmp_path_factory):
    root = tmp_path_factory.mktemp("flash")
    return {b: build_firmware(FIXTURES / "standin", b, root / b) for b in ("nucleo-l4r5zi", "rpi-pico")}


def test_pyocd_command(elves):
    elf = elves["nucleo-l4r5zi"]
    assert flash_command(elf, "nucleo-l4r5zi") == ["pyocd", "flash", "-t", "stm32l4r5zitx", str(elf)]
    assert flash_command(elf, "nucleo-l4r5zi", probe="0669FF") == [
        "pyocd", "flash", "-t", "stm32l4r5zitx", "-u", "0669FF", str(elf)
    ]  # fmt: skip


def test_openocd_command(elves):
    elf = elves["nucleo-l4r5zi"]
    r = flash(elf, "nucleo-l4r5zi", tool="openocd", dry_run=True)
    assert r.dry_run
    assert r.argv == [
        "openocd", "-f", "interface/stlink.cfg", "-f", "target/stm32l4x.cfg", "-c", f"program {elf} verify reset exit"
    ]  # fmt: skip
    assert r.command.endswith(f'"program {elf} verify reset exit"')


def test_pico_flash_image_is_programmed(elves):
    elf = elves["rpi-pico"]
    assert flash_command(elf, "rpi-pico") == [
        "openocd", "-f", "interface/cmsis-dap.cfg", "-f", "target/rp2040.cfg", "-c", f"program {elf} verify reset exit"
    ]  # fmt: skip


def test_ram_image_is_loaded_and_started_at_its_entry(elves):
    # A board may run from RAM (loaded over SWD, never flashed); a definition file says so with ram_image.
    elf = elves["rpi-pico"]
    board = dataclasses.replace(get_board("rpi-pico"), runs_from_ram=True)
    argv = flash(elf, board, dry_run=True).argv
    assert argv[:5] == ["openocd", "-f", "interface/cmsis-dap.cfg", "-f", "target/rp2040.cfg"]
    cmds = argv[6::2]
    assert cmds[:3] == ["init", "reset halt", f"load_image {elf}"]
    # The entry point is Reset_Handler's address, Thumb bit cleared.
    entry = symbols(elf)["Reset_Handler"][0]
    assert entry % 2 == 0
    assert cmds[3] == f"resume {entry:#x}"
    assert cmds[4] == "exit"


def test_qemu_boards_have_nothing_to_flash(elves):
    with pytest.raises(FlashError, match="QEMU machine"):
        flash_command(elves["nucleo-l4r5zi"], "qemu-mps2-an386")


def _fake_tool(bin_dir: Path, name: str, output: str, status: int) -> None:
    bin_dir.mkdir(exist_ok=True)
    exe = bin_dir / name
    exe.write_text(f"#!/bin/sh\necho '{output}' >&2\necho \"$@\" > '{bin_dir}/{name}.args'\nexit {status}\n")
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)


def test_missing_tool_is_a_clear_error(elves, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ToolchainError, match=r"pyocd not found on PATH; install with: pip install pyocd"):
        flash(elves["nucleo-l4r5zi"], "nucleo-l4r5zi")
    with pytest.raises(ToolchainError, match=r"openocd not found on PATH; install with: apt-get install openocd"):
        flash(elves["rpi-pico"], "rpi-pico")


@pytest.mark.parametrize(
    "tool,message",
    [
        ("pyocd", "0000621 C No connected debug probes [__main__]"),
        ("pyocd", "No available debug probes are connected"),
        ("openocd", "Error: open failed"),
        ("openocd", "Error: unable to find a matching CMSIS-DAP device"),
    ],
)
def test_no_probe_is_a_clear_error(elves, tmp_path, monkeypatch, tool, message):
    _fake_tool(tmp_path / "bin", tool, message, 1)
    monkeypatch.setenv("PATH", str(tmp_path / "bin") + os.pathsep + os.environ["PATH"])
    with pytest.raises(NoProbeError, match="found no debug probe for nucleo-l4r5zi: is the board connected"):
        flash(elves["nucleo-l4r5zi"], "nucleo-l4r5zi", tool=tool)


def test_tool_failure_and_success(elves, tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    monkeypatch.setenv("PATH", str(bin_dir) + os.pathsep + os.environ["PATH"])
    _fake_tool(bin_dir, "pyocd", "Error: flash algorithm failed at 0x08000000", 1)
    with pytest.raises(FlashError, match=r"pyocd failed \(exit 1\) flashing nucleo-l4r5zi:\n.*flash algorithm") as e:
        flash(elves["nucleo-l4r5zi"], "nucleo-l4r5zi")
    assert not isinstance(e.value, NoProbeError)
    _fake_tool(bin_dir, "pyocd", "Programmed 12345 bytes", 0)
    r = flash(elves["nucleo-l4r5zi"], "nucleo-l4r5zi", probe="X1")
    assert "Programmed" in r.output
    assert (bin_dir / "pyocd.args").read_text().split() == [
        "flash",
        "-t",
        "stm32l4r5zitx",
        "-u",
        "X1",
        str(elves["nucleo-l4r5zi"]),
    ]


def test_missing_firmware(tmp_path):
    with pytest.raises(FlashError, match="firmware not found"):
        flash(tmp_path / "nope.elf", "nucleo-l4r5zi", dry_run=True)
