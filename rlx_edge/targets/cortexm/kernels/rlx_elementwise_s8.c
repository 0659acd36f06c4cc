/*
 * Elementwise kernels: TFLite int8 ADD/SUB and MUL (broadcasting over up to
 * four dimensions) and the 256-entry table map used for every unary op of a
 * byte type. Inputs and output may alias (the planner runs these in place).
 */
#include "rlx_nn.h"
#include "rlx_nn_support.h"

/* TFLite's quantized add: both inputs onto twice the larger scale with 20
 * bits of headroom, summed, then down to the output scale; each multiply
 * uses MultiplyByQuantizedMultiplierSmallerThanOneExp (shifts are <= 0). */
RLX_INLINE int8_t rlx_add_one(const rlx_binary_params *p, int32_t a, int32_t b)
{
    const int32_t va = (int32_t)((uint32_t)(a + p->a_offset) << p->left_shift);
    const int32_t vb = (int32_t)((uint32_t)(b + p->b_offset) << p->left_shift);
    const int32_t sa = rlx_rdbpot(rlx_srdhm(va, p->a_mult), -p->a_shift);
    const int32_t sb = rlx_rdbpot(rlx_srdhm(vb, p->b_mult), -p->b_shift);
    const int32_t raw = (int32_t)(p->subtract ? (uint32_t)sa - (uint32_t)sb : (uint32_t)sa + (uint32_t)sb);
    const int32_t y = rlx_rdbpot(rlx_srdhm(raw, p->out_mult), -p->out_shift) + p->out_zp;
    return (int8_t)rlx_clamp(y, p->act_min, p->act_max);
}

RLX_INLINE int8_t rlx_mul_one(const rlx_binary_params *p, int32_t a, int32_t b)
{
    const int32_t prod = (a + p->a_offset) * (b + p->b_offset);
    const int32_t y = rlx_requantize(prod, p->out_mult, p->out_shift) + p->out_zp;
    return (int8_t)rlx_clamp(y, p->act_min, p->act_max);
}

void rlx_add_s8(const rlx_binary_params *p, const int8_t *a, const int8_t *b, int8_t *out)
{
    RLX_BINARY_LOOP(rlx_add_one);
}

void rlx_mul_s8(const rlx_binary_params *p, const int8_t *a, const int8_t *b, int8_t *out)
{
    RLX_BINARY_LOOP(rlx_mul_one);
}

void rlx_lut_8(const rlx_lut_params *p, const void *in, void *out)
{
    const uint8_t *src = (const uint8_t *)in;
    if (p->out_bytes == 1) {
        const uint8_t *t = (const uint8_t *)p->table;
        uint8_t *dst = (uint8_t *)out;
        for (int32_t i = 0; i < p->size; i++) {
            dst[i] = t[src[i]];
        }
    } else if (p->out_bytes == 2) {
        /* wider output: walk backwards so that an in-place call never
         * overwrites input bytes it has still to read */
        const int16_t *t = (const int16_t *)p->table;
        int16_t *dst = (int16_t *)out;
        for (int32_t i = p->size - 1; i >= 0; i--) {
            dst[i] = t[src[i]];
        }
    } else {
        const uint32_t *t = (const uint32_t *)p->table;
        uint8_t *dst = (uint8_t *)out;
        for (int32_t i = p->size - 1; i >= 0; i--) {
            memcpy(dst + 4 * i, &t[src[i]], 4);
        }
    }
}

void rlx_copy(const void *in, void *out, int32_t bytes)
{
    if (in != out) {
        memmove(out, in, (size_t)bytes);
    }
}
