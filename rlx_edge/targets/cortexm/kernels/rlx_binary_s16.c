/*
 * int16 SQUARED_DIFFERENCE: both inputs onto the common scale (rlx_edge/ir/ops/elementwise.py's
 * _scaled_input), the int32 difference squared with int32 wrapping, then one requantization.
 * int16 MAXIMUM / MINIMUM: the larger / smaller of the two operands in the output's parameters.
 */
#include "rlx_binary_s16.h"

#include "rlx_nn_support.h"

RLX_INLINE int32_t rlx_sqdiff_s16(const rlx_binary_s16_params *p, int32_t a, int32_t b)
{
    const int32_t sa = rlx_requantize((int32_t)((uint32_t)(a + p->a_offset) << p->left_shift), p->a_mult, p->a_shift);
    const int32_t sb = rlx_requantize((int32_t)((uint32_t)(b + p->b_offset) << p->left_shift), p->b_mult, p->b_shift);
    const uint32_t diff = (uint32_t)sa - (uint32_t)sb;
    const int32_t y = rlx_requantize((int32_t)(diff * diff), p->out_mult, p->out_shift) + p->out_zp;
    return rlx_clamp(y, p->act_min, p->act_max);
}

/* an operand in the output's parameters: as stored, or requantized (|v + offset| < 2**17) */
RLX_INLINE int32_t rlx_onto_out_s16(const rlx_binary_s16_params *p, int32_t v, int32_t rescale, int32_t offset,
                                    int32_t mult, int32_t shift)
{
    if (!rescale) {
        return v;
    }
    return rlx_clamp(rlx_requantize(v + offset, mult, shift) + p->out_zp, p->act_min, p->act_max);
}

RLX_INLINE int32_t rlx_max_s16(const rlx_binary_s16_params *p, int32_t a, int32_t b)
{
    const int32_t x = rlx_onto_out_s16(p, a, p->a_rescale, p->a_offset, p->a_mult, p->a_shift);
    const int32_t y = rlx_onto_out_s16(p, b, p->b_rescale, p->b_offset, p->b_mult, p->b_shift);
    return x > y ? x : y;
}

RLX_INLINE int32_t rlx_min_s16(const rlx_binary_s16_params *p, int32_t a, int32_t b)
{
    const int32_t x = rlx_onto_out_s16(p, a, p->a_rescale, p->a_offset, p->a_mult, p->a_shift);
    const int32_t y = rlx_onto_out_s16(p, b, p->b_rescale, p->b_offset, p->b_mult, p->b_shift);
    return x < y ? x : y;
}

#define RLX_SQDIFF_ONE(p, x, y) (int16_t) rlx_sqdiff_s16((p), (x), (y))
#define RLX_MAX_ONE(p, x, y) (int16_t) rlx_max_s16((p), (x), (y))
#define RLX_MIN_ONE(p, x, y) (int16_t) rlx_min_s16((p), (x), (y))

void rlx_binary_s16(const rlx_binary_s16_params *p, const int16_t *a, const int16_t *b, int16_t *out)
{
    switch (p->op) {
    case RLX_BINARY_S16_SQUARED_DIFFERENCE:
        RLX_BINARY_LOOP(RLX_SQDIFF_ONE);
        break;
    case RLX_BINARY_S16_MAXIMUM:
        RLX_BINARY_LOOP(RLX_MAX_ONE);
        break;
    default:
        RLX_BINARY_LOOP(RLX_MIN_ONE);
        break;
    }
}
