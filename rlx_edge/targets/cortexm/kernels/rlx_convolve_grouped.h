/*
 * rlx_convolve_grouped: TFLite Micro's grouped CONV_2D (the filter's input depth a divisor of
 * the input's) for int8 and int16 activations, int8 weights: output channel c reads the input
 * channels of its group, g = c / (out_c / groups), only.
 */
#ifndef RLX_CONVOLVE_GROUPED_H
#define RLX_CONVOLVE_GROUPED_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int32_t batches, in_h, in_w, in_c;
    int32_t out_h, out_w, out_c;
    int32_t groups;          /* in_c / groups input channels feed each group's out_c / groups outputs */
    int32_t k_h, k_w;
    int32_t stride_h, stride_w;
    int32_t dil_h, dil_w;
    int32_t pad_top, pad_left;
    int32_t elem_bytes;      /* activations: 1 int8, 2 int16 */
    int32_t in_offset;       /* -input zero point; padded taps are skipped */
    int32_t out_zp, act_min, act_max;
    int32_t wide;            /* 16x8 with an int64 bias: TFLite's int64 requantization */
    const int8_t *weights;   /* [out_c][k_h][k_w][in_c / groups], TFLite's layout */
    const int64_t *bias;     /* [out_c] (0 without one) */
    const int32_t *mult;     /* [out_c] Q31 */
    const int32_t *shift;    /* [out_c] (positive: left) */
} rlx_conv_grouped_params;

/* in / out: int8_t or int16_t (elem_bytes) */
void rlx_convolve_grouped(const rlx_conv_grouped_params *p, const void *in, void *out);

#ifdef __cplusplus
}
#endif

#endif /* RLX_CONVOLVE_GROUPED_H */
