/*
 * Grouped convolution, plain C: one exact int64 accumulator per output, over the taps inside
 * the image and the input channels of the output channel's group, then the layer's
 * requantization (rlx_rq_s16_out: int32 double rounding of the wrapped accumulator, or the
 * int64 form where `wide`), as the reference's requantize_acc.
 */
#include "rlx_convolve_grouped.h"

#include "rlx_s16_support.h"

/* the accumulator of output channel c at one output pixel; T is the activation type */
#define RLX_GROUPED_ACC(T)                                                                  \
    do {                                                                                    \
        const T *img = (const T *)in + n * p->in_h * p->in_w * p->in_c + g * ig;           \
        for (int32_t ky = 0; ky < p->k_h; ky++) {                                           \
            const int32_t y = y0 + ky * p->dil_h;                                           \
            if (y < 0 || y >= p->in_h) {                                                    \
                continue;                                                                   \
            }                                                                               \
            for (int32_t kx = 0; kx < p->k_w; kx++) {                                       \
                const int32_t x = x0 + kx * p->dil_w;                                       \
                if (x < 0 || x >= p->in_w) {                                                \
                    continue;                                                               \
                }                                                                           \
                const T *src = img + (y * p->in_w + x) * p->in_c;                           \
                const int8_t *wt = w + (ky * p->k_w + kx) * ig;                             \
                for (int32_t i = 0; i < ig; i++) {                                          \
                    acc += (int32_t)(src[i] + p->in_offset) * wt[i];                        \
                }                                                                           \
            }                                                                               \
        }                                                                                   \
    } while (0)

void rlx_convolve_grouped(const rlx_conv_grouped_params *p, const void *in, void *out)
{
    const int32_t ig = p->in_c / p->groups, og = p->out_c / p->groups;
    const int32_t taps = p->k_h * p->k_w * ig;
    int32_t o = 0;
    for (int32_t n = 0; n < p->batches; n++) {
        for (int32_t oy = 0; oy < p->out_h; oy++) {
            const int32_t y0 = oy * p->stride_h - p->pad_top;
            for (int32_t ox = 0; ox < p->out_w; ox++) {
                const int32_t x0 = ox * p->stride_w - p->pad_left;
                for (int32_t c = 0; c < p->out_c; c++, o++) {
                    const int32_t g = c / og;
                    const int8_t *w = p->weights + c * taps;
                    int64_t acc = p->bias[c];
                    if (p->elem_bytes == 2) {
                        RLX_GROUPED_ACC(int16_t);
                    } else {
                        RLX_GROUPED_ACC(int8_t);
                    }
                    const int32_t y = rlx_rq_s16_out(acc, p->mult[c], p->shift[c], p->wide, p->out_zp, p->act_min,
                                                     p->act_max);
                    if (p->elem_bytes == 2) {
                        ((int16_t *)out)[o] = (int16_t)y;
                    } else {
                        ((int8_t *)out)[o] = (int8_t)y;
                    }
                }
            }
        }
    }
}
