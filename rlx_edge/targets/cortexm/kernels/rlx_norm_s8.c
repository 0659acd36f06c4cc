/*
 * Integer layer norm and RMS norm, bit-exact with rlx_edge/ir/ops/norm.py (_norm_eval).
 * Per row of N offset inputs d = x - in_zp, with S1 = sum(d) and S2 = sum(d^2):
 *   layer norm: a = N*d - S1, V = N*S2 - S1^2 + eps;  RMS norm: a = N*d, V = N*S2 + eps
 * so that a / sqrt(V) is the normalized value with no rounded mean. V is brought below
 * 2**31 by pairs of bits (k of them), rlx_inv_sqrt gives 1/sqrt as a Q31 multiplier, and
 * the normalized value is taken in Q22 with one rounding shift. Gamma multiplies it and
 * TFLite's int64 requantization (the 16x8 kernels') brings it to the output; beta is
 * requantized on its own (int32) and added. The prepare in norm.py bounds the depth
 * (2**14) so that every int64 product here stays below 2**62.
 */
#include "rlx_norm_s8.h"

#include "rlx_s16_support.h"

#define RLX_NORM_FRAC_BITS 22

static int32_t rlx_norm_load(const void *p, int32_t bytes, int32_t i)
{
    switch (bytes) {
    case 1:
        return ((const int8_t *)p)[i];
    case 2:
        return ((const int16_t *)p)[i];
    default:
        return ((const int32_t *)p)[i];
    }
}

/* gemmlowp's RoundingDivideByPOT on int64 (ties away from zero), as fixedpoint.rounding_divide_by_pot */
static int64_t rlx_rdbpot64(int64_t x, int32_t e)
{
    if (e == 0) {
        return x;
    }
    return (x + ((int64_t)1 << (e - 1)) - (x < 0)) >> e;
}

/* One row: the 1/sqrt multiplier and right shift of its normalized values, and the offset of a. */
static void rlx_norm_row(const rlx_norm_params *p, int64_t s1, int64_t s2, int32_t *mult, int32_t *right)
{
    const int64_t n = p->depth;
    int64_t v = p->centered ? n * s2 - s1 * s1 + p->eps : n * s2 + p->eps;
    int32_t k = 0;
    while (v >= ((int64_t)1 << 31)) {
        v >>= 2;
        k++;
    }
    int32_t left_shift;
    rlx_inv_sqrt((int32_t)v, mult, &left_shift);
    *right = 31 + k - left_shift - RLX_NORM_FRAC_BITS;
}

static int32_t rlx_norm_out(const rlx_norm_params *p, int64_t a, int32_t mult, int32_t right, const void *gamma,
                            const void *beta, int32_t i)
{
    const int64_t xh = rlx_rdbpot64(a * mult, right); /* Q22 */
    const int64_t g = (int64_t)rlx_norm_load(gamma, p->gamma_bytes, i) - p->gamma_zp;
    int64_t y = rlx_requantize_int64(xh * g, p->g_mult, p->g_shift);
    if (p->beta_bytes) {
        const int64_t b = (int64_t)rlx_norm_load(beta, p->beta_bytes, i) - p->beta_zp;
        y += rlx_requantize((int32_t)(uint32_t)(uint64_t)b, p->b_mult, p->b_shift);
    }
    y += p->out_zp;
    return (int32_t)(y < p->act_min ? p->act_min : y > p->act_max ? p->act_max : y);
}

#define RLX_NORM_BODY(IN_T)                                                                                   \
    do {                                                                                                      \
        const int32_t n = p->depth;                                                                           \
        for (int32_t r = 0; r < p->rows; r++) {                                                               \
            const IN_T *x = in + r * n;                                                                       \
            IN_T *y = out + r * n;                                                                            \
            int64_t s1 = 0, s2 = 0;                                                                           \
            for (int32_t i = 0; i < n; i++) {                                                                 \
                const int32_t d = x[i] - p->in_zp;                                                            \
                s1 += d;                                                                                      \
                s2 += (int64_t)d * d;                                                                         \
            }                                                                                                 \
            int32_t mult, right;                                                                              \
            rlx_norm_row(p, s1, s2, &mult, &right);                                                           \
            const int64_t off = p->centered ? s1 : 0;                                                         \
            for (int32_t i = 0; i < n; i++) {                                                                 \
                const int64_t a = (int64_t)n * (x[i] - p->in_zp) - off;                                       \
                y[i] = (IN_T)rlx_norm_out(p, a, mult, right, gamma, beta, i);                                 \
            }                                                                                                 \
        }                                                                                                     \
    } while (0)

void rlx_norm_s8(const rlx_norm_params *p, const int8_t *in, const void *gamma, const void *beta, int8_t *out)
{
    RLX_NORM_BODY(int8_t);
}

void rlx_norm_s16(const rlx_norm_params *p, const int16_t *in, const void *gamma, const void *beta, int16_t *out)
{
    RLX_NORM_BODY(int16_t);
}
