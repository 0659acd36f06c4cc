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
 * for a word of input, with both pixels' pairs adjacent so that one LDRD
 * fetches them. Fully connected layers read their int8 rows in place.
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
#define RLX_IM2COL_LOCAL 256 /* receptive fields up to this many bytes are gathered on the stack (up to 3 of them) */

/* A few bytes copied: words, then bytes. The empty asm keeps GCC
 * from turning the loops into memcpy / memset calls, which cost more
 * than the copy for runs this short. */
#if defined(__GNUC__)
#define RLX_NO_LIBCALL() __asm__ volatile("")
#else
#define RLX_NO_LIBCALL() ((void)0)
#endif
RLX_INLINE void rlx_copy_short(int8_t *dst, const int8_t *src, int32_t n)
{
    int32_t t = 0;
    for (; t + 4 <= n; t += 4) {
        rlx_wr32(dst + t, rlx_rd32(src + t));
        RLX_NO_LIBCALL();
    }
    for (; t < n; t++) {
        dst[t] = src[t];
        RLX_NO_LIBCALL();
    }
}

/* n >= 4 bytes copied as unaligned words, the last one ending at the run's end (over bytes the
 * word before it copied, with the same values): ceil(n / 4) loads and stores, nothing outside the
 * run read or written. */
RLX_INLINE void rlx_copy_run(int8_t *dst, const int8_t *src, int32_t n)
{
    const int32_t last = n - 4;
    for (int32_t t = 0; t < last; t += 4) {
        rlx_wr32(dst + t, rlx_rd32(src + t));
        RLX_NO_LIBCALL();
    }
    rlx_wr32(dst + last, rlx_rd32(src + last));
}

/* The bytes of a small receptive field (e.g. 3x3 on 3 channels) gathered in order into words
 * (padded taps the zero point, the tail of the last quad 0); rlx_im2col_small then widens them
 * a quad at a time, the pair path of rlx_conv_driver two pixels at once, and the row kernel reads
 * a lone last pixel's (of any size) as they are. The whole field is first the zero point, four
 * words at a time; the taps inside the image are then copied over it. */
static void rlx_gather_small(const rlx_conv_params *p, const int8_t *img, int32_t oy, int32_t ox, uint32_t *words)
{
    int8_t *buf = (int8_t *)words;
    const int32_t c = p->in_c, k_h = p->k_h, dil_h = p->dil_h;
    const int32_t seg = p->k_w * c;
    const int32_t ix0 = ox * p->stride_w - p->pad_left;
    const int32_t iy0 = oy * p->stride_h - p->pad_top;
    const int32_t kq = p->gemm.k_quads, tail = 4 * kq - k_h * seg; /* 0 to 3 bytes past the field */
    const uint32_t zp4 = (uint32_t)(uint8_t)p->in_zp * 0x01010101u;
    /* four words a pass, then one at a time (a loop of one word takes 4 instructions a word) */
    uint32_t *w = words, *const last = words + kq - 1;
    for (; w + 4 <= last; w += 4) {
        w[0] = zp4;
        w[1] = zp4;
        w[2] = zp4;
        w[3] = zp4;
        RLX_NO_LIBCALL();
    }
    for (; w < last; w++) {
        *w = zp4;
        RLX_NO_LIBCALL();
    }
    *last = zp4 & (0xFFFFFFFFu >> (8 * tail)); /* the tail of the last quad stays 0 */
    /* the kernel rows [i_lo, i_hi) fall inside the image */
    int32_t i_lo = 0, i_hi = k_h;
    while (i_lo < i_hi && iy0 + i_lo * dil_h < 0) {
        i_lo++;
    }
    while (i_hi > i_lo && iy0 + (i_hi - 1) * dil_h >= p->in_h) {
        i_hi--;
    }
    int8_t *row = buf + i_lo * seg;
    const int32_t row_step = dil_h * p->in_w * c;
    if (p->dil_w == 1) {
        /* per row the one run of columns inside the image (the same for every row) */
        const int32_t jl = ix0 < 0 ? -ix0 : 0;
        const int32_t jh = ix0 + p->k_w > p->in_w ? p->in_w - ix0 : p->k_w;
        if (jh <= jl) {
            return;
        }
        const int32_t n_in = (jh - jl) * c;
        const int8_t *src = img + ((iy0 + i_lo * dil_h) * p->in_w + ix0 + jl) * c;
        row += jl * c;
        if (n_in >= 4 && n_in <= 12) {
            /* runs of 4 to 12 bytes: three word copies a run, as rlx_gather_runs2 */
            const int32_t end = n_in - 4, mid = end < 4 ? end : 4;
            for (int32_t i = i_lo; i < i_hi; i++, row += seg, src += row_step) {
                rlx_wr32(row, rlx_rd32(src));
                rlx_wr32(row + mid, rlx_rd32(src + mid));
                rlx_wr32(row + end, rlx_rd32(src + end));
            }
            return;
        }
        for (int32_t i = i_lo; i < i_hi; i++, row += seg, src += row_step) {
            if (n_in >= 4) {
                rlx_copy_run(row, src, n_in);
            } else {
                rlx_copy_short(row, src, n_in);
            }
        }
    } else {
        for (int32_t i = i_lo; i < i_hi; i++, row += seg) {
            const int32_t iy = iy0 + i * dil_h;
            for (int32_t j = 0; j < p->k_w; j++) {
                const int32_t ix = ix0 + j * p->dil_w;
                if (ix >= 0 && ix < p->in_w) {
                    const int8_t *src = img + (iy * p->in_w + ix) * c;
                    if (c >= 4) {
                        rlx_copy_run(row + j * c, src, c);
                    } else {
                        rlx_copy_short(row + j * c, src, c);
                    }
                }
            }
        }
    }
}

static void rlx_im2col_small(const rlx_conv_params *p, const int8_t *img, int32_t oy, int32_t ox, int16_t *dst,
                             int32_t s)
{
    uint32_t words[RLX_IM2COL_LOCAL / 4];
    const int32_t kq = p->gemm.k_quads;
    rlx_gather_small(p, img, oy, ox, words);
#if RLX_USE_DSP
    for (int32_t q = 0; q < kq; q++) {
        const uint32_t w = words[q];
        rlx_wr32(dst + 8 * q + 2 * s, rlx_sxtb16(w));
        rlx_wr32(dst + 8 * q + 4 + 2 * s, rlx_sxtb16_ror8(w));
    }
#else
    rlx_widen_row((const int8_t *)words, kq * 4, dst, kq, s);
#endif
}

static void rlx_im2col_pixel(const rlx_conv_params *p, const int8_t *img, int32_t oy, int32_t ox, int16_t *dst,
                             int32_t s)
{
    const int32_t c = p->in_c;
    const int32_t seg = p->k_w * c; /* one kernel row, contiguous in the input without dilation */
    const int32_t ix0 = ox * p->stride_w - p->pad_left;
    int32_t k = 0;
    for (int32_t i = 0; i < p->k_h; i++) {
        const int32_t iy = oy * p->stride_h - p->pad_top + i * p->dil_h;
        if (p->dil_w == 1 && (seg & 3) == 0 && (k & 3) == 0 && iy >= 0 && iy < p->in_h && ix0 >= 0 &&
            ix0 + p->k_w <= p->in_w) {
            /* the whole kernel row inside the image: whole quads (e.g. a
             * 10x4 kernel on one input channel), the widening fast path */
            rlx_widen_row(img + (iy * p->in_w + ix0) * c, seg, dst + 2 * k, seg / 4, s);
            k += seg;
            continue;
        }
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

#if defined(__GNUC__)
#define RLX_NOINLINE __attribute__((noinline))
#else
#define RLX_NOINLINE
#endif

/* 128 x the sums of the int16 values of pixel slots a and b over k_quads quads (the even rows'
 * weight bytes are w + 128, rlx_nn.h, so their accumulators start 128 sum(x) lower); out of line,
 * so that its loop state does not compete with the MAC asm's registers. */
static RLX_NOINLINE void rlx_slot_sums128(const int16_t *x, int32_t kq, uint32_t *ca, uint32_t *cb)
{
    int32_t sa = 0, sb = 0;
    for (int32_t q = 0; q < kq; q++, x += 8) {
#if RLX_USE_DSP
        sa = rlx_smlad(rlx_rd32(x), 0x00010001u, rlx_smlad(rlx_rd32(x + 4), 0x00010001u, sa));
        sb = rlx_smlad(rlx_rd32(x + 2), 0x00010001u, rlx_smlad(rlx_rd32(x + 6), 0x00010001u, sb));
#else
        sa += x[0] + x[1] + x[4] + x[5];
        sb += x[2] + x[3] + x[6] + x[7];
#endif
    }
    *ca = (uint32_t)sa << 7;
    *cb = (uint32_t)sb << 7;
}

/* The start of an even row's accumulator for a pixel whose values sum to s
 * (s128 = 128 s): 128 s lower (its bytes are w + 128) and, on DSP builds,
 * 256 bias of the odd row higher: SMLAD of the raw word also sums 256 x w_odd,
 * which rlx_even_end takes off with the odd row's accumulator. The even row's
 * constant (rules._gemm) is that start, bias + 256 bias of the odd row, so that
 * the DSP builds load it ready; the portable build takes the 256 bias off. */
RLX_INLINE int32_t rlx_even_start(const int32_t *bias, uint32_t s128)
{
#if RLX_USE_DSP
    return (int32_t)((uint32_t)bias[0] - s128);
#else
    return (int32_t)((uint32_t)bias[0] - ((uint32_t)bias[1] << 8) - s128);
#endif
}

RLX_INLINE int32_t rlx_even_end(int32_t even, int32_t odd)
{
#if RLX_USE_DSP
    return (int32_t)((uint32_t)even - ((uint32_t)odd << 8));
#else
    (void)odd;
    return even;
#endif
}

#if RLX_USE_DSP
/* The DSP MAC loop of one 4 x 2 block: a0..a3, b0..b3 += the block's
 * weights at w (advanced past them) times the two pixels at x. A weight word
 * serves two rows: SMLAD of the raw word into the even row, SXTB16 ROR 8 of
 * it (the odd row's pair) into the odd row. The block asm (RLX_GEMM_ASM)
 * has it as RLX_GEMM_QUAD_ASM; the C loop RLX_GEMM_2PX_MAC below runs on
 * the other DSP builds and, there, only for rq_mode 0 (a rare fallback): an
 * asm MAC loop inlined into the C epilogue's loop left GCC without registers
 * at some optimization levels (-O1 on Cortex-M7). */
#if RLX_GEMM_ASM
/* One quad of the 4 x 2 block: 2 LDRD, 4 LDR, 4 SXTB16, 16 SMLAD for 32 MACs. */
#define RLX_GEMM_PAIR_ASM(E, O)                                                                                      \
    "smlad  %[a" E "], %[xa], %[wv], %[a" E "]\n\t"                                                                  \
    "smlad  %[b" E "], %[xb], %[wv], %[b" E "]\n\t"                                                                  \
    "sxtb16 %[wv], %[wv], ror #8\n\t"                                                                                \
    "smlad  %[a" O "], %[xa], %[wv], %[a" O "]\n\t"                                                                  \
    "smlad  %[b" O "], %[xb], %[wv], %[b" O "]\n\t"
#define RLX_GEMM_QUAD_ASM                                                                                            \
    "ldrd   %[xa], %[xb], [%[px]], #8\n\t"                                                                           \
    "ldr    %[wv], [%[pw]], #16\n\t" RLX_GEMM_PAIR_ASM("0", "1") "ldr    %[wv], [%[pw], #-12]\n\t"                   \
        RLX_GEMM_PAIR_ASM("2", "3") "ldrd   %[xa], %[xb], [%[px]], #8\n\t"                                           \
                                    "ldr    %[wv], [%[pw], #-8]\n\t" RLX_GEMM_PAIR_ASM("0", "1")                     \
                                    "ldr    %[wv], [%[pw], #-4]\n\t" RLX_GEMM_PAIR_ASM("2", "3")
#endif
/* One weight word (rows e, o) against the input pairs xa, xb of pixels a and b. */
#define RLX_SMLAD_PAIR(xa, xb, word, ae, be, ao, bo)                                                                 \
    do {                                                                                                             \
        const uint32_t wv_ = (word), wo_ = rlx_sxtb16_ror8(wv_);                                                     \
        ae = rlx_smlad((xa), wv_, ae);                                                                               \
        be = rlx_smlad((xb), wv_, be);                                                                               \
        ao = rlx_smlad((xa), wo_, ao);                                                                               \
        bo = rlx_smlad((xb), wo_, bo);                                                                               \
    } while (0)
#define RLX_GEMM_2PX_MAC()                                                                                           \
    do {                                                                                                             \
        /* The same schedule in C: the host emulation, and rq_mode 0 on target (above). */                          \
        for (int32_t q = 0; q < kq; q++, px += 8, w += 16) {                                                         \
            const uint32_t xa = rlx_rd32(px), xb = rlx_rd32(px + 2), ya = rlx_rd32(px + 4), yb = rlx_rd32(px + 6);   \
            RLX_SMLAD_PAIR(xa, xb, rlx_rd32(w), a0, b0, a1, b1);                                                     \
            RLX_SMLAD_PAIR(xa, xb, rlx_rd32(w + 4), a2, b2, a3, b3);                                                 \
            RLX_SMLAD_PAIR(ya, yb, rlx_rd32(w + 8), a0, b0, a1, b1);                                                 \
            RLX_SMLAD_PAIR(ya, yb, rlx_rd32(w + 12), a2, b2, a3, b3);                                                \
        }                                                                                                            \
    } while (0)
#else
/* One reduction element of pixels a and b (values xa, xb) into the 4 x 2
 * block a0..a3, b0..b3, against the element's weights of the block's 4 rows
 * at wk[0], wk[1], wk[4], wk[5] (the even rows' bytes unsigned, w + 128). */
#define RLX_MAC_4X2(xa, xb, wk)                                                                                      \
    do {                                                                                                             \
        const int32_t va = (xa), vb = (xb);                                                                          \
        const int8_t *const wr = (wk);                                                                               \
        const int32_t w0 = (uint8_t)wr[0], w1 = wr[1], w2 = (uint8_t)wr[4], w3 = wr[5];                              \
        a0 += va * w0;                                                                                               \
        b0 += vb * w0;                                                                                               \
        a1 += va * w1;                                                                                               \
        b1 += vb * w1;                                                                                               \
        a2 += va * w2;                                                                                               \
        b2 += vb * w2;                                                                                               \
        a3 += va * w3;                                                                                               \
        b3 += vb * w3;                                                                                               \
    } while (0)
#endif

/* A block's per-channel constants (rlx_gemm_params.chan): 12 words, the 4 folded biases, then
 * per row its multiplier and its shift (rq_mode 0) or rq_add (modes 1, 2). One pointer walks
 * them with the weights, so the epilogue keeps fewer values live across the MAC asm. */
#define RLX_CHAN_WORDS 12

/* Accumulator of a row with constants m, r (rlx_gemm_params.chan) to its int8 output. Mode 2
 * shifts by ctz(rq_add) and folds the last >> 1 into the saturation (SSAT with ASR #1). */
RLX_INLINE int32_t rlx_chan_out(int32_t mode, int32_t zp, int32_t lo, int32_t hi, int32_t m, int32_t r, int32_t acc)
{
    if (mode == 0) {
        return rlx_clamp(rlx_requantize(acc, m, r) + zp, lo, hi);
    }
    if (mode == 2) {
        return rlx_sat8(rlx_rq_fast(acc, m, r, rlx_ctz(r)) >> 1);
    }
    return rlx_clamp(rlx_rq_fast(acc, m, r, rlx_rq_e(r)), lo, hi);
}

/* Two accumulators of one row: its constants loaded once. */
RLX_INLINE void rlx_chan_out2(int32_t mode, int32_t zp, int32_t lo, int32_t hi, const int32_t *mr, int32_t a,
                              int32_t b, int8_t *pa, int8_t *pb)
{
    const int32_t m = mr[0], r = mr[1];
    *pa = (int8_t)rlx_chan_out(mode, zp, lo, hi, m, r, a);
    *pb = (int8_t)rlx_chan_out(mode, zp, lo, hi, m, r, b);
}

/* 4 output channels x 2 pixels per pass over the reduction, for the whole blocks whose
 * constants are [q, qend) and whose weights start at w; mode is the requantization's rq_mode,
 * a constant in each instance below, so that its tests fold away. The block's constants,
 * weights and outputs are walked by pointers, with no row tests (rlx_gemm_2px_any runs a
 * partial last block). */
RLX_INLINE void rlx_gemm_2px_blocks(const rlx_gemm_params *g, const int32_t *q, const int32_t *const qend,
                                    const int8_t *w, const int16_t *x, int8_t *out_a, int8_t *out_b,
                                    const uint32_t *c128, int32_t mode)
{
    const int32_t kq = g->k_quads;
    const int32_t zp = g->out_zp, lo = g->act_min, hi = g->act_max;
    const uint32_t ca = c128[0], cb = c128[1];
    for (; q != qend; q += RLX_CHAN_WORDS, out_a += 4, out_b += 4) {
        int32_t a0 = rlx_even_start(q, ca), b0 = rlx_even_start(q, cb), a1 = q[1], b1 = a1;
        int32_t a2 = rlx_even_start(q + 2, ca), b2 = rlx_even_start(q + 2, cb), a3 = q[3], b3 = a3;
        const int16_t *px = x;
#if RLX_USE_DSP
        RLX_GEMM_2PX_MAC();
#else
        /* one reduction element at a time: 2 inputs and 4 weights live, so
         * the 8 accumulators stay in registers (MLA per MAC, no spills) */
        const int16_t *pend = x + 8 * kq;
        for (; px != pend; px += 8, w += 16) {
            RLX_MAC_4X2(px[0], px[2], w);
            RLX_MAC_4X2(px[4], px[6], w + 8);
            RLX_MAC_4X2(px[1], px[3], w + 2);
            RLX_MAC_4X2(px[5], px[7], w + 10);
        }
#endif
        rlx_chan_out2(mode, zp, lo, hi, q + 4, rlx_even_end(a0, a1), rlx_even_end(b0, b1), out_a, out_b);
        rlx_chan_out2(mode, zp, lo, hi, q + 6, a1, b1, out_a + 1, out_b + 1);
        rlx_chan_out2(mode, zp, lo, hi, q + 8, rlx_even_end(a2, a3), rlx_even_end(b2, b3), out_a + 2, out_b + 2);
        rlx_chan_out2(mode, zp, lo, hi, q + 10, a3, b3, out_a + 3, out_b + 3);
    }
}

/* The block loop of rq_mode 0 and 1, out of line: the MAC asm needs every register. */
typedef void (*rlx_gemm_blocks_fn)(const rlx_gemm_params *g, const int32_t *q, const int32_t *qend, const int8_t *w,
                                   const int16_t *x, int8_t *out_a, int8_t *out_b, const uint32_t *c128);

static RLX_NOINLINE void rlx_gemm_2px_blocks_ref(const rlx_gemm_params *g, const int32_t *q, const int32_t *qend,
                                                 const int8_t *w, const int16_t *x, int8_t *out_a, int8_t *out_b,
                                                 const uint32_t *c128)
{
    rlx_gemm_2px_blocks(g, q, qend, w, x, out_a, out_b, c128, 0);
}

#if RLX_GEMM_ASM
/* the last steps of a row pair's requantization: the right shift e, read off the rq_add in wv (its
 * trailing zeros, RBIT + CLZ), then the shift by one more and the int8 saturation (SSAT) */
#define RLX_RQ_ROW2_SHIFT(A, B)                                                                                      \
    "rbit   %[xb], %[wv]\n\t"                                                                                        \
    "clz    %[xb], %[xb]\n\t"                                                                                        \
    "asr    %[" A "], %[" A "], %[xb]\n\t"                                                                           \
    "asr    %[" B "], %[" B "], %[xb]\n\t"                                                                           \
    "ssat   %[" A "], #8, %[" A "], asr #1\n\t"                                                                      \
    "ssat   %[" B "], #8, %[" B "], asr #1\n\t"
/* The block loop of rq_mode 1 and 2 in one asm block: every block's accumulator start, MAC
 * loop and 8 outputs with no register shuffles between them. The loop state the MAC loop has
 * no register for lives in a 56-byte frame below sp: [0] x, [4] x end, [8] and [12] 256 x the
 * sums of pixels a and b (c128 doubled, as the accumulators are after the MAC loop),
 * [16] q, [20] the constants' end, [24] out_a, [28] out_b, [32] the MAC loop's entry (its
 * first quad for an even quad count, its second for an odd one), [36] out_c % 4 (the partial
 * instance's last block), [40] and [44] the activation bounds, a byte each in every byte lane,
 * [48] the requantization's entry (with or without the sign correction). Both entries are
 * chosen once per call; a block enters each with one load of pc. Between blocks px holds q. In
 * the epilogue px holds q, xa the constants' end, xb and wv a row's multiplier and rq_add, end a
 * temporary; pw keeps the weights pointer. A row's two outputs are requantized and saturated to
 * int8 in their accumulators; the block's 4 rows of a pixel are then packed into one word (BFI),
 * whose store steps that pixel's output pointer. */
#define RLX_RQ_ROW2_ASM(A, B, OFF)                                                                                   \
    "ldrd   %[xb], %[wv], [%[px], #" OFF "]\n\t"                                                                   \
    "smmlar %[end], %[" A "], %[xb], %[wv]\n\t"                                                                     \
    "add    %[" A "], %[end], %[" A "], asr #31\n\t"                                                                \
    "smmlar %[end], %[" B "], %[xb], %[wv]\n\t"                                                                     \
    "add    %[" B "], %[end], %[" B "], asr #31\n\t"                                                                \
    RLX_RQ_ROW2_SHIFT(A, B)
/* RLX_RQ_ROW2_ASM without the sign correction (rlx_rq_fast's acc >> 31), for layers whose lower
 * bound is the output zero point (ReLU, ReLU6, or the int8 range at zero point -128): a negative
 * accumulator's output is that bound either way (its product term is at most 0, so the uncorrected
 * value is at most the zero point, as the exact one is), and a non-negative one has no correction. */
#define RLX_RQ_ROW2_NOSIGN_ASM(A, B, OFF)                                                                           \
    "ldrd   %[xb], %[wv], [%[px], #" OFF "]\n\t"                                                                   \
    "smmlar %[" A "], %[" A "], %[xb], %[wv]\n\t"                                                                   \
    "smmlar %[" B "], %[" B "], %[xb], %[wv]\n\t"                                                                   \
    RLX_RQ_ROW2_SHIFT(A, B)
/* rq_mode 1: the packed outputs of both pixels clamped to the activation's bounds, 4 lanes at a
 * time (SSUB8 sets a lane's GE flag where the difference is >= 0, SEL picks by it): the int8
 * saturation above changes nothing the clamp keeps, its bounds being inside int8. */
#define RLX_CLAMP4_ASM                                                                                               \
    "ldrd   %[a1], %[b1], [sp, #40]\n\t"                                                                            \
    "ssub8  %[a2], %[a0], %[a1]\n\t"                                                                                \
    "sel    %[a0], %[a0], %[a1]\n\t"                                                                                \
    "ssub8  %[a2], %[b0], %[a1]\n\t"                                                                                \
    "sel    %[b0], %[b0], %[a1]\n\t"                                                                                \
    "ssub8  %[a2], %[b1], %[a0]\n\t"                                                                                \
    "sel    %[a0], %[a0], %[b1]\n\t"                                                                                \
    "ssub8  %[a2], %[b1], %[b0]\n\t"                                                                                \
    "sel    %[b0], %[b0], %[b1]\n\t"
/* rlx_gemm_2px_lo's clamp: the lower bound alone (the upper one 127, which the saturation keeps) */
#define RLX_CLAMP_LO4_ASM                                                                                            \
    "ldr    %[a1], [sp, #40]\n\t"                                                                                   \
    "ssub8  %[a2], %[a0], %[a1]\n\t"                                                                                \
    "sel    %[a0], %[a0], %[a1]\n\t"                                                                                \
    "ssub8  %[a2], %[b0], %[a1]\n\t"                                                                                \
    "sel    %[b0], %[b0], %[a1]\n\t"
/* The MAC loop's entry and the loop: two quads a pass (RLX_GEMM_2PX_ASM_BODY), an odd count entering at
 * the second (bit 0 set: Thumb state); or four a pass (RLX_GEMM_2PX_ASM_BODY4: the instances VWW does
 * not link), a count of 4 n + 3, + 2, + 1 entering at the second, third, fourth quad */
#define RLX_GEMM_ENTRY2_ASM                                                                                          \
    "sub    %[xa], %[end], %[px]\n\t"                                                                               \
    "adr    %[a1], 1f + 1\n\t"                                                                                      \
    "tst    %[xa], #16\n\t"                                                                                         \
    "it     ne\n\t"                                                                                                 \
    "adrne  %[a1], 3f + 1\n\t"
#define RLX_GEMM_LOOP2_ASM                                                                                           \
    "1:\n\t" RLX_GEMM_QUAD_ASM "3:\n\t" RLX_GEMM_QUAD_ASM "cmp    %[px], %[end]\n\tbne    1b\n\t"
/* (the quad count's bits 0 and 1, 16 x them in the byte count, shifted to N and C: r = 1 is MI, 2 and 3
 * CS, 3 HI, as Z is !N) */
#define RLX_GEMM_ENTRY4_ASM                                                                                          \
    "sub    %[xa], %[end], %[px]\n\t"                                                                               \
    "adr    %[a1], 1f + 1\n\t"                                                                                      \
    "lsls   %[xa], %[xa], #27\n\t"                                                                                  \
    "it     mi\n\t"                                                                                                 \
    "adrmi  %[a1], 13f + 1\n\t"                                                                                     \
    "it     cs\n\t"                                                                                                 \
    "adrcs  %[a1], 12f + 1\n\t"                                                                                     \
    "it     hi\n\t"                                                                                                 \
    "adrhi  %[a1], 3f + 1\n\t"
#define RLX_GEMM_LOOP4_ASM                                                                                           \
    "1:\n\t" RLX_GEMM_QUAD_ASM "3:\n\t" RLX_GEMM_QUAD_ASM "12:\n\t" RLX_GEMM_QUAD_ASM "13:\n\t" RLX_GEMM_QUAD_ASM    \
        "cmp    %[px], %[end]\n\tbne    1b\n\t"
#define RLX_GEMM_2PX_ASM_BODY(CLAMP, STORE) RLX_GEMM_2PX_ASM_BODY_X(RLX_GEMM_ENTRY2_ASM, RLX_GEMM_LOOP2_ASM, CLAMP, STORE)
#define RLX_GEMM_2PX_ASM_BODY4(CLAMP, STORE) RLX_GEMM_2PX_ASM_BODY_X(RLX_GEMM_ENTRY4_ASM, RLX_GEMM_LOOP4_ASM, CLAMP, STORE)
#define RLX_GEMM_2PX_ASM_BODY_X(ENTRY, LOOP, CLAMP, STORE)                                                          \
    "sub    sp, sp, #56\n\t"                                                                                        \
    "strd   %[px], %[end], [sp, #0]\n\t"                                                                            \
    "strd   %[xa], %[xb], [sp, #8]\n\t"                                                                             \
    "strd   %[a0], %[wv], [sp, #16]\n\t"                                                                            \
    "strd   %[a1], %[a2], [sp, #24]\n\t"                                                                            \
    "strd   %[a3], %[b0], [sp, #40]\n\t"                                                                            \
    /* the MAC loop's entry */                                                                                     \
    ENTRY "strd   %[a1], %[b1], [sp, #32]\n\t"                                                                      \
    /* the requantization's entry: without the sign correction where b2 (the lower bound is the                     \
     * zero point) */                                                                                               \
    "adr    %[a1], 4f + 1\n\t"                                                                                      \
    "cmp    %[b2], #0\n\t"                                                                                          \
    "it     ne\n\t"                                                                                                 \
    "adrne  %[a1], 8f + 1\n\t"                                                                                      \
    "str    %[a1], [sp, #48]\n\t"                                                                                   \
    "mov    %[px], %[a0]\n\t"                                                                                       \
    "2:\n\t"                                                                                                        \
    /* the accumulators' start: the block's 4 biases (the even rows' + 256 x the odd rows', as                      \
     * SMLAD of a raw weight word sums), for both pixels */                                                         \
    "ldrd   %[a0], %[a1], [%[px]]\n\t"                                                                              \
    "ldrd   %[b0], %[b1], [%[px]]\n\t"                                                                              \
    "ldrd   %[a2], %[a3], [%[px], #8]\n\t"                                                                          \
    "ldrd   %[b2], %[b3], [%[px], #8]\n\t"                                                                          \
    "ldrd   %[px], %[end], [sp, #0]\n\t"                                                                            \
    "ldr    pc, [sp, #32]\n\t" LOOP                                                                                \
    /* every accumulator doubled (rlx_rq_fast's acc << 1), the even rows' less 256 sum(x) ([8], [12])               \
     * and 512 x the odd row's (rlx_even_start, rlx_even_end), then the rows, packed a pixel a word                 \
     * and stored */                                                                                                \
    "ldrd   %[xa], %[xb], [sp, #8]\n\t"                                                                             \
    "rsb    %[a0], %[xa], %[a0], lsl #1\n\t"                                                                        \
    "sub    %[a0], %[a0], %[a1], lsl #9\n\t"                                                                        \
    "rsb    %[b0], %[xb], %[b0], lsl #1\n\t"                                                                        \
    "sub    %[b0], %[b0], %[b1], lsl #9\n\t"                                                                        \
    "rsb    %[a2], %[xa], %[a2], lsl #1\n\t"                                                                        \
    "sub    %[a2], %[a2], %[a3], lsl #9\n\t"                                                                        \
    "rsb    %[b2], %[xb], %[b2], lsl #1\n\t"                                                                        \
    "sub    %[b2], %[b2], %[b3], lsl #9\n\t"                                                                        \
    "lsl    %[a1], %[a1], #1\n\t"                                                                                   \
    "lsl    %[b1], %[b1], #1\n\t"                                                                                   \
    "lsl    %[a3], %[a3], #1\n\t"                                                                                   \
    "lsl    %[b3], %[b3], #1\n\t"                                                                                   \
    "ldrd   %[px], %[xa], [sp, #16]\n\t"                                                                            \
    "ldr    pc, [sp, #48]\n\t"                                                                                      \
    "8:\n\t" RLX_RQ_ROW2_ASM("a0", "b0", "16") RLX_RQ_ROW2_ASM("a1", "b1", "24") RLX_RQ_ROW2_ASM("a2", "b2", "32")  \
        RLX_RQ_ROW2_ASM("a3", "b3", "40") "b      9f\n\t"                                                           \
    /* word-aligns the section for the ADRs above (fixed at assembly); padding after b, never run */                \
    ".p2align 2\n\t"                                                                                                \
    "4:\n\t" RLX_RQ_ROW2_NOSIGN_ASM("a0", "b0", "16") RLX_RQ_ROW2_NOSIGN_ASM("a1", "b1", "24")                      \
        RLX_RQ_ROW2_NOSIGN_ASM("a2", "b2", "32") RLX_RQ_ROW2_NOSIGN_ASM("a3", "b3", "40")                           \
    "9:\n\t"                                                                                                        \
    "bfi    %[a0], %[a1], #8, #8\n\t"                                                                               \
    "bfi    %[b0], %[b1], #8, #8\n\t"                                                                               \
    "bfi    %[a0], %[a2], #16, #8\n\t"                                                                              \
    "bfi    %[b0], %[b2], #16, #8\n\t"                                                                              \
    "bfi    %[a0], %[a3], #24, #8\n\t"                                                                              \
    "bfi    %[b0], %[b3], #24, #8\n\t" CLAMP "ldrd   %[end], %[xb], [sp, #24]\n\t" STORE "add    sp, sp, #56\n\t"
/* The outputs of a block of whole rows: a word a pixel (end: out_a, xb: out_b), then the next block. */
#define RLX_STORE_WHOLE_ASM                                                                                         \
    "str    %[a0], [%[end]], #4\n\t"                                                                                \
    "str    %[b0], [%[xb]], #4\n\t"                                                                                 \
    "strd   %[end], %[xb], [sp, #24]\n\t"                                                                           \
    "add    %[px], %[px], #48\n\t"                                                                                  \
    "str    %[px], [sp, #16]\n\t"                                                                                   \
    "cmp    %[px], %[xa]\n\t"                                                                                       \
    "bne    2b\n\t"
/* out_c % 4 != 0: the last block's rows that exist ([36]: out_c % 4, shifted to the flags: C its bit 1, N
 * its bit 0) as a halfword, then a byte. */
#define RLX_STORE_PART_ASM                                                                                          \
    "add    %[px], %[px], #48\n\t"                                                                                  \
    "cmp    %[px], %[xa]\n\t"                                                                                       \
    "beq    5f\n\t"                                                                                                 \
    "str    %[a0], [%[end]], #4\n\t"                                                                                \
    "str    %[b0], [%[xb]], #4\n\t"                                                                                 \
    "strd   %[end], %[xb], [sp, #24]\n\t"                                                                           \
    "str    %[px], [sp, #16]\n\t"                                                                                   \
    "b      2b\n\t"                                                                                                 \
    "5:\n\t"                                                                                                        \
    "ldr    %[xa], [sp, #36]\n\t"                                                                                   \
    "lsls   %[xa], %[xa], #31\n\t"                                                                                  \
    "itttt  cs\n\t"                                                                                                 \
    "strhcs %[a0], [%[end]], #2\n\t"                                                                                \
    "strhcs %[b0], [%[xb]], #2\n\t"                                                                                 \
    "lsrcs  %[a0], %[a0], #16\n\t"                                                                                  \
    "lsrcs  %[b0], %[b0], #16\n\t"                                                                                  \
    "itt    mi\n\t"                                                                                                 \
    "strbmi %[a0], [%[end]]\n\t"                                                                                    \
    "strbmi %[b0], [%[xb]]\n\t"
/* the 14 registers, with their values at entry (the frame's, stored first); the bounds are
 * read by the clamp only */
#define RLX_GEMM_2PX_ASM_REGS(LO4, HI4, REST)                                                                       \
    uint32_t a0 = (uint32_t)q, a1 = (uint32_t)out_a, a2 = (uint32_t)out_b, a3 = (LO4), b0 = (HI4);                  \
    uint32_t b1 = (REST), b2 = (uint32_t)(g->act_min - g->out_zp), b3 = 0;                                          \
    uint32_t px = (uint32_t)x, end = (uint32_t)(x + 8 * g->k_quads), xa = c128[0] << 1, xb = c128[1] << 1;          \
    uint32_t wv = (uint32_t)qend, pw = (uint32_t)w
#define RLX_GEMM_2PX_ASM_OPS                                                                                         \
    : [a0] "+r"(a0), [a1] "+r"(a1), [a2] "+r"(a2), [a3] "+r"(a3), [b0] "+r"(b0), [b1] "+r"(b1), [b2] "+r"(b2),       \
      [b3] "+r"(b3), [px] "+r"(px), [end] "+r"(end), [xa] "+r"(xa), [xb] "+r"(xb), [wv] "+r"(wv), [pw] "+r"(pw)     \
    :                                                                                                                \
    : "cc", "memory"

/* rq_mode 2 (no clamp), the whole blocks [q, qend) (rlx_gemm_blocks_fn) */
RLX_INLINE void rlx_gemm_2px_asm_sat(const rlx_gemm_params *g, const int32_t *q, const int32_t *qend,
                                              const int8_t *w, const int16_t *x, int8_t *out_a, int8_t *out_b,
                                              const uint32_t *c128)
{
    RLX_GEMM_2PX_ASM_REGS(0u, 0u, 0u);
    __asm__ volatile(RLX_GEMM_2PX_ASM_BODY("", RLX_STORE_WHOLE_ASM) RLX_GEMM_2PX_ASM_OPS);
}

/* rq_mode 1 (and 2, whose bounds are int8's), the whole blocks [q, qend) */
RLX_INLINE void rlx_gemm_2px_asm_clamp(const rlx_gemm_params *g, const int32_t *q, const int32_t *qend,
                                                const int8_t *w, const int16_t *x, int8_t *out_a, int8_t *out_b,
                                                const uint32_t *c128)
{
    RLX_GEMM_2PX_ASM_REGS((uint32_t)(uint8_t)g->act_min * 0x01010101u, (uint32_t)(uint8_t)g->act_max * 0x01010101u,
                          0u);
    __asm__ volatile(RLX_GEMM_2PX_ASM_BODY(RLX_CLAMP4_ASM, RLX_STORE_WHOLE_ASM) RLX_GEMM_2PX_ASM_OPS);
}
/* rq_mode 1 with the upper bound 127 (ReLU), the whole blocks [q, qend) */
RLX_INLINE void rlx_gemm_2px_asm_lo(const rlx_gemm_params *g, const int32_t *q, const int32_t *qend,
                                    const int8_t *w, const int16_t *x, int8_t *out_a, int8_t *out_b,
                                    const uint32_t *c128)
{
    RLX_GEMM_2PX_ASM_REGS((uint32_t)(uint8_t)g->act_min * 0x01010101u, 0u, 0u);
    __asm__ volatile(RLX_GEMM_2PX_ASM_BODY4(RLX_CLAMP_LO4_ASM, RLX_STORE_WHOLE_ASM) RLX_GEMM_2PX_ASM_OPS);
}
/* out_c % 4 != 0, rq_mode 1 (and 2, whose bounds are int8's): every block in one pass, the last
 * one's existing rows stored a byte at a time */
RLX_INLINE void rlx_gemm_2px_asm_part(const rlx_gemm_params *g, const int16_t *x, int8_t *out_a, int8_t *out_b,
                                                   const uint32_t *c128)
{
    const int32_t *const q = g->chan, *const qend = q + RLX_CHAN_WORDS * ((g->out_c + 3) >> 2);
    const int8_t *const w = g->weights;
    RLX_GEMM_2PX_ASM_REGS((uint32_t)(uint8_t)g->act_min * 0x01010101u, (uint32_t)(uint8_t)g->act_max * 0x01010101u,
                          (uint32_t)g->out_c & 3u);
    __asm__ volatile(RLX_GEMM_2PX_ASM_BODY4(RLX_CLAMP4_ASM, RLX_STORE_PART_ASM) RLX_GEMM_2PX_ASM_OPS);
}
/* rlx_gemm_2px_asm_part with the upper bound 127 (ReLU): the lower bound's clamp alone */
RLX_INLINE void rlx_gemm_2px_asm_part_lo(const rlx_gemm_params *g, const int16_t *x, int8_t *out_a, int8_t *out_b,
                                         const uint32_t *c128)
{
    const int32_t *const q = g->chan, *const qend = q + RLX_CHAN_WORDS * ((g->out_c + 3) >> 2);
    const int8_t *const w = g->weights;
    RLX_GEMM_2PX_ASM_REGS((uint32_t)(uint8_t)g->act_min * 0x01010101u, 0u, (uint32_t)g->out_c & 3u);
    __asm__ volatile(RLX_GEMM_2PX_ASM_BODY4(RLX_CLAMP_LO4_ASM, RLX_STORE_PART_ASM) RLX_GEMM_2PX_ASM_OPS);
}
#define RLX_BLOCKS_SAT rlx_gemm_2px_asm_sat
#define RLX_BLOCKS_CLAMP rlx_gemm_2px_asm_clamp
#else
static RLX_NOINLINE void rlx_gemm_2px_blocks_sat(const rlx_gemm_params *g, const int32_t *q, const int32_t *qend,
                                                 const int8_t *w, const int16_t *x, int8_t *out_a, int8_t *out_b,
                                                 const uint32_t *c128)
{
    rlx_gemm_2px_blocks(g, q, qend, w, x, out_a, out_b, c128, 2);
}

static RLX_NOINLINE void rlx_gemm_2px_blocks_clamp(const rlx_gemm_params *g, const int32_t *q, const int32_t *qend,
                                                   const int8_t *w, const int16_t *x, int8_t *out_a, int8_t *out_b,
                                                   const uint32_t *c128)
{
    rlx_gemm_2px_blocks(g, q, qend, w, x, out_a, out_b, c128, 1);
}
#define RLX_BLOCKS_SAT rlx_gemm_2px_blocks_sat
#define RLX_BLOCKS_CLAMP rlx_gemm_2px_blocks_clamp
#endif

/* A block loop over any out_c: the whole blocks in place, then the last, partial one (its
 * missing rows: weights 0, multiplier 0, rq_add 1, rules._gemm) into a local block, of which
 * the rows that exist are copied. (Row tests in the block loop leave GCC at -Og and -O1 short
 * of registers for the MAC asm.) */
static void rlx_gemm_2px_any(const rlx_gemm_params *g, const int16_t *x, int8_t *out_a, int8_t *out_b,
                             const uint32_t *c128, rlx_gemm_blocks_fn blocks)
{
    const int32_t whole = g->out_c & ~3, rest = g->out_c & 3;
    const int32_t *const qw = g->chan + RLX_CHAN_WORDS * (whole >> 2);
    blocks(g, g->chan, qw, g->weights, x, out_a, out_b, c128);
    if (rest > 0) {
        int8_t ta[4], tb[4];
        blocks(g, qw, qw + RLX_CHAN_WORDS, g->weights + 4 * whole * g->k_quads, x, ta, tb, c128);
        rlx_copy_short(out_a + whole, ta, rest);
        rlx_copy_short(out_b + whole, tb, rest);
    }
}

/* One instance per requantization, named by the emitter in rlx_gemm_params.gemm2
 * (rules._conv_layer): a model links only those its layers use. rq_mode 1 and 2 differ only
 * in the clamp's bounds, so the partial-block instance runs both as mode 1. */
RLX_NOINLINE void rlx_gemm_2px_ref(const rlx_gemm_params *g, const int16_t *x, int8_t *out_a, int8_t *out_b,
                                   const uint32_t *c128)
{
    rlx_gemm_2px_any(g, x, out_a, out_b, c128, rlx_gemm_2px_blocks_ref);
}

RLX_NOINLINE void rlx_gemm_2px_clamp(const rlx_gemm_params *g, const int16_t *x, int8_t *out_a, int8_t *out_b,
                                     const uint32_t *c128)
{
    RLX_BLOCKS_CLAMP(g, g->chan, g->chan + RLX_CHAN_WORDS * (g->out_c >> 2), g->weights, x, out_a, out_b, c128);
}

RLX_NOINLINE void rlx_gemm_2px_lo(const rlx_gemm_params *g, const int16_t *x, int8_t *out_a, int8_t *out_b,
                                  const uint32_t *c128)
{
#if RLX_GEMM_ASM
    rlx_gemm_2px_asm_lo(g, g->chan, g->chan + RLX_CHAN_WORDS * (g->out_c >> 2), g->weights, x, out_a, out_b, c128);
#else
    RLX_BLOCKS_CLAMP(g, g->chan, g->chan + RLX_CHAN_WORDS * (g->out_c >> 2), g->weights, x, out_a, out_b, c128);
#endif
}

RLX_NOINLINE void rlx_gemm_2px_part(const rlx_gemm_params *g, const int16_t *x, int8_t *out_a, int8_t *out_b,
                                    const uint32_t *c128)
{
#if RLX_GEMM_ASM
    rlx_gemm_2px_asm_part(g, x, out_a, out_b, c128);
#else
    rlx_gemm_2px_any(g, x, out_a, out_b, c128, RLX_BLOCKS_CLAMP);
#endif
}

RLX_NOINLINE void rlx_gemm_2px_part_lo(const rlx_gemm_params *g, const int16_t *x, int8_t *out_a, int8_t *out_b,
                                       const uint32_t *c128)
{
#if RLX_GEMM_ASM
    rlx_gemm_2px_asm_part_lo(g, x, out_a, out_b, c128);
#else
    rlx_gemm_2px_any(g, x, out_a, out_b, c128, RLX_BLOCKS_CLAMP);
#endif
}

RLX_NOINLINE void rlx_gemm_2px_sat(const rlx_gemm_params *g, const int16_t *x, int8_t *out_a, int8_t *out_b,
                                   const uint32_t *c128)
{
    RLX_BLOCKS_SAT(g, g->chan, g->chan + RLX_CHAN_WORDS * (g->out_c >> 2), g->weights, x, out_a, out_b, c128);
}

/* One quad (4 reduction elements) of one pixel into the accumulators of a
 * block of 4 output channels: DSP, the elements as the pairs (0, 2) and
 * (1, 3) that SXTB16 gives, against the block's 4 weight words (raw into the
 * even rows, SXTB16 ROR 8 into the odd rows); portable, the elements
 * against the block's 16 bytes. */
#if RLX_USE_DSP
RLX_INLINE void rlx_mac4_quad(uint32_t x02, uint32_t x13, const int8_t *w, int32_t *a0, int32_t *a1, int32_t *a2,
                              int32_t *a3)
{
    uint32_t v = rlx_rd32(w);
    *a0 = rlx_smlad(x02, v, *a0);
    *a1 = rlx_smlad(x02, rlx_sxtb16_ror8(v), *a1);
    v = rlx_rd32(w + 4);
    *a2 = rlx_smlad(x02, v, *a2);
    *a3 = rlx_smlad(x02, rlx_sxtb16_ror8(v), *a3);
    v = rlx_rd32(w + 8);
    *a0 = rlx_smlad(x13, v, *a0);
    *a1 = rlx_smlad(x13, rlx_sxtb16_ror8(v), *a1);
    v = rlx_rd32(w + 12);
    *a2 = rlx_smlad(x13, v, *a2);
    *a3 = rlx_smlad(x13, rlx_sxtb16_ror8(v), *a3);
}
#else
RLX_INLINE void rlx_mac4_quad(int32_t x0, int32_t x1, int32_t x2, int32_t x3, const int8_t *w, int32_t *a0,
                              int32_t *a1, int32_t *a2, int32_t *a3)
{
    const uint8_t *u = (const uint8_t *)w; /* the even rows: w + 128 */
    *a0 += x0 * u[0] + x1 * u[8] + x2 * u[2] + x3 * u[10];
    *a1 += x0 * w[1] + x1 * w[9] + x2 * w[3] + x3 * w[11];
    *a2 += x0 * u[4] + x1 * u[12] + x2 * u[6] + x3 * u[14];
    *a3 += x0 * w[5] + x1 * w[13] + x2 * w[7] + x3 * w[15];
}
#endif

/* 4 output channels of one row (rows of them exist) from the block's constants q, to out, with
 * requantization mode. */
RLX_INLINE void rlx_store4_mode(const rlx_gemm_params *g, const int32_t *q, int32_t rows, int32_t a0, int32_t a1,
                                int32_t a2, int32_t a3, int8_t *out, int32_t mode)
{
    const int32_t zp = g->out_zp, lo = g->act_min, hi = g->act_max;
    out[0] = (int8_t)rlx_chan_out(mode, zp, lo, hi, q[4], q[5], rlx_even_end(a0, a1));
    if (rows > 1) {
        out[1] = (int8_t)rlx_chan_out(mode, zp, lo, hi, q[6], q[7], a1);
    }
    if (rows > 2) {
        out[2] = (int8_t)rlx_chan_out(mode, zp, lo, hi, q[8], q[9], rlx_even_end(a2, a3));
    }
    if (rows > 3) {
        out[3] = (int8_t)rlx_chan_out(mode, zp, lo, hi, q[10], q[11], a3);
    }
}

/* rq_mode 0 (the reference formula, where the fast form is not proven: rare) out of line: its
 * branches are not copied into every caller's flash, nor its registers into the fast path; a loop
 * over the rows, so that the formula's code is there once, not four times. */
static RLX_NOINLINE void rlx_store4_ref(const rlx_gemm_params *g, const int32_t *q, int32_t rows, int32_t a0,
                                        int32_t a1, int32_t a2, int32_t a3, int8_t *out)
{
    const int32_t acc[4] = {rlx_even_end(a0, a1), a1, rlx_even_end(a2, a3), a3};
    rows = rows < 4 ? rows : 4;
    for (int32_t r = 0; r < rows; r++) {
        out[r] = (int8_t)rlx_chan_out(0, g->out_zp, g->act_min, g->act_max, q[4 + 2 * r], q[5 + 2 * r], acc[r]);
    }
}

RLX_INLINE void rlx_store4(const rlx_gemm_params *g, const int32_t *q, int32_t rows, int32_t a0, int32_t a1,
                           int32_t a2, int32_t a3, int8_t *out)
{
    if (g->rq_mode == 0) {
        rlx_store4_ref(g, q, rows, a0, a1, a2, a3, out);
    } else {
        rlx_store4_mode(g, q, rows, a0, a1, a2, a3, out, g->rq_mode);
    }
}

/* 4 output channels x 1 row of int8 input read in place (fully connected):
 * no scratch. On DSP cores each input word is widened in registers
 * (SXTB16, SXTB16 ROR 8) once for 4 channels. The last, partial quad is
 * one zero-filled word, read without reading past the row. */
#if RLX_GEMM_ASM
/* rlx_mac4_quad of the next input word (at r6) against the block's next 4 weight words (at r12):
 * 1 + 1 loads (LDM), 2 + 4 SXTB16, 8 SMLAD for 16 MACs; accumulators r0-r3, the weights r8-r11,
 * the input's pairs r4 (0, 2) and r5 (1, 3) */
#define RLX_ROW_LDM_MACS                                                                         \
    "ldm    r12!, {r8, r9, r10, r11}\n\t"                                                        \
    "smlad  r0, r4, r8, r0\n\t"                                                                  \
    "sxtb16 r8, r8, ror #8\n\t"                                                                  \
    "smlad  r1, r4, r8, r1\n\t"                                                                  \
    "smlad  r2, r4, r9, r2\n\t"                                                                  \
    "sxtb16 r9, r9, ror #8\n\t"                                                                  \
    "smlad  r3, r4, r9, r3\n\t"                                                                  \
    "smlad  r0, r5, r10, r0\n\t"                                                                 \
    "sxtb16 r10, r10, ror #8\n\t"                                                                \
    "smlad  r1, r5, r10, r1\n\t"                                                                 \
    "smlad  r2, r5, r11, r2\n\t"                                                                 \
    "sxtb16 r11, r11, ror #8\n\t"                                                                \
    "smlad  r3, r5, r11, r3\n\t"
#define RLX_ROW_LDM_QUAD                                                                         \
    "ldr    r5, [r6], #4\n\t"                                                                    \
    "sxtb16 r4, r5\n\t"                                                                          \
    "sxtb16 r5, r5, ror #8\n\t" RLX_ROW_LDM_MACS
/* One row's accumulator A to its int8 output in A, rq_mode 1 and 2 (rlx_chan_out's mode 2; the
 * clamp of mode 1 follows on the packed word), its multiplier and rq_add at [r6, #OFF] */
#define RLX_RQ_ROW1_ASM(A, OFF)                                                                  \
    "ldrd   r8, r9, [r6, #" OFF "]\n\t"                                                          \
    "lsl    r10, " A ", #1\n\t"                                                                  \
    "smmlar r10, r10, r8, r9\n\t"                                                                \
    "add    r10, r10, " A ", asr #31\n\t"                                                        \
    "rbit   r9, r9\n\t"                                                                          \
    "clz    r9, r9\n\t"                                                                          \
    "asr    r10, r10, r9\n\t"                                                                    \
    "ssat   " A ", #8, r10, asr #1\n\t"
#endif
/* acc + the 4 bytes of w + 128 each (their sign bits flipped): USADA8 against 0. */
RLX_INLINE uint32_t rlx_sum4_u8(uint32_t w, uint32_t acc)
{
#if RLX_GEMM_ASM
    uint32_t r;
    __asm__("usada8 %0, %1, %2, %3" : "=r"(r) : "r"(w ^ 0x80808080u), "r"(0u), "r"(acc));
    return r;
#else
    w ^= 0x80808080u;
    return acc + (w & 0xFFu) + ((w >> 8) & 0xFFu) + ((w >> 16) & 0xFFu) + (w >> 24);
#endif
}

#if RLX_GEMM_ASM
/* rq_mode 1 and 2 (2 is 1 with int8's bounds) of one row of input: every block of 4 rows in one
 * asm block, its accumulators' start, its MAC loop over the whole quads (four a pass, entered at
 * the quad that leaves a multiple of 4), the partial last quad (its two SXTB16 pairs t02, t13 ready), and
 * its 4 outputs requantized as RLX_RQ_ROW2_ASM does (one pixel), packed (BFI), clamped 4 lanes at
 * a time (SSUB8, SEL) and stored as one word, or a byte at a time for the rows that exist of a
 * partial last block. The registers are named (LDM fills them in ascending order): r0-r3 the
 * accumulators, r4 r5 the input's pairs, r6 the input, r8-r11 the weights, r12 the weights'
 * pointer, lr the whole quads' end (r7 stays GCC's: its frame pointer where it keeps one); the
 * rest lives in a 44-byte frame below sp: [0] the block's constants q, [4] 128 sum(x), [8] the
 * input row, [12] where the MAC loop starts (its first or second quad, or past it), [16] where a
 * block goes after its whole quads (the partial quad, or past it), [20] t02, [24] t13, [28] and
 * [32] the bounds (a byte each in every lane), [36] the output, [40] its end. Inlined only into
 * rlx_gemm_row_s8, which is out of line. */
RLX_INLINE void rlx_gemm_row_asm(const int32_t *q, const int8_t *w, const int8_t *x, const int8_t *x_end,
                                 uint32_t c128, int8_t *out, int8_t *out_end, uint32_t lo4, uint32_t hi4, uint32_t t02,
                                 uint32_t t13, uint32_t partial, uint32_t full)
{
    register uint32_t r0 __asm__("r0") = (uint32_t)q;
    register uint32_t r1 __asm__("r1") = c128;
    register uint32_t r2 __asm__("r2") = (uint32_t)x;
    register uint32_t r3 __asm__("r3") = t02;
    register uint32_t r4 __asm__("r4") = t13;
    register uint32_t r5 __asm__("r5") = lo4;
    register uint32_t r6 __asm__("r6") = hi4;
    register uint32_t r8 __asm__("r8") = (uint32_t)out;
    register uint32_t r9 __asm__("r9") = (uint32_t)out_end;
    register uint32_t r10 __asm__("r10") = partial;
    register uint32_t r11 __asm__("r11") = full;
    register uint32_t r12 __asm__("r12") = (uint32_t)w;
    register uint32_t lr __asm__("lr") = (uint32_t)x_end;
    __asm__ volatile(
        "sub    sp, sp, #44\n\t"
        "stm    sp, {r0, r1, r2}\n\t"
        "strd   r3, r4, [sp, #20]\n\t"
        "strd   r5, r6, [sp, #28]\n\t"
        "strd   r8, r9, [sp, #36]\n\t"
        /* after the whole quads: the partial quad, or past it (bit 0 set: Thumb) */
        "adr    r3, 7f + 1\n\t"
        "cmp    r10, #0\n\t"
        "it     eq\n\t"
        "adreq  r3, 4f + 1\n\t"
        "str    r3, [sp, #16]\n\t"
        /* the MAC loop's entry (four quads a pass): its first quad, or for a count of 4 n + 3, + 2, + 1
         * its second, third, fourth (the count's bits 0 and 1 shifted to N and C: MI, CS, and HI for 3,
         * as Z is !N), or none */
        "adr    r3, 8f + 1\n\t"
        "lsls   r4, r11, #31\n\t"
        "it     mi\n\t"
        "adrmi  r3, 11f + 1\n\t"
        "it     cs\n\t"
        "adrcs  r3, 10f + 1\n\t"
        "it     hi\n\t"
        "adrhi  r3, 9f + 1\n\t"
        "cmp    r11, #0\n\t"
        "it     eq\n\t"
        "adreq  r3, 3f + 1\n\t"
        "str    r3, [sp, #12]\n\t"
        "2:\n\t"
        /* the accumulators' start (rlx_even_start) */
        "ldm    sp, {r4, r5, r6}\n\t"
        "ldm    r4, {r0, r1, r2, r3}\n\t"
        "sub    r0, r0, r5\n\t"
        "sub    r2, r2, r5\n\t"
        "ldr    pc, [sp, #12]\n\t"
        "8:\n\t" RLX_ROW_LDM_QUAD "9:\n\t" RLX_ROW_LDM_QUAD "10:\n\t" RLX_ROW_LDM_QUAD "11:\n\t" RLX_ROW_LDM_QUAD
        "cmp    r6, lr\n\t"
        "bne    8b\n\t"
        "3:\n\t"
        "ldr    pc, [sp, #16]\n\t"
        "7:\n\t"
        "ldrd   r4, r5, [sp, #20]\n\t" RLX_ROW_LDM_MACS
        "4:\n\t"
        /* the even rows less 256 x the odd rows (rlx_even_end), then each row's output */
        "sub    r0, r0, r1, lsl #8\n\t"
        "sub    r2, r2, r3, lsl #8\n\t"
        "ldr    r6, [sp]\n\t"
        RLX_RQ_ROW1_ASM("r0", "16") RLX_RQ_ROW1_ASM("r1", "24") RLX_RQ_ROW1_ASM("r2", "32")
        RLX_RQ_ROW1_ASM("r3", "40")
        "add    r6, r6, #48\n\t"
        "str    r6, [sp]\n\t"
        "bfi    r0, r1, #8, #8\n\t"
        "bfi    r0, r2, #16, #8\n\t"
        "bfi    r0, r3, #24, #8\n\t"
        "ldrd   r4, r5, [sp, #28]\n\t"
        "ssub8  r6, r0, r4\n\t"
        "sel    r0, r0, r4\n\t"
        "ssub8  r6, r5, r0\n\t"
        "sel    r0, r0, r5\n\t"
        "ldrd   r8, r9, [sp, #36]\n\t"
        "sub    r10, r9, r8\n\t"
        "cmp    r10, #4\n\t"
        "blt    5f\n\t"
        "str    r0, [r8], #4\n\t"
        "str    r8, [sp, #36]\n\t"
        "cmp    r8, r9\n\t"
        "bne    2b\n\t"
        "b      6f\n\t"
        "5:\n\t"
        "strb   r0, [r8], #1\n\t"
        "lsr    r0, r0, #8\n\t"
        "subs   r10, r10, #1\n\t"
        "bne    5b\n\t"
        "6:\n\t"
        "add    sp, sp, #44"
        : "+r"(r0), "+r"(r1), "+r"(r2), "+r"(r3), "+r"(r4), "+r"(r5), "+r"(r6), "+r"(r8), "+r"(r9), "+r"(r10),
          "+r"(r11), "+r"(r12), "+r"(lr)
        :
        : "cc", "memory");
}
#endif

/* out of line: see rlx_gemm_row_asm. 4-byte aligned: the asm's ADR offsets are fixed when it is
 * assembled, against PC rounded down to a word, so its section must start on one (at -Os, -O1
 * and -Og GCC aligns functions to 2 bytes only, and a jump lands mid-instruction) */
#if RLX_GEMM_ASM
#define RLX_ROW_ALIGN __attribute__((aligned(4)))
#else
#define RLX_ROW_ALIGN
#endif
static RLX_NOINLINE RLX_ROW_ALIGN void rlx_gemm_row_s8(const rlx_gemm_params *g, const int8_t *x, int32_t n,
                                                        int8_t *out)
{
    const int32_t full = n >> 2, rem = n & 3;
    /* the last, partial quad as one word, zero-filled: with a whole quad before it, the word
     * ending at the row's end shifted down (nothing read past the row), else byte by byte */
    uint32_t tail = 0;
    if (rem != 0) {
        if (full > 0) {
            tail = rlx_rd32(x + n - 4) >> (8 * (4 - rem));
        } else {
            for (int32_t k = 0; k < rem; k++) {
                tail |= ((uint32_t)(uint8_t)x[k]) << (8 * k);
            }
        }
    }
    /* the row's sum: a word at a time on DSP cores (USADA8 of the biased bytes, the tail word's
     * zero bytes biased to 128 like the rest), less the bias */
#if RLX_USE_DSP
    uint32_t biased = rem != 0 ? rlx_sum4_u8(tail, 0) : 0;
#if RLX_GEMM_ASM
    /* an odd word first, then 4 instructions a word, two a pass (GCC's loop takes 6 a word: it
     * rematerializes the 0 in the loop) */
    if (full & 1) {
        biased = rlx_sum4_u8(rlx_rd32(x), biased);
    }
    if (full > 1) {
        const int8_t *px = x + 4 * (full & 1);
        uint32_t v, u;
        __asm__("1:\n\t"
                "ldr    %[v], [%[px]], #8\n\t"
                "ldr    %[u], [%[px], #-4]\n\t"
                "eor    %[v], %[v], #0x80808080\n\t"
                "eor    %[u], %[u], #0x80808080\n\t"
                "usada8 %[s], %[v], %[z], %[s]\n\t"
                "usada8 %[s], %[u], %[z], %[s]\n\t"
                "cmp    %[px], %[end]\n\t"
                "bne    1b"
                : [s] "+r"(biased), [px] "+r"(px), [v] "=&r"(v), [u] "=&r"(u)
                : [z] "r"(0u), [end] "r"(x + 4 * full), "m"(*(const int8_t(*)[])x)
                : "cc");
    }
#else
    for (int32_t k = 0; k < 4 * full; k += 4) {
        biased = rlx_sum4_u8(rlx_rd32(x + k), biased);
    }
#endif
    const int32_t sum = (int32_t)(biased - 512u * (uint32_t)g->k_quads); /* k_quads: full + (rem != 0) */
#else
    int32_t sum = 0;
    for (int32_t k = 0; k < n; k++) {
        sum += x[k];
    }
#endif
    const uint32_t c128 = (uint32_t)sum << 7;
    const int8_t *w = g->weights;
#if RLX_GEMM_ASM
    if (g->rq_mode != 0) {
        rlx_gemm_row_asm(g->chan, w, x, x + 4 * full, c128, out, out + g->out_c,
                         (uint32_t)(uint8_t)g->act_min * 0x01010101u, (uint32_t)(uint8_t)g->act_max * 0x01010101u,
                         rlx_sxtb16(tail), rlx_sxtb16_ror8(tail), (uint32_t)rem, (uint32_t)full);
        return;
    }
    /* rq_mode 0 (rare): one plain loop over the quads, the partial one the tail word (the fewest
     * bytes of flash: no model measured here runs it), the reference requantization in C */
    int8_t *const out_end = out + g->out_c;
    const int32_t kq = full + (rem != 0);
    for (const int32_t *bias = g->chan; out < out_end; bias += RLX_CHAN_WORDS, out += 4) {
        int32_t a0 = rlx_even_start(bias, c128), a1 = bias[1], a2 = rlx_even_start(bias + 2, c128), a3 = bias[3];
        for (int32_t q = 0; q < kq; q++, w += 16) {
            const uint32_t xv = q < full ? rlx_rd32(x + 4 * q) : tail;
            rlx_mac4_quad(rlx_sxtb16(xv), rlx_sxtb16_ror8(xv), w, &a0, &a1, &a2, &a3);
        }
        rlx_store4_ref(g, bias, out_end - out, a0, a1, a2, a3, out);
    }
#else
    for (int32_t ob = 0; ob < g->out_c; ob += 4) {
        const int32_t *bias = g->chan + 3 * ob;
        int32_t a0 = rlx_even_start(bias, c128), a1 = bias[1], a2 = rlx_even_start(bias + 2, c128), a3 = bias[3];
        /* the whole quads, then the partial one (no test of which a quad is in the loop) */
        const int8_t *px = x;
        for (int32_t q = 0; q < full; q++, px += 4, w += 16) {
#if RLX_USE_DSP
            const uint32_t xv = rlx_rd32(px);
            rlx_mac4_quad(rlx_sxtb16(xv), rlx_sxtb16_ror8(xv), w, &a0, &a1, &a2, &a3);
#else
            rlx_mac4_quad(px[0], px[1], px[2], px[3], w, &a0, &a1, &a2, &a3);
#endif
        }
        if (rem != 0) {
#if RLX_USE_DSP
            rlx_mac4_quad(rlx_sxtb16(tail), rlx_sxtb16_ror8(tail), w, &a0, &a1, &a2, &a3);
#else
            rlx_mac4_quad((int8_t)tail, (int8_t)(tail >> 8), (int8_t)(tail >> 16), (int8_t)(tail >> 24), w, &a0, &a1,
                          &a2, &a3);
#endif
            w += 16;
        }
        rlx_store4(g, bias, g->out_c - ob, a0, a1, a2, a3, out + ob);
    }
#endif
}

typedef void (*rlx_gather_fn)(const rlx_conv_params *p, const int8_t *img, int32_t oy, int32_t ox, int16_t *dst,
                              int32_t s);

/* The whole quads of pixels a and b (n int8 values each, n % 4 == 0) into their slots from
 * int16 index 0 of d (rlx_widen_row's order for both), their values added to *suma, *sumb. */
RLX_INLINE void rlx_widen_pair_quads(const int8_t *sa, const int8_t *sb, int32_t n, int16_t *d, int32_t *suma,
                                     int32_t *sumb)
{
    int32_t ta = *suma, tb = *sumb;
    for (int32_t k = 0; k < n; k += 4) {
#if RLX_USE_DSP
        const uint32_t wa = rlx_rd32(sa + k), wb = rlx_rd32(sb + k);
        const uint32_t a02 = rlx_sxtb16(wa), a13 = rlx_sxtb16_ror8(wa);
        const uint32_t b02 = rlx_sxtb16(wb), b13 = rlx_sxtb16_ror8(wb);
#if RLX_GEMM_ASM
        /* a quad's two word pairs, one STRD each (the slots are word aligned), the second
         * stepping d to the next quad */
        typedef struct {
            int16_t v[8];
        } rlx_slots8;
        rlx_slots8 *const slots = (rlx_slots8 *)d;
        __asm__("strd %[x1], %[y1], [%[d], #8]\n\t"
                "strd %[x0], %[y0], [%[d]], #16"
                : "=m"(*slots), [d] "+r"(d)
                : [x0] "r"(a02), [y0] "r"(b02), [x1] "r"(a13), [y1] "r"(b13));
#else
        rlx_wr32(d, a02);
        rlx_wr32(d + 2, b02);
        rlx_wr32(d + 4, a13);
        rlx_wr32(d + 6, b13);
        d += 8;
#endif
        ta = rlx_smlad(a02, 0x00010001u, rlx_smlad(a13, 0x00010001u, ta));
        tb = rlx_smlad(b02, 0x00010001u, rlx_smlad(b13, 0x00010001u, tb));
#else
        const int32_t a0 = sa[k], a1 = sa[k + 1], a2 = sa[k + 2], a3 = sa[k + 3];
        const int32_t b0 = sb[k], b1 = sb[k + 1], b2 = sb[k + 2], b3 = sb[k + 3];
        d[0] = (int16_t)a0;
        d[1] = (int16_t)a2;
        d[2] = (int16_t)b0;
        d[3] = (int16_t)b2;
        d[4] = (int16_t)a1;
        d[5] = (int16_t)a3;
        d[6] = (int16_t)b1;
        d[7] = (int16_t)b3;
        ta += a0 + a1 + a2 + a3;
        tb += b0 + b1 + b2 + b3;
        d += 8;
#endif
    }
    *suma = ta;
    *sumb = tb;
}

/* Pixels a and b of a 1x1 layer (n int8 values each) into their slots, as rlx_widen_row does
 * for each, with 128 x their sums (rlx_slot_sums128) taken in the same pass. */
static void rlx_widen_pair(const int8_t *sa, const int8_t *sb, int32_t n, int16_t *x, uint32_t *ca, uint32_t *cb)
{
    int32_t suma = 0, sumb = 0;
    const int32_t k = n & ~3;
    rlx_widen_pair_quads(sa, sb, k, x, &suma, &sumb);
    if (k < n) {
        /* the last, partial quad (kq = ceil(n / 4)) as one word per pixel, zero-filled: one
         * widening pass instead of a slot computation per value; past 4 values, each pixel's last
         * word (inside its values) shifted down past the values before the quad */
        uint32_t ta = 0, tb = 0;
        if (n >= 4) {
            const int32_t sh = 8 * (4 - (n - k));
            ta = rlx_rd32(sa + n - 4) >> sh;
            tb = rlx_rd32(sb + n - 4) >> sh;
        } else {
            for (int32_t t = 0; k + t < n; t++) {
                ta |= (uint32_t)(uint8_t)sa[k + t] << (8 * t);
                tb |= (uint32_t)(uint8_t)sb[k + t] << (8 * t);
            }
        }
        rlx_widen_pair_quads((const int8_t *)&ta, (const int8_t *)&tb, 4, x + 2 * k, &suma, &sumb);
    }
    *ca = (uint32_t)suma << 7;
    *cb = (uint32_t)sumb << 7;
}

/* One pixel's values of a tap (n int8 values, n % 4 == 0) into its slot s from int16 index 0 of
 * d, their sum added to *sum; src NULL (a tap outside the image): the input zero point. */
RLX_INLINE void rlx_widen_tap(const int8_t *src, int32_t n, int32_t zp, int16_t *d, int32_t s, int32_t *sum)
{
    d += 2 * s;
    if (!src) {
        const uint32_t z2 = (uint32_t)(uint16_t)(int16_t)zp * 0x00010001u;
        for (int32_t k = 0; k < n; k += 4, d += 8) {
            rlx_wr32(d, z2);
            rlx_wr32(d + 4, z2);
        }
        *sum += zp * n;
        return;
    }
    int32_t t = *sum;
    for (int32_t k = 0; k < n; k += 4, d += 8) {
#if RLX_USE_DSP
        const uint32_t w = rlx_rd32(src + k), e = rlx_sxtb16(w), o = rlx_sxtb16_ror8(w);
        rlx_wr32(d, e);
        rlx_wr32(d + 4, o);
        t = rlx_smlad(e, 0x00010001u, rlx_smlad(o, 0x00010001u, t));
#else
        const int32_t x0 = src[k], x1 = src[k + 1], x2 = src[k + 2], x3 = src[k + 3];
        d[0] = (int16_t)x0;
        d[1] = (int16_t)x2;
        d[4] = (int16_t)x1;
        d[5] = (int16_t)x3;
        t += x0 + x1 + x2 + x3;
#endif
    }
    *sum = t;
}

/* The receptive fields of pixels a and b on a channel count of whole quads, any padding and
 * dilation: tap by tap (c values, c / 4 whole quads each), both pixels widened in one pass where
 * the tap is inside the image for both, else each pixel's values or its zero point; 128 x the
 * sums into c128. */
static void rlx_im2col_pair_quads(const rlx_conv_params *p, const int8_t *img, int32_t oya, int32_t oxa,
                                  int32_t oyb, int32_t oxb, int16_t *x, uint32_t *c128)
{
    const int32_t c = p->in_c, in_h = p->in_h, in_w = p->in_w;
    const int32_t iya0 = oya * p->stride_h - p->pad_top, ixa0 = oxa * p->stride_w - p->pad_left;
    const int32_t iyb0 = oyb * p->stride_h - p->pad_top, ixb0 = oxb * p->stride_w - p->pad_left;
    int32_t suma = 0, sumb = 0;
    int16_t *d = x;
    for (int32_t i = 0; i < p->k_h; i++) {
        const int32_t iya = iya0 + i * p->dil_h, iyb = iyb0 + i * p->dil_h;
        const int32_t rowa = iya >= 0 && iya < in_h, rowb = iyb >= 0 && iyb < in_h;
        for (int32_t j = 0; j < p->k_w; j++, d += 2 * c) {
            const int32_t ixa = ixa0 + j * p->dil_w, ixb = ixb0 + j * p->dil_w;
            const int8_t *sa = rowa && ixa >= 0 && ixa < in_w ? img + (iya * in_w + ixa) * c : 0;
            const int8_t *sb = rowb && ixb >= 0 && ixb < in_w ? img + (iyb * in_w + ixb) * c : 0;
            if (sa && sb) {
                rlx_widen_pair_quads(sa, sb, c, d, &suma, &sumb);
            } else {
                rlx_widen_tap(sa, c, p->in_zp, d, 0, &suma);
                rlx_widen_tap(sb, c, p->in_zp, d, 1, &sumb);
            }
        }
    }
    c128[0] = (uint32_t)suma << 7;
    c128[1] = (uint32_t)sumb << 7;
}

/* The output pixels of one image in order, each with the input pixel at the top left of its
 * receptive field where the whole field lies inside the image (no padded tap), else NULL. The
 * output rows and columns whose fields lie inside are worked out once per image, so that a step
 * is one unsigned compare against the current row's inside columns (none outside along h), not
 * four bounds tests on the layer's fields. */
typedef struct {
    const int8_t *img;
    int32_t oy, ox, row_off;         /* the current pixel; input offset of its row's column 0 */
    int32_t row_n;                   /* the current row's inside columns: ox_n, or 0 outside along h */
    int32_t out_w, step, row_step;   /* input bytes per output pixel, per output row */
    int32_t ox_lo, ox_n, oy_lo, oy_n; /* the inside columns [ox_lo, ox_lo + ox_n), rows likewise */
} rlx_px_walk;

/* The first output index whose window (span input pixels, stride s, padding pad) starts inside
 * an axis of n pixels, and how many windows from there lie wholly inside, of out in all. */
RLX_INLINE void rlx_inside_range(int32_t n, int32_t span, int32_t s, int32_t pad, int32_t out, int32_t *lo,
                                 int32_t *cnt)
{
    const int32_t first = (pad + s - 1) / s, room = n - span + pad;
    int32_t end = room >= 0 ? room / s + 1 : 0;
    end = end < out ? end : out;
    *lo = first;
    *cnt = end > first ? end - first : 0;
}

/* inlined into both drivers, as into the one before rlx_conv_driver_small: called out of line, it
 * costs rlx_conv_driver's walk its registers */
RLX_INLINE void rlx_walk_init(rlx_px_walk *w, const rlx_conv_params *p, const int8_t *img)
{
    const int32_t c = p->in_c;
    w->img = img;
    w->oy = 0;
    w->ox = 0;
    w->out_w = p->out_w;
    w->step = p->stride_w * c;
    w->row_step = p->stride_h * p->in_w * c;
    w->row_off = (-p->pad_top * p->in_w - p->pad_left) * c;
    rlx_inside_range(p->in_w, (p->k_w - 1) * p->dil_w + 1, p->stride_w, p->pad_left, p->out_w, &w->ox_lo, &w->ox_n);
    rlx_inside_range(p->in_h, (p->k_h - 1) * p->dil_h + 1, p->stride_h, p->pad_top, p->out_h, &w->oy_lo, &w->oy_n);
    w->row_n = (uint32_t)(0 - w->oy_lo) < (uint32_t)w->oy_n ? w->ox_n : 0;
}

/* The current pixel's field (NULL where it has a padded tap) and position; then the next pixel. */
RLX_INLINE const int8_t *rlx_walk_next(rlx_px_walk *w, int32_t *oy, int32_t *ox)
{
    const int32_t x = w->ox;
    const int8_t *at = (uint32_t)(x - w->ox_lo) < (uint32_t)w->row_n ? w->img + w->row_off + x * w->step : 0;
    *oy = w->oy;
    *ox = x;
    if (x + 1 == w->out_w) {
        w->ox = 0;
        w->oy++;
        w->row_off += w->row_step;
        w->row_n = (uint32_t)(w->oy - w->oy_lo) < (uint32_t)w->oy_n ? w->ox_n : 0;
    } else {
        w->ox = x + 1;
    }
    return at;
}

/* The receptive field at src (inside the image, no dilation along w: rows runs of seg bytes,
 * row_step apart) gathered in order into words, the tail of the last of its kq quads 0. */
RLX_INLINE void rlx_gather_runs(const int8_t *src, int32_t rows, int32_t seg, int32_t row_step, int32_t kq,
                                uint32_t *words)
{
    int8_t *buf = (int8_t *)words;
    words[kq - 1] = 0;
    for (int32_t i = 0; i < rows; i++, src += row_step, buf += seg) {
        rlx_copy_short(buf, src, seg);
    }
}

/* rlx_gather_runs for pixels a and b at once (fields inside the image, runs of seg >= 4 bytes): a
 * run is copied a word at a time, its last word ending at the run's end (overlapping the word
 * before it with the same bytes), so a run of any length is ceil(seg / 4) unaligned word copies and
 * nothing is read outside it. */
RLX_INLINE void rlx_gather_runs2(const int8_t *sa, const int8_t *sb, int32_t rows, int32_t seg, int32_t row_step,
                                 int32_t kq, uint32_t *wa, uint32_t *wb)
{
    int8_t *da = (int8_t *)wa, *db = (int8_t *)wb;
    const int32_t last = seg - 4;
    wa[kq - 1] = 0;
    wb[kq - 1] = 0;
    if (seg <= 12) {
        /* runs of 4 to 12 bytes (e.g. 3x3 on 3 channels): three word copies a run, at 0, 4 and
         * seg - 4, with no inner loop (below 9 bytes the second is the third's word again) */
        const int32_t mid = last < 4 ? last : 4;
        for (int32_t i = 0; i < rows; i++, sa += row_step, sb += row_step, da += seg, db += seg) {
            rlx_wr32(da, rlx_rd32(sa));
            rlx_wr32(da + mid, rlx_rd32(sa + mid));
            rlx_wr32(da + last, rlx_rd32(sa + last));
            rlx_wr32(db, rlx_rd32(sb));
            rlx_wr32(db + mid, rlx_rd32(sb + mid));
            rlx_wr32(db + last, rlx_rd32(sb + last));
        }
        return;
    }
    for (int32_t i = 0; i < rows; i++, sa += row_step, sb += row_step, da += seg, db += seg) {
        for (int32_t t = 0; t < last; t += 4) {
            rlx_wr32(da + t, rlx_rd32(sa + t));
            rlx_wr32(db + t, rlx_rd32(sb + t));
            RLX_NO_LIBCALL();
        }
        rlx_wr32(da + last, rlx_rd32(sa + last));
        rlx_wr32(db + last, rlx_rd32(sb + last));
    }
}

/* Quad k of a field of 3 rows of 9 bytes (3x3 on 3 channels, the usual first layer) inside the image,
 * its rows at r0, r1, r2 (>= 9 bytes apart), read straight from the image (no copy of each run): a
 * quad that straddles two rows is merged from two loads, the last one's tail 0; no load leaves
 * [r0, r2 + 9). */
RLX_INLINE uint32_t rlx_quad_9x3(const int8_t *r0, const int8_t *r1, const int8_t *r2, int32_t k)
{
    switch (k) {
    case 0:
        return rlx_rd32(r0);
    case 1:
        return rlx_rd32(r0 + 4);
    case 2:
        return (rlx_rd32(r1 - 1) & 0xFFFFFF00u) | (uint8_t)r0[8];
    case 3:
        return rlx_rd32(r1 + 3);
    case 4:
        return (rlx_rd32(r1 + 7) & 0xFFFFu) | (rlx_rd32(r2) << 16);
    case 5:
        return rlx_rd32(r2 + 2);
    default:
        return rlx_rd32(r2 + 5) >> 8;
    }
}

#if RLX_GEMM_ASM
/* One quad of both pixels, raw in ea and eb, widened into its slots (x steps to the next quad) and
 * added to the pixels' two int16 lane sums sa, sb (at most 14 values a lane: no overflow). */
#define RLX_9X3_WIDEN_ASM                                                                                            \
    "sxtb16 %[oa], %[ea], ror #8\n\t"                                                                                \
    "sxtb16 %[ea], %[ea]\n\t"                                                                                        \
    "sxtb16 %[ob], %[eb], ror #8\n\t"                                                                                \
    "sxtb16 %[eb], %[eb]\n\t"                                                                                        \
    "strd   %[oa], %[ob], [%[x], #8]\n\t"                                                                            \
    "strd   %[ea], %[eb], [%[x]], #16\n\t"                                                                           \
    "sadd16 %[sa], %[sa], %[ea]\n\t"                                                                                 \
    "sadd16 %[sa], %[sa], %[oa]\n\t"                                                                                 \
    "sadd16 %[sb], %[sb], %[eb]\n\t"                                                                                 \
    "sadd16 %[sb], %[sb], %[ob]\n\t"
#endif

/* rlx_conv_pairs_9x3's pair of fields of 3 rows of 9 bytes, pixel a's rows rsa bytes apart from ra and
 * pixel b's rsb from rb (in the image, or a gathered field's 9): each quad of both fields read as
 * rlx_quad_9x3 does, widened into its slots and summed, in registers (on the M4 in one asm block:
 * GCC's schedule of the C spills). */
RLX_INLINE void rlx_pair_9x3(const int8_t *ra, int32_t rsa, const int8_t *rb, int32_t rsb, int16_t *x,
                             int32_t *suma, int32_t *sumb)
{
    const int8_t *const a1 = ra + rsa, *const a2 = a1 + rsa, *const b1 = rb + rsb, *const b2 = b1 + rsb;
#if RLX_GEMM_ASM
    uint32_t ea, oa, eb, ob, sa = 0, sb = 0;
    __asm__("ldr    %[ea], [%[ra]]\n\t"
            "ldr    %[eb], [%[rb]]\n\t" RLX_9X3_WIDEN_ASM
            "ldr    %[ea], [%[ra], #4]\n\t"
            "ldr    %[eb], [%[rb], #4]\n\t" RLX_9X3_WIDEN_ASM
            "ldr    %[ea], [%[a1], #-1]\n\t"
            "ldrb   %[oa], [%[ra], #8]\n\t"
            "bfi    %[ea], %[oa], #0, #8\n\t"
            "ldr    %[eb], [%[b1], #-1]\n\t"
            "ldrb   %[ob], [%[rb], #8]\n\t"
            "bfi    %[eb], %[ob], #0, #8\n\t" RLX_9X3_WIDEN_ASM
            "ldr    %[ea], [%[a1], #3]\n\t"
            "ldr    %[eb], [%[b1], #3]\n\t" RLX_9X3_WIDEN_ASM
            "ldr    %[ea], [%[a1], #7]\n\t"
            "ldr    %[oa], [%[a2]]\n\t"
            "pkhbt  %[ea], %[ea], %[oa], lsl #16\n\t"
            "ldr    %[eb], [%[b1], #7]\n\t"
            "ldr    %[ob], [%[b2]]\n\t"
            "pkhbt  %[eb], %[eb], %[ob], lsl #16\n\t" RLX_9X3_WIDEN_ASM
            "ldr    %[ea], [%[a2], #2]\n\t"
            "ldr    %[eb], [%[b2], #2]\n\t" RLX_9X3_WIDEN_ASM
            "ldr    %[ea], [%[a2], #5]\n\t"
            "ldr    %[eb], [%[b2], #5]\n\t"
            "lsr    %[ea], %[ea], #8\n\t"
            "lsr    %[eb], %[eb], #8\n\t" RLX_9X3_WIDEN_ASM
            : [ea] "=&r"(ea), [oa] "=&r"(oa), [eb] "=&r"(eb), [ob] "=&r"(ob), [sa] "+&r"(sa), [sb] "+&r"(sb),
              [x] "+&r"(x)
            : [ra] "r"(ra), [a1] "r"(a1), [a2] "r"(a2), [rb] "r"(rb), [b1] "r"(b1), [b2] "r"(b2)
            : "memory");
    *suma += (int16_t)(sa & 0xFFFFu) + ((int32_t)sa >> 16);
    *sumb += (int16_t)(sb & 0xFFFFu) + ((int32_t)sb >> 16);
    return;
#endif
    /* unrolled by hand (GCC keeps the loop, and its switch): each quad's loads differ */
#define RLX_PAIR_9X3_QUAD(k)                                                                                         \
    do {                                                                                                             \
        const uint32_t wa = rlx_quad_9x3(ra, a1, a2, k), wb = rlx_quad_9x3(rb, b1, b2, k);                           \
        rlx_widen_pair_quads((const int8_t *)&wa, (const int8_t *)&wb, 4, x + 8 * (k), suma, sumb);                  \
    } while (0)
    RLX_PAIR_9X3_QUAD(0);
    RLX_PAIR_9X3_QUAD(1);
    RLX_PAIR_9X3_QUAD(2);
    RLX_PAIR_9X3_QUAD(3);
    RLX_PAIR_9X3_QUAD(4);
    RLX_PAIR_9X3_QUAD(5);
    RLX_PAIR_9X3_QUAD(6);
#undef RLX_PAIR_9X3_QUAD
}

/* rlx_conv_driver's pair of pixels a and b (fields inside the image at ra and rb, rlx_gather_runs2's),
 * then the run of pairs after them along the walk's current output row whose fields lie inside the
 * image too, short of the row's last pixel (where rlx_walk_next moves to the next row): each pair
 * gathered and widened in one pass, then the GEMM, to out on (out_c bytes a pixel), with no walk
 * step or path tests per pair; the walk is left past the run. Out of line, so that the driver's
 * other paths keep their registers. Returns the run's pixels (0 without one). */
static RLX_NOINLINE int32_t rlx_conv_pairs_inside(const rlx_conv_params *p, rlx_px_walk *walk, const int8_t *ra,
                                                  const int8_t *rb, int8_t *out, int16_t *scratch)
{
    const int32_t seg = p->k_w * p->in_c, rows = p->k_h, row_step = p->dil_h * p->in_w * p->in_c;
    const int32_t kq = p->gemm.k_quads, out_c = p->gemm.out_c, step = walk->step;
    const rlx_gemm_params *const g = &p->gemm;
    const rlx_gemm2_fn gemm2 = g->gemm2;
    int32_t pairs = 0;
    if (walk->ox >= walk->ox_lo) {
        int32_t end = walk->ox_lo + walk->row_n;
        end = end < walk->out_w - 1 ? end : walk->out_w - 1;
        pairs = end > walk->ox ? (end - walk->ox) >> 1 : 0;
    }
    const int32_t run = 2 * pairs;
    const int8_t *fa = walk->img + walk->row_off + walk->ox * step;
    walk->ox += run;
    uint32_t wa[RLX_IM2COL_LOCAL / 4], wb[RLX_IM2COL_LOCAL / 4];
    for (;;) {
        uint32_t c128[2];
        int32_t suma = 0, sumb = 0;
        rlx_gather_runs2(ra, rb, rows, seg, row_step, kq, wa, wb);
        rlx_widen_pair_quads((const int8_t *)wa, (const int8_t *)wb, 4 * kq, scratch, &suma, &sumb);
        c128[0] = (uint32_t)suma << 7;
        c128[1] = (uint32_t)sumb << 7;
        gemm2(g, scratch, out, out + out_c, c128);
        if (pairs-- == 0) {
            return run;
        }
        ra = fa;
        rb = fa + step;
        fa += 2 * step;
        out += 2 * out_c;
    }
}

#if RLX_USE_DSP
/* rlx_conv_pairs_inside for fields of 3 rows of 9 bytes (3x3 on 3 channels; rlx_conv_driver_small):
 * the first pair's rows rsa and rsb bytes apart (the image's, or a gathered field's 9, a field with a
 * padded tap), each pair's quads read in place (rlx_pair_9x3); then the run after it, as there. */
static RLX_NOINLINE int32_t rlx_conv_pairs_9x3(const rlx_conv_params *p, rlx_px_walk *walk, const int8_t *ra,
                                               int32_t rsa, const int8_t *rb, int32_t rsb, int8_t *out,
                                               int16_t *scratch)
{
    const int32_t row_step = p->dil_h * p->in_w * p->in_c;
    const int32_t out_c = p->gemm.out_c, step = walk->step;
    const rlx_gemm_params *const g = &p->gemm;
    const rlx_gemm2_fn gemm2 = g->gemm2;
    int32_t pairs = 0;
    if (walk->ox >= walk->ox_lo) {
        int32_t end = walk->ox_lo + walk->row_n;
        end = end < walk->out_w - 1 ? end : walk->out_w - 1;
        pairs = end > walk->ox ? (end - walk->ox) >> 1 : 0;
    }
    const int32_t run = 2 * pairs;
    const int8_t *fa = walk->img + walk->row_off + walk->ox * step;
    walk->ox += run;
    for (;;) {
        uint32_t c128[2];
        int32_t suma = 0, sumb = 0;
        rlx_pair_9x3(ra, rsa, rb, rsb, scratch, &suma, &sumb);
        c128[0] = (uint32_t)suma << 7;
        c128[1] = (uint32_t)sumb << 7;
        gemm2(g, scratch, out, out + out_c, c128);
        if (pairs-- == 0) {
            return run;
        }
        ra = fa;
        rb = fa + step;
        rsa = rsb = row_step;
        fa += 2 * step;
        out += 2 * out_c;
    }
}
#endif

static void rlx_conv_driver(const rlx_conv_params *p, const int8_t *in, int8_t *out, int16_t *scratch,
                            rlx_gather_fn gather)
{
    const int32_t out_c = p->gemm.out_c;
    const int32_t pixels = p->out_h * p->out_w;
    const int32_t seg = p->k_w * p->in_c, rows = p->k_h, row_step = p->dil_h * p->in_w * p->in_c;
    /* kernel rows of whole quads filling the reduction exactly (e.g. 3x3 on 16 channels, 10x4 on
     * 1): a pair of pixels whose fields are inside the image is widened and summed in one pass,
     * kernel row by kernel row */
    const int32_t rows_fuse = p->dil_w == 1 && (seg & 3) == 0 && rows * seg == 4 * p->gemm.k_quads;
    /* else a small field (rlx_im2col_small's): both pixels' bytes gathered into local words
     * (a field inside the image as k_h plain runs), then widened and summed in one pass */
    const int32_t small = gather == rlx_im2col_small;
    for (int32_t n = 0; n < p->batches; n++) {
        const int8_t *img = in + n * p->in_h * p->in_w * p->in_c;
        int8_t *dst = out + n * pixels * out_c;
        rlx_px_walk walk;
        rlx_walk_init(&walk, p, img);
        int32_t px = 0;
        for (; px + 2 <= pixels; px += 2) {
            int32_t oya, oxa, oyb, oxb;
            uint32_t c128[2];
            const int8_t *ra = rlx_walk_next(&walk, &oya, &oxa);
            const int8_t *rb = rlx_walk_next(&walk, &oyb, &oxb);
            if (rows_fuse && ra && rb) {
                int32_t suma = 0, sumb = 0;
                for (int32_t i = 0; i < rows; i++, ra += row_step, rb += row_step) {
                    rlx_widen_pair_quads(ra, rb, seg, scratch + 2 * i * seg, &suma, &sumb);
                }
                c128[0] = (uint32_t)suma << 7;
                c128[1] = (uint32_t)sumb << 7;
            } else if (small) {
                uint32_t wa[RLX_IM2COL_LOCAL / 4], wb[RLX_IM2COL_LOCAL / 4];
                int32_t suma = 0, sumb = 0;
                if (ra && rb && p->dil_w == 1 && seg >= 4) {
                    if ((uint32_t)(walk.ox + 2 - walk.ox_lo) < (uint32_t)walk.row_n) {
                        /* this pair and the run of pairs inside the image after it on its row */
                        px += rlx_conv_pairs_inside(p, &walk, ra, rb, dst + px * out_c, scratch);
                        continue;
                    }
                    rlx_gather_runs2(ra, rb, rows, seg, row_step, p->gemm.k_quads, wa, wb);
                } else {
                    if (ra && p->dil_w == 1) {
                        rlx_gather_runs(ra, rows, seg, row_step, p->gemm.k_quads, wa);
                    } else {
                        rlx_gather_small(p, img, oya, oxa, wa);
                    }
                    if (rb && p->dil_w == 1) {
                        rlx_gather_runs(rb, rows, seg, row_step, p->gemm.k_quads, wb);
                    } else {
                        rlx_gather_small(p, img, oyb, oxb, wb);
                    }
                }
                rlx_widen_pair_quads((const int8_t *)wa, (const int8_t *)wb, 4 * p->gemm.k_quads, scratch, &suma,
                                     &sumb);
                c128[0] = (uint32_t)suma << 7;
                c128[1] = (uint32_t)sumb << 7;
            } else if ((p->in_c & 3) == 0) {
                rlx_im2col_pair_quads(p, img, oya, oxa, oyb, oxb, scratch, c128);
            } else {
                gather(p, img, oya, oxa, scratch, 0);
                gather(p, img, oyb, oxb, scratch, 1);
                rlx_slot_sums128(scratch, p->gemm.k_quads, &c128[0], &c128[1]);
            }
            p->gemm.gemm2(&p->gemm, scratch, dst + px * out_c, dst + (px + 1) * out_c, c128);
        }
        if (px < pixels) {
            /* a lone last pixel: its field's bytes in order (any size: scratch holds two pixels of
             * int16), through the fully connected row kernel */
            rlx_gather_small(p, img, walk.oy, walk.ox, (uint32_t *)scratch);
            rlx_gemm_row_s8(&p->gemm, (const int8_t *)scratch, 4 * p->gemm.k_quads, dst + px * out_c);
        }
    }
}

#if RLX_USE_DSP
/* rlx_conv_driver's paths of a small field alone (rlx_convolve_small_s8 on DSP builds, which then links
 * none of the others): kernel rows of whole quads, the gathered words, the lone last pixel; and 3 rows
 * of 9 bytes (3x3 on 3 channels) through rlx_conv_pairs_inside, the pairs with a padded tap too (each
 * such field gathered, its rows 9 bytes apart). */
static void rlx_conv_driver_small(const rlx_conv_params *p, const int8_t *in, int8_t *out, int16_t *scratch)
{
    const int32_t out_c = p->gemm.out_c, kq = p->gemm.k_quads;
    const int32_t pixels = p->out_h * p->out_w;
    const int32_t seg = p->k_w * p->in_c, rows = p->k_h, row_step = p->dil_h * p->in_w * p->in_c;
    const int32_t rows_fuse = p->dil_w == 1 && (seg & 3) == 0 && rows * seg == 4 * kq;
    const int32_t f9x3 = p->dil_w == 1 && seg == 9 && rows == 3;
    for (int32_t n = 0; n < p->batches; n++) {
        const int8_t *img = in + n * p->in_h * p->in_w * p->in_c;
        int8_t *dst = out + n * pixels * out_c;
        rlx_px_walk walk;
        rlx_walk_init(&walk, p, img);
        int32_t px = 0;
        for (; px + 2 <= pixels; px += 2) {
            int32_t oya, oxa, oyb, oxb;
            uint32_t c128[2];
            const int8_t *ra = rlx_walk_next(&walk, &oya, &oxa);
            const int8_t *rb = rlx_walk_next(&walk, &oyb, &oxb);
            int32_t suma = 0, sumb = 0;
            if (rows_fuse && ra && rb) {
                for (int32_t i = 0; i < rows; i++, ra += row_step, rb += row_step) {
                    rlx_widen_pair_quads(ra, rb, seg, scratch + 2 * i * seg, &suma, &sumb);
                }
            } else {
                uint32_t wa[RLX_IM2COL_LOCAL / 4], wb[RLX_IM2COL_LOCAL / 4];
                if (f9x3) {
                    /* a field with a padded tap gathered, one inside the image read in place; this
                     * pair and the run of pairs inside the image after it on the walk's row */
                    int32_t rsa = row_step, rsb = row_step;
                    if (!ra) {
                        rlx_gather_small(p, img, oya, oxa, wa);
                        ra = (const int8_t *)wa;
                        rsa = 9;
                    }
                    if (!rb) {
                        rlx_gather_small(p, img, oyb, oxb, wb);
                        rb = (const int8_t *)wb;
                        rsb = 9;
                    }
                    px += rlx_conv_pairs_9x3(p, &walk, ra, rsa, rb, rsb, dst + px * out_c, scratch);
                    continue;
                }
                if (ra && rb && p->dil_w == 1 && seg >= 4) {
                    if ((uint32_t)(walk.ox + 2 - walk.ox_lo) < (uint32_t)walk.row_n) {
                        /* this pair and the run of pairs inside the image after it on its row */
                        px += rlx_conv_pairs_inside(p, &walk, ra, rb, dst + px * out_c, scratch);
                        continue;
                    }
                    rlx_gather_runs2(ra, rb, rows, seg, row_step, kq, wa, wb);
                } else {
                    if (ra && p->dil_w == 1) {
                        rlx_gather_runs(ra, rows, seg, row_step, kq, wa);
                    } else {
                        rlx_gather_small(p, img, oya, oxa, wa);
                    }
                    if (rb && p->dil_w == 1) {
                        rlx_gather_runs(rb, rows, seg, row_step, kq, wb);
                    } else {
                        rlx_gather_small(p, img, oyb, oxb, wb);
                    }
                }
                rlx_widen_pair_quads((const int8_t *)wa, (const int8_t *)wb, 4 * kq, scratch, &suma, &sumb);
            }
            c128[0] = (uint32_t)suma << 7;
            c128[1] = (uint32_t)sumb << 7;
            p->gemm.gemm2(&p->gemm, scratch, dst + px * out_c, dst + (px + 1) * out_c, c128);
        }
        if (px < pixels) {
            /* a lone last pixel, as in rlx_conv_driver */
            rlx_gather_small(p, img, walk.oy, walk.ox, (uint32_t *)scratch);
            rlx_gemm_row_s8(&p->gemm, (const int8_t *)scratch, 4 * kq, dst + px * out_c);
        }
    }
}
#endif

void rlx_convolve_s8(const rlx_conv_params *p, const int8_t *in, int8_t *out, int16_t *scratch)
{
    const int32_t small = p->gemm.k_quads * 4 <= RLX_IM2COL_LOCAL && (p->in_c & 3) != 0;
    rlx_conv_driver(p, in, out, scratch, small ? rlx_im2col_small : rlx_im2col_pixel);
}

void rlx_convolve_small_s8(const rlx_conv_params *p, const int8_t *in, int8_t *out, int16_t *scratch)
{
#if RLX_USE_DSP
    rlx_conv_driver_small(p, in, out, scratch);
#else
    /* the portable build keeps the one driver (a copy of its small paths spills on the M3) */
    rlx_conv_driver(p, in, out, scratch, rlx_im2col_small);
#endif
}

/* The input pixel of output pixel ``*ox`` of the current output row, then the next one's: a row's last
   pixel moves on to the first pixel of the next output row (``row`` input bytes further down). */
RLX_INLINE const int8_t *rlx_pixel_then_next(const int8_t **src, const int8_t **line, int32_t *ox, int32_t out_w,
                                             int32_t step, int32_t row)
{
    const int8_t *const here = *src;
    if (++*ox == out_w) {
        *ox = 0;
        *line += row;
        *src = *line;
    } else {
        *src += step;
    }
    return here;
}

/* n bytes of zp4's byte at dst: unaligned words, the last one ending at the run's end (n >= 4), or
 * bytes */
RLX_INLINE void rlx_fill_run(int8_t *dst, int32_t n, uint32_t zp4)
{
    if (n >= 4) {
        const int32_t last = n - 4;
        for (int32_t t = 0; t < last; t += 4) {
            rlx_wr32(dst + t, zp4);
            RLX_NO_LIBCALL();
        }
        rlx_wr32(dst + last, zp4);
    } else {
        for (int32_t t = 0; t < n; t++) {
            dst[t] = (int8_t)zp4;
            RLX_NO_LIBCALL();
        }
    }
}

/* The input image of a padded layer (one batch of p's) into img: the rows and columns the outputs'
 * windows reach ((out - 1) stride + (k - 1) dilation + 1 of each), the input zero point where they
 * fall outside the input; *q is then p on that image with no padding, one batch, so that every
 * field lies inside it. The input's rows are copied in order, each row's right padding and the next
 * one's left written as one gap after it a word at a time (the last word's overshoot, into the next
 * row's bytes, rewritten by their copy); the rows above and below as one run each. */
static void rlx_pad_image(const rlx_conv_params *p, const int8_t *in, int8_t *img, rlx_conv_params *q)
{
    const int32_t c = p->in_c, in_row = p->in_w * c;
    const int32_t hp = (p->out_h - 1) * p->stride_h + (p->k_h - 1) * p->dil_h + 1;
    const int32_t wp = (p->out_w - 1) * p->stride_w + (p->k_w - 1) * p->dil_w + 1;
    const int32_t line = wp * c, left = p->pad_left * c;
    const uint32_t zp4 = (uint32_t)(uint8_t)p->in_zp * 0x01010101u;
    /* the input's columns within a padded row: [left, left + n); its rows within the image: [r0, r1) */
    const int32_t n = left + in_row > line ? line - left : in_row;
    const int32_t r0 = p->pad_top < hp ? p->pad_top : hp;
    const int32_t r1 = n <= 0 ? r0 : p->pad_top + p->in_h < hp ? p->pad_top + p->in_h : hp;
    int8_t *d = img;
    if (r1 > r0) {
        rlx_fill_run(d, r0 * line + left, zp4);
        d += r0 * line + left;
        int8_t *const dlast = d + (r1 - r0 - 1) * line;
        for (const int8_t *src = in;; src += in_row, d += line) {
            if (n >= 16) {
                /* four words a pass, then the last 16 bytes as four words (over bytes the loop wrote) */
                const int8_t *s = src, *const send = src + n - 16;
                for (int8_t *t = d; s < send; s += 16, t += 16) {
                    const uint32_t u = rlx_rd32(s), v = rlx_rd32(s + 4), w = rlx_rd32(s + 8), x = rlx_rd32(s + 12);
                    rlx_wr32(t, u);
                    rlx_wr32(t + 4, v);
                    rlx_wr32(t + 8, w);
                    rlx_wr32(t + 12, x);
                }
                const uint32_t u = rlx_rd32(send), v = rlx_rd32(send + 4), w = rlx_rd32(send + 8);
                const uint32_t x = rlx_rd32(send + 12);
                rlx_wr32(d + n - 16, u);
                rlx_wr32(d + n - 12, v);
                rlx_wr32(d + n - 8, w);
                rlx_wr32(d + n - 4, x);
            } else if (n >= 4) {
                /* 4 to 15 bytes: words at 0, 4, 8 (as far as they fit) and n - 4 */
                const int32_t last = n - 4, m1 = last < 4 ? last : 4, m2 = last < 8 ? last : 8;
                const uint32_t u = rlx_rd32(src), v = rlx_rd32(src + m1), w = rlx_rd32(src + m2);
                const uint32_t x = rlx_rd32(src + last);
                rlx_wr32(d, u);
                rlx_wr32(d + m1, v);
                rlx_wr32(d + m2, w);
                rlx_wr32(d + last, x);
            } else {
                rlx_copy_short(d, src, n);
            }
            if (d == dlast) {
                break;
            }
            if (n >= 4) {
                for (int8_t *z = d + n; z < d + line; z += 4) {
                    rlx_wr32(z, zp4);
                }
            } else {
                rlx_fill_run(d + n, line - n, zp4);
            }
        }
        d += n;
    }
    rlx_fill_run(d, (int32_t)(img + hp * line - d), zp4);
    *q = *p;
    q->batches = 1;
    q->in_h = hp;
    q->in_w = wp;
    q->pad_top = 0;
    q->pad_left = 0;
}

/* The field of a pixel at r (rows of seg bytes, row_step apart) in rules._split_order's order, the
 * weights' of rlx_convolve_small_pad_s8 other than 3 rows of 9 bytes: each row's whole quads (seg & ~3
 * bytes), then every row's last seg & 3 bytes; the tail of the last of kq quads 0 */
static void rlx_field_split(const int8_t *r, int32_t rows, int32_t seg, int32_t row_step, int32_t kq, int8_t *dst)
{
    const int32_t whole = seg & ~3, rem = seg & 3;
    int8_t *tail = dst + rows * whole;
    ((uint32_t *)dst)[kq - 1] = 0;
    for (int32_t i = 0; i < rows; i++, r += row_step, dst += whole, tail += rem) {
        rlx_copy_short(dst, r, whole);
        rlx_copy_short(tail, r + whole, rem);
    }
}

/* Pixels a and b's fields at ra and rb (rows of seg bytes, row_step apart) into their slots in
 * rlx_field_split's order, their values summed into *suma, *sumb: a row's whole quads widened
 * straight from the image (on the M4 in one asm loop over the rows: GCC's loops spill), then the
 * rows' last seg & 3 bytes gathered into words (each row's as one word store of its last word
 * shifted down, whose zero bytes the next row's store overwrites), widened after them. */
static void rlx_pair_split(const int8_t *ra, const int8_t *rb, int32_t rows, int32_t seg, int32_t row_step,
                           int16_t *x, int32_t *suma, int32_t *sumb)
{
    const int32_t whole = seg & ~3, rem = seg & 3;
    /* pixel a's gathered bytes at [0], b's at [RLX_SPLIT_B]: rows (seg & 3) (or the whole field, at most
     * 256 bytes) and a word for the last store's zero bytes */
#define RLX_SPLIT_B (RLX_IM2COL_LOCAL / 4 + 1)
    uint32_t l[2 * RLX_SPLIT_B];
    uint32_t *const la = l, *const lb = l + RLX_SPLIT_B;
    const int32_t lq = (rows * rem + 3) >> 2; /* the gathered bytes' quads */
    if (lq > 0) {
        la[lq - 1] = 0;
        lb[lq - 1] = 0;
    }
#if RLX_GEMM_ASM
    if (whole > 0) {
        /* per row: its quads of both pixels widened into their slots (x steps on) and added to the
         * pixels' int16 lane sums (at most 128 values a lane: no overflow), then (rem > 0) its last
         * word shifted down by sh = 8 (4 - rem) stored at ta (b's RLX_SPLIT_B words on), ta stepping
         * rem bytes; pixel b's bytes are d bytes on from a's. cfg: whole, the step to the next row,
         * sh. */
        /* (rem > 0) [3], [4]: the gathered quads of a, widened after the rows the same way (b's at
         * 4 RLX_SPLIT_B bytes on) */
        const uint32_t cfg[5] = {(uint32_t)whole, (uint32_t)(row_step - whole), (uint32_t)(8 * (4 - rem)),
                                 (uint32_t)la, (uint32_t)(la + lq)};
        uint32_t ea, oa, eb, ob, e, sa = 0, sb = 0, i = (uint32_t)rows;
        int32_t d = (int32_t)(rb - ra);
        int8_t *ta = (int8_t *)la;
        if (rem > 0) {
            __asm__("1:\n\t"
                    "ldr    %[e], [%[cfg]]\n\t"
                    "add    %[e], %[pa], %[e]\n\t"
                    "2:\n\t"
                    "ldr    %[eb], [%[pa], %[d]]\n\t"
                    "ldr    %[ea], [%[pa]], #4\n\t" RLX_9X3_WIDEN_ASM
                    "cmp    %[pa], %[e]\n\t"
                    "bne    2b\n\t"
                    "ldr    %[oa], [%[cfg], #8]\n\t"
                    "sub    %[e], %[pa], %[oa], lsr #3\n\t"
                    "ldr    %[eb], [%[e], %[d]]\n\t"
                    "ldr    %[ea], [%[e]]\n\t"
                    "lsr    %[ea], %[ea], %[oa]\n\t"
                    "lsr    %[eb], %[eb], %[oa]\n\t"
                    "str    %[ea], [%[ta]]\n\t"
                    "str    %[eb], [%[ta], %[lb]]\n\t"
                    "rsb    %[oa], %[oa], #32\n\t"
                    "add    %[ta], %[ta], %[oa], lsr #3\n\t"
                    "ldr    %[e], [%[cfg], #4]\n\t"
                    "add    %[pa], %[pa], %[e]\n\t"
                    "subs   %[i], %[i], #1\n\t"
                    "bne    1b\n\t"
                    "ldr    %[pa], [%[cfg], #12]\n\t"
                    "ldr    %[e], [%[cfg], #16]\n\t"
                    "mov    %[d], %[lb]\n\t"
                    "3:\n\t"
                    "ldr    %[eb], [%[pa], %[d]]\n\t"
                    "ldr    %[ea], [%[pa]], #4\n\t" RLX_9X3_WIDEN_ASM
                    "cmp    %[pa], %[e]\n\t"
                    "bne    3b\n\t"
                    : [ea] "=&r"(ea), [oa] "=&r"(oa), [eb] "=&r"(eb), [ob] "=&r"(ob), [e] "=&r"(e),
                      [sa] "+&r"(sa), [sb] "+&r"(sb), [x] "+&r"(x), [pa] "+&r"(ra), [i] "+&r"(i), [ta] "+&r"(ta),
                      [d] "+&r"(d)
                    : [cfg] "r"(cfg), [lb] "I"(4 * RLX_SPLIT_B)
                    : "cc", "memory");
            *suma += (int16_t)(sa & 0xFFFFu) + ((int32_t)sa >> 16);
            *sumb += (int16_t)(sb & 0xFFFFu) + ((int32_t)sb >> 16);
            return;
        } else {
            __asm__("1:\n\t"
                    "ldr    %[e], [%[cfg]]\n\t"
                    "add    %[e], %[pa], %[e]\n\t"
                    "2:\n\t"
                    "ldr    %[eb], [%[pa], %[d]]\n\t"
                    "ldr    %[ea], [%[pa]], #4\n\t" RLX_9X3_WIDEN_ASM
                    "cmp    %[pa], %[e]\n\t"
                    "bne    2b\n\t"
                    "ldr    %[e], [%[cfg], #4]\n\t"
                    "add    %[pa], %[pa], %[e]\n\t"
                    "subs   %[i], %[i], #1\n\t"
                    "bne    1b\n\t"
                    : [ea] "=&r"(ea), [oa] "=&r"(oa), [eb] "=&r"(eb), [ob] "=&r"(ob), [e] "=&r"(e),
                      [sa] "+&r"(sa), [sb] "+&r"(sb), [x] "+&r"(x), [pa] "+&r"(ra), [i] "+&r"(i)
                    : [d] "r"(d), [cfg] "r"(cfg)
                    : "cc", "memory");
        }
        *suma += (int16_t)(sa & 0xFFFFu) + ((int32_t)sa >> 16);
        *sumb += (int16_t)(sb & 0xFFFFu) + ((int32_t)sb >> 16);
        rlx_widen_pair_quads((const int8_t *)la, (const int8_t *)lb, 4 * lq, x, suma, sumb);
        return;
    }
#endif
    /* the C builds (and rows of fewer than 4 bytes): both fields gathered whole into la and lb in
     * rlx_field_split's order, then widened in one pass (the M3's loops per row cost more) */
    const int32_t kq = rows * (whole >> 2) + lq;
    int8_t *da = (int8_t *)la, *db = (int8_t *)lb;
    int8_t *ta = da + rows * whole, *tb = db + rows * whole;
    la[kq - 1] = 0;
    lb[kq - 1] = 0;
    const int32_t sh = 8 * (4 - rem);
    for (int32_t i = 0; i < rows; i++, ra += row_step, rb += row_step) {
        for (int32_t t = 0; t < whole; t += 4, da += 4, db += 4) {
            rlx_wr32(da, rlx_rd32(ra + t));
            rlx_wr32(db, rlx_rd32(rb + t));
            RLX_NO_LIBCALL();
        }
        if (rem > 0 && seg >= 4) {
            /* the row's last word shifted down: its rem bytes, then zero bytes the next row's overwrite */
            rlx_wr32(ta, rlx_rd32(ra + seg - 4) >> sh);
            rlx_wr32(tb, rlx_rd32(rb + seg - 4) >> sh);
        } else {
            for (int32_t t = 0; t < rem; t++) {
                ta[t] = ra[t];
                tb[t] = rb[t];
                RLX_NO_LIBCALL();
            }
        }
        ta += rem;
        tb += rem;
    }
    int32_t qa = 0, qb = 0; /* local sums: GCC keeps them in registers */
    rlx_widen_pair_quads((const int8_t *)la, (const int8_t *)lb, 4 * kq, x, &qa, &qb);
    *suma += qa;
    *sumb += qb;
#undef RLX_SPLIT_B
}

/* rlx_convolve_small_pad_s8's pixels on its padded image (every field inside, no dilation along w):
 * pair by pair in output order, across the output rows too, each pair's quads read in place (3 rows
 * of 9 bytes, rlx_pair_9x3; else rlx_pair_split's order, the weights' too), with no walk or path
 * tests; a lone last pixel's field gathered in the same order, through the row kernel */
static void rlx_conv_pad_pairs(const rlx_conv_params *q, const int8_t *img, int8_t *out, int16_t *scratch)
{
    const int32_t c = q->in_c, kq = q->gemm.k_quads, out_c = q->gemm.out_c, out_w = q->out_w;
    const int32_t seg = q->k_w * c, rows = q->k_h, row_step = q->dil_h * q->in_w * c;
    const int32_t step = q->stride_w * c, line = q->stride_h * q->in_w * c;
    const int32_t pixels = q->out_h * out_w, f9x3 = seg == 9 && rows == 3;
    const rlx_gemm_params *const g = &q->gemm;
    const rlx_gemm2_fn gemm2 = g->gemm2;
    /* at: the next pair's first field; rem: the pixels left on its output row, at included */
    const int8_t *at = img, *row = img;
    int32_t rem = out_w, px = 0;
    for (; px + 2 <= pixels; px += 2, out += 2 * out_c) {
        const int8_t *const ra = at, *rb;
        if (rem > 2) {
            rb = at + step;
            at += 2 * step;
            rem -= 2;
        } else if (rem == 2) {
            rb = at + step;
            row += line;
            at = row;
            rem = out_w;
        } else {
            /* a the last of its row: b the first of the next, and the last of it where out_w is 1 */
            row += line;
            rb = row;
            rem = out_w - 1;
            if (rem == 0) {
                row += line;
                rem = out_w;
            }
            at = rem == out_w ? row : row + step;
        }
        uint32_t c128[2];
        int32_t suma = 0, sumb = 0;
        if (f9x3) {
            rlx_pair_9x3(ra, row_step, rb, row_step, scratch, &suma, &sumb);
        } else {
            rlx_pair_split(ra, rb, rows, seg, row_step, scratch, &suma, &sumb);
        }
        c128[0] = (uint32_t)suma << 7;
        c128[1] = (uint32_t)sumb << 7;
        gemm2(g, scratch, out, out + out_c, c128);
    }
    if (px < pixels) {
        if (f9x3) {
            rlx_gather_runs(at, rows, seg, row_step, kq, (uint32_t *)scratch);
        } else {
            rlx_field_split(at, rows, seg, row_step, kq, (int8_t *)scratch);
        }
        rlx_gemm_row_s8(g, (const int8_t *)scratch, 4 * kq, out);
    }
}

/* rlx_convolve_s8 and rlx_convolve_small_s8 on a padded layer whose padded image fits the scratch
 * after the GEMM's two pixels (rules._conv_layer): each batch's image padded once (rlx_pad_image),
 * then the pixels on it */
void rlx_convolve_pad_s8(const rlx_conv_params *p, const int8_t *in, int8_t *out, int16_t *scratch)
{
    int8_t *const img = (int8_t *)(scratch + 8 * p->gemm.k_quads);
    const int32_t small = p->gemm.k_quads * 4 <= RLX_IM2COL_LOCAL && (p->in_c & 3) != 0;
    for (int32_t n = 0; n < p->batches; n++) {
        rlx_conv_params q;
        rlx_pad_image(p, in + n * p->in_h * p->in_w * p->in_c, img, &q);
        rlx_conv_driver(&q, img, out + n * p->out_h * p->out_w * p->gemm.out_c, scratch,
                        small ? rlx_im2col_small : rlx_im2col_pixel);
    }
}

void rlx_convolve_small_pad_s8(const rlx_conv_params *p, const int8_t *in, int8_t *out, int16_t *scratch)
{
#if !RLX_USE_DSP
    /* the portable build, fields in the plain order (3 rows of 9 bytes, rows of whole quads): the
     * unpadded input, as rlx_convolve_small_s8 (the copy costs the M3 more than the padded taps:
     * KWS's first layer 802,465 instructions padded, 799,233 not) */
    const int32_t seg = p->k_w * p->in_c;
    if ((seg == 9 && p->k_h == 3) || (seg & 3) == 0) {
        rlx_convolve_small_s8(p, in, out, scratch);
        return;
    }
#endif
    int8_t *const img = (int8_t *)(scratch + 8 * p->gemm.k_quads);
    for (int32_t n = 0; n < p->batches; n++) {
        rlx_conv_params q;
        int8_t *const dst = out + n * p->out_h * p->out_w * p->gemm.out_c;
        rlx_pad_image(p, in + n * p->in_h * p->in_w * p->in_c, img, &q);
        rlx_conv_pad_pairs(&q, img, dst, scratch);
    }
}

/* 1x1 without padding: per pair of pixels one pass widens both and sums them (rlx_widen_pair). */
void rlx_convolve_1x1_s8(const rlx_conv_params *p, const int8_t *in, int8_t *out, int16_t *scratch)
{
    const int32_t out_c = p->gemm.out_c, c = p->in_c;
    const int32_t pixels = p->out_h * p->out_w, out_w = p->out_w;
    const int32_t step = p->stride_w * c, row = p->stride_h * p->in_w * c; /* input bytes per pixel, row */
    const int32_t dense = step == c && row == out_w * c; /* stride 1: the pixels are consecutive */
    for (int32_t n = 0; n < p->batches; n++) {
        const int8_t *img = in + n * p->in_h * p->in_w * c;
        int8_t *dst = out + n * pixels * out_c;
        const int8_t *line = img, *src = img; /* the current output row's first input pixel, pixel px's */
        int32_t ox = 0;
        int32_t px = 0;
        for (; px + 2 <= pixels; px += 2, dst += 2 * out_c) {
            const int8_t *sa = src, *sb = src + c;
            if (dense) {
                src += 2 * c;
            } else {
                sa = rlx_pixel_then_next(&src, &line, &ox, out_w, step, row);
                sb = rlx_pixel_then_next(&src, &line, &ox, out_w, step, row);
            }
            uint32_t c128[2];
            rlx_widen_pair(sa, sb, c, scratch, &c128[0], &c128[1]);
            p->gemm.gemm2(&p->gemm, scratch, dst, dst + out_c, c128);
        }
        if (px < pixels) {
            rlx_gemm_row_s8(&p->gemm, src, c, dst); /* a lone last pixel: a fully connected row */
        }
    }
}

void rlx_fully_connected_s8(const rlx_fc_params *p, const int8_t *in, int8_t *out)
{
    if (p->batches == 1) { /* the usual case: a tail call */
        rlx_gemm_row_s8(&p->gemm, in, p->in_features, out);
        return;
    }
    for (int32_t r = 0; r < p->batches; r++) {
        rlx_gemm_row_s8(&p->gemm, in + r * p->in_features, p->in_features, out + r * p->gemm.out_c);
    }
}

/* 4 to 8 inputs (rules.fc_small_stream): the row's two quads, the first 4 bytes and the last 4 (their
 * overlap has weight 0), widened once into 4 registers, then 2 rows at a time straight through.
 * gemm.chan is one stream of words: a header [K - 4, lo4, hi4, out_c - 1, 0x01000100] (lo4, hi4
 * the bounds in every byte), per pair of rows [bias_e + 256 bias_o, bias_o, wA0, wB0, wA1, wB1,
 * (mult, rq_add, ctz(rq_add)) of each row] (wA, wB: gemm_weight_layout's words 0 and 2 of
 * the pair), then for an odd out_c the last row alone as [bias, wA0, wB0, wA1, wB1, mult,
 * rq_add, ctz(rq_add)] (odd bytes 0). Accumulators are doubled at the end as rlx_rq_fast does
 * (2 acc_e = 2 a_e - 256 sum(x) - 512 a_o, the sum over the two quads as read). */
#if RLX_GEMM_ASM
/* the stores after both rows' SSAT: rq_mode 2 as they are; rq_mode 1 packed (BFI) and clamped
 * to the header's bounds 2 lanes at a time (SSUB8, SEL) */
#define RLX_FCS_ST2_SAT "strb r0, [r2], #1\n\tstrb r1, [r2], #1\n\t"
#define RLX_FCS_ST1_SAT "strb r0, [r2], #1\n\t"
#define RLX_FCS_CLAMP                                                                            \
    "ldr r3, [sp, #40]\n\t"                                                                      \
    "ldrd r4, r5, [r3, #4]\n\t"                                                                  \
    "ssub8 r3, r0, r4\n\t"                                                                       \
    "sel r0, r0, r4\n\t"                                                                         \
    "ssub8 r3, r5, r0\n\t"                                                                       \
    "sel r0, r0, r5\n\t"
#define RLX_FCS_ST2_CLAMP "bfi r0, r1, #8, #8\n\t" RLX_FCS_CLAMP "strh r0, [r2], #2\n\t"
#define RLX_FCS_ST1_CLAMP RLX_FCS_CLAMP "strb r0, [r2], #1\n\t"
/* row A's doubled accumulator to its output in A, its (mult, rq_add, shift) next in the stream */
#define RLX_FCS_RQ(A)                                                                            \
    "ldm r12!, {r3, r4, r5}\n\t"                                                                 \
    "smmlar r3, " A ", r3, r4\n\t"                                                               \
    "add r3, r3, " A ", asr #31\n\t"                                                             \
    "asr r3, r3, r5\n\t"                                                                         \
    "ssat " A ", #8, r3, asr #1\n\t"
/* r2 the output, r8-r11 the input's pairs (quad 0: 0 2, 1 3; quad 1 the same), r12 the stream,
 * lr 256 sum(x), r7 the rows left - 1; [sp] the input row, [sp, #4] the rows of input left,
 * [sp, #40] the stream's start (the pushed r12) */
#define RLX_FC_SMALL(NAME, ST2, ST1)                                                             \
    __attribute__((naked, noinline, noipa, used)) void NAME(                                     \
        const rlx_fc_params *p __attribute__((unused)), const int8_t *in __attribute__((unused)), \
        int8_t *out __attribute__((unused)))                                                     \
    {                                                                                            \
        __asm__(".syntax unified\n\t"                                                            \
                "ldr r3, [r0, #36]\n\t"                                                          \
                "ldr r12, [r0, #28]\n\t"                                                         \
                "push {r1, r3-r12, lr}\n\t"                                                      \
                "1:\n\t"                                                                         \
                "ldm r12!, {r3, r4, r5, r7, lr}\n\t"                                             \
                "ldr r8, [r1]\n\t"                                                               \
                "ldr r10, [r1, r3]\n\t"                                                          \
                "sxtb16 r9, r8, ror #8\n\t"                                                      \
                "sxtb16 r8, r8\n\t"                                                              \
                "sxtb16 r11, r10, ror #8\n\t"                                                    \
                "sxtb16 r10, r10\n\t"                                                            \
                "smuad r3, r8, lr\n\t"                                                           \
                "smlad r3, r9, lr, r3\n\t"                                                       \
                "smlad r3, r10, lr, r3\n\t"                                                      \
                "smlad lr, r11, lr, r3\n\t"                                                      \
                "2:\n\t"                                                                         \
                "ldm r12!, {r0, r1, r3, r4, r5, r6}\n\t"                                         \
                "smlad r0, r8, r3, r0\n\t"                                                       \
                "sxtb16 r3, r3, ror #8\n\t"                                                      \
                "smlad r1, r8, r3, r1\n\t"                                                       \
                "smlad r0, r9, r4, r0\n\t"                                                       \
                "sxtb16 r4, r4, ror #8\n\t"                                                      \
                "smlad r1, r9, r4, r1\n\t"                                                       \
                "smlad r0, r10, r5, r0\n\t"                                                      \
                "sxtb16 r5, r5, ror #8\n\t"                                                      \
                "smlad r1, r10, r5, r1\n\t"                                                      \
                "smlad r0, r11, r6, r0\n\t"                                                      \
                "sxtb16 r6, r6, ror #8\n\t"                                                      \
                "smlad r1, r11, r6, r1\n\t"                                                      \
                "rsb r0, lr, r0, lsl #1\n\t"                                                     \
                "sub r0, r0, r1, lsl #9\n\t"                                                     \
                "lsl r1, r1, #1\n\t" RLX_FCS_RQ("r0") RLX_FCS_RQ("r1") ST2                     \
                "subs r7, r7, #2\n\t"                                                            \
                "bgt 2b\n\t"                                                                     \
                "bne 3f\n\t"                                                                     \
                "ldm r12!, {r0, r3, r4, r5, r6}\n\t"                                             \
                "smlad r0, r8, r3, r0\n\t"                                                       \
                "smlad r0, r9, r4, r0\n\t"                                                       \
                "smlad r0, r10, r5, r0\n\t"                                                      \
                "smlad r0, r11, r6, r0\n\t"                                                      \
                "rsb r0, lr, r0, lsl #1\n\t" RLX_FCS_RQ("r0") ST1                                \
                "3:\n\t"                                                                         \
                "ldr r3, [sp, #4]\n\t"                                                           \
                "subs r3, r3, #1\n\t"                                                            \
                "beq 4f\n\t"                                                                     \
                "str r3, [sp, #4]\n\t"                                                           \
                "ldr r12, [sp, #40]\n\t"                                                         \
                "ldr r1, [sp]\n\t"                                                               \
                "ldr r3, [r12]\n\t"                                                              \
                "add r1, r1, r3\n\t"                                                             \
                "add r1, r1, #4\n\t"                                                             \
                "str r1, [sp]\n\t"                                                               \
                "b 1b\n\t"                                                                       \
                "4:\n\t"                                                                         \
                "pop {r1, r3-r12, pc}\n\t");                                                     \
    }
RLX_FC_SMALL(rlx_fc_small_s8, RLX_FCS_ST2_SAT, RLX_FCS_ST1_SAT)
RLX_FC_SMALL(rlx_fc_small_clamp_s8, RLX_FCS_ST2_CLAMP, RLX_FCS_ST1_CLAMP)
#else
/* the portable build: the stream's arithmetic in C */
/* one row's doubled accumulator to its output, its (mult, rq_add, shift) at q */
RLX_INLINE int8_t rlx_fcs_out(int32_t acc2, const int32_t *q, int32_t clamp, int32_t lo, int32_t hi)
{
    const int32_t v = rlx_sat8(((rlx_smmlar(acc2, q[0], q[1]) + (acc2 >> 31)) >> q[2]) >> 1);
    return (int8_t)(clamp ? rlx_clamp(v, lo, hi) : v);
}

static void rlx_fc_small_c(const rlx_fc_params *p, const int8_t *in, int8_t *out, int32_t clamp)
{
    const int32_t *const h = p->gemm.chan;
    const int32_t k = h[0] + 4, rows = h[3] + 1;
    const int32_t lo = (int8_t)h[1], hi = (int8_t)h[2];
    for (int32_t b = 0; b < p->batches; b++, in += k) {
        /* the 8 values as read (the last quad ends at the row's end) and their sum */
        const int8_t *const e = in + k - 4;
        const int32_t x0 = in[0], x1 = in[1], x2 = in[2], x3 = in[3], x4 = e[0], x5 = e[1], x6 = e[2], x7 = e[3];
        const uint32_t c2 = 256u * (uint32_t)(x0 + x1 + x2 + x3 + x4 + x5 + x6 + x7);
        const int32_t *s = h + 5;
        /* element j of quad q is in word 2 q + (j & 1), at byte 2 (j >> 1) (the even row's, + 128)
         * and 2 (j >> 1) + 1 (the odd row's); the even row's bias holds 256 x the odd row's */
#define RLX_FCS_ROW(A, U)                                                                           \
    A += (uint32_t)(x0 * U[0] + x1 * U[4] + x2 * U[2] + x3 * U[6] + x4 * U[8] + x5 * U[12] + x6 * U[10] + \
                    x7 * U[14]);
        int32_t r = rows;
        for (; r > 1; r -= 2, s += 12, out += 2) {
            const uint8_t *const wu = (const uint8_t *)(s + 2);
            const int8_t *const ws = (const int8_t *)(s + 2) + 1;
            uint32_t ae = (uint32_t)s[0] - 256u * (uint32_t)s[1], ao = (uint32_t)s[1];
            RLX_FCS_ROW(ae, wu)
            RLX_FCS_ROW(ao, ws)
            out[0] = rlx_fcs_out((int32_t)(2u * ae - c2), s + 6, clamp, lo, hi);
            out[1] = rlx_fcs_out((int32_t)(2u * ao), s + 9, clamp, lo, hi);
        }
        if (r == 1) { /* the odd last row alone: [bias, 4 words, its constants] */
            const uint8_t *const wu = (const uint8_t *)(s + 1);
            uint32_t ae = (uint32_t)s[0];
            RLX_FCS_ROW(ae, wu)
            *out++ = rlx_fcs_out((int32_t)(2u * ae - c2), s + 5, clamp, lo, hi);
        }
#undef RLX_FCS_ROW
    }
}

void rlx_fc_small_s8(const rlx_fc_params *p, const int8_t *in, int8_t *out) { rlx_fc_small_c(p, in, out, 0); }

void rlx_fc_small_clamp_s8(const rlx_fc_params *p, const int8_t *in, int8_t *out) { rlx_fc_small_c(p, in, out, 1); }
#endif
