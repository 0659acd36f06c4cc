/*
 * rlx_reduce_s16: TFLite Micro's int16 MEAN and SUM (QuantizedMeanOrSum: the offset int32 sum
 * times one multiplier, which for mean holds 1/count), over the reduced dimensions of a 4-d walk.
 * (REDUCE_MAX / REDUCE_MIN have no int16 kernel in TFLite Micro, nor here.)
 */
#ifndef RLX_REDUCE_S16_H
#define RLX_REDUCE_S16_H

#include <stdint.h>

#include "rlx_nn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* p as the int8 MEAN's (rlx_nn.h): adjacent reduced or kept dimensions merged, left-padded with 1s */
void rlx_reduce_s16(const rlx_mean_params *p, const int16_t *in, int16_t *out);

#ifdef __cplusplus
}
#endif

#endif /* RLX_REDUCE_S16_H */
