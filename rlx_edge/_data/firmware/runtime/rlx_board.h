/* Board interface of the rlx-edge firmware runtime.
 *
 * Every board directory provides board.c implementing these functions and
 * board.ld (its memory map, which INCLUDEs runtime/sections.ld). The runtime
 * (startup, main, tick counter) only talks to the hardware through here, so a
 * new board is one directory.
 */
#ifndef RLX_BOARD_H
#define RLX_BOARD_H

#include <stdint.h>

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
