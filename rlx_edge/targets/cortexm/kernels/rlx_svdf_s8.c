/*
 * TFLite Micro's int8 SVDF reference, one output unit at a time.
 *
 * For each of the unit's rank filters: the feature sum of the input, requantized to
 * the state's scale, clamped to the state type, plus the state's zero point (after the
 * clamp, the store wrapping, as the TFLite Micro this project pins to does), enters the
 * filter's history as its newest entry; the history, less the zero point, times the
 * time weights sums into the unit. Plus the bias, requantized, clamped to int8. The
 * fused activation is not applied: TFLite Micro's integer kernel ignores it.
 * int32 sums wrap, as TFLite Micro's do (computed in uint32: no undefined overflow).
 */
#include "rlx_svdf_s8.h"

#include "rlx_nn_support.h"

RLX_INLINE int32_t rlx_svdf_load(const void *base, int32_t bytes, int32_t i)
{
    return bytes == 2 ? ((const int16_t *)base)[i] : ((const int8_t *)base)[i];
}

RLX_INLINE void rlx_svdf_store(void *base, int32_t bytes, int32_t i, int32_t v)
{
    if (bytes == 2) {
        ((int16_t *)base)[i] = (int16_t)v; /* the conversion wraps, as TFLite Micro's store does */
    } else {
        ((int8_t *)base)[i] = (int8_t)v;
    }
}

void rlx_svdf_s8(const rlx_svdf_params *p, const int8_t *x, const int8_t *weights_feature,
                 const void *weights_time, const void *state, const int32_t *bias, int8_t *y,
                 void *new_state)
{
    const int32_t filters = p->units * p->rank, m = p->memory, sb = p->state_bytes;
    for (int32_t b = 0; b < p->batch; b++) {
        const int8_t *xb = x + b * p->inputs;
        const int32_t row0 = b * filters * m;
        for (int32_t u = 0; u < p->units; u++) {
            uint32_t acc = p->has_bias ? (uint32_t)bias[u] : 0u;
            for (int32_t r = 0; r < p->rank; r++) {
                const int32_t f = u * p->rank + r;
                const int8_t *w = weights_feature + f * p->inputs;
                uint32_t dot = 0;
                for (int32_t i = 0; i < p->inputs; i++) {
                    dot += (uint32_t)((int32_t)w[i] * ((int32_t)xb[i] - p->in_zp));
                }
                int32_t v = rlx_requantize((int32_t)dot, p->feature_mult, p->feature_shift);
                v = v < p->state_min ? p->state_min : (v > p->state_max ? p->state_max : v);
                const int32_t row = row0 + f * m;
                for (int32_t j = 0; j + 1 < m; j++) {
                    rlx_svdf_store(new_state, sb, row + j, rlx_svdf_load(state, sb, row + j + 1));
                }
                rlx_svdf_store(new_state, sb, row + m - 1, v + p->state_zp);
                uint32_t sum = 0;
                for (int32_t j = 0; j < m; j++) {
                    const int32_t h = rlx_svdf_load(new_state, sb, row + j) - p->state_zp;
                    sum += (uint32_t)rlx_svdf_load(weights_time, sb, f * m + j) * (uint32_t)h;
                }
                acc += sum;
            }
            int32_t out = rlx_requantize((int32_t)acc, p->out_mult, p->out_shift) + p->out_zp;
            out = out < INT8_MIN ? INT8_MIN : (out > INT8_MAX ? INT8_MAX : out);
            y[b * p->units + u] = (int8_t)out;
        }
    }
}
