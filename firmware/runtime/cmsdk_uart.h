/* ARM CMSDK APB UART, the console of the MPS2 FPGA images (and of QEMU's
 * models of them). */
#ifndef RLX_CMSDK_UART_H
#define RLX_CMSDK_UART_H

#include <stdint.h>

void cmsdk_uart_init(uintptr_t base, uint32_t bauddiv);
void cmsdk_uart_putc(uintptr_t base, char c);
int cmsdk_uart_getc(uintptr_t base);

#endif
