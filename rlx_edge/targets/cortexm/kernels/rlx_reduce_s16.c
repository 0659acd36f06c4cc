/*
 * int16 MEAN / SUM: each output element sums its reduced block of the input in int32 (wrapping
 * as the reference's int32 sum does), then one requantization.
 */
#include "rlx_reduce_s16.h"

#include "rlx_nn_support.h"

void rlx_reduce_s16(const rlx_reduce_s16_params *p, const int16_t *in, int16_t *out)
{
    int32_t os[4];
    int32_t rs[4];
    int32_t stride[4];
    int32_t s = 1;
    for (int32_t d = 3; d >= 0; d--) {
        os[d] = p->reduce[d] ? 1 : p->shape[d];
        rs[d] = p->reduce[d] ? p->shape[d] : 1;
        stride[d] = s;
        s *= p->shape[d];
    }
    int32_t o = 0;
    for (int32_t a = 0; a < os[0]; a++) {
        for (int32_t b = 0; b < os[1]; b++) {
            for (int32_t c = 0; c < os[2]; c++) {
                for (int32_t d = 0; d < os[3]; d++) {
                    const int32_t base = a * stride[0] + b * stride[1] + c * stride[2] + d * stride[3];
                    uint32_t total = (uint32_t)p->sum_offset;
                    for (int32_t i = 0; i < rs[0]; i++) {
                        for (int32_t j = 0; j < rs[1]; j++) {
                            for (int32_t k = 0; k < rs[2]; k++) {
                                for (int32_t l = 0; l < rs[3]; l++) {
                                    total += (uint32_t)(int32_t)
                                        in[base + i * stride[0] + j * stride[1] + k * stride[2] + l * stride[3]];
                                }
                            }
                        }
                    }
                    const int32_t y = rlx_requantize((int32_t)total, p->mult, p->shift) + p->out_zp;
                    out[o++] = (int16_t)rlx_clamp(y, p->out_min, p->out_max);
                }
            }
        }
    }
}
