/*
 * int16 activations, int8 weights: depthwise convolution (TFLite's 16x8
 * scheme). Exact int64 accumulation, padded taps skipped, requantized as the
 * layer's reference does (rlx_rq_s16). Weights in TFLite's [k_h][k_w][out_c].
 */
#include "rlx_nn.h"
#include "rlx_s16_support.h"

void rlx_depthwise_conv_s16(const rlx_dw_conv_s16_params *p, const int16_t *in, int16_t *out)
{
    const int32_t in_c = p->in_c, out_c = p->out_c, m = p->ch_mult, off = p->in_offset;
    for (int32_t n = 0; n < p->batches; n++) {
        const int16_t *img = in + n * p->in_h * p->in_w * in_c;
        for (int32_t oy = 0; oy < p->out_h; oy++) {
            const int32_t y0 = oy * p->stride_h - p->pad_top;
            for (int32_t ox = 0; ox < p->out_w; ox++) {
                const int32_t x0 = ox * p->stride_w - p->pad_left;
                int16_t *dst = out + ((n * p->out_h + oy) * p->out_w + ox) * out_c;
                for (int32_t c = 0; c < out_c; c++) {
                    const int32_t ic = c / m;
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
                            const int32_t v = img[(y * p->in_w + x) * in_c + ic] + off;
                            acc += v * p->weights[(ky * p->k_w + kx) * out_c + c];
                        }
                    }
                    dst[c] = (int16_t)rlx_rq_s16_out(acc, p->mult[c], p->shift[c], p->wide, p->out_zp, p->act_min,
                                                     p->act_max);
                }
            }
        }
    }
}
