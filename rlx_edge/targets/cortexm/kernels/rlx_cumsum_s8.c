/*
 * TFLite's int8 CUMSUM (reference_ops::CumSum with ArithmeticParams), bit for bit with the
 * reference (rlx_edge/ir/ops/reduce.py): each input byte's rescaled value is looked up, the int32
 * running sum (wrapping as the C++ one) starts at the rescaled -zero_point, and each running
 * sum, the element's own value left out when exclusive, is requantized to the output.
 */
#include "rlx_cumsum_s8.h"

#include "rlx_nn_support.h"

void rlx_cumsum_s8(const rlx_cumsum_params *p, const int8_t *x, int8_t *out)
{
    for (int32_t o = 0; o < p->outer; o++) {
        for (int32_t i = 0; i < p->inner; i++) {
            uint32_t acc = (uint32_t)p->start;
            for (int32_t d = 0; d < p->depth; d++) {
                const int32_t along = p->reverse ? p->depth - 1 - d : d;
                const int32_t index = (o * p->depth + along) * p->inner + i;
                const uint32_t v = (uint32_t)p->table[(uint8_t)x[index]];
                int32_t sum;
                if (p->exclusive) {
                    sum = (int32_t)acc;
                    acc += v;
                } else {
                    acc += v;
                    sum = (int32_t)acc;
                }
                const int32_t y = rlx_rdbpot(rlx_srdhm(sum, p->out_mult), -p->out_shift) + p->out_zp;
                out[index] = (int8_t)rlx_clamp(y, p->act_min, p->act_max);
            }
        }
    }
}
