/*
 * Convolution and fully connected layers: one int8 GEMM core.
 *
 * The receptive field of each output pixel is first written, widened to
 * int16, into the scratch buffer (im2col for general kernels, a plain
 * widening copy for 1x1 and fully connected), two pixels interleaved. The
 * GEMM then produces a block of 4 output channels x 2 pixels per pass over
 * the reduction: each weight word loaded serves two pixels, each input word
 * four channels.
 *
 * Scratch layout (int16), per quad q of 4 reduction elements, for pixels
 * a and b:   [a0 a2 b0 b2 a1 a3 b1 b3]
 * i.e. the word pairs SXTB16 (bytes 0, 2) and SXTB16 ROR 8 (bytes 1, 3) give
 * for a weight word, with both pixels' pairs adjacent so that one LDRD
 * fetches them.
 */
#include "rlx_nn.h"
#include "rlx_nn_support.h"

#if defined(__ARM_FEATURE_DSP) && (__ARM_FEATURE_DSP == 1) && !defined(RLX_NO_ASM)
#define RLX_GEMM_ASM 1
#else
#define RLX_GEMM_ASM 0
#endif

/* int16 index of reduction element k of pixel slot s (0: a, 1: b) */
RLX_INLINE int32_t rlx_slot(int32_t k, int32_t s)
{
    return 8 * (k >> 2) + ((k & 1) ? 4 : 0) + 2 * s + ((k >> 1) & 1);
}

RLX_INLINE int8_t rlx_finish(int32_t acc, int32_t mult, int32_t shift, const rlx_gemm_params *g)
{
    return (int8_t)rlx_clamp(rlx_requantize(acc, mult, shift) + g->out_zp, g->act_min, g->act_max);
}

/* Widen n int8 values of pixel slot s; the tail of the last quad is zero
 * (its weights are zero too, the value only has to be defined). */
static void rlx_widen_row(const int8_t *src, int32_t n, int16_t *dst, int32_t k_quads, int32_t s)
{
    int32_t k = 0;
#if RLX_USE_DSP
    for (; k + 4 <= n; k += 4) {
        const uint32_t w = rlx_rd32(src + k);
        rlx_wr32(dst + 2 * k + 2 * s, rlx_sxtb16(w));          /* x0, x2 */
        rlx_wr32(dst + 2 * k + 4 + 2 * s, rlx_sxtb16_ror8(w)); /* x1, x3 */
    }
#endif
    for (; k < n; k++) {
        dst[rlx_slot(k, s)] = src[k];
    }
    for (; k < k_quads * 4; k++) {
        dst[rlx_slot(k, s)] = 0;
    }
}

/* im2col of one output pixel: taps in (kh, kw, c) order; padded taps hold
 * the input zero point, so that the folded bias cancels them exactly. */
static void rlx_im2col_pixel(const rlx_conv_params *p, const int8_t *img, int32_t oy, int32_t ox, int16_t *dst,
                             int32_t s)
{
    const int32_t c = p->in_c;
    int32_t k = 0;
    for (int32_t i = 0; i < p->k_h; i++) {
        const int32_t iy = oy * p->stride_h - p->pad_top + i * p->dil_h;
        for (int32_t j = 0; j < p->k_w; j++) {
            const int32_t ix = ox * p->stride_w - p->pad_left + j * p->dil_w;
            if (iy < 0 || iy >= p->in_h || ix < 0 || ix >= p->in_w) {
                for (int32_t ch = 0; ch < c; ch++, k++) {
                    dst[rlx_slot(k, s)] = (int16_t)p->in_zp;
                }
                continue;
            }
            const int8_t *src = img + (iy * p->in_w + ix) * c;
            if ((c & 3) == 0) {
                /* whole quads: the widening fast path */
                rlx_widen_row(src, c, dst + 2 * k, c / 4, s);
                k += c;
            } else {
                for (int32_t ch = 0; ch < c; ch++, k++) {
                    dst[rlx_slot(k, s)] = src[ch];
                }
            }
        }
    }
    for (; k < p->gemm.k_quads * 4; k++) {
        dst[rlx_slot(k, s)] = 0;
    }
}

/* 4 output channels x 2 pixels per pass over the reduction. */
static void rlx_gemm_2px(const rlx_gemm_params *g, const int16_t *x, int8_t *out_a, int8_t *out_b)
{
    const int32_t kq = g->k_quads;
    const int8_t *w = g->weights;
    for (int32_t ob = 0; ob < g->out_c; ob += 4) {
        int32_t a0 = g->bias[ob], a1 = g->bias[ob + 1], a2 = g->bias[ob + 2], a3 = g->bias[ob + 3];
        int32_t b0 = a0, b1 = a1, b2 = a2, b3 = a3;
        const int16_t *px = x;
#if RLX_GEMM_ASM
        /* 8 accumulators, 2 input pairs, 1 weight word and 3 pointers: the
         * 14 usable registers exactly, which C compilers do not manage
         * without spilling. Per quad: 2 LDRD, 8 LDR, 8 SXTB16, 16 SMLAD,
         * CMP + BNE for 32 MACs. Each weight word is loaded twice (once per
         * half) instead of holding both of its halves in registers. */
        const int16_t *end = x + 8 * kq;
        uint32_t xa, xb, wv;
        __asm__ volatile(
            "1:\n\t"
            "ldrd   %[xa], %[xb], [%[px]], #8\n\t"
            "ldr    %[wv], [%[pw]]\n\t"
            "sxtb16 %[wv], %[wv]\n\t"
            "smlad  %[a0], %[xa], %[wv], %[a0]\n\t"
            "smlad  %[b0], %[xb], %[wv], %[b0]\n\t"
            "ldr    %[wv], [%[pw], #4]\n\t"
            "sxtb16 %[wv], %[wv]\n\t"
            "smlad  %[a1], %[xa], %[wv], %[a1]\n\t"
            "smlad  %[b1], %[xb], %[wv], %[b1]\n\t"
            "ldr    %[wv], [%[pw], #8]\n\t"
            "sxtb16 %[wv], %[wv]\n\t"
            "smlad  %[a2], %[xa], %[wv], %[a2]\n\t"
            "smlad  %[b2], %[xb], %[wv], %[b2]\n\t"
            "ldr    %[wv], [%[pw], #12]\n\t"
            "sxtb16 %[wv], %[wv]\n\t"
            "smlad  %[a3], %[xa], %[wv], %[a3]\n\t"
            "smlad  %[b3], %[xb], %[wv], %[b3]\n\t"
            "ldrd   %[xa], %[xb], [%[px]], #8\n\t"
            "ldr    %[wv], [%[pw], #12]\n\t"
            "sxtb16 %[wv], %[wv], ror #8\n\t"
            "smlad  %[a3], %[xa], %[wv], %[a3]\n\t"
            "smlad  %[b3], %[xb], %[wv], %[b3]\n\t"
            "ldr    %[wv], [%[pw], #8]\n\t"
            "sxtb16 %[wv], %[wv], ror #8\n\t"
            "smlad  %[a2], %[xa], %[wv], %[a2]\n\t"
            "smlad  %[b2], %[xb], %[wv], %[b2]\n\t"
            "ldr    %[wv], [%[pw], #4]\n\t"
            "sxtb16 %[wv], %[wv], ror #8\n\t"
            "smlad  %[a1], %[xa], %[wv], %[a1]\n\t"
            "smlad  %[b1], %[xb], %[wv], %[b1]\n\t"
            "ldr    %[wv], [%[pw]], #16\n\t"
            "sxtb16 %[wv], %[wv], ror #8\n\t"
            "smlad  %[a0], %[xa], %[wv], %[a0]\n\t"
            "smlad  %[b0], %[xb], %[wv], %[b0]\n\t"
            "cmp    %[px], %[end]\n\t"
            "bne    1b\n\t"
            : [a0] "+r"(a0), [a1] "+r"(a1), [a2] "+r"(a2), [a3] "+r"(a3), [b0] "+r"(b0), [b1] "+r"(b1),
              [b2] "+r"(b2), [b3] "+r"(b3), [px] "+r"(px), [pw] "+r"(w), [xa] "=&r"(xa), [xb] "=&r"(xb),
              [wv] "=&r"(wv)
            : [end] "r"(end)
            : "cc", "memory");
#elif RLX_USE_DSP
        /* The same schedule in C (host emulation of the DSP path). */
        for (int32_t q = 0; q < kq; q++) {
            uint32_t xa = rlx_rd32(px), xb = rlx_rd32(px + 2);
            uint32_t wv = rlx_sxtb16(rlx_rd32(w));
            a0 = rlx_smlad(xa, wv, a0);
            b0 = rlx_smlad(xb, wv, b0);
            wv = rlx_sxtb16(rlx_rd32(w + 4));
            a1 = rlx_smlad(xa, wv, a1);
            b1 = rlx_smlad(xb, wv, b1);
            wv = rlx_sxtb16(rlx_rd32(w + 8));
            a2 = rlx_smlad(xa, wv, a2);
            b2 = rlx_smlad(xb, wv, b2);
            wv = rlx_sxtb16(rlx_rd32(w + 12));
            a3 = rlx_smlad(xa, wv, a3);
            b3 = rlx_smlad(xb, wv, b3);
            xa = rlx_rd32(px + 4);
            xb = rlx_rd32(px + 6);
            wv = rlx_sxtb16_ror8(rlx_rd32(w + 12));
            a3 = rlx_smlad(xa, wv, a3);
            b3 = rlx_smlad(xb, wv, b3);
            wv = rlx_sxtb16_ror8(rlx_rd32(w + 8));
            a2 = rlx_smlad(xa, wv, a2);
            b2 = rlx_smlad(xb, wv, b2);
            wv = rlx_sxtb16_ror8(rlx_rd32(w + 4));
            a1 = rlx_smlad(xa, wv, a1);
            b1 = rlx_smlad(xb, wv, b1);
            wv = rlx_sxtb16_ror8(rlx_rd32(w));
            a0 = rlx_smlad(xa, wv, a0);
            b0 = rlx_smlad(xb, wv, b0);
            px += 8;
            w += 16;
        }
#else
        for (int32_t q = 0; q < kq; q++) {
            const int32_t x0 = px[0], x2 = px[1], y0 = px[2], y2 = px[3];
            const int32_t x1 = px[4], x3 = px[5], y1 = px[6], y3 = px[7];
            px += 8;
            a0 += x0 * w[0] + x1 * w[1] + x2 * w[2] + x3 * w[3];
            b0 += y0 * w[0] + y1 * w[1] + y2 * w[2] + y3 * w[3];
            a1 += x0 * w[4] + x1 * w[5] + x2 * w[6] + x3 * w[7];
            b1 += y0 * w[4] + y1 * w[5] + y2 * w[6] + y3 * w[7];
            a2 += x0 * w[8] + x1 * w[9] + x2 * w[10] + x3 * w[11];
            b2 += y0 * w[8] + y1 * w[9] + y2 * w[10] + y3 * w[11];
            a3 += x0 * w[12] + x1 * w[13] + x2 * w[14] + x3 * w[15];
            b3 += y0 * w[12] + y1 * w[13] + y2 * w[14] + y3 * w[15];
            w += 16;
        }
#endif
        const int32_t rows = g->out_c - ob; /* rows of this block that exist */
        out_a[ob] = rlx_finish(a0, g->mult[ob], g->shift[ob], g);
        out_b[ob] = rlx_finish(b0, g->mult[ob], g->shift[ob], g);
        if (rows > 1) {
            out_a[ob + 1] = rlx_finish(a1, g->mult[ob + 1], g->shift[ob + 1], g);
            out_b[ob + 1] = rlx_finish(b1, g->mult[ob + 1], g->shift[ob + 1], g);
        }
        if (rows > 2) {
            out_a[ob + 2] = rlx_finish(a2, g->mult[ob + 2], g->shift[ob + 2], g);
            out_b[ob + 2] = rlx_finish(b2, g->mult[ob + 2], g->shift[ob + 2], g);
        }
        if (rows > 3) {
            out_a[ob + 3] = rlx_finish(a3, g->mult[ob + 3], g->shift[ob + 3], g);
            out_b[ob + 3] = rlx_finish(b3, g->mult[ob + 3], g->shift[ob + 3], g);
        }
    }
}

/* 4 output channels x 1 pixel (slot a): a lone last pixel, or a fully
 * connected layer with one row. Each weight word is loaded once. */
static void rlx_gemm_1px(const rlx_gemm_params *g, const int16_t *x, int8_t *out)
{
    const int32_t kq = g->k_quads;
    const int8_t *w = g->weights;
    for (int32_t ob = 0; ob < g->out_c; ob += 4) {
        int32_t a0 = g->bias[ob], a1 = g->bias[ob + 1], a2 = g->bias[ob + 2], a3 = g->bias[ob + 3];
        const int16_t *px = x;
        for (int32_t q = 0; q < kq; q++) {
#if RLX_USE_DSP
            const uint32_t x02 = rlx_rd32(px), x13 = rlx_rd32(px + 4);
            uint32_t wv = rlx_rd32(w);
            a0 = rlx_smlad(x02, rlx_sxtb16(wv), a0);
            a0 = rlx_smlad(x13, rlx_sxtb16_ror8(wv), a0);
            wv = rlx_rd32(w + 4);
            a1 = rlx_smlad(x02, rlx_sxtb16(wv), a1);
            a1 = rlx_smlad(x13, rlx_sxtb16_ror8(wv), a1);
            wv = rlx_rd32(w + 8);
            a2 = rlx_smlad(x02, rlx_sxtb16(wv), a2);
            a2 = rlx_smlad(x13, rlx_sxtb16_ror8(wv), a2);
            wv = rlx_rd32(w + 12);
            a3 = rlx_smlad(x02, rlx_sxtb16(wv), a3);
            a3 = rlx_smlad(x13, rlx_sxtb16_ror8(wv), a3);
#else
            const int32_t x0 = px[0], x2 = px[1], x1 = px[4], x3 = px[5];
            a0 += x0 * w[0] + x1 * w[1] + x2 * w[2] + x3 * w[3];
            a1 += x0 * w[4] + x1 * w[5] + x2 * w[6] + x3 * w[7];
            a2 += x0 * w[8] + x1 * w[9] + x2 * w[10] + x3 * w[11];
            a3 += x0 * w[12] + x1 * w[13] + x2 * w[14] + x3 * w[15];
#endif
            px += 8;
            w += 16;
        }
        const int32_t rows = g->out_c - ob;
        out[ob] = rlx_finish(a0, g->mult[ob], g->shift[ob], g);
        if (rows > 1) {
            out[ob + 1] = rlx_finish(a1, g->mult[ob + 1], g->shift[ob + 1], g);
        }
        if (rows > 2) {
            out[ob + 2] = rlx_finish(a2, g->mult[ob + 2], g->shift[ob + 2], g);
        }
        if (rows > 3) {
            out[ob + 3] = rlx_finish(a3, g->mult[ob + 3], g->shift[ob + 3], g);
        }
    }
}

typedef void (*rlx_gather_fn)(const rlx_conv_params *p, const int8_t *img, int32_t oy, int32_t ox, int16_t *dst,
                              int32_t s);

/* 1x1 without padding: the receptive field is one input pixel (any stride). */
static void rlx_gather_1x1(const rlx_conv_params *p, const int8_t *img, int32_t oy, int32_t ox, int16_t *dst,
                           int32_t s)
{
    const int8_t *src = img + (oy * p->stride_h * p->in_w + ox * p->stride_w) * p->in_c;
    rlx_widen_row(src, p->in_c, dst, p->gemm.k_quads, s);
}

static void rlx_conv_driver(const rlx_conv_params *p, const int8_t *in, int8_t *out, int16_t *scratch,
                            rlx_gather_fn gather)
{
    const int32_t out_c = p->gemm.out_c;
    const int32_t pixels = p->out_h * p->out_w;
    for (int32_t n = 0; n < p->batches; n++) {
        const int8_t *img = in + n * p->in_h * p->in_w * p->in_c;
        int8_t *dst = out + n * pixels * out_c;
        int32_t oy = 0, ox = 0; /* position of pixel px */
        int32_t px = 0;
        for (; px + 2 <= pixels; px += 2) {
            gather(p, img, oy, ox, scratch, 0);
            if (++ox == p->out_w) {
                ox = 0;
                oy++;
            }
            gather(p, img, oy, ox, scratch, 1);
            if (++ox == p->out_w) {
                ox = 0;
                oy++;
            }
            rlx_gemm_2px(&p->gemm, scratch, dst + px * out_c, dst + (px + 1) * out_c);
        }
        if (px < pixels) {
            gather(p, img, oy, ox, scratch, 0);
            rlx_gemm_1px(&p->gemm, scratch, dst + px * out_c);
        }
    }
}

void rlx_convolve_s8(const rlx_conv_params *p, const int8_t *in, int8_t *out, int16_t *scratch)
{
    rlx_conv_driver(p, in, out, scratch, rlx_im2col_pixel);
}

void rlx_convolve_1x1_s8(const rlx_conv_params *p, const int8_t *in, int8_t *out, int16_t *scratch)
{
    rlx_conv_driver(p, in, out, scratch, rlx_gather_1x1);
}

void rlx_fully_connected_s8(const rlx_fc_params *p, const int8_t *in, int8_t *out, int16_t *scratch)
{
    const int32_t kq = p->gemm.k_quads;
    const int32_t out_c = p->gemm.out_c;
    int32_t r = 0;
    for (; r + 2 <= p->batches; r += 2) {
        rlx_widen_row(in + r * p->in_features, p->in_features, scratch, kq, 0);
        rlx_widen_row(in + (r + 1) * p->in_features, p->in_features, scratch, kq, 1);
        rlx_gemm_2px(&p->gemm, scratch, out + r * out_c, out + (r + 1) * out_c);
    }
    if (r < p->batches) {
        rlx_widen_row(in + r * p->in_features, p->in_features, scratch, kq, 0);
        rlx_gemm_1px(&p->gemm, scratch, out + r * out_c);
    }
}
