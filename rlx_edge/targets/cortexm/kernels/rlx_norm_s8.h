/*
 * rlx_norm_s8 / rlx_norm_s16: integer layer norm and RMS norm (our own semantics, see
 * docs/ARCHITECTURE.md "Integer semantics of transformer ops" and rlx_edge/ir/ops/norm.py),
 * int8 or int16 activations, gamma int8 / int16, beta absent or int8 / int16 / int32.
 */
#ifndef RLX_NORM_S8_H
#define RLX_NORM_S8_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int32_t rows, depth;  /* the input as [rows, depth], each row normalized */
    int32_t centered;     /* 1: layer norm (the mean taken out), 0: RMS norm */
    int32_t gamma_bytes;  /* 1 or 2 */
    int32_t beta_bytes;   /* 0 (no beta), 1, 2 or 4 */
    int32_t in_zp, gamma_zp, beta_zp, out_zp;
    int64_t eps;          /* round(depth^2 * epsilon / s_in^2) */
    int32_t g_mult, g_shift, b_mult, b_shift;
    int32_t act_min, act_max;
} rlx_norm_params;

void rlx_norm_s8(const rlx_norm_params *p, const int8_t *in, const void *gamma, const void *beta, int8_t *out);
void rlx_norm_s16(const rlx_norm_params *p, const int16_t *in, const void *gamma, const void *beta, int16_t *out);

#ifdef __cplusplus
}
#endif

#endif /* RLX_NORM_S8_H */
