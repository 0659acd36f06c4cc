/*
 * SSD post-processing in float32, following TFLite Micro's detection_postprocess kernel so that the
 * same boxes survive and every output has the same bits (see rlx_edge/ir/ops/detection.py):
 * decoding in double, rounded to float once per centre and half-size; a stable descending sort of the
 * kept scores (ties: the lower box first); float IoU in the kernel's order of operations; greedy
 * suppression of IoU > threshold. Each float operation must round on its own: no contraction into
 * fused multiply-adds (the host build passes -ffp-contract=off; the pragma covers the firmware).
 */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("fp-contract=off")
#endif

#include "rlx_detection_postprocess_f32.h"

#include <math.h>
#include <string.h>

/* Sort box indices by key, descending, stably (bottom-up merge sort; a right element moves ahead only
 * when strictly greater). */
static void rlx_det_sort(int32_t *idx, int32_t *tmp, int32_t n, const float *key)
{
    for (int32_t width = 1; width < n; width *= 2) {
        for (int32_t lo = 0; lo < n; lo += 2 * width) {
            const int32_t mid = lo + width < n ? lo + width : n;
            const int32_t hi = lo + 2 * width < n ? lo + 2 * width : n;
            int32_t a = lo, b = mid, k = lo;
            while (a < mid && b < hi) {
                tmp[k++] = key[idx[b]] > key[idx[a]] ? idx[b++] : idx[a++];
            }
            while (a < mid) {
                tmp[k++] = idx[a++];
            }
            while (b < hi) {
                tmp[k++] = idx[b++];
            }
        }
        memcpy(idx, tmp, (size_t)n * sizeof *idx);
    }
}

static float rlx_det_iou(const float *boxes, int32_t i, int32_t j)
{
    const float *a = boxes + 4 * i;
    const float *c = boxes + 4 * j;
    const float area_a = (a[2] - a[0]) * (a[3] - a[1]);
    const float area_c = (c[2] - c[0]) * (c[3] - c[1]);
    if (area_a <= 0.0f || area_c <= 0.0f) {
        return 0.0f;
    }
    const float ymin = a[0] < c[0] ? c[0] : a[0];
    const float xmin = a[1] < c[1] ? c[1] : a[1];
    const float ymax = c[2] < a[2] ? c[2] : a[2];
    const float xmax = c[3] < a[3] ? c[3] : a[3];
    float h = ymax - ymin;
    float w = xmax - xmin;
    h = h < 0.0f ? 0.0f : h;
    w = w < 0.0f ? 0.0f : w;
    const float inter = h * w;
    const float total = area_a + area_c;
    return inter / (total - inter);
}

/* Greedy NMS on one column of scores: the kept box indices, best first; returns how many. */
static int32_t rlx_det_nms(const rlx_detection_params *p, const float *boxes, const float *col, int32_t limit,
                           int32_t *order, int32_t *tmp, uint8_t *active, int32_t *selected)
{
    int32_t kept = 0;
    for (int32_t i = 0; i < p->num_boxes; ++i) {
        if (col[i] >= p->score_threshold) {
            order[kept++] = i;
        }
    }
    rlx_det_sort(order, tmp, kept, col);
    const int32_t want = kept < limit ? kept : limit;
    int32_t count = 0;
    memset(active, 1, (size_t)kept);
    for (int32_t i = 0; i < kept && count < want; ++i) {
        if (!active[i]) {
            continue;
        }
        selected[count++] = order[i];
        active[i] = 0;
        for (int32_t j = i + 1; j < kept; ++j) {
            if (active[j] && rlx_det_iou(boxes, order[i], order[j]) > p->iou_threshold) {
                active[j] = 0;
            }
        }
    }
    return count;
}

void rlx_detection_postprocess_f32(const rlx_detection_params *p, const void *const *ins, void *const *outs,
                                   float *scratch)
{
    const float *enc = (const float *)ins[0];
    const float *scores = (const float *)ins[1];
    const float *anchors = (const float *)ins[2];
    float *out_boxes = (float *)outs[0];
    float *out_classes = (float *)outs[1];
    float *out_scores = (float *)outs[2];
    float *out_num = (float *)outs[3];
    const int32_t n = p->num_boxes;
    const int32_t m = p->max_detections;
    const int32_t dpc = p->detections_per_class;
    const int32_t lim = m > dpc ? m : dpc;
    const int32_t offset = p->score_columns - p->num_classes;

    float *decoded = scratch;                          /* 4n */
    float *col = decoded + 4 * n;                      /* n */
    int32_t *best = (int32_t *)(col + n);              /* n */
    int32_t *order = best + n;                         /* n */
    int32_t *tmp = order + n;                          /* n */
    int32_t *selected = tmp + n;                       /* lim */
    int32_t *cand_box = selected + lim;                /* m + dpc each: candidates and their merge */
    int32_t *cand_class = cand_box + (m + dpc);
    float *cand_score = (float *)(cand_class + (m + dpc));
    int32_t *next_box = (int32_t *)(cand_score + (m + dpc));
    int32_t *next_class = next_box + (m + dpc);
    float *next_score = (float *)(next_class + (m + dpc));
    uint8_t *active = (uint8_t *)(next_score + (m + dpc)); /* n */

    memset(out_boxes, 0, (size_t)m * 4 * sizeof(float));
    memset(out_classes, 0, (size_t)m * sizeof(float));
    memset(out_scores, 0, (size_t)m * sizeof(float));

    for (int32_t i = 0; i < n; ++i) {
        const float *e = enc + i * p->box_stride;
        const float *a = anchors + 4 * i;
        const float yc = (float)((double)e[0] / (double)p->y_scale * (double)a[2] + (double)a[0]);
        const float xc = (float)((double)e[1] / (double)p->x_scale * (double)a[3] + (double)a[1]);
        const float half_h = (float)(0.5 * exp((double)e[2] / (double)p->h_scale) * (double)a[2]);
        const float half_w = (float)(0.5 * exp((double)e[3] / (double)p->w_scale) * (double)a[3]);
        float *d = decoded + 4 * i;
        d[0] = yc - half_h;
        d[1] = xc - half_w;
        d[2] = yc + half_h;
        d[3] = xc + half_w;
        if (d[0] >= d[2] || d[1] >= d[3]) { /* TFLite Micro's kernel fails here */
            out_num[0] = -1.0f;
            return;
        }
    }

    int32_t count = 0;
    if (p->regular) {
        for (int32_t c = 0; c < p->num_classes; ++c) {
            for (int32_t i = 0; i < n; ++i) {
                col[i] = scores[i * p->score_columns + c + offset];
            }
            const int32_t got = rlx_det_nms(p, decoded, col, dpc, order, tmp, active, selected);
            /* the kept candidates and this class's, both best first: a stable merge, earlier ones first
             * on ties, keeping the best m (the kernel's partial sort of the two lists concatenated) */
            int32_t a = 0, b = 0, k = 0;
            while (k < m && (a < count || b < got)) {
                const int take_new = a >= count || (b < got && col[selected[b]] > cand_score[a]);
                if (take_new) {
                    next_box[k] = selected[b];
                    next_class[k] = c;
                    next_score[k] = col[selected[b]];
                    ++b;
                } else {
                    next_box[k] = cand_box[a];
                    next_class[k] = cand_class[a];
                    next_score[k] = cand_score[a];
                    ++a;
                }
                ++k;
            }
            memcpy(cand_box, next_box, (size_t)k * sizeof *cand_box);
            memcpy(cand_class, next_class, (size_t)k * sizeof *cand_class);
            memcpy(cand_score, next_score, (size_t)k * sizeof *cand_score);
            count = k;
        }
    } else {
        for (int32_t i = 0; i < n; ++i) {
            const float *s = scores + i * p->score_columns + offset;
            int32_t top = 0;
            for (int32_t c = 1; c < p->num_classes; ++c) {
                if (s[c] > s[top]) { /* the first class on ties */
                    top = c;
                }
            }
            best[i] = top;
            col[i] = s[top];
        }
        count = rlx_det_nms(p, decoded, col, m, order, tmp, active, selected);
        for (int32_t k = 0; k < count; ++k) {
            cand_box[k] = selected[k];
            cand_class[k] = best[selected[k]];
            cand_score[k] = col[selected[k]];
        }
    }
    for (int32_t k = 0; k < count; ++k) {
        memcpy(out_boxes + 4 * k, decoded + 4 * cand_box[k], 4 * sizeof(float));
        out_classes[k] = (float)cand_class[k];
        out_scores[k] = cand_score[k];
    }
    out_num[0] = (float)count;
}
