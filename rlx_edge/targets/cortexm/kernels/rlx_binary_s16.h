/*
 * rlx_binary_s16: int16 binary kernels of two broadcast operands without a kernel of their own
 * in rlx_elementwise_s16.c: SQUARED_DIFFERENCE (squared_difference.cc's 16x8 form), MAXIMUM and
 * MINIMUM (maximum_minimum.cc: stored values compared, an operand quantized unlike the output
 * requantized onto its parameters first).
 */
#ifndef RLX_BINARY_S16_H
#define RLX_BINARY_S16_H

#include <stdint.h>

#include "rlx_nn.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { RLX_BINARY_S16_SQUARED_DIFFERENCE = 0, RLX_BINARY_S16_MAXIMUM = 1, RLX_BINARY_S16_MINIMUM = 2 };

typedef struct {
    rlx_broadcast2 geo;
    int32_t op;              /* RLX_BINARY_S16_* */
    int32_t a_offset, b_offset; /* -zero points */
    int32_t left_shift;      /* squared difference: headroom bits before the input multipliers */
    /* squared difference: each input onto the common scale (multipliers < 1);
     * maximum / minimum: each operand onto the output's parameters where *_rescale */
    int32_t a_mult, a_shift, b_mult, b_shift;
    int32_t a_rescale, b_rescale;
    int32_t out_mult, out_shift; /* squared difference */
    int32_t out_zp, act_min, act_max;
} rlx_binary_s16_params;

void rlx_binary_s16(const rlx_binary_s16_params *p, const int16_t *a, const int16_t *b, int16_t *out);

#ifdef __cplusplus
}
#endif

#endif /* RLX_BINARY_S16_H */
