/*
 * rlx_prelu_s8: TFLite's int8 PRELU, alpha broadcast against the input.
 */
#ifndef RLX_PRELU_S8_H
#define RLX_PRELU_S8_H

#include "rlx_nn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* out = x - zp_x >= 0 ? requant(x - zp_x, a_mult, a_shift)
 *                     : requant((x - zp_x) * (alpha - zp_alpha), out_mult, out_shift), plus out_zp, clamped.
 * Fields of rlx_binary_params: a_offset/b_offset = -zp_x/-zp_alpha, a_mult/a_shift the
 * identity multiplier (s_x / s_y), out_mult/out_shift the alpha one (s_x * s_alpha / s_y). */
void rlx_prelu_s8(const rlx_binary_params *p, const int8_t *a, const int8_t *b, int8_t *out);

#ifdef __cplusplus
}
#endif

#endif /* RLX_PRELU_S8_H */
