/*
 * rlx_transpose: walks the output in order with an odometer over its axes; the
 * input offset moves by the stride of the axis that turned.
 */
#include <string.h>

#include "rlx_nn_support.h"
#include "rlx_transpose.h"

void rlx_transpose(const rlx_transpose_params *p, const void *in, void *out)
{
    const int32_t eb = p->elem_bytes;
    const uint8_t *src = (const uint8_t *)in;
    uint8_t *dst = (uint8_t *)out;
    const int32_t total = rlx_elements6(p->out_shape);
    int32_t idx[6] = {0, 0, 0, 0, 0, 0};
    int32_t off = 0; /* input element of the current output element */
    for (int32_t i = 0; i < total; i++) {
        if (eb == 1) {
            dst[i] = src[off];
        } else {
            memcpy(dst + (size_t)i * (size_t)eb, src + (size_t)off * (size_t)eb, (size_t)eb);
        }
        for (int32_t d = 5; d >= 0; d--) {
            off += p->in_stride[d];
            if (++idx[d] < p->out_shape[d]) {
                break;
            }
            off -= p->in_stride[d] * p->out_shape[d];
            idx[d] = 0;
        }
    }
}
