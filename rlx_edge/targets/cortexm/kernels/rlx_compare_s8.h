/*
 * rlx_compare_s8: TFLite's int8 EQUAL, NOT_EQUAL, GREATER, GREATER_EQUAL, LESS and
 * LESS_EQUAL, broadcasting as the other binary kernels; bool (one byte, 0 or 1) out.
 */
#ifndef RLX_COMPARE_S8_H
#define RLX_COMPARE_S8_H

#include <stdint.h>

#include "rlx_nn.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { RLX_CMP_EQ = 0, RLX_CMP_NE = 1, RLX_CMP_GT = 2, RLX_CMP_GE = 3, RLX_CMP_LT = 4, RLX_CMP_LE = 5 };

typedef struct {
    rlx_broadcast2 geo;
    int32_t op;              /* RLX_CMP_* */
    /* each input's 256 values as TFLite Micro compares them (((v - zp) << 8) times its scale,
     * MultiplyByQuantizedMultiplierSmallerThanOneExp), by bit pattern */
    const int32_t *a_table, *b_table;
} rlx_compare_params;

void rlx_compare_s8(const rlx_compare_params *p, const int8_t *a, const int8_t *b, uint8_t *out);

#ifdef __cplusplus
}
#endif

#endif /* RLX_COMPARE_S8_H */
