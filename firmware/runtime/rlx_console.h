/* Console helpers on top of board_putc/board_getc: no printf, so the runtime
 * stays small and pulls nothing from newlib's stdio. */
#ifndef RLX_CONSOLE_H
#define RLX_CONSOLE_H

#include <stddef.h>
#include <stdint.h>

void con_puts(const char *s);
void con_putu(uint64_t v);
void con_puti(int32_t v);
void con_puthex(const void *data, size_t n);

#endif
