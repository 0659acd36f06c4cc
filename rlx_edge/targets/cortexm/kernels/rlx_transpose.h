/*
 * rlx_transpose: any permutation of the axes of a tensor of any element type.
 */
#ifndef RLX_TRANSPOSE_H
#define RLX_TRANSPOSE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The generator simplifies the permutation first: size-1 axes dropped, axes that stay
 * neighbours merged, trailing axes that stay in place folded into the element. So a
 * permutation that moves nothing is one element, an NCHW -> NHWC transpose three axes. */
typedef struct {
    int32_t elem_bytes;   /* bytes of one (possibly folded) element */
    int32_t out_shape[6]; /* left-padded with 1s to rank 6 */
    int32_t in_stride[6]; /* in elements: the input stride of the axis that output axis d reads */
} rlx_transpose_params;

/* out[j0..j5] = in[sum_d j_d * in_stride[d]], for every output index in row-major order. */
void rlx_transpose(const rlx_transpose_params *p, const void *in, void *out);

#ifdef __cplusplus
}
#endif

#endif /* RLX_TRANSPOSE_H */
