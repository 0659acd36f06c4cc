/*
 * rlx_detection_postprocess_f32: SSD post-processing (TFLite's custom op TFLite_Detection_PostProcess),
 * float32, bit for bit the reference of rlx_edge/ir/ops/detection.py (TFLite Micro's kernel).
 * Calls the C library's exp: link with -lm.
 */
#ifndef RLX_DETECTION_POSTPROCESS_F32_H
#define RLX_DETECTION_POSTPROCESS_F32_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int32_t num_boxes;            /* N */
    int32_t box_stride;           /* floats per box encoding (4 or more; the first 4 are y, x, h, w) */
    int32_t num_classes;          /* classes without the background column */
    int32_t score_columns;        /* columns of the scores: num_classes, or num_classes + 1 (column 0 background) */
    int32_t max_detections;       /* M: rows of the outputs */
    int32_t detections_per_class; /* regular NMS: the most boxes kept per class */
    int32_t regular;              /* 1: NMS per class (regular), 0: on each box's best class (fast) */
    float score_threshold;
    float iou_threshold;
    float y_scale, x_scale, h_scale, w_scale;
} rlx_detection_params;

/* Scratch bytes the kernel needs (the planner reserves them; rules.py computes the same). */
#define RLX_DETECTION_SCRATCH(n, m, dpc) \
    (4 * (8 * (n) + ((m) > (dpc) ? (m) : (dpc)) + 6 * ((m) + (dpc))) + (n))

/* ins: box encodings [1, N, stride], scores [1, N, score_columns], anchors [N, 4] (y, x, h, w);
 * outs: boxes [1, M, 4] (ymin, xmin, ymax, xmax), classes [1, M], scores [1, M], num_detections [1].
 * Rows past the detections are zeros. A box that decodes empty (ymin >= ymax or xmin >= xmax), on which
 * TFLite Micro's kernel fails, gives all-zero outputs and num_detections -1. */
void rlx_detection_postprocess_f32(const rlx_detection_params *p, const void *const *ins, void *const *outs,
                                   float *scratch);

#ifdef __cplusplus
}
#endif

#endif /* RLX_DETECTION_POSTPROCESS_F32_H */
