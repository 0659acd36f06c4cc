/*
 * rlx_transpose_conv: see rlx_transpose_conv.h. Input pixel iy reaches output row
 * oy = iy * stride_h - pad_top + ky, so output row oy reads kernel rows ky = (oy + pad_top) mod
 * stride_h, then every stride_h-th one, from input rows (oy + pad_top) / stride_h counting down:
 * one division per output row and column, none per tap. Output channels go four at a time
 * (weights interleaved by the rule), so each input value is loaded once for four products.
 */
#include "rlx_transpose_conv.h"

#include "rlx_s16_support.h"

/* The first kernel tap of output position o and the input position it reads: the next taps go up
 * by stride while the input position goes down by one. */
typedef struct {
    int32_t k, i;
} rlx_tconv_tap;

static rlx_tconv_tap rlx_tconv_first(int32_t o, int32_t pad, int32_t stride)
{
    const int32_t t = o + pad; /* >= 0: pad >= 0 */
    const rlx_tconv_tap tap = {t % stride, t / stride};
    return tap;
}

/* acc[0..3] += sum (x + in_offset) * w over the taps of one output pixel, for the block of four
 * output channels at ob; int8 activations accumulate in int32 as TFLite Micro's kernel does
 * (int32 sums of int32 products), int16 in int64 */
#define RLX_TCONV_BLOCK(ACC_T, IN_T)                                                                    \
    do {                                                                                                \
        const IN_T *img = (const IN_T *)in + n * p->in_h * p->in_w * in_c;                              \
        for (int32_t ky = ty.k, iy = ty.i; ky < p->k_h && iy >= 0; ky += p->stride_h, iy--) {           \
            if (iy >= p->in_h) {                                                                        \
                continue;                                                                               \
            }                                                                                           \
            for (int32_t kx = tx.k, ix = tx.i; kx < p->k_w && ix >= 0; kx += p->stride_w, ix--) {       \
                if (ix >= p->in_w) {                                                                    \
                    continue;                                                                           \
                }                                                                                       \
                const IN_T *src = img + (iy * p->in_w + ix) * in_c;                                     \
                const int8_t *w = p->weights + (((ob >> 2) * p->k_h + ky) * p->k_w + kx) * in_c * 4;    \
                for (int32_t i = 0; i < in_c; i++, w += 4) {                                            \
                    const int32_t v = src[i] + off;                                                     \
                    acc[0] += (ACC_T)(v * w[0]);                                                        \
                    acc[1] += (ACC_T)(v * w[1]);                                                        \
                    acc[2] += (ACC_T)(v * w[2]);                                                        \
                    acc[3] += (ACC_T)(v * w[3]);                                                        \
                }                                                                                       \
            }                                                                                           \
        }                                                                                               \
    } while (0)

void rlx_transpose_conv(const rlx_transpose_conv_params *p, const void *in, void *out)
{
    const int32_t in_c = p->in_c, out_c = p->out_c, off = p->in_offset;
    for (int32_t n = 0; n < p->batches; n++) {
        for (int32_t oy = 0; oy < p->out_h; oy++) {
            const rlx_tconv_tap ty = rlx_tconv_first(oy, p->pad_top, p->stride_h);
            for (int32_t ox = 0; ox < p->out_w; ox++) {
                const rlx_tconv_tap tx = rlx_tconv_first(ox, p->pad_left, p->stride_w);
                const int32_t pixel = ((n * p->out_h + oy) * p->out_w + ox) * out_c;
                for (int32_t ob = 0; ob < out_c; ob += 4) {
                    const int32_t m = out_c - ob < 4 ? out_c - ob : 4;
                    if (p->elem_bytes == 1) {
                        int32_t acc[4] = {0, 0, 0, 0};
                        RLX_TCONV_BLOCK(int32_t, int8_t);
                        for (int32_t j = 0; j < m; j++) {
                            const int32_t c = ob + j;
                            /* the bias joins the int32 accumulator (rlx_rq_s16_out wraps the sum to
                             * int32 where the layer is not wide, as TFLite Micro's int32 addition) */
                            const int64_t total = (int64_t)acc[j] + p->bias[c];
                            ((int8_t *)out)[pixel + c] = (int8_t)rlx_rq_s16_out(total, p->mult[c], p->shift[c], 0,
                                                                               p->out_zp, p->act_min, p->act_max);
                        }
                    } else {
                        int64_t acc[4] = {0, 0, 0, 0};
                        RLX_TCONV_BLOCK(int64_t, int16_t);
                        for (int32_t j = 0; j < m; j++) {
                            const int32_t c = ob + j;
                            ((int16_t *)out)[pixel + c] = (int16_t)rlx_rq_s16_out(acc[j] + p->bias[c], p->mult[c],
                                                                                 p->shift[c], p->wide, p->out_zp,
                                                                                 p->act_min, p->act_max);
                        }
                    }
                }
            }
        }
    }
}
