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
    const rlx_reduce_walk w = rlx_reduce_walk_of(p->shape, p->reduce);
    const int32_t want_max = p->op == RLX_REDUCE_MAX || p->op == RLX_REDUCE_ARGMAX;
    const int32_t index_out = p->op >= RLX_REDUCE_ARGMAX;
    int8_t *out8 = (int8_t *)out;
    int32_t *out32 = (int32_t *)out;
    int32_t o = 0;
    for (int32_t a = 0; a < w.os[0]; a++) {
        for (int32_t b = 0; b < w.os[1]; b++) {
            for (int32_t c = 0; c < w.os[2]; c++) {
                for (int32_t d = 0; d < w.os[3]; d++) {
                    const int8_t *base = in + a * w.stride[0] + b * w.stride[1] + c * w.stride[2] + d * w.stride[3];
                    int32_t best = base[0];
                    int32_t best_at = 0;
                    int32_t k = 0; /* reduced elements seen: the index along an arg op's one axis */
                    for (int32_t i = 0; i < w.rs[0]; i++) {
                        for (int32_t j = 0; j < w.rs[1]; j++) {
                            for (int32_t m = 0; m < w.rs[2]; m++) {
                                const int8_t *row = base + i * w.stride[0] + j * w.stride[1] + m * w.stride[2];
                                for (int32_t l = 0; l < w.rs[3]; l++, k++) {
                                    const int32_t v = row[l * w.stride[3]];
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
