/*
 * Depthwise convolution. Padded taps are skipped (TFLite's semantics). The
 * general kernel adds the input offset per tap. The 3x3 kernel on DSP cores
 * with the fast requantization (rlx_dw3x3_dsp) folds it into per-pixel-kind
 * biases instead (all 9 taps, or a clipped left or right column), reads a
 * row of the zero point (pad3) for rows outside the image, and accumulates
 * doubled (the acc << 1 of SMMLAR); otherwise SXTAB16 adds the offset to two
 * channels in the instruction that sign-extends them. The 3x3 kernel of the
 * int8 layouts (balanced) widens the int8 weights in registers (rlx_dw8_*).
 */
#include "rlx_nn.h"
#include "rlx_nn_support.h"

#define RLX_DW_RQ(p) {(p)->rq_mode, (p)->out_zp, (p)->act_min, (p)->act_max, (p)->mult, (p)->shift, (p)->rq_add}
#define rlx_dw_finish(p, acc, c) ((int8_t)rlx_rq_out(&rq, (acc), (c)))

/* The taps of one output pixel inside the image, per axis: [lo, hi) of the kernel index. */
RLX_INLINE void rlx_dw_taps(int32_t o, int32_t stride, int32_t pad, int32_t dil, int32_t k, int32_t size,
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

/* Any kernel size, stride, dilation and depth multiplier. Per output pixel the taps inside the
 * image are found once (no test per tap); the parameters are locals (an int8 store may alias
 * the struct). Depth multiplier 1 runs four channels at a time with the accumulators in
 * registers (SXTAB16 adds the input offset to two channels as it widens them; SMLABB/SMLATT
 * multiply-accumulate each channel), the other channels one at a time. */
void rlx_depthwise_conv_s8(const rlx_dw_conv_params *p, const int8_t *in, int8_t *out)
{
    const int32_t in_c = p->in_c, out_c = p->out_c, mult = p->ch_mult;
    const int32_t in_h = p->in_h, in_w = p->in_w, k_h = p->k_h, k_w = p->k_w;
    const int32_t sh = p->stride_h, sw = p->stride_w, dh = p->dil_h, dw = p->dil_w;
    const int32_t pt = p->pad_top, pl = p->pad_left, off = p->in_offset;
    const int8_t *weights = p->weights;
    const int32_t *bias = p->bias;
    const rlx_rq_params rq = RLX_DW_RQ(p);
    const int32_t row_step = dh * in_w * in_c, col_step = dw * in_c; /* input bytes between taps */
    const int32_t wrow_step = k_w * out_c;
    for (int32_t n = 0; n < p->batches; n++) {
        const int8_t *img = in + n * in_h * in_w * in_c;
        for (int32_t oy = 0; oy < p->out_h; oy++) {
            int32_t ky0, ky1;
            rlx_dw_taps(oy, sh, pt, dh, k_h, in_h, &ky0, &ky1);
            for (int32_t ox = 0; ox < p->out_w; ox++) {
                int32_t kx0, kx1;
                rlx_dw_taps(ox, sw, pl, dw, k_w, in_w, &kx0, &kx1);
                int8_t *dst = out + ((n * p->out_h + oy) * p->out_w + ox) * out_c;
                /* the first tap inside the image, for channel 0 */
                const int8_t *x0 = img + ((oy * sh - pt + ky0 * dh) * in_w + (ox * sw - pl + kx0 * dw)) * in_c;
                const int8_t *w0 = weights + (ky0 * k_w + kx0) * out_c;
                int32_t oc = 0;
#if RLX_USE_DSP
                if (mult == 1) {
                    const uint32_t off2 = ((uint32_t)(uint16_t)off << 16) | (uint16_t)off;
                    for (; oc + 4 <= out_c; oc += 4) {
                        int32_t acc0 = bias[oc], acc1 = bias[oc + 1], acc2 = bias[oc + 2], acc3 = bias[oc + 3];
                        const int8_t *xr = x0 + oc, *wr = w0 + oc;
                        for (int32_t ky = ky0; ky < ky1; ky++, xr += row_step, wr += wrow_step) {
                            const int8_t *xp = xr, *wp = wr;
                            for (int32_t kx = kx0; kx < kx1; kx++, xp += col_step, wp += out_c) {
                                const uint32_t xv = rlx_rd32(xp), wv = rlx_rd32(wp);
                                const uint32_t x02 = rlx_sxtab16(off2, xv), x13 = rlx_sxtab16_ror8(off2, xv);
                                const uint32_t w02 = rlx_sxtb16(wv), w13 = rlx_sxtb16_ror8(wv);
                                acc0 = rlx_smlabb(x02, w02, acc0);
                                acc2 = rlx_smlatt(x02, w02, acc2);
                                acc1 = rlx_smlabb(x13, w13, acc1);
                                acc3 = rlx_smlatt(x13, w13, acc3);
                            }
                        }
                        dst[oc] = rlx_dw_finish(p, acc0, oc);
                        dst[oc + 1] = rlx_dw_finish(p, acc1, oc + 1);
                        dst[oc + 2] = rlx_dw_finish(p, acc2, oc + 2);
                        dst[oc + 3] = rlx_dw_finish(p, acc3, oc + 3);
                    }
                }
#endif
                /* depth multiplier > 1: the outputs of each input channel two at a time, each
                 * input byte loaded once for both (an odd last one goes to the loop below) */
                for (int32_t c = 0; mult > 1 && c < in_c; c++) {
                    for (int32_t o = c * mult; o + 2 <= (c + 1) * mult; o += 2) {
                        int32_t acc0 = bias[o], acc1 = bias[o + 1];
                        const int8_t *xr = x0 + c, *wr = w0 + o;
                        for (int32_t ky = ky0; ky < ky1; ky++, xr += row_step, wr += wrow_step) {
                            const int8_t *xp = xr, *wp = wr;
                            for (int32_t kx = kx0; kx < kx1; kx++, xp += col_step, wp += out_c) {
                                const int32_t v = *xp + off;
                                acc0 += v * wp[0];
                                acc1 += v * wp[1];
                            }
                        }
                        dst[o] = rlx_dw_finish(p, acc0, o);
                        dst[o + 1] = rlx_dw_finish(p, acc1, o + 1);
                    }
                }
                if (mult > 1) {
                    /* only the last output of each input channel is left when mult is odd */
                    oc = (mult % 2) ? mult - 1 : out_c;
                }
                for (; oc < out_c; oc += (mult > 1 ? mult : 1)) {
                    int32_t acc = bias[oc];
                    const int8_t *xr = x0 + oc / mult, *wr = w0 + oc;
                    for (int32_t ky = ky0; ky < ky1; ky++, xr += row_step, wr += wrow_step) {
                        const int8_t *xp = xr, *wp = wr;
                        for (int32_t kx = kx0; kx < kx1; kx++, xp += col_step, wp += out_c) {
                            acc += (*xp + off) * *wp;
                        }
                    }
                    dst[oc] = rlx_dw_finish(p, acc, oc);
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

#if RLX_USE_DSP
/* One output value: the doubled accumulator through the fast requantization
 * (rlx_rq_fast without its shift of acc), saturated (sat) or clamped. */
RLX_INLINE int8_t rlx_dw_rq2(int32_t acc2, const int32_t *ma, int32_t e, int32_t sat, int32_t lo, int32_t hi)
{
    const int32_t v = (rlx_smmlar(acc2, ma[0], ma[1]) + (acc2 >> 31)) >> e;
    return (int8_t)(sat ? rlx_sat8(v) : rlx_clamp(v, lo, hi));
}

/* Channels [c0, in_c) of a pixel the SIMD tap sets do not cover (fewer
 * than two rows or columns of taps inside the image, or the channels past
 * the last group of 4): the reference loop, the offset added per tap. */
static void rlx_dw3x3_narrow(const rlx_dw_conv_params *p, const int8_t *img, int32_t y0, int32_t x0, int32_t c0,
                             int8_t *dst)
{
    const rlx_rq_params rq = RLX_DW_RQ(p);
    const int32_t ch = p->in_c;
    for (int32_t c = c0; c < ch; c++) {
        int32_t acc = p->bias[c];
        for (int32_t i = 0; i < 3; i++) {
            for (int32_t j = 0; j < 3; j++) {
                const int32_t iy = y0 + i, ix = x0 + j;
                if (iy >= 0 && iy < p->in_h && ix >= 0 && ix < p->in_w) {
                    acc += (img[(iy * p->in_w + ix) * ch + c] + p->in_offset) * p->weights[(i * 3 + j) * ch + c];
                }
            }
        }
        dst[c] = (int8_t)rlx_rq_out(&rq, acc, c);
    }
}

#if defined(__ARM_FEATURE_DSP) && (__ARM_FEATURE_DSP == 1) && !defined(RLX_NO_ASM)
/* One tap for 4 channels, the offset folded into the bias: 8 instructions. */
#define RLX_DW2_TAP(XADDR, WADDR)                              \
    "ldr     %[xv], " XADDR "\n\t"                            \
    "ldrd    %[wa], %[wb], " WADDR "\n\t"                      \
    "sxtb16  %[xt], %[xv]\n\t"                                \
    "sxtb16  %[xv], %[xv], ror #8\n\t"                        \
    "smlabb  %[a0], %[xt], %[wa], %[a0]\n\t"                  \
    "smlatt  %[a2], %[xt], %[wa], %[a2]\n\t"                  \
    "smlabb  %[a1], %[xv], %[wb], %[a1]\n\t"                  \
    "smlatt  %[a3], %[xv], %[wb], %[a3]\n\t"
#define RLX_DW2_OPS                                                                                             \
    : [a0] "+r"(a0), [a1] "+r"(a1), [a2] "+r"(a2), [a3] "+r"(a3), [xv] "=&r"(xv), [xt] "=&r"(xt), [wa] "=&r"(wa), \
      [wb] "=&r"(wb), [r0] "+r"(r0), [r1] "+r"(r1), [r2] "+r"(r2), [w] "+r"(w)                                 \
    : [ch] "r"(ch)                                                                                              \
    : "memory"
#else
RLX_INLINE void rlx_dw2_tap(const int8_t *x, const int16_t *w, int32_t *a0, int32_t *a1, int32_t *a2, int32_t *a3)
{
    const uint32_t xv = rlx_rd32(x);
    const uint32_t x02 = rlx_sxtb16(xv), x13 = rlx_sxtb16_ror8(xv);
    const uint32_t w02 = rlx_rd32(w), w13 = rlx_rd32(w + 2);
    *a0 = rlx_smlabb(x02, w02, *a0);
    *a2 = rlx_smlatt(x02, w02, *a2);
    *a1 = rlx_smlabb(x13, w13, *a1);
    *a3 = rlx_smlatt(x13, w13, *a3);
}
#endif

/* All channels of one pixel, 4 at a time: ncols (3, or 2 at a clipped edge)
 * columns of taps from the three row pointers, the first column's weights
 * at w; q walks the 24-word groups of dwq, kb picks the bias of the taps. */
RLX_INLINE void rlx_dw3x3_dsp_px(const int8_t *r0, const int8_t *r1, const int8_t *r2, const int16_t *w,
                                 const int32_t *q, int32_t kb, int32_t ch, int8_t *dst, int32_t ncols, int32_t sat,
                                 int32_t lo, int32_t hi)
{
    const int8_t *const end = dst + ch;
    for (; dst != end; dst += 4, q += 24) {
        int32_t a0 = q[kb], a1 = q[kb + 1], a2 = q[kb + 2], a3 = q[kb + 3];
#if defined(__ARM_FEATURE_DSP) && (__ARM_FEATURE_DSP == 1) && !defined(RLX_NO_ASM)
        uint32_t xv, xt, wa, wb;
        /* column 0 of each row last, post-incrementing its pointer to the
         * next group; the weight load of tap (0, 0) steps w to the next group */
        if (ncols == 3) {
            __asm__(RLX_DW2_TAP("[%[r0], %[ch], lsl #1]", "[%[w], #16]") RLX_DW2_TAP("[%[r0], %[ch]]", "[%[w], #8]")
                        RLX_DW2_TAP("[%[r0]], #4", "[%[w]], #72") RLX_DW2_TAP("[%[r1], %[ch], lsl #1]", "[%[w], #-32]")
                            RLX_DW2_TAP("[%[r1], %[ch]]", "[%[w], #-40]") RLX_DW2_TAP("[%[r1]], #4", "[%[w], #-48]")
                                RLX_DW2_TAP("[%[r2], %[ch], lsl #1]", "[%[w], #-8]")
                                    RLX_DW2_TAP("[%[r2], %[ch]]", "[%[w], #-16]")
                                        RLX_DW2_TAP("[%[r2]], #4", "[%[w], #-24]") RLX_DW2_OPS);
        } else {
            __asm__(RLX_DW2_TAP("[%[r0], %[ch]]", "[%[w], #8]") RLX_DW2_TAP("[%[r0]], #4", "[%[w]], #72")
                        RLX_DW2_TAP("[%[r1], %[ch]]", "[%[w], #-40]") RLX_DW2_TAP("[%[r1]], #4", "[%[w], #-48]")
                            RLX_DW2_TAP("[%[r2], %[ch]]", "[%[w], #-16]")
                                RLX_DW2_TAP("[%[r2]], #4", "[%[w], #-24]") RLX_DW2_OPS);
        }
#else
        const int8_t *rows[3] = {r0, r1, r2};
        for (int32_t i = 0; i < 3; i++) {
            for (int32_t j = 0; j < ncols; j++) {
                rlx_dw2_tap(rows[i] + j * ch, w + 12 * i + 4 * j, &a0, &a1, &a2, &a3);
            }
        }
        r0 += 4;
        r1 += 4;
        r2 += 4;
        w += 36;
#endif
        dst[0] = rlx_dw_rq2(a0, q + 12, q[20], sat, lo, hi);
        dst[1] = rlx_dw_rq2(a1, q + 14, q[21], sat, lo, hi);
        dst[2] = rlx_dw_rq2(a2, q + 16, q[22], sat, lo, hi);
        dst[3] = rlx_dw_rq2(a3, q + 18, q[23], sat, lo, hi);
    }
}

/* Out of line, one per tap set and output rule: the tap asm needs 13
 * registers, which the caller's loop state would otherwise take. */
#if defined(__GNUC__)
#define RLX_NOINLINE __attribute__((noinline))
#else
#define RLX_NOINLINE
#endif
/* The per-layer constants of the pixel functions. */
typedef struct {
    const int16_t *w;
    const int32_t *q;
    int32_t ch, lo, hi;
} rlx_dw_k;

/* 9 taps: one pixel */
#define RLX_DW3X3_PX9(NAME, SAT)                                                                                  \
    static RLX_NOINLINE void NAME(const rlx_dw_k *k, const int8_t *r0, const int8_t *r1, const int8_t *r2,        \
                                  int8_t *dst)                                                                    \
    {                                                                                                             \
        rlx_dw3x3_dsp_px(r0, r1, r2, k->w, k->q, 0, k->ch, dst, 3, SAT, k->lo, k->hi);                            \
    }
/* 6 taps: the left (j_lo 1) or right (j_lo 0) edge pixel */
#define RLX_DW3X3_PX6(NAME, SAT)                                                                                  \
    static RLX_NOINLINE void NAME(const rlx_dw_k *k, const int8_t *r0, const int8_t *r1, const int8_t *r2,        \
                                  int8_t *dst, int32_t j_lo)                                                      \
    {                                                                                                             \
        rlx_dw3x3_dsp_px(r0, r1, r2, k->w + 4 * j_lo, k->q, j_lo ? 4 : 8, k->ch, dst, 2, SAT, k->lo, k->hi);      \
    }
RLX_DW3X3_PX9(rlx_dw3x3_px9_sat, 1)
RLX_DW3X3_PX9(rlx_dw3x3_px9_clamp, 0)
RLX_DW3X3_PX6(rlx_dw3x3_px6_sat, 1)
RLX_DW3X3_PX6(rlx_dw3x3_px6_clamp, 0)

/* The DSP 3x3 path with the fast requantization: every pixel runs one of
 * three straight-line tap sets (all 9, or 6 at a left or right edge); a row
 * above or below the image reads pad3 (the zero point, which the folded
 * bias cancels) in place of the image, with no step between pixels. The
 * pixels with all 9 taps inside a row form one run, walked by pointer steps. */
static RLX_NOINLINE void rlx_dw3x3_dsp(const rlx_dw_conv_params *p, const int8_t *in, int8_t *out)
{
    const int32_t ch = p->in_c, in_h = p->in_h, in_w = p->in_w, out_w = p->out_w;
    const int32_t sw = p->stride_w, pl = p->pad_left;
    const rlx_dw_k k = {p->weights16x2, p->dwq, ch, p->act_min, p->act_max};
    const int32_t sat = p->rq_mode == 2;
    /* the run of pixels whose 3 columns are inside: [ox_a, ox_b) */
    const int32_t ox_a = (pl + sw - 1) / sw;
    int32_t ox_b = in_w - 3 + pl >= 0 ? (in_w - 3 + pl) / sw + 1 : 0;
    ox_b = ox_b < out_w ? ox_b : out_w;
    for (int32_t n = 0; n < p->batches; n++) {
        const int8_t *img = in + n * in_h * in_w * ch;
        for (int32_t oy = 0; oy < p->out_h; oy++) {
            const int32_t y0 = oy * p->stride_h - p->pad_top;
            const int8_t *base[3];
            int32_t cs[3];
            for (int32_t i = 0; i < 3; i++) {
                const int32_t iy = y0 + i;
                const int32_t inside = iy >= 0 && iy < in_h;
                base[i] = inside ? img + iy * in_w * ch : p->pad3;
                cs[i] = inside ? ch : 0;
            }
            int8_t *const orow = out + (n * p->out_h + oy) * out_w * ch;
            if (ox_a < ox_b) {
                const int32_t xs = ox_a * sw - pl;
                const int8_t *r0 = base[0] + xs * cs[0], *r1 = base[1] + xs * cs[1], *r2 = base[2] + xs * cs[2];
                const int32_t s0 = sw * cs[0], s1 = sw * cs[1], s2 = sw * cs[2];
                int8_t *dst = orow + ox_a * ch;
                for (int32_t ox = ox_a; ox < ox_b; ox++, r0 += s0, r1 += s1, r2 += s2, dst += ch) {
                    if (sat) {
                        rlx_dw3x3_px9_sat(&k, r0, r1, r2, dst);
                    } else {
                        rlx_dw3x3_px9_clamp(&k, r0, r1, r2, dst);
                    }
                }
            }
            for (int32_t ox = 0; ox < out_w; ox++) {
                if (ox == ox_a && ox_a < ox_b) {
                    ox = ox_b - 1;
                    continue;
                }
                int8_t *dst = orow + ox * ch;
                const int32_t x0 = ox * sw - pl;
                const int32_t j_lo = x0 < 0 ? -x0 : 0;
                const int32_t j_hi = x0 + 3 > in_w ? in_w - x0 : 3;
                if (j_hi - j_lo != 2) {
                    rlx_dw3x3_narrow(p, img, y0, x0, 0, dst);
                    continue;
                }
                const int32_t xs = x0 + j_lo;
                const int8_t *r0 = base[0] + xs * cs[0], *r1 = base[1] + xs * cs[1], *r2 = base[2] + xs * cs[2];
                if (sat) {
                    rlx_dw3x3_px6_sat(&k, r0, r1, r2, dst, j_lo);
                } else {
                    rlx_dw3x3_px6_clamp(&k, r0, r1, r2, dst, j_lo);
                }
            }
        }
    }
}
#endif

#if RLX_USE_DSP
/* ---- 3x3 with int8 weights (balanced; speed where channels are not a multiple of 4) ----
 * The weights stay in TFLite's layout: a tap's channels are contiguous, so one word holds
 * 4 channels of one tap and SXTB16 / SXTB16 ROR 8 widen it into the pairs (c0 c2), (c1 c3)
 * that SXTAB16 gives for the input word with the input offset added in both halves. A tap
 * of 4 channels is then 10 instructions: 2 loads, 4 widenings, 4 SMLABB/SMLATT. Padded taps
 * are skipped: a pixel runs one of four straight-line tap sets (3 or 2 rows x 3 or 2
 * columns inside the image), with no per-tap test. */
#if defined(__ARM_FEATURE_DSP) && (__ARM_FEATURE_DSP == 1) && !defined(RLX_NO_ASM)
#define RLX_DW8_TAP(XADDR, WADDR)                        \
    "ldr     %[xv], " XADDR "\n\t"                      \
    "ldr     %[wv], " WADDR "\n\t"                      \
    "sxtab16 %[xt], %[off], %[xv]\n\t"                  \
    "sxtab16 %[xv], %[off], %[xv], ror #8\n\t"          \
    "sxtb16  %[wt], %[wv]\n\t"                          \
    "sxtb16  %[wv], %[wv], ror #8\n\t"                  \
    "smlabb  %[a0], %[xt], %[wt], %[a0]\n\t"            \
    "smlatt  %[a2], %[xt], %[wt], %[a2]\n\t"            \
    "smlabb  %[a1], %[xv], %[wv], %[a1]\n\t"            \
    "smlatt  %[a3], %[xv], %[wv], %[a3]\n\t"
/* the weights of the next kernel row: 3 taps of in_c bytes on */
#define RLX_DW8_WNEXT "add     %[w], %[w], %[ch], lsl #1\n\tadd     %[w], %[w], %[ch]\n\t"
/* one row of taps of row pointer R (the first column's input; POST: "" or ", #4", stepping R
 * to the next group) */
#define RLX_DW8_ROW3(R, POST)                                                                    \
    RLX_DW8_TAP("[%[" R "], %[ch], lsl #1]", "[%[w], %[ch], lsl #1]")                            \
    RLX_DW8_TAP("[%[" R "], %[ch]]", "[%[w], %[ch]]") RLX_DW8_TAP("[%[" R "]]" POST, "[%[w]]")
#define RLX_DW8_ROW2(R, POST) RLX_DW8_TAP("[%[" R "], %[ch]]", "[%[w], %[ch]]") RLX_DW8_TAP("[%[" R "]]" POST, "[%[w]]")
/* r0 from row 0 to row 2 (two input rows on, a word on the stack: no register is left) */
#define RLX_DW8_R0_TO_ROW2 "ldr     %[xt], %[rs]\n\tadd     %[r0], %[r0], %[xt]\n\t"
#define RLX_DW8_OPS                                                                                             \
    : [a0] "+r"(a0), [a1] "+r"(a1), [a2] "+r"(a2), [a3] "+r"(a3), [xv] "=&r"(xv), [xt] "=&r"(xt), [wv] "=&r"(wv), \
      [wt] "=&r"(wt), [r0] "+r"(r0), [r1] "+r"(r1), [w] "+r"(w)                                                 \
    : [ch] "r"(ch), [off] "r"(off2), [rs] "m"(rs)                                                               \
    : "memory"
/* 4 accumulators, 4 temporaries, 2 row pointers, the weight pointer, in_c and the offset: 13
 * registers (with 14 GCC fails to allocate them at some -O levels) */
#define RLX_DW8_ASM(TEXT)                \
    do {                                 \
        uint32_t xv, xt, wv, wt;         \
        __asm__(TEXT RLX_DW8_OPS);       \
    } while (0)
#endif

/* The requantization of 4 accumulators of channels c..c+3; sat: the fast form saturating to
 * int8 (rq_mode 2), its shift e = ctz(add) + 1 applied as >> ctz, the >> 1 folded into SSAT. */
#define RLX_DW8_OUT4()                                                                                    \
    do {                                                                                                  \
        if (sat) {                                                                                        \
            dst[c] = (int8_t)rlx_sat8((rlx_rq_fast(a0, mult[c], add[c], 0) >> rlx_ctz(add[c])) >> 1);     \
            dst[c + 1] = (int8_t)rlx_sat8((rlx_rq_fast(a1, mult[c + 1], add[c + 1], 0) >> rlx_ctz(add[c + 1])) >> 1); \
            dst[c + 2] = (int8_t)rlx_sat8((rlx_rq_fast(a2, mult[c + 2], add[c + 2], 0) >> rlx_ctz(add[c + 2])) >> 1); \
            dst[c + 3] = (int8_t)rlx_sat8((rlx_rq_fast(a3, mult[c + 3], add[c + 3], 0) >> rlx_ctz(add[c + 3])) >> 1); \
        } else {                                                                                          \
            const int32_t acc[4] = {a0, a1, a2, a3};                                                      \
            rlx_dw8_out4(rq, acc, c, dst);                                                                \
        }                                                                                                 \
    } while (0)

/* rlx_rq_out of 4 channels, out of line: inlined, its registers leave the tap asm too few. */
static RLX_NOINLINE void rlx_dw8_out4(const rlx_rq_params *rq, const int32_t *acc, int32_t c, int8_t *dst)
{
    for (int32_t i = 0; i < 4; i++) {
        dst[c + i] = (int8_t)rlx_rq_out(rq, acc[i], c + i);
    }
}

/* One pixel's channels [0, in_c & ~3), 4 at a time: `rows` x `cols` (3 or 2 each) taps from the
 * input at r (the first tap inside the image, channel 0) and the weights at w0 (that tap's), in C
 * (the host's emulation of the DSP path, and rq_mode 0 and 1 on the core). */
RLX_INLINE void rlx_dw8_px_c(const rlx_dw_conv_params *p, const rlx_rq_params *rq, const int8_t *r,
                             const int8_t *w0, int32_t rows, int32_t cols, int8_t *dst, const int32_t sat)
{
    const int32_t ch = p->in_c, g4 = ch & ~3, row = p->in_w * ch;
    const uint32_t off2 = ((uint32_t)p->in_offset & 0xFFFFu) | ((uint32_t)p->in_offset << 16);
    const int32_t *bias = p->bias, *mult = p->mult, *add = p->rq_add;
    for (int32_t c = 0; c < g4; c += 4) {
        int32_t a0 = bias[c], a1 = bias[c + 1], a2 = bias[c + 2], a3 = bias[c + 3];
        for (int32_t i = 0; i < rows; i++) {
            for (int32_t j = 0; j < cols; j++) {
                const uint32_t xv = rlx_rd32(r + c + i * row + j * ch);
                const uint32_t wv = rlx_rd32(w0 + c + (3 * i + j) * ch);
                const uint32_t x02 = rlx_sxtab16(off2, xv), x13 = rlx_sxtab16_ror8(off2, xv);
                const uint32_t w02 = rlx_sxtb16(wv), w13 = rlx_sxtb16_ror8(wv);
                a0 = rlx_smlabb(x02, w02, a0);
                a2 = rlx_smlatt(x02, w02, a2);
                a1 = rlx_smlabb(x13, w13, a1);
                a3 = rlx_smlatt(x13, w13, a3);
            }
        }
        RLX_DW8_OUT4();
    }
}

static RLX_NOINLINE void rlx_dw8_px_any(const rlx_dw_conv_params *p, const rlx_rq_params *rq, const int8_t *r,
                                        const int8_t *w, int32_t rows, int32_t cols, int8_t *dst)
{
    rlx_dw8_px_c(p, rq, r, w, rows, cols, dst, 0);
}

/* rq_mode 2, out of line: the tap asm takes 13 registers. */
static RLX_NOINLINE void rlx_dw8_px_sat(const rlx_dw_conv_params *p, const rlx_rq_params *rq, const int8_t *r,
                                        const int8_t *w0, int32_t rows, int32_t cols, int8_t *dst)
{
#if defined(__ARM_FEATURE_DSP) && (__ARM_FEATURE_DSP == 1) && !defined(RLX_NO_ASM)
    const int32_t ch = p->in_c, g4 = ch & ~3, row = p->in_w * ch, sat = 1;
    const uint32_t off2 = ((uint32_t)p->in_offset & 0xFFFFu) | ((uint32_t)p->in_offset << 16);
    const int32_t *bias = p->bias, *mult = p->mult, *add = p->rq_add;
    /* r0: row 0, then row 2 (set per group); r1: row 1, stepped by the asm */
    const int8_t *r1 = r + row;
    const int32_t rs = 2 * row;
    (void)rq;
    for (int32_t c = 0; c < g4; c += 4) {
        int32_t a0 = bias[c], a1 = bias[c + 1], a2 = bias[c + 2], a3 = bias[c + 3];
        const int8_t *w = w0 + c, *r0 = r + c;
        if (rows == 3 && cols == 3) {
            RLX_DW8_ASM(RLX_DW8_ROW3("r0", "") RLX_DW8_WNEXT RLX_DW8_ROW3("r1", ", #4") RLX_DW8_WNEXT
                            RLX_DW8_R0_TO_ROW2 RLX_DW8_ROW3("r0", ""));
        } else if (rows == 3) {
            RLX_DW8_ASM(RLX_DW8_ROW2("r0", "") RLX_DW8_WNEXT RLX_DW8_ROW2("r1", ", #4") RLX_DW8_WNEXT
                            RLX_DW8_R0_TO_ROW2 RLX_DW8_ROW2("r0", ""));
        } else if (cols == 3) {
            RLX_DW8_ASM(RLX_DW8_ROW3("r0", "") RLX_DW8_WNEXT RLX_DW8_ROW3("r1", ", #4"));
        } else {
            RLX_DW8_ASM(RLX_DW8_ROW2("r0", "") RLX_DW8_WNEXT RLX_DW8_ROW2("r1", ", #4"));
        }
        RLX_DW8_OUT4();
    }
#else
    rlx_dw8_px_c(p, rq, r, w0, rows, cols, dst, 1);
#endif
}

/* Every pixel: its channels in groups of 4 through the tap set of its rows and columns inside
 * the image, the rest (the channels past the last group, pixels with one row or column
 * inside) through the reference loop. Any channel count. */
static void rlx_dw3x3_s8_dsp(const rlx_dw_conv_params *p, const int8_t *in, int8_t *out)
{
    const rlx_rq_params rq = RLX_DW_RQ(p);
    const int32_t ch = p->in_c, g4 = ch & ~3, in_h = p->in_h, in_w = p->in_w;
    const int32_t sat = p->rq_mode == 2;
    for (int32_t n = 0; n < p->batches; n++) {
        const int8_t *img = in + n * in_h * in_w * ch;
        for (int32_t oy = 0; oy < p->out_h; oy++) {
            const int32_t y0 = oy * p->stride_h - p->pad_top;
            const int32_t i_lo = y0 < 0 ? -y0 : 0;
            const int32_t i_hi = y0 + 3 > in_h ? in_h - y0 : 3;
            int8_t *dst = out + (n * p->out_h + oy) * p->out_w * ch;
            for (int32_t ox = 0; ox < p->out_w; ox++, dst += ch) {
                const int32_t x0 = ox * p->stride_w - p->pad_left;
                const int32_t j_lo = x0 < 0 ? -x0 : 0;
                const int32_t j_hi = x0 + 3 > in_w ? in_w - x0 : 3;
                int32_t c = 0;
                if (g4 > 0 && i_hi - i_lo >= 2 && j_hi - j_lo >= 2) {
                    const int8_t *r = img + ((y0 + i_lo) * in_w + x0 + j_lo) * ch;
                    const int8_t *w = p->weights + (i_lo * 3 + j_lo) * ch;
                    if (sat) {
                        rlx_dw8_px_sat(p, &rq, r, w, i_hi - i_lo, j_hi - j_lo, dst);
                    } else {
                        rlx_dw8_px_any(p, &rq, r, w, i_hi - i_lo, j_hi - j_lo, dst);
                    }
                    c = g4;
                }
                if (c < ch) {
                    rlx_dw3x3_narrow(p, img, y0, x0, c, dst);
                }
            }
        }
    }
}
#endif

/* 3x3, depth multiplier 1, no dilation. A pixel whose 9 taps are all inside
 * the image runs straight-line code; border pixels loop over the clipped tap
 * range. DSP cores (channels a multiple of 4): four channels per input word,
 * int16 weights from flash. Portable: the input offset of an interior pixel
 * is folded into its bias at compile time (bias_full). */
RLX_INLINE void rlx_dw3x3_body(const rlx_dw_conv_params *p, const int8_t *in, int8_t *out, const int32_t wide)
{
#if RLX_USE_DSP
    if (wide && p->dwq != NULL) {
        rlx_dw3x3_dsp(p, in, out);
        return;
    }
    if (!wide || p->weights16 == NULL) {
        /* int8 weights, or channels not a multiple of 4 */
        rlx_dw3x3_s8_dsp(p, in, out);
        return;
    }
#endif
    const int32_t ch = p->in_c;
    const int32_t row = p->in_w * ch;
    const rlx_rq_params rq = RLX_DW_RQ(p);
    const int8_t *const weights9 = wide ? p->weights9 : NULL;
    const int32_t *const bias_full = wide ? p->bias_full : NULL;
#if RLX_USE_DSP
    const int16_t *const weights16 = wide ? p->weights16 : NULL;
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
/* The operands of the tap sequences below (weights at W). */
#define RLX_DW_ASM_OPS(W)                                                                                    \
    : [a0] "+r"(acc0), [a1] "+r"(acc1), [a2] "+r"(acc2), [a3] "+r"(acc3), [r] "+r"(r), [xv] "=&r"(xv),     \
      [xt] "=&r"(xt), [wa] "=&r"(wa), [wb] "=&r"(wb)                                                        \
    : [w] "r"(W), [ch] "r"(ch), [row] "r"(row), [off] "r"(off2)                                            \
    : "memory"
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
                                        RLX_DW_ASM_OPS(w));
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
                                        RLX_DW_ASM_OPS(wj));
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

/* --optimize speed: the int16 layouts (weights16, weights16x2 with dwq and
 * pad3 on DSP builds, weights9 and bias_full on portable ones). */
void rlx_depthwise_conv_3x3_wide_s8(const rlx_dw_conv_params *p, const int8_t *in, int8_t *out)
{
    rlx_dw3x3_body(p, in, out, 1);
}

/* int8 weights only (size, balanced): none of the int16 paths is linked. */
void rlx_depthwise_conv_3x3_s8(const rlx_dw_conv_params *p, const int8_t *in, int8_t *out)
{
    rlx_dw3x3_body(p, in, out, 0);
}

#ifdef RLX_DW_ASM_TAP
#undef RLX_DW_ASM_TAP
#endif
#ifdef RLX_DW2_TAP
#undef RLX_DW2_TAP
#undef RLX_DW2_OPS
#endif
#ifdef RLX_DW8_TAP
#undef RLX_DW8_TAP
#undef RLX_DW8_WNEXT
#undef RLX_DW8_ROW3
#undef RLX_DW8_ROW2
#undef RLX_DW8_R0_TO_ROW2
#undef RLX_DW8_OPS
#undef RLX_DW8_ASM
#endif
#undef RLX_DW8_OUT4
