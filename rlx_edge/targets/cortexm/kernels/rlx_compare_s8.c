/*
 * TFLite's int8 comparisons (comparisons.cc, ComparisonWithScaling): both inputs rescaled to
 * 1/256 units, looked up in the tables the op's prepare made, then compared. One broadcast
 * loop (RLX_BINARY_LOOP) serves the six comparisons.
 */
#include "rlx_compare_s8.h"

#include "rlx_nn_support.h"

#define RLX_COMPARE_ONE(NAME, OP)                                                         \
    RLX_INLINE uint8_t NAME(const rlx_compare_params *p, int32_t a, int32_t b)            \
    {                                                                                     \
        return (uint8_t)(p->a_table[(uint8_t)a] OP p->b_table[(uint8_t)b]);               \
    }

RLX_COMPARE_ONE(rlx_eq_one, ==)
RLX_COMPARE_ONE(rlx_ne_one, !=)
RLX_COMPARE_ONE(rlx_gt_one, >)
RLX_COMPARE_ONE(rlx_ge_one, >=)
RLX_COMPARE_ONE(rlx_lt_one, <)
RLX_COMPARE_ONE(rlx_le_one, <=)

void rlx_compare_s8(const rlx_compare_params *p, const int8_t *a, const int8_t *b, uint8_t *out)
{
    switch (p->op) {
    case RLX_CMP_EQ:
        RLX_BINARY_LOOP(rlx_eq_one);
        break;
    case RLX_CMP_NE:
        RLX_BINARY_LOOP(rlx_ne_one);
        break;
    case RLX_CMP_GT:
        RLX_BINARY_LOOP(rlx_gt_one);
        break;
    case RLX_CMP_GE:
        RLX_BINARY_LOOP(rlx_ge_one);
        break;
    case RLX_CMP_LT:
        RLX_BINARY_LOOP(rlx_lt_one);
        break;
    default:
        RLX_BINARY_LOOP(rlx_le_one);
        break;
    }
}
