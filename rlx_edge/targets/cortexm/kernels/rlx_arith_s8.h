/*
 * rlx_arith_s8: TFLite's int8 arithmetic builtins beyond add/sub/mul, broadcasting as the other
 * binary kernels (RLX_BINARY_LOOP): SQUARED_DIFFERENCE; and ADD_N (any number of inputs of one
 * shape). TFLite Micro's other arithmetic builtins, FLOOR_DIV and FLOOR_MOD, have no int8 kernel.
 */
#ifndef RLX_ARITH_S8_H
#define RLX_ARITH_S8_H

#include <stdint.h>

#include "rlx_nn.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    rlx_broadcast2 geo;
    /* each input's scaled value by bit pattern (the second negated), so that the raw
     * difference is a_table[a] + b_table[b] */
    const int32_t *a_table, *b_table;
    int32_t out_mult, out_shift;  /* MultiplyByQuantizedMultiplier of the squared difference */
    int32_t out_zp, act_min, act_max;
} rlx_arith_params;

void rlx_arith_s8(const rlx_arith_params *p, const int8_t *a, const int8_t *b, int8_t *out);

typedef struct {
    int32_t size;            /* elements of each input and of the output */
    int32_t n_inputs;
    /* each input's scaled value by bit pattern, n_inputs x 256: input j's table at 256 j */
    const int32_t *tables;
    int32_t start;           /* where TFLite Micro's sum starts: input 0's scaled -zero_point */
    int32_t out_mult, out_shift;  /* MultiplyByQuantizedMultiplierSmallerThanOneExp */
    int32_t out_zp, act_min, act_max;
} rlx_add_n_params;

void rlx_add_n_s8(const rlx_add_n_params *p, const void *const *ins, int8_t *out);

#ifdef __cplusplus
}
#endif

#endif /* RLX_ARITH_S8_H */
