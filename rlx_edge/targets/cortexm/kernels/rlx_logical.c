/*
 * Logical ops on bools. Any non-zero byte reads as true, as TFLite's bool tensors; the result is
 * 0 or 1. AND and OR share the broadcast loop (RLX_BINARY_LOOP) of the arithmetic kernels.
 */
#include "rlx_logical.h"

#include "rlx_nn_support.h"

RLX_INLINE uint8_t rlx_and_one(const rlx_logical_params *p, uint8_t a, uint8_t b)
{
    (void)p;
    return (uint8_t)((a != 0) & (b != 0));
}

RLX_INLINE uint8_t rlx_or_one(const rlx_logical_params *p, uint8_t a, uint8_t b)
{
    (void)p;
    return (uint8_t)((a != 0) | (b != 0));
}

void rlx_logical(const rlx_logical_params *p, const uint8_t *a, const uint8_t *b, uint8_t *out)
{
    switch (p->op) {
    case RLX_LOGICAL_AND:
        RLX_BINARY_LOOP(rlx_and_one);
        break;
    case RLX_LOGICAL_OR:
        RLX_BINARY_LOOP(rlx_or_one);
        break;
    default:
        for (int32_t i = 0; i < p->geo.size; i++) {
            out[i] = (uint8_t)(a[i] == 0);
        }
        break;
    }
}
