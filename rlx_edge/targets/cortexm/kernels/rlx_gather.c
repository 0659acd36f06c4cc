/*
 * rlx_gather: every output row is either the fill or `len` elements read from the
 * input at a fixed byte stride; rows follow an odometer over the outer axes or a
 * table. One-byte elements are copied in a loop, wider ones (merged runs) with memcpy.
 * The take modes read their rows' numbers from an index tensor at run time instead.
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

/* Index k of an int32 or int64 index tensor, made non-negative for an axis of n; -1 when out of range. */
static int32_t rlx_index(const uint8_t *idx, int32_t k, int32_t bytes, int32_t n)
{
    int64_t v;
    if (bytes == 8) {
        memcpy(&v, idx + (size_t)k * 8u, 8u);
    } else {
        int32_t v32;
        memcpy(&v32, idx + (size_t)k * 4u, 4u);
        v = v32;
    }
    if (v < 0) {
        v += n;
    }
    return (v < 0 || v >= n) ? -1 : (int32_t)v;
}

static void rlx_take_row(uint8_t *dst, const uint8_t *src, int32_t row, int32_t bytes)
{
    if (row < 0) {
        memset(dst, 0, (size_t)bytes);
    } else {
        memcpy(dst, src + (size_t)row * (size_t)bytes, (size_t)bytes);
    }
}

static void rlx_take(const rlx_gather_params *p, const uint8_t *src, const uint8_t *idx, uint8_t *dst)
{
    const int32_t rb = p->row_bytes;
    for (int32_t b = 0; b < p->batches; b++) {
        for (int32_t o = 0; o < p->outer; o++) {
            const int32_t base = (b * p->outer + o) * p->axis_size;
            for (int32_t i = 0; i < p->n_idx; i++) {
                const int32_t j = rlx_index(idx, b * p->n_idx + i, p->index_bytes, p->axis_size);
                rlx_take_row(dst, src, j < 0 ? -1 : base + j, rb);
                dst += rb;
            }
        }
    }
}

static void rlx_take_nd(const rlx_gather_params *p, const uint8_t *src, const uint8_t *idx, uint8_t *dst)
{
    for (int32_t i = 0; i < p->n_idx; i++) {
        int32_t row = 0;
        for (int32_t j = 0; j < p->nd && row >= 0; j++) {
            const int32_t v = rlx_index(idx, i * p->nd + j, p->index_bytes, p->nd_dims[j]);
            row = v < 0 ? -1 : row + v * p->nd_strides[j];
        }
        rlx_take_row(dst, src, row, p->row_bytes);
        dst += p->row_bytes;
    }
}

void rlx_gather(const rlx_gather_params *p, const void *const *ins, void *const *outs)
{
    const uint8_t *src = (const uint8_t *)ins[0];
    if (p->indexed == RLX_GATHER_TAKE) {
        rlx_take(p, src, (const uint8_t *)ins[1], (uint8_t *)outs[0]);
        return;
    }
    if (p->indexed == RLX_GATHER_TAKE_ND) {
        rlx_take_nd(p, src, (const uint8_t *)ins[1], (uint8_t *)outs[0]);
        return;
    }
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
