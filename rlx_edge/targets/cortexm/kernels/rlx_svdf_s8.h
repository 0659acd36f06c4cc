/*
 * rlx_svdf_s8: TFLite Micro's int8 SVDF (int8 or int16 state and time weights), functional:
 * the previous state in, the updated state out (ir/ops/recurrent.py).
 */
#ifndef RLX_SVDF_S8_H
#define RLX_SVDF_S8_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int32_t batch, inputs, units, rank, memory;
    int32_t state_bytes; /* 1 or 2: the state's and the time weights' element size */
    int32_t in_zp, state_zp, out_zp;
    int32_t feature_mult, feature_shift; /* feature sums to the state's scale */
    int32_t out_mult, out_shift;         /* time sums to the output's scale */
    int32_t state_min, state_max;
    int32_t has_bias;
} rlx_svdf_params;

/* x [B, I] int8, weights_feature [F, I] int8, weights_time [F, M] and state [B, F*M] of
 * state_bytes each, bias [F / rank] int32 (ignored unless has_bias); y [B, F / rank] int8 */
void rlx_svdf_s8(const rlx_svdf_params *p, const int8_t *x, const int8_t *weights_feature,
                 const void *weights_time, const void *state, const int32_t *bias, int8_t *y,
                 void *new_state);

#ifdef __cplusplus
}
#endif

#endif /* RLX_SVDF_S8_H */
