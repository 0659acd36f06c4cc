/* QEMU mps2-an500: Cortex-M7 (double-precision FPU). */
#ifndef BOARD_H
#define BOARD_H

#define BOARD_UART0_BASE 0x40004000u

#endif
