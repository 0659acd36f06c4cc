/*
 * Depthwise convolution. Padded taps are skipped (TFLite's semantics). The
 * general kernel adds the input offset per tap. The 3x3 kernel on DSP cores
 * with the fast requantization (rlx_dw3x3_dsp) folds it into per-pixel-kind
 * biases instead (all 9 taps, or a clipped left or right column), reads a
 * row of the zero point (pad3) for rows outside the image, and accumulates
 * doubled (the acc << 1 of SMMLAR); otherwise SXTAB16 adds the offset to two
 * channels in the instruction that sign-extends them. The 3x3 kernel of the
 * int8 layouts (balanced) runs a group of 4 channels at a time over a ring of
 * widened input rows in its scratch (rlx_dw_group), on both builds; every other window runs
 * the same idea generalized (rlx_depthwise_conv_ring_s8), long 1-D lines the line kernel, and
 * the balanced build gives most windows with multipliers 1 and 2 to a kernel that reads the
 * image in place a pixel at a time (rlx_depthwise_conv_px_s8, at the end); --optimize size
 * keeps the general kernel.
 */
#include <stddef.h>

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

#if defined(__GNUC__)
#define RLX_NOINLINE_DW __attribute__((noinline))
#else
#define RLX_NOINLINE_DW
#endif
/* ---- 3x3 with int8 weights (balanced; speed where the int16 layouts are absent) ----
 * One group of 4 channels at a time over the whole image. The group's input rows are
 * widened once, with the input offset added, into a ring of 3 int16 rows in the scratch
 * (rlx_dw_row: per pixel the pairs (c0 c2), (c1 c3) that SXTAB16 / SXTAB16 ROR 8 give);
 * padded columns are 0 and rows outside the image read a fourth row of zeros: a padded tap
 * adds nothing, which is TFLite's skipping it. Every output pixel then runs the same 9
 * taps, with no edge cases, against the group's weights widened once into a local block
 * (rlx_dw_gk). A tap of 4 channels is 2 loads and 4 SMLABB/SMLATT on DSP cores (the speed
 * layouts' int16 weights without their flash), 4 loads and 4 MLA on portable ones. With the
 * fast requantization the weights and the bias are doubled, so that the accumulator is the
 * acc << 1 SMMLAR takes. Any stride, padding and channel count (the last group's missing
 * channels are zero). */
#define RLX_DW_ROWS 3 /* the ring: the kernel's rows */

/* One group's constants, in the order the pixel code reads them. */
typedef struct {
#if RLX_USE_DSP
    uint32_t w[18]; /* per tap: (c0 c2), (c1 c3) int16 pairs */
#else
    int32_t w[36]; /* per tap: c0 c2 c1 c3 */
#endif
    int32_t b[4];  /* bias of c0..c3, doubled with the fast requantization */
    int32_t ma[8]; /* (mult, rq_add) of c0..c3 */
    int32_t e[4];  /* right shifts of c0..c3 */
} rlx_dw_gk;
#if RLX_USE_DSP
/* the pixel asm reads the bias at byte 72, rq_mode 2's constants at 88 and 120 */
typedef char rlx_dw_gk_bias_at_72[offsetof(rlx_dw_gk, b) == 72 && offsetof(rlx_dw_gk, ma) == 88 &&
                                          offsetof(rlx_dw_gk, e) == 120
                                      ? 1
                                      : -1];
#endif

/* The ring columns [lo, hi) that hold image pixels (the others are padding). */
RLX_INLINE void rlx_dw_cols(const rlx_dw_conv_params *p, int32_t wp, int32_t *lo, int32_t *hi)
{
    const int32_t pl = p->pad_left, right = p->in_w + p->pad_left;
    *lo = pl < wp ? pl : wp;
    *hi = right < wp ? right : wp;
}

/* n image pixels of channels [c0, c0 + nc) from src (c0's byte of the first) into a ring row
 * at d, the input offset added. Inlined into the group's row loop, which computes its
 * pointers once per group, and with no padding to write (rlx_dw3x3_rows zeroes the ring's
 * padded columns once per call): per group, rows are the cost besides the pixels (on KWS's
 * 25x5 layers about a fifth of the kernel's instructions). */
RLX_INLINE void rlx_dw_row(const int8_t *src, int16_t *d, int32_t n, int32_t ch, int32_t nc, int32_t off)
{
#if RLX_USE_DSP
    if (nc == 4) {
        /* two pixels an iteration: the loop control is spread over twice the words */
        const uint32_t off2 = ((uint32_t)off & 0xFFFFu) | ((uint32_t)off << 16);
        for (; n >= 2; n -= 2, src += 2 * ch, d += 8) {
            const uint32_t xa = rlx_rd32(src), xb = rlx_rd32(src + ch);
            rlx_wr32(d, rlx_sxtab16(off2, xa));
            rlx_wr32(d + 2, rlx_sxtab16_ror8(off2, xa));
            rlx_wr32(d + 4, rlx_sxtab16(off2, xb));
            rlx_wr32(d + 6, rlx_sxtab16_ror8(off2, xb));
        }
        if (n > 0) {
            const uint32_t xa = rlx_rd32(src);
            rlx_wr32(d, rlx_sxtab16(off2, xa));
            rlx_wr32(d + 2, rlx_sxtab16_ror8(off2, xa));
        }
        return;
    }
#endif
    for (; n > 0; n--, src += ch, d += 4) {
        static const int8_t order[4] = {0, 2, 1, 3}; /* (c0 c2) (c1 c3) */
        for (int32_t i = 0; i < 4; i++) {
            d[i] = (int16_t)(order[i] < nc ? src[order[i]] + off : 0);
        }
    }
}

/* a0..a3 of one pixel: the group's bias plus its 9 taps (ring rows x0, x1, x2 at the pixel's
 * first column, the weights of gk). */
#if defined(__ARM_FEATURE_DSP) && (__ARM_FEATURE_DSP == 1) && !defined(RLX_NO_ASM)
/* A tap in 6 instructions: one LDRD of the ring, one of the weights. GCC loads every word
 * apart, and spills. */
#define RLX_DW_ATAP(X, XOFF, WOFF)                            \
    "ldrd    %[xa], %[xb], [%[" X "], #" XOFF "]\n\t"         \
    "ldrd    %[wa], %[wb], [%[w], #" WOFF "]\n\t"             \
    "smlabb  %[a0], %[xa], %[wa], %[a0]\n\t"                  \
    "smlatt  %[a2], %[xa], %[wa], %[a2]\n\t"                  \
    "smlabb  %[a1], %[xb], %[wb], %[a1]\n\t"                  \
    "smlatt  %[a3], %[xb], %[wb], %[a3]\n\t"
#define RLX_DW_PIXEL(x0, x1, x2, gk)                                                                         \
    do {                                                                                                     \
        uint32_t xa, xb, wa, wb;                                                                             \
        __asm__("ldrd    %[a0], %[a1], [%[w], #72]\n\t"                                                     \
                "ldrd    %[a2], %[a3], [%[w], #80]\n\t" RLX_DW_ATAP("x0", "0", "0") RLX_DW_ATAP("x0", "8", "8") \
                    RLX_DW_ATAP("x0", "16", "16") RLX_DW_ATAP("x1", "0", "24") RLX_DW_ATAP("x1", "8", "32")  \
                        RLX_DW_ATAP("x1", "16", "40") RLX_DW_ATAP("x2", "0", "48")                           \
                            RLX_DW_ATAP("x2", "8", "56") RLX_DW_ATAP("x2", "16", "64")                       \
                : [a0] "=&r"(a0), [a1] "=&r"(a1), [a2] "=&r"(a2), [a3] "=&r"(a3), [xa] "=&r"(xa),            \
                  [xb] "=&r"(xb), [wa] "=&r"(wa), [wb] "=&r"(wb)                                             \
                : [x0] "r"(x0), [x1] "r"(x1), [x2] "r"(x2), [w] "r"(gk)                                      \
                : "memory");                                                                                 \
    } while (0)
/* rq_mode 2 (constants gk.ma at byte 88, gk.e at 120): one output of accumulator A (doubled)
 * into dst[I], in the tap asm's temporaries: 7 instructions, none spilled. */
#define RLX_DW_SAT_ASM(A, MA, E, I)                           \
    "ldrd    %[wa], %[wb], [%[w], #" MA "]\n\t"              \
    "ldr     %[xa], [%[w], #" E "]\n\t"                      \
    "smmlar  %[xb], %[" A "], %[wa], %[wb]\n\t"              \
    "add     %[" A "], %[xb], %[" A "], asr #31\n\t"         \
    "asr     %[" A "], %[" A "], %[xa]\n\t"                  \
    "ssat    %[" A "], #8, %[" A "]\n\t"                     \
    "strb    %[" A "], [%[dst], #" I "]\n\t"
/* RLX_DW_PIXEL and the 4 outputs of rq_mode 2 in one asm block (the 4 channels of a group
 * exist): the accumulators never leave registers. */
#define RLX_DW_PIXEL_SAT(x0, x1, x2, gk, dst)                                                                \
    do {                                                                                                     \
        uint32_t a0, a1, a2, a3, xa, xb, wa, wb;                                                             \
        __asm__ volatile("ldrd    %[a0], %[a1], [%[w], #72]\n\t"                                            \
                         "ldrd    %[a2], %[a3], [%[w], #80]\n\t" RLX_DW_ATAP("x0", "0", "0")                 \
                             RLX_DW_ATAP("x0", "8", "8") RLX_DW_ATAP("x0", "16", "16") RLX_DW_ATAP("x1", "0", "24") \
                                 RLX_DW_ATAP("x1", "8", "32") RLX_DW_ATAP("x1", "16", "40")                  \
                                     RLX_DW_ATAP("x2", "0", "48") RLX_DW_ATAP("x2", "8", "56")               \
                                         RLX_DW_ATAP("x2", "16", "64") RLX_DW_SAT_ASM("a0", "88", "120", "0") \
                                             RLX_DW_SAT_ASM("a1", "96", "124", "1")                          \
                                                 RLX_DW_SAT_ASM("a2", "104", "128", "2")                     \
                                                     RLX_DW_SAT_ASM("a3", "112", "132", "3")                 \
                         : [a0] "=&r"(a0), [a1] "=&r"(a1), [a2] "=&r"(a2), [a3] "=&r"(a3), [xa] "=&r"(xa),   \
                           [xb] "=&r"(xb), [wa] "=&r"(wa), [wb] "=&r"(wb)                                    \
                         : [x0] "r"(x0), [x1] "r"(x1), [x2] "r"(x2), [w] "r"(gk), [dst] "r"(dst)             \
                         : "memory");                                                                        \
    } while (0)
#define RLX_DW_SAT_PIXEL_ASM 1
typedef uint32_t rlx_dw_lane; /* a ring word: two int16 lanes */
#else
#if RLX_USE_DSP
#define RLX_DW_RTAP(X, J, T)                                                      \
    do {                                                                          \
        const uint32_t x02_ = rlx_rd32((X) + 2 * (J)), x13_ = rlx_rd32((X) + 2 * (J) + 1); \
        const uint32_t w02_ = gkp_->w[2 * (T)], w13_ = gkp_->w[2 * (T) + 1];      \
        a0 = rlx_smlabb(x02_, w02_, a0);                                          \
        a2 = rlx_smlatt(x02_, w02_, a2);                                          \
        a1 = rlx_smlabb(x13_, w13_, a1);                                          \
        a3 = rlx_smlatt(x13_, w13_, a3);                                          \
    } while (0)
typedef uint32_t rlx_dw_lane;
#else
#define RLX_DW_RTAP(X, J, T)                                                      \
    do {                                                                          \
        const int16_t *const x_ = (X) + 4 * (J);                                  \
        const int32_t *const w_ = gkp_->w + 4 * (T);                              \
        a0 += x_[0] * w_[0];                                                      \
        a2 += x_[1] * w_[1];                                                      \
        a1 += x_[2] * w_[2];                                                      \
        a3 += x_[3] * w_[3];                                                      \
    } while (0)
typedef int16_t rlx_dw_lane;
#endif
/* written out tap by tap, which GCC does not unroll by itself */
#define RLX_DW_PIXEL(x0, x1, x2, gk)                                                                    \
    do {                                                                                                \
        const rlx_dw_gk *const gkp_ = (gk);                                                             \
        a0 = gkp_->b[0], a1 = gkp_->b[1], a2 = gkp_->b[2], a3 = gkp_->b[3];                             \
        RLX_DW_RTAP(x0, 0, 0); RLX_DW_RTAP(x0, 1, 1); RLX_DW_RTAP(x0, 2, 2);                            \
        RLX_DW_RTAP(x1, 0, 3); RLX_DW_RTAP(x1, 1, 4); RLX_DW_RTAP(x1, 2, 5);                            \
        RLX_DW_RTAP(x2, 0, 6); RLX_DW_RTAP(x2, 1, 7); RLX_DW_RTAP(x2, 2, 8);                            \
    } while (0)
#endif
/* the fast requantization of a doubled accumulator (rlx_rq_fast without its acc << 1) */
#define RLX_DW_FAST(acc, i) ((rlx_smmlar((acc), gk.ma[2 * (i)], gk.ma[2 * (i) + 1]) + ((acc) >> 31)) >> gk.e[i])
#define RLX_DW_OUT(acc, i) ((int8_t)(sat ? rlx_sat8(RLX_DW_FAST(acc, i)) : rlx_clamp(RLX_DW_FAST(acc, i), lo, hi)))

/* The group's constants: weights widened (and doubled when fast), bias, requantization. */
static void rlx_dw_consts(const rlx_dw_conv_params *p, int32_t c0, int32_t nc, int32_t fast, rlx_dw_gk *gk)
{
    const int32_t ch = p->in_c, scale = fast ? 2 : 1;
    int32_t t = 0;
#if RLX_USE_DSP
    for (; nc == 4 && t < 9; t++) {
        /* a tap's 4 weights are one word: widened in registers; doubling an int16 pair by a
         * shift carries the low half's sign into bit 16, which a doubled high half clears */
        const uint32_t wv = rlx_rd32(p->weights + t * ch + c0), dbl = fast ? 0xFFFEFFFFu : 0xFFFFFFFFu;
        gk->w[2 * t] = (rlx_sxtb16(wv) << (fast ? 1 : 0)) & dbl;
        gk->w[2 * t + 1] = (rlx_sxtb16_ror8(wv) << (fast ? 1 : 0)) & dbl;
    }
#endif
    for (; t < 9; t++) {
        int32_t w[4] = {0, 0, 0, 0};
        for (int32_t i = 0; i < nc; i++) {
            w[i] = scale * p->weights[t * ch + c0 + i];
        }
#if RLX_USE_DSP
        gk->w[2 * t] = ((uint32_t)w[0] & 0xFFFFu) | ((uint32_t)w[2] << 16);
        gk->w[2 * t + 1] = ((uint32_t)w[1] & 0xFFFFu) | ((uint32_t)w[3] << 16);
#else
        gk->w[4 * t] = w[0];
        gk->w[4 * t + 1] = w[2];
        gk->w[4 * t + 2] = w[1];
        gk->w[4 * t + 3] = w[3];
#endif
    }
    for (int32_t i = 0; i < 4; i++) {
        const int32_t in = i < nc;
        gk->b[i] = in ? (int32_t)((uint32_t)p->bias[c0 + i] * (uint32_t)scale) : 0;
        gk->ma[2 * i] = in && fast ? p->mult[c0 + i] : 0;
        gk->ma[2 * i + 1] = in && fast ? p->rq_add[c0 + i] : 1;
        gk->e[i] = rlx_rq_e(gk->ma[2 * i + 1]);
    }
}

/* The requantization constants of one group (as rlx_dw_gk's); lohi: act_min and act_max in
 * every byte (RLX_DWR_CLAMP's). */
typedef struct {
    int32_t b[4], ma[8], e[4];
    uint32_t lohi[2];
} rlx_dw_rq4;

#if defined(__ARM_FEATURE_DSP) && (__ARM_FEATURE_DSP == 1) && !defined(RLX_NO_ASM)
/* The 4 outputs of a group with the fast requantization, the constants at q laid out as
 * rlx_dw_rq4's from b (ma at byte 16, e at 48; rlx_dw_gk's from its b too): each output
 * saturated to int8 and packed into one word; CLAMP (after it loads the act_min and act_max
 * bytes into t1, t2): a byte-wise max and min (SSUB8 sets GE, SEL picks); one store. */
typedef char rlx_dw_rq4_at[offsetof(rlx_dw_rq4, ma) == 16 && offsetof(rlx_dw_rq4, e) == 48 ? 1 : -1];
/* one output of the doubled accumulator A (rlx_rq_fast without its shift of acc): its multiplier and
 * add at MA, its shift at E (byte offsets from the operand Q), through the temporaries T0-T2 */
#define RLX_DW_RQ1(A, Q, T0, T1, T2, MA, E)                       \
    "ldrd    %[" T0 "], %[" T1 "], [%[" Q "], #" MA "]\n\t"       \
    "ldr     %[" T2 "], [%[" Q "], #" E "]\n\t"                  \
    "smmlar  %[" T0 "], %[" A "], %[" T0 "], %[" T1 "]\n\t"       \
    "add     %[" A "], %[" T0 "], %[" A "], asr #31\n\t"         \
    "asr     %[" A "], %[" A "], %[" T2 "]\n\t"                  \
    "ssat    %[" A "], #8, %[" A "]\n\t"
/* a0-a3 requantized with RQ1(A, MA, E) from the multipliers at M, the shifts at E (4 bytes apart) and
 * packed into one word, then CLAMP, then one store */
#define RLX_DW_RQ4(RQ1, CLAMP, M0, M1, M2, M3, E0, E1, E2, E3)                                                   \
    RQ1("a0", M0, E0) RQ1("a1", M1, E1) RQ1("a2", M2, E2) RQ1("a3", M3, E3) "bfi     %[a0], %[a1], #8, #8\n\t"   \
                                                                           "bfi     %[a0], %[a2], #16, #8\n\t"  \
                                                                           "bfi     %[a0], %[a3], #24, #8\n\t"  \
        CLAMP "str     %[a0], [%[dst]]\n\t"
#define RLX_DWR_RQ1(A, MA, E) RLX_DW_RQ1(A, "q", "t0", "t1", "t2", MA, E)
#define RLX_DWR_RQ4_ASM(CLAMP) \
    RLX_DW_RQ4(RLX_DWR_RQ1, CLAMP, "16", "24", "32", "40", "48", "52", "56", "60")
#define RLX_DWR_RQ4_OUT                                                                                        \
    : [a0] "+r"(a0), [a1] "+r"(a1), [a2] "+r"(a2), [a3] "+r"(a3), [t0] "=&r"(t0_), [t1] "=&r"(t1_), [t2] "=&r"(t2_)
#define RLX_DWR_CLAMP                                     \
    "ssub8   %[t0], %[a0], %[t1]\n\t"                     \
    "sel     %[a0], %[a0], %[t1]\n\t"                     \
    "ssub8   %[t0], %[t2], %[a0]\n\t"                     \
    "sel     %[a0], %[a0], %[t2]\n\t"

/* The pixels [dst, dend) of a 3x3 group's row with rq_mode 1 (the clamp; lh: the act_min and
 * act_max bytes) on M4: out of line, so that the instances' register allocation, which the
 * MLPerf layers (rq_mode 2) run on, stays as it is. */
static RLX_NOINLINE_DW void rlx_dw_clamp_row(const rlx_dw_lane *x0, const rlx_dw_lane *x1, const rlx_dw_lane *x2,
                                             const rlx_dw_gk *gk, int8_t *dst, int8_t *const dend, int32_t ch,
                                             int32_t step, const uint32_t lh[2])
{
    for (; dst != dend; dst += ch, x0 += step, x1 += step, x2 += step) {
        int32_t a0, a1, a2, a3;
        uint32_t t0_, t1_, t2_;
        RLX_DW_PIXEL(x0, x1, x2, gk);
        __asm__ volatile(RLX_DWR_RQ4_ASM("ldrd    %[t1], %[t2], [%[lh]]\n\t" RLX_DWR_CLAMP) RLX_DWR_RQ4_OUT
                         : [q] "r"(gk->b), [lh] "r"(lh), [dst] "r"(dst)
                         : "memory");
    }
}
#endif

/* All pixels of one group; FAST: rq_mode 1 or 2, SAT: rq_mode 2 (constants in the hot
 * instance, so that the requantization's tests fold away). */
RLX_INLINE void rlx_dw_group(const rlx_dw_conv_params *p, const int8_t *img, int8_t *out, int16_t *ring,
                             int32_t c0, const int32_t fast, const int32_t sat)
{
    const int32_t ch = p->in_c, nc = ch - c0 < 4 ? ch - c0 : 4, sw = p->stride_w, out_w = p->out_w;
    const int32_t wp = (out_w - 1) * sw + 3; /* ring pixels per row */
    const rlx_rq_params rq = RLX_DW_RQ(p);
    const int32_t lo = p->act_min, hi = p->act_max;
    rlx_dw_gk gk;
    rlx_dw_consts(p, c0, nc, fast, &gk);
    const int16_t *const zero = ring + RLX_DW_ROWS * 4 * wp; /* rows outside the image */
    /* rb[i]: the ring row of the window's row i; a step of the window down by stride_h < 3
     * keeps its last 3 - stride_h rows (rotated to the front) and widens only the new ones */
    int16_t *rb[RLX_DW_ROWS] = {ring, ring + 4 * wp, ring + 8 * wp};
    const int32_t sh = p->stride_h, in_h = p->in_h;
    const int32_t step = (int32_t)(sw * 8 / sizeof(rlx_dw_lane)); /* lanes per output pixel */
    const rlx_dw_lane *xr[3];
    /* a row's image columns: [clo, chi) of the ring, from src0 + iy * rstride */
    int32_t clo, chi;
    rlx_dw_cols(p, wp, &clo, &chi);
    const int32_t rstride = p->in_w * ch, ncols = chi - clo, off = p->in_offset;
    const int8_t *const src0 = img + (ncols > 0 ? (clo - p->pad_left) * ch : 0) + c0;
    for (int32_t oy = 0; oy < p->out_h; oy++) {
        const int32_t iy0 = oy * sh - p->pad_top;
        int32_t i = 0;
        if (oy > 0 && sh < RLX_DW_ROWS) {
            for (int32_t k = 0; k < sh; k++) {
                int16_t *const t = rb[0];
                rb[0] = rb[1];
                rb[1] = rb[2];
                rb[2] = t;
            }
            i = RLX_DW_ROWS - sh;
            xr[0] = xr[sh]; /* sh is 1 or 2 */
            xr[1] = xr[sh + 1 < RLX_DW_ROWS ? sh + 1 : 2];
        }
        for (; i < RLX_DW_ROWS; i++) {
            const int32_t iy = iy0 + i;
            if (iy < 0 || iy >= in_h) {
                xr[i] = (const rlx_dw_lane *)zero;
            } else {
                rlx_dw_row(src0 + iy * rstride, rb[i] + 4 * clo, ncols, ch, nc, off);
                xr[i] = (const rlx_dw_lane *)rb[i];
            }
        }
        int8_t *dst = out + oy * out_w * ch + c0;
        int8_t *const dend = dst + out_w * ch;
        const rlx_dw_lane *x0 = xr[0], *x1 = xr[1], *x2 = xr[2];
#if defined(RLX_DW_SAT_PIXEL_ASM)
        if (sat && nc == 4) {
            for (; dst != dend; dst += ch, x0 += step, x1 += step, x2 += step) {
                RLX_DW_PIXEL_SAT(x0, x1, x2, &gk, dst);
            }
            continue;
        }
#endif
        for (; dst != dend; dst += ch, x0 += step, x1 += step, x2 += step) {
#if defined(RLX_DWR_RQ4_ASM)
            if (fast && !sat && nc == 4) {
                const uint32_t lh[2] = {0x01010101u * (uint8_t)lo, 0x01010101u * (uint8_t)hi};
                rlx_dw_clamp_row(x0, x1, x2, &gk, dst, dend, ch, step, lh);
                break;
            }
#endif
            int32_t a0, a1, a2, a3;
            RLX_DW_PIXEL(x0, x1, x2, &gk);
            if (fast && nc == 4) {
                dst[0] = RLX_DW_OUT(a0, 0);
                dst[1] = RLX_DW_OUT(a1, 1);
                dst[2] = RLX_DW_OUT(a2, 2);
                dst[3] = RLX_DW_OUT(a3, 3);
                continue;
            }
            const int32_t acc[4] = {a0, a1, a2, a3};
            for (int32_t i = 0; i < nc; i++) {
                dst[i] = fast ? RLX_DW_OUT(acc[i], i) : (int8_t)rlx_rq_out(&rq, acc[i], c0 + i);
            }
        }
    }
}

/* Out of line: the saturating fast form (rq_mode 2, every MLPerf Tiny layer), and one instance
 * for the others (the clamp of rq_mode 1, the reference form), tested per output: flash. */
static RLX_NOINLINE_DW void rlx_dw_group_sat(const rlx_dw_conv_params *p, const int8_t *img, int8_t *out,
                                             int16_t *ring, int32_t c0)
{
    rlx_dw_group(p, img, out, ring, c0, 1, 1);
}

static RLX_NOINLINE_DW void rlx_dw_group_any(const rlx_dw_conv_params *p, const int8_t *img, int8_t *out,
                                             int16_t *ring, int32_t c0)
{
    rlx_dw_group(p, img, out, ring, c0, p->rq_mode != 0, 0);
}

static void rlx_dw3x3_rows(const rlx_dw_conv_params *p, const int8_t *in, int8_t *out, int16_t *ring)
{
    const int32_t ch = p->in_c, wp = (p->out_w - 1) * p->stride_w + 3;
    int16_t *const zero = ring + RLX_DW_ROWS * 4 * wp;
    for (int32_t i = 0; i < 4 * wp; i++) {
        zero[i] = 0;
    }
    /* the padded columns of the ring rows, which rlx_dw_row never writes */
    int32_t lo, hi;
    rlx_dw_cols(p, wp, &lo, &hi);
    for (int32_t r = 0; r < RLX_DW_ROWS; r++) {
        for (int32_t i = 0; i < 4 * wp; i++) {
            if (i < 4 * lo || i >= 4 * hi) {
                ring[r * 4 * wp + i] = 0;
            }
        }
    }
    for (int32_t n = 0; n < p->batches; n++) {
        const int8_t *img = in + n * p->in_h * p->in_w * ch;
        int8_t *o = out + n * p->out_h * p->out_w * ch;
        for (int32_t c0 = 0; c0 < ch; c0 += 4) {
            if (p->rq_mode == 2) {
                rlx_dw_group_sat(p, img, o, ring, c0);
            } else {
                rlx_dw_group_any(p, img, o, ring, c0);
            }
        }
    }
}

/* 3x3, depth multiplier 1, no dilation. A pixel whose 9 taps are all inside
 * the image runs straight-line code; border pixels loop over the clipped tap
 * range. DSP cores (channels a multiple of 4): four channels per input word,
 * int16 weights from flash. Portable: the input offset of an interior pixel
 * is folded into its bias at compile time (bias_full). */
RLX_INLINE void rlx_dw3x3_body(const rlx_dw_conv_params *p, const int8_t *in, int8_t *out, const int32_t wide)
{
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
void rlx_depthwise_conv_3x3_wide_s8(const rlx_dw_conv_params *p, const int8_t *in, int8_t *out, int16_t *scratch)
{
#if RLX_USE_DSP
    if (p->dwq != NULL) {
        rlx_dw3x3_dsp(p, in, out);
        return;
    }
    if (p->weights16 == NULL) {
        /* channels not a multiple of 4: the int8 weights */
        rlx_dw3x3_rows(p, in, out, scratch);
        return;
    }
#endif
    (void)scratch;
    rlx_dw3x3_body(p, in, out, 1);
}

/* int8 weights only (balanced): none of the int16 paths is linked. */
void rlx_depthwise_conv_3x3_s8(const rlx_dw_conv_params *p, const int8_t *in, int8_t *out, int16_t *scratch)
{
    rlx_dw3x3_rows(p, in, out, scratch);
}

/* ---- any window, stride, dilation, padding, channel count and depth multiplier (balanced, speed) ----
 * The 3x3 ring generalized. One group of 4 output channels at a time (output channel c reads
 * input channel c / ch_mult); the group's input rows, widened to int16 with the input offset
 * added, live in a ring of as many rows as the window spans, in the scratch, where padded
 * columns are 0 and rows outside the image read a row of zeros, so a tap never tests a bound.
 * The ring runs along the window's long axis: a Kx1 window walks the image by columns (the
 * input's column is then a ring row), so a 1-D window is one run of taps and never pays for
 * rows. A pixel walks the group's tap table: per window row a header (its taps, the byte offset
 * of its ring row, rewritten per output row) and the row's widened weights; a tap is an LDRD of
 * the ring, one of the table and 4 SMLABB/SMLATT on DSP cores. Weights and bias are doubled
 * with the fast requantization, as in the 3x3 path. */

/* One axis of the walk: output and input pixels, window, and the byte steps between pixels. */
typedef struct {
    int32_t n_out, n_in, k, stride, dil, pad, in_step, out_step;
} rlx_dw_axis;

/* The walk of one call: the ring along axis b, its rows along axis a; the scratch's parts. */
typedef struct {
    rlx_dw_axis a, b;
    int32_t wp, rows, clo, chi;  /* ring pixels per row, rows; image columns [clo, chi) */
    int16_t *wt, *ring, *zero;   /* the tap table (4 lanes a header or tap); rows x wp x 4; wp x 4 */
    int32_t *tag;                /* the image row each ring row holds */
} rlx_dw_walk;

/* The scratch, as rules.py's _dw_ring_scratch counts it. */
static void rlx_dw_walk_of(const rlx_dw_conv_params *p, int16_t *scratch, rlx_dw_walk *g)
{
    const int32_t ic = p->in_c, oc = p->out_c;
    const rlx_dw_axis h = {p->out_h, p->in_h, p->k_h, p->stride_h, p->dil_h, p->pad_top, p->in_w * ic, p->out_w * oc};
    const rlx_dw_axis w = {p->out_w, p->in_w, p->k_w, p->stride_w, p->dil_w, p->pad_left, ic, oc};
    const int32_t along_h = p->k_w == 1 && p->k_h > 1;
    g->a = along_h ? w : h;
    g->b = along_h ? h : w;
    g->wp = (g->b.n_out - 1) * g->b.stride + (g->b.k - 1) * g->b.dil + 1;
    g->rows = (g->a.k - 1) * g->a.dil + 1;
    g->clo = g->b.pad < g->wp ? g->b.pad : g->wp;
    g->chi = g->b.n_in + g->b.pad < g->wp ? g->b.n_in + g->b.pad : g->wp;
    g->wt = scratch;
    g->ring = g->wt + 4 * (p->k_h * p->k_w + g->a.k + 1);
    g->zero = g->ring + 4 * g->rows * g->wp;
    g->tag = (int32_t *)(void *)(g->zero + 4 * g->wp);
}

/* n image pixels (step bytes apart) of one group into a ring row at d, the input offset added;
 * idx: the input byte of each lane (c0 c2 c1 c3) from src. A lane past the last channel reads
 * channel c0's byte, which its zero weight cancels. */
RLX_INLINE void rlx_dw_row_any(const int8_t *src, int16_t *d, int32_t n, int32_t step, const int32_t idx[4],
                               int32_t off)
{
    for (; n > 0; n--, src += step, d += 4) {
        d[0] = (int16_t)(src[idx[0]] + off);
        d[1] = (int16_t)(src[idx[1]] + off);
        d[2] = (int16_t)(src[idx[2]] + off);
        d[3] = (int16_t)(src[idx[3]] + off);
    }
}

#if RLX_USE_DSP
/* Depth multiplier 2, a whole group: lanes (c0 c2) and (c1 c3) both read input channels c0 / 2
 * and c0 / 2 + 1, one halfword; SXTAB16 widens bytes 0 and 2 of h | h << 8. */
RLX_INLINE void rlx_dw_row_m2(const int8_t *src, int16_t *d, int32_t n, int32_t step, int32_t off)
{
    const uint32_t off2 = ((uint32_t)off & 0xFFFFu) | ((uint32_t)off << 16);
    for (; n > 0; n--, src += step, d += 4) {
        uint16_t h;
        memcpy(&h, src, 2);
        const uint32_t v = rlx_sxtab16(off2, (uint32_t)h | ((uint32_t)h << 8));
        rlx_wr32(d, v);
        rlx_wr32(d + 2, v);
    }
}
#endif

/* a0..a3 += one pixel's taps: the table wt from its first header, px the pixel's first ring
 * column (of ring row 0; a header's offset selects the row), sb the bytes between taps. */
#if defined(__ARM_FEATURE_DSP) && (__ARM_FEATURE_DSP == 1) && !defined(RLX_NO_ASM)
#define RLX_DWR_MAC                                       \
    "ldrd    %[wa], %[wb], [%[w]], #8\n\t"               \
    "smlabb  %[a0], %[xa], %[wa], %[a0]\n\t"              \
    "smlatt  %[a2], %[xa], %[wa], %[a2]\n\t"              \
    "smlabb  %[a1], %[xb], %[wb], %[a1]\n\t"              \
    "smlatt  %[a3], %[xb], %[wb], %[a3]\n\t"
/* the rows: a header of 0 taps ends; an odd tap first, then two an iteration (the MACs keep
 * the flags of LSRS) */
#define RLX_DWR_ROWS(TAP)                                 \
    "0:\n\t"                                              \
    "ldrd    %[n], %[xa], [%[w]], #8\n\t"                 \
    "cbz     %[n], 9f\n\t"                                \
    "add     %[x], %[px], %[xa]\n\t"                      \
    "lsrs    %[n], %[n], #1\n\t"                          \
    "bcc     2f\n\t" TAP "2:\n\t"                         \
    "beq     0b\n\t"                                      \
    "1:\n\t" TAP TAP "subs    %[n], %[n], #1\n\t"         \
    "bne     1b\n\t"                                      \
    "b       0b\n\t"                                      \
    "9:\n\t"
#define RLX_DWR_OPS                                                                                               \
    : [a0] "+r"(a0), [a1] "+r"(a1), [a2] "+r"(a2), [a3] "+r"(a3), [x] "=&r"(x_), [w] "+r"(w_), [n] "=&l"(n_),      \
      [xa] "=&r"(xa_), [xb] "=&r"(xb_), [wa] "=&r"(wa_), [wb] "=&r"(wb_)
#define RLX_DW_PX(px, wt, sb)                                                                                     \
    do {                                                                                                          \
        const int16_t *w_ = (wt);                                                                                 \
        const int8_t *x_;                                                                                         \
        int32_t n_;                                                                                               \
        uint32_t xa_, xb_, wa_, wb_;                                                                              \
        if ((sb) == 8) {                                                                                          \
            __asm__ volatile(RLX_DWR_ROWS("ldrd    %[xa], %[xb], [%[x]], #8\n\t" RLX_DWR_MAC) RLX_DWR_OPS           \
                             : [px] "r"(px)                                                                       \
                             : "memory", "cc");                                                                   \
        } else {                                                                                                  \
            __asm__ volatile(RLX_DWR_ROWS("ldrd    %[xa], %[xb], [%[x]]\n\t"                                       \
                                          "add     %[x], %[x], %[sb]\n\t" RLX_DWR_MAC) RLX_DWR_OPS                 \
                             : [px] "r"(px), [sb] "r"(sb)                                                         \
                             : "memory", "cc");                                                                   \
        }                                                                                                         \
    } while (0)
#else
#if RLX_USE_DSP
#define RLX_DW_TAP1(x_, w_)                                                                                       \
    do {                                                                                                          \
        const uint32_t x02_ = rlx_rd32(x_), x13_ = rlx_rd32((x_) + 2);                                            \
        const uint32_t w02_ = rlx_rd32(w_), w13_ = rlx_rd32((w_) + 2);                                            \
        a0 = rlx_smlabb(x02_, w02_, a0);                                                                          \
        a2 = rlx_smlatt(x02_, w02_, a2);                                                                          \
        a1 = rlx_smlabb(x13_, w13_, a1);                                                                          \
        a3 = rlx_smlatt(x13_, w13_, a3);                                                                          \
    } while (0)
#else
#define RLX_DW_TAP1(x_, w_)                                                                                       \
    do {                                                                                                          \
        a0 += (x_)[0] * (w_)[0];                                                                                  \
        a2 += (x_)[1] * (w_)[1];                                                                                  \
        a1 += (x_)[2] * (w_)[2];                                                                                  \
        a3 += (x_)[3] * (w_)[3];                                                                                  \
    } while (0)
#endif
#define RLX_DW_PX(px, wt, sb)                                                                                     \
    do {                                                                                                          \
        const int16_t *w_ = (wt);                                                                                 \
        for (int32_t n_ = (int32_t)rlx_rd32(w_); n_ != 0; n_ = (int32_t)rlx_rd32(w_)) {                           \
            const int16_t *x_ = (const int16_t *)(const void *)((const int8_t *)(px) + (int32_t)rlx_rd32(w_ + 2)); \
            for (w_ += 4; n_ > 0; n_--, w_ += 4, x_ += (sb) / 2) {                                                \
                RLX_DW_TAP1(x_, w_);                                                                              \
            }                                                                                                     \
        }                                                                                                         \
    } while (0)
#endif


/* All pixels of one group (channels [c0, c0 + nc)) of one image. FAST: rq_mode 1 or 2; SAT:
 * rq_mode 2 (constants in the instances, so the output rule's tests fold away). */
RLX_INLINE void rlx_dw_ring_group(const rlx_dw_conv_params *p, const rlx_dw_walk *g, const int8_t *img, int8_t *out,
                                  int32_t c0, const int32_t fast, const int32_t sat)
{
    const int32_t oc = p->out_c, m = p->ch_mult, nc = oc - c0 < 4 ? oc - c0 : 4, off = p->in_offset;
    const int32_t scale = fast ? 2 : 1, lo = p->act_min, hi = p->act_max;
    const rlx_rq_params rq = RLX_DW_RQ(p);
    const rlx_dw_axis a = g->a, b = g->b;
    const int32_t row_lanes = 4 * (b.k + 1); /* a window row in the table: header and taps */
    rlx_dw_rq4 gk;
    /* the table: weights widened (doubled when fast) in lane order, a missing channel's 0; the
     * taps run along b (tap t is row t / b.k, since a Kx1 window, along H, has one column) */
    static const int8_t order[4] = {0, 2, 1, 3};
    for (int32_t t = 0; t < a.k * b.k; t++) {
        int16_t *const e = g->wt + row_lanes * (t / b.k) + 4 * (t % b.k + 1);
#if RLX_USE_DSP
        if (nc == 4) {
            /* a tap's 4 weights are one word, widened in registers (doubling as rlx_dw_consts) */
            const uint32_t wv = rlx_rd32(p->weights + t * oc + c0), dbl = fast ? 0xFFFEFFFFu : 0xFFFFFFFFu;
            rlx_wr32(e, (rlx_sxtb16(wv) << (fast ? 1 : 0)) & dbl);
            rlx_wr32(e + 2, (rlx_sxtb16_ror8(wv) << (fast ? 1 : 0)) & dbl);
            continue;
        }
#endif
        for (int32_t i = 0; i < 4; i++) {
            const int32_t c = order[i];
            e[i] = (int16_t)(c < nc ? scale * p->weights[t * oc + c0 + c] : 0);
        }
    }
    for (int32_t i = 0; i < a.k; i++) {
        rlx_wr32(g->wt + row_lanes * i, (uint32_t)b.k);
    }
    rlx_wr32(g->wt + row_lanes * a.k, 0u); /* the end */
    int32_t idx[4];
    for (int32_t i = 0; i < 4; i++) {
        const int32_t c = order[i], in = i < nc;
        idx[i] = c < nc ? (c0 + c) / m - c0 / m : 0;
        gk.b[i] = in ? (int32_t)((uint32_t)p->bias[c0 + i] * (uint32_t)scale) : 0;
        gk.ma[2 * i] = in && fast ? p->mult[c0 + i] : 0;
        gk.ma[2 * i + 1] = in && fast ? p->rq_add[c0 + i] : 1;
        gk.e[i] = rlx_rq_e(gk.ma[2 * i + 1]);
    }
#if defined(RLX_DWR_RQ4_ASM)
    gk.lohi[0] = 0x01010101u * (uint8_t)lo;
    gk.lohi[1] = 0x01010101u * (uint8_t)hi;
#endif
    for (int32_t r = 0; r < g->rows; r++) {
        g->tag[r] = -1;
    }
    const int32_t ncols = g->chi - g->clo;
    const int8_t *const src0 = img + (ncols > 0 ? (g->clo - b.pad) * b.in_step : 0) + c0 / m;
    const int32_t step = 4 * b.stride, sb = 8 * b.dil; /* lanes between output pixels, bytes between taps */
    for (int32_t oa = 0; oa < a.n_out; oa++) {
        const int32_t iy0 = oa * a.stride - a.pad;
        for (int32_t i = 0; i < a.k; i++) {
            const int32_t iy = iy0 + i * a.dil;
            int16_t *row = g->zero;
            if (iy >= 0 && iy < a.n_in) {
                const int32_t slot = iy % g->rows;
                row = g->ring + 4 * slot * g->wp;
                if (g->tag[slot] != iy) {
                    g->tag[slot] = iy;
                    const int8_t *const src = src0 + iy * a.in_step;
#if RLX_USE_DSP
                    if (m == 1 && nc == 4) {
                        rlx_dw_row(src, row + 4 * g->clo, ncols, b.in_step, 4, off);
                    } else if (m == 2 && nc == 4) {
                        rlx_dw_row_m2(src, row + 4 * g->clo, ncols, b.in_step, off);
                    } else
#endif
                    {
                        rlx_dw_row_any(src, row + 4 * g->clo, ncols, b.in_step, idx, off);
                    }
                }
            }
            rlx_wr32(g->wt + row_lanes * i + 2, (uint32_t)(2 * (row - g->ring))); /* the row's byte offset */
        }
        int8_t *dst = out + oa * a.out_step + c0;
        int8_t *const dend = dst + b.n_out * b.out_step;
        const int16_t *px = g->ring;
        /* the output rule's tests out of the pixel loop: one loop per rule */
#define RLX_DW_PIXELS(...)                                                                  \
    for (; dst != dend; dst += b.out_step, px += step) {                                     \
        int32_t a0 = gk.b[0], a1 = gk.b[1], a2 = gk.b[2], a3 = gk.b[3];                     \
        RLX_DW_PX(px, g->wt, sb);                                                           \
        __VA_ARGS__;                                                                        \
    }
        if (fast && nc == 4) {
#if defined(RLX_DWR_RQ4_ASM)
            uint32_t t0_, t1_, t2_;
            if (sat) {
                RLX_DW_PIXELS(__asm__ volatile(RLX_DWR_RQ4_ASM("") RLX_DWR_RQ4_OUT
                                               : [q] "r"(&gk), [dst] "r"(dst)
                                               : "memory"))
            } else {
                RLX_DW_PIXELS(__asm__ volatile(RLX_DWR_RQ4_ASM("ldrd    %[t1], %[t2], [%[q], #64]\n\t" RLX_DWR_CLAMP)
                                                   RLX_DWR_RQ4_OUT
                                               : [q] "r"(&gk), [dst] "r"(dst)
                                               : "memory"))
            }
#else
            RLX_DW_PIXELS(dst[0] = RLX_DW_OUT(a0, 0); dst[1] = RLX_DW_OUT(a1, 1); dst[2] = RLX_DW_OUT(a2, 2);
                          dst[3] = RLX_DW_OUT(a3, 3))
#endif
        } else {
            RLX_DW_PIXELS(const int32_t acc[4] = {a0, a1, a2, a3}; for (int32_t i = 0; i < nc; i++) {
                dst[i] = fast ? RLX_DW_OUT(acc[i], i) : (int8_t)rlx_rq_out(&rq, acc[i], c0 + i);
            })
        }
#undef RLX_DW_PIXELS
    }
}

static RLX_NOINLINE_DW void rlx_dw_ring_sat(const rlx_dw_conv_params *p, const rlx_dw_walk *g, const int8_t *img,
                                            int8_t *out, int32_t c0)
{
    rlx_dw_ring_group(p, g, img, out, c0, 1, 1);
}

static RLX_NOINLINE_DW void rlx_dw_ring_any(const rlx_dw_conv_params *p, const rlx_dw_walk *g, const int8_t *img,
                                            int8_t *out, int32_t c0)
{
    rlx_dw_ring_group(p, g, img, out, c0, p->rq_mode != 0, 0);
}

void rlx_depthwise_conv_ring_s8(const rlx_dw_conv_params *p, const int8_t *in, int8_t *out, int16_t *scratch)
{
    rlx_dw_walk g;
    rlx_dw_walk_of(p, scratch, &g);
    /* the padded columns of every ring row and the zero row, which no widening writes */
    for (int32_t r = 0; r <= g.rows; r++) {
        int16_t *const row = g.ring + 4 * r * g.wp;
        const int32_t lo = r == g.rows ? g.wp : g.clo;
        for (int32_t i = 0; i < 4 * lo; i++) {
            row[i] = 0;
        }
        for (int32_t i = 4 * g.chi; i < 4 * g.wp; i++) {
            row[i] = 0;
        }
    }
    for (int32_t n = 0; n < p->batches; n++) {
        const int8_t *img = in + n * p->in_h * p->in_w * p->in_c;
        int8_t *o = out + n * p->out_h * p->out_w * p->out_c;
        for (int32_t c0 = 0; c0 < p->out_c; c0 += 4) {
            if (p->rq_mode == 2) {
                rlx_dw_ring_sat(p, &g, img, o, c0);
            } else {
                rlx_dw_ring_any(p, &g, img, o, c0);
            }
        }
    }
}
/* ---- 1-D windows (Kx1 or 1xK, no dilation along the window) on DSP cores ----
 * SMLAD multiplies two taps of one channel at once, which the ring's lanes (one channel
 * each) cannot feed: here each channel of a group of 4 output channels gets its own int16
 * plane in the scratch, the image line the window runs along widened with the input offset
 * added (padding 0, written once a call). Word j of a plane at output t holds taps 2j, 2j + 1
 * of t; with stride 1 the same word holds taps 2j - 1, 2j of output t + 1, so a second weight
 * set shifted by one tap (the odd set) gives a second output per loaded word, and the next
 * word two more: four outputs an iteration, a tap pair one SMLAD. The accumulators go to the
 * scratch by pairs of outputs (RLX_DW1_AIX: a channel's two outputs of a pair adjacent, one
 * STRD), and are requantized four (or two) pixels at a time, each channel's constants loaded
 * once for them, 4 outputs packed into one store (rlx_dw1_rq_line). The constants are a row a
 * group of rules.py's dwq (_dw_line_consts, rlx_dw1_rq): weights and bias doubled for the fast
 * requantization (the acc << 1 of SMMLAR), as on the ring, or, where the rule needs no sign
 * correction and the channels' shifts e allow, scaled by 2**(k - e + 1) so that one shift k
 * (8, 12 or 16: USAT's shifted operand) serves the group. rq_mode 0 and cores without DSP run
 * the ring, in the same scratch (rules.py's _dw_line_scratch). */
#define RLX_DW1_MAXP 5 /* weight pairs a channel: windows up to 9 taps (rules.py) */
/* the word of output t, lane l in a line's accumulators: a pair of outputs 8 words, a lane's two adjacent */
#define RLX_DW1_AIX(T, L) ((((T) >> 1) << 3) + 2 * (L) + ((T) & 1))

#if RLX_USE_DSP
/* A group's row of dwq (rules.py's _dw_line_consts, 21 words): per lane its multiplier, a and e; then
 * act_max - act_min and act_min in every byte (the clamp), the lanes' accumulators' starts (bias times f),
 * k (-1: not rlx_dw1_rq_line's, a the rq_add; 0: a the rq_add less act_min 2**e unless the rule saturates;
 * 8, 12 or 16: one shift k for the group, a and the accumulators scaled, e = k) and f of lanes 0 and 2,
 * 1 and 3 as int16 pairs (the weights' scale: 2, or 2**(k - e + 1) where k > 0). */
typedef struct {
    int32_t mae[12];
    uint32_t hl[2];
    int32_t b2[4];
    int32_t k;
    uint32_t f[2];
} rlx_dw1_rq;
typedef char rlx_dw1_rq_at[sizeof(rlx_dw1_rq) == 84 ? 1 : -1];

/* A call's constants through the calls of its groups and lines: axis b along the window, a across; q and
 * b2 the group's row; rlx_dw1_line4's widening (a single column first where the line starts at an odd
 * position, then pairs, then a last single column) and whether rlx_dw1_macs4 runs, worked out once. */
typedef struct {
    int16_t *plane;
    int32_t len, clo, ncols, in_step, np, n, s, os, rule;
    int32_t lead, pairs, tail, macs4;
    uint32_t *fr; /* rlx_dw1_macs4's frame: [0, 3) and [6] a call's, the rest a line's */
    uint32_t off2;
    uint32_t (*wt)[2 * RLX_DW1_MAXP];
    const int32_t *b2;
    int32_t *acc;
    const rlx_dw1_rq *q;
    const rlx_dw_conv_params *p;
    rlx_dw_axis a, b;
} rlx_dw1_ln;
#endif

#if RLX_USE_DSP
/* one column of 4 channels at src into the 4 planes (len halfwords apart) at d, the input offset added */
RLX_INLINE void rlx_dw1_widen1(const int8_t *src, int16_t *d, int32_t len, uint32_t off2)
{
    const uint32_t xv = rlx_rd32(src);
    const uint32_t x02 = rlx_sxtab16(off2, xv), x13 = rlx_sxtab16_ror8(off2, xv);
    d[0] = (int16_t)x02;
    d[len] = (int16_t)x13;
    d[2 * len] = (int16_t)(x02 >> 16);
    d[3 * len] = (int16_t)(x13 >> 16);
}

/* two outputs a step of rlx_dw1_macs and rlx_dw1_macs4 (windows of 3 to 6 taps, stride 1) */
#define RLX_DW1_STEP(XA, XB, LOAD, THIRD)                \
    "smlad   %[a0], %[" XA "], %[e0], %[b2]\n\t"          \
    "smlad   %[a1], %[" XA "], %[o0], %[b2]\n\t" LOAD     \
    "smlad   %[a0], %[" XB "], %[e1], %[a0]\n\t"          \
    "smlad   %[a1], %[" XB "], %[o1], %[a1]\n\t" THIRD    \
    "strd    %[a0], %[a1], [%[acc]], #32\n\t"
#define RLX_DW1_LOAD(XA) "ldr     %[" XA "], [%[x]], #4\n\t"
#define RLX_DW1_THIRD(XA)                                \
    "smlad   %[a0], %[" XA "], %[e2], %[a0]\n\t"          \
    "smlad   %[a1], %[" XA "], %[o2], %[a1]\n\t"

/* One channel's accumulators (doubled) along a line, at acc its lane's first word (RLX_DW1_AIX): x its
 * plane at the first output's first tap, w its weight pairs (even set, odd set), np pairs. Apart from the
 * requantization, so that the four accumulators, the words and the weights stay in registers; np a
 * constant in each instance (windows of 2 to 9 taps), unrolled. */
RLX_INLINE void rlx_dw1_macs(const int16_t *x, const uint32_t *w, const int32_t np, int32_t n, int32_t s, int32_t b2,
                             int32_t *acc)
{
    int32_t t = 0;
#if defined(__ARM_FEATURE_DSP) && (__ARM_FEATURE_DSP == 1) && !defined(RLX_NO_ASM)
    if (s == 1 && np <= 3 && np >= 2 && n >= 1) {
        /* windows of 3 to 6 taps: the weights in registers, two outputs a step (the even and the odd set
         * on the same np words of x), one new word a step into the register of the step's first word once
         * its products are done (np 3: the third word), two steps an iteration: 4.75 instructions an
         * output for np 3 (the quads' 5.75). The last iteration runs whole, as the quads'. np 3 takes 13
         * registers (GCC finds them only with the weights loaded in the asm, the last into w's register)
         * and the loop's end on the stack. */
        const int16_t *const xe = x + 4 + 4 * ((n + 3) / 4);
        const uint32_t *wr = w;
        uint32_t x0_, x1_, e0_, o0_, e1_;
        int32_t a1;
        int32_t *ap = acc;
        if (np == 3) {
            uint32_t o1_, e2_;
            int32_t a0 = (int32_t)(uintptr_t)xe; /* pushed */
            __asm__ volatile("push    {%[a0]}\n\t"
                             "ldrd    %[e0], %[o0], [%[o2]]\n\t"
                             "ldrd    %[e1], %[o1], [%[o2], #8]\n\t"
                             "ldrd    %[e2], %[o2], [%[o2], #16]\n\t"
                             "ldr     %[x0], [%[x]], #4\n\t"
                             "ldr     %[x1], [%[x]], #4\n\t"
                             "0:\n\t" RLX_DW1_STEP("x0", "x1", RLX_DW1_LOAD("x0"), RLX_DW1_THIRD("x0"))
                                 RLX_DW1_STEP("x1", "x0", RLX_DW1_LOAD("x1"), RLX_DW1_THIRD("x1"))
                             "ldr     %[a0], [sp]\n\t"
                             "cmp     %[x], %[a0]\n\t"
                             "bne     0b\n\t"
                             "add     sp, sp, #4\n\t"
                             : [a0] "+r"(a0), [a1] "=&r"(a1), [x0] "=&r"(x0_), [x1] "=&r"(x1_), [x] "+r"(x),
                               [acc] "+r"(ap), [o2] "+r"(wr), [e0] "=&r"(e0_), [o0] "=&r"(o0_), [e1] "=&r"(e1_),
                               [o1] "=&r"(o1_), [e2] "=&r"(e2_)
                             : [b2] "r"(b2)
                             : "memory", "cc");
        } else {
            int32_t a0;
            __asm__ volatile("ldrd    %[e0], %[o0], [%[o1]]\n\t"
                             "ldrd    %[e1], %[o1], [%[o1], #8]\n\t"
                             "ldr     %[x0], [%[x]], #4\n\t"
                             "ldr     %[x1], [%[x]], #4\n\t"
                             "0:\n\t" RLX_DW1_STEP("x0", "x1", "", RLX_DW1_LOAD("x0"))
                                 RLX_DW1_STEP("x1", "x0", "", RLX_DW1_LOAD("x1"))
                             "cmp     %[x], %[xe]\n\t"
                             "bne     0b\n\t"
                             : [a0] "=&r"(a0), [a1] "=&r"(a1), [x0] "=&r"(x0_), [x1] "=&r"(x1_), [x] "+r"(x),
                               [acc] "+r"(ap), [o1] "+r"(wr), [e0] "=&r"(e0_), [o0] "=&r"(o0_), [e1] "=&r"(e1_)
                             : [b2] "r"(b2), [xe] "r"(xe)
                             : "memory", "cc");
        }
        t = n;
    } else if (s == 1 && np >= 2 && np <= 5 && n >= 1) {
        /* the quads in asm: GCC reloads the weights and spills a word of x every quad (41 instructions
         * for 9 taps, here 35); the words of x alternate between xa and xb, each loaded once. The last
         * quad runs whole, past n: its extra outputs read past the plane (into the next one, or the
         * accumulators) and land in the accumulators' rounding (rules.py's _dw_line_scratch), which
         * the requantization does not read; cheaper than a tail of single outputs. */
        uint32_t xa, xb, we, wo;
        int32_t a0, a1, a2, a3;
        int32_t *ap = acc;
        const int16_t *const xe = x + 4 * ((n + 3) / 4);
#define RLX_DW1_PAIR(XC, XN, XOFF, WOFF)                       \
    "ldr     %[" XN "], [%[x], #" XOFF "]\n\t"                 \
    "ldrd    %[we], %[wo], [%[w], #" WOFF "]\n\t"              \
    "smlad   %[a0], %[" XC "], %[we], %[a0]\n\t"               \
    "smlad   %[a1], %[" XC "], %[wo], %[a1]\n\t"               \
    "smlad   %[a2], %[" XN "], %[we], %[a2]\n\t"               \
    "smlad   %[a3], %[" XN "], %[wo], %[a3]\n\t"
/* one pass of quads along a lane (4 outputs a step), to the line's end xe: RLX_DW1_QUADS and RLX_DW1_QUADS4 */
#define RLX_DW1_QUAD_LOOP(PAIRS)                     \
    "0:\n\t"                                         \
    "ldrd    %[xa], %[xb], [%[x]], #8\n\t"           \
    "ldrd    %[we], %[wo], [%[w]]\n\t"                \
    "smlad   %[a0], %[xa], %[we], %[b2]\n\t"          \
    "smlad   %[a1], %[xa], %[wo], %[b2]\n\t"          \
    "smlad   %[a2], %[xb], %[we], %[b2]\n\t"          \
    "smlad   %[a3], %[xb], %[wo], %[b2]\n\t" PAIRS    \
    "strd    %[a2], %[a3], [%[acc], #32]\n\t"         \
    "strd    %[a0], %[a1], [%[acc]], #64\n\t"         \
    "cmp     %[x], %[xe]\n\t"                         \
    "bne     0b\n\t"
#define RLX_DW1_QUADS(PAIRS)                                                                                  \
    __asm__ volatile(RLX_DW1_QUAD_LOOP(PAIRS)                                                                 \
                     : [a0] "=&r"(a0), [a1] "=&r"(a1), [a2] "=&r"(a2), [a3] "=&r"(a3), [xa] "=&r"(xa),          \
                       [xb] "=&r"(xb), [we] "=&r"(we), [wo] "=&r"(wo), [x] "+r"(x), [acc] "+r"(ap)              \
                     : [w] "r"(w), [b2] "r"(b2), [xe] "r"(xe)                                                   \
                     : "memory", "cc")
#define RLX_DW1_P1 RLX_DW1_PAIR("xb", "xa", "0", "8")
#define RLX_DW1_P2 RLX_DW1_PAIR("xa", "xb", "4", "16")
#define RLX_DW1_P3 RLX_DW1_PAIR("xb", "xa", "8", "24")
#define RLX_DW1_P4 RLX_DW1_PAIR("xa", "xb", "12", "32")
        if (np == 2) {
            RLX_DW1_QUADS(RLX_DW1_P1);
        } else if (np == 3) {
            RLX_DW1_QUADS(RLX_DW1_P1 RLX_DW1_P2);
        } else if (np == 4) {
            RLX_DW1_QUADS(RLX_DW1_P1 RLX_DW1_P2 RLX_DW1_P3);
        } else {
            RLX_DW1_QUADS(RLX_DW1_P1 RLX_DW1_P2 RLX_DW1_P3 RLX_DW1_P4);
        }
#undef RLX_DW1_P1
#undef RLX_DW1_P2
#undef RLX_DW1_P3
#undef RLX_DW1_P4
#undef RLX_DW1_QUADS
#undef RLX_DW1_PAIR
        t = n;
    }
#endif
    if (s == 1) {
        for (; t + 4 <= n; t += 4, x += 4) {
            int32_t a0 = b2, a1 = b2, a2 = b2, a3 = b2;
            uint32_t xc = rlx_rd32(x);
#if defined(__GNUC__)
#pragma GCC unroll 5
#endif
            for (int32_t j = 0; j < np; j++) {
                const uint32_t xn = rlx_rd32(x + 2 * j + 2), we = w[2 * j], wo = w[2 * j + 1];
                a0 = rlx_smlad(xc, we, a0);
                a1 = rlx_smlad(xc, wo, a1);
                a2 = rlx_smlad(xn, we, a2);
                a3 = rlx_smlad(xn, wo, a3);
                xc = xn;
            }
            int32_t *const at = acc + RLX_DW1_AIX(t, 0);
            at[0] = a0;
            at[1] = a1;
            at[8] = a2;
            at[9] = a3;
        }
    }
    for (; t < n; t++, x += s) {
        int32_t a0 = b2;
        for (int32_t j = 0; j < np; j++) {
            a0 = rlx_smlad(rlx_rd32(x + 2 * j), w[2 * j], a0);
        }
        acc[RLX_DW1_AIX(t, 0)] = a0;
    }
}

/* The nc channels of a group: plane l at x + l len, its weights at w + l 2 RLX_DW1_MAXP, its doubled bias
 * b2[l]; one call a line, the window's pair count a constant in each loop. */
static RLX_NOINLINE_DW void rlx_dw1_macs_any(const int16_t *x, int32_t len, const uint32_t *w, int32_t np, int32_t n,
                                             int32_t s, const int32_t *b2, int32_t *acc, int32_t nc)
{
#define RLX_DW1_ALL(NP)                                                                                   \
    for (int32_t l = 0; l < nc; l++) {                                                                    \
        rlx_dw1_macs(x + l * len, w + l * 2 * RLX_DW1_MAXP, (NP), n, s, b2[l], acc + 2 * l);              \
    }
    switch (np) {
    case 2:
        RLX_DW1_ALL(2);
        break;
    case 3:
        RLX_DW1_ALL(3);
        break;
    case 4:
        RLX_DW1_ALL(4);
        break;
    case 5:
        RLX_DW1_ALL(5);
        break;
    default:
        RLX_DW1_ALL(np);
        break;
    }
#undef RLX_DW1_ALL
}
#endif

#if defined(__ARM_FEATURE_DSP) && (__ARM_FEATURE_DSP == 1) && !defined(RLX_NO_ASM)
/* The 4 lanes of a group along a line of L: stride 1, n >= 1, np 2 to 5; rlx_dw1_macs's asm with the lanes'
 * loop in it too (in C, GCC spilled and reloaded ~30 instructions a lane around the asm). From lane to
 * lane (at 1:) the asm reads the frame fr (bytes of a plane, x's advance along a lane D, acc's step back
 * to the next lane, the lane's weights, its bias's address, the lanes left), whose address and, for np 2
 * and 3, the end of x wait on the stack. */
#define RLX_DW1_NEXT(W)                                                  \
    "ldr     %[a1], [sp, #4]\n\t"                                        \
    "ldrd    %[a0], %[x0], [%[a1], #16]\n\t"                             \
    "subs    %[x0], %[x0], #1\n\t"                                       \
    "beq     2f\n\t"                                                     \
    "ldr     %[b2], [%[a0], #4]!\n\t"                                    \
    "strd    %[a0], %[x0], [%[a1], #16]\n\t"                             \
    "ldrd    %[a0], %[x0], [%[a1]]\n\t"                                  \
    "ldr     %[x1], [sp]\n\t"                                            \
    "add     %[x1], %[x1], %[a0]\n\t"                                    \
    "str     %[x1], [sp]\n\t"                                            \
    "sub     %[x], %[x1], %[x0]\n\t"                                     \
    "ldrd    %[a0], %[" W "], [%[a1], #8]\n\t"                           \
    "add     %[acc], %[acc], %[a0]\n\t"                                  \
    "add     %[" W "], %[" W "], #40\n\t"                                \
    "str     %[" W "], [%[a1], #12]\n\t"                                 \
    "b       1b\n\t"                                                     \
    "2:\n\t"                                                             \
    "add     sp, sp, #8\n\t"
#define RLX_DW1_PAIR(XC, XN, XOFF, WOFF)                       \
    "ldr     %[" XN "], [%[x], #" XOFF "]\n\t"                 \
    "ldrd    %[we], %[wo], [%[w], #" WOFF "]\n\t"              \
    "smlad   %[a0], %[" XC "], %[we], %[a0]\n\t"               \
    "smlad   %[a1], %[" XC "], %[wo], %[a1]\n\t"               \
    "smlad   %[a2], %[" XN "], %[we], %[a2]\n\t"               \
    "smlad   %[a3], %[" XN "], %[wo], %[a3]\n\t"
/* np 2 and 3: the end of x pushed, and the lanes' entry (fr[7]: 3f's address plus fr[6], Thumb bit
 * set), reached at each lane after its weights (LDR PC): 12 bytes an entry, steps 3, 2, 1, then 0
 * (falling into the loop), each loading the lane's first two words into the step's registers */
#define RLX_DW1_ENTRY                                    \
    "ldr     %[a1], [%[a0], #4]\n\t"                      \
    "add     %[a1], %[x], %[a1]\n\t"                      \
    "ldr     %[x0], [%[a0], #24]\n\t"                     \
    "adr     %[x1], 3f\n\t"                               \
    "add     %[x1], %[x1], %[x0]\n\t"                     \
    "orr     %[x1], %[x1], #1\n\t"                        \
    "str     %[x1], [%[a0], #28]\n\t"                     \
    "push    {%[a0]}\n\t"                                 \
    "push    {%[a1]}\n\t"
#define RLX_DW1_JUMP                                     \
    "ldr     %[a1], [sp, #4]\n\t"                         \
    "ldr     pc, [%[a1], #28]\n\t"                        \
    ".p2align 2\n\t"                                      \
    "3:\n\t"                                              \
    "ldr.w   %[x1], [%[x]], #4\n\t"                       \
    "ldr.w   %[x0], [%[x]], #4\n\t"                       \
    "b.w     13f\n\t"                                     \
    "ldr.w   %[x0], [%[x]], #4\n\t"                       \
    "ldr.w   %[x1], [%[x]], #4\n\t"                       \
    "b.w     12f\n\t"                                     \
    "ldr.w   %[x1], [%[x]], #4\n\t"                       \
    "ldr.w   %[x0], [%[x]], #4\n\t"                       \
    "b.w     11f\n\t"                                     \
    "ldr.w   %[x0], [%[x]], #4\n\t"                       \
    "ldr.w   %[x1], [%[x]], #4\n\t"
/* two outputs of a lane (the line's last ones past its whole quads): pair J of the np, x and w not advanced */
#define RLX_DW1_HPAIR(XOFF, WOFF)                              \
    "ldr     %[xa], [%[x], #" XOFF "]\n\t"                    \
    "ldrd    %[we], %[wo], [%[w], #" WOFF "]\n\t"             \
    "smlad   %[a0], %[xa], %[we], %[a0]\n\t"                  \
    "smlad   %[a1], %[xa], %[wo], %[a1]\n\t"
#define RLX_DW1_HALF(HPAIRS)                                     \
    "ldr     %[xa], [%[x]]\n\t"                                   \
    "ldrd    %[we], %[wo], [%[w]]\n\t"                            \
    "smlad   %[a0], %[xa], %[we], %[b2]\n\t"                      \
    "smlad   %[a1], %[xa], %[wo], %[b2]\n\t" HPAIRS               \
    "strd    %[a0], %[a1], [%[acc]], #32\n\t"
#define RLX_DW1_QUADS4(PAIRS, HALF)                                                                           \
    __asm__ volatile("push    {%[a0]}\n\t"                                                                    \
                     "1:\n\t" RLX_DW1_QUAD_LOOP(PAIRS)                                                       \
                     HALF                                                                                     \
                     "ldr     %[a0], [sp]\n\t"                                                                \
                     "ldrd    %[a1], %[a2], [%[a0], #16]\n\t"                                                 \
                     "subs    %[a2], %[a2], #1\n\t"                                                           \
                     "beq     2f\n\t"                                                                         \
                     "ldr     %[b2], [%[a1], #4]!\n\t"                                                        \
                     "strd    %[a1], %[a2], [%[a0], #16]\n\t"                                                 \
                     "ldrd    %[a1], %[a2], [%[a0]]\n\t"                                                      \
                     "add     %[xe], %[xe], %[a1]\n\t"                                                        \
                     "sub     %[x], %[xe], %[a2]\n\t"                                                         \
                     "ldr     %[a1], [%[a0], #8]\n\t"                                                         \
                     "add     %[acc], %[acc], %[a1]\n\t"                                                      \
                     "add     %[w], %[w], #40\n\t"                                                            \
                     "b       1b\n\t"                                                                         \
                     "2:\n\t"                                                                                 \
                     "add     sp, sp, #4\n\t"                                                                 \
                     : [a0] "+r"(a0), [a1] "=&r"(a1), [a2] "=&r"(a2), [a3] "=&r"(a3), [xa] "=&r"(xa),           \
                       [xb] "=&r"(xb), [we] "=&r"(we), [wo] "=&r"(wo), [x] "+r"(x), [acc] "+r"(acc),            \
                       [w] "+r"(wq), [b2] "+r"(b2), [xe] "+r"(xe)                                               \
                     :                                                                                        \
                     : "memory", "cc")
/* rlx_dw1_macs4's frame of a call (the line's length n, np, a plane's len): iterations along a lane: np 2 and
 * 3 four steps of two outputs (8 outputs), the first entered at the step that leaves no step past the
 * line's last output pair (its entry's offset: fr[6]), else quads, and where the line leaves 1 or 2 outputs
 * past its whole quads (n >= 4), two more instead of a whole quad (half) */
static void rlx_dw1_frame(uint32_t *fr, int32_t n, int32_t np, int32_t len)
{
    const int32_t half = np > 3 && n >= 4 && (n & 3) != 0 && (n & 3) != 3, steps = (n + 1) / 2;
    const int32_t nq = np <= 3 ? (n + 7) / 8 : half ? n / 4 : (n + 3) / 4;
    fr[0] = (uint32_t)(2 * len);
    fr[1] = (uint32_t)(np <= 3 ? 8 + 4 * steps : 8 * nq);
    fr[2] = (uint32_t)(np <= 3 ? 8 - 32 * steps : 8 - 64 * nq - 32 * half);
    fr[6] = (uint32_t)(12 * (3 - (4 * nq - steps)));
}

static RLX_NOINLINE_DW void rlx_dw1_macs4(const rlx_dw1_ln *L)
{
    const int16_t *x = L->plane;
    const uint32_t *const w = L->wt[0];
    const int32_t np = L->np, *const b2p = L->b2;
    int32_t *acc = L->acc;
    uint32_t *const fr = L->fr; /* the line's words: the lane's weights and bias, the lanes left */
    fr[3] = (uint32_t)(uintptr_t)w, fr[4] = (uint32_t)(uintptr_t)b2p, fr[5] = 4u;
    int32_t b2 = b2p[0], a1;
    if (np <= 3) {
        uint32_t x0_, x1_, e0_, o0_, e1_;
        const uint32_t *wr = w;
        int32_t a0 = (int32_t)(uintptr_t)fr; /* pushed, then the end of x */
        if (np == 3) {
            uint32_t o1_, e2_;
            __asm__ volatile(RLX_DW1_ENTRY "1:\n\t"
                             "ldrd    %[e0], %[o0], [%[o2]]\n\t"
                             "ldrd    %[e1], %[o1], [%[o2], #8]\n\t"
                             "ldrd    %[e2], %[o2], [%[o2], #16]\n\t" RLX_DW1_JUMP
                             "0:\n\t" RLX_DW1_STEP("x0", "x1", RLX_DW1_LOAD("x0"), RLX_DW1_THIRD("x0"))
                             "11:\n\t" RLX_DW1_STEP("x1", "x0", RLX_DW1_LOAD("x1"), RLX_DW1_THIRD("x1"))
                             "12:\n\t" RLX_DW1_STEP("x0", "x1", RLX_DW1_LOAD("x0"), RLX_DW1_THIRD("x0"))
                             "13:\n\t" RLX_DW1_STEP("x1", "x0", RLX_DW1_LOAD("x1"), RLX_DW1_THIRD("x1"))
                             "ldr     %[a0], [sp]\n\t"
                             "cmp     %[x], %[a0]\n\t"
                             "bne     0b\n\t" RLX_DW1_NEXT("o2")
                             : [a0] "+r"(a0), [a1] "=&r"(a1), [x0] "=&r"(x0_), [x1] "=&r"(x1_), [x] "+r"(x),
                               [acc] "+r"(acc), [o2] "+r"(wr), [e0] "=&r"(e0_), [o0] "=&r"(o0_), [e1] "=&r"(e1_),
                               [o1] "=&r"(o1_), [e2] "=&r"(e2_), [b2] "+r"(b2)
                             :
                             : "memory", "cc");
        } else {
            __asm__ volatile(RLX_DW1_ENTRY "1:\n\t"
                             "ldrd    %[e0], %[o0], [%[o1]]\n\t"
                             "ldrd    %[e1], %[o1], [%[o1], #8]\n\t" RLX_DW1_JUMP
                             "0:\n\t" RLX_DW1_STEP("x0", "x1", "", RLX_DW1_LOAD("x0"))
                             "11:\n\t" RLX_DW1_STEP("x1", "x0", "", RLX_DW1_LOAD("x1"))
                             "12:\n\t" RLX_DW1_STEP("x0", "x1", "", RLX_DW1_LOAD("x0"))
                             "13:\n\t" RLX_DW1_STEP("x1", "x0", "", RLX_DW1_LOAD("x1"))
                             "ldr     %[a0], [sp]\n\t"
                             "cmp     %[x], %[a0]\n\t"
                             "bne     0b\n\t" RLX_DW1_NEXT("o1")
                             : [a0] "+r"(a0), [a1] "=&r"(a1), [x0] "=&r"(x0_), [x1] "=&r"(x1_), [x] "+r"(x),
                               [acc] "+r"(acc), [o1] "+r"(wr), [e0] "=&r"(e0_), [o0] "=&r"(o0_), [e1] "=&r"(e1_),
                               [b2] "+r"(b2)
                             :
                             : "memory", "cc");
        }
    } else {
        uint32_t xa, xb, we, wo;
        int32_t a2, a3;
        int32_t a0 = (int32_t)(uintptr_t)fr; /* pushed */
        const uint32_t *wq = w;
        const int16_t *xe = (const int16_t *)(const void *)((const char *)(const void *)x + fr[1]);
        const int32_t n = L->n, half = n >= 4 && (n & 3) != 0 && (n & 3) != 3; /* as rlx_dw1_frame's */
#define RLX_DW1_P4                                                                                              \
    RLX_DW1_PAIR("xb", "xa", "0", "8") RLX_DW1_PAIR("xa", "xb", "4", "16") RLX_DW1_PAIR("xb", "xa", "8", "24")
#define RLX_DW1_H4 RLX_DW1_HPAIR("4", "8") RLX_DW1_HPAIR("8", "16") RLX_DW1_HPAIR("12", "24")
        /* (an instance with the two last outputs and one without: no test a lane) */
        if (np == 4 && half) {
            RLX_DW1_QUADS4(RLX_DW1_P4, RLX_DW1_HALF(RLX_DW1_H4));
        } else if (np == 4) {
            RLX_DW1_QUADS4(RLX_DW1_P4, "");
        } else if (half) {
            RLX_DW1_QUADS4(RLX_DW1_P4 RLX_DW1_PAIR("xa", "xb", "12", "32"),
                           RLX_DW1_HALF(RLX_DW1_H4 RLX_DW1_HPAIR("16", "32")));
        } else {
            RLX_DW1_QUADS4(RLX_DW1_P4 RLX_DW1_PAIR("xa", "xb", "12", "32"), "");
        }
#undef RLX_DW1_P4
#undef RLX_DW1_H4
    }
}
#undef RLX_DW1_QUADS4
#undef RLX_DW1_HALF
#undef RLX_DW1_HPAIR
#undef RLX_DW1_PAIR
#undef RLX_DW1_THIRD
#undef RLX_DW1_LOAD
#undef RLX_DW1_STEP
#undef RLX_DW1_NEXT
#undef RLX_DW1_JUMP
#undef RLX_DW1_ENTRY
#endif

#if RLX_USE_DSP
/* One pixel's 4 outputs to d from its lane 0's accumulator at a0 (lane l at a0[2 l]), by the group's row q
 * and the rule (rlx_dw1_rq_line): its odd last pixel, every pixel where the asm is not compiled. Where
 * q->k > 0, SMMLA (no rounding) of the scaled accumulator and the shift k (mae[3 l + 2]). */
RLX_INLINE void rlx_dw1_rq_px(const rlx_dw1_rq *q, int32_t rule, const int32_t *a0, int8_t *d)
{
    const int32_t hm = (int32_t)(q->hl[0] & 0xFFu), lo = (int8_t)q->hl[1];
    for (int32_t l = 0; l < 4; l++) {
        const int32_t a = a0[2 * l], *c = q->mae + 3 * l;
        const int32_t t = q->k > 0 ? (int32_t)(((int64_t)c[1] * 4294967296LL + (int64_t)a * c[0]) >> 32)
                                   : rlx_smmlar(a, c[0], c[1]) + (rule != 2 ? a >> 31 : 0);
        const int32_t v = t >> c[2];
        d[l] = (int8_t)(rule == 0 ? rlx_sat8(v) : (v < 0 ? 0 : v > hm ? hm : v) + lo);
    }
}
#endif

#if defined(__ARM_FEATURE_DSP) && (__ARM_FEATURE_DSP == 1) && !defined(RLX_NO_ASM)
#define RLX_DW1_RQ_ASM 1

/* One lane of a pixel pair: its constants (LDM), its two accumulators (LDRD), SIGN (SMMLAR, with or
 * without the sign correction), the shift, SAT to 8 bits into DA and DB. */
#define RLX_DW1_RQ2(SIGN, SAT, DA, DB)                                   \
    "ldmia   %[w]!, {%[m], %[ad], %[e]}\n\t"                             \
    "ldrd    %[xa], %[xb], [%[ac]], #8\n\t" SIGN                         \
    "asr     %[xa], %[xa], %[e]\n\t"                                     \
    "asr     %[xb], %[xb], %[e]\n\t" SAT "    %[" DA "], #8, %[xa]\n\t" \
    SAT "    %[" DB "], #8, %[xb]\n\t"
#define RLX_DW1_PLAIN                                \
    "smmlar  %[xa], %[xa], %[m], %[ad]\n\t"          \
    "smmlar  %[xb], %[xb], %[m], %[ad]\n\t"
#define RLX_DW1_SIGN                                 \
    "smmlar  %[t], %[xa], %[m], %[ad]\n\t"           \
    "add     %[xa], %[t], %[xa], asr #31\n\t"        \
    "smmlar  %[t], %[xb], %[m], %[ad]\n\t"           \
    "add     %[xb], %[t], %[xb], asr #31\n\t"
#define RLX_DW1_BFI(B)                               \
    "bfi     %[pa], %[xa], #" B ", #8\n\t"           \
    "bfi     %[pb], %[xb], #" B ", #8\n\t"
/* the clamp of the packed outputs less act_min (USAT gave 0..255): a byte-wise minimum with
 * act_max - act_min (USUB8 sets GE where above it, SEL picks), then act_min added back */
#define RLX_DW1_CLAMP                                \
    "ldrd    %[xa], %[xb], [%[w]]\n\t"               \
    "usub8   %[t], %[pa], %[xa]\n\t"                 \
    "sel     %[pa], %[xa], %[pa]\n\t"                \
    "uadd8   %[pa], %[pa], %[xb]\n\t"                \
    "usub8   %[t], %[pb], %[xa]\n\t"                 \
    "sel     %[pb], %[xa], %[pb]\n\t"                \
    "uadd8   %[pb], %[pb], %[xb]\n\t"
#define RLX_DW1_RQ_LOOP(SIGN, SAT, CLAMP)                                                                      \
    do {                                                                                                      \
        register int32_t m_ __asm__("r8"), ad_ __asm__("r9"), e_ __asm__("r10");                             \
        uint32_t xa_, xb_, pa_, pb_, t_;                                                                      \
        __asm__ volatile("0:\n\t" RLX_DW1_RQ2(SIGN, SAT, "pa", "pb")                                          \
                             RLX_DW1_RQ2(SIGN, SAT, "xa", "xb") RLX_DW1_BFI("8")                              \
                                 RLX_DW1_RQ2(SIGN, SAT, "xa", "xb") RLX_DW1_BFI("16")                         \
                                     RLX_DW1_RQ2(SIGN, SAT, "xa", "xb") RLX_DW1_BFI("24") CLAMP               \
                         "sub     %[w], %[w], #48\n\t"                                                        \
                         "str     %[pa], [%[dst]]\n\t"                                                        \
                         "str     %[pb], [%[dst], %[os]]\n\t"                                                 \
                         "add     %[dst], %[dst], %[os], lsl #1\n\t"                                          \
                         "cmp     %[dst], %[end]\n\t"                                                         \
                         "bne     0b\n\t"                                                                     \
                         : [m] "=&r"(m_), [ad] "=&r"(ad_), [e] "=&r"(e_), [xa] "=&r"(xa_), [xb] "=&r"(xb_),    \
                           [pa] "=&r"(pa_), [pb] "=&r"(pb_), [t] "=&r"(t_), [w] "+r"(w_), [ac] "+r"(ac),       \
                           [dst] "+r"(dst)                                                                    \
                         : [os] "r"(os), [end] "r"(end)                                                       \
                         : "memory", "cc");                                                                   \
    } while (0)

/* Rule 2 (no sign correction, so no temporary) four pixels an iteration: each lane's constants loaded once
 * for its four outputs, its accumulators of pixels t + 2, t + 3 (32 bytes on, into pc, pd) then t, t + 1
 * (into pa, pb), INC the last lane's step to the next pixel pair's words; e, free after the lanes, takes
 * USUB8's result; the loop's end waits on the stack (pushed from m). 95 instructions an iteration for 16
 * outputs, the pairs' 102. */
#define RLX_DW1_RQ4H(LD, DA, DB)                     \
    "ldrd    %[xa], %[xb], " LD "\n\t"                \
    "smmlar  %[xa], %[xa], %[m], %[ad]\n\t"          \
    "smmlar  %[xb], %[xb], %[m], %[ad]\n\t"          \
    "asr     %[xa], %[xa], %[e]\n\t"                 \
    "asr     %[xb], %[xb], %[e]\n\t"                 \
    "usat    %[" DA "], #8, %[xa]\n\t"               \
    "usat    %[" DB "], #8, %[xb]\n\t"
#define RLX_DW1_RQ4L(B, INC)                                                       \
    "ldmia   %[w]!, {%[m], %[ad], %[e]}\n\t" RLX_DW1_RQ4H("[%[ac], #32]", "xa", "xb") \
    "bfi     %[pc], %[xa], #" B ", #8\n\t"                                          \
    "bfi     %[pd], %[xb], #" B ", #8\n\t" RLX_DW1_RQ4H("[%[ac]], #" INC, "xa", "xb") \
    "bfi     %[pa], %[xa], #" B ", #8\n\t"                                          \
    "bfi     %[pb], %[xb], #" B ", #8\n\t"
#define RLX_DW1_CLAMP1(P)                            \
    "usub8   %[e], %[" P "], %[xa]\n\t"               \
    "sel     %[" P "], %[xa], %[" P "]\n\t"           \
    "uadd8   %[" P "], %[" P "], %[xb]\n\t"

/* A group of one shift K (its row's k > 0: rule 2, the accumulators scaled): four pixels an iteration as
 * RLX_DW1_RQ4H/L, each output SMMLA, then USAT with the shift K as its operand's: 78 instructions an
 * iteration, 95 with the lanes' shifts. */
#define RLX_DW1_RQFH(LD, K, DA, DB)                  \
    "ldrd    %[xa], %[xb], " LD "\n\t"                \
    "smmla   %[xa], %[xa], %[m], %[ad]\n\t"          \
    "smmla   %[xb], %[xb], %[m], %[ad]\n\t"          \
    "usat    %[" DA "], #8, %[xa], asr #" K "\n\t"   \
    "usat    %[" DB "], #8, %[xb], asr #" K "\n\t"
#define RLX_DW1_RQFL(K, B, INC)                                                        \
    "ldrd    %[m], %[ad], [%[w]], #12\n\t" RLX_DW1_RQFH("[%[ac], #32]", K, "xa", "xb") \
    "bfi     %[pc], %[xa], #" B ", #8\n\t"                                              \
    "bfi     %[pd], %[xb], #" B ", #8\n\t" RLX_DW1_RQFH("[%[ac]], #" INC, K, "xa", "xb") \
    "bfi     %[pa], %[xa], #" B ", #8\n\t"                                              \
    "bfi     %[pb], %[xb], #" B ", #8\n\t"
#define RLX_DW1_CLAMPM(P)                            \
    "usub8   %[m], %[" P "], %[xa]\n\t"               \
    "sel     %[" P "], %[xa], %[" P "]\n\t"           \
    "uadd8   %[" P "], %[" P "], %[xb]\n\t"
#define RLX_DW1_RQF(K)                                                                                         \
    __asm__ volatile("0:\n\t"                                                                                   \
                     "ldrd    %[m], %[ad], [%[w]], #12\n\t" RLX_DW1_RQFH("[%[ac], #32]", K, "pc", "pd")        \
                         RLX_DW1_RQFH("[%[ac]], #8", K, "pa", "pb") RLX_DW1_RQFL(K, "8", "8")                  \
                             RLX_DW1_RQFL(K, "16", "8") RLX_DW1_RQFL(K, "24", "40")                            \
                     "ldrd    %[xa], %[xb], [%[w]]\n\t" RLX_DW1_CLAMPM("pa") RLX_DW1_CLAMPM("pb")                \
                         RLX_DW1_CLAMPM("pc") RLX_DW1_CLAMPM("pd")                                              \
                     "sub     %[w], %[w], #48\n\t"                                                              \
                     "str     %[pa], [%[dst]]\n\t"                                                              \
                     "str     %[pb], [%[dst], %[os]]\n\t"                                                       \
                     "add     %[dst], %[dst], %[os], lsl #1\n\t"                                                \
                     "str     %[pc], [%[dst]]\n\t"                                                              \
                     "str     %[pd], [%[dst], %[os]]\n\t"                                                       \
                     "add     %[dst], %[dst], %[os], lsl #1\n\t"                                                \
                     "cmp     %[dst], %[end]\n\t"                                                               \
                     "bne     0b\n\t"                                                                           \
                     : [m] "=&r"(m_), [ad] "=&r"(ad_), [xa] "=&r"(xa_), [xb] "=&r"(xb_), [pa] "=&r"(pa_),         \
                       [pb] "=&r"(pb_), [pc] "=&r"(pc_), [pd] "=&r"(pd_), [w] "+r"(w_), [ac] "+r"(a4), [dst] "+r"(d4) \
                     : [os] "r"(os), [end] "r"(e4)                                                              \
                     : "memory", "cc")
/* the same on one pixel pair (a line's last two past its quads): 39 instructions */
#define RLX_DW1_RQFP1(K, DA, DB)                                                 \
    "ldrd    %[m], %[ad], [%[w]], #12\n\t" RLX_DW1_RQFH("[%[ac]], #8", K, DA, DB)
#define RLX_DW1_RQFPL(K, B) RLX_DW1_RQFP1(K, "xa", "xb")                         \
    "bfi     %[pa], %[xa], #" B ", #8\n\t"                                        \
    "bfi     %[pb], %[xb], #" B ", #8\n\t"
#define RLX_DW1_RQFP(K)                                                                                        \
    __asm__ volatile(RLX_DW1_RQFP1(K, "pa", "pb") RLX_DW1_RQFPL(K, "8") RLX_DW1_RQFPL(K, "16")                  \
                         RLX_DW1_RQFPL(K, "24") "ldrd    %[xa], %[xb], [%[w]]\n\t" RLX_DW1_CLAMPM("pa")          \
                             RLX_DW1_CLAMPM("pb")                                                               \
                     "str     %[pa], [%[dst]]\n\t"                                                              \
                     "str     %[pb], [%[dst], %[os]]\n\t"                                                       \
                     : [m] "=&r"(m_), [ad] "=&r"(ad_), [xa] "=&r"(xa_), [xb] "=&r"(xb_), [pa] "=&r"(pa_),         \
                       [pb] "=&r"(pb_), [w] "+r"(w_), [ac] "+r"(a4)                                               \
                     : [os] "r"(os), [dst] "r"(d4)                                                              \
                     : "memory")
/* a group of one shift K: its whole quads of pixels, then a pair */
#define RLX_DW1_RQFK(K)                                                                                        \
    do {                                                                                                      \
        if (n2 >= 4) {                                                                                        \
            const rlx_dw1_rq *w_ = q;                                                                         \
            RLX_DW1_RQF(K);                                                                                   \
        }                                                                                                     \
        if (n2 & 2) {                                                                                         \
            const rlx_dw1_rq *w_ = q;                                                                         \
            RLX_DW1_RQFP(K);                                                                                  \
        }                                                                                                     \
    } while (0)

/* The L->n outputs of a line, from dst on L->os bytes apart, from the accumulators at L->acc (RLX_DW1_AIX),
 * the group's row at L->q, by L->rule (0 saturating, 1 a clamp with the sign correction, 2 one without:
 * act_min at or above out_zp): each output (SMMLAR(acc, mult, rq_add - act_min 2**e) [+ (acc >> 31)]) >> e
 * saturated to 0..255 (USAT), packed, clamped to act_max - act_min and act_min added (rule 0: SSAT of the
 * unshifted form), a pair of pixels an iteration, four on rule 2; a row of one shift k (rule 2):
 * SMMLA(acc, mult, a) with the shift k in USAT, four pixels an iteration, then a pair; an odd last pixel
 * in C, the same arithmetic. */
static RLX_NOINLINE_DW void rlx_dw1_rq_line(const rlx_dw1_ln *L, int8_t *dst)
{
    const int32_t *ac = L->acc, *const acc0 = L->acc;
    const rlx_dw1_rq *const q = L->q;
    const int32_t n = L->n, os = L->os, rule = L->rule, n2 = n & ~1;
    int8_t *const dst0 = dst;
    if (q->k > 0) {
        int32_t m_, ad_;
        uint32_t xa_, xb_, pa_, pb_, pc_, pd_;
        const int32_t *a4 = ac;
        int8_t *d4 = dst, *const e4 = dst + (n2 & ~3) * os;
        if (q->k == 8) {
            RLX_DW1_RQFK("8");
        } else if (q->k == 12) {
            RLX_DW1_RQFK("12");
        } else {
            RLX_DW1_RQFK("16");
        }
        if (n & 1) {
            rlx_dw1_rq_px(q, rule, acc0 + RLX_DW1_AIX(n - 1, 0), dst0 + (n - 1) * os);
        }
        return;
    }
    if (rule == 2 && n >= 4) {
        register int32_t m_ __asm__("r8") = (int32_t)(uintptr_t)(dst + (n & ~3) * os); /* pushed */
        register int32_t ad_ __asm__("r9"), e_ __asm__("r10");
        uint32_t xa_, xb_, pa_, pb_, pc_, pd_;
        const rlx_dw1_rq *w_ = q;
        __asm__ volatile("push    {%[m]}\n\t"
                         "0:\n\t"
                         "ldmia   %[w]!, {%[m], %[ad], %[e]}\n\t" RLX_DW1_RQ4H("[%[ac], #32]", "pc", "pd")
                             RLX_DW1_RQ4H("[%[ac]], #8", "pa", "pb") RLX_DW1_RQ4L("8", "8") RLX_DW1_RQ4L("16", "8")
                                 RLX_DW1_RQ4L("24", "40")
                         "ldrd    %[xa], %[xb], [%[w]]\n\t" RLX_DW1_CLAMP1("pa") RLX_DW1_CLAMP1("pb")
                             RLX_DW1_CLAMP1("pc") RLX_DW1_CLAMP1("pd")
                         "sub     %[w], %[w], #48\n\t"
                         "str     %[pa], [%[dst]]\n\t"
                         "str     %[pb], [%[dst], %[os]]\n\t"
                         "add     %[dst], %[dst], %[os], lsl #1\n\t"
                         "str     %[pc], [%[dst]]\n\t"
                         "str     %[pd], [%[dst], %[os]]\n\t"
                         "add     %[dst], %[dst], %[os], lsl #1\n\t"
                         "ldr     %[m], [sp]\n\t"
                         "cmp     %[dst], %[m]\n\t"
                         "bne     0b\n\t"
                         "add     sp, sp, #4\n\t"
                         : [m] "+r"(m_), [ad] "=&r"(ad_), [e] "=&r"(e_), [xa] "=&r"(xa_), [xb] "=&r"(xb_),
                           [pa] "=&r"(pa_), [pb] "=&r"(pb_), [pc] "=&r"(pc_), [pd] "=&r"(pd_), [w] "+r"(w_),
                           [ac] "+r"(ac), [dst] "+r"(dst)
                         : [os] "r"(os)
                         : "memory", "cc");
    }
    if ((rule == 2 && n >= 4 ? n & 2 : n) >= 2) {
        int8_t *const end = dst + ((rule == 2 && n >= 4 ? n & 2 : n) & ~1) * os;
        const rlx_dw1_rq *w_ = q;
        if (rule == 0) {
            RLX_DW1_RQ_LOOP(RLX_DW1_SIGN, "ssat", "");
        } else if (rule == 1) {
            RLX_DW1_RQ_LOOP(RLX_DW1_SIGN, "usat", RLX_DW1_CLAMP);
        } else {
            RLX_DW1_RQ_LOOP(RLX_DW1_PLAIN, "usat", RLX_DW1_CLAMP);
        }
    }
    if (n & 1) {
        rlx_dw1_rq_px(q, rule, acc0 + RLX_DW1_AIX(n - 1, 0), dst0 + (n - 1) * os);
    }
}
#undef RLX_DW1_RQFK
#undef RLX_DW1_RQFP
#undef RLX_DW1_RQFPL
#undef RLX_DW1_RQFP1
#undef RLX_DW1_RQF
#undef RLX_DW1_CLAMPM
#undef RLX_DW1_RQFL
#undef RLX_DW1_RQFH
#undef RLX_DW1_RQ_LOOP
#undef RLX_DW1_CLAMP1
#undef RLX_DW1_RQ4L
#undef RLX_DW1_RQ4H
#undef RLX_DW1_CLAMP
#undef RLX_DW1_BFI
#undef RLX_DW1_SIGN
#undef RLX_DW1_PLAIN
#undef RLX_DW1_RQ2
#elif RLX_USE_DSP
/* rlx_dw1_rq_line where its asm is not compiled: a pixel at a time, the same arithmetic */
static RLX_NOINLINE_DW void rlx_dw1_rq_line(const rlx_dw1_ln *L, int8_t *dst)
{
    for (int32_t t = 0; t < L->n; t++) {
        rlx_dw1_rq_px(L->q, L->rule, L->acc + RLX_DW1_AIX(t, 0), dst + t * L->os);
    }
}
#endif

#if RLX_USE_DSP
/* A word's int16 halves times f's (SMULBB, SMULTT, PKHBT) */
RLX_INLINE uint32_t rlx_dw1_scale2(uint32_t v, uint32_t f)
{
#if defined(__ARM_FEATURE_DSP) && (__ARM_FEATURE_DSP == 1) && !defined(RLX_NO_ASM)
    uint32_t lo, hi; /* GCC writes SMULTT as two shifts and a MUL */
    __asm__("smulbb  %0, %2, %3\n\t"
            "smultt  %1, %2, %3\n\t"
            "pkhbt   %0, %0, %1, lsl #16"
            : "=&r"(lo), "=&r"(hi)
            : "r"(v), "r"(f));
    return lo;
#else
    return rlx_pack_lo16((uint32_t)((int32_t)(int16_t)v * (int16_t)f),
                         (uint32_t)(((int32_t)v >> 16) * ((int32_t)f >> 16)));
#endif
}

/* A whole group's weights, out of line (in the kernel, GCC spills them into ~2x the instructions): the
 * weight pairs of its 4 channels (wt) times the row's f (L->q: doubled, or scaled for its shift k).
 * Returns whether rlx_dw1_rq_line may run the group (k >= 0, rules.py). */
static RLX_NOINLINE_DW int32_t rlx_dw1_group4(const rlx_dw1_ln *L, int32_t c0)
{
    const rlx_dw_conv_params *const p = L->p;
    const int32_t oc = p->out_c, kb = L->b.k, np = L->np;
    uint32_t(*const wt)[2 * RLX_DW1_MAXP] = L->wt;
    const rlx_dw1_rq *const q = L->q;
    /* tap t of the window is weight row t either way (the other axis has one tap): a word of the 4
     * channels a tap, widened and scaled (doubled: SXTB16 then SXTAB16 of the word, channels 0 and 2;
     * ROR 8: 1 and 3; else times f), then each half's taps paired (2 j, 2 j + 1 and 2 j - 1, 2 j; 0
     * outside the window) */
    uint32_t em = 0u, om = 0u; /* tap 2 j - 1: -1 at first */
    const int8_t *wr = p->weights + c0;
    uint32_t *wj = wt[0];
#define RLX_DW1_WPAIR(W0, E1, O1, E, O)                                                                            \
    do {                                                                                                          \
        const uint32_t w0 = (W0);                                                                                 \
        const uint32_t e0 = E(w0), o0 = O(w0), e1 = (E1), o1 = (O1);                                              \
        wj[0] = rlx_pack_lo16(e0, e1), wj[1] = rlx_pack_lo16(em, e0);                                            \
        wj[2 * RLX_DW1_MAXP] = rlx_pack_lo16(o0, o1), wj[2 * RLX_DW1_MAXP + 1] = rlx_pack_lo16(om, o0);          \
        wj[4 * RLX_DW1_MAXP] = rlx_pack_hi16(e0, e1), wj[4 * RLX_DW1_MAXP + 1] = rlx_pack_hi16(em, e0);          \
        wj[6 * RLX_DW1_MAXP] = rlx_pack_hi16(o0, o1), wj[6 * RLX_DW1_MAXP + 1] = rlx_pack_hi16(om, o0);          \
        em = e1, om = o1, wj += 2;                                                                                \
    } while (0)
    /* the pairs inside the window, then the last one (np = kb / 2 + 1): one tap of it inside or none */
#define RLX_DW1_WALL(E, O)                                                                                         \
    do {                                                                                                          \
        for (int32_t j = 0; j < np - 1; j++, wr += 2 * oc) {                                                      \
            const uint32_t w1 = rlx_rd32(wr + oc);                                                                \
            RLX_DW1_WPAIR(rlx_rd32(wr), E(w1), O(w1), E, O);                                                      \
        }                                                                                                         \
        RLX_DW1_WPAIR(kb & 1 ? rlx_rd32(wr) : 0u, 0u, 0u, E, O);                                                  \
    } while (0)
#define RLX_DW1_E2(W) rlx_sxtab16(rlx_sxtb16(W), W)
#define RLX_DW1_O2(W) rlx_sxtab16_ror8(rlx_sxtb16_ror8(W), W)
#define RLX_DW1_EF(W) rlx_dw1_scale2(rlx_sxtb16(W), f02)
#define RLX_DW1_OF(W) rlx_dw1_scale2(rlx_sxtb16_ror8(W), f13)
    if (q->k > 0) {
        const uint32_t f02 = q->f[0], f13 = q->f[1];
        RLX_DW1_WALL(RLX_DW1_EF, RLX_DW1_OF);
    } else {
        RLX_DW1_WALL(RLX_DW1_E2, RLX_DW1_O2);
    }
#undef RLX_DW1_OF
#undef RLX_DW1_EF
#undef RLX_DW1_O2
#undef RLX_DW1_E2
#undef RLX_DW1_WALL
#undef RLX_DW1_WPAIR
    return q->k >= 0;
}
#endif

#if defined(RLX_DW1_RQ_ASM)
/* One line of a whole group of depth multiplier 1, out of line (in the kernel, GCC keeps the line loop's
 * values on the stack): the image line at src widened into the planes (a single column where the line
 * starts at an odd position, then pairs of columns a word a plane, their bytes paired first: channels 0
 * and 1 of both, 2 and 3, so that one SXTAB16 gives a channel's two columns with the offset added; the
 * pairs in asm, two an iteration (entered at the second where their count is odd): 14 instructions a
 * pair, GCC's 19), then its MACs and outputs to dst. */
static RLX_NOINLINE_DW void rlx_dw1_line4(const rlx_dw1_ln *L, const int8_t *src, int8_t *dst)
{
    const int32_t len = L->len, st = L->in_step, pairs = L->pairs;
    const uint32_t off2 = L->off2;
    int16_t *d = L->plane + L->clo;
    if (L->lead) {
        rlx_dw1_widen1(src, d, len, off2);
        src += st, d++;
    }
    if (pairs) {
        int16_t *const de = d + 2 * pairs;
        uint32_t x0_, x1_, t_;
#define RLX_DW1_WPAIRS                                    \
    "ldr     %[x0], [%[src]]\n\t"                          \
    "ldr     %[x1], [%[src], %[st]]\n\t"                   \
    "add     %[src], %[src], %[st], lsl #1\n\t"            \
    "pkhbt   %[t], %[x0], %[x1], lsl #16\n\t"              \
    "pkhtb   %[x1], %[x1], %[x0], asr #16\n\t"             \
    "sxtab16 %[x0], %[o2], %[t]\n\t"                       \
    "sxtab16 %[t], %[o2], %[t], ror #8\n\t"                \
    "str     %[t], [%[d], %[l1]]\n\t"                      \
    "sxtab16 %[t], %[o2], %[x1]\n\t"                       \
    "sxtab16 %[x1], %[o2], %[x1], ror #8\n\t"              \
    "str     %[t], [%[d], %[l2]]\n\t"                      \
    "str     %[x1], [%[d], %[l3]]\n\t"                     \
    "str     %[x0], [%[d]], #4\n\t"
        __asm__ volatile("cmp     %[odd], #0\n\t"
                         "bne     1f\n\t"
                         "0:\n\t" RLX_DW1_WPAIRS "1:\n\t" RLX_DW1_WPAIRS "cmp     %[d], %[de]\n\t"
                         "bne     0b\n\t"
                         : [x0] "=&r"(x0_), [x1] "=&r"(x1_), [t] "=&r"(t_), [src] "+r"(src), [d] "+r"(d)
                         : [st] "r"(st), [o2] "r"(off2), [l1] "r"(2 * len), [l2] "r"(4 * len), [l3] "r"(6 * len),
                           [de] "r"(de), [odd] "r"(pairs & 1)
                         : "memory", "cc");
#undef RLX_DW1_WPAIRS
    }
    if (L->tail) {
        rlx_dw1_widen1(src, d, len, off2);
    }
    if (L->macs4) {
        rlx_dw1_macs4(L);
    } else {
        rlx_dw1_macs_any(L->plane, len, L->wt[0], L->np, L->n, L->s, L->b2, L->acc, 4);
    }
    rlx_dw1_rq_line(L, dst);
}
#endif

#if RLX_USE_DSP
/* Channels [c0, c0 + nc) of every line, any depth multiplier, out of line (the whole groups of depth
 * multiplier 1 run rlx_dw1_line4): a last group of fewer than 4 channels has its weights here (nc < 4),
 * the lines widened a lane at a time where the multiplier is not 1, the outputs through rlx_dw1_rq_line
 * where fast (rlx_dw1_group4), else a channel at a time. */
static RLX_NOINLINE_DW void rlx_dw1_group_any(const rlx_dw1_ln *L, const int8_t *in, int8_t *out, int32_t c0,
                                              int32_t nc, int32_t fast)
{
    const rlx_dw_conv_params *const p = L->p;
    const rlx_dw_axis a = L->a, b = L->b;
    const int32_t oc = p->out_c, m = p->ch_mult, off = p->in_offset, kb = b.k, np = L->np, len = L->len;
    const int32_t lo = p->act_min, hi = p->act_max, sat = lo == -128 && hi == 127;
    const int32_t clo = L->clo, ncols = L->ncols;
    const uint32_t off2 = L->off2;
    int16_t *const plane = L->plane;
    int32_t *const acc = L->acc;
    const int32_t *const b2 = L->b2; /* the row's: doubled where it is not rlx_dw1_rq_line's */
    uint32_t(*const wt)[2 * RLX_DW1_MAXP] = L->wt;
    for (int32_t l = 0; l < nc && nc < 4; l++) {
        const int8_t *const w8 = p->weights + c0 + l;
        for (int32_t j = 0; j < np; j++) {
            const int32_t k = 2 * j;
            const int32_t w0 = k < kb ? 2 * w8[k * oc] : 0, w1 = k + 1 < kb ? 2 * w8[(k + 1) * oc] : 0;
            const int32_t wm = k > 0 ? 2 * w8[(k - 1) * oc] : 0;
            wt[l][2 * j] = ((uint32_t)w0 & 0xFFFFu) | ((uint32_t)w1 << 16);
            wt[l][2 * j + 1] = ((uint32_t)wm & 0xFFFFu) | ((uint32_t)w0 << 16);
        }
    }
    for (int32_t nb = 0; nb < p->batches; nb++) {
        const int8_t *const img = in + nb * p->in_h * p->in_w * p->in_c;
        int8_t *const o = out + nb * p->out_h * p->out_w * oc;
        for (int32_t ia = 0; ia < a.n_out; ia++) {
            const int8_t *src = img + ia * a.stride * a.in_step + (clo - b.pad) * b.in_step + c0 / m;
            int16_t *d = plane + clo;
            if (m == 1 && nc == 4) {
                /* a single column where the line starts at an odd position, then pairs of columns a word
                 * a plane: their bytes paired first (channels 0 and 1 of both, 2 and 3), so that one
                 * SXTAB16 gives a channel's two columns with the offset added */
                int32_t i = 0;
                if (clo & 1 && ncols > 0) {
                    rlx_dw1_widen1(src, d, len, off2);
                    i = 1, src += b.in_step, d++;
                }
                for (; i + 2 <= ncols; i += 2, src += 2 * b.in_step, d += 2) {
                    const uint32_t x0 = rlx_rd32(src), x1 = rlx_rd32(src + b.in_step);
                    const uint32_t x01 = rlx_pack_lo16(x0, x1), x23 = rlx_pack_hi16(x0, x1);
                    rlx_wr32(d, rlx_sxtab16(off2, x01));
                    rlx_wr32(d + len, rlx_sxtab16_ror8(off2, x01));
                    rlx_wr32(d + 2 * len, rlx_sxtab16(off2, x23));
                    rlx_wr32(d + 3 * len, rlx_sxtab16_ror8(off2, x23));
                }
                if (i < ncols) {
                    rlx_dw1_widen1(src, d, len, off2);
                }
            } else {
                for (int32_t l = 0; l < nc; l++) {
                    const int8_t *sl = src + (c0 + l) / m - c0 / m;
                    int16_t *dl = d + l * len;
                    for (int32_t i = 0; i < ncols; i++, sl += b.in_step) {
                        dl[i] = (int16_t)(*sl + off);
                    }
                }
            }
            rlx_dw1_macs_any(plane, len, wt[0], np, b.n_out, b.stride, b2, acc, nc);
            int8_t *dst = o + ia * a.out_step + c0;
            if (fast) {
                rlx_dw1_rq_line(L, dst);
                continue;
            }
            /* a channel at a time, its constants in registers along the line, a pair of outputs (two
             * adjacent accumulators) a step */
            for (int32_t l = 0; l < nc; l++) {
                const int32_t mu = L->q->mae[3 * l], ad = L->q->mae[3 * l + 1], ex = rlx_rq_e(ad);
                const int32_t os = b.out_step, *al = acc + 2 * l;
                int8_t *dl = dst + l;
                int32_t t = 0;
#define RLX_DW1_OUT1(A, D, OUT)                                                   \
    do {                                                                          \
        const int32_t a_ = (A), v_ = (rlx_smmlar(a_, mu, ad) + (a_ >> 31)) >> ex; \
        *(D) = (int8_t)(OUT);                                                     \
    } while (0)
#define RLX_DW1_OUTS(OUT)                                                         \
    for (; t + 2 <= b.n_out; t += 2, al += 8, dl += 2 * os) {                     \
        RLX_DW1_OUT1(al[0], dl, OUT);                                             \
        RLX_DW1_OUT1(al[1], dl + os, OUT);                                        \
    }                                                                             \
    if (t < b.n_out) {                                                            \
        RLX_DW1_OUT1(al[0], dl, OUT);                                             \
    }
                if (sat) {
                    RLX_DW1_OUTS(rlx_sat8(v_));
                } else {
                    RLX_DW1_OUTS(rlx_clamp(v_, lo, hi));
                }
#undef RLX_DW1_OUTS
#undef RLX_DW1_OUT1
            }
        }
    }
}
#endif

void rlx_depthwise_conv_line_s8(const rlx_dw_conv_params *p, const int8_t *in, int8_t *out, int16_t *scratch)
{
#if RLX_USE_DSP
    if (p->rq_mode == 0) {
        rlx_depthwise_conv_ring_s8(p, in, out, scratch);
        return;
    }
    rlx_dw_walk g;
    rlx_dw_walk_of(p, scratch, &g); /* only its axes: b along the window, a (one tap) across */
    const rlx_dw_axis a = g.a, b = g.b;
    const int32_t oc = p->out_c, off = p->in_offset, np = b.k / 2 + 1;
    const int32_t wp = g.wp, len = (wp + 3) & ~1; /* a plane: the taps, one pair read past them */
    const int32_t clo = g.clo;
    int16_t *const plane = scratch;
    int32_t *const acc = (int32_t *)(void *)(plane + 4 * len); /* RLX_DW1_AIX */
    /* the padding, once a call (no widening writes it): a few halfwords a plane, stored in place (GCC made
     * each run a memset call, ~37 instructions; the empty asm keeps the loops) */
#if defined(__GNUC__)
#define RLX_DW1_KEEP __asm__("" ::: "memory")
#else
#define RLX_DW1_KEEP (void)0
#endif
    for (int32_t i = 0; i < clo; i++) {
        plane[i] = 0, plane[len + i] = 0, plane[2 * len + i] = 0, plane[3 * len + i] = 0;
        RLX_DW1_KEEP;
    }
    for (int32_t i = g.chi; i < len; i++) {
        plane[i] = 0, plane[len + i] = 0, plane[2 * len + i] = 0, plane[3 * len + i] = 0;
        RLX_DW1_KEEP;
    }
#undef RLX_DW1_KEEP
    uint32_t wt[4][2 * RLX_DW1_MAXP];
    const int32_t lo = p->act_min, hi = p->act_max;
    const int32_t rule = lo == -128 && hi == 127 ? 0 : lo < p->out_zp ? 1 : 2;
    /* the groups' rows (rules.py's _dw_line_consts) */
    const rlx_dw1_rq *const rows = (const rlx_dw1_rq *)(const void *)p->dwq;
    const int32_t ncols = g.chi - clo, lead = clo & 1 && ncols > 0;
    uint32_t fr[8];
    rlx_dw1_ln ln = {plane, len, clo, ncols, b.in_step, np, b.n_out, b.stride, b.out_step, rule, lead,
                     (ncols - lead) >> 1, (ncols - lead) & 1, b.stride == 1 && b.n_out >= 1 && np >= 2 && np <= 5,
                     fr, ((uint32_t)off & 0xFFFFu) | ((uint32_t)off << 16), wt, rows->b2, acc, rows, p, a, b};
#if defined(__ARM_FEATURE_DSP) && (__ARM_FEATURE_DSP == 1) && !defined(RLX_NO_ASM)
    rlx_dw1_frame(fr, b.n_out, np, len);
#endif
#if defined(RLX_DW1_RQ_ASM)
    /* a group's lines: steps from line to line, and from image to image past the last */
    const int32_t ist = a.stride * a.in_step, ost = a.out_step, nl = a.n_out;
    const int32_t ibs = p->in_h * p->in_w * p->in_c - nl * ist, obs = p->out_h * p->out_w * oc - nl * ost;
    const int8_t *const in0 = in + (clo - b.pad) * b.in_step;
    const int32_t lines = p->batches * nl, m1 = p->ch_mult == 1;
#endif
    for (int32_t c0 = 0; c0 < oc; c0 += 4) {
        const int32_t nc = oc - c0 < 4 ? oc - c0 : 4;
        ln.q = rows + c0 / 4, ln.b2 = ln.q->b2;
        /* fast: the group's outputs through rlx_dw1_rq_line */
        const int32_t fast = nc == 4 ? rlx_dw1_group4(&ln, c0) : 0;
#if defined(RLX_DW1_RQ_ASM)
        if (m1 && fast) {
            const int8_t *src = in0 + c0;
            int8_t *dst = out + c0;
            /* every line of every image: one loop (two cost ~20 instructions a group) */
            for (int32_t left = lines, ia = nl; left > 0; left--, src += ist, dst += ost) {
                rlx_dw1_line4(&ln, src, dst);
                if (--ia == 0) {
                    ia = nl, src += ibs, dst += obs;
                }
            }
            continue;
        }
#endif
        rlx_dw1_group_any(&ln, in, out, c0, nc, fast);
    }
#else
    rlx_depthwise_conv_ring_s8(p, in, out, scratch);
#endif
}
/* ---- one output pixel at a time, 4 channels of it at once (balanced, DSP cores) ----
 * The ring pays per group and output row (widened rows, a header per window row and pixel),
 * the pair kernel per channel and line; on small images and strided windows that is much of a
 * layer. Here nothing is widened ahead but the group's weights: a tap reads the input word of 4
 * channels straight from the HWC image (SXTAB16 adds the input offset as it widens two of
 * them), an LDM takes the tap's widened weights and its input's byte offset from a table in the
 * scratch, and 4 SMLABB/SMLATT accumulate: 8 instructions a tap of 4 channels. The pixels whose
 * windows lie inside the image run a row at a time in one asm block (per pixel: the bias, the
 * window's taps in one run whatever its rows, the requantization and one store of the 4
 * outputs); so do the pixels of a row clipped across the walk (from a copy of the table's rows
 * inside the image) and the classes of pixels clipped alike along it (a table each, where they
 * are many); the others a run per window row (padded taps skipped). Any window, stride,
 * dilation and padding; depth multiplier 2 reads a halfword of 2 input channels a tap; a last
 * partial group runs as the group ending at the last channel; multipliers above 2 and fewer
 * than 4 channels take the per-channel loop, cores without DSP the ring (the general kernel on
 * at most 4 pixels). Weights and bias are doubled with the fast requantization, as on the ring;
 * the biases and requantization of every group are laid out by rules.py (dwq). */
#if RLX_USE_DSP
/* The scratch, in words (rules.py's _dw_px_scratch): 3 unused, k, the group's 4 biases, then per
 * tap of the window (in the walk's order, rlx_dwp_axes) its weights (c0 c2), (c1 c3) and its
 * input's byte offset from the window's first pixel, then the group's requantization (rlx_dwp_rq),
 * then per output along the walk's b axis, then along a, the window taps [lo, hi) inside the image
 * (2 int16 each), then the tables of clipped windows (rlx_dwp_sub, rlx_dwp_classes). */
typedef struct {
    int32_t mae[12]; /* (mult, rq_add, right shift) of c0..c3: one LDM each */
    /* one LDM after them: a row run's input and output bytes between pixels, its output's end and the
     * table's address (32-bit targets) */
    uint32_t xstep, ostep, end, tab;
    uint32_t lohi[2]; /* act_min and act_max in every byte */
} rlx_dwp_rq;
typedef char rlx_dwp_rq_at[offsetof(rlx_dwp_rq, tab) == 60 && offsetof(rlx_dwp_rq, lohi) == 64 ? 1 : -1];
#define RLX_DWP_TAB 8 /* the table's first word: k and the biases before it */
/* a table's words: header, 3 a tap, the requantization */
#define RLX_DWP_SLOT(k) (RLX_DWP_TAB + 3 * (k) + (int32_t)(sizeof(rlx_dwp_rq) / 4))
/* the classes of windows clipped along b that get tables: at most 16, in 4 KB (rules.py) */
#define RLX_DWP_MAXCLS 16
#define RLX_DWP_CLS_BYTES 4096

#if defined(__ARM_FEATURE_DSP) && (__ARM_FEATURE_DSP == 1) && !defined(RLX_NO_ASM)
/* LDM fills registers in number order: the table's words (w02, w13, byte offset) are pinned */
#define RLX_DWP_TAP1                                      \
    "ldm     %[w]!, {%[wa], %[wb], %[xv]}\n\t"           \
    "ldr     %[xv], [%[x], %[xv]]\n\t"                    \
    "sxtab16 %[xt], %[o2], %[xv]\n\t"                     \
    "sxtab16 %[xv], %[o2], %[xv], ror #8\n\t"             \
    "smlabb  %[a0], %[xt], %[wa], %[a0]\n\t"              \
    "smlatt  %[a2], %[xt], %[wa], %[a2]\n\t"              \
    "smlabb  %[a1], %[xv], %[wb], %[a1]\n\t"              \
    "smlatt  %[a3], %[xv], %[wb], %[a3]\n\t"
/* depth multiplier 2: outputs c0, c1 read input channel c0 / 2 and c2, c3 the next, one
 * halfword h; SXTAB16 widens bytes 0 and 2 of h | h << 8 (as rlx_dw_row_m2) */
#define RLX_DWP_TAP2                                      \
    "ldm     %[w]!, {%[wa], %[wb], %[xv]}\n\t"           \
    "ldrh    %[xv], [%[x], %[xv]]\n\t"                    \
    "orr     %[xv], %[xv], %[xv], lsl #8\n\t"             \
    "sxtab16 %[xt], %[o2], %[xv]\n\t"                     \
    "smlabb  %[a0], %[xt], %[wa], %[a0]\n\t"              \
    "smlatt  %[a2], %[xt], %[wa], %[a2]\n\t"              \
    "smlabb  %[a1], %[xt], %[wb], %[a1]\n\t"              \
    "smlatt  %[a3], %[xt], %[wb], %[a3]\n\t"
/* n taps: one if n is odd, two if bit 1 is set, then four an iteration (the taps keep the flags of
 * LSRS: 9 taps 7 instructions of loop, 25 taps 11, 49 taps 17) */
#define RLX_DWP_RUN(TAP)                                  \
    "lsrs    %[n], %[n], #1\n\t"                          \
    "bcc     2f\n\t" TAP "2:\n\t"                         \
    "lsrs    %[n], %[n], #1\n\t"                          \
    "bcc     4f\n\t" TAP TAP "4:\n\t"                     \
    "beq     3f\n\t"                                      \
    "1:\n\t" TAP TAP TAP TAP                              \
    "subs    %[n], %[n], #1\n\t"                          \
    "bne     1b\n\t"                                      \
    "3:\n\t"
/* One output of the doubled accumulator A (rlx_rq_fast without its shift of acc), its multiplier, add
 * and shift the 3 words at w (one LDM, w advanced): C with the sign correction (acc >> 31), N without,
 * which is exact where the clamp's low end is at or above out_zp: for acc < 0 both forms give at most
 * out_zp (the rounded product is at most 0), which the clamp raises to act_min. */
#define RLX_DWP_RQ1C(A)                                   \
    "ldmia   %[w]!, {%[wa], %[wb], %[xv]}\n\t"           \
    "smmlar  %[wa], %[" A "], %[wa], %[wb]\n\t"          \
    "add     %[" A "], %[wa], %[" A "], asr #31\n\t"     \
    "asr     %[" A "], %[" A "], %[xv]\n\t"              \
    "ssat    %[" A "], #8, %[" A "]\n\t"
#define RLX_DWP_RQ1N(A)                                   \
    "ldmia   %[w]!, {%[wa], %[wb], %[xv]}\n\t"           \
    "smmlar  %[wa], %[" A "], %[wa], %[wb]\n\t"          \
    "asr     %[" A "], %[wa], %[xv]\n\t"                 \
    "ssat    %[" A "], #8, %[" A "]\n\t"
/* the 4 outputs, rlx_dwp_rq at w (w advanced past mae), packed; CLAMP: a byte-wise max and min
 * (SSUB8 sets GE, SEL picks; lohi 16 bytes on); one store */
#define RLX_DWP_RQ4(RQ1, CLAMP)                                                                     \
    RQ1("a0") RQ1("a1") RQ1("a2") RQ1("a3") "bfi     %[a0], %[a1], #8, #8\n\t"                     \
                                            "bfi     %[a0], %[a2], #16, #8\n\t"                    \
                                            "bfi     %[a0], %[a3], #24, #8\n\t" CLAMP              \
                                            "str     %[a0], [%[dst]]\n\t"
/* the output rules: saturating, clamped, clamped without the sign correction */
#define RLX_DWP_SAT RLX_DWP_RQ4(RLX_DWP_RQ1C, "")
#define RLX_DWP_CLAMPC RLX_DWP_RQ4(RLX_DWP_RQ1C, RLX_DWP_CLAMP)
#define RLX_DWP_CLAMPN RLX_DWP_RQ4(RLX_DWP_RQ1N, RLX_DWP_CLAMP)
#define RLX_DWP_CLAMP                                     \
    "ldrd    %[wa], %[wb], [%[w], #16]\n\t"               \
    "ssub8   %[xv], %[a0], %[wa]\n\t"                     \
    "sel     %[a0], %[a0], %[wa]\n\t"                     \
    "ssub8   %[xv], %[wb], %[a0]\n\t"                     \
    "sel     %[a0], %[a0], %[wb]\n\t"
#define RLX_DWP_REGS register uint32_t wa_ __asm__("r8"), wb_ __asm__("r9"), xv_ __asm__("r10")
/* Pixels along b on an output row, the table at T, from the window at X and the output at D on (both
 * advanced): per pixel k and the bias (the 5 words before the table), the k taps, then (at the
 * table's end: the requantization) the 4 outputs, then one LDM of the input and output bytes between
 * pixels, the run's end and the table's address (after the requantization's mae). */
#define RLX_DWP_ROW(T, X, D, RQ, TAP)                                                                          \
    do {                                                                                                      \
        RLX_DWP_REGS;                                                                                         \
        /* LDMDB: k and the 4 biases, in number order; LDM: wa, wb, xv, then w (r12) */                      \
        register uint32_t n_ __asm__("r2");                                                                   \
        register int32_t a0 __asm__("r3"), a1 __asm__("r4"), a2 __asm__("r5"), a3 __asm__("r6");              \
        register const uint32_t *w_ __asm__("r12") = (T);                                                     \
        uint32_t xt_;                                                                                         \
        __asm__ volatile("0:\n\t"                                                                             \
                         "ldmdb   %[w], {%[n], %[a0], %[a1], %[a2], %[a3]}\n\t" RLX_DWP_RUN(TAP) RQ         \
                         "ldm     %[w], {%[wa], %[wb], %[xv], %[w]}\n\t"                                      \
                         "add     %[x], %[x], %[wa]\n\t"                                                      \
                         "add     %[dst], %[dst], %[wb]\n\t"                                                  \
                         "cmp     %[dst], %[xv]\n\t"                                                          \
                         "bne     0b\n\t"                                                                     \
                         : [a0] "=&r"(a0), [a1] "=&r"(a1), [a2] "=&r"(a2), [a3] "=&r"(a3), [w] "+r"(w_),      \
                           [n] "=&r"(n_), [wa] "=&r"(wa_), [wb] "=&r"(wb_), [xv] "=&r"(xv_), [xt] "=&r"(xt_), \
                           [x] "+r"(X), [dst] "+r"(D)                                                         \
                         : [o2] "r"(off2)                                                                     \
                         : "memory", "cc");                                                                   \
    } while (0)
/* the 4 outputs of a0..a3 to D, the requantization at Q, by the rule RQ */
#define RLX_DWP_OUT(Q, D, RQ)                                                                                 \
    do {                                                                                                      \
        RLX_DWP_REGS;                                                                                         \
        const void *q_ = (Q);                                                                                 \
        __asm__ volatile(RQ                                                                                   \
                         : [a0] "+r"(a0), [a1] "+r"(a1), [a2] "+r"(a2), [a3] "+r"(a3), [wa] "=&r"(wa_),       \
                           [wb] "=&r"(wb_), [xv] "=&r"(xv_), [w] "+r"(q_)                                     \
                         : [dst] "r"(D)                                                                       \
                         : "memory");                                                                         \
    } while (0)
/* N taps from the table at W, the window at X */
#define RLX_DWP_TAPS(X, W, N, TAP)                                                                            \
    do {                                                                                                      \
        RLX_DWP_REGS;                                                                                         \
        uint32_t xt_, n_ = (uint32_t)(N);                                                                     \
        const uint32_t *w_ = (W);                                                                             \
        __asm__ volatile(RLX_DWP_RUN(TAP)                                                                     \
                         : [a0] "+r"(a0), [a1] "+r"(a1), [a2] "+r"(a2), [a3] "+r"(a3), [w] "+r"(w_),          \
                           [n] "+r"(n_), [wa] "=&r"(wa_), [wb] "=&r"(wb_), [xv] "=&r"(xv_), [xt] "=&r"(xt_)   \
                         : [x] "r"(X), [o2] "r"(off2)                                                         \
                         : "memory", "cc");                                                                   \
    } while (0)
#else
#define RLX_DWP_TAP1 1
#define RLX_DWP_TAP2 2
#define RLX_DWP_TAPS(X, W, N, TAP)                                                                            \
    do {                                                                                                      \
        const uint32_t *w_ = (W);                                                                             \
        for (int32_t n_ = (N); n_ > 0; n_--, w_ += 3) {                                                       \
            const int8_t *xp_ = (const int8_t *)(X) + (int32_t)w_[2];                                         \
            const uint32_t h_ = (uint32_t)(uint8_t)xp_[0] * 0x101u | (uint32_t)(uint8_t)xp_[1] << 16;         \
            const uint32_t xv_ = (TAP) == 1 ? rlx_rd32(xp_) : h_;                                             \
            const uint32_t x02_ = rlx_sxtab16(off2, xv_);                                                     \
            const uint32_t x13_ = (TAP) == 1 ? rlx_sxtab16_ror8(off2, xv_) : x02_;                            \
            a0 = rlx_smlabb(x02_, w_[0], a0);                                                                 \
            a2 = rlx_smlatt(x02_, w_[0], a2);                                                                 \
            a1 = rlx_smlabb(x13_, w_[1], a1);                                                                 \
            a3 = rlx_smlatt(x13_, w_[1], a3);                                                                 \
        }                                                                                                     \
    } while (0)
#endif

/* The walk: pixels run along axis b (the output's longer one), rows of them along a; tap
 * (ia, ib) of the window is entry ia * b.k + ib of the table. */
typedef struct {
    rlx_dw_axis a, b;
    int32_t swap;           /* a is W, b is H */
    int32_t run_lo, run_hi; /* the pixels whose windows are whole along b */
    int32_t ncls;           /* the tables of windows clipped along b only (rlx_dwp_classes) */
    const int8_t *cls;      /* per output along b: its class (its table), -1 whole, -2 none */
    int16_t kb[2 * RLX_DWP_MAXCLS]; /* per class: its window taps [lo, hi) along b */
    uint32_t *slots;        /* the class tables, RLX_DWP_SLOT words each */
} rlx_dwp_axes;

/* The outputs along b whose windows it clips (bounds cols, window k) in classes of equal taps, numbered
 * as they first come (cls: a class, -1 whole), with the taps of each (kb); their number, or 0 where
 * there are more than RLX_DWP_MAXCLS or their tables (slot bytes each) take more than
 * RLX_DWP_CLS_BYTES (cls then -2: per window row), as rules.py's _dw_px_classes counts them. A class
 * of fewer than 8 pixels in the rows whole along a (rows of them) keeps no table (-2): its table's copy
 * costs about what running them from one saves (M4 sweep: 3x3 10x10x7 x2 s2, 4 pixels a class, 5.04
 * instructions/MAC without, 5.14 with). At most cap tables: the scratch's (rules.py's count, dwq[0]). */
static int32_t rlx_dwp_classes(const int16_t *cols, int32_t n, int32_t k, int32_t slot, int32_t rows, int32_t cap,
                               int8_t *cls, int16_t *kb)
{
    int32_t ncls = 0, over = 0, occ[RLX_DWP_MAXCLS], keep[RLX_DWP_MAXCLS];
    for (int32_t i = 0; i < n; i++) {
        const int16_t lo = cols[2 * i], hi = cols[2 * i + 1];
        int32_t c = 0;
        if (hi - lo == k) {
            cls[i] = -1;
            continue;
        }
        while (c < ncls && (kb[2 * c] != lo || kb[2 * c + 1] != hi)) {
            c++;
        }
        if (c == ncls && ncls < RLX_DWP_MAXCLS) {
            kb[2 * c] = lo;
            kb[2 * c + 1] = hi;
            occ[c] = 0;
            ncls++;
        }
        over |= c == RLX_DWP_MAXCLS;
        occ[c < RLX_DWP_MAXCLS ? c : 0]++;
        cls[i] = (int8_t)c;
    }
    over |= ncls * slot > RLX_DWP_CLS_BYTES;
    /* the classes kept, renumbered in order */
    int32_t m = 0;
    for (int32_t c = 0; c < ncls; c++) {
        keep[c] = !over && occ[c] * rows >= 8 && m < cap ? m++ : -2;
        if (keep[c] >= 0) {
            kb[2 * keep[c]] = kb[2 * c];
            kb[2 * keep[c] + 1] = kb[2 * c + 1];
        }
    }
    for (int32_t i = 0; i < n; i++) {
        cls[i] = (int8_t)(cls[i] < 0 ? cls[i] : cls[i] < ncls ? keep[cls[i]] : -2);
    }
    return m;
}

/* the window taps [lo, hi) inside the image of output i along axis x (int16 pairs, rlx_dw_taps) */
RLX_INLINE void rlx_dwp_bounds(const rlx_dw_axis *x, int16_t *d)
{
    for (int32_t i = 0; i < x->n_out; i++) {
        int32_t lo, hi;
        rlx_dw_taps(i, x->stride, x->pad, x->dil, x->k, x->n_in, &lo, &hi);
        d[2 * i] = (int16_t)lo;
        d[2 * i + 1] = (int16_t)hi;
    }
}

#if defined(RLX_DWP_ROW)
/* n > 0 words from src to d, 4 an LDM/STM pair: up to 3 words more either way, which the caller's
 * layout leaves room for (a copy C compilers make a loop of single words, or a libc call); the
 * registers pinned in ascending order, as LDM fills them */
RLX_INLINE void rlx_dwp_copy(uint32_t *d, const uint32_t *src, int32_t n)
{
    register uint32_t t0 __asm__("r2"), t1 __asm__("r3"), t2 __asm__("r12"), t3 __asm__("lr");
    __asm__ volatile("1:\n\t"
                     "ldmia   %[s]!, {%[t0], %[t1], %[t2], %[t3]}\n\t"
                     "stmia   %[d]!, {%[t0], %[t1], %[t2], %[t3]}\n\t"
                     "subs    %[n], %[n], #4\n\t"
                     "bgt     1b\n\t"
                     : [d] "+r"(d), [s] "+r"(src), [n] "+r"(n), [t0] "=&r"(t0), [t1] "=&r"(t1), [t2] "=&r"(t2),
                       [t3] "=&r"(t3)
                     :
                     : "memory", "cc");
}

/* The table of the window taps [ka0, ka1) x [kb0, kb1) at sub, for windows clipped along a (an output row
 * of them) or along b only (a class, rlx_dwp_classes), which then run as the whole ones: its header (k,
 * the biases), those taps as they are (their input offsets are from the window's first pixel, clipped
 * or not) and the requantization, with the copy's address. */
static RLX_NOINLINE_DW void rlx_dwp_sub(const uint32_t *s, uint32_t *sub, int32_t ka0, int32_t ka1, int32_t kb0,
                                        int32_t kb1, int32_t bk, int32_t k)
{
    const int32_t nb = kb1 - kb0, n = 3 * (ka1 - ka0) * nb;
    uint32_t *const d = sub + RLX_DWP_TAB;
    /* the taps first, row by row where clipped along b: the words past a row, which the copy may
     * write, are the next row's or the requantization's */
    if (nb == bk && n > 0) {
        rlx_dwp_copy(d, s + RLX_DWP_TAB + 3 * ka0 * bk, n);
    } else if (nb > 0) {
        for (int32_t ia = ka0; ia < ka1; ia++) {
            rlx_dwp_copy(d + 3 * (ia - ka0) * nb, s + RLX_DWP_TAB + 3 * (ia * bk + kb0), 3 * nb);
        }
    }
    /* the requantization: 16 words (mae to tab), then lohi; the copy's own address */
    rlx_dwp_rq *const q = (rlx_dwp_rq *)(void *)(d + n);
    const rlx_dwp_rq *const q0 = (const rlx_dwp_rq *)(const void *)(s + RLX_DWP_TAB + 3 * k);
    rlx_dwp_copy((uint32_t *)(void *)q, (const uint32_t *)(const void *)q0, 16);
    q->lohi[0] = q0->lohi[0];
    q->lohi[1] = q0->lohi[1];
    q->tab = (uint32_t)(uintptr_t)d;
    rlx_dwp_copy(sub, s, RLX_DWP_TAB);
    sub[3] = (uint32_t)((ka1 - ka0) * nb);
}
#endif

/* All pixels of the group of channels [c0, c0 + 4) of one image; s: the scratch; M2: depth multiplier 2. */
RLX_INLINE void rlx_dwp_group(const rlx_dw_conv_params *p, const rlx_dwp_axes *g, uint32_t *s, const int8_t *img,
                              int8_t *out, int32_t c0, const int32_t m2)
{
    const rlx_dw_axis a = g->a, b = g->b;
    const int32_t oc = p->out_c, k = p->k_h * p->k_w, bk = b.k;
    const int32_t fast = p->rq_mode != 0, sat = p->rq_mode == 2, lo = p->act_min, hi = p->act_max;
    const int32_t corr = lo < p->out_zp; /* the clamp's sign correction (RLX_DWP_RQ1N) */
    const uint32_t off2 = ((uint32_t)p->in_offset & 0xFFFFu) | ((uint32_t)p->in_offset << 16);
    uint32_t *const tab = s + RLX_DWP_TAB;
    rlx_dwp_rq *const gk = (rlx_dwp_rq *)(void *)(tab + 3 * k);
    /* the table's weights: tap (ia, ib) is weight row ia * sa + ib * sb; doubled (fast) by adding
     * each half's SXTB16 to itself (SXTAB16), which keeps the halves apart */
    {
        const int32_t sb = g->swap ? p->k_w * oc : oc, sa = g->swap ? oc : p->k_w * oc;
        const int8_t *wr = p->weights + c0;
        uint32_t *e = tab;
        for (int32_t ia = 0; ia < a.k; ia++, wr += sa) {
            const int8_t *wp = wr;
            if (fast) {
                for (int32_t ib = 0; ib < bk; ib++, wp += sb, e += 3) {
                    const uint32_t wv = rlx_rd32(wp);
                    e[0] = rlx_sxtab16(rlx_sxtb16(wv), wv);
                    e[1] = rlx_sxtab16_ror8(rlx_sxtb16_ror8(wv), wv);
                }
            } else {
                for (int32_t ib = 0; ib < bk; ib++, wp += sb, e += 3) {
                    const uint32_t wv = rlx_rd32(wp);
                    e[0] = rlx_sxtb16(wv);
                    e[1] = rlx_sxtb16_ror8(wv);
                }
            }
        }
    }
    /* the group's biases and requantization, laid out by rules.py (dwq: 16 words a group after 4) */
    {
        const int32_t *const q = p->dwq + 4 + 16 * ((c0 + 3) / 4);
#if defined(RLX_DWP_ROW)
        rlx_dwp_copy(s + 4, (const uint32_t *)(const void *)q, 4);
        rlx_dwp_copy((uint32_t *)(void *)gk->mae, (const uint32_t *)(const void *)(q + 4), 12);
#else
        for (int32_t i = 0; i < 4; i++) {
            s[4 + i] = (uint32_t)q[i];
        }
        for (int32_t i = 0; i < 12; i++) {
            gk->mae[i] = q[4 + i];
        }
#endif
    }
    const int16_t *const cols = (const int16_t *)(const void *)(gk + 1), *const rows = cols + 2 * b.n_out;
    const uintptr_t xstep = (uintptr_t)(b.stride * b.in_step);
    const uintptr_t x00 = (uintptr_t)(img + (m2 ? c0 / 2 : c0)) - (uintptr_t)(b.pad * b.in_step + a.pad * a.in_step);
    const rlx_rq_params rq = RLX_DW_RQ(p);
    const int32_t run_lo = g->run_lo, run_hi = g->run_hi;
#if defined(RLX_DWP_ROW)
    /* the table of the last clipped rows along a (rlx_dwp_sub), after the bounds; the tables of the
     * windows clipped along b only, one a class, the group's weights copied into them here */
    uint32_t *const sub = (uint32_t *)(void *)(uintptr_t)(rows + 2 * a.n_out);
    int32_t sub_lo = -1, sub_hi = -1;
    const int8_t *const cls = g->cls;
    const int32_t ncls = fast ? g->ncls : 0;
    for (int32_t i = 0; i < ncls; i++) {
        rlx_dwp_sub(s, g->slots + RLX_DWP_SLOT(k) * i, 0, a.k, g->kb[2 * i], g->kb[2 * i + 1], bk, k);
    }
#else
    (void)run_lo;
    (void)run_hi;
#endif
    for (int32_t oa = 0; oa < a.n_out; oa++) {
        const int32_t ka0 = rows[2 * oa], ka1 = rows[2 * oa + 1];
        /* the window's first pixel, as an address: it may lie in the padding */
        uintptr_t x = x00 + (uintptr_t)(oa * a.stride * a.in_step);
        int8_t *dst = out + c0 + oa * a.out_step;
        for (int32_t ob = 0; ob < b.n_out; ob++, x += xstep, dst += b.out_step) {
#if defined(RLX_DWP_ROW)
            /* the pixels from ob on that share a table: the windows whole along b (from the table, or
             * from a copy of the rows inside the image where the row is clipped along a), or a run
             * of one class clipped along b only */
            uint32_t *t = NULL;
            int32_t ob2 = ob + 1;
            if (ob == run_lo && fast) {
                ob2 = run_hi;
                t = tab;
                if (ka1 - ka0 != a.k) {
                    t = sub + RLX_DWP_TAB;
                    if (ka0 != sub_lo || ka1 != sub_hi) {
                        rlx_dwp_sub(s, sub, ka0, ka1, 0, bk, bk, k);
                        sub_lo = ka0;
                        sub_hi = ka1;
                    }
                }
            } else if (ncls > 0 && ka1 - ka0 == a.k && cls[ob] >= 0) {
                while (ob2 < b.n_out && cls[ob2] == cls[ob]) {
                    ob2++;
                }
                t = g->slots + RLX_DWP_SLOT(k) * cls[ob] + RLX_DWP_TAB;
            }
            if (t != NULL) {
                /* the run's end, in the table's requantization (k words before it) */
                ((rlx_dwp_rq *)(void *)(t + 3 * t[-5]))->end = (uint32_t)(uintptr_t)(dst + (ob2 - ob) * b.out_step);
                if (m2) {
                    if (sat) {
                        RLX_DWP_ROW(t, x, dst, RLX_DWP_SAT, RLX_DWP_TAP2);
                    } else if (corr) {
                        RLX_DWP_ROW(t, x, dst, RLX_DWP_CLAMPC, RLX_DWP_TAP2);
                    } else {
                        RLX_DWP_ROW(t, x, dst, RLX_DWP_CLAMPN, RLX_DWP_TAP2);
                    }
                } else if (sat) {
                    RLX_DWP_ROW(t, x, dst, RLX_DWP_SAT, RLX_DWP_TAP1);
                } else if (corr) {
                    RLX_DWP_ROW(t, x, dst, RLX_DWP_CLAMPC, RLX_DWP_TAP1);
                } else {
                    RLX_DWP_ROW(t, x, dst, RLX_DWP_CLAMPN, RLX_DWP_TAP1);
                }
                /* the loop's step follows */
                ob = ob2 - 1;
                x -= xstep;
                dst -= b.out_step;
                continue;
            }
#else
            (void)corr;
#endif
            const int32_t kb0 = cols[2 * ob], nb = cols[2 * ob + 1] - kb0;
            int32_t a0 = (int32_t)s[4], a1 = (int32_t)s[5], a2 = (int32_t)s[6], a3 = (int32_t)s[7];
            const uint32_t *w = tab + 3 * (ka0 * bk + kb0);
            for (int32_t r = ka0; r < ka1; r++, w += 3 * bk) {
                if (m2) {
                    RLX_DWP_TAPS(x, w, nb, RLX_DWP_TAP2);
                } else {
                    RLX_DWP_TAPS(x, w, nb, RLX_DWP_TAP1);
                }
            }
#if defined(RLX_DWP_OUT)
            if (fast) {
                if (sat) {
                    RLX_DWP_OUT(gk, dst, RLX_DWP_SAT);
                } else if (corr) {
                    RLX_DWP_OUT(gk, dst, RLX_DWP_CLAMPC);
                } else {
                    RLX_DWP_OUT(gk, dst, RLX_DWP_CLAMPN);
                }
                continue;
            }
#endif
            const int32_t acc[4] = {a0, a1, a2, a3};
            for (int32_t i = 0; i < 4; i++) {
                const int32_t *const mae = gk->mae + 3 * i;
                const int32_t a = acc[i], v = (rlx_smmlar(a, mae[0], mae[1]) + (a >> 31)) >> mae[2];
                dst[i] = (int8_t)(!fast ? rlx_rq_out(&rq, a, c0 + i) : sat ? rlx_sat8(v) : rlx_clamp(v, lo, hi));
            }
        }
    }
}

/* one instance per multiplier, so that each keeps its registers */
static RLX_NOINLINE_DW void rlx_dwp_group1(const rlx_dw_conv_params *p, const rlx_dwp_axes *g, uint32_t *s,
                                           const int8_t *img, int8_t *out, int32_t c0)
{
    rlx_dwp_group(p, g, s, img, out, c0, 0);
}

static RLX_NOINLINE_DW void rlx_dwp_group2(const rlx_dw_conv_params *p, const rlx_dwp_axes *g, uint32_t *s,
                                           const int8_t *img, int8_t *out, int32_t c0)
{
    rlx_dwp_group(p, g, s, img, out, c0, 1);
}

/* Channels [c0, out_c) of one image one at a time (any depth multiplier); s: the scratch. */
static void rlx_dwp_channels(const rlx_dw_conv_params *p, const rlx_dwp_axes *g, const uint32_t *s,
                             const int8_t *img, int8_t *out, int32_t c0)
{
    const rlx_dw_axis a = g->a, b = g->b;
    const int32_t oc = p->out_c, m = p->ch_mult, kw = p->k_w, k = p->k_h * kw, off = p->in_offset;
    const int32_t swap = g->swap;
    const rlx_rq_params rq = RLX_DW_RQ(p);
    const uint32_t *const tab = s + RLX_DWP_TAB;
    const int16_t *const cols = (const int16_t *)(const void *)((const rlx_dwp_rq *)(const void *)(tab + 3 * k) + 1);
    const int16_t *const rows = cols + 2 * b.n_out;
    for (int32_t oa = 0; oa < a.n_out; oa++) {
        for (int32_t ob = 0; ob < b.n_out; ob++) {
            const int32_t x0 = (oa * a.stride - a.pad) * a.in_step + (ob * b.stride - b.pad) * b.in_step;
            int8_t *const dst = out + oa * a.out_step + ob * b.out_step;
            for (int32_t c = c0; c < oc; c++) {
                int32_t acc = p->bias[c];
                for (int32_t ia = rows[2 * oa]; ia < rows[2 * oa + 1]; ia++) {
                    for (int32_t ib = cols[2 * ob]; ib < cols[2 * ob + 1]; ib++) {
                        const int32_t t = ia * b.k + ib, ky = swap ? ib : ia, kx = swap ? ia : ib;
                        acc += (img[x0 + (int32_t)tab[3 * t + 2] + c / m] + off) * p->weights[(ky * kw + kx) * oc + c];
                    }
                }
                dst[c] = (int8_t)rlx_rq_out(&rq, acc, c);
            }
        }
    }
}
#endif

void rlx_depthwise_conv_px_s8(const rlx_dw_conv_params *p, const int8_t *in, int8_t *out, int16_t *scratch)
{
#if RLX_USE_DSP
    const int32_t ic = p->in_c, oc = p->out_c, k = p->k_h * p->k_w;
    const rlx_dw_axis h = {p->out_h, p->in_h, p->k_h, p->stride_h, p->dil_h, p->pad_top, p->in_w * ic, p->out_w * oc};
    const rlx_dw_axis w = {p->out_w, p->in_w, p->k_w, p->stride_w, p->dil_w, p->pad_left, ic, oc};
    /* pixels run along the output's longer axis (a tall image such as KWS's 25x5 by columns; a 1-D
     * window on a tie, across itself): an output row clipped along a runs from a copy of its window
     * rows (rlx_dwp_sub), a pixel clipped along b per window row, which costs more per pixel (M4
     * sweep, instructions/MAC with H or W: 1x9 24x4x16 2.41 or 3.97, 9x1 24x4x16 3.81 or 3.99) */
    const int32_t swap = p->out_w < p->out_h || (p->out_w == p->out_h && p->k_h == 1 && p->k_w > 1);
    rlx_dwp_axes g;
    g.a = swap ? w : h;
    g.b = swap ? h : w;
    g.swap = swap;
    uint32_t *const s = (uint32_t *)(void *)scratch, *const tab = s + RLX_DWP_TAB;
    rlx_dwp_rq *const gk = (rlx_dwp_rq *)(void *)(tab + 3 * k);
    int16_t *const cols = (int16_t *)(void *)(gk + 1);
    rlx_dwp_bounds(&g.b, cols);
    rlx_dwp_bounds(&g.a, cols + 2 * g.b.n_out);
    int32_t lo = 0, hi = g.b.n_out;
    while (lo < hi && cols[2 * lo + 1] - cols[2 * lo] != g.b.k) {
        lo++;
    }
    while (hi > lo && cols[2 * hi - 1] - cols[2 * hi - 2] != g.b.k) {
        hi--;
    }
    g.run_lo = lo;
    g.run_hi = hi;
    /* past the bounds: the table of an output row's rows inside the image (rlx_dwp_group's sub), the
     * class of each output along b, the classes' tables */
    uint32_t *const sub = (uint32_t *)(void *)(cols + 2 * (g.b.n_out + g.a.n_out));
    int8_t *const cls = (int8_t *)(void *)(sub + RLX_DWP_SLOT(k));
    g.cls = cls;
    g.slots = (uint32_t *)(void *)(cls + ((g.b.n_out + 3) & ~3));
    g.ncls = 0;
    if (lo > 0 || hi < g.b.n_out) {
        /* (cls is read only where there are classes) */
        int32_t whole_a = 0;
        for (int32_t i = 0; i < g.a.n_out; i++) {
            whole_a += cols[2 * (g.b.n_out + i) + 1] - cols[2 * (g.b.n_out + i)] == g.a.k;
        }
        g.ncls = rlx_dwp_classes(cols, g.b.n_out, g.b.k, 4 * RLX_DWP_SLOT(k), whole_a, p->dwq[0], cls, g.kb);
    }
    /* a row run's constants and the requantization's that every group shares */
    gk->xstep = (uint32_t)(g.b.stride * g.b.in_step);
    gk->ostep = (uint32_t)g.b.out_step;
    s[3] = (uint32_t)k;
    gk->lohi[0] = 0x01010101u * (uint8_t)p->act_min;
    gk->lohi[1] = 0x01010101u * (uint8_t)p->act_max;
    gk->tab = (uint32_t)(uintptr_t)tab;
    for (int32_t t = 0; t < k; t++) {
        tab[3 * t + 2] = (uint32_t)((t / g.b.k) * g.a.dil * g.a.in_step + (t % g.b.k) * g.b.dil * g.b.in_step);
    }
    /* groups of 4 with depth multiplier 1 or 2; the channels past the last whole group as the
     * group ending at the last channel, which writes its first ones again with the same values
     * (a partial group's word would read past the image and store past the pixel) */
    const int32_t groups = p->ch_mult <= 2 && oc >= 4 ? (oc + 3) / 4 : 0;
    for (int32_t n = 0; n < p->batches; n++) {
        const int8_t *const img = in + n * p->in_h * p->in_w * ic;
        int8_t *const o = out + n * p->out_h * p->out_w * oc;
        for (int32_t i = 0; i < groups; i++) {
            const int32_t c0 = 4 * i + 4 <= oc ? 4 * i : oc - 4;
            if (p->ch_mult == 2) {
                rlx_dwp_group2(p, &g, s, img, o, c0);
            } else {
                rlx_dwp_group1(p, &g, s, img, o, c0);
            }
        }
        if (groups == 0) {
            rlx_dwp_channels(p, &g, s, img, o, 0);
        }
    }
#else
    /* the kernels the rule takes for such layers otherwise (its scratch is the larger of the two) */
    if (p->out_h * p->out_w <= 4) {
        rlx_depthwise_conv_s8(p, in, out);
    } else {
        rlx_depthwise_conv_ring_s8(p, in, out, scratch);
    }
#endif
}
#undef RLX_DWP_TAPS
#undef RLX_DWP_TAB
#undef RLX_DWP_TAP1
#undef RLX_DWP_TAP2
#ifdef RLX_DWP_RUN
#undef RLX_DWP_RUN
#undef RLX_DWP_RQ1C
#undef RLX_DWP_RQ1N
#undef RLX_DWP_RQ4
#undef RLX_DWP_SAT
#undef RLX_DWP_CLAMPC
#undef RLX_DWP_CLAMPN
#undef RLX_DWP_CLAMP
#undef RLX_DWP_REGS
#undef RLX_DWP_ROW
#undef RLX_DWP_OUT
#endif
#ifdef RLX_DWR_MAC
#undef RLX_DWR_MAC
#undef RLX_DWR_ROWS
#undef RLX_DWR_OPS
#undef RLX_DWR_RQ1
#undef RLX_DWR_RQ4_ASM
#undef RLX_DW_RQ1
#undef RLX_DW_RQ4
#undef RLX_DWR_RQ4_OUT
#undef RLX_DWR_CLAMP
#else
#undef RLX_DW_TAP1
#endif
#undef RLX_DW_PX

#ifdef RLX_DW_ASM_TAP
#undef RLX_DW_ASM_TAP
#endif
#ifdef RLX_DW2_TAP
#undef RLX_DW2_TAP
#undef RLX_DW2_OPS
#endif
#undef RLX_DW_PIXEL
#undef RLX_DW_RTAP
#ifdef RLX_DW_ATAP
#undef RLX_DW_ATAP
#endif
#undef RLX_DW_FAST
#undef RLX_DW_OUT
