/*
 * rlx_div_s8: TFLite's int8 DIV (div.cc, reference DivElementwise), broadcasting as the other
 * binary kernels (RLX_BINARY_LOOP).
 */
#ifndef RLX_DIV_S8_H
#define RLX_DIV_S8_H

#include <stdint.h>

#include "rlx_nn.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    rlx_broadcast2 geo;
    int32_t a_offset;        /* -zero point of the dividend */
    /* per divisor bit pattern: GetReciprocal of |b - zp_b| (Q0.31), its shift, and whether
     * b - zp_b was negative (the dividend is negated then) */
    const int32_t *b_inv;
    const int8_t *b_shift;
    const int8_t *b_neg;
    int32_t out_mult, out_shift;  /* s_a / (s_b s_y) */
    int32_t out_zp, act_min, act_max;
} rlx_div_params;

void rlx_div_s8(const rlx_div_params *p, const int8_t *a, const int8_t *b, int8_t *out);

#ifdef __cplusplus
}
#endif

#endif /* RLX_DIV_S8_H */
