/*
 * Convolution and fully connected layers with int4 weights (rlx_gemm_s4_params).
 *
 * The weights stay packed in flash, two per byte; each word of 8 nibbles is
 * unpacked in registers where it is used. On DSP cores the low nibbles moved
 * to the top of their bytes ((w << 4) & 0xF0F0F0F0) and the high nibbles
 * masked in place (w & 0xF0F0F0F0) are bytes holding 16 x the weights, which
 * SXTB16 and SXTB16 ROR 8 widen into the int16 pairs (w0, w2), (w1, w3),
 * (w4, w6), (w5, w7): the pairs SXTB16 gives for two words of input, so SMLAD
 * multiplies them directly. Those accumulators hold 16 x the dot product,
 * exactly (the emitter checks that it stays inside int32), shifted back
 * before the bias is added. Portable cores extract each nibble with a signed
 * bitfield extract (SBFX on Cortex-M3).
 *
 * A convolution gathers each output pixel's receptive field, int8, into its
 * scratch row (padded taps hold the input zero point, which the folded bias
 * cancels); 1x1 convolutions without padding and fully connected layers read
 * their input in place.
 */
#include "rlx_nn.h"
#include "rlx_nn_support.h"

#define RLX_S4_RQ(g) {(g)->rq_mode, (g)->out_zp, (g)->act_min, (g)->act_max, (g)->mult, (g)->shift, (g)->rq_add}

#if RLX_USE_DSP
#define RLX_S4_SCALE 4 /* the SMLAD accumulators hold 16 x the dot product */
#else
#define RLX_S4_SCALE 0
#endif

/* Nibble n (0..7) of word w, sign-extended: one SBFX. */
RLX_INLINE int32_t rlx_nib(uint32_t w, int32_t n) { return (int32_t)(w << (28 - 4 * n)) >> 28; }

/* Nibble i of a packed run starting at p (two per byte, low nibble first), sign-extended. */
RLX_INLINE int32_t rlx_nib_at(const uint8_t *p, int32_t i)
{
    const uint32_t b = p[i >> 1];
    return (i & 1) ? (int32_t)(b << 24) >> 28 : (int32_t)(b << 28) >> 28;
}

#if RLX_USE_DSP
/* 16 x the dot product of a chunk's weight word wv with its 8 inputs, given as the pairs
 * SXTB16 / SXTB16 ROR 8 give for the two input words: (x0, x2), (x1, x3), (x4, x6), (x5, x7). */
RLX_INLINE int32_t rlx_dot8_s4(uint32_t wv, uint32_t x02, uint32_t x13, uint32_t x46, uint32_t x57, int32_t acc)
{
    const uint32_t lo = (wv << 4) & 0xF0F0F0F0u; /* byte i: 16 x element i */
    const uint32_t hi = wv & 0xF0F0F0F0u;        /* byte i: 16 x element 4 + i */
    acc = rlx_smlad(x02, rlx_sxtb16(lo), acc);
    acc = rlx_smlad(x13, rlx_sxtb16_ror8(lo), acc);
    acc = rlx_smlad(x46, rlx_sxtb16(hi), acc);
    return rlx_smlad(x57, rlx_sxtb16_ror8(hi), acc);
}
#else
/* The dot product of a chunk's weight word wv with its 8 inputs x[0..7]. */
RLX_INLINE int32_t rlx_dot8_s4(uint32_t wv, const int32_t *x, int32_t acc)
{
    acc += x[0] * rlx_nib(wv, 0) + x[1] * rlx_nib(wv, 2) + x[2] * rlx_nib(wv, 4) + x[3] * rlx_nib(wv, 6);
    return acc + x[4] * rlx_nib(wv, 1) + x[5] * rlx_nib(wv, 3) + x[6] * rlx_nib(wv, 5) + x[7] * rlx_nib(wv, 7);
}
#endif

/* Row `row` of a block of `rows` rows at w: its whole chunks (scaled as RLX_S4_SCALE says). */
static int32_t rlx_row_s4(const uint8_t *w, int32_t rows, int32_t row, const int8_t *x, int32_t k8)
{
    int32_t acc = 0;
    for (int32_t j = 0; j < k8; j++) {
        const uint32_t wv = rlx_rd32(w + 4 * (rows * j + row));
        const uint32_t xa = rlx_rd32(x + 8 * j), xb = rlx_rd32(x + 8 * j + 4);
#if RLX_USE_DSP
        acc = rlx_dot8_s4(wv, rlx_sxtb16(xa), rlx_sxtb16_ror8(xa), rlx_sxtb16(xb), rlx_sxtb16_ror8(xb), acc);
#else
        const int32_t xv[8] = {(int8_t)xa, (int8_t)(xa >> 8), (int8_t)(xa >> 16), (int8_t)(xa >> 24),
                               (int8_t)xb, (int8_t)(xb >> 8), (int8_t)(xb >> 16), (int8_t)(xb >> 24)};
        acc = rlx_dot8_s4(wv, xv, acc);
#endif
    }
    return acc;
}

/* bias + the whole chunks' sum (unscaled) + the tail's, wrapping like the core's int32 adds. */
RLX_INLINE int32_t rlx_acc_s4(int32_t bias, int32_t chunks, int32_t tail)
{
    return (int32_t)((uint32_t)bias + (uint32_t)(chunks >> RLX_S4_SCALE) + (uint32_t)tail);
}

/* One row of k int8 inputs x (any alignment, read in place) times the packed matrix. */
static void rlx_gemm_s4_row(const rlx_gemm_s4_params *g, const int8_t *x, int8_t *out)
{
    const int32_t k = g->k, k8 = k >> 3, kt = k & 7, out_c = g->out_c;
    const rlx_rq_params rq = RLX_S4_RQ(g);
    const int32_t *bias = g->bias;
    const int8_t *xt = x + 8 * k8; /* the elements after the whole chunks */
    const uint8_t *w = g->weights;
    int32_t ob = 0;
    for (; ob + 4 <= out_c; ob += 4, w += 2 * k) {
        int32_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
        const uint8_t *wp = w;
        for (int32_t j = 0; j < k8; j++, wp += 16) {
            const uint32_t xa = rlx_rd32(x + 8 * j), xb = rlx_rd32(x + 8 * j + 4);
#if RLX_USE_DSP
            const uint32_t x02 = rlx_sxtb16(xa), x13 = rlx_sxtb16_ror8(xa);
            const uint32_t x46 = rlx_sxtb16(xb), x57 = rlx_sxtb16_ror8(xb);
            a0 = rlx_dot8_s4(rlx_rd32(wp), x02, x13, x46, x57, a0);
            a1 = rlx_dot8_s4(rlx_rd32(wp + 4), x02, x13, x46, x57, a1);
            a2 = rlx_dot8_s4(rlx_rd32(wp + 8), x02, x13, x46, x57, a2);
            a3 = rlx_dot8_s4(rlx_rd32(wp + 12), x02, x13, x46, x57, a3);
#else
            const int32_t xv[8] = {(int8_t)xa, (int8_t)(xa >> 8), (int8_t)(xa >> 16), (int8_t)(xa >> 24),
                                   (int8_t)xb, (int8_t)(xb >> 8), (int8_t)(xb >> 16), (int8_t)(xb >> 24)};
            a0 = rlx_dot8_s4(rlx_rd32(wp), xv, a0);
            a1 = rlx_dot8_s4(rlx_rd32(wp + 4), xv, a1);
            a2 = rlx_dot8_s4(rlx_rd32(wp + 8), xv, a2);
            a3 = rlx_dot8_s4(rlx_rd32(wp + 12), xv, a3);
#endif
        }
        int32_t t0 = 0, t1 = 0, t2 = 0, t3 = 0;
        for (int32_t t = 0; t < kt; t++) { /* wp: the tail, its 4 rows one after the other */
            const int32_t xv = xt[t];
            t0 += xv * rlx_nib_at(wp, t);
            t1 += xv * rlx_nib_at(wp, kt + t);
            t2 += xv * rlx_nib_at(wp, 2 * kt + t);
            t3 += xv * rlx_nib_at(wp, 3 * kt + t);
        }
        out[ob] = (int8_t)rlx_rq_out(&rq, rlx_acc_s4(bias[ob], a0, t0), ob);
        out[ob + 1] = (int8_t)rlx_rq_out(&rq, rlx_acc_s4(bias[ob + 1], a1, t1), ob + 1);
        out[ob + 2] = (int8_t)rlx_rq_out(&rq, rlx_acc_s4(bias[ob + 2], a2, t2), ob + 2);
        out[ob + 3] = (int8_t)rlx_rq_out(&rq, rlx_acc_s4(bias[ob + 3], a3, t3), ob + 3);
    }
    const int32_t rows = out_c - ob; /* a last block of 1 to 3 rows */
    for (int32_t r = 0; r < rows; r++) {
        const int32_t a = rlx_row_s4(w, rows, r, x, k8);
        const uint8_t *tp = w + 4 * rows * k8;
        int32_t tail = 0;
        for (int32_t t = 0; t < kt; t++) {
            tail += xt[t] * rlx_nib_at(tp, r * kt + t);
        }
        out[ob + r] = (int8_t)rlx_rq_out(&rq, rlx_acc_s4(bias[ob + r], a, tail), ob + r);
    }
}

/* n bytes copied or filled; the empty asm keeps GCC from calling memcpy / memset for runs
 * this short. */
#if defined(__GNUC__)
#define RLX_S4_NO_LIBCALL() __asm__ volatile("")
#else
#define RLX_S4_NO_LIBCALL() ((void)0)
#endif
RLX_INLINE void rlx_s4_copy(int8_t *dst, const int8_t *src, int32_t n)
{
    int32_t t = 0;
    for (; t + 4 <= n; t += 4) {
        rlx_wr32(dst + t, rlx_rd32(src + t));
        RLX_S4_NO_LIBCALL();
    }
    for (; t < n; t++) {
        dst[t] = src[t];
        RLX_S4_NO_LIBCALL();
    }
}

RLX_INLINE void rlx_s4_fill(int8_t *dst, int8_t v, int32_t n)
{
    for (int32_t t = 0; t < n; t++) {
        dst[t] = v;
        RLX_S4_NO_LIBCALL();
    }
}

/* The receptive field of output pixel (oy, ox) in (kh, kw, c) order; padded taps the zero point. */
static void rlx_im2col_s4(const rlx_conv_s4_params *p, const int8_t *img, int32_t oy, int32_t ox, int8_t *dst)
{
    const int32_t c = p->in_c, seg = p->k_w * c;
    const int32_t iy0 = oy * p->stride_h - p->pad_top, ix0 = ox * p->stride_w - p->pad_left;
    const int32_t whole_row = p->dil_w == 1 && ix0 >= 0 && ix0 + p->k_w <= p->in_w;
    const int8_t zp = (int8_t)p->in_zp;
    for (int32_t i = 0; i < p->k_h; i++) {
        const int32_t iy = iy0 + i * p->dil_h;
        const int32_t row_in = iy >= 0 && iy < p->in_h;
        if (row_in && whole_row) {
            rlx_s4_copy(dst, img + (iy * p->in_w + ix0) * c, seg);
            dst += seg;
            continue;
        }
        for (int32_t j = 0; j < p->k_w; j++, dst += c) {
            const int32_t ix = ix0 + j * p->dil_w;
            if (row_in && ix >= 0 && ix < p->in_w) {
                rlx_s4_copy(dst, img + (iy * p->in_w + ix) * c, c);
            } else {
                rlx_s4_fill(dst, zp, c);
            }
        }
    }
}

void rlx_convolve_s4(const rlx_conv_s4_params *p, const int8_t *in, int8_t *out, int8_t *scratch)
{
    const int32_t out_c = p->gemm.out_c;
    for (int32_t n = 0; n < p->batches; n++) {
        const int8_t *img = in + n * p->in_h * p->in_w * p->in_c;
        for (int32_t oy = 0; oy < p->out_h; oy++) {
            for (int32_t ox = 0; ox < p->out_w; ox++) {
                rlx_im2col_s4(p, img, oy, ox, scratch);
                rlx_gemm_s4_row(&p->gemm, scratch, out);
                out += out_c;
            }
        }
    }
}

/* 1x1 without padding: the receptive field is one input pixel (any stride), read in place. */
void rlx_convolve_1x1_s4(const rlx_conv_s4_params *p, const int8_t *in, int8_t *out)
{
    const int32_t out_c = p->gemm.out_c, c = p->in_c;
    for (int32_t n = 0; n < p->batches; n++) {
        const int8_t *img = in + n * p->in_h * p->in_w * c;
        for (int32_t oy = 0; oy < p->out_h; oy++) {
            const int8_t *row = img + oy * p->stride_h * p->in_w * c;
            for (int32_t ox = 0; ox < p->out_w; ox++) {
                rlx_gemm_s4_row(&p->gemm, row + ox * p->stride_w * c, out);
                out += out_c;
            }
        }
    }
}

void rlx_fully_connected_s4(const rlx_fc_s4_params *p, const int8_t *in, int8_t *out)
{
    for (int32_t r = 0; r < p->batches; r++) {
        rlx_gemm_s4_row(&p->gemm, in + r * p->in_features, out + r * p->gemm.out_c);
    }
}
