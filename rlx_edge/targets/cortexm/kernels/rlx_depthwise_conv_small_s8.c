/*
 * Depthwise convolution of small layers (balanced, DSP cores; rules._dw_small): a window of at most 9
 * taps, depth multiplier 1 or 2, few output pixels, where the per-group set-up of the pixel and pair
 * kernels (widened rows, planes, clipped-window tables) costs more than the layer's taps.
 *
 * Nothing is widened ahead but the weights (a chunk of up to 16 groups of 4 output channels at a time,
 * into the scratch), and each pixel runs every group of the chunk in turn. The input is read in place,
 * or from a copy with the zero point around it where windows reach past the image, so every pixel runs
 * the same 9 taps: the input offset is folded into the biases (over all 9 taps; the copy's zero point
 * makes a padded tap's (x - zp) 0), and the accumulators run doubled (the acc << 1 of SMMLAR: the
 * weights are doubled as they are widened, the biases by rules.py). Tap 0 runs alone (SMLABB/SMLATT),
 * then pairs (1, 2) ... (7, 8), one SMLAD a channel and pair: depth multiplier 1 reads the words of 4
 * channels at both taps, packs channels 0-1 and 2-3 of the two (PKHBT, PKHTB) and widens each pair
 * (SXTB16): 13 instructions for 8 MACs; multiplier 2 reads a halfword of 2 input channels at each tap
 * (outputs 2 i and 2 i + 1 both take input channel i): 10 for 8 MACs; a window of fewer taps has zero
 * weights past its last. The outputs: SMMLAR, the shift, SSAT (whose saturation at 127 is the clamp at
 * act_max: rules.py offsets rq_add), the 4 packed, a byte-wise max with act_min and one store.
 *
 * Groups (rules.py lays out their words, dwq): depth multiplier 1 channels 4 i, the last one ending at
 * the last channel (it writes some of the previous group's outputs again, with the same values);
 * multiplier 2 input channels 2 i and 2 i + 1, and with an odd count the last input channel's 2 outputs
 * on their own (rlx_dws_run2t*). Cores without DSP run the general kernel (at most 4 pixels) or the ring
 * in its place (the scratch is the larger of the two).
 */
#include <stddef.h>

#include "rlx_nn.h"
#include "rlx_nn_support.h"

#if RLX_USE_DSP
/* The scratch, in words: the walk's constants (RLX_DWS_*), the tap offsets (10 words: tap 0's twice,
 * then taps 1 to 8, from the window's first pixel; 0 past the window), then the table of a chunk of at
 * most RLX_DWS_CHUNK groups, per group RLX_DWS_BLOCK words: the 4 biases, tap 0's widened, doubled
 * weights (w0, w2), (w1, w3) and offset, 4 pair entries of 6 words (the 4 channels' widened, doubled
 * weight pairs, then the pair's offsets), the requantization (12 words: mult, rq_add, shift), the
 * clamp's 2 words, the input and output bytes to the next group (0 after the chunk's last); then the copy
 * of the input. */
enum {
    RLX_DWS_XD,     /* input bytes from the chunk's last group to the next pixel's first */
    RLX_DWS_DD,     /* the same in output bytes */
    RLX_DWS_ROWEND, /* the current output row's end (the chunk's first group) */
    RLX_DWS_XROW,   /* input bytes from a row's end to the next row's first window */
    RLX_DWS_OROW,   /* output bytes of a row */
    RLX_DWS_END,    /* the last row's end */
    RLX_DWS_TAB0,   /* the table's first word */
    RLX_DWS_OFF,    /* the tap offsets, 10 words */
    RLX_DWS_TABLE = 18
};
#define RLX_DWS_BLOCK 47  /* table words per group */
#define RLX_DWS_GROUP 29  /* dwq words per group: biases, 1 + 4 x 2 weight words, requantization, 4 words */
/* groups a table holds (rules.py's scratch): dw 3x3 6x6x128 s2 valid on M4 takes 2.902 instructions/MAC
 * and 3,080 B of scratch at 16, 2.956 and 1,576 B at 8 */
#define RLX_DWS_CHUNK 16

/* bytes 0 and 2 of w, doubled, as a word's int16 halves (SXTB16, SADD16) */
static uint32_t rlx_dws_pair2(uint32_t w)
{
    const int32_t lo = 2 * (int8_t)(w & 0xFFu), hi = 2 * (int8_t)((w >> 16) & 0xFFu);
    return ((uint32_t)lo & 0xFFFFu) | ((uint32_t)hi << 16);
}

#if defined(__ARM_FEATURE_DSP) && (__ARM_FEATURE_DSP == 1) && !defined(RLX_NO_ASM)
/* The table of n groups (r2) at r0 from their dwq words at r1 and the offsets at r3: the biases and tap
 * 0's word widened and doubled (SXTB16, SADD16: (w0, w2), (w1, w3)) with its offset, then per pair
 * entry its 2 int8 words widened and doubled with its offsets after them */
#define RLX_DWS_WIDEN(A, B)                   \
    "sxtb16  r4, " A "\n\t"                   \
    "sxtb16  r5, " A ", ror #8\n\t"           \
    "sxtb16  r6, " B "\n\t"                   \
    "sxtb16  r7, " B ", ror #8\n\t"           \
    "sadd16  r4, r4, r4\n\t"                  \
    "sadd16  r5, r5, r5\n\t"                  \
    "sadd16  r6, r6, r6\n\t"                  \
    "sadd16  r7, r7, r7\n\t"                  \
    "ldrd    r10, r11, [r3], #8\n\t"          \
    "stmia   r0!, {r4-r7, r10, r11}\n\t"
static __attribute__((naked, noinline, used)) void rlx_dws_widen(uint32_t *tab __attribute__((unused)),
                                                                 const int32_t *q __attribute__((unused)),
                                                                 int32_t n __attribute__((unused)),
                                                                 const uint32_t *off __attribute__((unused)))
{
    __asm__(".syntax unified\n\t"
            "push    {r4-r11, lr}\n\t"
            "1:\n\t"
            "ldmia   r1!, {r4-r8}\n\t"
            "sxtb16  r9, r8\n\t"
            "sxtb16  r10, r8, ror #8\n\t"
            "sadd16  r9, r9, r9\n\t"
            "sadd16  r10, r10, r10\n\t"
            "ldr     r11, [r3], #8\n\t"
            "stmia   r0!, {r4-r7, r9-r11}\n\t"
            "ldmia   r1!, {r8, r9, r12, lr}\n\t" RLX_DWS_WIDEN("r8", "r9") RLX_DWS_WIDEN("r12", "lr")
            "ldmia   r1!, {r8, r9, r12, lr}\n\t" RLX_DWS_WIDEN("r8", "r9") RLX_DWS_WIDEN("r12", "lr")
            "sub     r3, r3, #40\n\t"
            "ldmia   r1!, {r4-r11}\n\t"
            "stmia   r0!, {r4-r11}\n\t"
            "ldmia   r1!, {r4-r11}\n\t"
            "stmia   r0!, {r4-r11}\n\t"
            "subs    r2, r2, #1\n\t"
            "bne     1b\n\t"
            "pop     {r4-r11, pc}\n\t");
}
/* the biases (accumulators r2-r5) and tap 0 alone: weights (w0, w2), (w1, w3) in r6, r7, the input at
 * lr + r10 */
#define RLX_DWS_ONE1                          \
    "ldmia   r12!, {r2-r7, r10}\n\t"          \
    "ldr     r10, [lr, r10]\n\t"              \
    "sxtb16  r11, r10\n\t"                    \
    "smlabb  r2, r11, r6, r2\n\t"             \
    "smlatt  r4, r11, r6, r4\n\t"             \
    "sxtb16  r11, r10, ror #8\n\t"            \
    "smlabb  r3, r11, r7, r3\n\t"             \
    "smlatt  r5, r11, r7, r5\n\t"
/* a pair of taps, depth multiplier 1: channels 0-1 of both (r0), 2-3 of both (r11) */
#define RLX_DWS_TWO1                          \
    "ldmia   r12!, {r6-r11}\n\t"              \
    "ldr     r10, [lr, r10]\n\t"              \
    "ldr     r11, [lr, r11]\n\t"              \
    "pkhbt   r0, r10, r11, lsl #16\n\t"       \
    "pkhtb   r11, r11, r10, asr #16\n\t"      \
    "sxtb16  r10, r0\n\t"                     \
    "smlad   r2, r10, r6, r2\n\t"             \
    "sxtb16  r10, r0, ror #8\n\t"             \
    "smlad   r3, r10, r7, r3\n\t"             \
    "sxtb16  r10, r11\n\t"                    \
    "smlad   r4, r10, r8, r4\n\t"             \
    "sxtb16  r10, r11, ror #8\n\t"            \
    "smlad   r5, r10, r9, r5\n\t"
/* depth multiplier 2: a halfword of input channels i, i + 1; outputs 0, 1 take i, outputs 2, 3 i + 1 */
#define RLX_DWS_ONE2                          \
    "ldmia   r12!, {r2-r7, r10}\n\t"          \
    "ldrh    r10, [lr, r10]\n\t"              \
    "sxtb16  r11, r10\n\t"                    \
    "smlabb  r2, r11, r6, r2\n\t"             \
    "smlabb  r3, r11, r7, r3\n\t"             \
    "sxtb16  r11, r10, ror #8\n\t"            \
    "smlabt  r4, r11, r6, r4\n\t"             \
    "smlabt  r5, r11, r7, r5\n\t"
#define RLX_DWS_TWO2                          \
    "ldmia   r12!, {r6-r11}\n\t"              \
    "ldrh    r10, [lr, r10]\n\t"              \
    "ldrh    r11, [lr, r11]\n\t"              \
    "pkhbt   r0, r10, r11, lsl #16\n\t"       \
    "sxtb16  r10, r0\n\t"                     \
    "smlad   r2, r10, r6, r2\n\t"             \
    "smlad   r3, r10, r7, r3\n\t"             \
    "sxtb16  r10, r0, ror #8\n\t"             \
    "smlad   r4, r10, r8, r4\n\t"             \
    "smlad   r5, r10, r9, r5\n\t"
/* accumulator A's output (rlx_rq_fast on the doubled accumulator), its multiplier, add and shift in
 * M, D, E: C with the sign correction, N without (exact where act_min >= out_zp, as the px kernel's) */
#define RLX_DWS_RQC(A, M, D, E)                               \
    "smmlar  " M ", " A ", " M ", " D "\n\t"                  \
    "add     " A ", " M ", " A ", asr #31\n\t"                \
    "asr     " A ", " A ", " E "\n\t"                         \
    "ssat    " A ", #8, " A "\n\t"
#define RLX_DWS_RQN(A, M, D, E)                               \
    "smmlar  " M ", " A ", " M ", " D "\n\t"                  \
    "asr     " A ", " M ", " E "\n\t"                         \
    "ssat    " A ", #8, " A "\n\t"
/* a run's entry (r0 the scratch, r1 the first window, r2 the first output: lr, r1 from here on, the
 * scratch on the stack) and each pixel's first table word */
#define RLX_DWS_ENTER                \
    "push    {r4-r11, lr}\n\t"       \
    "sub     sp, sp, #8\n\t"         \
    "str     r0, [sp]\n\t"           \
    "mov     lr, r1\n\t"             \
    "mov     r1, r2\n\t"             \
    "0:\n\t"                         \
    "ldr     r12, [r0, #24]\n\t"
/* a run's step to the next pixel (its frame on the stack: the steps, the end; then the next row's), and
 * the return */
#define RLX_DWS_NEXT                 \
    "ldr     r0, [sp]\n\t"           \
    "ldm     r0, {r6, r7, r8}\n\t"   \
    "add     lr, lr, r6\n\t"         \
    "add     r1, r1, r7\n\t"         \
    "cmp     r1, r8\n\t"             \
    "bne     0b\n\t"                 \
    "ldrd    r6, r7, [r0, #12]\n\t"  \
    "ldr     r9, [r0, #20]\n\t"      \
    "cmp     r1, r9\n\t"             \
    "beq     9f\n\t"                 \
    "add     lr, lr, r6\n\t"         \
    "add     r8, r8, r7\n\t"         \
    "str     r8, [r0, #8]\n\t"       \
    "b       0b\n\t"                 \
    "9:\n\t"                         \
    "add     sp, sp, #8\n\t"         \
    "pop     {r4-r11, pc}\n\t"
/* Every pixel of a chunk of groups: r0 the scratch, r1 the chunk's first window's first pixel, r2 its
 * first output. Per pixel and group: the 9 taps, the 4 outputs in one store, the next group; per pixel
 * the next (the row's end: the next row, or the end). The outputs are offset by 127 - act_max (in
 * rq_add, rules.py), so that SSAT's saturation at 127 is the clamp at act_max; then a byte-wise max with
 * act_min (offset alike: SSUB8 sets GE, SEL picks) and the offset taken off again (SADD8). */
#define RLX_DWS_RUN_FN(NAME, ONE, TWO, RQ)                                                                \
    static __attribute__((naked, noinline, used)) void NAME(uint32_t *s __attribute__((unused)),           \
                                                            const int8_t *x __attribute__((unused)),       \
                                                            int8_t *dst __attribute__((unused)))           \
    {                                                                                                     \
        __asm__(".syntax unified\n\t" RLX_DWS_ENTER                                                       \
                "1:\n\t"                                                                                  \
                ONE TWO TWO TWO TWO                                                                       \
                "ldmia   r12!, {r6-r11}\n\t" RQ("r2", "r6", "r7", "r8") RQ("r3", "r9", "r10", "r11")      \
                "ldmia   r12!, {r6-r11}\n\t" RQ("r4", "r6", "r7", "r8") RQ("r5", "r9", "r10", "r11")      \
                "bfi     r2, r3, #8, #8\n\t"                                                              \
                "bfi     r2, r4, #16, #8\n\t"                                                             \
                "bfi     r2, r5, #24, #8\n\t"                                                             \
                "ldmia   r12!, {r6-r9}\n\t"                                                               \
                "ssub8   r0, r2, r6\n\t"                                                                  \
                "sel     r2, r2, r6\n\t"                                                                  \
                "sadd8   r2, r2, r7\n\t"                                                                  \
                "str     r2, [r1]\n\t"                                                                    \
                "add     lr, lr, r8\n\t"                                                                  \
                "add     r1, r1, r9\n\t"                                                                  \
                "cmp     r9, #0\n\t"                                                                      \
                "bne     1b\n\t"                                                                          \
                RLX_DWS_NEXT);                                                                            \
    }
RLX_DWS_RUN_FN(rlx_dws_run1c, RLX_DWS_ONE1, RLX_DWS_TWO1, RLX_DWS_RQC)
RLX_DWS_RUN_FN(rlx_dws_run1n, RLX_DWS_ONE1, RLX_DWS_TWO1, RLX_DWS_RQN)
RLX_DWS_RUN_FN(rlx_dws_run2c, RLX_DWS_ONE2, RLX_DWS_TWO2, RLX_DWS_RQC)
RLX_DWS_RUN_FN(rlx_dws_run2n, RLX_DWS_ONE2, RLX_DWS_TWO2, RLX_DWS_RQN)
/* a pair of taps of the last input channel (multiplier 2, odd channels): its two outputs' weights */
#define RLX_DWS_TWOT                          \
    "ldmia   r12!, {r6, r7, r10, r11}\n\t"    \
    "ldrsb   r10, [lr, r10]\n\t"              \
    "ldrsb   r11, [lr, r11]\n\t"              \
    "pkhbt   r0, r10, r11, lsl #16\n\t"       \
    "smlad   r2, r0, r6, r2\n\t"              \
    "smlad   r3, r0, r7, r3\n\t"
/* Every pixel of the last input channel with multiplier 2 (odd channels): its 2 outputs (rlx_dws_tail's
 * table: the biases, tap 0's weights (w0, w1) and offset, 4 pairs of 4 words, the requantization of 2,
 * the clamp's 2 words and 2 unused), one halfword store a pixel; arguments and walk as the groups' */
#define RLX_DWS_TAIL_FN(NAME, RQ)                                                                         \
    static __attribute__((naked, noinline, used)) void NAME(uint32_t *s __attribute__((unused)),           \
                                                            const int8_t *x __attribute__((unused)),       \
                                                            int8_t *dst __attribute__((unused)))           \
    {                                                                                                     \
        __asm__(".syntax unified\n\t" RLX_DWS_ENTER                                                       \
                "ldmia   r12!, {r2, r3, r6, r10}\n\t"                                                     \
                "ldrsb   r10, [lr, r10]\n\t"                                                              \
                "smlabb  r2, r10, r6, r2\n\t"                                                             \
                "smlabt  r3, r10, r6, r3\n\t" RLX_DWS_TWOT RLX_DWS_TWOT RLX_DWS_TWOT RLX_DWS_TWOT          \
                "ldmia   r12!, {r6-r11}\n\t" RQ("r2", "r6", "r7", "r8") RQ("r3", "r9", "r10", "r11")      \
                "bfi     r2, r3, #8, #8\n\t"                                                              \
                "ldmia   r12!, {r6, r7}\n\t"                                                              \
                "ssub8   r0, r2, r6\n\t"                                                                  \
                "sel     r2, r2, r6\n\t"                                                                  \
                "sadd8   r2, r2, r7\n\t"                                                                  \
                "strh    r2, [r1]\n\t"                                                                    \
                RLX_DWS_NEXT);                                                                            \
    }
RLX_DWS_TAIL_FN(rlx_dws_run2tc, RLX_DWS_RQC)
RLX_DWS_TAIL_FN(rlx_dws_run2tn, RLX_DWS_RQN)
#undef RLX_DWS_TAIL_FN
#undef RLX_DWS_TWOT
#undef RLX_DWS_RUN_FN
#undef RLX_DWS_RQC
#undef RLX_DWS_RQN
#undef RLX_DWS_TWO2
#undef RLX_DWS_ONE2
#undef RLX_DWS_TWO1
#undef RLX_DWS_ONE1
#undef RLX_DWS_WIDEN
#else
/* The table of n groups at t (host builds emulating DSP, RLX_NO_ASM): the same words as the asm's. */
static void rlx_dws_widen(uint32_t *t, const int32_t *q, int32_t n, const uint32_t *off)
{
    for (; n > 0; n--, q += RLX_DWS_GROUP, t += RLX_DWS_BLOCK) {
        for (int32_t j = 0; j < 4; j++) {
            t[j] = (uint32_t)q[j];
        }
        /* words (b0, b2) and (b1, b3) of tap 0's, doubled; then per pair entry word j / 2's bytes j % 2
         * (tap t) and 2 + j % 2 (tap t'), doubled */
        for (int32_t j = 0; j < 2; j++) {
            const uint32_t w = (uint32_t)q[4] >> (8 * j);
            t[4 + j] = rlx_dws_pair2(w);
        }
        t[6] = off[0];
        for (int32_t e = 0; e < 4; e++) {
            for (int32_t j = 0; j < 4; j++) {
                t[7 + 6 * e + j] = rlx_dws_pair2((uint32_t)q[5 + 2 * e + j / 2] >> (8 * (j % 2)));
            }
            t[11 + 6 * e] = off[2 + 2 * e];
            t[12 + 6 * e] = off[3 + 2 * e];
        }
        for (int32_t j = 0; j < 16; j++) {
            t[31 + j] = (uint32_t)q[13 + j];
        }
    }
}

/* Every pixel of a chunk (the asm's walk), in C; t0 the table (the scratch's word holds its address
 * only on 32-bit targets; the output's row ends are compared as the asm does, on the low 32 bits). */
static void rlx_dws_run_c(uint32_t *s, const uint32_t *t0, const int8_t *x, int8_t *dst, int32_t m2, int32_t corr)
{
    for (;;) {
        for (const uint32_t *t = t0;; t += RLX_DWS_BLOCK) {
            int32_t acc[4];
            for (int32_t j = 0; j < 4; j++) {
                acc[j] = (int32_t)t[j];
            }
            const int8_t *const x0 = x + (int32_t)t[6];
            for (int32_t j = 0; j < 4; j++) {
                const uint32_t w = t[4 + j % 2];
                acc[j] = (int32_t)((uint32_t)acc[j] + (uint32_t)((int16_t)(j < 2 ? w & 0xFFFFu : w >> 16) *
                                                                  x0[m2 ? j / 2 : j]));
            }
            for (int32_t e = 0; e < 4; e++) {
                const uint32_t *const en = t + 7 + 6 * e;
                for (int32_t k = 0; k < 2; k++) {
                    const int8_t *const xp = x + (int32_t)en[4 + k];
                    for (int32_t j = 0; j < 4; j++) {
                        const int32_t w = (int16_t)(k == 0 ? en[j] & 0xFFFFu : en[j] >> 16);
                        acc[j] = (int32_t)((uint32_t)acc[j] + (uint32_t)(w * xp[m2 ? j / 2 : j]));
                    }
                }
            }
            const uint32_t *const q = t + 31;
            uint32_t packed = 0;
            for (int32_t j = 0; j < 4; j++) {
                const int32_t a = acc[j], v = rlx_smmlar(a, (int32_t)q[3 * j], (int32_t)q[3 * j + 1]);
                const int32_t o = rlx_sat8((v + (corr ? a >> 31 : 0)) >> q[3 * j + 2]);
                const int32_t lo = (int8_t)q[12], k = (int8_t)q[13];
                packed |= (uint32_t)(uint8_t)((o < lo ? lo : o) + k) << (8 * j);
            }
            rlx_wr32(dst, packed);
            x += (int32_t)q[14];
            dst += (int32_t)q[15];
            if (q[15] == 0) {
                break;
            }
        }
        x += (int32_t)s[RLX_DWS_XD];
        dst += (int32_t)s[RLX_DWS_DD];
        if ((uint32_t)(uintptr_t)dst == s[RLX_DWS_ROWEND]) {
            if ((uint32_t)(uintptr_t)dst == s[RLX_DWS_END]) {
                return;
            }
            x += (int32_t)s[RLX_DWS_XROW];
            s[RLX_DWS_ROWEND] += s[RLX_DWS_OROW];
        }
    }
}

/* The last input channel's outputs (multiplier 2, odd channels; the asm's rlx_dws_run2t*), in C. */
static void rlx_dws_tail_c(uint32_t *s, const uint32_t *t, const int8_t *x, int8_t *dst, int32_t corr)
{
    for (;;) {
        int32_t acc[2] = {(int32_t)t[0], (int32_t)t[1]};
        for (int32_t e = 0; e < 5; e++) {
            /* tap 0: (w0, w1) and its offset; pair e: (w0, w0'), (w1, w1'), its offsets */
            const uint32_t *const en = e == 0 ? t + 2 : t + 4 * e;
            for (int32_t j = 0; j < 2; j++) {
                for (int32_t k = 0; k < (e == 0 ? 1 : 2); k++) {
                    const uint32_t w = e == 0 ? en[0] >> (16 * j) : en[j] >> (16 * k);
                    const int8_t v = x[(int32_t)en[e == 0 ? 1 : 2 + k]];
                    acc[j] = (int32_t)((uint32_t)acc[j] + (uint32_t)((int16_t)(w & 0xFFFFu) * v));
                }
            }
        }
        const uint32_t *const q = t + 20;
        uint32_t packed = 0;
        for (int32_t j = 0; j < 2; j++) {
            const int32_t a = acc[j], v = rlx_smmlar(a, (int32_t)q[3 * j], (int32_t)q[3 * j + 1]);
            const int32_t o = rlx_sat8((v + (corr ? a >> 31 : 0)) >> q[3 * j + 2]);
            const int32_t lo = (int8_t)q[6], k = (int8_t)q[7];
            packed |= (uint32_t)(uint8_t)((o < lo ? lo : o) + k) << (8 * j);
        }
        dst[0] = (int8_t)packed;
        dst[1] = (int8_t)(packed >> 8);
        x += (int32_t)s[RLX_DWS_XD];
        dst += (int32_t)s[RLX_DWS_DD];
        if ((uint32_t)(uintptr_t)dst == s[RLX_DWS_ROWEND]) {
            if ((uint32_t)(uintptr_t)dst == s[RLX_DWS_END]) {
                return;
            }
            x += (int32_t)s[RLX_DWS_XROW];
            s[RLX_DWS_ROWEND] += s[RLX_DWS_OROW];
        }
    }
}
#endif

/* The table of the last input channel's outputs (multiplier 2, odd channels) at t from its dwq words at
 * q (rules.py: the 2 biases, tap 0's word [w0 0 w1 0], a word [w0 w1 w0' w1'] per pair, the
 * requantization of 2 and the clamp's words) and the offsets: widened, doubled (rlx_dws_run2t*'s). */
static void rlx_dws_tail(uint32_t *t, const int32_t *q, const uint32_t *off)
{
    t[0] = (uint32_t)q[0];
    t[1] = (uint32_t)q[1];
    t[2] = rlx_dws_pair2((uint32_t)q[2]);
    t[3] = off[0];
    for (int32_t e = 0; e < 4; e++) {
        t[4 + 4 * e] = rlx_dws_pair2((uint32_t)q[3 + e]);
        t[5 + 4 * e] = rlx_dws_pair2((uint32_t)q[3 + e] >> 8);
        t[6 + 4 * e] = off[2 + 2 * e];
        t[7 + 4 * e] = off[3 + 2 * e];
    }
    for (int32_t j = 0; j < 10; j++) {
        t[20 + j] = (uint32_t)q[7 + j];
    }
}

/* n >= 4 bytes from src to d a word at a time (the last word may overlap the one before) */
static void rlx_dws_copy(int8_t *d, const int8_t *src, int32_t n)
{
    int8_t *const last = d + n - 4;
    const uint32_t tail = rlx_rd32(src + n - 4);
#if defined(__ARM_FEATURE_DSP) && (__ARM_FEATURE_DSP == 1) && !defined(RLX_NO_ASM)
    if (n >= 16) {
        uint32_t a, b, c, e;
        int32_t k = n;
        __asm__ volatile("1:\n\t"
                         "ldr     %[a], [%[s]], #4\n\t"
                         "ldr     %[b], [%[s]], #4\n\t"
                         "ldr     %[c], [%[s]], #4\n\t"
                         "ldr     %[e], [%[s]], #4\n\t"
                         "str     %[a], [%[d]], #4\n\t"
                         "str     %[b], [%[d]], #4\n\t"
                         "str     %[c], [%[d]], #4\n\t"
                         "str     %[e], [%[d]], #4\n\t"
                         "subs    %[k], %[k], #16\n\t"
                         "cmp     %[k], #16\n\t"
                         "bge     1b\n\t"
                         : [a] "=&r"(a), [b] "=&r"(b), [c] "=&r"(c), [e] "=&r"(e), [s] "+r"(src), [d] "+r"(d),
                           [k] "+r"(k)
                         :
                         : "memory", "cc");
        n = k;
    }
#endif
    for (; n >= 4; n -= 4, d += 4, src += 4) {
        rlx_wr32(d, rlx_rd32(src));
    }
    rlx_wr32(last, tail);
}

/* n bytes of v at the word-aligned d (past them up to the next 16 bytes too: the scratch is rounded) */
static void rlx_dws_fill(int8_t *d, int8_t v, int32_t n)
{
    uint32_t w = 0x01010101u * (uint8_t)v;
#if defined(__ARM_FEATURE_DSP) && (__ARM_FEATURE_DSP == 1) && !defined(RLX_NO_ASM)
    /* four registers in STM's order (in-out operands: GCC would give equal inputs one) */
    register uint32_t w0 __asm__("r4") = w, w1 __asm__("r5") = w, w2 __asm__("r6") = w, w3 __asm__("r7") = w;
    __asm__ volatile("1:\n\t"
                     "stmia   %[d]!, {%[w0], %[w1], %[w2], %[w3]}\n\t"
                     "subs    %[n], %[n], #16\n\t"
                     "bgt     1b\n\t"
                     : [d] "+r"(d), [n] "+r"(n), [w0] "+r"(w0), [w1] "+r"(w1), [w2] "+r"(w2), [w3] "+r"(w3)
                     :
                     : "memory", "cc");
#else
    for (; n > 0; n -= 4, d += 4) {
        rlx_wr32(d, w);
    }
#endif
}
#endif

void rlx_depthwise_conv_small_s8(const rlx_dw_conv_params *p, const int8_t *in, int8_t *out, int16_t *scratch)
{
#if RLX_USE_DSP
    const int32_t ic = p->in_c, oc = p->out_c, m2 = p->ch_mult == 2, kw = p->k_w, k = p->k_h * kw;
    const int32_t ih = p->in_h, iw = p->in_w, oh = p->out_h, ow = p->out_w;
    /* the input rows and columns the windows reach, from (-pad_top, -pad_left) */
    const int32_t hp = (oh - 1) * p->stride_h + (p->k_h - 1) * p->dil_h + 1;
    const int32_t wp = (ow - 1) * p->stride_w + (kw - 1) * p->dil_w + 1;
    const int32_t pt = p->pad_top, pl = p->pad_left;
    const int32_t copy = pt > 0 || pl > 0 || hp - pt > ih || wp - pl > iw;
    const int32_t row = (copy ? wp : iw) * ic; /* bytes between rows of what the windows read */
    /* groups of 4 outputs; with multiplier 2 and odd channels the last input channel's 2 outputs after */
    const int32_t groups = m2 ? ic / 2 : (oc + 3) / 4, tail = m2 && (ic & 1);
    uint32_t *const s = (uint32_t *)(void *)scratch;
    /* the copy after the table of the largest chunk */
    int8_t *const img = (int8_t *)(void *)(s + RLX_DWS_TABLE + RLX_DWS_BLOCK * (groups < RLX_DWS_CHUNK ? groups : RLX_DWS_CHUNK));
    const int32_t corr = p->act_min < p->out_zp; /* the sign correction (RLX_DWS_RQC) */
    /* tap 0 is entry 0's (its t' has zero weights), then taps 2 e - 1 and 2 e are entry e's; taps past
     * the window read the first pixel */
    {
        const int32_t dy = p->dil_h * row, dx = p->dil_w * ic;
        uint32_t *const o = s + RLX_DWS_OFF;
        int32_t off = 0, start = 0, kx = 0;
        o[0] = o[1] = 0;
        for (int32_t t = 1; t < 9; t++) {
            if (t < k) {
                off += dx;
                if (++kx == kw) {
                    kx = 0;
                    off = start += dy;
                }
            } else {
                off = 0;
            }
            o[t + 1] = (uint32_t)off;
        }
    }
    s[RLX_DWS_XROW] = (uint32_t)(p->stride_h * row - ow * p->stride_w * ic);
    s[RLX_DWS_OROW] = (uint32_t)(ow * oc);
    for (int32_t n = 0; n < p->batches; n++) {
        const int8_t *src = in + n * ih * iw * ic;
        if (copy) {
            /* the zero point everywhere, then the image's rows where the windows reach them */
            rlx_dws_fill(img, (int8_t)(-p->in_offset), hp * row);
            /* the columns inside the image: [x0, x1) of the copy's */
            const int32_t x0 = pl < 0 ? 0 : pl, x1 = iw + pl < wp ? iw + pl : wp, nb = (x1 - x0) * ic;
            const int32_t y0 = pt < 0 ? 0 : pt, y1 = ih + pt < hp ? ih + pt : hp;
            for (int32_t y = y0; y < y1 && nb > 0; y++) {
                int8_t *const d = img + y * row + x0 * ic;
                const int8_t *const from = src + ((y - pt) * iw + x0 - pl) * ic;
                if (nb >= 4) {
                    rlx_dws_copy(d, from, nb);
                } else {
                    for (int32_t i = 0; i < nb; i++) {
                        d[i] = from[i];
                    }
                }
            }
            src = img;
        } else {
            src += (-pt * iw - pl) * ic; /* pads 0 or negative: the windows start inside */
        }
        int8_t *const o = out + n * oh * ow * oc;
        for (int32_t g0 = 0; g0 < groups; g0 += RLX_DWS_CHUNK) {
            const int32_t g1 = g0 + RLX_DWS_CHUNK < groups ? g0 + RLX_DWS_CHUNK : groups;
            /* the first input channel of group g, and its first output channel (rules.py's order: the
             * last group ends at the last channel) */
#define RLX_DWS_IN0(g) (m2 ? 2 * (g) : (4 * (g) + 4 <= oc ? 4 * (g) : oc - 4))
            const int32_t i0 = RLX_DWS_IN0(g0), c0 = m2 ? 2 * i0 : i0;
            const int32_t i1 = RLX_DWS_IN0(g1 - 1);
#undef RLX_DWS_IN0
            const int32_t c1 = m2 ? 2 * i1 : i1;
            uint32_t *const tab = s + RLX_DWS_TABLE;
            rlx_dws_widen(tab, p->dwq + RLX_DWS_GROUP * g0, g1 - g0, s + RLX_DWS_OFF);
            /* the chunk's last group steps nowhere: its output step 0 ends a pixel's groups */
            tab[RLX_DWS_BLOCK * (g1 - g0) - 2] = 0;
            tab[RLX_DWS_BLOCK * (g1 - g0) - 1] = 0;
            s[RLX_DWS_TAB0] = (uint32_t)(uintptr_t)tab;
            s[RLX_DWS_XD] = (uint32_t)(p->stride_w * ic - (i1 - i0));
            s[RLX_DWS_DD] = (uint32_t)(oc - (c1 - c0));
            s[RLX_DWS_ROWEND] = (uint32_t)(uintptr_t)(o + c0 + ow * oc);
            s[RLX_DWS_END] = (uint32_t)(uintptr_t)(o + c0 + oh * ow * oc);
#if defined(__ARM_FEATURE_DSP) && (__ARM_FEATURE_DSP == 1) && !defined(RLX_NO_ASM)
            if (m2) {
                if (corr) {
                    rlx_dws_run2c(s, src + i0, o + c0);
                } else {
                    rlx_dws_run2n(s, src + i0, o + c0);
                }
            } else if (corr) {
                rlx_dws_run1c(s, src + i0, o + c0);
            } else {
                rlx_dws_run1n(s, src + i0, o + c0);
            }
#else
            rlx_dws_run_c(s, tab, src + i0, o + c0, m2, corr);
#endif
        }
        if (tail) {
            uint32_t *const tab = s + RLX_DWS_TABLE;
            int8_t *const d = o + 2 * (ic - 1);
            rlx_dws_tail(tab, p->dwq + RLX_DWS_GROUP * groups, s + RLX_DWS_OFF);
            s[RLX_DWS_TAB0] = (uint32_t)(uintptr_t)tab;
            s[RLX_DWS_XD] = (uint32_t)(p->stride_w * ic);
            s[RLX_DWS_DD] = (uint32_t)oc;
            s[RLX_DWS_ROWEND] = (uint32_t)(uintptr_t)(d + ow * oc);
            s[RLX_DWS_END] = (uint32_t)(uintptr_t)(d + oh * ow * oc);
#if defined(__ARM_FEATURE_DSP) && (__ARM_FEATURE_DSP == 1) && !defined(RLX_NO_ASM)
            if (corr) {
                rlx_dws_run2tc(s, src + ic - 1, d);
            } else {
                rlx_dws_run2tn(s, src + ic - 1, d);
            }
#else
            rlx_dws_tail_c(s, tab, src + ic - 1, d, corr);
#endif
        }
    }
#else
    /* the kernels the rule takes for such layers otherwise (its scratch is the larger of the two) */
    if (p->out_h * p->out_w <= 4) {
        rlx_depthwise_conv_s8(p, in, out);
    } else {
        rlx_depthwise_conv_ring_s8(p, in, out, scratch);
    }
#endif
}
