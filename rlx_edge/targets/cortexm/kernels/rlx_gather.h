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

/* What ins[1] holds when indices are read at run time (gather, gather_nd fed by a computed
 * tensor); RLX_GATHER_WALKS: the walks above, from ins[0] only. */
#define RLX_GATHER_WALKS 0
#define RLX_GATHER_TAKE 1    /* out[b][o][i] = x[b][o][idx[b][i]], rows of row_bytes */
#define RLX_GATHER_TAKE_ND 2 /* out[i] = x[sum_j idx[i][j] * nd_strides[j]], rows of row_bytes */

typedef struct {
    int32_t n_outputs;
    const int32_t *walks; /* n_outputs walks */
    const int32_t *rows;  /* the row tables, or NULL */
    const uint8_t *fill;  /* at least elem_bytes of every walk: a filled element */
    int32_t indexed;      /* RLX_GATHER_WALKS, _TAKE or _TAKE_ND */
    int32_t index_bytes;  /* 4 (int32 indices) or 8 (int64) */
    int32_t batches;      /* take: x is [batches][outer][axis_size][row], indices [batches][n_idx] */
    int32_t outer;
    int32_t axis_size;
    int32_t n_idx;        /* take_nd: the number of index tuples */
    int32_t row_bytes;
    int32_t nd;               /* take_nd: the length of an index tuple */
    const int32_t *nd_dims;   /* take_nd: the sizes of x's leading nd axes */
    const int32_t *nd_strides; /* take_nd: rows per step of each of them */
} rlx_gather_params;

/* ins[0]: the data; ins[1]: the indices (read only by the take modes). A negative index counts
 * from the end; an index out of range (the reference refuses it) gives a row of zeros. */
void rlx_gather(const rlx_gather_params *p, const void *const *ins, void *const *outs);

#ifdef __cplusplus
}
#endif

#endif /* RLX_GATHER_H */
