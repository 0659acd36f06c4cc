/*
 * rlx_activation_s16: TFLite's int16 LOGISTIC and TANH (reference_integer_ops Logistic / Tanh for
 * int16): the input rescaled onto the grid of a 256-entry sigmoid table, linear interpolation
 * between its entries, output scale 2**-15 and zero point 0. The multiplier and shift are the
 * node's prepared parameters (rlx_edge.ir.fixedpoint.int16_sigmoid_tanh_input_params); an LSTM's
 * gates call rlx_logistic_s16 / rlx_tanh_s16 directly with theirs.
 */
#ifndef RLX_ACTIVATION_S16_H
#define RLX_ACTIVATION_S16_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { RLX_ACTIVATION_S16_LOGISTIC = 0, RLX_ACTIVATION_S16_TANH = 1 };

typedef struct {
    int32_t size;              /* elements */
    int32_t op;                /* RLX_ACTIVATION_S16_* */
    int32_t input_multiplier;  /* 0: a power-of-two input scale, multiplied by 3 << input_left_shift */
    int32_t input_left_shift;  /* >= 0; with a multiplier, the right shift after multiplying */
} rlx_activation_s16_params;

/* One layer: p->op over p->size elements (in and out may be the same buffer). */
void rlx_activation_s16(const rlx_activation_s16_params *p, const int16_t *in, int16_t *out);

/* sigmoid and tanh of size int16 values; in and out may be the same buffer. */
void rlx_logistic_s16(int32_t input_multiplier, int32_t input_left_shift, int32_t size, const int16_t *in,
                      int16_t *out);
void rlx_tanh_s16(int32_t input_multiplier, int32_t input_left_shift, int32_t size, const int16_t *in,
                  int16_t *out);

#ifdef __cplusplus
}
#endif

#endif /* RLX_ACTIVATION_S16_H */
