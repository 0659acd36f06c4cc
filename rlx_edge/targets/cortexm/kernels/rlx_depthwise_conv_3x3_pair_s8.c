/*
 * 3x3 depthwise, depth multiplier 1, no dilation, on DSP cores: a channel-planar ring (issue #17).
 *
 * The image is walked in lines along the output's longer axis (rows, or columns of a tall image
 * such as KWS's 25x5). The 3 input lines a window spans are widened (input offset added, padding
 * 0) into int16 planes, one per channel of a block of up to 4, so that neighbours along the line
 * are adjacent halfwords: one word load is (in[x], in[x+1]) of a channel, and the 3 taps of a
 * window line are one SMLAD against (w0, w1) and one SMLABT against (w1, w2). At stride 1 two
 * outputs x, x+1 share their loads: (in[x], in[x+1]) and (in[x+2], in[x+3]) feed SMLAD + SMLABT
 * for x and SMLATB + SMLAD for x+1, 6 MACs in 4 instructions (rq_mode 2: one asm loop, 37
 * instructions per pair). Each block's weight pairs and requantization constants are laid out
 * once in the scratch (weights and bias doubled with the fast requantization, whose SMMLAR takes
 * acc << 1). Lines outside the image read a plane of zeros: a padded tap adds nothing, TFLite's
 * skipping it. Cores without DSP run rlx_depthwise_conv_3x3_s8, whose scratch the rule reserves
 * as well.
 */
#include "rlx_nn.h"
#include "rlx_nn_support.h"

#if RLX_USE_DSP
#if defined(__ARM_FEATURE_DSP) && (__ARM_FEATURE_DSP == 1)
RLX_INLINE int32_t rlx_dwp_smlabt(uint32_t a, uint32_t b, int32_t acc) { return __smlabt((int32_t)a, (int32_t)b, acc); }
RLX_INLINE int32_t rlx_dwp_smlatb(uint32_t a, uint32_t b, int32_t acc) { return __smlatb((int32_t)a, (int32_t)b, acc); }
#else
RLX_INLINE int32_t rlx_dwp_smlabt(uint32_t a, uint32_t b, int32_t acc) { return rlx_smlabb(a, b >> 16, acc); }
RLX_INLINE int32_t rlx_dwp_smlatb(uint32_t a, uint32_t b, int32_t acc) { return rlx_smlabb(a >> 16, b, acc); }
#endif

/* the layer's requantization as a local (an int8 store may alias the struct) */
#define RLX_DW_RQ_OF(p) {(p)->rq_mode, (p)->out_zp, (p)->act_min, (p)->act_max, (p)->mult, (p)->shift, (p)->rq_add}

#if defined(__GNUC__)
#define RLX_DWP_NOINLINE __attribute__((noinline))
#else
#define RLX_DWP_NOINLINE
#endif

/* The line the planes run along: the output's longer axis (a tall image, KWS's 25x5, runs by
 * columns), so that the per-channel set-up of a line is spread over more pixel pairs. */
typedef struct {
    int32_t n, stride, os; /* outputs along the line, their stride, output bytes between them */
    int32_t c0, nc;        /* the block of channels in the ring */
} rlx_dwp_line;

/* Channels per pass over the image: the ring holds their planes only (RAM), and every block
 * widens its own inputs, so blocks cost only their lines' set-up. */
#define RLX_DWP_CB 4

/* nc channels of image line src (pixel step ps) into the planes at d (channel c's plane at
 * d + c * wq), plane positions [lo, hi): 4 channels x 2 pixels at a time (two words in, 4 out),
 * the rest one by one. */
static void rlx_dwp_widen(const rlx_dw_conv_params *p, const int8_t *src, int32_t ps, int32_t ch, int16_t *d,
                          int32_t wq, int32_t lo, int32_t hi)
{
    const int32_t off = p->in_offset;
    const uint32_t off2 = ((uint32_t)off & 0xFFFFu) | ((uint32_t)off << 16);
    int32_t c = 0;
    for (; c + 4 <= ch; c += 4) {
        const int8_t *s = src + c;
        int16_t *d0 = d + c * wq;
        int32_t j = lo;
        for (; j + 2 <= hi; j += 2, s += 2 * ps) {
            const uint32_t xa = rlx_rd32(s), xb = rlx_rd32(s + ps);
            const uint32_t a02 = rlx_sxtab16(off2, xa), a13 = rlx_sxtab16_ror8(off2, xa);
            const uint32_t b02 = rlx_sxtab16(off2, xb), b13 = rlx_sxtab16_ror8(off2, xb);
            rlx_wr32(d0 + j, (a02 & 0xFFFFu) | (b02 << 16));
            rlx_wr32(d0 + wq + j, (a13 & 0xFFFFu) | (b13 << 16));
            rlx_wr32(d0 + 2 * wq + j, (a02 >> 16) | (b02 & 0xFFFF0000u));
            rlx_wr32(d0 + 3 * wq + j, (a13 >> 16) | (b13 & 0xFFFF0000u));
        }
        if (j < hi) {
            for (int32_t i = 0; i < 4; i++) {
                d0[i * wq + j] = (int16_t)(s[i] + off);
            }
        }
    }
    for (; c < ch; c++) {
        const int8_t *s = src + c;
        for (int32_t j = lo; j < hi; j++, s += ps) {
            d[c * wq + j] = (int16_t)(*s + off);
        }
    }
}

/* Per channel of a block, 12 words of scratch: (w0, w1), (w1, w2) of each window line, then
 * mult, rq_add, the right shift of the fast requantization, and the bias twice. */
#define RLX_DWP_K 12
#if defined(__ARM_FEATURE_DSP) && (__ARM_FEATURE_DSP == 1) && !defined(RLX_NO_ASM)
/* One window line of an output pair: (in[x], in[x+1]) and (in[x+2], in[x+3]) against the
 * line's (w0, w1), (w1, w2); the plane pointer steps to the next pair. */
#define RLX_DWP_ROW_ASM(R, WOFF)                            \
    "ldrd    %[wa], %[wb], [%[k], #" WOFF "]\n\t"          \
    "ldr     %[xa], [%[" R "]], #4\n\t"                    \
    "ldr     %[xb], [%[" R "]]\n\t"                        \
    "smlad   %[a0], %[xa], %[wa], %[a0]\n\t"               \
    "smlabt  %[a0], %[xb], %[wb], %[a0]\n\t"               \
    "smlatb  %[a1], %[xa], %[wa], %[a1]\n\t"               \
    "smlad   %[a1], %[xb], %[wb], %[a1]\n\t"
/* rq_mode 2 of a doubled accumulator: mult in wa, rq_add in wb, the shift in xa */
#define RLX_DWP_RQ_ASM(A)                                   \
    "smmlar  %[xb], %[" A "], %[wa], %[wb]\n\t"            \
    "add     %[" A "], %[xb], %[" A "], asr #31\n\t"       \
    "asr     %[" A "], %[" A "], %[xa]\n\t"                \
    "ssat    %[" A "], #8, %[" A "]\n\t"
#endif

/* One output line of every channel: x0, x1, x2 the planes of channel 0 of the window's 3 lines,
 * steps their plane strides (0 for the zero plane). FAST: rq_mode 1 or 2, SAT: rq_mode 2. */
RLX_INLINE void rlx_dwp_out_row(const rlx_dw_conv_params *p, const int16_t *x0, const int16_t *x1, const int16_t *x2,
                                const int32_t steps[3], const uint32_t *wk, int8_t *dst, const rlx_dwp_line *ln,
                                const int32_t fast, const int32_t sat)
{
    const int32_t nc = ln->nc, out_w = ln->n, sw = ln->stride, os = ln->os, lo = p->act_min, hi = p->act_max;
    const rlx_rq_params rq = RLX_DW_RQ_OF(p);
    const int32_t s0 = steps[0], s1 = steps[1], s2 = steps[2];
    for (int32_t c = ln->c0; c < ln->c0 + nc; c++, x0 += s0, x1 += s1, x2 += s2, wk += RLX_DWP_K, dst++) {
        const int32_t b = (int32_t)wk[9], m = (int32_t)wk[6], add = (int32_t)wk[7], e = (int32_t)wk[8];
        int8_t *o = dst;
        int32_t x = 0;
#define RLX_DWP_OUT(acc)                                                                                   \
    ((int8_t)(fast ? (sat ? rlx_sat8((rlx_smmlar((acc), m, add) + ((acc) >> 31)) >> e)                  \
                          : rlx_clamp((rlx_smmlar((acc), m, add) + ((acc) >> 31)) >> e, lo, hi))        \
                   : rlx_rq_out(&rq, (acc), c)))
#if defined(__ARM_FEATURE_DSP) && (__ARM_FEATURE_DSP == 1) && !defined(RLX_NO_ASM)
        if (sat && sw == 1 && out_w >= 2) {
            /* the pairs of the line: 37 instructions per 18 MACs, the channel's constants read per pair */
            const int16_t *r0 = x0, *r1 = x1, *r2 = x2;
            uint32_t n = (uint32_t)out_w >> 1, xa, xb, wa, wb, a0, a1;
            __asm__ volatile(
                "1:\n\t"
                "ldrd    %[a0], %[a1], [%[k], #36]\n\t"
                RLX_DWP_ROW_ASM("r0", "0") RLX_DWP_ROW_ASM("r1", "8") RLX_DWP_ROW_ASM("r2", "16")
                "ldrd    %[wa], %[wb], [%[k], #24]\n\t"
                "ldr     %[xa], [%[k], #32]\n\t"
                RLX_DWP_RQ_ASM("a0") "strb    %[a0], [%[o]]\n\t"
                RLX_DWP_RQ_ASM("a1") "strb    %[a1], [%[o], %[os]]\n\t"
                "add     %[o], %[o], %[os], lsl #1\n\t"
                "subs    %[n], %[n], #1\n\t"
                "bne     1b\n\t"
                : [a0] "=&r"(a0), [a1] "=&r"(a1), [xa] "=&r"(xa), [xb] "=&r"(xb), [wa] "=&r"(wa), [wb] "=&r"(wb),
                  [r0] "+r"(r0), [r1] "+r"(r1), [r2] "+r"(r2), [o] "+r"(o), [n] "+r"(n)
                : [k] "r"(wk), [os] "r"(os)
                : "cc", "memory");
            x = out_w & ~1;
        }
#endif
        if (sw == 1) {
            for (; x + 2 <= out_w; x += 2, o += 2 * os) {
                int32_t a = b, bb = b;
                uint32_t u, v;
                u = rlx_rd32(x0 + x), v = rlx_rd32(x0 + x + 2);
                a = rlx_smlad(u, wk[0], a), a = rlx_dwp_smlabt(v, wk[1], a);
                bb = rlx_dwp_smlatb(u, wk[0], bb), bb = rlx_smlad(v, wk[1], bb);
                u = rlx_rd32(x1 + x), v = rlx_rd32(x1 + x + 2);
                a = rlx_smlad(u, wk[2], a), a = rlx_dwp_smlabt(v, wk[3], a);
                bb = rlx_dwp_smlatb(u, wk[2], bb), bb = rlx_smlad(v, wk[3], bb);
                u = rlx_rd32(x2 + x), v = rlx_rd32(x2 + x + 2);
                a = rlx_smlad(u, wk[4], a), a = rlx_dwp_smlabt(v, wk[5], a);
                bb = rlx_dwp_smlatb(u, wk[4], bb), bb = rlx_smlad(v, wk[5], bb);
                o[0] = RLX_DWP_OUT(a);
                o[os] = RLX_DWP_OUT(bb);
            }
        }
        /* one output at a time: stride 2 and more, and the last output of an odd line */
        for (; x < out_w; x++, o += os) {
            const int32_t i = x * sw;
            int32_t a = b;
            a = rlx_smlad(rlx_rd32(x0 + i), wk[0], a), a = rlx_dwp_smlabt(rlx_rd32(x0 + i + 2), wk[1], a);
            a = rlx_smlad(rlx_rd32(x1 + i), wk[2], a), a = rlx_dwp_smlabt(rlx_rd32(x1 + i + 2), wk[3], a);
            a = rlx_smlad(rlx_rd32(x2 + i), wk[4], a), a = rlx_dwp_smlabt(rlx_rd32(x2 + i + 2), wk[5], a);
            o[0] = RLX_DWP_OUT(a);
        }
#undef RLX_DWP_OUT
    }
}

static RLX_DWP_NOINLINE void rlx_dwp_row_sat(const rlx_dw_conv_params *p, const int16_t *x0, const int16_t *x1,
                                             const int16_t *x2, const int32_t steps[3], const uint32_t *wk,
                                             int8_t *dst, const rlx_dwp_line *ln)
{
    rlx_dwp_out_row(p, x0, x1, x2, steps, wk, dst, ln, 1, 1);
}

static RLX_DWP_NOINLINE void rlx_dwp_row_any(const rlx_dw_conv_params *p, const int16_t *x0, const int16_t *x1,
                                             const int16_t *x2, const int32_t steps[3], const uint32_t *wk,
                                             int8_t *dst, const rlx_dwp_line *ln)
{
    rlx_dwp_out_row(p, x0, x1, x2, steps, wk, dst, ln, p->rq_mode != 0, 0);
}
#endif

/* scratch: per channel of a block RLX_DWP_K words (weight pairs, requantization), then 3 ring
 * lines of its planes and a zero plane, (n - 1) stride + 4 halfwords each (n: outputs along
 * the line). */
void rlx_depthwise_conv_3x3_pair_s8(const rlx_dw_conv_params *p, const int8_t *in, int8_t *out, int16_t *scratch)
{
#if RLX_USE_DSP
    const int32_t ch = p->in_c, in_h = p->in_h, in_w = p->in_w, out_h = p->out_h, out_w = p->out_w;
    /* L: the axis the line runs along; B: the one the ring steps across */
    const int32_t along_h = out_h > out_w;
    rlx_dwp_line ln = {along_h ? out_h : out_w, along_h ? p->stride_h : p->stride_w, along_h ? out_w * ch : ch, 0, 0};
    const int32_t in_l = along_h ? in_h : in_w, pad_l = along_h ? p->pad_top : p->pad_left;
    const int32_t in_b = along_h ? in_w : in_h, pad_b = along_h ? p->pad_left : p->pad_top;
    const int32_t out_b = along_h ? out_w : out_h, s_b = along_h ? p->stride_w : p->stride_h;
    const int32_t ps = along_h ? in_w * ch : ch, bs = along_h ? ch : in_w * ch, ob = along_h ? ch : out_w * ch;
    const int32_t wq = (ln.n - 1) * ln.stride + 4, cb = ch < RLX_DWP_CB ? ch : RLX_DWP_CB;
    const int32_t scale = p->rq_mode != 0 ? 2 : 1;
    uint32_t *const wk = (uint32_t *)(void *)scratch;
    int16_t *const ring = scratch + 2 * RLX_DWP_K * cb, *const zero = ring + 3 * cb * wq;
    /* the plane positions that hold image pixels: [lo, hi); the others are padding, zeroed once */
    const int32_t lo = pad_l < wq ? pad_l : wq, hi = in_l + pad_l < wq ? in_l + pad_l : wq;
    for (int32_t i = 0; i < 3 * cb; i++) {
        for (int32_t j = 0; j < lo; j++) {
            ring[i * wq + j] = 0;
        }
        for (int32_t j = hi; j < wq; j++) {
            ring[i * wq + j] = 0;
        }
    }
    for (int32_t j = 0; j < wq; j++) {
        zero[j] = 0;
    }
    for (int32_t c0 = 0; c0 < ch; c0 += cb) {
        const int32_t nc = ch - c0 < cb ? ch - c0 : cb;
        ln.c0 = c0;
        ln.nc = nc;
        /* per channel and window line r: (w0, w1), (w1, w2) of its taps t along the line, as int16 */
        for (int32_t c = c0; c < c0 + nc; c++) {
            uint32_t *const q = wk + RLX_DWP_K * (c - c0);
            for (int32_t r = 0; r < 3; r++) {
                uint32_t w[3];
                for (int32_t t = 0; t < 3; t++) {
                    w[t] = (uint16_t)(scale * p->weights[(along_h ? 3 * t + r : 3 * r + t) * ch + c]);
                }
                q[2 * r] = w[0] | (w[1] << 16);
                q[2 * r + 1] = w[1] | (w[2] << 16);
            }
            const int32_t add = p->rq_mode != 0 ? p->rq_add[c] : 1;
            q[6] = p->rq_mode != 0 ? (uint32_t)p->mult[c] : 0u;
            q[7] = (uint32_t)add;
            q[8] = (uint32_t)rlx_rq_e(add);
            q[9] = q[10] = (uint32_t)p->bias[c] * (uint32_t)scale;
        }
        for (int32_t n = 0; n < p->batches; n++) {
            const int8_t *img = in + n * in_h * in_w * ch + (lo - pad_l) * ps + c0;
            int8_t *o = out + n * out_h * out_w * ch + c0;
            /* tag[s]: the image line ring slot s holds (-1: none yet) */
            int32_t tag[3] = {-1, -1, -1};
            for (int32_t k = 0; k < out_b; k++, o += ob) {
                const int16_t *x[3];
                int32_t steps[3];
                for (int32_t i = 0; i < 3; i++) {
                    const int32_t ib = k * s_b - pad_b + i;
                    if (ib < 0 || ib >= in_b) {
                        x[i] = zero;
                        steps[i] = 0;
                        continue;
                    }
                    const int32_t s = ib % 3;
                    int16_t *const slot = ring + s * cb * wq;
                    if (tag[s] != ib) {
                        rlx_dwp_widen(p, img + ib * bs, ps, nc, slot, wq, lo, hi);
                        tag[s] = ib;
                    }
                    x[i] = slot;
                    steps[i] = wq;
                }
                if (p->rq_mode == 2) {
                    rlx_dwp_row_sat(p, x[0], x[1], x[2], steps, wk, o, &ln);
                } else {
                    rlx_dwp_row_any(p, x[0], x[1], x[2], steps, wk, o, &ln);
                }
            }
        }
    }
#else
    rlx_depthwise_conv_3x3_s8(p, in, out, scratch);
#endif
}
