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

void rlx_softmax_s8(const rlx_softmax_params *p, const int8_t *in, void *out)
{
    const int32_t lo = -(1 << (p->out_bits - 1));
    const int32_t hi = (1 << (p->out_bits - 1)) - 1;
    for (int32_t r = 0; r < p->rows; r++) {
        const int8_t *x = in + r * p->depth;
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
            const int32_t q = e == 0 ? lo : rlx_clamp(v, lo, hi);
            if (p->out_bits == 16) {
                ((int16_t *)out)[r * p->depth + i] = (int16_t)q;
            } else {
                ((int8_t *)out)[r * p->depth + i] = (int8_t)q;
            }
        }
    }
}
