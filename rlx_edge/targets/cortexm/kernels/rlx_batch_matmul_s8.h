/*
 * rlx_batch_matmul_s8, rlx_batch_matmul_s16: TFLite's int8 and int16 BATCH_MATMUL
 * (reference_ops::BatchMatMul with FullyConnectedParams): out[t] = a[t] @ b[t] for every output
 * matrix t, the operands' batch dimensions broadcast through per-matrix offsets.
 */
#ifndef RLX_BATCH_MATMUL_S8_H
#define RLX_BATCH_MATMUL_S8_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int32_t batches;              /* output matrices */
    int32_t rows, depth, cols;    /* a[t] is rows x depth, b[t] depth x cols, both row-major */
    /* element offset of output matrix t's operands: a broadcast batch dimension repeats one */
    const int32_t *a_starts, *b_starts;
    int32_t a_offset, b_offset;   /* -zero points (0 for int16) */
    int32_t out_mult, out_shift;  /* s_a s_b / s_y */
    int32_t out_zp, act_min, act_max;
} rlx_batch_matmul_params;

/* int32 sums (wrapping as the C++ int32 accumulator), MultiplyByQuantizedMultiplier */
void rlx_batch_matmul_s8(const rlx_batch_matmul_params *p, const int8_t *a, const int8_t *b, int8_t *out);
/* int64 sums, TFLite's int64 MultiplyByQuantizedMultiplier */
void rlx_batch_matmul_s16(const rlx_batch_matmul_params *p, const int16_t *a, const int16_t *b, int16_t *out);

#ifdef __cplusplus
}
#endif

#endif /* RLX_BATCH_MATMUL_S8_H */
