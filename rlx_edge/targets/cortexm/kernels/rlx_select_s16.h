/*
 * rlx_select_s16: TFLite's int16 SELECT_V2, the condition, x and y broadcast together.
 */
#ifndef RLX_SELECT_S16_H
#define RLX_SELECT_S16_H

#include <stdint.h>

#include "rlx_nn.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    rlx_broadcast3 geo;
    /* per operand: 0 copies the stored value (it has the output's parameters, TFLite's case),
     * 1 requantizes (v - zp) by mult, shift onto the output's parameters */
    int32_t x_rescale, x_zp, x_mult, x_shift;
    int32_t y_rescale, y_zp, y_mult, y_shift;
    int32_t out_zp, act_min, act_max;
} rlx_select_s16_params;

void rlx_select_s16(const rlx_select_s16_params *p, const uint8_t *cond, const int16_t *x, const int16_t *y,
                    int16_t *out);

#ifdef __cplusplus
}
#endif

#endif /* RLX_SELECT_S16_H */
