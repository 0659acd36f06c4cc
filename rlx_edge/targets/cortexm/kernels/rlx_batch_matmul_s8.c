/*
 * TFLite's quantized BATCH_MATMUL (batch_matmul.cc, reference_ops::BatchMatMul): for each output
 * element, the sum over the shared dimension of (a - zp_a) * (b - zp_b), requantized by one
 * multiplier, plus the output zero point, clamped to the output type. The adjoint flags are
 * transposes before this kernel (the importer makes them nodes).
 */
#include "rlx_batch_matmul_s8.h"

#include "rlx_nn_support.h"
#include "rlx_s16_support.h"

void rlx_batch_matmul_s8(const rlx_batch_matmul_params *p, const int8_t *a, const int8_t *b, int8_t *out)
{
    for (int32_t t = 0; t < p->batches; t++) {
        const int8_t *at = a + p->a_starts[t];
        const int8_t *bt = b + p->b_starts[t];
        for (int32_t i = 0; i < p->rows; i++) {
            for (int32_t j = 0; j < p->cols; j++) {
                uint32_t acc = 0u;
                for (int32_t k = 0; k < p->depth; k++) {
                    acc += (uint32_t)((at[i * p->depth + k] + p->a_offset) * (bt[k * p->cols + j] + p->b_offset));
                }
                const int32_t y = rlx_requantize((int32_t)acc, p->out_mult, p->out_shift) + p->out_zp;
                *out++ = (int8_t)rlx_clamp(y, p->act_min, p->act_max);
            }
        }
    }
}

void rlx_batch_matmul_s16(const rlx_batch_matmul_params *p, const int16_t *a, const int16_t *b, int16_t *out)
{
    for (int32_t t = 0; t < p->batches; t++) {
        const int16_t *at = a + p->a_starts[t];
        const int16_t *bt = b + p->b_starts[t];
        for (int32_t i = 0; i < p->rows; i++) {
            for (int32_t j = 0; j < p->cols; j++) {
                int64_t acc = 0;
                for (int32_t k = 0; k < p->depth; k++) {
                    acc += (int64_t)(at[i * p->depth + k] + p->a_offset) * (bt[k * p->cols + j] + p->b_offset);
                }
                *out++ = (int16_t)rlx_rq_s16_out(acc, p->out_mult, p->out_shift, 1, p->out_zp, p->act_min,
                                                 p->act_max);
            }
        }
    }
}
