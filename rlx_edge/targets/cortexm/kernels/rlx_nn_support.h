/*
 * rlx_nn_support.h - fixed-point helpers and DSP intrinsics shared by the
 * rlx-edge int8 kernels.
 *
 * Numerics follow TFLite Micro's reference kernels (double rounding), which
 * the Python integer reference (rlx_edge/ir/fixedpoint.py) defines bit for
 * bit. Every multiplier and shift is computed in Python and arrives here as a
 * constant; nothing in C re-derives one.
 *
 * Three builds of the same source:
 *  - __ARM_FEATURE_DSP (Cortex-M4/M7/M33): SXTB16/SMLAD from <arm_acle.h>;
 *  - RLX_DSP_EMULATE (host tests): the same DSP code path with the
 *    instructions written in C, so the SIMD loops are checked bit-exactly on
 *    the host;
 *  - neither (Cortex-M0/M0+/M3, host default): portable scalar C.
 */
#ifndef RLX_NN_SUPPORT_H
#define RLX_NN_SUPPORT_H

/* At -O0 GCC keeps every C variable in memory and cannot find registers for
 * the kernels' asm blocks (they take many operands): an unoptimized build
 * (--opt O0, for a debugger) takes the C paths, which compute the same bits. */
#if !defined(__OPTIMIZE__) && !defined(RLX_NO_ASM)
#define RLX_NO_ASM 1
#endif

#include <stdint.h>
#include <string.h>

#if defined(__ARM_FEATURE_DSP) && (__ARM_FEATURE_DSP == 1)
#include <arm_acle.h>
#define RLX_USE_DSP 1
#elif defined(RLX_DSP_EMULATE)
#define RLX_USE_DSP 1
#else
#define RLX_USE_DSP 0
#endif

/* Selects a constant that exists in one build only (weights.c guards them). */
#if RLX_USE_DSP
#define RLX_IF_DSP(dsp, portable) (dsp)
#else
#define RLX_IF_DSP(dsp, portable) (portable)
#endif

#if defined(__ARM_FEATURE_SAT) && (__ARM_FEATURE_SAT == 1) && !RLX_USE_DSP
#include <arm_acle.h> /* __ssat on cores without the DSP extension (Cortex-M3) */
#endif

#if defined(__GNUC__)
#define RLX_INLINE static inline __attribute__((always_inline))
#else
#define RLX_INLINE static inline
#endif

/* Elements of a shape left-padded with 1s to rank 6 (the layout kernels' parameter form). */
RLX_INLINE int32_t rlx_elements6(const int32_t shape[6])
{
    int32_t n = 1;
    for (int32_t d = 0; d < 6; d++) {
        n *= shape[d];
    }
    return n;
}

/* A reduction over some of four dimensions (the reduce kernels' parameter form: the input's shape
 * left-padded with 1s, 1 in reduce[d] where d is reduced): the output's extent per dimension (1
 * where reduced), the reduced block's (1 where kept), and the input's element strides. */
typedef struct {
    int32_t os[4];
    int32_t rs[4];
    int32_t stride[4];
} rlx_reduce_walk;

RLX_INLINE rlx_reduce_walk rlx_reduce_walk_of(const int32_t shape[4], const int32_t reduce[4])
{
    rlx_reduce_walk w;
    int32_t s = 1;
    for (int32_t d = 3; d >= 0; d--) {
        w.os[d] = reduce[d] ? 1 : shape[d];
        w.rs[d] = reduce[d] ? shape[d] : 1;
        w.stride[d] = s;
        s *= shape[d];
    }
    return w;
}

/* Unaligned-safe 32-bit access: memcpy lets the compiler emit one LDR/STR
 * on cores that allow unaligned word access, and stay correct elsewhere. */
RLX_INLINE uint32_t rlx_rd32(const void *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

RLX_INLINE void rlx_wr32(void *p, uint32_t v) { memcpy(p, &v, 4); }

/* (the low half of lo, the low half of hi) as a word's int16 halves (PKHBT), and (the high half of lo,
 * the high half of hi) (PKHTB): GCC writes either in C as 3 to 5 instructions */
RLX_INLINE uint32_t rlx_pack_lo16(uint32_t lo, uint32_t hi)
{
#if defined(__ARM_FEATURE_DSP) && (__ARM_FEATURE_DSP == 1) && !defined(RLX_NO_ASM)
    uint32_t r;
    __asm__("pkhbt %0, %1, %2, lsl #16" : "=r"(r) : "r"(lo), "r"(hi));
    return r;
#else
    return (lo & 0xFFFFu) | (hi << 16);
#endif
}
RLX_INLINE uint32_t rlx_pack_hi16(uint32_t lo, uint32_t hi)
{
#if defined(__ARM_FEATURE_DSP) && (__ARM_FEATURE_DSP == 1) && !defined(RLX_NO_ASM)
    uint32_t r;
    __asm__("pkhtb %0, %1, %2, asr #16" : "=r"(r) : "r"(hi), "r"(lo));
    return r;
#else
    return (hi & 0xFFFF0000u) | (lo >> 16);
#endif
}

#if RLX_USE_DSP
/* GCC folds this rotate into the ROR operand of SXTB16 / SXTAB16. */
RLX_INLINE uint32_t rlx_ror(uint32_t x, uint32_t n) { return (x >> n) | (x << (32u - n)); }
#if defined(__ARM_FEATURE_DSP) && (__ARM_FEATURE_DSP == 1)
RLX_INLINE uint32_t rlx_sxtb16(uint32_t x) { return (uint32_t)__sxtb16((int32_t)x); }
/* GCC 12 does not fold the rotate into SXTB16's operand: say it directly. */
RLX_INLINE uint32_t rlx_sxtb16_ror8(uint32_t x)
{
    uint32_t r;
    __asm__("sxtb16 %0, %1, ror #8" : "=r"(r) : "r"(x));
    return r;
}
RLX_INLINE uint32_t rlx_sxtab16_ror8(uint32_t acc, uint32_t x)
{
    uint32_t r;
    __asm__("sxtab16 %0, %1, %2, ror #8" : "=r"(r) : "r"(acc), "r"(x));
    return r;
}
RLX_INLINE uint32_t rlx_sxtab16(uint32_t acc, uint32_t x) { return (uint32_t)__sxtab16((int32_t)acc, (int32_t)x); }
RLX_INLINE int32_t rlx_smlad(uint32_t a, uint32_t b, int32_t acc)
{
    return __smlad((int16x2_t)a, (int16x2_t)b, acc);
}
RLX_INLINE int32_t rlx_smlabb(uint32_t a, uint32_t b, int32_t acc) { return __smlabb((int32_t)a, (int32_t)b, acc); }
RLX_INLINE int32_t rlx_smlatt(uint32_t a, uint32_t b, int32_t acc) { return __smlatt((int32_t)a, (int32_t)b, acc); }
#else
/* C models of the instructions, exact for the values the kernels feed them
 * (the accumulations never leave int32, as on the core). */
RLX_INLINE uint32_t rlx_pack16(int32_t lo, int32_t hi) { return ((uint32_t)lo & 0xFFFFu) | ((uint32_t)hi << 16); }
RLX_INLINE uint32_t rlx_sxtb16(uint32_t x)
{
    return rlx_pack16((int8_t)(x & 0xFFu), (int8_t)((x >> 16) & 0xFFu));
}
RLX_INLINE uint32_t rlx_sxtb16_ror8(uint32_t x) { return rlx_sxtb16(rlx_ror(x, 8)); }
RLX_INLINE uint32_t rlx_sxtab16(uint32_t acc, uint32_t x)
{
    int32_t lo = (int16_t)(acc & 0xFFFFu) + (int8_t)(x & 0xFFu);
    int32_t hi = (int16_t)(acc >> 16) + (int8_t)((x >> 16) & 0xFFu);
    return rlx_pack16(lo, hi);
}
RLX_INLINE uint32_t rlx_sxtab16_ror8(uint32_t acc, uint32_t x) { return rlx_sxtab16(acc, rlx_ror(x, 8)); }
RLX_INLINE int32_t rlx_lo16(uint32_t a) { return (int16_t)(a & 0xFFFFu); }
RLX_INLINE int32_t rlx_hi16(uint32_t a) { return (int16_t)(a >> 16); }
RLX_INLINE int32_t rlx_smlad(uint32_t a, uint32_t b, int32_t acc)
{
    return (int32_t)((uint32_t)acc + (uint32_t)(rlx_lo16(a) * rlx_lo16(b)) + (uint32_t)(rlx_hi16(a) * rlx_hi16(b)));
}
RLX_INLINE int32_t rlx_smlabb(uint32_t a, uint32_t b, int32_t acc)
{
    return (int32_t)((uint32_t)acc + (uint32_t)(rlx_lo16(a) * rlx_lo16(b)));
}
RLX_INLINE int32_t rlx_smlatt(uint32_t a, uint32_t b, int32_t acc)
{
    return (int32_t)((uint32_t)acc + (uint32_t)(rlx_hi16(a) * rlx_hi16(b)));
}
#endif
/* A compiler barrier: memory is re-read after it. The GEMM uses it to load a
 * weight word twice instead of keeping it live in a scarce register. */
#define RLX_REUSE_BARRIER() __asm__ volatile("" ::: "memory")
#endif /* RLX_USE_DSP */

/* ---- fixed point (gemmlowp / TFLite reference semantics) ---------------- */

/* SaturatingRoundingDoublingHighMul: round(a*b / 2**31). gemmlowp's nudge
 * followed by truncating division equals floor((a*b + 2**30) / 2**31) for
 * both signs, which is one add and one arithmetic shift of the product. */
RLX_INLINE int32_t rlx_srdhm(int32_t a, int32_t b)
{
    if (a == INT32_MIN && b == INT32_MIN) {
        return INT32_MAX;
    }
    return (int32_t)(((int64_t)a * b + ((int64_t)1 << 30)) >> 31);
}

/* RoundingDivideByPOT: x / 2**e rounded half away from zero, 0 <= e <= 31. */
RLX_INLINE int32_t rlx_rdbpot(int32_t x, int32_t e)
{
    const int32_t mask = (int32_t)((1u << e) - 1u);
    const int32_t remainder = x & mask;
    const int32_t threshold = (mask >> 1) + (x < 0 ? 1 : 0);
    return (x >> e) + (remainder > threshold ? 1 : 0);
}

/* MultiplyByQuantizedMultiplier (int32, double rounding): a positive shift is
 * a left shift before the multiply (wrapping like the C++ kernel), a negative
 * one a rounding right shift after it. */
RLX_INLINE int32_t rlx_requantize(int32_t x, int32_t mult, int32_t shift)
{
    if (shift > 0) {
        return rlx_srdhm((int32_t)((uint32_t)x << shift), mult);
    }
    return rlx_rdbpot(rlx_srdhm(x, mult), -shift);
}

/* SMMLAR: high word of (c << 32) + a * b + 2**31. */
RLX_INLINE int32_t rlx_smmlar(int32_t a, int32_t b, int32_t c)
{
#if defined(__ARM_FEATURE_DSP) && (__ARM_FEATURE_DSP == 1)
    int32_t r;
    __asm__("smmlar %0, %1, %2, %3" : "=r"(r) : "r"(a), "r"(b), "r"(c));
    return r;
#else
    return (int32_t)(((int64_t)c * 4294967296LL + (int64_t)a * b + 0x80000000LL) >> 32);
#endif
}

/* The requantization of rq_mode 1 and 2, equal to rlx_requantize(acc, mult,
 * -e) + out_zp where the emitter has proven it (|acc| < 2**30, e >= 1, no
 * overflow: rules.fast_requant): one rounding multiply-accumulate, the sign
 * correction of RoundingDivideByPOT and one arithmetic shift. */
RLX_INLINE int32_t rlx_rq_fast(int32_t acc, int32_t mult, int32_t add, int32_t e)
{
    const int32_t t = rlx_smmlar((int32_t)((uint32_t)acc << 1), mult, add) + (acc >> 31);
    return t >> e;
}

RLX_INLINE int32_t rlx_sat8(int32_t v)
{
#if defined(__ARM_FEATURE_SAT) && (__ARM_FEATURE_SAT == 1)
    return __ssat(v, 8);
#else
    v = v < -128 ? -128 : v;
    return v > 127 ? 127 : v;
#endif
}

RLX_INLINE int32_t rlx_clamp(int32_t v, int32_t lo, int32_t hi)
{
    v = v < lo ? lo : v;
    return v > hi ? hi : v;
}

/* Trailing zero bits of a nonzero word (RBIT + CLZ on Arm). */
RLX_INLINE int32_t rlx_ctz(int32_t v)
{
#if defined(__GNUC__)
    return __builtin_ctz((uint32_t)v);
#else
    int32_t n = 0;
    for (uint32_t a = (uint32_t)v; (a & 1u) == 0u; a >>= 1) {
        n++;
    }
    return n;
#endif
}

/* The right shift e of the fast form, read off its rq_add: 2**(e-1) + zp * 2**e
 * is an odd multiple of 2**(e-1) (rules.fast_requant), so the per-channel
 * constants need no separate shift array. */
RLX_INLINE int32_t rlx_rq_e(int32_t add) { return rlx_ctz(add) + 1; }

/* A kernel's requantization, copied into a local at entry: int8 stores may
 * alias the parameter struct, a local cannot, so nothing is re-read.
 * mode 0 reads mult and shift; modes 1 and 2 mult and add (shift NULL). */
typedef struct {
    int32_t mode, out_zp, act_min, act_max;
    const int32_t *mult, *shift, *add;
} rlx_rq_params;

/* Accumulator of channel c to its int8 output (mode: see rlx_gemm_params). */
RLX_INLINE int32_t rlx_rq_out(const rlx_rq_params *q, int32_t acc, int32_t c)
{
    if (q->mode == 0) {
        return rlx_clamp(rlx_requantize(acc, q->mult[c], q->shift[c]) + q->out_zp, q->act_min, q->act_max);
    }
    const int32_t add = q->add[c];
    const int32_t v = rlx_rq_fast(acc, q->mult[c], add, rlx_rq_e(add));
    return q->mode == 2 ? rlx_sat8(v) : rlx_clamp(v, q->act_min, q->act_max);
}

/* SaturatingRoundingMultiplyByPOT for a positive exponent. */
RLX_INLINE int32_t rlx_sat_mul_pot(int32_t x, int32_t exponent)
{
    const int32_t threshold = (int32_t)((1u << (31 - exponent)) - 1u);
    if (x > threshold) {
        return INT32_MAX;
    }
    if (x < -threshold) {
        return INT32_MIN;
    }
    return (int32_t)((uint32_t)x << exponent);
}

RLX_INLINE int32_t rlx_clz32(uint32_t x)
{
#if defined(__GNUC__)
    return x == 0u ? 32 : __builtin_clz(x);
#else
    int32_t n = 0;
    if (x == 0u) {
        return 32;
    }
    while ((x & 0x80000000u) == 0u) {
        x <<= 1;
        n++;
    }
    return n;
#endif
}

/* gemmlowp RoundingHalfSum: (a + b) / 2 rounded away from zero. */
RLX_INLINE int32_t rlx_rounding_half_sum(int32_t a, int32_t b)
{
    const int64_t s = (int64_t)a + b;
    return (int32_t)((s + (s >= 0 ? 1 : -1)) / 2);
}

/* gemmlowp one_over_one_plus_x_for_x_in_0_1, Q0.31 in and out (softmax, log_softmax). */
static inline int32_t rlx_one_over_one_plus_x(int32_t a)
{
    const int32_t f2_one = 1 << 29;                 /* 1.0 in Q2.29 */
    const int32_t c48_over_17 = 1515870810;         /* Q2.29 */
    const int32_t cneg32_over_17 = -1010580540;     /* Q2.29 */
    const int32_t half_den = rlx_rounding_half_sum(a, INT32_MAX);
    int32_t x = c48_over_17 + rlx_srdhm(half_den, cneg32_over_17);
    for (int32_t i = 0; i < 3; i++) {
        const int32_t one_minus = f2_one - rlx_srdhm(half_den, x);
        x = x + rlx_sat_mul_pot(rlx_srdhm(x, one_minus), 2);
    }
    return rlx_sat_mul_pot(x, 1);
}

/* float32 round half away from zero for |v| well inside int32 (callers clamp
 * first), computed as numpy's floor(|v| + 0.5) with copysign. */
RLX_INLINE int32_t rlx_round_half_away_f32(float v)
{
    volatile float a = (v < 0.0f ? -v : v) + 0.5f; /* volatile: no contraction or reassociation */
    int32_t r = (int32_t)a;                        /* truncation == floor for a >= 0 */
    return v < 0.0f ? -r : r;
}

/* The body of a broadcasting binary kernel over p->geo (rlx_broadcast2): ONE(p, a, b)
 * computes one output element; the operands broadcast over up to four dimensions
 * through their strides (0 along a broadcast axis). Expects p, a, b and out. */
#define RLX_BINARY_LOOP(ONE)                                                                                     \
    do {                                                                                                         \
        if (!p->geo.broadcast) {                                                                                 \
            for (int32_t i = 0; i < p->geo.size; i++) {                                                          \
                out[i] = ONE(p, a[i], b[i]);                                                                     \
            }                                                                                                    \
            return;                                                                                              \
        }                                                                                                        \
        int32_t o = 0;                                                                                           \
        for (int32_t i0 = 0; i0 < p->geo.out_shape[0]; i0++) {                                                   \
            for (int32_t i1 = 0; i1 < p->geo.out_shape[1]; i1++) {                                               \
                for (int32_t i2 = 0; i2 < p->geo.out_shape[2]; i2++) {                                           \
                    int32_t ia = i0 * p->geo.a_strides[0] + i1 * p->geo.a_strides[1] + i2 * p->geo.a_strides[2]; \
                    int32_t ib = i0 * p->geo.b_strides[0] + i1 * p->geo.b_strides[1] + i2 * p->geo.b_strides[2]; \
                    for (int32_t i3 = 0; i3 < p->geo.out_shape[3]; i3++) {                                       \
                        out[o++] = ONE(p, a[ia], b[ib]);                                                         \
                        ia += p->geo.a_strides[3];                                                               \
                        ib += p->geo.b_strides[3];                                                               \
                    }                                                                                            \
                }                                                                                                \
            }                                                                                                    \
        }                                                                                                        \
    } while (0)

/* The body of a SELECT_V2 kernel over p->geo (rlx_broadcast3): PICK(p, c, xv, yv) computes one output element
 * from the condition byte and the x and y operands (a macro, so that only the operand picked is
 * read and converted); the three broadcast over up to four dimensions through their strides (0
 * along a broadcast axis). Expects p, cond, x, y and out. */
#define RLX_SELECT_LOOP(PICK)                                                                                    \
    do {                                                                                                         \
        int32_t o = 0;                                                                                           \
        for (int32_t i0 = 0; i0 < p->geo.out_shape[0]; i0++) {                                                   \
            for (int32_t i1 = 0; i1 < p->geo.out_shape[1]; i1++) {                                               \
                for (int32_t i2 = 0; i2 < p->geo.out_shape[2]; i2++) {                                           \
                    int32_t ic = i0 * p->geo.c_strides[0] + i1 * p->geo.c_strides[1] + i2 * p->geo.c_strides[2]; \
                    int32_t ix = i0 * p->geo.x_strides[0] + i1 * p->geo.x_strides[1] + i2 * p->geo.x_strides[2]; \
                    int32_t iy = i0 * p->geo.y_strides[0] + i1 * p->geo.y_strides[1] + i2 * p->geo.y_strides[2]; \
                    for (int32_t i3 = 0; i3 < p->geo.out_shape[3]; i3++) {                                       \
                        out[o++] = PICK(p, cond[ic], x[ix], y[iy]);                                              \
                        ic += p->geo.c_strides[3];                                                               \
                        ix += p->geo.x_strides[3];                                                               \
                        iy += p->geo.y_strides[3];                                                               \
                    }                                                                                            \
                }                                                                                                \
            }                                                                                                    \
        }                                                                                                        \
    } while (0)

/* The body of an integer MEAN / SUM kernel over rlx_mean_params (TFLite Micro's QuantizedMeanOrSum):
 * each output element's offset sum over its reduced block, in uint32 so that it wraps as the
 * reference's int32 sum does, then one requantization (the multiplier holds 1/count for mean).
 * Expects p, in and out; OUT_T is the output's element type. */
#define RLX_MEAN_LOOP(OUT_T)                                                                                        \
    do {                                                                                                            \
        const rlx_reduce_walk w = rlx_reduce_walk_of(p->shape, p->reduce);                                          \
        int32_t o = 0;                                                                                              \
        for (int32_t a = 0; a < w.os[0]; a++) {                                                                     \
            for (int32_t b = 0; b < w.os[1]; b++) {                                                                 \
                for (int32_t c = 0; c < w.os[2]; c++) {                                                             \
                    for (int32_t d = 0; d < w.os[3]; d++) {                                                         \
                        const int32_t base = a * w.stride[0] + b * w.stride[1] + c * w.stride[2] + d * w.stride[3]; \
                        uint32_t total = (uint32_t)p->sum_offset;                                                   \
                        for (int32_t i = 0; i < w.rs[0]; i++) {                                                     \
                            for (int32_t j = 0; j < w.rs[1]; j++) {                                                 \
                                for (int32_t k = 0; k < w.rs[2]; k++) {                                             \
                                    const int32_t at = base + i * w.stride[0] + j * w.stride[1] + k * w.stride[2];  \
                                    for (int32_t l = 0; l < w.rs[3]; l++) {                                         \
                                        total += (uint32_t)(int32_t)in[at + l * w.stride[3]];                       \
                                    }                                                                               \
                                }                                                                                   \
                            }                                                                                       \
                        }                                                                                           \
                        const int32_t y = rlx_requantize((int32_t)total, p->mult, p->shift) + p->out_zp;            \
                        out[o++] = (OUT_T)rlx_clamp(y, p->out_min, p->out_max);                                     \
                    }                                                                                               \
                }                                                                                                   \
            }                                                                                                       \
        }                                                                                                           \
    } while (0)

/* TFLite's GetInvSqrtQuantizedMultiplierExp (reverse_shift -1), as fixedpoint.inv_sqrt_quantized_multiplier_exp:
 * 1/sqrt(x) for x >= 0 as (mult, left shift <= 0); 0 and 1 give (INT32_MAX, 0). */
RLX_INLINE void rlx_inv_sqrt(int32_t x, int32_t *mult, int32_t *left_shift)
{
    if (x <= 1) {
        *mult = INT32_MAX;
        *left_shift = 0;
        return;
    }
    int32_t shift = 11;
    while (x >= (1 << 29)) {
        x /= 4;
        shift++;
    }
    /* normalize by pairs of bits into [2**27, 2**29): the square root of 4**k is exact */
    const int32_t pairs = (rlx_clz32((uint32_t)x) - 1) / 2 - 1;
    shift -= pairs;
    x <<= 2 * pairs;
    const int32_t half_input = rlx_rdbpot(x >> 1, 1); /* Q3.28 */
    const int32_t three_halves = (1 << 28) + (1 << 27);
    int32_t est = 1 << 28; /* Newton-Raphson from 1.0, Q3.28 */
    for (int32_t i = 0; i < 5; i++) {
        const int32_t cube = rlx_sat_mul_pot(rlx_srdhm(rlx_srdhm(est, est), est), 6);
        const int32_t step = (int32_t)((uint32_t)rlx_srdhm(three_halves, est) - (uint32_t)rlx_srdhm(half_input, cube));
        est = rlx_sat_mul_pot(step, 3);
    }
    est = rlx_srdhm(est, 1518500250); /* x sqrt(2) / 2 */
    if (shift < 0) {
        est = (int32_t)((uint32_t)est << -shift);
        shift = 0;
    }
    *mult = est;
    *left_shift = -shift; /* a right shift: TFLite's reverse_shift -1 */
}

#endif /* RLX_NN_SUPPORT_H */
