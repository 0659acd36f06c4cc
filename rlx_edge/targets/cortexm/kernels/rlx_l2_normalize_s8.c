/*
 * TFLite's int8 L2 normalization, any axis: each slice's sum of squared offset inputs
 * gives 1/sqrt as a Q31 multiplier and left shift (GetInvSqrtQuantizedMultiplierExp, as
 * the reference's fixedpoint.inv_sqrt_quantized_multiplier_exp), applied to each offset
 * input with 7 more bits of left shift (outputs in 1/128 steps). rlx_inv_sqrt is in
 * rlx_nn_support.h (the integer norms use it too).
 */
#include "rlx_l2_normalize_s8.h"

#include "rlx_nn_support.h"

#define RLX_L2_OUTPUT_SHIFT 7

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
