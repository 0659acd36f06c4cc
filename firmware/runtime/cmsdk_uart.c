#include "cmsdk_uart.h"

#include "rlx_cm.h"

#define UART_DATA(b) RLX_REG32((b) + 0x00u)
#define UART_STATE(b) RLX_REG32((b) + 0x04u)
#define UART_CTRL(b) RLX_REG32((b) + 0x08u)
#define UART_BAUDDIV(b) RLX_REG32((b) + 0x10u)

#define STATE_TX_FULL 0x1u
#define STATE_RX_FULL 0x2u
#define CTRL_TX_EN 0x1u
#define CTRL_RX_EN 0x2u

void cmsdk_uart_init(uintptr_t base, uint32_t bauddiv)
{
    UART_BAUDDIV(base) = bauddiv;
    UART_CTRL(base) = CTRL_TX_EN | CTRL_RX_EN;
}

void cmsdk_uart_putc(uintptr_t base, char c)
{
    while (UART_STATE(base) & STATE_TX_FULL) {
    }
    UART_DATA(base) = (uint8_t)c;
}

int cmsdk_uart_getc(uintptr_t base)
{
    while (!(UART_STATE(base) & STATE_RX_FULL)) {
    }
    return (int)(UART_DATA(base) & 0xFFu);
}
