/*
 * rlx_transpose_conv: TFLite Micro's TRANSPOSE_CONV, int8 (int32 accumulators) and int16x8
 * (int64 accumulators), in gather form: each output pixel sums the input pixels whose taps reach
 * it, so the kernel needs no scratch (TFLite Micro scatters into an arena buffer of the output's
 * size instead). Integer sums are exact in any order, so both forms give the same accumulators.
 */
#ifndef RLX_TRANSPOSE_CONV_H
#define RLX_TRANSPOSE_CONV_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int32_t batches, in_h, in_w, in_c, out_h, out_w, out_c;
    int32_t k_h, k_w, stride_h, stride_w, pad_top, pad_left;
    int32_t elem_bytes; /* 1: int8 activations, 2: int16 */
    int32_t in_offset, out_zp, act_min, act_max;
    int32_t wide; /* 1: TFLite's int64 requantization (16x8), 0: int32 double rounding (int8) */
    /* [ceil(out_c / 4), k_h, k_w, in_c, 4]: blocks of four output channels interleaved (zeros past out_c) */
    const int8_t *weights;
    const int64_t *bias;   /* [out_c]: zeros where the layer has none */
    const int32_t *mult, *shift;
} rlx_transpose_conv_params;

/* in [batches, in_h, in_w, in_c], out [batches, out_h, out_w, out_c], elements of elem_bytes */
void rlx_transpose_conv(const rlx_transpose_conv_params *p, const void *in, void *out);

#ifdef __cplusplus
}
#endif

#endif /* RLX_TRANSPOSE_CONV_H */
