/* The HIL command server: reads frames from the console UART, answers them.
 *
 * See rlx_hil.h for the frame format and the commands. Robustness rules the
 * code follows, because the host side and the wire are not trusted:
 * - every length and offset a host sends is checked against the buffer it
 *   addresses before a byte is copied, in a form that cannot overflow
 *   (n <= size - offset, never offset + n <= size);
 * - a payload is only stored after its length passed the header check and
 *   the RLX_HIL_MAX_PAYLOAD limit, so the receive buffer cannot overrun;
 * - a frame that fails a check gets an ERROR frame back (when its header is
 *   trustworthy enough to name it) and the parser hunts for the next start
 *   of frame, re-scanning the header bytes of a frame whose header failed.
 *
 * This file is compiled as part of main.c (it is #included there), so the
 * test-vector build carries none of it.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "rlx_board.h"
#include "rlx_cm.h"
#include "rlx_hil.h"
#include "rlx_hil_server.h"
#include "rlx_ticks.h"

#define SCB_AIRCR RLX_REG32(0xE000ED0Cu)
#define DEMCR RLX_REG32(0xE000EDFCu)
#define DWT_CTRL RLX_REG32(0xE0001000u)
#define DWT_CYCCNT RLX_REG32(0xE0001004u)
#define DWT_LAR RLX_REG32(0xE0001FB0u)

/* ---- checksums ------------------------------------------------------- */

static uint8_t crc8_byte(uint8_t crc, uint8_t b)
{
    crc ^= b;
    for (int i = 0; i < 8; ++i) crc = (uint8_t)((crc & 0x80u) ? ((unsigned)crc << 1) ^ 0x07u : (unsigned)crc << 1);
    return crc;
}

/* Nibble-table CRC-32: 64 bytes of table instead of 1 KB, twice the speed of
 * the bitwise loop; the UART is the bottleneck either way. */
static const uint32_t crc_nibble[16] = {
    0x00000000u, 0x1DB71064u, 0x3B6E20C8u, 0x26D930ACu, 0x76DC4190u, 0x6B6B51F4u, 0x4DB26158u, 0x5005713Cu,
    0xEDB88320u, 0xF00F9344u, 0xD6D6A3E8u, 0xCB61B38Cu, 0x9B64C2B0u, 0x86D3D2D4u, 0xA00AE278u, 0xBDBDF21Cu,
};

/* Running CRC-32 state (pre- and post-inverted like zlib's). */
static uint32_t crc32_update(uint32_t crc, const uint8_t *p, size_t n)
{
    while (n--) {
        crc ^= *p++;
        crc = (crc >> 4) ^ crc_nibble[crc & 0xFu];
        crc = (crc >> 4) ^ crc_nibble[crc & 0xFu];
    }
    return crc;
}

static uint32_t crc32(const void *p, size_t n) { return ~crc32_update(0xFFFFFFFFu, p, n); }

/* ---- cycle counter ----------------------------------------------------- */

static uint8_t tick_source = RLX_HIL_TICKS_SYSTICK;

/* Prefers DWT CYCCNT (exact core cycles, no interrupt) and falls back to the
 * SysTick counter where the core has no DWT (Cortex-M0/M0+) or the counter
 * does not move (QEMU models DWT registers that read 0). */
static void cycles_init(void)
{
#if !defined(__ARM_ARCH_6M__)
    DEMCR |= 1u << 24; /* TRCENA: powers the DWT */
    DWT_LAR = 0xC5ACCE55u; /* unlocks the DWT on the Cortex-M7; ignored elsewhere */
    DWT_CYCCNT = 0;
    DWT_CTRL |= 1u; /* CYCCNTENA */
    uint32_t a = DWT_CYCCNT;
    for (volatile int i = 0; i < 16; ++i) {
    }
    if (DWT_CYCCNT != a) tick_source = RLX_HIL_TICKS_DWT;
#endif
}

static uint64_t cycles_now(void)
{
#if !defined(__ARM_ARCH_6M__)
    if (tick_source == RLX_HIL_TICKS_DWT) return DWT_CYCCNT;
#endif
    return rlx_ticks();
}

static uint64_t cycles_between(uint64_t t0, uint64_t t1)
{
    /* CYCCNT is 32 bits: the difference modulo 2^32 is right for any run
     * shorter than 2^32 cycles (43 s at 100 MHz). */
    return tick_source == RLX_HIL_TICKS_DWT ? (uint32_t)((uint32_t)t1 - (uint32_t)t0) : t1 - t0;
}

/* ---- frames out ---------------------------------------------------------- */

/* One buffer holds a command's payload and then its answer's: every command
 * reads the fields it needs before it writes the answer, and the RAM it
 * saves (1 KB) matters next to a model's arena. */
static uint8_t buf[RLX_HIL_MAX_PAYLOAD];
#define tx buf
#define rx buf

static void put_bytes(const uint8_t *p, size_t n)
{
    while (n--) board_putc((char)*p++);
}

static void send_frame(uint8_t type, uint8_t seq, const uint8_t *payload, size_t n)
{
    uint8_t h[RLX_HIL_HEADER_BYTES] = {RLX_HIL_SOF0, RLX_HIL_SOF1, type, seq, (uint8_t)n, (uint8_t)(n >> 8), 0};
    uint8_t hc = 0;
    for (int i = 2; i < 6; ++i) hc = crc8_byte(hc, h[i]);
    h[6] = hc;
    uint32_t crc = crc32_update(0xFFFFFFFFu, h + 2, 5);
    crc = ~crc32_update(crc, payload, n);
    uint8_t c[4] = {(uint8_t)crc, (uint8_t)(crc >> 8), (uint8_t)(crc >> 16), (uint8_t)(crc >> 24)};
    put_bytes(h, sizeof h);
    put_bytes(payload, n);
    put_bytes(c, sizeof c);
}

/* A little-endian writer into tx that never runs past its end: a field that
 * does not fit sets `overflow` and is dropped. */
struct writer {
    size_t n;
    int overflow;
};

static void w_bytes(struct writer *w, const void *p, size_t n)
{
    if (w->overflow || n > sizeof tx - w->n) {
        w->overflow = 1;
        return;
    }
    memcpy(tx + w->n, p, n);
    w->n += n;
}

static void w_u8(struct writer *w, uint32_t v)
{
    uint8_t b = (uint8_t)v;
    w_bytes(w, &b, 1);
}

static void w_u16(struct writer *w, uint32_t v)
{
    uint8_t b[2] = {(uint8_t)v, (uint8_t)(v >> 8)};
    w_bytes(w, b, 2);
}

static void w_u32(struct writer *w, uint32_t v)
{
    uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    w_bytes(w, b, 4);
}

static void w_u64(struct writer *w, uint64_t v)
{
    w_u32(w, (uint32_t)v);
    w_u32(w, (uint32_t)(v >> 32));
}

/* Strings go out as u8 length + bytes, cut at 255. */
static void w_str(struct writer *w, const char *s)
{
    size_t n = strlen(s);
    if (n > 255) n = 255;
    w_u8(w, (uint32_t)n);
    w_bytes(w, s, n);
}

static void send_error(uint8_t seq, uint8_t code, uint8_t type, const char *why)
{
    struct writer w = {0, 0};
    w_u8(&w, code);
    w_u8(&w, type);
    w_bytes(&w, why, strlen(why));
    send_frame(RLX_HIL_ERROR, seq, tx, w.n);
}

/* ---- commands ------------------------------------------------------------ */

static uint32_t rd_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void w_tensor(struct writer *w, const struct rlx_hil_tensor *t)
{
    w_str(w, t->dtype);
    w_u8(w, t->rank);
    for (uint32_t i = 0; i < t->rank; ++i) w_u32(w, t->shape[i]);
    w_u8(w, t->has_quant);
    uint32_t scale_bits;
    memcpy(&scale_bits, &t->scale, 4);
    w_u32(w, scale_bits);
    w_u32(w, (uint32_t)t->zero_point);
}

static void cmd_hello(const struct rlx_hil_target *m, uint8_t seq)
{
    struct writer w = {0, 0};
    w_u16(&w, RLX_HIL_VERSION);
    w_u16(&w, RLX_HIL_MAX_PAYLOAD);
    w_u32(&w, (uint32_t)m->input_bytes);
    w_u32(&w, (uint32_t)m->output_bytes);
    w_u32(&w, (uint32_t)m->arena_bytes);
    w_u32(&w, board_core_hz());
    w_u8(&w, tick_source);
    w_str(&w, m->model_hash);
    w_str(&w, m->model_name);
    w_str(&w, m->core);
    w_tensor(&w, &m->input);
    w_tensor(&w, &m->output);
    if (w.overflow) {
        send_error(seq, RLX_HIL_E_LENGTH, RLX_HIL_HELLO, "identity does not fit a frame");
        return;
    }
    send_frame(RLX_HIL_HELLO | RLX_HIL_ANSWER, seq, tx, w.n);
}

static uint32_t run_id;
static int have_output;

static void cmd_write(const struct rlx_hil_target *m, uint8_t seq, const uint8_t *p, size_t n)
{
    if (n < 5) {
        send_error(seq, RLX_HIL_E_LENGTH, RLX_HIL_WRITE_INPUT, "WRITE_INPUT needs an offset and data");
        return;
    }
    uint32_t off = rd_u32(p);
    size_t len = n - 4;
    if (off > m->input_bytes || len > m->input_bytes - off) {
        send_error(seq, RLX_HIL_E_RANGE, RLX_HIL_WRITE_INPUT, "write past the end of the input");
        return;
    }
    memcpy((uint8_t *)m->in_buf + off, p + 4, len);
    struct writer w = {0, 0};
    w_u32(&w, off + (uint32_t)len);
    send_frame(RLX_HIL_WRITE_INPUT | RLX_HIL_ANSWER, seq, tx, w.n);
}

static void cmd_run(const struct rlx_hil_target *m, uint8_t seq)
{
    /* Acknowledged before the model runs, so the host can tell a lost
     * command (no BUSY within its short timeout) from a long inference. */
    send_frame(RLX_HIL_BUSY, seq, tx, 0);
    uint64_t t0 = cycles_now();
    int status = m->invoke();
    uint64_t t1 = cycles_now();
    ++run_id;
    have_output = 1;
    struct writer w = {0, 0};
    w_u32(&w, (uint32_t)status);
    w_u32(&w, run_id);
    w_u8(&w, tick_source);
    w_u64(&w, cycles_between(t0, t1));
    w_u32(&w, crc32(m->in_buf, m->input_bytes));
    w_u32(&w, crc32(m->out_buf, m->output_bytes));
    send_frame(RLX_HIL_RUN | RLX_HIL_ANSWER, seq, tx, w.n);
}

#define READ_HEADER_BYTES 8u

static void cmd_read(const struct rlx_hil_target *m, uint8_t seq, const uint8_t *p, size_t n)
{
    if (n != 6) {
        send_error(seq, RLX_HIL_E_LENGTH, RLX_HIL_READ_OUTPUT, "READ_OUTPUT needs an offset and a length");
        return;
    }
    uint32_t off = rd_u32(p);
    uint32_t len = (uint32_t)p[4] | (uint32_t)p[5] << 8;
    if (!have_output) {
        send_error(seq, RLX_HIL_E_NO_OUTPUT, RLX_HIL_READ_OUTPUT, "no RUN since boot");
        return;
    }
    if (len == 0 || len > RLX_HIL_MAX_PAYLOAD - READ_HEADER_BYTES || off > m->output_bytes ||
        len > m->output_bytes - off) {
        send_error(seq, RLX_HIL_E_RANGE, RLX_HIL_READ_OUTPUT, "read outside the output");
        return;
    }
    struct writer w = {0, 0};
    w_u32(&w, run_id);
    w_u32(&w, off);
    w_bytes(&w, (const uint8_t *)m->out_buf + off, len);
    send_frame(RLX_HIL_READ_OUTPUT | RLX_HIL_ANSWER, seq, tx, w.n);
}

static void wait_us(uint32_t us)
{
    uint64_t t0 = rlx_ticks();
    uint64_t n = (uint64_t)board_core_hz() / 1000000u * us;
    while (rlx_ticks() - t0 < n) {
    }
}

__attribute__((noreturn)) static void system_reset(void)
{
    /* The answer's last bytes may still be in the UART's shift register:
     * 2 ms covers 20 bytes at 115200 baud. */
    wait_us(2000);
    rlx_dsb();
    SCB_AIRCR = 0x05FA0004u; /* VECTKEY | SYSRESETREQ */
    rlx_dsb();
    for (;;) {
    }
}

/* ---- frames in ----------------------------------------------------------- */

/* Bytes to parse again before reading the UART: the header of a frame whose
 * header check failed may hold the real start of frame. */
static uint8_t replay[16];
static size_t replay_n, replay_i;

static uint8_t next_byte(void)
{
    if (replay_i < replay_n) return replay[replay_i++];
    return (uint8_t)board_getc();
}

static void push_replay(const uint8_t *p, size_t n)
{
    uint8_t rest[sizeof replay];
    size_t left = replay_n - replay_i;
    memcpy(rest, replay + replay_i, left);
    /* n <= 5 and left <= 10 (a header is 5 bytes and each failure consumes
     * at least its two start bytes), so this fits; cut anyway. */
    if (n > sizeof replay) n = sizeof replay;
    if (left > sizeof replay - n) left = sizeof replay - n;
    memcpy(replay, p, n);
    memcpy(replay + n, rest, left);
    replay_n = n + left;
    replay_i = 0;
}

/* Reads one frame whose header and CRC check; answers the broken ones. */
static size_t read_frame(uint8_t *type, uint8_t *seq)
{
    for (;;) {
        if (next_byte() != RLX_HIL_SOF0) continue;
        uint8_t b = next_byte();
        while (b == RLX_HIL_SOF0) b = next_byte();
        if (b != RLX_HIL_SOF1) continue;
        uint8_t h[5];
        for (int i = 0; i < 5; ++i) h[i] = next_byte();
        uint8_t hc = 0;
        for (int i = 0; i < 4; ++i) hc = crc8_byte(hc, h[i]);
        size_t n = (size_t)h[2] | (size_t)h[3] << 8;
        if (hc != h[4]) {
            /* Unanswered: a header that fails its check names no trustworthy
             * command to answer; the host times out and retries. */
            push_replay(h, 5);
            continue;
        }
        if (n > RLX_HIL_MAX_PAYLOAD) {
            send_error(h[1], RLX_HIL_E_TOO_LONG, h[0], "payload longer than the maximum");
            push_replay(h, 5);
            continue;
        }
        for (size_t i = 0; i < n; ++i) rx[i] = next_byte();
        uint8_t c[4];
        for (int i = 0; i < 4; ++i) c[i] = next_byte();
        uint32_t crc = ~crc32_update(crc32_update(0xFFFFFFFFu, h, 5), rx, n);
        if (crc != rd_u32(c)) {
            send_error(h[1], RLX_HIL_E_CRC, h[0], "CRC mismatch");
            continue;
        }
        *type = h[0];
        *seq = h[1];
        return n;
    }
}

int rlx_hil_serve(const struct rlx_hil_target *m)
{
    cycles_init();
    {
        struct writer w = {0, 0};
        w_u16(&w, RLX_HIL_VERSION);
        send_frame(RLX_HIL_BOOT, 0, tx, w.n);
    }
    for (;;) {
        uint8_t type, seq;
        size_t n = read_frame(&type, &seq);
        switch (type) {
        case RLX_HIL_HELLO:
            if (n != 0) break;
            cmd_hello(m, seq);
            continue;
        case RLX_HIL_WRITE_INPUT:
            cmd_write(m, seq, rx, n);
            continue;
        case RLX_HIL_RUN:
            if (n != 0) break;
            cmd_run(m, seq);
            continue;
        case RLX_HIL_READ_OUTPUT:
            cmd_read(m, seq, rx, n);
            continue;
        case RLX_HIL_RESET:
            if (n != 0) break;
            send_frame(RLX_HIL_RESET | RLX_HIL_ANSWER, seq, tx, 0);
            system_reset();
        case RLX_HIL_EXIT:
            if (n != 4) break;
            send_frame(RLX_HIL_EXIT | RLX_HIL_ANSWER, seq, tx, 0);
            return (int)rd_u32(rx);
        default:
            send_error(seq, RLX_HIL_E_UNKNOWN, type, "unknown command");
            continue;
        }
        send_error(seq, RLX_HIL_E_LENGTH, type, "wrong payload length for the command");
    }
}
