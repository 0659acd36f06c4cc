/*
 * rlx_cumsum_s8: TFLite's int8 CUMSUM (cumsum.cc): running sums along one axis.
 */
#ifndef RLX_CUMSUM_S8_H
#define RLX_CUMSUM_S8_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int32_t outer, depth, inner;  /* elements before the axis, along it, after it */
    int32_t exclusive, reverse;
    const int32_t *table;         /* each byte's rescaled offset value: ((x - zp) << 20) * s_x / (2 s_x) */
    int32_t start;                /* where each running sum starts: the rescaled -zp */
    int32_t out_mult, out_shift;  /* MultiplyByQuantizedMultiplierSmallerThanOneExp: 2 s_x / (2**20 s_y) */
    int32_t out_zp, act_min, act_max;
} rlx_cumsum_params;

void rlx_cumsum_s8(const rlx_cumsum_params *p, const int8_t *x, int8_t *out);

#ifdef __cplusplus
}
#endif

#endif /* RLX_CUMSUM_S8_H */
