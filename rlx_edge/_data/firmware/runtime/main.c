/* The model runner: one model, one input buffer, one output buffer, one arena.
 *
 * Two modes, chosen at build time:
 *
 * - Stream (default): a line protocol on the console UART, so one boot serves
 *   many inputs. On boot the firmware prints
 *       RLX READY in=<bytes> out=<bytes> arena=<bytes>
 *   then answers commands, one per line:
 *       I <hex input>   -> O <status> <ticks> <hex output>
 *       X <status>      -> exits (QEMU's exit status is <status>)
 *   and "E <reason>" for anything malformed.
 *
 * - Test vector (RLX_TEST_VECTOR defined): runs the input compiled into
 *   rlx_test_vector.c once, prints the same "O" line, and exits 0 when the
 *   output equals the expected one (1 when not, 2 when the model returned a
 *   nonzero status).
 */
#include <stddef.h>
#include <stdint.h>

#include "rlx_board.h"
#include "rlx_console.h"
#include "rlx_model_iface.h"
#include "rlx_ticks.h"

static int8_t input_buf[RLX_FW_INPUT_BYTES] __attribute__((aligned(16)));
static int8_t output_buf[RLX_FW_OUTPUT_BYTES] __attribute__((aligned(16)));
static uint8_t arena[RLX_FW_ARENA_BYTES] __attribute__((aligned(RLX_FW_ARENA_ALIGN)));

static int run_once(void)
{
    uint64_t t0 = rlx_ticks();
    int status = rlx_model_invoke(input_buf, output_buf, arena);
    uint64_t t1 = rlx_ticks();
    con_puts("O ");
    con_puti(status);
    board_putc(' ');
    con_putu(t1 - t0);
    board_putc(' ');
    con_puthex(output_buf, sizeof output_buf);
    board_putc('\n');
    return status;
}

#ifdef RLX_TEST_VECTOR

#include "rlx_test_vector.h"

int main(void)
{
    board_init();
    rlx_ticks_init();
    for (size_t i = 0; i < sizeof input_buf; ++i) input_buf[i] = (int8_t)rlx_test_input[i];
    if (run_once() != 0) return 2;
    for (size_t i = 0; i < sizeof output_buf; ++i) {
        if ((uint8_t)output_buf[i] != rlx_test_expected[i]) return 1;
    }
    return 0;
}

#else

static int hex_value(int c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static void skip_line(int c)
{
    while (c != '\n') c = board_getc();
}

/* Reads exactly sizeof input_buf bytes as hex digits up to the end of the
 * line. Returns 0, or -1 (rest of the line consumed) when the line is not
 * exactly that long or holds a non-hex character. */
static int read_input_line(void)
{
    size_t n = 0;
    int hi = -1;
    for (;;) {
        int c = board_getc();
        if (c == '\n') return (n == sizeof input_buf && hi < 0) ? 0 : -1;
        if (c == ' ' || c == '\r') continue;
        int v = hex_value(c);
        if (v < 0 || n == sizeof input_buf) {
            skip_line(c);
            return -1;
        }
        if (hi < 0) {
            hi = v;
        } else {
            input_buf[n++] = (int8_t)(uint8_t)((hi << 4) | v);
            hi = -1;
        }
    }
}

static int read_int_line(int *out)
{
    int sign = 1, value = 0, digits = 0;
    for (;;) {
        int c = board_getc();
        if (c == '\n') break;
        if (c == ' ' || c == '\r') continue;
        if (c == '-' && digits == 0 && sign > 0) {
            sign = -1;
        } else if (c >= '0' && c <= '9' && digits < 9) {
            value = value * 10 + (c - '0');
            ++digits;
        } else {
            skip_line(c);
            return -1;
        }
    }
    *out = sign * value;
    return digits ? 0 : -1;
}

int main(void)
{
    board_init();
    rlx_ticks_init();
    con_puts("RLX READY in=");
    con_putu(sizeof input_buf);
    con_puts(" out=");
    con_putu(sizeof output_buf);
    con_puts(" arena=");
    con_putu(sizeof arena);
    board_putc('\n');
    for (;;) {
        int c = board_getc();
        int status;
        switch (c) {
        case '\n':
        case '\r':
        case ' ':
            break;
        case 'I':
            if (read_input_line() == 0) {
                (void)run_once();
            } else {
                con_puts("E input must be ");
                con_putu(2u * sizeof input_buf);
                con_puts(" hex digits\n");
            }
            break;
        case 'X':
            if (read_int_line(&status) == 0) return status;
            con_puts("E exit needs a status\n");
            break;
        default:
            skip_line(c);
            con_puts("E unknown command\n");
            break;
        }
    }
}

#endif
