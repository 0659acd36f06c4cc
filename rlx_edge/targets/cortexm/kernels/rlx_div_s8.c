/*
 * TFLite's int8 DIV as the TFLite Micro build the reference pins computes it (bit for bit with
 * rlx_edge/ir/ops/elementwise.py's div eval): the divisor's reciprocal is looked up (the op's
 * prepare tabulates it over the 256 bit patterns, a zero divisor included), the dividend is
 * shifted up by its redundant sign bits for the high multiply, and the output multiplier's
 * rounding shift follows. For small dividends that shift passes 31: TFLite Micro's x86-64 build
 * then takes an all-ones mask and a shift count modulo 32 (fixedpoint.rounding_divide_by_pot_x86),
 * which this kernel computes explicitly (an ARM shift past 31 would differ).
 */
#include "rlx_div_s8.h"

#include "rlx_nn_support.h"

/* CountLeadingSignBits of a dividend, |v| <= 255 here: 31 for 0 and -1 */
RLX_INLINE int32_t rlx_sign_bits(int32_t v)
{
    return v >= 0 ? rlx_clz32((uint32_t)v) - 1 : rlx_clz32(2u * (uint32_t)(-v) - 1u);
}

RLX_INLINE int32_t rlx_rdbpot_x86(int32_t x, int32_t e)
{
    if (e > 31) {
        return (x >> (e & 31)) + (x >= 0 ? 1 : 0);
    }
    return rlx_rdbpot(x, e);
}

RLX_INLINE int8_t rlx_div_one(const rlx_div_params *p, int32_t a, int32_t b)
{
    const uint8_t bi = (uint8_t)b;
    int32_t v = a + p->a_offset;
    if (p->b_neg[bi]) {
        v = -v;
    }
    const int32_t headroom = rlx_sign_bits(v);
    const int32_t quotient = rlx_srdhm((int32_t)((uint32_t)v << headroom), p->b_inv[bi]);
    const int32_t e = -(p->out_shift - p->b_shift[bi] - headroom);
    const int32_t y = rlx_rdbpot_x86(rlx_srdhm(quotient, p->out_mult), e) + p->out_zp;
    return (int8_t)rlx_clamp(y, p->act_min, p->act_max);
}

void rlx_div_s8(const rlx_div_params *p, const int8_t *a, const int8_t *b, int8_t *out)
{
    RLX_BINARY_LOOP(rlx_div_one);
}
