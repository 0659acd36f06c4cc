/*
 * int16 activations (TFLite's 16x8 scheme): add / sub, mul, the rescaling
 * activations (relu, relu6, clamp, leaky_relu), average and max pooling and
 * softmax. Every multiplier, shift, clamp and table is the node's prepared
 * parameter; the arithmetic is the reference's (rlx_edge/ir/ops).
 */
#include "rlx_nn.h"
#include "rlx_s16_support.h"
#include "rlx_softmax_mask.h"

/* add / sub: both inputs shifted left by left_shift (15) and rescaled onto
 * twice the larger input scale, summed in int32 (wrapping), rescaled to the
 * output. The multipliers are below one (shift <= 0): rlx_requantize is then
 * TFLite's MultiplyByQuantizedMultiplierSmallerThanOneExp. */
RLX_INLINE int16_t rlx_add_s16_one(const rlx_add_s16_params *p, int32_t a, int32_t b)
{
    const int32_t sa = rlx_requantize((int32_t)((uint32_t)(a + p->a_offset) << p->left_shift), p->a_mult, p->a_shift);
    const int32_t sb = rlx_requantize((int32_t)((uint32_t)(b + p->b_offset) << p->left_shift), p->b_mult, p->b_shift);
    const int32_t raw = (int32_t)(p->subtract ? (uint32_t)sa - (uint32_t)sb : (uint32_t)sa + (uint32_t)sb);
    const int64_t y = (int64_t)rlx_requantize(raw, p->out_mult, p->out_shift) + p->out_zp;
    return (int16_t)(y < p->act_min ? p->act_min : (y > p->act_max ? p->act_max : y));
}

/* mul: the product of the offset inputs (int32, wrapping) requantized once. */
RLX_INLINE int16_t rlx_mul_s16_one(const rlx_add_s16_params *p, int32_t a, int32_t b)
{
    const int32_t prod = (int32_t)((uint32_t)(a + p->a_offset) * (uint32_t)(b + p->b_offset));
    const int64_t y = (int64_t)rlx_requantize(prod, p->out_mult, p->out_shift) + p->out_zp;
    return (int16_t)(y < p->act_min ? p->act_min : (y > p->act_max ? p->act_max : y));
}

void rlx_add_s16(const rlx_add_s16_params *p, const int16_t *a, const int16_t *b, int16_t *out)
{
    RLX_BINARY_LOOP(rlx_add_s16_one);
}

void rlx_mul_s16(const rlx_add_s16_params *p, const int16_t *a, const int16_t *b, int16_t *out)
{
    RLX_BINARY_LOOP(rlx_mul_s16_one);
}

/* relu, relu6, clamp (one multiplier for both signs) and leaky_relu (the
 * alpha one for negative offset inputs); an identity rescaling only clamps. */
void rlx_rescale_s16(const rlx_rescale_s16_params *p, const int16_t *in, int16_t *out)
{
    for (int32_t i = 0; i < p->size; i++) {
        int64_t y = in[i];
        if (!p->identity) {
            const int32_t v = in[i] - p->in_zp;
            y = (int64_t)p->out_zp + (v >= 0 ? rlx_requantize(v, p->pos_mult, p->pos_shift)
                                              : rlx_requantize(v, p->neg_mult, p->neg_shift));
        }
        out[i] = (int16_t)(y < p->act_min ? p->act_min : (y > p->act_max ? p->act_max : y));
    }
}

/* Pooling: the window of each output pixel clipped to the image (padded taps
 * never take part); the average divides by the real taps, rounding half away
 * from zero as C division after adding half the count. */
RLX_INLINE void rlx_pool_s16(const rlx_pool_params *p, const int16_t *in, int16_t *out, int32_t max)
{
    const int32_t ch = p->ch;
    for (int32_t n = 0; n < p->batches; n++) {
        const int16_t *img = in + n * p->in_h * p->in_w * ch;
        for (int32_t oy = 0; oy < p->out_h; oy++) {
            const int32_t y0 = oy * p->stride_h - p->pad_top;
            const int32_t i_lo = y0 < 0 ? 0 : y0;
            const int32_t i_hi = y0 + p->k_h > p->in_h ? p->in_h : y0 + p->k_h;
            for (int32_t ox = 0; ox < p->out_w; ox++) {
                const int32_t x0 = ox * p->stride_w - p->pad_left;
                const int32_t j_lo = x0 < 0 ? 0 : x0;
                const int32_t j_hi = x0 + p->k_w > p->in_w ? p->in_w : x0 + p->k_w;
                const int32_t count = (i_hi - i_lo) * (j_hi - j_lo);
                int16_t *dst = out + ((n * p->out_h + oy) * p->out_w + ox) * ch;
                for (int32_t c = 0; c < ch; c++) {
                    int32_t acc = max ? INT32_MIN : 0;
                    for (int32_t i = i_lo; i < i_hi; i++) {
                        const int16_t *src = img + (i * p->in_w + j_lo) * ch + c;
                        for (int32_t j = j_lo; j < j_hi; j++, src += ch) {
                            if (max) {
                                acc = *src > acc ? *src : acc;
                            } else {
                                acc += *src;
                            }
                        }
                    }
                    if (!max) {
                        const int32_t num = acc > 0 ? acc + count / 2 : acc - count / 2;
                        acc = num / count;
                    }
                    dst[c] = (int16_t)rlx_clamp(acc, p->act_min, p->act_max);
                }
            }
        }
    }
}

void rlx_avgpool_s16(const rlx_pool_params *p, const int16_t *in, int16_t *out)
{
    rlx_pool_s16(p, in, out, 0);
}

void rlx_maxpool_s16(const rlx_pool_params *p, const int16_t *in, int16_t *out)
{
    rlx_pool_s16(p, in, out, 1);
}

/* TFLite's SoftmaxInt16 over the innermost axis: differences to the row
 * maximum rescaled so that [-10, 0] spans [-65535, 0], recentred into int16
 * for the exp table, summed, normalized by the sum's leading zeros and
 * inverted through the 1/(1+x) table. */
/* A rescaled difference (<= 0) recentred into int16: + 32767, saturated. */
RLX_INLINE int32_t rlx_softmax_sym(int32_t scaled)
{
    const int64_t v = (int64_t)scaled + 32767;
    return (int32_t)(v < INT16_MIN ? INT16_MIN : (v > INT16_MAX ? INT16_MAX : v));
}

void rlx_softmax_s16(const rlx_softmax_s16_params *p, const int16_t *in, const uint8_t *mask, int16_t *out)
{
    const int32_t depth = p->depth;
    const int32_t mstep = p->mask.strides[3];
    for (int32_t r = 0; r < p->rows; r++) {
        const int16_t *x = in + r * depth;
        int16_t *y = out + r * depth;
        /* a mask (0 = masked): max and sum over the kept positions, masked ones give 0 */
        const uint8_t *m = mask ? rlx_mask_row(&p->mask, mask, r) : 0;
        int32_t top = INT16_MIN;
        for (int32_t i = 0; i < depth; i++) {
            if (!m || m[i * mstep]) {
                top = x[i] > top ? x[i] : top;
            }
        }
        /* pass 1: the sum of the exps; pass 2 recomputes each (y may alias x only
         * after the sum, so nothing is stored before it is complete) */
        int64_t total = 0;
        for (int32_t i = 0; i < depth; i++) {
            if (m && !m[i * mstep]) {
                continue;
            }
            const int32_t scaled = rlx_requantize(x[i] - top, p->mult, p->shift);
            const int32_t sym = rlx_softmax_sym(scaled);
            total += rlx_lut_int16(sym, p->exp_lut);
        }
        if (total == 0) { /* only a row with nothing kept: all 0 */
            total = 1;
        }
        const int32_t headroom_plus_one = rlx_clz32((uint32_t)total);
        const int64_t shifted_sum = (((int64_t)total << (headroom_plus_one - 1)) + (1 << 13)) >> 14;
        int64_t sym_sum = shifted_sum - ((1 << 15) + (1 << 16));
        sym_sum = sym_sum < INT16_MIN ? INT16_MIN : (sym_sum > INT16_MAX ? INT16_MAX : sym_sum);
        const int32_t recip = rlx_lut_int16((int32_t)sym_sum, p->recip_lut);
        const int32_t right_shift = 31 - headroom_plus_one;
        for (int32_t i = 0; i < depth; i++) {
            if (m && !m[i * mstep]) {
                y[i] = 0;
                continue;
            }
            const int32_t scaled = rlx_requantize(x[i] - top, p->mult, p->shift);
            const int32_t sym = rlx_softmax_sym(scaled);
            const int64_t e = rlx_lut_int16(sym, p->exp_lut);
            const int64_t v = (e * recip + ((int64_t)1 << (right_shift - 1))) >> right_shift;
            y[i] = (int16_t)(v < 0 ? 0 : (v > INT16_MAX ? INT16_MAX : v));
        }
    }
}
