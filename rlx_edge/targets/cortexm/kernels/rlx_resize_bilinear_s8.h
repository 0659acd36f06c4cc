/*
 * rlx_resize_bilinear_s8: TFLite's int8 RESIZE_BILINEAR (ResizeBilinearInteger), NHWC.
 */
#ifndef RLX_RESIZE_BILINEAR_S8_H
#define RLX_RESIZE_BILINEAR_S8_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The op's prepare gives, per output row y, the input rows y0[y] <= y1[y] it reads and its position
 * past row y0[y] in 1/1024 of a pixel, dy[y] (negative before the first row with half-pixel centres);
 * the same per output column. out = (sum of the four pixels times their weights in 1/2**20,
 * half added away from zero) / 2**20, truncated as C divides. */
typedef struct {
    int32_t batches, in_h, in_w, channels, out_h, out_w;
    const int32_t *y0, *y1, *dy; /* out_h each */
    const int32_t *x0, *x1, *dx; /* out_w each */
} rlx_resize_bilinear_params;

void rlx_resize_bilinear_s8(const rlx_resize_bilinear_params *p, const int8_t *in, int8_t *out);

#ifdef __cplusplus
}
#endif

#endif /* RLX_RESIZE_BILINEAR_S8_H */
