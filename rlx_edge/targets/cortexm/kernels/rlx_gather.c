/*
 * rlx_gather: every output row is either the fill or `len` elements read from the
 * input at a fixed byte stride; rows follow an odometer over the outer axes or a
 * table. One-byte elements are copied in a loop, wider ones (merged runs) with memcpy.
 */
#include <stddef.h>
#include <string.h>

#include "rlx_gather.h"

static void rlx_gather_row(uint8_t *dst, const uint8_t *src, int32_t len, int32_t step, int32_t eb)
{
    if (eb == 1) {
        for (int32_t j = 0; j < len; j++) {
            dst[j] = src[(ptrdiff_t)j * step];
        }
        return;
    }
    for (int32_t j = 0; j < len; j++) {
        memcpy(dst + (size_t)j * (size_t)eb, src + (ptrdiff_t)j * step, (size_t)eb);
    }
}

void rlx_gather(const rlx_gather_params *p, const void *in, void *const *outs)
{
    const uint8_t *src = (const uint8_t *)in;
    for (int32_t k = 0; k < p->n_outputs; k++) {
        const int32_t *w = p->walks + k * RLX_GATHER_WALK_INTS;
        const int32_t eb = w[0];
        const int32_t *shape = w + 1;
        const int32_t *stride = w + 7;
        const int32_t *rows = w[14] < 0 ? NULL : p->rows + w[14];
        const int32_t len = shape[5];
        const int32_t n_rows = shape[0] * shape[1] * shape[2] * shape[3] * shape[4];
        uint8_t *dst = (uint8_t *)outs[k];
        int32_t idx[5] = {0, 0, 0, 0, 0};
        int32_t at = w[13]; /* input byte of the current row, walking the outer axes */
        for (int32_t r = 0; r < n_rows; r++) {
            const int32_t base = rows != NULL ? rows[r] : at;
            if (base < 0) {
                for (int32_t j = 0; j < len; j++) {
                    memcpy(dst + (size_t)j * (size_t)eb, p->fill, (size_t)eb);
                }
            } else {
                rlx_gather_row(dst, src + base, len, stride[5], eb);
            }
            dst += (size_t)len * (size_t)eb;
            for (int32_t d = 4; d >= 0; d--) { /* odometer over the outer axes */
                at += stride[d];
                if (++idx[d] < shape[d]) {
                    break;
                }
                at -= stride[d] * shape[d];
                idx[d] = 0;
            }
        }
    }
}
