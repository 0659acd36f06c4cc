/*
 * int16 table activations: see rlx_lut_s16.h. The arithmetic is TFLite's LUTLookup for int16
 * with its int16 storage, as rlx_edge/ir/ops/activation.py's _lut_lookup_int16: the slope
 * between two entries and the result wrap to int16 (rlx_lut_int16 of rlx_s16_support.h does
 * not wrap; the softmax's tables never need it, a saturating GELU's do).
 */
#include "rlx_lut_s16.h"

static inline int32_t rlx_wrap_s16(int32_t v)
{
    return (int32_t)(int16_t)(uint16_t)(uint32_t)v;
}

void rlx_lut_s16(const rlx_lut_s16_params *p, const int16_t *in, int16_t *out)
{
    for (int32_t i = 0; i < p->size; i++) {
        const int32_t v = in[i];
        const int32_t index = 256 + (v >> 7);
        const int32_t base = p->lut[index];
        const int32_t slope = rlx_wrap_s16(p->lut[index + 1] - base);
        out[i] = (int16_t)rlx_wrap_s16(base + ((slope * (v & 0x7F) + 64) >> 7));
    }
}
