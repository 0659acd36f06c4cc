/*
 * rlx_lut_s16: an int16 activation read from a 513-entry table with linear interpolation
 * (TFLite's LUTLookup for int16, as its 16x8 GELU runs it). The table is the node's: its op's
 * prepare built it (rlx_edge/ir/ops/activation.py, gelu and silu); the kernel computes nothing
 * else.
 */
#ifndef RLX_LUT_S16_H
#define RLX_LUT_S16_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int32_t size;        /* elements */
    const int16_t *lut;  /* 513 entries: 512 segments over the input range, and the last end point */
} rlx_lut_s16_params;

/* One layer over p->size elements (in and out may be the same buffer). */
void rlx_lut_s16(const rlx_lut_s16_params *p, const int16_t *in, int16_t *out);

#ifdef __cplusplus
}
#endif

#endif /* RLX_LUT_S16_H */
