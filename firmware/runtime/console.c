#include "rlx_console.h"

#include "rlx_board.h"

void con_puts(const char *s)
{
    while (*s) board_putc(*s++);
}

void con_putu(uint64_t v)
{
    char buf[21];
    int i = 0;
    do {
        buf[i++] = (char)('0' + (int)(v % 10u));
        v /= 10u;
    } while (v);
    while (i) board_putc(buf[--i]);
}

void con_puti(int32_t v)
{
    if (v < 0) {
        board_putc('-');
        con_putu((uint64_t)(-(int64_t)v));
    } else {
        con_putu((uint64_t)v);
    }
}

void con_puthex(const void *data, size_t n)
{
    static const char digits[] = "0123456789abcdef";
    const uint8_t *p = data;
    for (size_t i = 0; i < n; ++i) {
        board_putc(digits[p[i] >> 4]);
        board_putc(digits[p[i] & 0xFu]);
    }
}
