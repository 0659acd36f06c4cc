"""Flashing firmware onto real boards through pyOCD or OpenOCD.

:func:`flash_command` builds the command line, :func:`flash` runs it (or,
with ``dry_run``, only returns it). Neither tool ships with rlx-edge: a
missing tool and a missing debug probe are clear errors saying what to do.

- pyOCD: ``pyocd flash -t TARGET [-u PROBE] firmware.elf``, which erases,
  programs, verifies and resets the target.
- OpenOCD: ``openocd -f IFACE.cfg -f TARGET.cfg -c "program firmware.elf
  verify reset exit"``; for a RAM image (a board that ``runs_from_ram``, e.g. a definition
  file with ``ram_image``) the ELF is loaded into SRAM with the core halted and started at
  its entry point.

Targets and configuration files come from the board table, :mod:`rlx_edge.boards`.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from rlx_edge.boards import Board, get_board
from rlx_edge.errors import ToolchainError
from rlx_edge.hil.transport import HilError

INSTALL = {
    "pyocd": "pip install pyocd",
    "openocd": "apt-get install openocd",
}

# What the tools print when nothing is plugged in (pyOCD 0.3x; OpenOCD 0.11-0.12
# with ST-LINK, CMSIS-DAP and J-Link adapters).
_NO_PROBE = re.compile(
    r"no (available |connected )?debug probes?|no probe|open failed|unable to find a matching cmsis-dap|"
    r"no j-link device found|libusb_error_(no_device|not_found|access)|unable to open .*device",
    re.IGNORECASE,
)


class FlashError(HilError):
    """Programming the board failed."""


class NoProbeError(FlashError):
    """The flashing tool found no debug probe: the board is not connected (or not powered)."""


@dataclass(frozen=True)
class FlashResult:
    argv: list[str]
    output: str
    dry_run: bool

    @property
    def command(self) -> str:
        return " ".join(_quote(a) for a in self.argv)


def _quote(a: str) -> str:
    return f'"{a}"' if (" " in a or not a) else a


def _entry_point(elf: Path) -> int:
    """The ELF's entry address (Thumb bit cleared), read from its header."""
    data = elf.read_bytes()[:64]
    if data[:4] != b"\x7fELF" or data[4] != 1:
        raise FlashError(f"{elf} is not a 32-bit ELF file")
    return int.from_bytes(data[24:28], "little") & ~1


def flash_command(
    elf: str | os.PathLike, board: str | os.PathLike | Board, *, tool: str | None = None, probe: str | None = None
) -> list[str]:
    """The command that programs ``elf`` onto ``board`` (and starts it)."""
    b = get_board(board)
    tool = tool or b.flash_tool
    path = Path(elf)
    if tool == "qemu" or b.flasher is None:
        raise FlashError(f"{b.name} is a QEMU machine: it boots the ELF directly, there is nothing to flash")
    if tool == "pyocd":
        if not b.flasher.pyocd_target:
            raise FlashError(f"board {b.name} names no pyOCD target")
        argv = ["pyocd", "flash", "-t", b.flasher.pyocd_target]
        if probe:
            argv += ["-u", probe]
        return [*argv, str(path)]
    if tool == "openocd":
        if not b.flasher.openocd_config:
            raise FlashError(f"board {b.name} names no OpenOCD configuration")
        argv = ["openocd"]
        for cfg in b.flasher.openocd_config:
            argv += ["-f", cfg]
        if probe:
            argv += ["-c", f"adapter serial {probe}"]
        if b.runs_from_ram:
            entry = _entry_point(path)
            return [
                *argv,
                "-c",
                "init",
                "-c",
                "reset halt",
                "-c",
                f"load_image {path}",
                "-c",
                f"resume {entry:#x}",
                "-c",
                "exit",
            ]
        return [*argv, "-c", f"program {path} verify reset exit"]
    raise FlashError(f"unknown flash tool {tool!r}; use pyocd or openocd")


def flash(
    elf: str | os.PathLike,
    board: str | os.PathLike | Board,
    *,
    tool: str | None = None,
    probe: str | None = None,
    dry_run: bool = False,
    timeout: float = 180.0,
) -> FlashResult:
    """Programs ``elf`` onto ``board``; with ``dry_run`` returns the command without running it."""
    path = Path(elf)
    if not path.is_file():
        raise FlashError(f"firmware not found: {path}")
    argv = flash_command(path, board, tool=tool, probe=probe)
    if dry_run:
        return FlashResult(argv, "", True)
    exe = shutil.which(argv[0])
    if exe is None:
        raise ToolchainError(f"{argv[0]} not found on PATH; install with: {INSTALL[argv[0]]}")
    try:
        proc = subprocess.run([exe, *argv[1:]], capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as e:
        raise FlashError(f"{argv[0]} did not finish within {timeout:g} s: {' '.join(argv)}") from e
    output = (proc.stdout or "") + (proc.stderr or "")
    if proc.returncode != 0:
        name = get_board(board).name
        if _NO_PROBE.search(output):
            raise NoProbeError(
                f"{argv[0]} found no debug probe for {name}: is the board connected over USB and powered? "
                f"(command: {' '.join(argv)})"
            )
        tail = "\n".join(output.strip().splitlines()[-15:])
        raise FlashError(f"{argv[0]} failed (exit {proc.returncode}) flashing {name}:\n{tail}")
    return FlashResult(argv, output, False)
