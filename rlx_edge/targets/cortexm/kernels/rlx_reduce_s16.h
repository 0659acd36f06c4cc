/*
 * rlx_reduce_s16: TFLite Micro's int16 MEAN and SUM (QuantizedMeanOrSum: the offset int32 sum
 * times one multiplier, which for mean holds 1/count), over the reduced dimensions of a 4-d walk.
 * (REDUCE_MAX / REDUCE_MIN have no int16 kernel in TFLite Micro, nor here.)
 */
#ifndef RLX_REDUCE_S16_H
#define RLX_REDUCE_S16_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int32_t shape[4];        /* the input, adjacent reduced or kept dimensions merged, left-padded with 1s */
    int32_t reduce[4];       /* 1 where the dimension is reduced */
    int32_t sum_offset;      /* -input zero point * reduced elements */
    int32_t mult, shift;     /* s_in / s_out, with 1/count folded in for mean */
    int32_t out_zp, out_min, out_max;
} rlx_reduce_s16_params;

void rlx_reduce_s16(const rlx_reduce_s16_params *p, const int16_t *in, int16_t *out);

#ifdef __cplusplus
}
#endif

#endif /* RLX_REDUCE_S16_H */
