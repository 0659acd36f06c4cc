/*
 * TFLite's int8 L2 normalization, any axis: each slice's sum of squared offset inputs
 * gives 1/sqrt as a Q31 multiplier and left shift (GetInvSqrtQuantizedMultiplierExp, as
 * the reference's fixedpoint.inv_sqrt_quantized_multiplier_exp), applied to each offset
 * input with 7 more bits of left shift (outputs in 1/128 steps).
 */
#include "rlx_l2_normalize_s8.h"

#include "rlx_nn_support.h"

#define RLX_L2_OUTPUT_SHIFT 7

/* 1/sqrt(x) for x >= 0 as (mult, left shift <= 0); 0 and 1 give (INT32_MAX, 0). */
static void rlx_inv_sqrt(int32_t x, int32_t *mult, int32_t *left_shift)
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

void rlx_l2_normalize_s8(const rlx_l2_normalize_params *p, const int8_t *in, int8_t *out)
{
    const int32_t step = p->inner;
    for (int32_t o = 0; o < p->outer; o++) {
        for (int32_t j = 0; j < p->inner; j++) {
            const int8_t *x = in + o * p->depth * step + j;
            int8_t *y = out + o * p->depth * step + j;
            uint32_t acc = 0; /* int32 in TFLite: wraps the same way past 2**31 */
            for (int32_t i = 0; i < p->depth; i++) {
                const int32_t d = x[i * step] - p->in_zp;
                acc += (uint32_t)(d * d);
            }
            int32_t mult, shift;
            rlx_inv_sqrt((int32_t)acc, &mult, &shift);
            for (int32_t i = 0; i < p->depth; i++) {
                const int32_t d = x[i * step] - p->in_zp;
                y[i * step] = (int8_t)rlx_sat8(rlx_requantize(d, mult, shift + RLX_L2_OUTPUT_SHIFT));
            }
        }
    }
}
