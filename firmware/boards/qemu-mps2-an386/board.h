/* QEMU mps2-an386: Cortex-M4F. */
#ifndef BOARD_H
#define BOARD_H

#define BOARD_UART0_BASE 0x40004000u

#endif
