/*
 * TFLite's int8 softmax along the innermost axis (gemmlowp fixed point).
 *
 * exp(beta * s * (x - max)) depends only on x - max, an integer in
 * [-255, 0]: its Q0.31 value is computed at compile time by the Python
 * reference (fixedpoint.exp_on_negative_values) and read from a table. The
 * sum, its reciprocal (three Newton-Raphson steps, as gemmlowp) and the
 * final scaling run here exactly as TFLite's kernel does them.
 *
 * With a mask (one byte per position, 0 = masked) the max and the sum run
 * over the kept positions only and masked positions give the output's zero
 * (lo); a row with nothing kept is all lo. All kept is TFLite's kernel.
 */
#include "rlx_nn.h"
#include "rlx_nn_support.h"
#include "rlx_softmax_mask.h"

#define RLX_ACCUMULATION_BITS 12

/* Both entry points share this body; inlined into each, the unmasked one keeps no mask code (a part
 * with little flash, VWW in 256 KB, pays nothing for masks it does not use). */
static inline __attribute__((always_inline)) void softmax_rows(const rlx_softmax_params *p, const int8_t *in,
                                                               const uint8_t *mask, void *out)
{
    const int32_t lo = -(1 << (p->out_bits - 1));
    const int32_t hi = (1 << (p->out_bits - 1)) - 1;
    const int32_t mstep = p->mask.strides[3];
    for (int32_t r = 0; r < p->rows; r++) {
        const int8_t *x = in + r * p->depth;
        const uint8_t *m = mask ? rlx_mask_row(&p->mask, mask, r) : 0;
        int32_t max = INT8_MIN;
        int32_t kept = 0;
        for (int32_t i = 0; i < p->depth; i++) {
            if (m && !m[i * mstep]) {
                continue;
            }
            kept = 1;
            max = x[i] > max ? x[i] : max;
        }
        const int32_t *table = p->exp_table + 255 - max + INT8_MIN; /* table[x - INT8_MIN] = exp(x - max) */
        int32_t sum = 0;                                 /* Q12.19 */
        for (int32_t i = 0; i < p->depth; i++) {
            if (m && !m[i * mstep]) {
                continue;
            }
            sum += rlx_rdbpot(table[x[i] - INT8_MIN], RLX_ACCUMULATION_BITS);
        }
        /* GetReciprocal: normalize the sum into [1, 2) and invert it (a row with nothing kept
         * sums to 0: its outputs are all lo, whatever the reciprocal) */
        const int32_t headroom_plus_one = rlx_clz32((uint32_t)(kept ? sum : 1));
        const int32_t bits_over_unit = RLX_ACCUMULATION_BITS - headroom_plus_one;
        const int32_t shifted_minus_one = (int32_t)(((uint32_t)sum << headroom_plus_one) - 0x80000000u);
        const int32_t scale = rlx_one_over_one_plus_x(shifted_minus_one);
        const int32_t out_shift = bits_over_unit + 31 - p->out_bits;
        for (int32_t i = 0; i < p->depth; i++) {
            int32_t q = lo;
            if (!m || m[i * mstep]) {
                const int32_t e = table[x[i] - INT8_MIN];
                const int32_t v = rlx_rdbpot(rlx_srdhm(scale, e), out_shift) + lo;
                q = e == 0 ? lo : rlx_clamp(v, lo, hi);
            }
            if (p->out_bits == 16) {
                ((int16_t *)out)[r * p->depth + i] = (int16_t)q;
            } else {
                ((int8_t *)out)[r * p->depth + i] = (int8_t)q;
            }
        }
    }
}

void rlx_softmax_s8(const rlx_softmax_params *p, const int8_t *in, void *out)
{
    softmax_rows(p, in, 0, out);
}

void rlx_softmax_masked_s8(const rlx_softmax_params *p, const int8_t *in, const uint8_t *mask, void *out)
{
    softmax_rows(p, in, mask, out);
}
