/*
 * TFLite's int8 SELECT_V2 (select.cc): out = cond ? x : y, all three broadcast over up to four
 * dimensions; an operand quantized unlike the output goes through its table.
 */
#include "rlx_select_s8.h"

void rlx_select_s8(const rlx_select_params *p, const uint8_t *cond, const int8_t *x, const int8_t *y, int8_t *out)
{
    int32_t o = 0;
    for (int32_t i0 = 0; i0 < p->out_shape[0]; i0++) {
        for (int32_t i1 = 0; i1 < p->out_shape[1]; i1++) {
            for (int32_t i2 = 0; i2 < p->out_shape[2]; i2++) {
                int32_t ic = i0 * p->c_strides[0] + i1 * p->c_strides[1] + i2 * p->c_strides[2];
                int32_t ix = i0 * p->x_strides[0] + i1 * p->x_strides[1] + i2 * p->x_strides[2];
                int32_t iy = i0 * p->y_strides[0] + i1 * p->y_strides[1] + i2 * p->y_strides[2];
                for (int32_t i3 = 0; i3 < p->out_shape[3]; i3++) {
                    out[o++] = cond[ic] ? p->x_table[(uint8_t)x[ix]] : p->y_table[(uint8_t)y[iy]];
                    ic += p->c_strides[3];
                    ix += p->x_strides[3];
                    iy += p->y_strides[3];
                }
            }
        }
    }
}
