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

void rlx_select_s16(const rlx_select_s16_params *p, const uint8_t *cond, const int16_t *x, const int16_t *y,
                    int16_t *out)
{
    int32_t o = 0;
    for (int32_t i0 = 0; i0 < p->out_shape[0]; i0++) {
        for (int32_t i1 = 0; i1 < p->out_shape[1]; i1++) {
            for (int32_t i2 = 0; i2 < p->out_shape[2]; i2++) {
                int32_t ic = i0 * p->c_strides[0] + i1 * p->c_strides[1] + i2 * p->c_strides[2];
                int32_t ix = i0 * p->x_strides[0] + i1 * p->x_strides[1] + i2 * p->x_strides[2];
                int32_t iy = i0 * p->y_strides[0] + i1 * p->y_strides[1] + i2 * p->y_strides[2];
                for (int32_t i3 = 0; i3 < p->out_shape[3]; i3++) {
                    out[o++] = cond[ic] ? rlx_select_operand(x[ix], p->x_rescale, p->x_zp, p->x_mult, p->x_shift, p)
                                        : rlx_select_operand(y[iy], p->y_rescale, p->y_zp, p->y_mult, p->y_shift, p);
                    ic += p->c_strides[3];
                    ix += p->x_strides[3];
                    iy += p->y_strides[3];
                }
            }
        }
    }
}
