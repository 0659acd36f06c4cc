/* demo_clip_s8.c - clamp stored int8 values to [lo, hi]: the output keeps the input's scale and zero point. */
#include "demo_clip_s8.h"

void demo_clip_s8(const demo_clip_params *p, const int8_t *x, int8_t *y)
{
    for (int32_t i = 0; i < p->n; i++) {
        int32_t v = x[i];
        y[i] = (int8_t)(v < p->lo ? p->lo : (v > p->hi ? p->hi : v));
    }
}
