/*
 * Integer-to-integer requantization with double rounding (MultiplyByQuantizedMultiplier),
 * the same prepared multiplier and shift the reference evaluates (ir/ops/quant.py). The
 * zero point is added in 64 bits so an int32 output saturates instead of wrapping, as the
 * reference's int64 sum does.
 */
#include "rlx_requantize_int.h"

#include "rlx_nn_support.h"

RLX_INLINE int32_t rlx_rq_load(const void *base, int32_t type, int32_t i)
{
    switch (type) {
    case RLX_RQ_U8:
        return ((const uint8_t *)base)[i];
    case RLX_RQ_S16:
        return ((const int16_t *)base)[i];
    case RLX_RQ_S32:
        return ((const int32_t *)base)[i];
    default:
        return ((const int8_t *)base)[i];
    }
}

RLX_INLINE void rlx_rq_store(void *base, int32_t type, int32_t i, int32_t v)
{
    switch (type) {
    case RLX_RQ_U8:
        ((uint8_t *)base)[i] = (uint8_t)v;
        break;
    case RLX_RQ_S16:
        ((int16_t *)base)[i] = (int16_t)v;
        break;
    case RLX_RQ_S32:
        ((int32_t *)base)[i] = v;
        break;
    default:
        ((int8_t *)base)[i] = (int8_t)v;
        break;
    }
}

void rlx_requantize_int(const rlx_requantize_params *p, const void *in, void *out)
{
    int32_t i = 0;
    for (int32_t o = 0; o < p->outer; o++) {
        for (int32_t c = 0; c < p->channels; c++) {
            const int32_t in_zp = p->in_zp[c], mult = p->mult[c], shift = p->shift[c];
            const int64_t out_zp = p->out_zp[c];
            for (int32_t k = 0; k < p->inner; k++, i++) {
                const int32_t x = rlx_rq_load(in, p->in_type, i) - in_zp;
                int64_t y = (int64_t)rlx_requantize(x, mult, shift) + out_zp;
                y = y < p->act_min ? p->act_min : (y > p->act_max ? p->act_max : y);
                rlx_rq_store(out, p->out_type, i, (int32_t)y);
            }
        }
    }
}
