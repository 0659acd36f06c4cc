/*
 * rlx_unary_s16: the int16 elementwise kernels of one input (TFLite's 16x8 scheme): ABS,
 * QUANTIZE (float32 -> int16) and DEQUANTIZE (int16 -> float32), each per tensor, every
 * integer from the node's prepared parameters.
 */
#ifndef RLX_UNARY_S16_H
#define RLX_UNARY_S16_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { RLX_UNARY_S16_ABS = 0, RLX_UNARY_S16_QUANTIZE = 1, RLX_UNARY_S16_DEQUANTIZE = 2 };

typedef struct {
    int32_t size;            /* elements */
    int32_t op;              /* RLX_UNARY_S16_* */
    int32_t in_zp, out_zp;
    int32_t rescale;         /* abs: 1 where |x - in_zp| is requantized by mult, shift */
    int32_t mult, shift;
    float scale;             /* quantize: the output's scale; dequantize: the input's */
    int32_t out_min, out_max;
} rlx_unary_s16_params;

/* in / out: int16_t, or float for the float side of quantize and dequantize */
void rlx_unary_s16(const rlx_unary_s16_params *p, const void *in, void *out);

#ifdef __cplusplus
}
#endif

#endif /* RLX_UNARY_S16_H */
