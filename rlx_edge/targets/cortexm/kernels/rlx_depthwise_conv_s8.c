/*
 * Depthwise convolution. Padded taps are skipped (TFLite's semantics), so the
 * input offset is added per tap instead of being folded into the bias; on
 * DSP cores SXTAB16 adds it to two channels in the same instruction that
 * sign-extends them, so the offset costs nothing.
 */
#include "rlx_nn.h"
#include "rlx_nn_support.h"

#define RLX_DW_RQ(p) {(p)->rq_mode, (p)->out_zp, (p)->act_min, (p)->act_max, (p)->mult, (p)->shift, (p)->rq_add}
#define rlx_dw_finish(p, acc, c) ((int8_t)rlx_rq_out(&rq, (acc), (c)))

/* Any kernel size, stride, dilation and depth multiplier. */
void rlx_depthwise_conv_s8(const rlx_dw_conv_params *p, const int8_t *in, int8_t *out)
{
    const int32_t in_c = p->in_c;
    const int32_t out_c = p->out_c;
    const rlx_rq_params rq = RLX_DW_RQ(p);
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

#if RLX_USE_DSP
/* One tap for 4 channels: the input word widened with the offset added
 * (SXTAB16), the int16 weights of the tap as two pairs (c0 c2, c1 c3). */
#define RLX_DW_TAP(xp, wp)                                                                     \
    do {                                                                                       \
        const uint32_t xv_ = rlx_rd32(xp);                                                     \
        const uint32_t x02_ = rlx_sxtab16(off2, xv_), x13_ = rlx_sxtab16_ror8(off2, xv_);      \
        const uint32_t w02_ = rlx_rd32(wp), w13_ = rlx_rd32((wp) + 2);                         \
        acc0 = rlx_smlabb(x02_, w02_, acc0);                                                   \
        acc2 = rlx_smlatt(x02_, w02_, acc2);                                                   \
        acc1 = rlx_smlabb(x13_, w13_, acc1);                                                   \
        acc3 = rlx_smlatt(x13_, w13_, acc3);                                                   \
    } while (0)
#endif

/* 3x3, depth multiplier 1, no dilation. A pixel whose 9 taps are all inside
 * the image runs straight-line code; border pixels loop over the clipped tap
 * range. DSP cores (channels a multiple of 4): four channels per input word,
 * int16 weights from flash. Portable: the input offset of an interior pixel
 * is folded into its bias at compile time (bias_full). */
void rlx_depthwise_conv_3x3_s8(const rlx_dw_conv_params *p, const int8_t *in, int8_t *out)
{
    const int32_t ch = p->in_c;
    const int32_t row = p->in_w * ch;
    const rlx_rq_params rq = RLX_DW_RQ(p);
    const int8_t *const weights9 = p->weights9;
    const int32_t *const bias_full = p->bias_full;
#if RLX_USE_DSP
    const int16_t *const weights16 = p->weights16;
    const int32_t *const bias = p->bias;
#endif
#if RLX_USE_DSP
    const uint32_t off2 = ((uint32_t)p->in_offset & 0xFFFFu) | ((uint32_t)p->in_offset << 16);
#endif
    for (int32_t n = 0; n < p->batches; n++) {
        const int8_t *img = in + n * p->in_h * row;
        for (int32_t oy = 0; oy < p->out_h; oy++) {
            const int32_t y0 = oy * p->stride_h - p->pad_top;
            const int32_t i_lo = y0 < 0 ? -y0 : 0;
            const int32_t i_hi = y0 + 3 > p->in_h ? p->in_h - y0 : 3;
            for (int32_t ox = 0; ox < p->out_w; ox++) {
                const int32_t x0 = ox * p->stride_w - p->pad_left;
                const int32_t j_lo = x0 < 0 ? -x0 : 0;
                const int32_t j_hi = x0 + 3 > p->in_w ? p->in_w - x0 : 3;
                const int32_t full = i_lo == 0 && i_hi == 3 && j_lo == 0 && j_hi == 3;
                int8_t *dst = out + ((n * p->out_h + oy) * p->out_w + ox) * ch;
                int32_t c = 0;
#if RLX_USE_DSP
                if (weights16 != NULL) {
                    const int16_t *w = weights16;
                    for (; c + 4 <= ch; c += 4, w += 36) {
                        int32_t acc0 = bias[c], acc1 = bias[c + 1], acc2 = bias[c + 2], acc3 = bias[c + 3];
                        if (full) {
                            const int8_t *r = img + (y0 * p->in_w + x0) * ch + c;
#if defined(__ARM_FEATURE_DSP) && (__ARM_FEATURE_DSP == 1) && !defined(RLX_NO_ASM)
                            /* 9 taps x 4 channels, 8 instructions a tap: the
                             * 13 registers C compilers spill out of */
                            uint32_t xv, xt, wa, wb;
#define RLX_DW_ASM_TAP(XADDR, WOFF)                           \
    "ldr     %[xv], " XADDR "\n\t"                            \
    "ldrd    %[wa], %[wb], [%[w], #" WOFF "]\n\t"             \
    "sxtab16 %[xt], %[off], %[xv]\n\t"                        \
    "sxtab16 %[xv], %[off], %[xv], ror #8\n\t"                \
    "smlabb  %[a0], %[xt], %[wa], %[a0]\n\t"                  \
    "smlatt  %[a2], %[xt], %[wa], %[a2]\n\t"                  \
    "smlabb  %[a1], %[xv], %[wb], %[a1]\n\t"                  \
    "smlatt  %[a3], %[xv], %[wb], %[a3]\n\t"
                            __asm__(RLX_DW_ASM_TAP("[%[r]]", "0") RLX_DW_ASM_TAP("[%[r], %[ch]]", "8")
                                        RLX_DW_ASM_TAP("[%[r], %[ch], lsl #1]", "16") "add     %[r], %[r], %[row]\n\t"
                                        RLX_DW_ASM_TAP("[%[r]]", "24") RLX_DW_ASM_TAP("[%[r], %[ch]]", "32")
                                            RLX_DW_ASM_TAP("[%[r], %[ch], lsl #1]", "40")
                                                "add     %[r], %[r], %[row]\n\t" RLX_DW_ASM_TAP("[%[r]]", "48")
                                                    RLX_DW_ASM_TAP("[%[r], %[ch]]", "56")
                                                        RLX_DW_ASM_TAP("[%[r], %[ch], lsl #1]", "64")
                                    : [a0] "+r"(acc0), [a1] "+r"(acc1), [a2] "+r"(acc2), [a3] "+r"(acc3), [r] "+r"(r),
                                      [xv] "=&r"(xv), [xt] "=&r"(xt), [wa] "=&r"(wa), [wb] "=&r"(wb)
                                    : [w] "r"(w), [ch] "r"(ch), [row] "r"(row), [off] "r"(off2)
                                    : "memory");
#else
                            for (int32_t i = 0; i < 3; i++, r += row) {
                                RLX_DW_TAP(r, w + 12 * i);
                                RLX_DW_TAP(r + ch, w + 12 * i + 4);
                                RLX_DW_TAP(r + 2 * ch, w + 12 * i + 8);
                            }
#endif
                        } else if (i_lo == 0 && i_hi == 3 && j_hi - j_lo == 2) {
                            /* a left or right edge pixel: 3 rows of 2 taps */
                            const int8_t *r = img + (y0 * p->in_w + x0 + j_lo) * ch + c;
                            const int16_t *wj = w + 4 * j_lo;
#if defined(__ARM_FEATURE_DSP) && (__ARM_FEATURE_DSP == 1) && !defined(RLX_NO_ASM)
                            uint32_t xv, xt, wa, wb;
                            __asm__(RLX_DW_ASM_TAP("[%[r]]", "0") RLX_DW_ASM_TAP("[%[r], %[ch]]", "8")
                                        "add     %[r], %[r], %[row]\n\t" RLX_DW_ASM_TAP("[%[r]]", "24")
                                            RLX_DW_ASM_TAP("[%[r], %[ch]]", "32") "add     %[r], %[r], %[row]\n\t"
                                                RLX_DW_ASM_TAP("[%[r]]", "48") RLX_DW_ASM_TAP("[%[r], %[ch]]", "56")
                                    : [a0] "+r"(acc0), [a1] "+r"(acc1), [a2] "+r"(acc2), [a3] "+r"(acc3), [r] "+r"(r),
                                      [xv] "=&r"(xv), [xt] "=&r"(xt), [wa] "=&r"(wa), [wb] "=&r"(wb)
                                    : [w] "r"(wj), [ch] "r"(ch), [row] "r"(row), [off] "r"(off2)
                                    : "memory");
#else
                            for (int32_t i = 0; i < 3; i++, r += row) {
                                RLX_DW_TAP(r, wj + 12 * i);
                                RLX_DW_TAP(r + ch, wj + 12 * i + 4);
                            }
#endif
                        } else {
                            for (int32_t i = i_lo; i < i_hi; i++) {
                                /* pointers start at the first real tap: never before the image */
                                const int8_t *r = img + ((y0 + i) * p->in_w + x0 + j_lo) * ch + c;
                                const int16_t *wr = w + 4 * (i * 3 + j_lo);
                                for (int32_t j = j_lo; j < j_hi; j++, r += ch, wr += 4) {
                                    RLX_DW_TAP(r, wr);
                                }
                            }
                        }
                        dst[c] = rlx_dw_finish(p, acc0, c);
                        dst[c + 1] = rlx_dw_finish(p, acc1, c + 1);
                        dst[c + 2] = rlx_dw_finish(p, acc2, c + 2);
                        dst[c + 3] = rlx_dw_finish(p, acc3, c + 3);
                    }
                }
#endif
                if (full && bias_full != NULL) {
                    const int8_t *r = img + (y0 * p->in_w + x0) * ch;
                    const int8_t *w = weights9;
                    for (; c < ch; c++, w += 9) {
                        const int8_t *r0 = r + c, *r1 = r0 + row, *r2 = r1 + row;
                        int32_t acc = bias_full[c];
                        acc += r0[0] * w[0] + r0[ch] * w[1] + r0[2 * ch] * w[2];
                        acc += r1[0] * w[3] + r1[ch] * w[4] + r1[2 * ch] * w[5];
                        acc += r2[0] * w[6] + r2[ch] * w[7] + r2[2 * ch] * w[8];
                        dst[c] = rlx_dw_finish(p, acc, c);
                    }
                }
                for (; c < ch; c++) {
                    int32_t acc = p->bias[c];
                    for (int32_t i = i_lo; i < i_hi; i++) {
                        const int8_t *r = img + ((y0 + i) * p->in_w + x0 + j_lo) * ch + c;
                        const int8_t *wr = p->weights + (i * 3 + j_lo) * ch + c;
                        for (int32_t j = j_lo; j < j_hi; j++, r += ch, wr += ch) {
                            acc += (*r + p->in_offset) * *wr;
                        }
                    }
                    dst[c] = rlx_dw_finish(p, acc, c);
                }
            }
        }
    }
}

#ifdef RLX_DW_ASM_TAP
#undef RLX_DW_ASM_TAP
#endif
