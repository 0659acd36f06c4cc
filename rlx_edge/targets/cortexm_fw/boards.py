"""The boards the Cortex-M firmware builds for: compiler flags, QEMU machine, where it is in firmware/."""

from __future__ import annotations

from dataclasses import dataclass

from rlx_edge.errors import RlxError

_QEMU_RUNTIME = ("runtime/board_mps2.c", "runtime/cmsdk_uart.c", "runtime/semihost.c")


@dataclass(frozen=True)
class Board:
    """One board: how to compile for it and, for emulated boards, how QEMU runs it."""

    name: str
    core: str
    cpu_flags: tuple[str, ...]
    sources: tuple[str, ...]
    """Board-specific C files, relative to the firmware directory."""
    qemu_machine: str | None = None
    tested: str = "QEMU 7.2"
    """Where the firmware was run; "untested" for boards only built here."""
    vector_table: int = 0
    """Address of the vector table (the start of the code region)."""
    runs_from_ram: bool = False
    """The whole image is loaded into RAM (code included), so its code counts as RAM."""
    boot2: str | None = None
    """RP2040 second-stage boot source (relative to the firmware directory): the build assembles it,
    pads it to 252 bytes and appends the CRC-32 the boot ROM checks, in section .boot2."""

    @property
    def is_qemu(self) -> bool:
        return self.qemu_machine is not None


BOARDS: dict[str, Board] = {
    b.name: b
    for b in (
        Board(
            "qemu-mps2-an385",
            "cortex-m3",
            ("-mcpu=cortex-m3", "-mthumb", "-mfloat-abi=soft"),
            _QEMU_RUNTIME,
            qemu_machine="mps2-an385",
        ),
        Board(
            "qemu-mps2-an386",
            "cortex-m4",
            ("-mcpu=cortex-m4", "-mthumb", "-mfpu=fpv4-sp-d16", "-mfloat-abi=hard"),
            _QEMU_RUNTIME,
            qemu_machine="mps2-an386",
        ),
        # QEMU's Cortex-M7 has the double-precision FPU (MVFR0 = 0x10110221).
        Board(
            "qemu-mps2-an500",
            "cortex-m7",
            ("-mcpu=cortex-m7", "-mthumb", "-mfpu=fpv5-d16", "-mfloat-abi=hard"),
            _QEMU_RUNTIME,
            qemu_machine="mps2-an500",
        ),
        # QEMU's Cortex-M33 has a single-precision FPU and the DSP extension.
        Board(
            "qemu-mps2-an505",
            "cortex-m33",
            ("-mcpu=cortex-m33", "-mthumb", "-mfpu=fpv5-sp-d16", "-mfloat-abi=hard"),
            _QEMU_RUNTIME,
            qemu_machine="mps2-an505",
            vector_table=0x10000000,
        ),
        Board(
            "nucleo-l4r5zi",
            "cortex-m4",
            ("-mcpu=cortex-m4", "-mthumb", "-mfpu=fpv4-sp-d16", "-mfloat-abi=hard"),
            ("boards/nucleo-l4r5zi/board.c",),
            tested="untested",
            vector_table=0x08000000,
        ),
        # A flash image: boot2 at 0x10000000, vectors, code and weights after it (XIP); see its README.
        Board(
            "rpi-pico",
            "cortex-m0plus",
            ("-mcpu=cortex-m0plus", "-mthumb", "-mfloat-abi=soft"),
            ("boards/rpi-pico/board.c",),
            tested="untested",
            vector_table=0x10000100,
            boot2="boards/rpi-pico/boot2.S",
        ),
    )
}

# The CLI's --target names for the emulated boards.
ALIASES = {
    "qemu-m3": "qemu-mps2-an385",
    "qemu-m4": "qemu-mps2-an386",
    "qemu-m7": "qemu-mps2-an500",
    "qemu-m33": "qemu-mps2-an505",
}


def get_board(name: str | Board) -> Board:
    """The board called ``name`` (a board name or a ``qemu-m*`` target alias)."""
    if isinstance(name, Board):
        return name
    board = BOARDS.get(ALIASES.get(name, name))
    if board is None:
        known = ", ".join([*BOARDS, *ALIASES])
        raise RlxError(f"unknown board {name!r}; known boards: {known}")
    return board
