/*
 * Depthwise convolution with int4 weights (rlx_dw_conv_s4_params), packed two
 * per byte in flash: output channels in pairs, one byte per tap holding both
 * channels' weights, so one load serves two channels and each nibble is
 * sign-extended in a register (SBFX). Padded taps are skipped, as TFLite's
 * kernel does, and the input offset is added per tap. Per output pixel the
 * taps inside the image are found once.
 */
#include "rlx_nn.h"
#include "rlx_nn_support.h"

/* The taps of one output pixel inside the image, per axis: [lo, hi) of the kernel index. */
RLX_INLINE void rlx_dw_s4_taps(int32_t o, int32_t stride, int32_t pad, int32_t dil, int32_t k, int32_t size,
                               int32_t *lo, int32_t *hi)
{
    const int32_t start = o * stride - pad;
    int32_t a = 0, b = k;
    while (a < k && start + a * dil < 0) {
        a++;
    }
    while (b > a && start + (b - 1) * dil >= size) {
        b--;
    }
    *lo = a;
    *hi = b;
}

void rlx_depthwise_conv_s4(const rlx_dw_conv_s4_params *p, const int8_t *in, int8_t *out)
{
    const int32_t in_c = p->in_c, out_c = p->out_c, mult = p->ch_mult;
    const int32_t in_h = p->in_h, in_w = p->in_w, k_h = p->k_h, k_w = p->k_w, taps = k_h * k_w;
    const int32_t sh = p->stride_h, sw = p->stride_w, dh = p->dil_h, dw = p->dil_w;
    const int32_t pt = p->pad_top, pl = p->pad_left, off = p->in_offset;
    const uint8_t *weights = p->weights;
    const int32_t *bias = p->bias;
    const rlx_rq_params rq = {p->rq_mode, p->out_zp, p->act_min, p->act_max, p->mult, p->shift, p->rq_add};
    const int32_t row_step = dh * in_w * in_c, col_step = dw * in_c; /* input bytes between taps */
    for (int32_t n = 0; n < p->batches; n++) {
        const int8_t *img = in + n * in_h * in_w * in_c;
        for (int32_t oy = 0; oy < p->out_h; oy++) {
            int32_t ky0, ky1;
            rlx_dw_s4_taps(oy, sh, pt, dh, k_h, in_h, &ky0, &ky1);
            for (int32_t ox = 0; ox < p->out_w; ox++) {
                int32_t kx0, kx1;
                rlx_dw_s4_taps(ox, sw, pl, dw, k_w, in_w, &kx0, &kx1);
                int8_t *dst = out + ((n * p->out_h + oy) * p->out_w + ox) * out_c;
                /* the first tap inside the image */
                const int8_t *x0 = img + ((oy * sh - pt + ky0 * dh) * in_w + (ox * sw - pl + kx0 * dw)) * in_c;
                const int32_t t0 = ky0 * k_w + kx0;
                int32_t oc = 0;
                for (; oc + 2 <= out_c; oc += 2) {
                    const int8_t *xa = x0 + oc / mult, *xb = x0 + (oc + 1) / mult;
                    const uint8_t *wr = weights + (oc >> 1) * taps + t0;
                    int32_t a = bias[oc], b = bias[oc + 1];
                    for (int32_t ky = ky0; ky < ky1; ky++, xa += row_step, xb += row_step, wr += k_w) {
                        int32_t xo = 0;
                        for (int32_t kx = 0; kx < kx1 - kx0; kx++, xo += col_step) {
                            const uint32_t wv = wr[kx];
                            a += (xa[xo] + off) * ((int32_t)(wv << 28) >> 28);
                            b += (xb[xo] + off) * ((int32_t)(wv << 24) >> 28);
                        }
                    }
                    dst[oc] = (int8_t)rlx_rq_out(&rq, a, oc);
                    dst[oc + 1] = (int8_t)rlx_rq_out(&rq, b, oc + 1);
                }
                if (oc < out_c) { /* an odd last channel: its taps two per byte */
                    const int8_t *xa = x0 + oc / mult;
                    const uint8_t *wr = weights + (oc >> 1) * taps;
                    int32_t a = bias[oc];
                    for (int32_t ky = ky0; ky < ky1; ky++, xa += row_step) {
                        int32_t xo = 0;
                        for (int32_t kx = kx0; kx < kx1; kx++, xo += col_step) {
                            const int32_t t = ky * k_w + kx;
                            const uint32_t wv = wr[t >> 1];
                            a += (xa[xo] + off) * ((t & 1) ? (int32_t)(wv << 24) >> 28 : (int32_t)(wv << 28) >> 28);
                        }
                    }
                    dst[oc] = (int8_t)rlx_rq_out(&rq, a, oc);
                }
            }
        }
    }
}
