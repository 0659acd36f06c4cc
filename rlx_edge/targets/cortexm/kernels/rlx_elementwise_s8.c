/*
 * Elementwise kernels: TFLite int8 ADD/SUB and MUL (broadcasting over up to
 * four dimensions) and the 256-entry table map used for every unary op of a
 * byte type. Inputs and output may alias (the planner runs these in place).
 */
#include "rlx_nn.h"
#include "rlx_nn_support.h"

/* TFLite's quantized add: both inputs onto twice the larger scale with 20 bits of headroom
 * (looked up: the op's prepare tabulates each input's scaled value by bit pattern, the second
 * negated for sub), summed, then down to the output scale with
 * MultiplyByQuantizedMultiplierSmallerThanOneExp. */
RLX_INLINE int8_t rlx_add_table_one(const rlx_binary_params *p, int32_t a, int32_t b)
{
    const uint32_t raw = (uint32_t)p->a_table[(uint8_t)a] + (uint32_t)p->b_table[(uint8_t)b];
    const int32_t y = rlx_rdbpot(rlx_srdhm((int32_t)raw, p->out_mult), -p->out_shift) + p->out_zp;
    return (int8_t)rlx_clamp(y, p->act_min, p->act_max);
}

/* Same-shape inputs with both rescalings looked up, the parameters in locals (an int8 store may
 * alias the struct, a local cannot), and the output requantization in the kernels' fast form,
 * which the emitter proved for these tables (rq_mode 1, 2). */
__attribute__((noinline)) static void rlx_add_table_flat(const rlx_binary_params *p, const int8_t *a,
                                                         const int8_t *b, int8_t *out)
{
    const int32_t *ta = p->a_table, *tb = p->b_table;
    const int32_t mult = p->out_mult, lo = p->act_min, hi = p->act_max, n = p->geo.size;
    const int32_t add = p->rq_add, e = p->rq_shift, saturate = p->rq_mode == 2;
    for (int32_t i = 0; i < n; i++) {
        const int32_t raw = (int32_t)((uint32_t)ta[(uint8_t)a[i]] + (uint32_t)tb[(uint8_t)b[i]]);
        const int32_t v = rlx_rq_fast(raw, mult, add, e);
        out[i] = (int8_t)(saturate ? rlx_sat8(v) : rlx_clamp(v, lo, hi));
    }
}

RLX_INLINE int8_t rlx_mul_one(const rlx_binary_params *p, int32_t a, int32_t b)
{
    const int32_t prod = (a + p->a_offset) * (b + p->b_offset);
    const int32_t y = rlx_requantize(prod, p->out_mult, p->out_shift) + p->out_zp;
    return (int8_t)rlx_clamp(y, p->act_min, p->act_max);
}

void rlx_add_s8(const rlx_binary_params *p, const int8_t *a, const int8_t *b, int8_t *out)
{
    if (!p->geo.broadcast && p->rq_mode != 0) {
        rlx_add_table_flat(p, a, b, out);
        return;
    }
    RLX_BINARY_LOOP(rlx_add_table_one);
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
