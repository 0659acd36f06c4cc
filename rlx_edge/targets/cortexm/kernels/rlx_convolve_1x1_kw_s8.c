/*
 * 1x1 convolutions on 8 or 16 input channels (2 or 4 whole words a pixel). On so short a reduction
 * the 4 x 2 GEMM's per-block work (the accumulators' start, the even rows' corrections, the
 * requantization of 8 outputs from 12 words of constants, the packing) costs more than its MACs
 * (48x48x8->16: 2.39 instructions a MAC on the M4).
 *
 * gemm.chan is one stream of K / 4 + 3 words per output channel (rules.conv_1x1_kw_stream): the
 * folded bias (doubled for the _s8 instance), the channel's K int8 weights as they are, the
 * multiplier and rq_add.
 *
 * On DSP cores the channels go RLX_KW_ROWS at a time: each group is first widened into scratch
 * (a record a channel: the bias, the SXTB16 pairs of its weights, the multiplier, rq_add and its
 * trailing zeros, the right shift e - 1), between jump words that chain the records' code; an asm
 * pass then takes one pixel at a time, its K inputs widened in registers once, through the group's
 * records: per channel one LDM of the record (four for K = 16), K / 2 SMLAD, the requantization and
 * one store: 10 instructions for 8 MACs, 17 for 16 (2 more with _clamp's bound). The channel code is
 * a loop of RLX_KW_UNROLL_S channels ended by a load of pc from the records (the next chunk's code or
 * the pixel's end), so that no compare disturbs the flags of the pixel loop's own.
 *
 * Three instances, as rlx_convolve_1x1_k4_s8.c's: _relu_s8 where the lower bound is the output zero
 * point and the upper one 127 (USAT of the doubled accumulator at 0 is the lower clamp), _clamp_s8
 * where the upper bound is below 127 (ReLU6: rq_add holds the zero point less k = act_max - 127, so
 * that the saturation at 127 clamps at act_max, and k is added back), _s8 for the int8 range (rq_mode
 * 2: the sign correction of rlx_rq_fast, the inputs doubled once a pixel instead, the bias in the
 * stream).
 *
 * Elsewhere (no DSP, -O0) the stream's arithmetic in C.
 */
#include "rlx_nn.h"
#include "rlx_nn_support.h"

#if defined(__ARM_FEATURE_DSP) && (__ARM_FEATURE_DSP == 1) && !defined(RLX_NO_ASM) && defined(__GNUC__)
#define RLX_KW_ASM 1
#else
#define RLX_KW_ASM 0
#endif

#if RLX_KW_ASM
#define RLX_KW_ROWS 8 /* channels a group (rules._KW_ROWS: the scratch) */

/* A group's pass: the frame of rlx_kw_pass (its first 6 words), filled by rlx_kw_asm, then what
 * rlx_kw_widen reads. */
typedef struct {
    int32_t *rec;         /* the group's records: the entry word first */
    const int8_t *pa;     /* the first pixel */
    int32_t step;         /* bytes from a pixel to the next */
    const int8_t *pa_end; /* pa past the last pixel */
    int32_t oadv;         /* the output pointer's step after a pixel's channels: out_c - rows */
    int32_t k;            /* the clamp instance: act_max - 127, added back after the saturation */
    uint32_t loop;        /* the pass's pixel loop for kq, its chunk code and its pixel end (Thumb), */
    uint32_t code, exit;  /* which it writes here */
    int32_t bytes, kq;    /* the chunk code's bytes a channel; weight words a channel */
} rlx_kw_job;

/* One channel of one pixel, K = 8 (every instruction 32-bit: a chunk's code is entered at a
 * multiple of a channel's). r0-r3 the pixel's pairs (x0 x2, x1 x3, x4 x6, x5 x7), r4 the records, r5
 * the output; LDM gives r6 the bias (then the accumulator), r7-r10 the weight pairs, r11 the
 * multiplier, r12 rq_add, lr the shift. RQ: the accumulator A to its output, stored; the relu
 * instance: USAT of the doubled accumulator at 0 is the lower clamp (the output is monotone in it
 * and 0 gives the zero point; rules checks the constant channels). */
#define RLX_KW_RQ_RELU(A, M, R, S)                                                               \
    "usat   " A ", #31, " A ", lsl #1\n\t"                                                       \
    "smmlar " A ", " A ", " M ", " R "\n\t"                                                      \
    "asr.w  " A ", " A ", " S "\n\t"                                                             \
    "ssat   " A ", #8, " A ", asr #1\n\t"                                                        \
    "strb   " A ", [r5], #1\n\t"
/* an upper bound below 127: rq_add holds the zero point less k = act_max - 127, so that the
 * saturation at 127 is the clamp at act_max; k ([sp, #20]) is added back */
#define RLX_KW_RQ_CLAMP(A, M, R, S)                                                              \
    "usat   " A ", #31, " A ", lsl #1\n\t"                                                       \
    "smmlar " A ", " A ", " M ", " R "\n\t"                                                      \
    "asr.w  " A ", " A ", " S "\n\t"                                                             \
    "ssat   " A ", #8, " A ", asr #1\n\t"                                                        \
    "ldr.w  " M ", [sp, #20]\n\t"                                                                \
    "add.w  " A ", " A ", " M "\n\t"                                                             \
    "strb   " A ", [r5], #1\n\t"
/* the int8 range: doubled inputs and bias, rlx_rq_fast's sign correction */
#define RLX_KW_RQ_SIGN(A, M, R, S)                                                               \
    "smmlar " M ", " A ", " M ", " R "\n\t"                                                      \
    "add.w  " A ", " M ", " A ", asr #31\n\t"                                                    \
    "asr.w  " A ", " A ", " S "\n\t"                                                             \
    "ssat   " A ", #8, " A ", asr #1\n\t"                                                        \
    "strb   " A ", [r5], #1\n\t"
#define RLX_KW_ROW8(RQ)                                                                          \
    "ldm.w  r4!, {r6, r7, r8, r9, r10, r11, r12, lr}\n\t"                                        \
    "smlad  r6, r0, r7, r6\n\t"                                                                  \
    "smlad  r6, r1, r8, r6\n\t"                                                                  \
    "smlad  r6, r2, r9, r6\n\t"                                                                  \
    "smlad  r6, r3, r10, r6\n\t" RQ("r6", "r11", "r12", "lr")
/* K = 16: the pairs r0-r3 and r6-r9, the accumulator r10, the record through r11, r12 and lr a
 * few words at a time. */
#define RLX_KW_ROW16(RQ)                                                                         \
    "ldm.w  r4!, {r10, r11, r12, lr}\n\t"                                                        \
    "smlad  r10, r0, r11, r10\n\t"                                                               \
    "smlad  r10, r1, r12, r10\n\t"                                                               \
    "smlad  r10, r2, lr, r10\n\t"                                                                \
    "ldm.w  r4!, {r11, r12, lr}\n\t"                                                             \
    "smlad  r10, r3, r11, r10\n\t"                                                               \
    "smlad  r10, r6, r12, r10\n\t"                                                               \
    "smlad  r10, r7, lr, r10\n\t"                                                                \
    "ldm.w  r4!, {r11, r12}\n\t"                                                                 \
    "smlad  r10, r8, r11, r10\n\t"                                                               \
    "smlad  r10, r9, r12, r10\n\t"                                                               \
    "ldm.w  r4!, {r11, r12, lr}\n\t" RQ("r10", "r11", "r12", "lr")
/* A pixel's K inputs at r10 widened into the pairs (r11: the step to the next pixel, r12 its end). */
#define RLX_KW_LOAD8                                                                             \
    "ldr    r0, [r10]\n\t"                                                                       \
    "ldr    r2, [r10, #4]\n\t"                                                                   \
    "add    r10, r10, r11\n\t"                                                                   \
    "str    r10, [sp, #4]\n\t"                                                                   \
    "cmp    r10, r12\n\t"                                                                        \
    "sxtb16 r1, r0, ror #8\n\t"                                                                  \
    "sxtb16 r0, r0\n\t"                                                                          \
    "sxtb16 r3, r2, ror #8\n\t"                                                                  \
    "sxtb16 r2, r2\n\t"
/* K = 16: its second half first (r6-r9), then the first half as K = 8's */
#define RLX_KW_LOAD16                                                                            \
    "ldr    r6, [r10, #8]\n\t"                                                                   \
    "ldr    r8, [r10, #12]\n\t"                                                                  \
    "sxtb16 r7, r6, ror #8\n\t"                                                                  \
    "sxtb16 r6, r6\n\t"                                                                          \
    "sxtb16 r9, r8, ror #8\n\t"                                                                  \
    "sxtb16 r8, r8\n\t"
/* the sign instance's doubled inputs */
#define RLX_KW_DOUBLE8                                                                           \
    "sadd16 r0, r0, r0\n\t"                                                                      \
    "sadd16 r1, r1, r1\n\t"                                                                      \
    "sadd16 r2, r2, r2\n\t"                                                                      \
    "sadd16 r3, r3, r3\n\t"
#define RLX_KW_DOUBLE16                                                                          \
    "sadd16 r6, r6, r6\n\t"                                                                      \
    "sadd16 r7, r7, r7\n\t"                                                                      \
    "sadd16 r8, r8, r8\n\t"                                                                      \
    "sadd16 r9, r9, r9\n\t"
#define RLX_KW_UNROLL_S "2" /* channels a chunk of code (a power of two) */
/* A K's chunk code (label C: RLX_KW_UNROLL_S channels of BYTES each) and pixel end (label E): the
 * output pointer past the pixel's other channels, then the next pixel (its loop at label L) or the
 * shared return (9). */
#define RLX_KW_CHUNK(C, E, L, ROW, BYTES)                                                        \
    C ":\n\t" ROW ROW "8:\n\t"                                                                   \
    ".ifne (8b - " C "b) - " RLX_KW_UNROLL_S " * " #BYTES "\n\t"                                 \
    ".error \"rlx_kw: a channel's code is not " #BYTES " bytes (the entry)\"\n\t"                \
    ".endif\n\t"                                                                                 \
    "ldr    pc, [r4], #4\n\t" E ":\n\t"                                                          \
    "ldr    r7, [sp, #16]\n\t"                                                                   \
    "add    r5, r5, r7\n\t"                                                                      \
    "bne    " L "b\n\t"                                                                          \
    "b      9f\n\t"

/* rlx_kw_job *j, int8_t *out: the pixels [pa, pa_end) step apart, each through every record of the
 * group, to out on (out_c bytes a pixel), with j->kq's code; out NULL: that code's pixel loop, its
 * chunk code and its pixel end (Thumb) into j->loop, j->code, j->exit, for the pass and
 * rlx_kw_widen. The frame below sp: [0] rec, [4] pa, [8] step, [12] pa_end, [16] oadv, [20] k; the
 * flags of a pixel's CMP (pa against its end) decide the BNE after its channels. 4-byte aligned:
 * the ADRs' offsets are fixed when assembled (see rlx_gemm_row_s8).
 * One function an instance (RQ, the inputs' doubling D8 and D16, a channel's code bytes B8 and
 * B16), both K's code in it: a model links the instances it runs. */
#define RLX_KW_PASS(NAME, RQ, D8, D16, B8, B16)                                                  \
    __attribute__((naked, noinline, noipa, used, aligned(4))) static void NAME(                  \
        rlx_kw_job *j __attribute__((unused)), int8_t *out __attribute__((unused)))              \
    {                                                                                            \
        __asm__(".syntax unified\n\t"                                                            \
                "cbnz   r1, 4f\n\t"                                                              \
                "ldr    r3, [r0, #40]\n\t"                                                       \
                "adr    r1, 21f + 1\n\t"                                                         \
                "adr    r2, 1f + 1\n\t"                                                          \
                "cmp    r3, #2\n\t"                                                              \
                "adr    r3, 3f + 1\n\t"                                                          \
                "ittt   ne\n\t"                                                                  \
                "adrne  r1, 31f + 1\n\t"                                                         \
                "adrne  r2, 11f + 1\n\t"                                                         \
                "adrne  r3, 13f + 1\n\t"                                                         \
                "add    r0, r0, #24\n\t"                                                         \
                "stm    r0, {r1, r2, r3}\n\t"                                                    \
                "bx     lr\n\t"                                                                  \
                "4:\n\t"                                                                         \
                "push   {r4-r11, lr}\n\t"                                                        \
                "sub    sp, sp, #24\n\t"                                                         \
                "ldm    r0, {r2, r3, r4, r6, r7, r8, r9}\n\t"                                    \
                "stm    sp, {r2, r3, r4, r6, r7, r8}\n\t"                                        \
                "mov    r5, r1\n\t"                                                              \
                "bx     r9\n\t"                                                                  \
                /* K = 16's pixel loop loads its second half, then K = 8's (whose LDM again    \
                 * reloads the same words) its first */                                        \
                "31:\n\t"                                                                      \
                "ldm    sp, {r4, r10, r11, r12}\n\t" RLX_KW_LOAD16 D16 "21:\n\t"              \
                "ldm    sp, {r4, r10, r11, r12}\n\t" RLX_KW_LOAD8 D8 "ldr    pc, [r4], #4\n\t" \
                RLX_KW_CHUNK("1", "3", "21", RLX_KW_ROW8(RQ), B8)                                \
                    RLX_KW_CHUNK("11", "13", "31", RLX_KW_ROW16(RQ), B16)                        \
                "9:\n\t"                                                                         \
                "add    sp, sp, #24\n\t"                                                         \
                "pop    {r4-r11, pc}\n\t");                                                      \
    }
RLX_KW_PASS(rlx_kw_pass_relu, RLX_KW_RQ_RELU, "", "", 40, 68)
RLX_KW_PASS(rlx_kw_pass_clamp, RLX_KW_RQ_CLAMP, "", "", 48, 76)
RLX_KW_PASS(rlx_kw_pass_sign, RLX_KW_RQ_SIGN, RLX_KW_DOUBLE8, RLX_KW_DOUBLE16, 40, 68)

typedef void (*rlx_kw_pass_fn)(rlx_kw_job *j, int8_t *out);

/* The group's rows channels of the stream at src (kq weight words each) widened into its records at
 * rec: [entry] [the first chunk's records] [jump] [RLX_KW_UNROLL_S records] [jump] ... [exit], the
 * first chunk 1 to RLX_KW_UNROLL_S channels (entered past the code of the others, bytes a channel),
 * each jump the chunk code's address, the last the pixel's end (Thumb: bit 0 set); lab: the job's
 * code, exit, bytes and kq. */
__attribute__((naked, noinline, noipa, used)) static void rlx_kw_widen(
    const int32_t *src __attribute__((unused)), int32_t *rec __attribute__((unused)),
    int32_t rows __attribute__((unused)), const uint32_t *lab __attribute__((unused)))
{
    __asm__(".syntax unified\n\t"
            "push   {r4-r9, lr}\n\t"
            "ldm    r3, {r3, r4, r5, r6}\n\t"
            "rsb    r7, r2, #0\n\t" /* the code skipped: -rows % U channels */
            "and    r7, r7, #(" RLX_KW_UNROLL_S " - 1)\n\t"
            "mla    r7, r7, r5, r3\n\t"
            "str    r7, [r1], #4\n\t"
            "1:\n\t"
            "ldr    r7, [r0], #4\n\t"
            "str    r7, [r1], #4\n\t"
            "mov    r8, r6\n\t"
            "2:\n\t"
            "ldr    r7, [r0], #4\n\t"
            "sxtb16 r9, r7\n\t"
            "sxtb16 r7, r7, ror #8\n\t"
            "strd   r9, r7, [r1], #8\n\t"
            "subs   r8, r8, #1\n\t"
            "bne    2b\n\t"
            "ldm    r0!, {r7, r8}\n\t"
            "rbit   r9, r8\n\t"
            "clz    r9, r9\n\t"
            "stm    r1!, {r7, r8, r9}\n\t"
            "subs   r2, r2, #1\n\t"
            "beq    3f\n\t"
            "tst    r2, #(" RLX_KW_UNROLL_S " - 1)\n\t"
            "it     eq\n\t"
            "streq  r3, [r1], #4\n\t"
            "b      1b\n\t"
            "3:\n\t"
            "str    r4, [r1]\n\t"
            "pop    {r4-r9, pc}\n\t");
}

/* Every group of channels: widened, then every pixel, in one run (stride 1) or a run an output row;
 * inst: 0 relu, 1 clamp, 2 sign (the pass's instance). */
RLX_INLINE void rlx_kw_asm(const rlx_conv_params *p, const int8_t *in, int8_t *out, int32_t *rec, rlx_kw_pass_fn pass,
                           int32_t inst)
{
    const int32_t c = p->in_c, out_c = p->gemm.out_c, out_h = p->out_h;
    const int32_t dense = p->stride_w == 1 && p->stride_h == 1;
    const int32_t lines = dense ? 1 : p->batches * out_h;
    const int32_t run = (dense ? p->batches * out_h * p->out_w : p->out_w) * c * p->stride_w;
    rlx_kw_job j;
    j.kq = c >> 2;
    pass(&j, 0);
    j.rec = rec;
    j.step = p->stride_w * c;
    j.bytes = (c == 8 ? 40 : 68) + (inst == 1 ? 8 : 0); /* the clamp's LDR and ADD */
    j.k = inst == 1 ? p->gemm.act_max - 127 : 0;
    for (int32_t r0 = 0; r0 < out_c; r0 += RLX_KW_ROWS) {
        const int32_t rows = out_c - r0 < RLX_KW_ROWS ? out_c - r0 : RLX_KW_ROWS;
        rlx_kw_widen(p->gemm.chan + (j.kq + 3) * r0, rec, rows, &j.code);
        j.oadv = out_c - rows;
        for (int32_t t = 0; t < lines; t++) {
            /* output row oy of image n: input row oy stride_h of it (dense: all in one run from in) */
            const int32_t n = t / out_h, oy = t - n * out_h;
            j.pa = in + (n * p->in_h + oy * p->stride_h) * p->in_w * c;
            j.pa_end = j.pa + run;
            pass(&j, out + r0 + t * p->out_w * out_c);
        }
    }
}
#else
/* The portable build (and -O0): the stream's arithmetic in C, 4 channels x 2 pixels at a time (the
 * GEMM's block: each weight loaded once for both pixels, the 8 accumulators in registers), then the
 * last out_c % 4 channels one at a time. */
/* A channel's accumulator to its output; inst: 0 relu (as the asm: rlx_rq_fast of the accumulator
 * clamped at 0, exact there: rules, so with no sign correction, saturated to int8, which the constant
 * channels' value may leave), else the fast form with the bounds (the clamp's rq_add holds k less,
 * which k adds back). */
RLX_INLINE int8_t rlx_kw_out(const rlx_gemm_params *g, int32_t inst, const int32_t *s, int32_t words, int32_t acc)
{
    const int32_t add = s[words - 1], e = rlx_rq_e(add);
    if (inst == 0) {
        return (int8_t)rlx_sat8(rlx_smmlar((int32_t)((uint32_t)(acc > 0 ? acc : 0) << 1), s[words - 2], add) >> e);
    }
    const int32_t k = inst == 1 ? g->act_max - 127 : 0;
    return (int8_t)rlx_clamp(rlx_rq_fast(acc, s[words - 2], add, e) + k, g->act_min, g->act_max);
}

/* pixels xa and xb (the same for a pixel alone) to oa and ob; c a constant in each caller, so that
 * every input and weight is at a fixed offset from one pointer: both pixels are first copied into
 * x2 (pixel b 16 bytes after pixel a) */
RLX_INLINE void rlx_kw_px2(const rlx_gemm_params *g, int32_t inst, int32_t c, const int8_t *xa, const int8_t *xb,
                           int8_t *oa, int8_t *ob)
{
    const int32_t words = (c >> 2) + 3, out_c = g->out_c, h = inst == 2; /* the sign instance's bias: doubled */
    int8_t x2[32];
    for (int32_t k = 0; k < c; k++) {
        x2[k] = xa[k];
        x2[16 + k] = xb[k];
    }
    const int32_t *s = g->chan;
    int32_t r = 0;
    for (; r + 4 <= out_c; r += 4, s += 4 * words) {
        const int8_t *w = (const int8_t *)(s + 1), *px = x2;
        const int32_t d = 4 * words; /* bytes from a channel's weights to the next one's */
        int32_t a0 = s[0] >> h, a1 = s[words] >> h, a2 = s[2 * words] >> h, a3 = s[3 * words] >> h;
        int32_t b0 = a0, b1 = a1, b2 = a2, b3 = a3;
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC unroll 4
#endif
        for (; px != x2 + c; px++, w++) {
            const int32_t va = px[0], vb = px[16];
            const int32_t u0 = w[0], u1 = w[d], u2 = w[2 * d], u3 = w[3 * d];
            a0 += va * u0;
            b0 += vb * u0;
            a1 += va * u1;
            b1 += vb * u1;
            a2 += va * u2;
            b2 += vb * u2;
            a3 += va * u3;
            b3 += vb * u3;
        }
        oa[r] = rlx_kw_out(g, inst, s, words, a0);
        ob[r] = rlx_kw_out(g, inst, s, words, b0);
        oa[r + 1] = rlx_kw_out(g, inst, s + words, words, a1);
        ob[r + 1] = rlx_kw_out(g, inst, s + words, words, b1);
        oa[r + 2] = rlx_kw_out(g, inst, s + 2 * words, words, a2);
        ob[r + 2] = rlx_kw_out(g, inst, s + 2 * words, words, b2);
        oa[r + 3] = rlx_kw_out(g, inst, s + 3 * words, words, a3);
        ob[r + 3] = rlx_kw_out(g, inst, s + 3 * words, words, b3);
    }
    for (; r < out_c; r++, s += words) {
        const int8_t *w = (const int8_t *)(s + 1);
        int32_t a = s[0] >> h, b = a;
        for (int32_t k = 0; k < c; k++) {
            a += x2[k] * w[k];
            b += x2[16 + k] * w[k];
        }
        oa[r] = rlx_kw_out(g, inst, s, words, a);
        ob[r] = rlx_kw_out(g, inst, s, words, b);
    }
}

/* inst: as rlx_kw_out's, a constant in each entry */
RLX_INLINE void rlx_kw_c(const rlx_conv_params *p, const int8_t *in, int8_t *out, int32_t inst)
{
    const int32_t c = p->in_c, out_c = p->gemm.out_c, step = p->stride_w * c;
    for (int32_t n = 0; n < p->batches; n++) {
        for (int32_t oy = 0; oy < p->out_h; oy++) {
            const int8_t *row = in + ((n * p->in_h + oy * p->stride_h) * p->in_w) * c;
            for (int32_t ox = 0; ox < p->out_w; ox += 2, out += 2 * out_c) {
                const int32_t two = ox + 1 < p->out_w; /* else a last pixel alone, written twice */
                const int8_t *xa = row + ox * step, *xb = two ? xa + step : xa;
                int8_t *ob = two ? out + out_c : out;
                if (c == 8) {
                    rlx_kw_px2(&p->gemm, inst, 8, xa, xb, out, ob);
                } else {
                    rlx_kw_px2(&p->gemm, inst, 16, xa, xb, out, ob);
                }
            }
            out -= (p->out_w & 1) * out_c; /* the pixel alone stepped the output by two */
        }
    }
}
#endif

/* one entry an instance for both K (one pass function holds both codes) */
void rlx_convolve_1x1_kw_relu_s8(const rlx_conv_params *p, const int8_t *in, int8_t *out, int16_t *scratch)
{
#if RLX_KW_ASM
    rlx_kw_asm(p, in, out, (int32_t *)scratch, rlx_kw_pass_relu, 0);
#else
    (void)scratch;
    rlx_kw_c(p, in, out, 0);
#endif
}

void rlx_convolve_1x1_kw_clamp_s8(const rlx_conv_params *p, const int8_t *in, int8_t *out, int16_t *scratch)
{
#if RLX_KW_ASM
    rlx_kw_asm(p, in, out, (int32_t *)scratch, rlx_kw_pass_clamp, 1);
#else
    (void)scratch;
    rlx_kw_c(p, in, out, 1);
#endif
}

void rlx_convolve_1x1_kw_s8(const rlx_conv_params *p, const int8_t *in, int8_t *out, int16_t *scratch)
{
#if RLX_KW_ASM
    rlx_kw_asm(p, in, out, (int32_t *)scratch, rlx_kw_pass_sign, 2);
#else
    (void)scratch;
    rlx_kw_c(p, in, out, 2);
#endif
}
