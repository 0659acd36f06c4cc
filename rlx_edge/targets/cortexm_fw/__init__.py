"""Cortex-M firmware: build the C runtime of ``firmware/`` around a model for a board, report sizes.

The sources ship in the package, under ``rlx_edge/_data/firmware`` (see
:func:`firmware_dir`): ``runtime/`` (vector table and reset handler, SysTick
cycle counter, console helpers, the model runner ``main.c``, CMSDK UART and
semihosting for the QEMU boards, the shared linker script ``sections.ld``) and
``boards/<name>/`` (memory map ``board.ld``, ``board.h`` or ``board.c``).

The runner speaks the framed HIL protocol (``hil/rlx_hil.h``) on the console UART; see
``runtime/main.c``
and :mod:`rlx_edge.hil.qemu`, which drives it under QEMU.
"""

from rlx_edge.targets.cortexm_fw.boards import ALIASES, BOARDS, Board, get_board
from rlx_edge.targets.cortexm_fw.build import build_firmware, firmware_dir, size_report

__all__ = ["ALIASES", "BOARDS", "Board", "build_firmware", "firmware_dir", "get_board", "size_report"]
