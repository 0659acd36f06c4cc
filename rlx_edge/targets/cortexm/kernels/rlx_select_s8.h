/*
 * rlx_select_s8: TFLite's int8 SELECT_V2, the condition, x and y broadcast together.
 */
#ifndef RLX_SELECT_S8_H
#define RLX_SELECT_S8_H

#include <stdint.h>

#include "rlx_nn.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    rlx_broadcast3 geo;
    /* the output byte for each bit pattern of x and of y: the value itself where the operand has
     * the output's parameters (TFLite's copy), else its requantization */
    const int8_t *x_table, *y_table;
} rlx_select_params;

void rlx_select_s8(const rlx_select_params *p, const uint8_t *cond, const int8_t *x, const int8_t *y, int8_t *out);

#ifdef __cplusplus
}
#endif

#endif /* RLX_SELECT_S8_H */
