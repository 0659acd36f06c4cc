/*
 * TFLite's int8 PRELU (reference Prelu / BroadcastPrelu4DSlow semantics): the
 * offset input keeps its sign's multiplier, the negative side is multiplied by
 * the offset alpha first. Broadcasting as the other binary kernels.
 */
#include "rlx_prelu_s8.h"

#include "rlx_nn_support.h"

RLX_INLINE int8_t rlx_prelu_one(const rlx_binary_params *p, int32_t x, int32_t alpha)
{
    const int32_t v = x + p->a_offset;
    const int32_t y = v >= 0 ? rlx_requantize(v, p->a_mult, p->a_shift)
                             : rlx_requantize(v * (alpha + p->b_offset), p->out_mult, p->out_shift);
    return (int8_t)rlx_clamp(y + p->out_zp, p->act_min, p->act_max);
}

void rlx_prelu_s8(const rlx_binary_params *p, const int8_t *a, const int8_t *b, int8_t *out)
{
    RLX_BINARY_LOOP(rlx_prelu_one);
}
