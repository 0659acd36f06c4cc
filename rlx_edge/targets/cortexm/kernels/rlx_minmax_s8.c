/*
 * TFLite's int8 MAXIMUM / MINIMUM: the larger (smaller) of the two operands' output-parameter
 * bytes, looked up per bit pattern (the identity where an operand carries the output's
 * parameters, as TFLite's kernel assumes).
 */
#include "rlx_minmax_s8.h"

#include "rlx_nn_support.h"

RLX_INLINE int8_t rlx_max_one(const rlx_minmax_params *p, int8_t a, int8_t b)
{
    const int8_t x = p->a_table[(uint8_t)a], y = p->b_table[(uint8_t)b];
    return x > y ? x : y;
}

RLX_INLINE int8_t rlx_min_one(const rlx_minmax_params *p, int8_t a, int8_t b)
{
    const int8_t x = p->a_table[(uint8_t)a], y = p->b_table[(uint8_t)b];
    return x < y ? x : y;
}

void rlx_minmax_s8(const rlx_minmax_params *p, const int8_t *a, const int8_t *b, int8_t *out)
{
    if (p->op == RLX_MINMAX_MAX) {
        RLX_BINARY_LOOP(rlx_max_one);
    } else {
        RLX_BINARY_LOOP(rlx_min_one);
    }
}
