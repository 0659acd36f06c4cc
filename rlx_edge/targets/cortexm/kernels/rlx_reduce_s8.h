/*
 * rlx_reduce_s8: TFLite's int8 REDUCE_MAX, REDUCE_MIN (the output keeps the input's
 * quantization, so picking a stored value is the whole op), ARG_MAX and ARG_MIN (int32
 * indices, the first one on ties).
 */
#ifndef RLX_REDUCE_S8_H
#define RLX_REDUCE_S8_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { RLX_REDUCE_MAX = 0, RLX_REDUCE_MIN = 1, RLX_REDUCE_ARGMAX = 2, RLX_REDUCE_ARGMIN = 3 };

typedef struct {
    /* the input with adjacent dimensions of the same kind merged, left-padded with 1s; an
     * arg op reduces exactly one of them */
    int32_t shape[4];
    int32_t reduce[4];       /* 1 where the dimension is reduced */
    int32_t op;              /* RLX_REDUCE_* */
} rlx_reduce_params;

/* out: int8_t values (max, min) or int32_t indices (argmax, argmin), in output order */
void rlx_reduce_s8(const rlx_reduce_params *p, const int8_t *in, void *out);

#ifdef __cplusplus
}
#endif

#endif /* RLX_REDUCE_S8_H */
