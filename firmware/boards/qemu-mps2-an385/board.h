/* QEMU mps2-an385: Cortex-M3. */
#ifndef BOARD_H
#define BOARD_H

#define BOARD_UART0_BASE 0x40004000u

#endif
