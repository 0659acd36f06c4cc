/*
 * TFLite's int16 SELECT_V2 (select.cc): out = cond ? x : y over up to four broadcast dimensions;
 * an operand quantized unlike the output is requantized as the op's eval does.
 */
#include "rlx_select_s16.h"

#include "rlx_nn_support.h"

RLX_INLINE int16_t rlx_select_operand(int32_t v, int32_t rescale, int32_t zp, int32_t mult, int32_t shift,
                                      const rlx_select_s16_params *p)
{
    if (!rescale) {
        return (int16_t)v;
    }
    return (int16_t)rlx_clamp(rlx_requantize(v - zp, mult, shift) + p->out_zp, p->act_min, p->act_max);
}

#define RLX_SELECT_S16_PICK(p, c, xv, yv)                                                           \
    ((c) ? rlx_select_operand(xv, (p)->x_rescale, (p)->x_zp, (p)->x_mult, (p)->x_shift, p)          \
         : rlx_select_operand(yv, (p)->y_rescale, (p)->y_zp, (p)->y_mult, (p)->y_shift, p))

void rlx_select_s16(const rlx_select_s16_params *p, const uint8_t *cond, const int16_t *x, const int16_t *y,
                    int16_t *out)
{
    RLX_SELECT_LOOP(RLX_SELECT_S16_PICK);
}
