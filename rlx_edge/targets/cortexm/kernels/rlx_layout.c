/*
 * Data movement and the few float32 kernels: pad, concatenation, mean,
 * quantize. Float arithmetic goes through volatile temporaries so that no
 * compiler setting fuses a multiply and an add the reference keeps apart.
 */
#include "rlx_nn.h"
#include "rlx_nn_support.h"

void rlx_pad(const rlx_pad_params *p, const void *in, void *out)
{
    const int32_t eb = p->elem_bytes;
    const uint8_t *src = (const uint8_t *)in;
    uint8_t *dst = (uint8_t *)out;
    const int32_t total = rlx_elements6(p->out_shape);
    for (int32_t i = 0; i < total; i++) {
        memcpy(dst + i * eb, p->fill, (size_t)eb);
    }
    /* copy the input's innermost rows into place */
    const int32_t row = p->in_shape[5] * eb;
    int32_t idx[5] = {0, 0, 0, 0, 0};
    int32_t rows = 1;
    for (int32_t d = 0; d < 5; d++) {
        rows *= p->in_shape[d];
    }
    for (int32_t r = 0; r < rows; r++) {
        int32_t o = 0;
        for (int32_t d = 0; d < 5; d++) {
            o = o * p->out_shape[d] + idx[d] + p->before[d];
        }
        o = o * p->out_shape[5] + p->before[5];
        memcpy(dst + o * eb, src + r * row, (size_t)row);
        for (int32_t d = 4; d >= 0; d--) { /* odometer over the outer dimensions */
            if (++idx[d] < p->in_shape[d]) {
                break;
            }
            idx[d] = 0;
        }
    }
}

void rlx_concat(const rlx_concat_params *p, const void *const *ins, void *out)
{
    uint8_t *dst = (uint8_t *)out;
    for (int32_t o = 0; o < p->outer; o++) {
        for (int32_t k = 0; k < p->n_inputs; k++) {
            const int32_t n = p->chunk[k];
            const uint8_t *src = (const uint8_t *)ins[k] + o * n;
            const uint8_t *t = p->tables + 256 * k;
            if (!p->mapped[k]) {
                memcpy(dst, src, (size_t)n);
            } else {
                for (int32_t i = 0; i < n; i++) {
                    dst[i] = t[src[i]];
                }
            }
            dst += n;
        }
    }
}

/* TFLite Micro's integer quantized mean: the offset int32 sum times one
 * multiplier that already holds 1/count, double rounding. */
void rlx_mean_s8(const rlx_mean_params *p, const int8_t *in, int8_t *out)
{
    RLX_MEAN_LOOP(int8_t);
}

/* TFLite's reference quantize: round(x / scale) half away from zero, plus the
 * zero point, saturated; NaN gives the zero point. */
void rlx_quantize_f32_s8(const rlx_quantize_params *p, const float *in, int8_t *out)
{
    for (int32_t i = 0; i < p->size; i++) {
        volatile float v = in[i] / p->scale;
        int32_t q;
        if (v != v) {
            q = p->zp;
        } else if (v > 1.0e9f) {
            q = p->out_max;
        } else if (v < -1.0e9f) {
            q = p->out_min;
        } else {
            q = rlx_round_half_away_f32(v) + p->zp;
        }
        out[i] = (int8_t)rlx_clamp(q, p->out_min, p->out_max);
    }
}
