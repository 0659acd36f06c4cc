/*
 * Average and max pooling (TFLite semantics: padded taps never take part;
 * the average divides by the number of real taps, rounding half away from
 * zero as C division after adding half the count).
 */
#include "rlx_nn.h"
#include "rlx_nn_support.h"

/* The taps of one output pixel's window that lie in the image: rows
 * [i_lo, i_hi), columns [j_lo, j_hi). */
typedef struct {
    int32_t i_lo, i_hi, j_lo, j_hi;
} rlx_pool_window;

/* TFLite's average of `count` real taps summing to `acc`, clamped. */
RLX_INLINE int8_t rlx_avg_out(const rlx_pool_params *p, int32_t acc, int32_t count)
{
    const int32_t num = acc > 0 ? acc + count / 2 : acc - count / 2;
    return (int8_t)rlx_clamp(num / count, p->act_min, p->act_max);
}

/* The scratch holds one int32 sum per channel, so the taps are visited in
 * memory order (channels innermost) rather than one channel at a time. */
RLX_INLINE void rlx_avg_window(const rlx_pool_params *p, const int8_t *img, rlx_pool_window win, int8_t *dst,
                               int32_t *scratch)
{
    const int32_t ch = p->ch;
    const int32_t count = (win.i_hi - win.i_lo) * (win.j_hi - win.j_lo);
#if RLX_USE_DSP
    if ((ch & 3) == 0 && count <= 255) {
        /* 4 channels a word: int16 lane sums (|sum| <= 255 * 128
         * fits), two SXTAB16 a tap */
        const int32_t row = p->in_w * ch;
        const int32_t jn = win.j_hi - win.j_lo;
        for (int32_t c = 0; c < ch; c += 4) {
            uint32_t s02 = 0, s13 = 0;
            const int8_t *src = img + (win.i_lo * p->in_w + win.j_lo) * ch + c;
            for (int32_t i = win.i_lo; i < win.i_hi; i++, src += row) {
                const int8_t *t = src;
                for (int32_t j = 0; j < jn; j++, t += ch) {
                    const uint32_t v = rlx_rd32(t);
                    s02 = rlx_sxtab16(s02, v);
                    s13 = rlx_sxtab16_ror8(s13, v);
                }
            }
            const int32_t sums[4] = {(int16_t)(s02 & 0xFFFFu), (int16_t)(s13 & 0xFFFFu), (int16_t)(s02 >> 16),
                                     (int16_t)(s13 >> 16)};
            for (int32_t r = 0; r < 4; r++) {
                dst[c + r] = rlx_avg_out(p, sums[r], count);
            }
        }
        return;
    }
#endif
    for (int32_t c = 0; c < ch; c++) {
        scratch[c] = 0;
    }
    for (int32_t i = win.i_lo; i < win.i_hi; i++) {
        for (int32_t j = win.j_lo; j < win.j_hi; j++) {
            const int8_t *src = img + (i * p->in_w + j) * ch;
            for (int32_t c = 0; c < ch; c++) {
                scratch[c] += src[c];
            }
        }
    }
    for (int32_t c = 0; c < ch; c++) {
        dst[c] = rlx_avg_out(p, scratch[c], count);
    }
}

/* The output row is the running maximum: no scratch needed. */
RLX_INLINE void rlx_max_window(const rlx_pool_params *p, const int8_t *img, rlx_pool_window win, int8_t *dst)
{
    const int32_t ch = p->ch;
    for (int32_t c = 0; c < ch; c++) {
        dst[c] = INT8_MIN;
    }
    for (int32_t i = win.i_lo; i < win.i_hi; i++) {
        for (int32_t j = win.j_lo; j < win.j_hi; j++) {
            const int8_t *src = img + (i * p->in_w + j) * ch;
            for (int32_t c = 0; c < ch; c++) {
                dst[c] = src[c] > dst[c] ? src[c] : dst[c];
            }
        }
    }
    for (int32_t c = 0; c < ch; c++) {
        dst[c] = (int8_t)rlx_clamp(dst[c], p->act_min, p->act_max);
    }
}

/* Every output pixel's window, clipped to the image. Inlined into each entry
 * point below with `max` a constant, so each compiles to one kernel. */
RLX_INLINE void rlx_pool_s8(const rlx_pool_params *p, const int8_t *in, int8_t *out, int32_t *scratch, int32_t max)
{
    const int32_t ch = p->ch;
    rlx_pool_window win;
    for (int32_t n = 0; n < p->batches; n++) {
        const int8_t *img = in + n * p->in_h * p->in_w * ch;
        for (int32_t oy = 0; oy < p->out_h; oy++) {
            const int32_t y0 = oy * p->stride_h - p->pad_top;
            win.i_lo = y0 < 0 ? 0 : y0;
            win.i_hi = y0 + p->k_h > p->in_h ? p->in_h : y0 + p->k_h;
            for (int32_t ox = 0; ox < p->out_w; ox++) {
                const int32_t x0 = ox * p->stride_w - p->pad_left;
                win.j_lo = x0 < 0 ? 0 : x0;
                win.j_hi = x0 + p->k_w > p->in_w ? p->in_w : x0 + p->k_w;
                int8_t *dst = out + ((n * p->out_h + oy) * p->out_w + ox) * ch;
                if (max) {
                    rlx_max_window(p, img, win, dst);
                } else {
                    rlx_avg_window(p, img, win, dst, scratch);
                }
            }
        }
    }
}

void rlx_avgpool_s8(const rlx_pool_params *p, const int8_t *in, int8_t *out, int32_t *scratch)
{
    rlx_pool_s8(p, in, out, scratch, 0);
}

void rlx_maxpool_s8(const rlx_pool_params *p, const int8_t *in, int8_t *out)
{
    rlx_pool_s8(p, in, out, NULL, 1);
}
