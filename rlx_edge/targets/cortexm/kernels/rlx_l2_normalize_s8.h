/*
 * rlx_l2_normalize_s8: TFLite's int8 L2_NORMALIZATION along any axis (output scale 1/128,
 * zero point 0).
 */
#ifndef RLX_L2_NORMALIZE_S8_H
#define RLX_L2_NORMALIZE_S8_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int32_t outer, depth, inner; /* the input as [outer, depth, inner], normalized along depth */
    int32_t in_zp;
} rlx_l2_normalize_params;

void rlx_l2_normalize_s8(const rlx_l2_normalize_params *p, const int8_t *in, int8_t *out);

#ifdef __cplusplus
}
#endif

#endif /* RLX_L2_NORMALIZE_S8_H */
