/* Board support shared by the QEMU MPS2 boards: console on CMSDK UART0, exit
 * through semihosting. The board directory's board.h gives the UART's
 * address; the build passes the clock and baud rate from the board table. */
#include "board.h"
#include "cmsdk_uart.h"
#include "rlx_board.h"
#include "semihost.h"

void board_init(void)
{
    /* QEMU ignores the divider's value but warns about one below 16; real
     * MPS2 FPGAs would want core_hz / baud. */
    cmsdk_uart_init(BOARD_UART0_BASE, BOARD_CORE_HZ / BOARD_BAUD);
}

void board_putc(char c) { cmsdk_uart_putc(BOARD_UART0_BASE, c); }

int board_getc(void) { return cmsdk_uart_getc(BOARD_UART0_BASE); }

uint32_t board_core_hz(void) { return BOARD_CORE_HZ; }

void board_exit(int status) { semihost_exit(status); }
