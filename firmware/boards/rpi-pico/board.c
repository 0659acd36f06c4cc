/* Raspberry Pi Pico (RP2040): console on UART0 (GP0 TX, GP1 RX) at 115200
 * baud, clocked from the 12 MHz crystal so the baud rate does not depend on
 * the ring oscillator's unpredictable frequency. Built here, never run on the
 * board: see README.md. */
#include "rlx_board.h"
#include "rlx_cm.h"

/* Atomic set/clear aliases of every RP2040 peripheral register. */
#define SET(addr) RLX_REG32((addr) + 0x2000u)
#define CLR(addr) RLX_REG32((addr) + 0x3000u)

#define RESETS_BASE 0x4000C000u
#define RESETS_RESET RLX_REG32(RESETS_BASE + 0x0u)
#define RESETS_DONE RLX_REG32(RESETS_BASE + 0x8u)
#define RESET_IO_BANK0 (1u << 5)
#define RESET_PADS_BANK0 (1u << 8)
#define RESET_UART0 (1u << 22)

#define XOSC_BASE 0x40024000u
#define XOSC_CTRL RLX_REG32(XOSC_BASE + 0x00u)
#define XOSC_STATUS RLX_REG32(XOSC_BASE + 0x04u)
#define XOSC_STARTUP RLX_REG32(XOSC_BASE + 0x0Cu)

#define CLOCKS_BASE 0x40008000u
#define CLK_REF_CTRL RLX_REG32(CLOCKS_BASE + 0x30u)
#define CLK_REF_SELECTED RLX_REG32(CLOCKS_BASE + 0x38u)
#define CLK_SYS_CTRL RLX_REG32(CLOCKS_BASE + 0x3Cu)
#define CLK_SYS_SELECTED RLX_REG32(CLOCKS_BASE + 0x44u)
#define CLK_PERI_CTRL RLX_REG32(CLOCKS_BASE + 0x48u)

#define IO_BANK0_GPIO_CTRL(n) RLX_REG32(0x40014000u + 0x04u + 8u * (n))
#define FUNCSEL_UART 2u

#define UART0_BASE 0x40034000u
#define UART_DR RLX_REG32(UART0_BASE + 0x00u)
#define UART_FR RLX_REG32(UART0_BASE + 0x18u)
#define UART_IBRD RLX_REG32(UART0_BASE + 0x24u)
#define UART_FBRD RLX_REG32(UART0_BASE + 0x28u)
#define UART_LCR_H RLX_REG32(UART0_BASE + 0x2Cu)
#define UART_CR RLX_REG32(UART0_BASE + 0x30u)
#define FR_RXFE (1u << 4)
#define FR_TXFF (1u << 5)

#define XOSC_HZ 12000000u
/* No PLL: clk_sys runs from the crystal. */
_Static_assert(BOARD_CORE_HZ == XOSC_HZ, "rpi-pico: the board table's clock must be the crystal's");

static void clocks_from_xosc(void)
{
    /* 1-15 MHz range; startup delay in units of 256 reference cycles, about
     * 1 ms as the datasheet recommends. */
    XOSC_CTRL = 0xAA0u;
    XOSC_STARTUP = (XOSC_HZ / 1000u + 255u) / 256u;
    SET(XOSC_BASE + 0x00u) = 0xFABu << 12;
    while (!(XOSC_STATUS & (1u << 31))) {
    }
    /* clk_ref <- XOSC, clk_sys <- clk_ref (both glitchless muxes: wait for
     * the switch to show in SELECTED), clk_peri <- clk_sys, enabled. */
    CLK_REF_CTRL = 2u;
    while (!(CLK_REF_SELECTED & (1u << 2))) {
    }
    CLK_SYS_CTRL = 0u;
    while (!(CLK_SYS_SELECTED & 1u)) {
    }
    CLK_PERI_CTRL = 0u;
    CLK_PERI_CTRL = 1u << 11;
}

void board_init(void)
{
    clocks_from_xosc();
    const uint32_t blocks = RESET_IO_BANK0 | RESET_PADS_BANK0 | RESET_UART0;
    SET(RESETS_BASE) = blocks;
    CLR(RESETS_BASE) = blocks;
    while ((RESETS_DONE & blocks) != blocks) {
    }
    (void)RESETS_RESET;
    IO_BANK0_GPIO_CTRL(0) = FUNCSEL_UART;
    IO_BANK0_GPIO_CTRL(1) = FUNCSEL_UART;
    /* PL011 divisor = clk / (16 * baud) = IBRD + FBRD / 64, rounded. */
    uint32_t div64 = (4u * XOSC_HZ + BOARD_BAUD / 2) / BOARD_BAUD;
    UART_IBRD = div64 >> 6;
    UART_FBRD = div64 & 0x3Fu;
    UART_LCR_H = (3u << 5) | (1u << 4); /* 8 bits, FIFOs on; also latches the divisor */
    UART_CR = (1u << 9) | (1u << 8) | 1u; /* RXE | TXE | UARTEN */
}

void board_putc(char c)
{
    while (UART_FR & FR_TXFF) {
    }
    UART_DR = (uint8_t)c;
}

int board_getc(void)
{
    while (UART_FR & FR_RXFE) {
    }
    return (int)(UART_DR & 0xFFu);
}

uint32_t board_core_hz(void) { return BOARD_CORE_HZ; }

/* No semihosting without a debugger: report the status and stop. */
void board_exit(int status)
{
    static const char msg[] = "EXIT ";
    for (const char *p = msg; *p; ++p) board_putc(*p);
    uint32_t v = (uint32_t)status;
    if (status < 0) {
        board_putc('-');
        v = 0u - v;
    }
    char digits[11];
    int n = 0;
    do {
        digits[n++] = (char)('0' + v % 10u);
        v /= 10u;
    } while (v);
    while (n) board_putc(digits[--n]);
    board_putc('\n');
    rlx_irq_disable();
    for (;;) {
        __asm__ volatile("wfi");
    }
}
