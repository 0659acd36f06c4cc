/*
 * Depthwise convolution. Padded taps are skipped (TFLite's semantics), so the
 * input offset is added per tap instead of being folded into the bias; on
 * DSP cores SXTAB16 adds it to two channels in the same instruction that
 * sign-extends them, so the offset costs nothing.
 */
#include "rlx_nn.h"
#include "rlx_nn_support.h"

RLX_INLINE int8_t rlx_dw_finish(const rlx_dw_conv_params *p, int32_t acc, int32_t c)
{
    return (int8_t)rlx_clamp(rlx_requantize(acc, p->mult[c], p->shift[c]) + p->out_zp, p->act_min, p->act_max);
}

/* Any kernel size, stride, dilation and depth multiplier. */
void rlx_depthwise_conv_s8(const rlx_dw_conv_params *p, const int8_t *in, int8_t *out)
{
    const int32_t in_c = p->in_c;
    const int32_t out_c = p->out_c;
    for (int32_t n = 0; n < p->batches; n++) {
        const int8_t *img = in + n * p->in_h * p->in_w * in_c;
        for (int32_t oy = 0; oy < p->out_h; oy++) {
            for (int32_t ox = 0; ox < p->out_w; ox++) {
                int8_t *dst = out + ((n * p->out_h + oy) * p->out_w + ox) * out_c;
                for (int32_t c = 0; c < in_c; c++) {
                    for (int32_t m = 0; m < p->ch_mult; m++) {
                        const int32_t oc = c * p->ch_mult + m;
                        int32_t acc = p->bias[oc];
                        for (int32_t i = 0; i < p->k_h; i++) {
                            const int32_t iy = oy * p->stride_h - p->pad_top + i * p->dil_h;
                            if (iy < 0 || iy >= p->in_h) {
                                continue;
                            }
                            for (int32_t j = 0; j < p->k_w; j++) {
                                const int32_t ix = ox * p->stride_w - p->pad_left + j * p->dil_w;
                                if (ix < 0 || ix >= p->in_w) {
                                    continue;
                                }
                                const int32_t x = img[(iy * p->in_w + ix) * in_c + c] + p->in_offset;
                                acc += x * p->weights[(i * p->k_w + j) * out_c + oc];
                            }
                        }
                        dst[oc] = rlx_dw_finish(p, acc, oc);
                    }
                }
            }
        }
    }
}

/* 3x3, depth multiplier 1, no dilation, channels a multiple of 4 on DSP
 * cores: four channels per word, the tap range clipped once per pixel. */
void rlx_depthwise_conv_3x3_s8(const rlx_dw_conv_params *p, const int8_t *in, int8_t *out)
{
    const int32_t ch = p->in_c;
#if RLX_USE_DSP
    const uint32_t off2 = ((uint32_t)p->in_offset & 0xFFFFu) | ((uint32_t)p->in_offset << 16);
#endif
    for (int32_t n = 0; n < p->batches; n++) {
        const int8_t *img = in + n * p->in_h * p->in_w * ch;
        for (int32_t oy = 0; oy < p->out_h; oy++) {
            const int32_t y0 = oy * p->stride_h - p->pad_top;
            const int32_t i_lo = y0 < 0 ? -y0 : 0;
            const int32_t i_hi = y0 + 3 > p->in_h ? p->in_h - y0 : 3;
            for (int32_t ox = 0; ox < p->out_w; ox++) {
                const int32_t x0 = ox * p->stride_w - p->pad_left;
                const int32_t j_lo = x0 < 0 ? -x0 : 0;
                const int32_t j_hi = x0 + 3 > p->in_w ? p->in_w - x0 : 3;
                int8_t *dst = out + ((n * p->out_h + oy) * p->out_w + ox) * ch;
                int32_t c = 0;
#if RLX_USE_DSP
                for (; c + 4 <= ch; c += 4) {
                    int32_t acc0 = p->bias[c], acc1 = p->bias[c + 1], acc2 = p->bias[c + 2], acc3 = p->bias[c + 3];
                    for (int32_t i = i_lo; i < i_hi; i++) {
                        /* pointers start at the first real tap: never before the image */
                        const int8_t *row = img + ((y0 + i) * p->in_w + x0 + j_lo) * ch + c;
                        const int8_t *wrow = p->weights + (i * 3 + j_lo) * ch + c;
                        for (int32_t j = j_lo; j < j_hi; j++, row += ch, wrow += ch) {
                            const uint32_t xv = rlx_rd32(row);
                            const uint32_t wv = rlx_rd32(wrow);
                            const uint32_t x02 = rlx_sxtab16(off2, xv);
                            const uint32_t x13 = rlx_sxtab16_ror8(off2, xv);
                            const uint32_t w02 = rlx_sxtb16(wv);
                            const uint32_t w13 = rlx_sxtb16_ror8(wv);
                            acc0 = rlx_smlabb(x02, w02, acc0);
                            acc2 = rlx_smlatt(x02, w02, acc2);
                            acc1 = rlx_smlabb(x13, w13, acc1);
                            acc3 = rlx_smlatt(x13, w13, acc3);
                        }
                    }
                    dst[c] = rlx_dw_finish(p, acc0, c);
                    dst[c + 1] = rlx_dw_finish(p, acc1, c + 1);
                    dst[c + 2] = rlx_dw_finish(p, acc2, c + 2);
                    dst[c + 3] = rlx_dw_finish(p, acc3, c + 3);
                }
#endif
                for (; c < ch; c++) {
                    int32_t acc = p->bias[c];
                    for (int32_t i = i_lo; i < i_hi; i++) {
                        const int8_t *row = img + ((y0 + i) * p->in_w + x0 + j_lo) * ch + c;
                        const int8_t *wrow = p->weights + (i * 3 + j_lo) * ch + c;
                        for (int32_t j = j_lo; j < j_hi; j++, row += ch, wrow += ch) {
                            acc += (*row + p->in_offset) * *wrow;
                        }
                    }
                    dst[c] = rlx_dw_finish(p, acc, c);
                }
            }
        }
    }
}
