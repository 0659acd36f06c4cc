/*
 * rlx_minmax_s8: TFLite's int8 MAXIMUM and MINIMUM (maximum_minimum.cc), two operands broadcast
 * as the other binary kernels (RLX_BINARY_LOOP).
 */
#ifndef RLX_MINMAX_S8_H
#define RLX_MINMAX_S8_H

#include <stdint.h>

#include "rlx_nn.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { RLX_MINMAX_MAX = 0, RLX_MINMAX_MIN = 1 };

typedef struct {
    rlx_broadcast2 geo;
    int32_t op;              /* RLX_MINMAX_* */
    /* the output byte for each bit pattern of a and of b: the value itself where the operand has
     * the output's parameters (TFLite compares stored values), else its requantization */
    const int8_t *a_table, *b_table;
} rlx_minmax_params;

void rlx_minmax_s8(const rlx_minmax_params *p, const int8_t *a, const int8_t *b, int8_t *out);

#ifdef __cplusplus
}
#endif

#endif /* RLX_MINMAX_S8_H */
