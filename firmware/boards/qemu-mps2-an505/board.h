/* QEMU mps2-an505: Cortex-M33 with TrustZone (SSE-200 subsystem). The
 * firmware runs in the secure state it boots in, so it uses the secure
 * aliases of memory and peripherals. */
#ifndef BOARD_H
#define BOARD_H

#define BOARD_UART0_BASE 0x50200000u

#endif
