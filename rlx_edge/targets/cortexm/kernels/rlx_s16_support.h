/*
 * rlx_s16_support.h - fixed-point pieces of the int16-activation kernels
 * (TFLite's 16x8 scheme), bit-exact with rlx_edge/ir/fixedpoint.py.
 */
#ifndef RLX_S16_SUPPORT_H
#define RLX_S16_SUPPORT_H

#include "rlx_nn_support.h"

/* TFLite's MultiplyByQuantizedMultiplier(int64_t x, ...): the Q31 multiplier
 * rounded to Q15 (saturating at 0x7FFF), then one rounding right shift by
 * 15 - shift (>= 1, checked by the rule), truncated to int32. The product
 * wraps like the reference's int64. */
RLX_INLINE int32_t rlx_requantize_int64(int64_t x, int32_t mult, int32_t shift)
{
    const int64_t reduced = mult < 0x7FFF0000 ? ((int64_t)mult + (1 << 15)) >> 16 : 0x7FFF;
    const int32_t total = 15 - shift;
    const int64_t prod = (int64_t)((uint64_t)x * (uint64_t)reduced + ((uint64_t)1 << (total - 1)));
    return (int32_t)(uint32_t)(uint64_t)(prod >> total);
}

/* A conv / fully-connected accumulator to its output: the int64 form where
 * the layer is `wide` (int64 bias), else int32 double rounding of the
 * accumulator wrapped to int32, as the reference's requantize_acc. */
RLX_INLINE int32_t rlx_rq_s16_out(int64_t acc, int32_t mult, int32_t shift, int32_t wide, int32_t out_zp,
                                  int32_t act_min, int32_t act_max)
{
    const int32_t v = wide ? rlx_requantize_int64(acc, mult, shift)
                           : rlx_requantize((int32_t)(uint32_t)(uint64_t)acc, mult, shift);
    const int64_t y = (int64_t)v + out_zp; /* the reference adds the zero point without wrapping */
    return y < act_min ? act_min : (y > act_max ? act_max : (int32_t)y);
}

/* TFLite's lut_lookup for int16 inputs: 512 segments of a 513-entry table,
 * linear interpolation in Q0.15. */
RLX_INLINE int32_t rlx_lut_int16(int32_t v, const int16_t *lut)
{
    const int32_t index = 256 + (v >> 7);
    const int32_t offset = v & 0x7F;
    const int32_t base = lut[index];
    const int32_t slope = lut[index + 1] - base;
    return base + ((slope * offset + 64) >> 7);
}

#endif /* RLX_S16_SUPPORT_H */
