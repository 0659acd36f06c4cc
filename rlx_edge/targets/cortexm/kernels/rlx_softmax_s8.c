/*
 * TFLite's int8 softmax along the innermost axis (gemmlowp fixed point).
 *
 * exp(beta * s * (x - max)) depends only on x - max, an integer in
 * [-255, 0]: its Q0.31 value is computed at compile time by the Python
 * reference (fixedpoint.exp_on_negative_values) and read from a table. The
 * sum, its reciprocal (three Newton-Raphson steps, as gemmlowp) and the
 * final scaling run here exactly as TFLite's kernel does them.
 */
#include "rlx_nn.h"
#include "rlx_nn_support.h"

#define RLX_ACCUMULATION_BITS 12

/* gemmlowp RoundingHalfSum: (a + b) / 2 rounded away from zero. */
static int32_t rlx_rounding_half_sum(int32_t a, int32_t b)
{
    const int64_t s = (int64_t)a + b;
    return (int32_t)((s + (s >= 0 ? 1 : -1)) / 2);
}

/* gemmlowp one_over_one_plus_x_for_x_in_0_1, Q0.31 in and out. */
static int32_t rlx_one_over_one_plus_x(int32_t a)
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

void rlx_softmax_s8(const rlx_softmax_params *p, const int8_t *in, int8_t *out)
{
    const int32_t lo = -(1 << (p->out_bits - 1));
    const int32_t hi = (1 << (p->out_bits - 1)) - 1;
    for (int32_t r = 0; r < p->rows; r++) {
        const int8_t *x = in + r * p->depth;
        int8_t *y = out + r * p->depth;
        int32_t max = INT8_MIN;
        for (int32_t i = 0; i < p->depth; i++) {
            max = x[i] > max ? x[i] : max;
        }
        const int32_t *table = p->exp_table + 255 - max + INT8_MIN; /* table[x - INT8_MIN] = exp(x - max) */
        int32_t sum = 0;                                 /* Q12.19 */
        for (int32_t i = 0; i < p->depth; i++) {
            sum += rlx_rdbpot(table[x[i] - INT8_MIN], RLX_ACCUMULATION_BITS);
        }
        /* GetReciprocal: normalize the sum into [1, 2) and invert it */
        const int32_t headroom_plus_one = rlx_clz32((uint32_t)sum);
        const int32_t bits_over_unit = RLX_ACCUMULATION_BITS - headroom_plus_one;
        const int32_t shifted_minus_one = (int32_t)(((uint32_t)sum << headroom_plus_one) - 0x80000000u);
        const int32_t scale = rlx_one_over_one_plus_x(shifted_minus_one);
        const int32_t out_shift = bits_over_unit + 31 - p->out_bits;
        for (int32_t i = 0; i < p->depth; i++) {
            const int32_t e = table[x[i] - INT8_MIN];
            const int32_t v = rlx_rdbpot(rlx_srdhm(scale, e), out_shift) + lo;
            y[i] = (int8_t)(e == 0 ? lo : rlx_clamp(v, lo, hi));
        }
    }
}
