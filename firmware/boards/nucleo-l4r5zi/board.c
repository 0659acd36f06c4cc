/* NUCLEO-L4R5ZI: console on LPUART1 (PG7 TX, PG8 RX, AF8), the ST-LINK's
 * virtual COM port, at 115200 baud from the 4 MHz MSI clock the part resets
 * to. Built here, never run on the board: see README.md. */
#include "rlx_board.h"
#include "rlx_cm.h"

#define RCC_BASE 0x40021000u
#define RCC_AHB2ENR RLX_REG32(RCC_BASE + 0x4Cu)
#define RCC_APB1ENR1 RLX_REG32(RCC_BASE + 0x58u)
#define RCC_APB1ENR2 RLX_REG32(RCC_BASE + 0x5Cu)
#define RCC_CCIPR RLX_REG32(RCC_BASE + 0x88u)

#define PWR_CR2 RLX_REG32(0x40007000u + 0x04u)
#define PWR_CR2_IOSV (1u << 9)

#define GPIOG_BASE 0x48001800u
#define GPIOG_MODER RLX_REG32(GPIOG_BASE + 0x00u)
#define GPIOG_AFRL RLX_REG32(GPIOG_BASE + 0x20u)
#define GPIOG_AFRH RLX_REG32(GPIOG_BASE + 0x24u)

#define LPUART1_BASE 0x40008000u
#define LPUART1_CR1 RLX_REG32(LPUART1_BASE + 0x00u)
#define LPUART1_BRR RLX_REG32(LPUART1_BASE + 0x0Cu)
#define LPUART1_ISR RLX_REG32(LPUART1_BASE + 0x1Cu)
#define LPUART1_RDR RLX_REG32(LPUART1_BASE + 0x24u)
#define LPUART1_TDR RLX_REG32(LPUART1_BASE + 0x28u)

#define ISR_RXNE (1u << 5)
#define ISR_TXE (1u << 7)

void board_init(void)
{
    RCC_APB1ENR1 |= 1u << 28;  /* PWREN */
    /* PG2..PG15 are powered from VDDIO2, which is isolated until IOSV is set. */
    PWR_CR2 |= PWR_CR2_IOSV;
    RCC_AHB2ENR |= 1u << 6;    /* GPIOGEN */
    RCC_APB1ENR2 |= 1u << 0;   /* LPUART1EN */
    RCC_CCIPR &= ~(3u << 10);  /* LPUART1 clocked from PCLK1 */
    (void)RCC_APB1ENR2;        /* read back: the clock is on before first use */

    GPIOG_MODER = (GPIOG_MODER & ~((3u << 14) | (3u << 16))) | (2u << 14) | (2u << 16);
    GPIOG_AFRL = (GPIOG_AFRL & ~(0xFu << 28)) | (8u << 28);
    GPIOG_AFRH = (GPIOG_AFRH & ~0xFu) | 8u;

    /* LPUART: BRR = 256 * f_ck / baud, rounded. */
    LPUART1_BRR = (uint32_t)((256ull * BOARD_CORE_HZ + BOARD_BAUD / 2) / BOARD_BAUD);
    LPUART1_CR1 = (1u << 3) | (1u << 2) | 1u; /* TE | RE | UE */
}

void board_putc(char c)
{
    while (!(LPUART1_ISR & ISR_TXE)) {
    }
    LPUART1_TDR = (uint8_t)c;
}

int board_getc(void)
{
    while (!(LPUART1_ISR & ISR_RXNE)) {
    }
    return (int)(LPUART1_RDR & 0xFFu);
}

uint32_t board_core_hz(void) { return BOARD_CORE_HZ; }

/* No semihosting on a board running without a debugger (the BKPT would
 * lock the core up): report the status on the console and stop. */
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
