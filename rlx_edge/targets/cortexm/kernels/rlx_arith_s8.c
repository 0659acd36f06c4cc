/*
 * TFLite's int8 SQUARED_DIFFERENCE (squared_difference.cc): both inputs onto twice the larger
 * scale with 7 bits of headroom (looked up: the op's prepare tabulates each input's scaled
 * value, the second negated), the difference squared in 32 bits (at most 32640**2, no
 * overflow), then MultiplyByQuantizedMultiplier to the output, its zero point and the clamp.
 * And TFLite's int8 ADD_N (add_n.h): each input's scaled value looked up and summed (wrapping
 * like the C++ int32 sum) from the first input's scaled -zero_point, then to the output scale.
 */
#include "rlx_arith_s8.h"

#include "rlx_nn_support.h"

RLX_INLINE int8_t rlx_squared_difference_one(const rlx_arith_params *p, int32_t a, int32_t b)
{
    const int32_t diff = p->a_table[(uint8_t)a] + p->b_table[(uint8_t)b];
    const int32_t y = rlx_requantize(diff * diff, p->out_mult, p->out_shift) + p->out_zp;
    return (int8_t)rlx_clamp(y, p->act_min, p->act_max);
}

void rlx_arith_s8(const rlx_arith_params *p, const int8_t *a, const int8_t *b, int8_t *out)
{
    RLX_BINARY_LOOP(rlx_squared_difference_one);
}

void rlx_add_n_s8(const rlx_add_n_params *p, const void *const *ins, int8_t *out)
{
    const int8_t *const *x = (const int8_t *const *)ins;
    for (int32_t i = 0; i < p->size; i++) {
        uint32_t acc = (uint32_t)p->start;
        for (int32_t j = 0; j < p->n_inputs; j++) {
            acc += (uint32_t)p->tables[256 * j + (uint8_t)x[j][i]];
        }
        const int32_t y = rlx_rdbpot(rlx_srdhm((int32_t)acc, p->out_mult), -p->out_shift) + p->out_zp;
        out[i] = (int8_t)rlx_clamp(y, p->act_min, p->act_max);
    }
}
