/* The model runner: one model, one input buffer, one output buffer, one arena
 * (several inputs or outputs share them back to back: rlx_model_iface.h).
 *
 * Two modes, chosen at build time:
 *
 * - HIL server (default): the framed, CRC-checked command protocol of
 *   ../hil/rlx_hil.h on the console UART (identify, write input in chunks,
 *   run with a cycle count, read output in chunks, reset, exit), so one boot
 *   serves many inputs and a host can drive it over any serial link. The
 *   host side is rlx_edge/hil/.
 *
 * - Test vector (RLX_TEST_VECTOR defined): runs the input compiled into
 *   rlx_test_vector.c once, prints "O <status> <ticks> <hex output>", and
 *   exits 0 when the output equals the expected one (1 when not, 2 when the
 *   model returned a nonzero status).
 */
#include <stddef.h>
#include <stdint.h>

#include "rlx_board.h"
#include "rlx_console.h"
#include "rlx_model_iface.h"
#include "rlx_ticks.h"

static int8_t input_buf[RLX_FW_INPUT_BYTES] __attribute__((aligned(16)));
static int8_t output_buf[RLX_FW_OUTPUT_BYTES] __attribute__((aligned(16)));
/* The name is looked up in the ELF by size_report (the arena share of RAM). */
static uint8_t rlx_fw_arena[RLX_FW_ARENA_BYTES] __attribute__((aligned(RLX_FW_ARENA_ALIGN)));

#ifdef RLX_FW_MULTI_IO
static const uint32_t in_sizes[RLX_FW_MAX_IO] = {
    RLX_FW_IN0, RLX_FW_IN1, RLX_FW_IN2, RLX_FW_IN3, RLX_FW_IN4, RLX_FW_IN5, RLX_FW_IN6, RLX_FW_IN7,
};
static const uint32_t out_sizes[RLX_FW_MAX_IO] = {
    RLX_FW_OUT0, RLX_FW_OUT1, RLX_FW_OUT2, RLX_FW_OUT3, RLX_FW_OUT4, RLX_FW_OUT5, RLX_FW_OUT6, RLX_FW_OUT7,
};

/* The inputs (outputs) lie back to back in input_buf (output_buf), in the
 * model's order; the model copies them with memcpy, so no alignment is due. */
static int model_invoke(void)
{
    const void *ins[RLX_NUM_INPUTS];
    void *outs[RLX_NUM_OUTPUTS];
    uint32_t off = 0;
    for (int k = 0; k < RLX_NUM_INPUTS; ++k) {
        ins[k] = input_buf + off;
        off += in_sizes[k];
    }
    off = 0;
    for (int k = 0; k < RLX_NUM_OUTPUTS; ++k) {
        outs[k] = output_buf + off;
        off += out_sizes[k];
    }
    int status = rlx_model_invoke_multi(ins, outs, rlx_fw_arena);
    __asm__ volatile("" ::: "memory"); /* a BL with a return site, as in invoke() below */
    return status;
}
#else
/* A macro, not a function: a wrapper could turn the call into a tail branch. */
#define model_invoke() rlx_model_invoke(input_buf, output_buf, rlx_fw_arena)
#endif

#ifdef RLX_TEST_VECTOR

#include "rlx_test_vector.h"

static int run_once(void)
{
    uint64_t t0 = rlx_ticks();
    int status = model_invoke();
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

/* The server is compiled into this translation unit rather than listed as a
 * runtime source, so test-vector images carry none of it. */
#include "../hil/server.c"

/* Core name for HELLO. The build may pass RLX_FW_CORE; otherwise it follows
 * from the architecture macros (v7E-M with a double-precision FPU is the
 * Cortex-M7, without one the Cortex-M4). */
#ifndef RLX_FW_CORE
#if defined(__ARM_ARCH_6M__)
#define RLX_FW_CORE "cortex-m0plus"
#elif defined(__ARM_ARCH_7M__)
#define RLX_FW_CORE "cortex-m3"
#elif defined(__ARM_ARCH_7EM__) && defined(__ARM_FP) && (__ARM_FP & 8)
#define RLX_FW_CORE "cortex-m7"
#elif defined(__ARM_ARCH_7EM__)
#define RLX_FW_CORE "cortex-m4"
#elif defined(__ARM_ARCH_8M_MAIN__)
#define RLX_FW_CORE "cortex-m33"
#elif defined(__ARM_ARCH_8_1M_MAIN__)
#define RLX_FW_CORE "cortex-m55"
#else
#define RLX_FW_CORE "unknown"
#endif
#endif

/* Hand-written models (test fixtures) may define only the byte sizes: they
 * are described as flat int8 tensors without quantization. */
#ifndef RLX_MODEL_HASH
#define RLX_MODEL_HASH ""
#endif
#ifndef RLX_MODEL_NAME
#define RLX_MODEL_NAME ""
#endif

/* Several inputs (outputs) travel as one flat byte buffer: see rlx_model_iface.h. */
#if defined(RLX_FW_MULTI_IO)
#define IN_DESC "uint8", 1, {RLX_FW_INPUT_BYTES}
#elif defined(RLX_INPUT0_SHAPE) && RLX_INPUT0_RANK <= RLX_HIL_MAX_RANK
#define IN_DESC RLX_INPUT0_DTYPE, RLX_INPUT0_RANK, RLX_INPUT0_SHAPE
#else
#define IN_DESC "int8", 1, {RLX_FW_INPUT_BYTES}
#endif
#if defined(RLX_INPUT0_SCALE) && !defined(RLX_FW_MULTI_IO)
#define IN_QUANT 1, RLX_INPUT0_SCALE, RLX_INPUT0_ZERO_POINT
#else
#define IN_QUANT 0, 0.0f, 0
#endif
#if defined(RLX_FW_MULTI_IO)
#define OUT_DESC "uint8", 1, {RLX_FW_OUTPUT_BYTES}
#elif defined(RLX_OUTPUT0_SHAPE) && RLX_OUTPUT0_RANK <= RLX_HIL_MAX_RANK
#define OUT_DESC RLX_OUTPUT0_DTYPE, RLX_OUTPUT0_RANK, RLX_OUTPUT0_SHAPE
#else
#define OUT_DESC "int8", 1, {RLX_FW_OUTPUT_BYTES}
#endif
#if defined(RLX_OUTPUT0_SCALE) && !defined(RLX_FW_MULTI_IO)
#define OUT_QUANT 1, RLX_OUTPUT0_SCALE, RLX_OUTPUT0_ZERO_POINT
#else
#define OUT_QUANT 0, 0.0f, 0
#endif

static int invoke(void)
{
    int status = model_invoke();
    /* Keeps the call a BL with a return site rather than a tail branch: the
     * instruction counter (rlx_edge.hil.qemu.count_instructions) closes its
     * window at the instruction after each BL to the model. */
    __asm__ volatile("" ::: "memory");
    return status;
}

static const struct rlx_hil_target target = {
    .in_buf = input_buf,
    .input_bytes = sizeof input_buf,
    .out_buf = output_buf,
    .output_bytes = sizeof output_buf,
    .arena_bytes = sizeof rlx_fw_arena,
    .invoke = invoke,
    .model_hash = RLX_MODEL_HASH,
    .model_name = RLX_MODEL_NAME,
    .core = RLX_FW_CORE,
    .input = {IN_DESC, IN_QUANT},
    .output = {OUT_DESC, OUT_QUANT},
};

int main(void)
{
    board_init();
    rlx_ticks_init();
    return rlx_hil_serve(&target);
}

#endif
