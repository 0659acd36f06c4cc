/*
 * int16 activations, int8 weights (TFLite's 16x8 scheme): convolution and
 * fully connected layers.
 *
 * The accumulation is exact in int64 (TFLite Micro's 16x8 kernels accumulate
 * in int64 with an int64 bias); a layer's `wide` flag picks the requantization
 * its reference runs (rlx_rq_s16). Padded taps are skipped, as TFLite does.
 * Weights keep TFLite's layout; the bias is int64 (0 where the layer has none).
 */
#include "rlx_nn.h"
#include "rlx_s16_support.h"

void rlx_convolve_s16(const rlx_conv_s16_params *p, const int16_t *in, int16_t *out)
{
    const int32_t in_c = p->in_c, out_c = p->out_c, off = p->in_offset;
    const int32_t taps = p->k_h * p->k_w * in_c;
    for (int32_t n = 0; n < p->batches; n++) {
        const int16_t *img = in + n * p->in_h * p->in_w * in_c;
        for (int32_t oy = 0; oy < p->out_h; oy++) {
            const int32_t y0 = oy * p->stride_h - p->pad_top;
            for (int32_t ox = 0; ox < p->out_w; ox++) {
                const int32_t x0 = ox * p->stride_w - p->pad_left;
                int16_t *dst = out + ((n * p->out_h + oy) * p->out_w + ox) * out_c;
                for (int32_t c = 0; c < out_c; c++) {
                    const int8_t *w = p->weights + c * taps;
                    int64_t acc = p->bias[c];
                    for (int32_t ky = 0; ky < p->k_h; ky++) {
                        const int32_t y = y0 + ky * p->dil_h;
                        if (y < 0 || y >= p->in_h) {
                            continue;
                        }
                        for (int32_t kx = 0; kx < p->k_w; kx++) {
                            const int32_t x = x0 + kx * p->dil_w;
                            if (x < 0 || x >= p->in_w) {
                                continue;
                            }
                            const int16_t *src = img + (y * p->in_w + x) * in_c;
                            const int8_t *wt = w + (ky * p->k_w + kx) * in_c;
                            for (int32_t i = 0; i < in_c; i++) {
                                acc += (int32_t)(src[i] + off) * wt[i];
                            }
                        }
                    }
                    dst[c] = (int16_t)rlx_rq_s16_out(acc, p->mult[c], p->shift[c], p->wide, p->out_zp, p->act_min,
                                                     p->act_max);
                }
            }
        }
    }
}

void rlx_fully_connected_s16(const rlx_fc_s16_params *p, const int16_t *in, int16_t *out)
{
    const int32_t k = p->in_features, off = p->in_offset;
    for (int32_t b = 0; b < p->batches; b++) {
        const int16_t *row = in + b * k;
        int16_t *dst = out + b * p->out_c;
        for (int32_t c = 0; c < p->out_c; c++) {
            const int8_t *w = p->weights + c * k;
            int64_t acc = p->bias[c];
            for (int32_t i = 0; i < k; i++) {
                acc += (int32_t)(row[i] + off) * w[i];
            }
            dst[c] = (int16_t)rlx_rq_s16_out(acc, p->mult[c], p->shift[c], p->wide, p->out_zp, p->act_min, p->act_max);
        }
    }
}
