/* Board interface of the rlx-edge firmware runtime.
 *
 * Every board directory provides board.c implementing these functions (the
 * QEMU MPS2 boards share runtime/board_mps2.c and give their UART's address in
 * board.h). The board's clock, baud rate and memory map live in the board
 * table, rlx_edge/boards.py: the build passes BOARD_CORE_HZ and BOARD_BAUD and
 * writes the linker script's MEMORY. The runtime (startup, main, tick
 * counter) only talks to the hardware through here, so a new board is one
 * directory and one table entry.
 */
#ifndef RLX_BOARD_H
#define RLX_BOARD_H

#include <stdint.h>

#if !defined(BOARD_CORE_HZ) || !defined(BOARD_BAUD)
#error "BOARD_CORE_HZ and BOARD_BAUD come from the board table: build with rlx_edge.targets.cortexm.build_firmware"
#endif

/* Clocks, pins and the console UART; called once from main before any I/O. */
void board_init(void);

/* Blocking console I/O. board_getc returns the next received byte. */
void board_putc(char c);
int board_getc(void);

/* Core clock in Hz, used only to report SysTick ticks as cycles. */
uint32_t board_core_hz(void);

/* Ends the program with a status. On QEMU boards this is semihosting
 * SYS_EXIT_EXTENDED, so QEMU's own exit status is `status`; real boards print
 * the status and stop. */
__attribute__((noreturn)) void board_exit(int status);

#endif
