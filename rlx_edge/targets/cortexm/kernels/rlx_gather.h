/*
 * rlx_gather: data movement resolved at compile time. Each output is a walk over
 * the input's bytes whose offsets the generator computed from the op's own
 * reference (slice, split, unstack, mirror pad, space <-> depth, space <-> batch,
 * broadcast, ...): strided where the movement is affine, else a table of rows.
 */
#ifndef RLX_GATHER_H
#define RLX_GATHER_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One walk, RLX_GATHER_WALK_INTS int32 values:
 *   [0]      elem_bytes: bytes of one element (contiguous runs are merged into it)
 *   [1..6]   out_shape, left-padded with 1s to rank 6; the output is written in row-major order
 *   [7..12]  in_stride: input bytes per step of each output axis (any sign; 0 repeats)
 *   [13]     in_offset: input byte of output element 0
 *   [14]     rows_at: -1, or where this walk's row table starts in rows[]: then output row r
 *            (the product of axes 0..4) starts at input byte rows[rows_at + r], or is the fill
 *            where that is -1, and in_offset and in_stride[0..4] are unused */
#define RLX_GATHER_WALK_INTS 15

typedef struct {
    int32_t n_outputs;
    const int32_t *walks; /* n_outputs walks */
    const int32_t *rows;  /* the row tables, or NULL */
    const uint8_t *fill;  /* at least elem_bytes of every walk: a filled element */
} rlx_gather_params;

void rlx_gather(const rlx_gather_params *p, const void *in, void *const *outs);

#ifdef __cplusplus
}
#endif

#endif /* RLX_GATHER_H */
