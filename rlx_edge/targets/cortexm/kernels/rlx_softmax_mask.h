/*
 * rlx_softmax_mask.h: where the int8 and int16 softmax kernels read a row's mask.
 */
#ifndef RLX_SOFTMAX_MASK_H
#define RLX_SOFTMAX_MASK_H

#include "rlx_nn.h"

/* The mask byte of row r's element 0; element i is at + i * w->strides[3]. */
static inline const uint8_t *rlx_mask_row(const rlx_mask_walk *w, const uint8_t *mask, int32_t r)
{
    const int32_t i2 = r % w->dims[1];
    const int32_t i1 = (r / w->dims[1]) % w->dims[0];
    const int32_t i0 = r / (w->dims[1] * w->dims[0]);
    return mask + i0 * w->strides[0] + i1 * w->strides[1] + i2 * w->strides[2];
}

#endif /* RLX_SOFTMAX_MASK_H */
