/*
 * 1x1 convolutions on at most 4 input channels (e.g. a pointwise layer on an RGB image): every
 * pixel's reduction is one word, so the GEMM's per-block set-up, its partial-quad and
 * partial-block paths and its requantization of 4 x 2 blocks cost many times the MACs
 * (1x1 7x7x3->5 took 12.2 instructions a MAC on the M4; 3.4 here, 2.9 with _relu12_s8).
 *
 * gemm.chan is one stream of 5 words per output channel (rules.conv_1x1_k4_stream): the folded
 * bias, the channel's K <= 4 weights as one int8 word (weight k at byte 4 - K + k, the bytes
 * below 0), the multiplier, rq_add and its trailing zeros (the right shift e - 1, rules.fast_requant).
 * A pixel's input is read as the word that ends at its last byte, so its bytes line up with
 * the weights' (those of the pixel before it meet weight 0).
 *
 * On DSP cores each call first widens the weights once into scratch (6 words a channel: the
 * bias, the SXTB16 pairs of the weights, the 3 requantization words); an asm pass then takes
 * two pixels at a time, their inputs widened in 4 registers, through an unrolled run of up to
 * RLX_K4_ROWS channels, one LDM of a channel's 6 words serving both pixels' 2 MACs, requantization
 * and store. The last pixel of an odd run goes alone (as a pair with itself).
 *
 * Four instances: _relu_s8 where the lower bound is the output zero point and the upper one 127
 * (USAT of the doubled accumulator at 0 is then the lower clamp: the output is monotone in it and
 * 0 gives the zero point; rules checks the constant channels), _clamp_s8 where the upper bound is
 * below 127 (ReLU6: rq_add holds the zero point less k = act_max - 127, so that the saturation at
 * 127 clamps at act_max, and k is added back), _s8 for the int8 range (rq_mode 2: the sign
 * correction of rlx_rq_fast, the inputs doubled once a pair instead); _relu12_s8, _relu_s8 on at most
 * RLX_K4_ROWS channels whose shifts e are 4 to 11: the bias and weights widened times 2**(12 - e), so
 * that one immediate shift of 12 serves every channel (13 instructions a channel of a pair, not 15),
 * and a run's lone pixels (the tensor's first, an odd last) inside its one call.
 */
#include "rlx_nn.h"
#include "rlx_nn_support.h"

#if defined(__ARM_FEATURE_DSP) && (__ARM_FEATURE_DSP == 1) && !defined(RLX_NO_ASM) && defined(__GNUC__)
#define RLX_K4_ASM 1
#else
#define RLX_K4_ASM 0
#endif

#define RLX_K4_WORDS 5 /* a channel's words in gemm.chan */

#if RLX_K4_ASM
#define RLX_K4_ROWS 8 /* channels of one unrolled pass */

/* One pass over pixel pairs: the asm's frame, filled by rlx_k4_run. */
typedef struct {
    const int8_t *pa;     /* the first pair's pixel a: its word (the pixel's address + K - 4) */
    int32_t step;         /* bytes from a pixel's word to the next pixel's */
    const int8_t *pa_end; /* pa past the last pair */
    const int32_t *rec;   /* the pass's first channel in scratch (6 words a channel) */
    int32_t nb;           /* pixel b's outputs from pixel a's: out_c, or 0 for a pixel alone */
    int32_t oadv;         /* the output pointer's step after a pair's channels: 2 out_c - rows */
    int32_t rows;         /* channels in the pass, 1 to RLX_K4_ROWS */
    int32_t k;            /* the clamp instance: act_max - 127, added back after the saturation */
} rlx_k4_job;

/* One channel of both pixels (15 instructions, all 32-bit: the pass enters its run of
 * RLX_K4_ROWS channels at 60 bytes a channel from its end; the clamp's 18, 72 bytes). Registers:
 * r0 r1 pixel a's pairs (x0 x2, x1 x3), r2 r3 pixel b's, r4 the channel's 6 words, r5 pixel a's
 * output, r6 pixel b's from it; LDM gives r7 the bias, r8 r9 the weight pairs, r10 the
 * multiplier, r11 rq_add, r12 the shift; lr and r7 the accumulators. */
#define RLX_K4_MACS                                                                              \
    "ldm.w  r4!, {r7, r8, r9, r10, r11, r12}\n\t"                                                \
    "smlad  lr, r0, r8, r7\n\t"                                                                  \
    "smlad  lr, r1, r9, lr\n\t"                                                                  \
    "smlad  r7, r2, r8, r7\n\t"                                                                  \
    "smlad  r7, r3, r9, r7\n\t"
#define RLX_K4_SHIFT                                                                             \
    "asr.w  lr, lr, r12\n\t"                                                                     \
    "asr.w  r7, r7, r12\n\t"                                                                     \
    "ssat   lr, #8, lr, asr #1\n\t"                                                              \
    "ssat   r7, #8, r7, asr #1\n\t"
#define RLX_K4_STORE                                                                             \
    "strb.w r7, [r5, r6]\n\t"                                                                    \
    "strb   lr, [r5], #1\n\t"
/* the lower bound at the zero point: USAT doubles the accumulator and clamps it at 0 */
#define RLX_K4_RQ_RELU                                                                           \
    RLX_K4_MACS "usat   lr, #31, lr, lsl #1\n\t"                                                 \
                "usat   r7, #31, r7, lsl #1\n\t"                                                 \
                "smmlar lr, lr, r10, r11\n\t"                                                    \
                "smmlar r7, r7, r10, r11\n\t" RLX_K4_SHIFT
#define RLX_K4_ROW_RELU RLX_K4_RQ_RELU RLX_K4_STORE
/* and an upper one below 127: rq_add holds the zero point less k = act_max - 127, so that the
 * saturation at 127 is the clamp at act_max; k ([sp, #28]) is added back */
#define RLX_K4_ROW_CLAMP                                                                         \
    RLX_K4_RQ_RELU "ldr.w  r10, [sp, #28]\n\t"                                                   \
                   "add.w  lr, lr, r10\n\t"                                                      \
                   "add.w  r7, r7, r10\n\t" RLX_K4_STORE
/* the int8 range: doubled inputs and bias, rlx_rq_fast's sign correction */
#define RLX_K4_ROW_SIGN                                                                          \
    RLX_K4_MACS "smmlar r8, lr, r10, r11\n\t"                                                    \
                "smmlar r9, r7, r10, r11\n\t"                                                    \
                "add.w  lr, r8, lr, asr #31\n\t"                                                 \
                "add.w  r7, r9, r7, asr #31\n\t" RLX_K4_SHIFT RLX_K4_STORE
#define RLX_K4_DOUBLE                                                                            \
    "sadd16 r0, r0, r0\n\t"                                                                      \
    "sadd16 r1, r1, r1\n\t"                                                                      \
    "sadd16 r2, r2, r2\n\t"                                                                      \
    "sadd16 r3, r3, r3\n\t"
#define RLX_K4_ROWS8(ROW) ROW ROW ROW ROW ROW ROW ROW ROW

/* rlx_k4_job *j, int8_t *out: the frame below sp is [0] pa, [4] step, [8] pa_end, [12] rec,
 * [16] nb, [20] oadv, [24] the run's entry (Thumb), [28] k; r5 walks the outputs across pairs. The
 * flags of a pair's CMP (pa against its end) decide the BNE after its channels (nothing between
 * sets them). 4-byte aligned with a word-aligning directive: the ADR's offset is fixed when
 * assembled (see rlx_gemm_row_s8). */
#define RLX_K4_PAIRS(NAME, DOUBLE, ROW, BYTES)                                                   \
    __attribute__((naked, noinline, noipa, used, aligned(4))) static void NAME(                  \
        const rlx_k4_job *j __attribute__((unused)), int8_t *out __attribute__((unused)))        \
    {                                                                                            \
        __asm__(".syntax unified\n\t"                                                            \
                "push   {r4-r11, lr}\n\t"                                                        \
                "sub    sp, sp, #32\n\t"                                                         \
                "ldm    r0, {r2, r3, r4, r5, r6, r7, r8, r10}\n\t"                               \
                "adr    r9, 8f\n\t"                                                              \
                "mov    r11, #" #BYTES "\n\t"                                                    \
                "mls    r9, r8, r11, r9\n\t"                                                     \
                "orr    r9, r9, #1\n\t"                                                          \
                "stm    sp, {r2, r3, r4, r5, r6, r7, r9, r10}\n\t"                               \
                "mov    r5, r1\n\t"                                                              \
                "2:\n\t"                                                                         \
                "ldm    sp, {r7, r8, r9}\n\t"                                                    \
                "ldr    r0, [r7]\n\t"                                                            \
                "ldr    r2, [r7, r8]\n\t"                                                        \
                "add    r7, r7, r8, lsl #1\n\t"                                                  \
                "str    r7, [sp]\n\t"                                                            \
                "cmp    r7, r9\n\t"                                                              \
                "sxtb16 r1, r0, ror #8\n\t"                                                      \
                "sxtb16 r0, r0\n\t"                                                              \
                "sxtb16 r3, r2, ror #8\n\t"                                                      \
                "sxtb16 r2, r2\n\t" DOUBLE "ldrd   r4, r6, [sp, #12]\n\t"                        \
                "ldr    pc, [sp, #24]\n\t"                                                       \
                ".p2align 2\n\t"                                                               \
                "7:\n\t" RLX_K4_ROWS8(ROW) "8:\n\t"                                                 \
                ".ifne (8b - 7b) - 8 * " #BYTES "\n\t"                                          \
                ".error \"rlx_k4: a channel's code is not " #BYTES " bytes (the entry)\"\n\t"       \
                ".endif\n\t"                                                                    \
                "ldr    r7, [sp, #20]\n\t"                                                       \
                "add    r5, r5, r7\n\t"                                                          \
                "bne    2b\n\t"                                                                  \
                "add    sp, sp, #32\n\t"                                                         \
                "pop    {r4-r11, pc}\n\t");                                                      \
    }
RLX_K4_PAIRS(rlx_k4_pairs_relu, "", RLX_K4_ROW_RELU, 60)
RLX_K4_PAIRS(rlx_k4_pairs_sign, RLX_K4_DOUBLE, RLX_K4_ROW_SIGN, 60)
RLX_K4_PAIRS(rlx_k4_pairs_clamp, "", RLX_K4_ROW_CLAMP, 72)
/* _relu12: the channel's weights and bias scaled by 2**m (m = 12 - e, 1 to 8, rules.conv_1x1_k4_stream),
 * so that every channel's requantization shifts by 12, an immediate of the saturation: SMMLA (no
 * rounding) with rq_add 2**m (add + 1/2) gives the same floor at 2**12 as SMMLAR's at 2**e. 13
 * instructions; LDM gives r7 the bias, r8 r9 the weight pairs, r10 the multiplier, r11 rq_add. */
#define RLX_K4_ROW_RELU12                                                                        \
    "ldm.w  r4!, {r7, r8, r9, r10, r11}\n\t"                                                      \
    "smlad  lr, r0, r8, r7\n\t"                                                                  \
    "smlad  lr, r1, r9, lr\n\t"                                                                  \
    "smlad  r7, r2, r8, r7\n\t"                                                                  \
    "smlad  r7, r3, r9, r7\n\t"                                                                  \
    "usat   lr, #31, lr, lsl #1\n\t"                                                             \
    "usat   r7, #31, r7, lsl #1\n\t"                                                             \
    "smmla  lr, lr, r10, r11\n\t"                                                                \
    "smmla  r7, r7, r10, r11\n\t"                                                                \
    "ssat   lr, #8, lr, asr #12\n\t"                                                             \
    "ssat   r7, #8, r7, asr #12\n\t" RLX_K4_STORE
/* _relu12's pass over one run of pixels (all its channels, out_c <= RLX_K4_ROWS): an optional pixel
 * alone first (lead) and last (trail), the pairs between, in one call. The asm's frame, filled by
 * rlx_k4_relu12. */
typedef struct {
    const int8_t *pa;      /* the first pair's pixel a: its word (the pixel's address + K - 4) */
    int32_t step;          /* bytes from a pixel's word to the next pixel's */
    const int8_t *pa_end;  /* pa past the last pair */
    const int32_t *rec;    /* the channels in scratch (5 words a channel) */
    int32_t nb;            /* pixel b's outputs from pixel a's: out_c */
    const uint32_t *lead;  /* the word of a pixel before the pairs, or NULL */
    int32_t rows;          /* out_c */
    const int8_t *trail;   /* the word of a pixel after the pairs, or NULL */
} rlx_k4_job12;

/* rlx_k4_job12 *j, int8_t *out: the frame below sp is [0] pa, [4] step, [8] pa_end, [12] rec, [16] nb,
 * [20] lead, [24] the run's entry (Thumb), [28] trail; r12 walks pa, r5 the outputs. A pixel alone is
 * a pair of itself with nb (r6) 0: its channels advance r5 by out_c, a pair's by out_c and then nb,
 * so that the lead leaves r5 at the pairs' outputs and the pairs leave it at the trail's. The flags
 * (Z: nothing follows) decide the BNE after the channels: a pair's CMP of pa against its end, the
 * lead's the same CMP, the trail's MOVS (its frame word cleared, so that it runs once). */
__attribute__((naked, noinline, noipa, used, aligned(4))) static void rlx_k4_pairs_relu12(
    const rlx_k4_job12 *j __attribute__((unused)), int8_t *out __attribute__((unused)))
{
    __asm__(".syntax unified\n\t"
            "push   {r4-r11, lr}\n\t"
            "sub    sp, sp, #32\n\t"
            "ldm    r0, {r2, r3, r4, r5, r6, r7, r8, r10}\n\t"
            "adr    r9, 8f\n\t"
            "mov    r11, #52\n\t"
            "mls    r9, r8, r11, r9\n\t"
            "orr    r9, r9, #1\n\t"
            "stm    sp, {r2, r3, r4, r5, r6, r7, r9, r10}\n\t"
            "mov    r5, r1\n\t"
            "mov    r12, r2\n\t"
            "cmp    r12, r4\n\t"
            "cbz    r7, 3f\n\t"
            "ldr    r0, [r7]\n\t"
            "b      4f\n\t"
            "3:\n\t"
            "bne    2f\n\t"
            "b      9f\n\t"
            "2:\n\t"
            "ldrd   r7, r8, [sp, #4]\n\t"
            "ldr    r0, [r12]\n\t"
            "ldr    r2, [r12, r7]\n\t"
            "add    r12, r12, r7, lsl #1\n\t"
            "cmp    r12, r8\n\t"
            "sxtb16 r1, r0, ror #8\n\t"
            "sxtb16 r0, r0\n\t"
            "sxtb16 r3, r2, ror #8\n\t"
            "sxtb16 r2, r2\n\t"
            "ldrd   r4, r6, [sp, #12]\n\t"
            "ldr    pc, [sp, #24]\n\t"
            /* a pixel alone: its word in r0, the flags set */
            "4:\n\t"
            "sxtb16 r1, r0, ror #8\n\t"
            "sxtb16 r0, r0\n\t"
            "mov    r2, r0\n\t"
            "mov    r3, r1\n\t"
            "ldr    r4, [sp, #12]\n\t"
            "mov    r6, #0\n\t"
            "ldr    pc, [sp, #24]\n\t"
            ".p2align 2\n\t"
            "7:\n\t" RLX_K4_ROWS8(RLX_K4_ROW_RELU12) "8:\n\t"
            ".ifne (8b - 7b) - 8 * 52\n\t"
            ".error \"rlx_k4: a channel's code is not 52 bytes (the entry)\"\n\t"
            ".endif\n\t"
            "add    r5, r5, r6\n\t"
            "bne    2b\n\t"
            "9:\n\t"
            "ldr    r0, [sp, #28]\n\t"
            "cbz    r0, 10f\n\t"
            "movs   r1, #0\n\t"
            "str    r1, [sp, #28]\n\t"
            "ldr    r0, [r0]\n\t"
            "b      4b\n\t"
            "10:\n\t"
            "add    sp, sp, #32\n\t"
            "pop    {r4-r11, pc}\n\t");
}

typedef void (*rlx_k4_pairs_fn)(const rlx_k4_job *j, int8_t *out);

/* _relu12's channels [s, s_end) widened into scratch at d: [bias k, w02 k, w13 k, mult, rq_add] from the
 * stream's [bias k, weights, mult, rq_add, k = 2**m], each weight pair's halves multiplied apart
 * (a shift of the pair would carry the low half's sign into the high one), 12 instructions a channel. */
__attribute__((naked, noinline, noipa, used)) static void rlx_k4_widen12(
    const int32_t *s __attribute__((unused)), const int32_t *s_end __attribute__((unused)),
    int32_t *d __attribute__((unused)))
{
    __asm__(".syntax unified\n\t"
            "push   {r4-r10}\n\t"
            "1:\n\t"
            "ldm    r0!, {r4, r5, r7, r8, r9}\n\t"
            "sxtb16 r6, r5, ror #8\n\t"
            "sxtb16 r5, r5\n\t"
            "smulbb r10, r5, r9\n\t"
            "smultb r5, r5, r9\n\t"
            "pkhbt  r5, r10, r5, lsl #16\n\t"
            "smulbb r10, r6, r9\n\t"
            "smultb r6, r6, r9\n\t"
            "pkhbt  r6, r10, r6, lsl #16\n\t"
            "stm    r2!, {r4, r5, r6, r7, r8}\n\t"
            "cmp    r0, r1\n\t"
            "bne    1b\n\t"
            "pop    {r4-r10}\n\t"
            "bx     lr\n\t");
}

/* The stream's channels [s, s_end) widened into scratch at d: [bias << dbl, w02, w13, mult, rq_add,
 * shift] (dbl 1: the sign instance's doubled bias), 7 instructions a channel. */
__attribute__((naked, noinline, noipa, used)) static void rlx_k4_widen(
    const int32_t *s __attribute__((unused)), const int32_t *s_end __attribute__((unused)),
    int32_t *d __attribute__((unused)), int32_t dbl __attribute__((unused)))
{
    __asm__(".syntax unified\n\t"
            "push   {r4-r9}\n\t"
            "1:\n\t"
            "ldm    r0!, {r4, r5, r7, r8, r9}\n\t"
            "lsl    r4, r4, r3\n\t"
            "sxtb16 r6, r5, ror #8\n\t"
            "sxtb16 r5, r5\n\t"
            "stm    r2!, {r4, r5, r6, r7, r8, r9}\n\t"
            "cmp    r0, r1\n\t"
            "bne    1b\n\t"
            "pop    {r4-r9}\n\t"
            "bx     lr\n\t");
}

/* count >= 1 pixels, step bytes apart from the word at pa: the pairs, then a last odd pixel alone
 * (a pair of itself, its outputs written twice). */
static void rlx_k4_run(rlx_k4_job *j, rlx_k4_pairs_fn pairs, const int8_t *pa, int32_t step, int32_t count,
                       int8_t *out, int32_t out_c)
{
    const int32_t n2 = count >> 1;
    j->nb = out_c;
    if (n2 > 0) {
        j->pa = pa;
        j->step = step;
        j->pa_end = pa + 2 * step * n2;
        pairs(j, out);
    }
    if (count & 1) {
        j->pa = pa + step * (count - 1);
        j->step = 0;
        j->pa_end = j->pa;
        j->nb = 0;
        pairs(j, out + (count - 1) * out_c);
    }
}

/* pairs: the instance's pass; dbl: its bias doubled (the sign instance); up: the clamp instance's
 * act_max - 127, else 0. Each entry names its own pass, so a model links only those it runs. */
static void rlx_k4_asm(const rlx_conv_params *p, const int8_t *in, int8_t *out, int32_t *rec, rlx_k4_pairs_fn pairs,
                       int32_t dbl, int32_t up)
{
    const int32_t c = p->in_c, out_c = p->gemm.out_c, out_w = p->out_w, out_h = p->out_h;
    rlx_k4_widen(p->gemm.chan, p->gemm.chan + RLX_K4_WORDS * out_c, rec, dbl);
    /* stride 1: every pixel of every image in one run; else a run an output row */
    const int32_t dense = p->stride_w == 1 && p->stride_h == 1;
    const int32_t step = p->stride_w * c, lines = dense ? 1 : p->batches * out_h;
    const int32_t run_px = dense ? p->batches * out_h * out_w : out_w;
    /* the word ending at the tensor's first pixel starts before it where K < 4: that pixel alone,
     * from its bytes moved to the top of a word */
    const int32_t skip = c < 4;
    uint32_t first = 0;
    if (skip) {
        if (p->batches * p->in_h * p->in_w * c >= 4) {
            first = rlx_rd32(in) << (8 * (4 - c));
        } else {
            for (int32_t k = 0; k < c; k++) {
                first |= (uint32_t)(uint8_t)in[k] << (8 * (4 - c + k));
            }
        }
    }
    rlx_k4_job j;
    j.k = up;
    for (int32_t r0 = 0; r0 < out_c; r0 += RLX_K4_ROWS) {
        const int32_t rows = out_c - r0 < RLX_K4_ROWS ? out_c - r0 : RLX_K4_ROWS;
        j.rec = rec + 6 * r0;
        j.oadv = 2 * out_c - rows;
        j.rows = rows;
        if (skip) {
            rlx_k4_run(&j, pairs, (const int8_t *)&first, 0, 1, out + r0, out_c);
        }
        const int8_t *row = in + c - 4; /* the current output row's first pixel's word */
        int8_t *dst = out + r0;
        for (int32_t t = 0, oy = 0; t < lines; t++, dst += run_px * out_c) {
            const int32_t s0 = t == 0 ? skip : 0;
            if (run_px > s0) {
                rlx_k4_run(&j, pairs, row + s0 * step, step, run_px - s0, dst + s0 * out_c, out_c);
            }
            /* strided: the next output row, in this image or the next */
            oy = oy + 1 == out_h ? 0 : oy + 1;
            row += (oy == 0 ? p->in_h - (out_h - 1) * p->stride_h : p->stride_h) * p->in_w * c;
        }
    }
}

/* _relu12: every run (stride 1: all pixels, else an output row) in one call; the tensor's first pixel
 * is the first run's lead where K < 4 (the word ending at it starts before the tensor: its bytes
 * moved to the top of a word), an odd pixel left over the last run's trail. */
static void rlx_k4_relu12(const rlx_conv_params *p, const int8_t *in, int8_t *out, int32_t *rec)
{
    const int32_t c = p->in_c, out_c = p->gemm.out_c, out_w = p->out_w, out_h = p->out_h;
    rlx_k4_widen12(p->gemm.chan, p->gemm.chan + RLX_K4_WORDS * out_c, rec);
    const int32_t dense = p->stride_w == 1 && p->stride_h == 1;
    const int32_t step = p->stride_w * c, lines = dense ? 1 : p->batches * out_h;
    const int32_t run_px = dense ? p->batches * out_h * out_w : out_w;
    uint32_t first = 0;
    rlx_k4_job12 j;
    j.step = step;
    j.rec = rec;
    j.nb = out_c;
    j.rows = out_c;
    j.lead = NULL;
    int32_t skip = 0;
    if (c < 4) {
        if (p->batches * p->in_h * p->in_w * c >= 4) {
            first = rlx_rd32(in) << (8 * (4 - c));
        } else {
            for (int32_t k = 0; k < c; k++) {
                first |= (uint32_t)(uint8_t)in[k] << (8 * (4 - c + k));
            }
        }
        j.lead = &first;
        skip = 1;
    }
    const int8_t *row = in + c - 4; /* the current output row's first pixel's word */
    for (int32_t t = 0, oy = 0; t < lines; t++, out += run_px * out_c) {
        const int32_t n = run_px - skip;
        const int8_t *pa = row + skip * step;
        j.pa = pa;
        j.pa_end = pa + 2 * step * (n >> 1);
        j.trail = n & 1 ? pa + step * (n - 1) : NULL;
        rlx_k4_pairs_relu12(&j, out);
        j.lead = NULL;
        skip = 0;
        /* strided: the next output row, in this image or the next */
        oy = oy + 1 == out_h ? 0 : oy + 1;
        row += (oy == 0 ? p->in_h - (out_h - 1) * p->stride_h : p->stride_h) * p->in_w * c;
    }
}
#else
/* the portable build (and -O0): the stream's arithmetic in C; up: the clamp instance's act_max - 127
 * (its rq_add holds the zero point less up) */
/* always inlined: each instance's copy specialized on its constant scaled (no branch on it per output) */
__attribute__((always_inline)) static inline void rlx_k4_c(const rlx_conv_params *p, const int8_t *in, int8_t *out,
                                                            int32_t up, int32_t scaled)
{
    const rlx_gemm_params *g = &p->gemm;
    const int32_t c = p->in_c, out_c = g->out_c;
    for (int32_t n = 0; n < p->batches; n++) {
        for (int32_t oy = 0; oy < p->out_h; oy++) {
            for (int32_t ox = 0; ox < p->out_w; ox++) {
                const int8_t *x = in + ((n * p->in_h + oy * p->stride_h) * p->in_w + ox * p->stride_w) * c;
                const int32_t *s = g->chan;
                for (int32_t r = 0; r < out_c; r++, s += RLX_K4_WORDS, out++) {
                    int32_t dot = 0;
                    for (int32_t k = 0; k < c; k++) {
                        dot += x[k] * (int32_t)(int8_t)((uint32_t)s[1] >> (8 * (4 - c + k)));
                    }
                    const int32_t acc = s[0] + (scaled ? s[4] : 1) * dot;
                    /* scaled: _relu12's stream (the bias, the accumulator and rq_add times k = 2**m): the
                     * floor at 2**12 of 2 acc mult + rq_add 2**32 */
                    const int32_t v = scaled ? (int32_t)((((int64_t)(acc > 0 ? acc : 0) * 2 * s[2]) +
                                                          ((int64_t)s[3] << 32)) >> 44)
                                             : rlx_rq_fast(acc, s[2], s[3], s[4] + 1) + up;
                    *out = (int8_t)(g->rq_mode == 2 ? rlx_sat8(v) : rlx_clamp(v, g->act_min, g->act_max));
                }
            }
        }
    }
}
#endif

void rlx_convolve_1x1_k4_s8(const rlx_conv_params *p, const int8_t *in, int8_t *out, int16_t *scratch)
{
#if RLX_K4_ASM
    rlx_k4_asm(p, in, out, (int32_t *)scratch, rlx_k4_pairs_sign, 1, 0);
#else
    (void)scratch;
    rlx_k4_c(p, in, out, 0, 0);
#endif
}

void rlx_convolve_1x1_k4_relu_s8(const rlx_conv_params *p, const int8_t *in, int8_t *out, int16_t *scratch)
{
#if RLX_K4_ASM
    rlx_k4_asm(p, in, out, (int32_t *)scratch, rlx_k4_pairs_relu, 0, 0);
#else
    (void)scratch;
    rlx_k4_c(p, in, out, 0, 0);
#endif
}

void rlx_convolve_1x1_k4_clamp_s8(const rlx_conv_params *p, const int8_t *in, int8_t *out, int16_t *scratch)
{
#if RLX_K4_ASM
    rlx_k4_asm(p, in, out, (int32_t *)scratch, rlx_k4_pairs_clamp, 0, p->gemm.act_max - 127);
#else
    (void)scratch;
    rlx_k4_c(p, in, out, p->gemm.act_max - 127, 0);
#endif
}

void rlx_convolve_1x1_k4_relu12_s8(const rlx_conv_params *p, const int8_t *in, int8_t *out, int16_t *scratch)
{
#if RLX_K4_ASM
    rlx_k4_relu12(p, in, out, (int32_t *)scratch);
#else
    (void)scratch;
    rlx_k4_c(p, in, out, 0, 1);
#endif
}
