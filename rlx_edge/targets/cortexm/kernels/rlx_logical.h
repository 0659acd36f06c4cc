/*
 * rlx_logical: TFLite's LOGICAL_AND, LOGICAL_OR (broadcasting as the other binary kernels) and
 * LOGICAL_NOT on bools (one byte each, 0 or 1).
 */
#ifndef RLX_LOGICAL_H
#define RLX_LOGICAL_H

#include <stdint.h>

#include "rlx_nn.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { RLX_LOGICAL_AND = 0, RLX_LOGICAL_OR = 1, RLX_LOGICAL_NOT = 2 };

typedef struct {
    rlx_broadcast2 geo;      /* NOT: geo.size only */
    int32_t op;              /* RLX_LOGICAL_* */
} rlx_logical_params;

/* b is not read by NOT (the caller passes a again) */
void rlx_logical(const rlx_logical_params *p, const uint8_t *a, const uint8_t *b, uint8_t *out);

#ifdef __cplusplus
}
#endif

#endif /* RLX_LOGICAL_H */
