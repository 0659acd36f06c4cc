/*
 * rlx_log_softmax_s8: TFLite's int8 LOG_SOFTMAX along any axis (output scale 16/256,
 * zero point 127).
 */
#ifndef RLX_LOG_SOFTMAX_S8_H
#define RLX_LOG_SOFTMAX_S8_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    /* the input as [outer, depth, inner], normalized along depth */
    int32_t outer, depth, inner;
    /* indexed by -(x - max), 0..255: the difference in Q5.26, and its exp as a Q12.19 term
     * of the row's sum (0 below diff_min, where TFLite skips it) */
    const int32_t *scaled_table;
    const int32_t *exp_table;
    int32_t diff_min;
    int32_t reverse_mult, reverse_shift; /* Q5.26 back to input steps (shift <= 0) */
} rlx_log_softmax_params;

void rlx_log_softmax_s8(const rlx_log_softmax_params *p, const int8_t *in, int8_t *out);

#ifdef __cplusplus
}
#endif

#endif /* RLX_LOG_SOFTMAX_S8_H */
