"""HIL board definitions: core, clock, UART, flasher, for QEMU machines and real boards.

The built-in definitions below are what ``rlx-edge hil --board NAME`` uses. A
board definition file (TOML, the format of ``hil/boards/*.toml`` in the
repository) describes the same fields, so a lab can point the campaign suite
at its own probe and serial port without touching the package::

    name = "nucleo-l4r5zi"
    core = "cortex-m4"
    clock_hz = 4000000
    [uart]
    port = "/dev/ttyACM0"
    baudrate = 115200
    [flash]
    tool = "pyocd"
    pyocd_target = "stm32l4r5zitx"
    openocd_config = ["interface/stlink.cfg", "target/stm32l4x.cfg"]
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path

from rlx_edge.errors import RlxError
from rlx_edge.targets.cortexm_fw.boards import get_board

FLASH_TOOLS = ("qemu", "pyocd", "openocd")


@dataclass(frozen=True)
class HilBoard:
    name: str
    """The firmware board (a key of rlx_edge.targets.cortexm_fw.BOARDS)."""
    core: str
    clock_hz: int | None
    """Core clock the tick counter runs at; None when unknown."""
    port: str | None = None
    """Default serial URL of the board's console (None: QEMU boards, or given with --port)."""
    baudrate: int = 115200
    flash_tool: str = "qemu"
    pyocd_target: str | None = None
    openocd_config: tuple[str, ...] = field(default_factory=tuple)
    ram_image: bool = False
    """The image is loaded into RAM over SWD and started there (no flash programming)."""

    @property
    def is_qemu(self) -> bool:
        return self.flash_tool == "qemu"

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "core": self.core,
            "clock_hz": self.clock_hz,
            "port": self.port,
            "baudrate": self.baudrate,
            "flash_tool": self.flash_tool,
        }


# Clocks: BOARD_CORE_HZ of each board's board.h / board.c. Under QEMU the
# SysTick counts virtual time at that rate (host time unless -icount).
BUILTIN: dict[str, HilBoard] = {
    b.name: b
    for b in (
        HilBoard("qemu-mps2-an385", "cortex-m3", 25_000_000),
        HilBoard("qemu-mps2-an386", "cortex-m4", 25_000_000),
        HilBoard("qemu-mps2-an500", "cortex-m7", 25_000_000),
        HilBoard("qemu-mps2-an505", "cortex-m33", 20_000_000),
        HilBoard(
            "nucleo-l4r5zi",
            "cortex-m4",
            4_000_000,
            port="/dev/ttyACM0",
            flash_tool="pyocd",
            pyocd_target="stm32l4r5zitx",
            openocd_config=("interface/stlink.cfg", "target/stm32l4x.cfg"),
        ),
        HilBoard(
            "rpi-pico",
            "cortex-m0plus",
            12_000_000,
            port="/dev/ttyACM0",
            flash_tool="openocd",
            pyocd_target="rp2040",
            openocd_config=("interface/cmsis-dap.cfg", "target/rp2040.cfg"),
        ),
    )
}


def load_board_file(path: str | os.PathLike) -> HilBoard:
    """A board definition from a TOML file (see the module docstring)."""
    p = Path(path)
    try:
        data = tomllib.loads(p.read_text())
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise RlxError(f"board definition {p}: {e}") from e
    try:
        uart = data.get("uart", {})
        flash = data.get("flash", {})
        board = HilBoard(
            name=str(data["name"]),
            core=str(data["core"]),
            clock_hz=int(data["clock_hz"]) if data.get("clock_hz") else None,
            port=str(uart["port"]) if uart.get("port") else None,
            baudrate=int(uart.get("baudrate", 115200)),
            flash_tool=str(flash.get("tool", "qemu")),
            pyocd_target=flash.get("pyocd_target") or None,
            openocd_config=tuple(flash.get("openocd_config", ())),
            ram_image=bool(flash.get("ram_image", False)),
        )
    except (KeyError, TypeError, ValueError) as e:
        raise RlxError(f"board definition {p}: missing or bad field {e}") from e
    return _check(board, str(p))


def _check(board: HilBoard, where: str) -> HilBoard:
    fw = get_board(board.name)  # an unknown firmware board is an RlxError naming the known ones
    if board.flash_tool not in FLASH_TOOLS:
        raise RlxError(f"{where}: flash tool {board.flash_tool!r}; use one of {', '.join(FLASH_TOOLS)}")
    if board.is_qemu != fw.is_qemu:
        raise RlxError(f"{where}: {board.name} is {'a QEMU machine' if fw.is_qemu else 'a real board'}")
    return board


def get_hil_board(board: str | os.PathLike | HilBoard, *, port: str | None = None) -> HilBoard:
    """A board by name (or ``qemu-m*`` alias), by definition file (``*.toml``), or as given.

    ``port`` overrides the definition's UART."""
    if isinstance(board, HilBoard):
        b = board
    elif str(board).endswith(".toml"):
        b = load_board_file(board)
    else:
        name = get_board(str(board)).name
        b = BUILTIN.get(name)
        if b is None:
            fw = get_board(name)
            b = HilBoard(name, fw.core, None, flash_tool="qemu" if fw.is_qemu else "openocd")
    return replace(b, port=port) if port else b
