/*
 * rlx_requantize_int: TFLite's QUANTIZE of an integer input (reference_ops::Requantize) for inputs
 * the byte lookup table cannot take: int16 inputs, and per-channel parameters on either side.
 */
#ifndef RLX_REQUANTIZE_INT_H
#define RLX_REQUANTIZE_INT_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Element types, as codes: the input's and the output's. */
enum { RLX_RQ_S8 = 0, RLX_RQ_U8 = 1, RLX_RQ_S16 = 2, RLX_RQ_S32 = 3 };

typedef struct {
    int32_t outer, channels, inner; /* the tensor as [outer, channels, inner]; per tensor: channels 1 */
    int32_t in_type, out_type;      /* RLX_RQ_* */
    const int32_t *in_zp, *mult, *shift, *out_zp; /* one per channel */
    int32_t act_min, act_max;
} rlx_requantize_params;

/* out = clamp(requantize(x - in_zp, mult, shift) + out_zp, act_min, act_max) per channel */
void rlx_requantize_int(const rlx_requantize_params *p, const void *in, void *out);

#ifdef __cplusplus
}
#endif

#endif /* RLX_REQUANTIZE_INT_H */
