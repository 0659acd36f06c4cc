"""The boards rlx-edge builds firmware for, runs under QEMU and flashes: one table.

Each :class:`Board` holds what the firmware build, the QEMU runner, the
flashers, the HIL campaigns and the command line need: core and compiler
flags, core clock, memory map, console UART, QEMU machine, flasher. The
firmware build passes the clock and baud rate to the C runtime
(``-DBOARD_CORE_HZ``, ``-DBOARD_BAUD``) and writes the linker script's
``MEMORY`` from :attr:`Board.flash` and :attr:`Board.ram`, so nothing here is
repeated in ``firmware/``.

A board definition file (TOML) names a board of the table and overrides what
a lab changes: the console's serial port and baud rate and the flasher::

    name = "nucleo-l4r5zi"
    [uart]
    port = "/dev/ttyUSB0"
    [flash]
    tool = "openocd"
    openocd_config = ["interface/stlink.cfg", "target/stm32l4x.cfg"]

This module imports nothing from the rest of rlx_edge but its errors.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, replace
from pathlib import Path

from rlx_edge.errors import RlxError

FLASH_TOOLS = ("qemu", "pyocd", "openocd")


@dataclass(frozen=True)
class Region:
    """One memory region: where it starts and how many bytes it has."""

    origin: int
    size: int

    @property
    def end(self) -> int:
        return self.origin + self.size

    def __contains__(self, address: int) -> bool:
        return self.origin <= address < self.end


@dataclass(frozen=True)
class Console:
    """The UART the firmware's console and HIL protocol use."""

    uart: str
    """Which UART and pins, for people wiring a board."""
    baudrate: int = 115200
    port: str | None = None
    """Default serial URL on the host; None for QEMU (a loopback TCP port chosen at run time)."""


@dataclass(frozen=True)
class Flasher:
    """How a real board is programmed (:mod:`rlx_edge.hil.flash`)."""

    tool: str
    """``pyocd`` or ``openocd``: the default; the other may be chosen when its settings are given."""
    pyocd_target: str | None = None
    openocd_config: tuple[str, ...] = ()


@dataclass(frozen=True)
class Board:
    name: str
    core: str
    cpu_flags: tuple[str, ...]
    clock_hz: int
    """Core clock; the SysTick tick counter runs at it (under QEMU: virtual time at this rate)."""
    flash: Region
    """Where code, constants and the vector table go (REGION_TEXT of ``runtime/sections.ld``)."""
    ram: Region
    """Data, arena, stack (REGION_DATA)."""
    stack_bytes: int
    console: Console
    sources: tuple[str, ...]
    """Board-specific C files, relative to the firmware directory."""
    qemu_machine: str | None = None
    flasher: Flasher | None = None
    aliases: tuple[str, ...] = ()
    """Other names: the ``qemu-m*`` run targets of the emulated boards."""
    tested: str = "QEMU 7.2"
    """Where the firmware was run; "untested" for boards only built here."""
    runs_from_ram: bool = False
    """The image is linked into RAM and loaded there over SWD (no flash programming); its code counts as RAM."""
    boot2: str | None = None
    """RP2040 second-stage boot source (relative to the firmware directory): the build assembles it,
    pads it to 252 bytes and appends the CRC-32 the boot ROM checks, in section .boot2."""
    linker_extra: str | None = None
    """A board's own linker script (regions and sections besides FLASH and RAM), relative to the firmware
    directory; INCLUDEd before ``runtime/sections.ld``."""

    @property
    def is_qemu(self) -> bool:
        return self.qemu_machine is not None

    @property
    def vector_table(self) -> int:
        """Address of the vector table: the start of the code region."""
        return self.ram.origin if self.runs_from_ram else self.flash.origin

    @property
    def flash_tool(self) -> str:
        return "qemu" if self.flasher is None else self.flasher.tool

    def with_port(self, port: str | None) -> Board:
        """The same board reached on another serial URL (None keeps the board's)."""
        return replace(self, console=replace(self.console, port=port)) if port else self

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "core": self.core,
            "clock_hz": self.clock_hz,
            "port": self.console.port,
            "baudrate": self.console.baudrate,
            "flash_tool": self.flash_tool,
        }


_MB = 1024 * 1024
_KB = 1024
_QEMU_RUNTIME = ("runtime/board_mps2.c", "runtime/cmsdk_uart.c", "runtime/semihost.c")
_CMSDK_UART0 = Console("CMSDK APB UART0 (runtime/cmsdk_uart.c)")


def _mps2(name: str, core: str, cpu_flags: tuple[str, ...], alias: str, clock_hz: int = 25_000_000) -> Board:
    # QEMU's mps2 machines (hw/arm/mps2.c): the 4 MB ZBT SSRAM1 at 0 holds the
    # image (QEMU loads it there and boots from the vector table at 0), the
    # 4 MB SSRAM2/3 at 0x20000000 is data. Both are RAM in QEMU; the split
    # mirrors a flash/RAM part so sizes read like a real board's.
    return Board(
        name,
        core,
        cpu_flags,
        clock_hz,
        flash=Region(0x0000_0000, 4 * _MB),
        ram=Region(0x2000_0000, 4 * _MB),
        stack_bytes=32 * _KB,
        console=_CMSDK_UART0,
        sources=_QEMU_RUNTIME,
        qemu_machine=name.removeprefix("qemu-"),
        aliases=(alias,),
    )


# In table order: the first board of a core is the one `compile --target CORE` links for.
BOARDS: dict[str, Board] = {
    b.name: b
    for b in (
        _mps2("qemu-mps2-an385", "cortex-m3", ("-mcpu=cortex-m3", "-mthumb", "-mfloat-abi=soft"), "qemu-m3"),
        _mps2(
            "qemu-mps2-an386",
            "cortex-m4",
            ("-mcpu=cortex-m4", "-mthumb", "-mfpu=fpv4-sp-d16", "-mfloat-abi=hard"),
            "qemu-m4",
        ),
        # QEMU's Cortex-M7 has the double-precision FPU (MVFR0 = 0x10110221).
        _mps2(
            "qemu-mps2-an500",
            "cortex-m7",
            ("-mcpu=cortex-m7", "-mthumb", "-mfpu=fpv5-d16", "-mfloat-abi=hard"),
            "qemu-m7",
        ),
        # QEMU's Cortex-M33 (hw/arm/mps2-tz.c) has a single-precision FPU and the
        # DSP extension. It boots secure with its vector table at 0x10000000
        # (INITSVTOR0), the secure alias of the 4 MB SSRAM1; SSRAM2 and SSRAM3
        # (2 MB each, contiguous) have their secure alias at 0x38000000. The
        # memory protection controllers reset to "all secure", so secure code
        # uses all of it without configuring anything; UART0 is at 0x50200000.
        replace(
            _mps2(
                "qemu-mps2-an505",
                "cortex-m33",
                ("-mcpu=cortex-m33", "-mthumb", "-mfpu=fpv5-sp-d16", "-mfloat-abi=hard"),
                "qemu-m33",
                clock_hz=20_000_000,
            ),
            flash=Region(0x1000_0000, 4 * _MB),
            ram=Region(0x3800_0000, 4 * _MB),
        ),
        # STM32L4R5ZI: 2 MB flash, 640 KB SRAM (SRAM1, SRAM2, SRAM3 contiguous),
        # left at the 4 MHz MSI clock it resets to.
        Board(
            "nucleo-l4r5zi",
            "cortex-m4",
            ("-mcpu=cortex-m4", "-mthumb", "-mfpu=fpv4-sp-d16", "-mfloat-abi=hard"),
            4_000_000,
            flash=Region(0x0800_0000, 2 * _MB),
            ram=Region(0x2000_0000, 640 * _KB),
            stack_bytes=16 * _KB,
            console=Console("LPUART1 (PG7 TX, PG8 RX) through the ST-LINK virtual COM port", port="/dev/ttyACM0"),
            sources=("boards/nucleo-l4r5zi/board.c",),
            flasher=Flasher(
                "pyocd", pyocd_target="stm32l4r5zitx", openocd_config=("interface/stlink.cfg", "target/stm32l4x.cfg")
            ),
            tested="untested",
        ),
        # RP2040 at 12 MHz from the crystal: 2 MB QSPI flash read through XIP at
        # 0x10000000, whose first 256 bytes are boot2 (board.ld); the vector
        # table follows at 0x10000100, where boot2 jumps. 264 KB SRAM.
        Board(
            "rpi-pico",
            "cortex-m0plus",
            ("-mcpu=cortex-m0plus", "-mthumb", "-mfloat-abi=soft"),
            12_000_000,
            flash=Region(0x1000_0100, 2 * _MB - 256),
            ram=Region(0x2000_0000, 264 * _KB),
            stack_bytes=8 * _KB,
            console=Console("UART0 (GP0 TX, GP1 RX) through a USB-serial adapter", port="/dev/ttyACM0"),
            sources=("boards/rpi-pico/board.c",),
            flasher=Flasher(
                "openocd", pyocd_target="rp2040", openocd_config=("interface/cmsis-dap.cfg", "target/rp2040.cfg")
            ),
            tested="untested",
            boot2="boards/rpi-pico/boot2.S",
            linker_extra="boards/rpi-pico/board.ld",
        ),
    )
}

ALIASES: dict[str, str] = {alias: b.name for b in BOARDS.values() for alias in b.aliases}
"""Other names of boards: ``qemu-m4`` -> ``qemu-mps2-an386``."""

QEMU_TARGETS: tuple[str, ...] = tuple(alias for b in BOARDS.values() if b.is_qemu for alias in b.aliases)
"""The ``--target`` names that run firmware under QEMU."""

DEFAULT_BOARD: dict[str, str] = {}
"""Core -> the board ``compile --target CORE`` links for: the first of that core in the table."""
for _b in BOARDS.values():
    DEFAULT_BOARD.setdefault(_b.core, _b.name)


def get_board(board: str | os.PathLike | Board) -> Board:
    """A board by name, by alias (``qemu-m4``) or by definition file (``*.toml``); a Board as given."""
    if isinstance(board, Board):
        return board
    if isinstance(board, os.PathLike) or str(board).endswith(".toml"):
        return load_board_file(board)
    found = BOARDS.get(ALIASES.get(board, board))
    if found is None:
        raise RlxError(f"unknown board {board!r}; known boards: {', '.join([*BOARDS, *ALIASES])}")
    return found


def load_board_file(path: str | os.PathLike) -> Board:
    """A board of the table with a lab's console and flasher, from a TOML file (see the module docstring).

    ``core`` and ``clock_hz`` may be given; they must be the table's, since
    the firmware is built for them.
    """
    p = Path(path)
    try:
        data = tomllib.loads(p.read_text())
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise RlxError(f"board definition {p}: {e}") from e
    if "name" not in data:
        raise RlxError(f"board definition {p}: no name (one of {', '.join(BOARDS)})")
    base = get_board(str(data["name"]))
    for key in ("core", "clock_hz"):
        if key in data and data[key] != getattr(base, key):
            raise RlxError(f"board definition {p}: {key} {data[key]!r}; {base.name} has {getattr(base, key)!r}")
    try:
        uart, flash = data.get("uart", {}), data.get("flash", {})
        console = replace(
            base.console,
            port=str(uart["port"]) if uart.get("port") else base.console.port,
            baudrate=int(uart.get("baudrate", base.console.baudrate)),
        )
        tool = str(flash.get("tool", base.flash_tool))
        flasher = base.flasher
        if flasher is not None:
            flasher = Flasher(
                tool,
                pyocd_target=flash.get("pyocd_target") or flasher.pyocd_target,
                openocd_config=tuple(flash.get("openocd_config", flasher.openocd_config)),
            )
        runs_from_ram = bool(flash.get("ram_image", base.runs_from_ram))
    except (TypeError, ValueError) as e:
        raise RlxError(f"board definition {p}: bad field: {e}") from e
    if tool not in FLASH_TOOLS:
        raise RlxError(f"board definition {p}: flash tool {tool!r}; use one of {', '.join(FLASH_TOOLS)}")
    if (tool == "qemu") != base.is_qemu:
        kind = "a QEMU machine (flash tool qemu)" if base.is_qemu else "a real board (flash tool pyocd or openocd)"
        raise RlxError(f"board definition {p}: {base.name} is {kind}")
    return replace(base, console=console, flasher=flasher, runs_from_ram=runs_from_ram)
