/* demo_clip_s8.h - the kernel of the demo_clip op of tests/customop_pkg (a package outside rlx-edge). */
#ifndef DEMO_CLIP_S8_H
#define DEMO_CLIP_S8_H

#include <stdint.h>

typedef struct {
    int32_t n;  /* elements */
    int32_t lo; /* the stored value of -limit, saturated to int8 */
    int32_t hi; /* the stored value of +limit, saturated to int8 */
} demo_clip_params;

void demo_clip_s8(const demo_clip_params *p, const int8_t *x, int8_t *y);

#endif
