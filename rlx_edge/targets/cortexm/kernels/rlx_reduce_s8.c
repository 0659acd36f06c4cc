/*
 * Reductions that pick an element: one walk over each output's reduced elements serves
 * REDUCE_MAX, REDUCE_MIN, ARG_MAX and ARG_MIN. The reduced elements are visited in
 * increasing order and only a strictly better value replaces the best so far, so ties keep
 * the first index, as TFLite Micro's ArgMinMax does.
 */
#include "rlx_reduce_s8.h"

#include "rlx_nn_support.h"

void rlx_reduce_s8(const rlx_reduce_params *p, const int8_t *in, void *out)
{
    int32_t os[4]; /* output extent per dimension */
    int32_t rs[4]; /* reduced extent per dimension */
    int32_t stride[4];
    int32_t s = 1;
    for (int32_t d = 3; d >= 0; d--) {
        os[d] = p->reduce[d] ? 1 : p->shape[d];
        rs[d] = p->reduce[d] ? p->shape[d] : 1;
        stride[d] = s;
        s *= p->shape[d];
    }
    const int32_t want_max = p->op == RLX_REDUCE_MAX || p->op == RLX_REDUCE_ARGMAX;
    const int32_t index_out = p->op >= RLX_REDUCE_ARGMAX;
    int8_t *out8 = (int8_t *)out;
    int32_t *out32 = (int32_t *)out;
    int32_t o = 0;
    for (int32_t a = 0; a < os[0]; a++) {
        for (int32_t b = 0; b < os[1]; b++) {
            for (int32_t c = 0; c < os[2]; c++) {
                for (int32_t d = 0; d < os[3]; d++) {
                    const int8_t *base = in + a * stride[0] + b * stride[1] + c * stride[2] + d * stride[3];
                    int32_t best = base[0];
                    int32_t best_at = 0;
                    int32_t k = 0; /* reduced elements seen: the index along an arg op's one axis */
                    for (int32_t i = 0; i < rs[0]; i++) {
                        for (int32_t j = 0; j < rs[1]; j++) {
                            for (int32_t m = 0; m < rs[2]; m++) {
                                const int8_t *row = base + i * stride[0] + j * stride[1] + m * stride[2];
                                for (int32_t l = 0; l < rs[3]; l++, k++) {
                                    const int32_t v = row[l * stride[3]];
                                    if (want_max ? v > best : v < best) {
                                        best = v;
                                        best_at = k;
                                    }
                                }
                            }
                        }
                    }
                    if (index_out) {
                        out32[o++] = best_at;
                    } else {
                        out8[o++] = (int8_t)best;
                    }
                }
            }
        }
    }
}
