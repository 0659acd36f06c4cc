/*
 * rlx_nn.h - the rlx-edge int8 kernel library (CMSIS-NN-style naming).
 *
 * Every kernel takes one const parameter struct, built at compile time by the
 * rlx-edge emitter (model.c), plus the activation pointers it reads and
 * writes inside the arena and, where declared, a scratch buffer. Nothing
 * allocates; nothing keeps state between calls.
 *
 * Layout conventions:
 *  - activations are NHWC int8;
 *  - convolution / fully connected weights are int8, re-laid out at compile
 *    time into blocks of 4 output channels and quads q of 4 reduction
 *    elements (rows and reduction padded with zeros), 16 bytes each, so the
 *    inner loop walks one pointer forward. Within a block and quad, word
 *    2 (k & 1) + (r >> 1) holds rows r = 2i, 2i+1 at elements k = 0, 2 or
 *    1, 3 as bytes [even k, odd row k, even k+2, odd row k+2], the even row's
 *    bytes + 128 (unsigned): a halfword is w_even + 128 + 256 w_odd, so the
 *    DSP build multiplies the raw word and SXTB16 ROR 8 of it (the odd row)
 *    and subtracts 256 acc_odd and 128 sum(x) once per block (see
 *    rules.gemm_weight_layout); the portable build reads the bytes;
 *  - their bias already holds bias - input_zero_point * sum(weights), so the
 *    inner loop multiplies raw input bytes and never adds the offset;
 *  - the reduction buffer (im2col / expanded input) is int16 and, per quad,
 *    ordered x0, x2, x1, x3: the halves SXTB16 gives for a word of input;
 *  - the GEMM's per-channel constants are one array, 12 words per block of
 *    4 rows, read by both builds: the folded biases (an even row's word
 *    + 256 x the next row's, which SMLAD of a raw weight word sums too),
 *    then per row the multiplier and either the shift (rq_mode 0) or rq_add
 *    (modes 1, 2; its shift e is read off it, see rlx_rq_e); other kernels
 *    keep one array per constant.
 */
#ifndef RLX_NN_H
#define RLX_NN_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Where a broadcasting binary kernel reads its two operands (RLX_BINARY_LOOP): shapes
 * right-aligned, left-padded with 1s to four dimensions. */
typedef struct {
    int32_t size;            /* output elements */
    int32_t broadcast;       /* 0: both operands have the output's shape (one flat loop) */
    int32_t out_shape[4];
    int32_t a_strides[4];    /* element strides, 0 along broadcast axes */
    int32_t b_strides[4];
} rlx_broadcast2;

/* Where SELECT_V2 reads the condition, x and y (RLX_SELECT_LOOP), as rlx_broadcast2. */
typedef struct {
    int32_t size;            /* output elements */
    int32_t out_shape[4];
    int32_t c_strides[4];    /* element strides, 0 along broadcast axes */
    int32_t x_strides[4];
    int32_t y_strides[4];
} rlx_broadcast3;

/* The matrix product behind convolution and fully connected layers. */
typedef struct rlx_gemm_params rlx_gemm_params;

/* A 4 x 2 GEMM instance (rlx_convolve_s8.c): output pixels a and b from their int16 im2col
 * slots x (rlx_nn.h's order), c128 = 128 x the sums of each slot. One per requantization;
 * the emitter names the one a convolution runs, so a model links only those it uses. */
typedef void (*rlx_gemm2_fn)(const rlx_gemm_params *g, const int16_t *x, int8_t *out_a, int8_t *out_b,
                             const uint32_t *c128);
void rlx_gemm_2px_ref(const rlx_gemm_params *g, const int16_t *x, int8_t *out_a, int8_t *out_b,
                      const uint32_t *c128); /* rq_mode 0 */
void rlx_gemm_2px_part(const rlx_gemm_params *g, const int16_t *x, int8_t *out_a, int8_t *out_b,
                       const uint32_t *c128); /* rq_mode 1 or 2, out_c % 4 != 0 */
void rlx_gemm_2px_part_lo(const rlx_gemm_params *g, const int16_t *x, int8_t *out_a, int8_t *out_b,
                          const uint32_t *c128); /* rq_mode 1, act_max 127, out_c % 4 != 0 */
void rlx_gemm_2px_clamp(const rlx_gemm_params *g, const int16_t *x, int8_t *out_a, int8_t *out_b,
                        const uint32_t *c128); /* rq_mode 1, out_c % 4 == 0 */
void rlx_gemm_2px_lo(const rlx_gemm_params *g, const int16_t *x, int8_t *out_a, int8_t *out_b,
                     const uint32_t *c128); /* rq_mode 1, act_max 127 (the lower bound alone), out_c % 4 == 0 */
void rlx_gemm_2px_sat(const rlx_gemm_params *g, const int16_t *x, int8_t *out_a, int8_t *out_b,
                      const uint32_t *c128); /* rq_mode 2, out_c % 4 == 0 */

struct rlx_gemm_params {
    int32_t out_c;           /* output channels (rows of the weight matrix) */
    int32_t k_quads;         /* reduction length / 4, rounded up */
    int32_t out_zp;          /* output zero point */
    int32_t act_min;         /* fused activation clamp, in output units */
    int32_t act_max;
    int32_t rq_mode;         /* 0: reference requantization; 1, 2: the fast exact form (rlx_rq_fast) */
    const int8_t *weights;   /* [ceil(out_c/4)][k_quads][16], the order above */
    /* [ceil(out_c/4)][12] per block of 4 rows: the 4 biases (zero point folded in; rows 0 and 2
     * + 256 x rows 1 and 3's, rlx_even_start), then per row
     * its Q31 multiplier and, mode 0, its shift (positive: left) or, modes 1, 2, its rq_add
     * 2**(e-1) + out_zp * 2**e (right shift e = rlx_rq_e) */
    const int32_t *chan;
    rlx_gemm2_fn gemm2;      /* convolutions: the instance for this rq_mode and out_c; else NULL */
};

typedef struct {
    rlx_gemm_params gemm;
    int32_t batches, in_h, in_w, in_c;
    int32_t out_h, out_w;
    int32_t k_h, k_w;
    int32_t stride_h, stride_w;
    int32_t dil_h, dil_w;
    int32_t pad_top, pad_left;
    int32_t in_zp;           /* written into padded taps: (x - zp) is then 0 */
} rlx_conv_params;

typedef struct {
    rlx_gemm_params gemm;
    int32_t batches;         /* rows of the input */
    int32_t in_features;
} rlx_fc_params;

typedef struct {
    int32_t batches, in_h, in_w, in_c;
    int32_t out_h, out_w, out_c;
    int32_t ch_mult;         /* depth multiplier */
    int32_t k_h, k_w;
    int32_t stride_h, stride_w;
    int32_t dil_h, dil_w;
    int32_t pad_top, pad_left;
    int32_t in_offset;       /* -input zero point; padded taps are skipped */
    int32_t out_zp, act_min, act_max;
    int32_t rq_mode;         /* as rlx_gemm_params */
    const int8_t *weights;   /* TFLite layout [k_h][k_w][out_c] */
    const int16_t *weights16; /* 3x3, --optimize speed, DSP build: [out_c/4][9][c0 c2 c1 c3]; else NULL */
    const int8_t *weights9;  /* 3x3, --optimize speed, portable build: [out_c][9]; else NULL */
    const int32_t *bias;     /* [out_c] */
    const int32_t *bias_full; /* 3x3 portable build: bias + in_offset * sum of the 9 taps; else NULL */
    const int32_t *mult;
    const int32_t *shift;    /* as rlx_gemm_params */
    const int32_t *rq_add;
    /* 3x3, --optimize speed, on the DSP build with the fast requantization (rq_mode 1, 2);
     * else NULL. Accumulators run doubled (acc << 1 is what SMMLAR takes). */
    const int16_t *weights16x2; /* 2 x weights, laid out as weights16 */
    const int32_t *dwq;      /* per group of 4 channels, 24 words: [3][4] 2 x (bias + in_offset x sum
                              * of the taps computed: all 9, columns 1-2 (left edge), columns 0-1
                              * (right edge)), [4] (mult, rq_add) pairs, [4] right shifts; the line
                              * kernel's: 21 words a group (rlx_dw1_rq, rules._dw_line_consts); the
                              * small and pair kernels': see their declarations */
    const int8_t *pad3;      /* 3 x in_c bytes of the input zero point: rows outside the image */
} rlx_dw_conv_params;

typedef struct {
    int32_t batches, in_h, in_w, ch;
    int32_t out_h, out_w;
    int32_t k_h, k_w;
    int32_t stride_h, stride_w;
    int32_t pad_top, pad_left;
    int32_t act_min, act_max;
} rlx_pool_params;

/* Broadcasting binary ops over up to 4 dimensions (shapes right-aligned). */
typedef struct {
    rlx_broadcast2 geo;
    int32_t a_offset, b_offset;   /* -zero points */
    int32_t a_mult, a_shift;      /* prelu: the identity multiplier */
    int32_t out_mult, out_shift;
    int32_t out_zp, act_min, act_max;
    /* add/sub: each input's scaled value by bit pattern (the second negated for sub), so the
     * raw sum is a_table[a] + b_table[b] */
    const int32_t *a_table, *b_table;
    /* with the tables: the output requantization's rq_mode (0: reference formula; 1, 2: as
     * rlx_gemm_params, proven for |a_table| + |b_table|), its rq_add and right shift */
    int32_t rq_mode, rq_add, rq_shift;
} rlx_binary_params;

/* Any elementwise map of a byte type: the table is the integer reference
 * evaluated on all 256 inputs at compile time (requantize, relu, clamp,
 * logistic, tanh, hard_swish, dequantize). Indexed by the input's bit pattern. */
typedef struct {
    int32_t size;
    const void *table;       /* 256 entries of out_bytes each */
    int32_t out_bytes;       /* 1, 2 or 4 */
} rlx_lut_params;

/* Where a softmax reads its optional mask (one byte per position, 0 = masked) for row r
 * of x seen as [d0, dims[0], dims[1], depth]: strides are the mask's element strides at
 * each of those indices, 0 where it broadcasts. */
typedef struct {
    int32_t dims[2];
    int32_t strides[4];
} rlx_mask_walk;

typedef struct {
    int32_t rows, depth;
    /* exp(beta * s * (x - max)) in Q0.31 for x - max = i - 255 (i in 0..255);
     * 0 below TFLite's diff_min, where an input no longer contributes. */
    const int32_t *exp_table;
    int32_t out_zp;          /* -128 for int8 outputs */
    int32_t out_bits;        /* 8, or 16 for int16 outputs (zero point -32768) */
    rlx_mask_walk mask;      /* read when the mask argument is not NULL */
} rlx_softmax_params;

typedef struct {
    int32_t elem_bytes;
    int32_t in_shape[6];     /* left-padded with 1s to rank 6 */
    int32_t out_shape[6];
    int32_t before[6];
    const void *fill;        /* one element */
} rlx_pad_params;

typedef struct {
    int32_t n_inputs;
    int32_t outer;           /* product of dimensions before the axis */
    const int32_t *chunk;    /* bytes each input contributes per outer step */
    const int32_t *mapped;   /* per input: 0 copies, 1 maps bytes through its table */
    const uint8_t *tables;   /* 256 bytes per input (requantization to the output) */
} rlx_concat_params;

typedef struct {
    int32_t shape[4];        /* input, left-padded with 1s */
    int32_t reduce[4];       /* 1 where the axis is reduced */
    int32_t sum_offset;      /* -input zero point * reduced elements */
    int32_t mult, shift;     /* s_in / s_out with 1/count folded in */
    int32_t out_zp, out_min, out_max;
} rlx_mean_params;

typedef struct {
    int32_t size;
    float scale;             /* output scale: q = round(x / scale) + zp */
    int32_t zp, out_min, out_max;
} rlx_quantize_params;

void rlx_convolve_s8(const rlx_conv_params *p, const int8_t *in, int8_t *out, int16_t *scratch);
/* rlx_convolve_s8 for a field of at most 256 bytes (k_h k_w in_c) on in_c not a multiple of 4 only
 * (e.g. 3x3 on 3 channels): the other paths are not linked */
void rlx_convolve_small_s8(const rlx_conv_params *p, const int8_t *in, int8_t *out, int16_t *scratch);
void rlx_convolve_1x1_s8(const rlx_conv_params *p, const int8_t *in, int8_t *out, int16_t *scratch);
/* rlx_convolve_s8 and rlx_convolve_small_s8 on a padded layer: scratch holds, after the two pixels
 * of int16 (16 k_quads bytes), the input padded with its zero point as far as the windows reach
 * (rules._pad_image_bytes), written once a batch */
void rlx_convolve_pad_s8(const rlx_conv_params *p, const int8_t *in, int8_t *out, int16_t *scratch);
void rlx_convolve_small_pad_s8(const rlx_conv_params *p, const int8_t *in, int8_t *out, int16_t *scratch);
/* 1x1 on 1 to 4 input channels, rq_mode 1 or 2 (rlx_convolve_1x1_k4_s8.c): gemm.chan is one stream
 * of 5 words a channel (rules.conv_1x1_k4_stream), gemm.weights NULL, scratch 24 bytes a channel.
 * _relu_s8: the lower bound is the output zero point and the upper one 127; _clamp_s8: the lower
 * bound the zero point, the upper one below 127; _s8: rq_mode 2. */
void rlx_convolve_1x1_k4_relu_s8(const rlx_conv_params *p, const int8_t *in, int8_t *out, int16_t *scratch);
void rlx_convolve_1x1_k4_clamp_s8(const rlx_conv_params *p, const int8_t *in, int8_t *out, int16_t *scratch);
/* _relu_s8 with every channel's shift e in 4 to 11: the stream's last two words are rq_add 2**m (add + 1/2)
 * and 2**m, m = 12 - e (rules.conv_1x1_k4_stream) */
void rlx_convolve_1x1_k4_relu12_s8(const rlx_conv_params *p, const int8_t *in, int8_t *out, int16_t *scratch);
void rlx_convolve_1x1_k4_s8(const rlx_conv_params *p, const int8_t *in, int8_t *out, int16_t *scratch);
/* 1x1 on 8 or 16 input channels, rq_mode 1 or 2 (rlx_convolve_1x1_kw_s8.c), each instance one entry for
 * both K: gemm.chan is one stream of K / 4 + 3 words a channel (rules.conv_1x1_kw_stream), gemm.weights
 * NULL; scratch: a group's widened records (rules._kw_scratch). The instances' bounds as
 * rlx_convolve_1x1_k4_*'s. */
void rlx_convolve_1x1_kw_relu_s8(const rlx_conv_params *p, const int8_t *in, int8_t *out, int16_t *scratch);
void rlx_convolve_1x1_kw_clamp_s8(const rlx_conv_params *p, const int8_t *in, int8_t *out, int16_t *scratch);
void rlx_convolve_1x1_kw_s8(const rlx_conv_params *p, const int8_t *in, int8_t *out, int16_t *scratch);
void rlx_fully_connected_s8(const rlx_fc_params *p, const int8_t *in, int8_t *out);
/* 4 to 8 inputs, 2 outputs or more, rq_mode 2 (small_s8) or 1 (small_clamp_s8): gemm.chan is one
 * stream (rules.fc_small_stream), the input held widened in registers; gemm.weights is NULL */
void rlx_fc_small_s8(const rlx_fc_params *p, const int8_t *in, int8_t *out);
void rlx_fc_small_clamp_s8(const rlx_fc_params *p, const int8_t *in, int8_t *out);
void rlx_depthwise_conv_s8(const rlx_dw_conv_params *p, const int8_t *in, int8_t *out);
/* scratch: a ring of 3 int16 rows of one group of 4 channels and a zero row, 32 ((out_w - 1) stride_w + 3) bytes */
void rlx_depthwise_conv_3x3_s8(const rlx_dw_conv_params *p, const int8_t *in, int8_t *out, int16_t *scratch);
void rlx_depthwise_conv_3x3_wide_s8(const rlx_dw_conv_params *p, const int8_t *in, int8_t *out, int16_t *scratch);
/* DSP cores (rlx_depthwise_conv_3x3_s8 elsewhere), strides 1 and 2: channel-planar int16 lines, SMLAD on
 * tap pairs; rq_mode 2 with out_zp -128 and rq_mode 0 (pair_s8), rq_mode 1 and 2 (pair_clamp_s8; any
 * rq_mode runs on either, on C lines where not on asm ones); scratch: the larger of that
 * kernel's and its own (rules.py: blocks of 4 to 32 channels' constants and planes) */
void rlx_depthwise_conv_3x3_pair_s8(const rlx_dw_conv_params *p, const int8_t *in, int8_t *out, int16_t *scratch);
void rlx_depthwise_conv_3x3_pair_clamp_s8(const rlx_dw_conv_params *p, const int8_t *in, int8_t *out,
                                          int16_t *scratch);
/* balanced 3x3, depth multiplier 2 or a dilation at stride 1: the pair kernel's lines (per phase of the
 * dilation) on DSP cores, the ring elsewhere; scratch: the larger of the ring's and the pair kernel's on
 * the largest phase (rules.py) */
void rlx_depthwise_conv_3x3_pair_gen_s8(const rlx_dw_conv_params *p, const int8_t *in, int8_t *out, int16_t *scratch);
/* any other window (balanced, speed); scratch: widened weights, a ring of widened rows and a zero row (rules.py) */
void rlx_depthwise_conv_ring_s8(const rlx_dw_conv_params *p, const int8_t *in, int8_t *out, int16_t *scratch);
/* 1-D windows (Kx1, 1xK) on DSP cores, the ring elsewhere; scratch: the larger of its planes and the ring (rules.py) */
void rlx_depthwise_conv_line_s8(const rlx_dw_conv_params *p, const int8_t *in, int8_t *out, int16_t *scratch);
/* balanced, most windows but 3x3 and long 1-D lines (rules._dw_px): a pixel at a time, 4 channels at once,
 * on DSP cores (the ring elsewhere, or the general kernel on at most 4 pixels); scratch: the larger of the
 * ring's and its own (92 bytes, 12 a window tap, 4 an output row and column; rules.py) */
void rlx_depthwise_conv_px_s8(const rlx_dw_conv_params *p, const int8_t *in, int8_t *out, int16_t *scratch);
/* balanced, small layers (rules._dw_small): 3x3 windows, depth multipliers 1 and 2, few output pixels,
 * rq_mode 1 and 2; on DSP cores 4 output channels of a pixel at once from tap pairs (SMLAD), the weights
 * of up to 16 groups widened into the scratch at a time, the general kernel (at most 4 pixels) or the
 * ring elsewhere; dwq: per group of 4 output channels 29 words, then 17 for the last input channel's 2
 * outputs with multiplier 2 and odd channels (rules._dw_small_consts); scratch: the larger of the
 * ring's and its own (72 bytes, 188 a group of the largest chunk, a copy of the input with the zero
 * point around it where windows reach past the image; rules._dw_small_scratch) */
void rlx_depthwise_conv_small_s8(const rlx_dw_conv_params *p, const int8_t *in, int8_t *out, int16_t *scratch);
void rlx_avgpool_s8(const rlx_pool_params *p, const int8_t *in, int8_t *out, int32_t *scratch);
void rlx_maxpool_s8(const rlx_pool_params *p, const int8_t *in, int8_t *out);
void rlx_add_s8(const rlx_binary_params *p, const int8_t *a, const int8_t *b, int8_t *out);
void rlx_mul_s8(const rlx_binary_params *p, const int8_t *a, const int8_t *b, int8_t *out);
void rlx_lut_8(const rlx_lut_params *p, const void *in, void *out);
/* int8 or int16 (out_bits) out; mask NULL or one byte per position (kept max and sum, masked -> out_zp) */
void rlx_softmax_s8(const rlx_softmax_params *p, const int8_t *in, void *out);
void rlx_softmax_masked_s8(const rlx_softmax_params *p, const int8_t *in, const uint8_t *mask, void *out);
void rlx_pad(const rlx_pad_params *p, const void *in, void *out);
void rlx_concat(const rlx_concat_params *p, const void *const *ins, void *out);
void rlx_mean_s8(const rlx_mean_params *p, const int8_t *in, int8_t *out);
void rlx_quantize_f32_s8(const rlx_quantize_params *p, const float *in, int8_t *out);
void rlx_copy(const void *in, void *out, int32_t bytes);

/* ---- int4 weights (rlx_convolve_s4.c, rlx_depthwise_conv_s4.c) -------------------------
 * Weights in [-8, 7] packed two per byte in flash (ceil(n / 2) bytes for n weights, no padding)
 * and unpacked in registers; activations int8 as above. */

/* The matrix product of int4 conv / fully connected layers: rows in blocks of 4 (the last
 * block has out_c % 4 rows, if any). Per block of r rows, for each whole chunk of 8
 * reduction elements 8j..8j+7, r words, one per row, byte i holding element 8j+i in its low
 * nibble and 8j+4+i in its high one; then the k % 8 remaining elements of its r rows, row
 * after row, two per byte (low nibble first). Block b starts at byte 2 * b * k. */
typedef struct {
    int32_t out_c;           /* rows */
    int32_t k;               /* reduction length */
    int32_t out_zp, act_min, act_max;
    int32_t rq_mode;         /* as rlx_gemm_params */
    const uint8_t *weights;  /* ceil(out_c * k / 2) bytes, laid out as above */
    const int32_t *bias;     /* [out_c], bias - input zero point * sum of the row */
    const int32_t *mult;     /* [out_c] */
    const int32_t *shift;
    const int32_t *rq_add;
} rlx_gemm_s4_params;

typedef struct {
    rlx_gemm_s4_params gemm;
    int32_t batches, in_h, in_w, in_c;
    int32_t out_h, out_w;
    int32_t k_h, k_w;
    int32_t stride_h, stride_w;
    int32_t dil_h, dil_w;
    int32_t pad_top, pad_left;
    int32_t in_zp;           /* written into padded taps: (x - zp) is then 0 */
} rlx_conv_s4_params;

typedef struct {
    rlx_gemm_s4_params gemm;
    int32_t batches;         /* rows of the input */
    int32_t in_features;
} rlx_fc_s4_params;

typedef struct {
    int32_t batches, in_h, in_w, in_c;
    int32_t out_h, out_w, out_c;
    int32_t ch_mult;         /* depth multiplier */
    int32_t k_h, k_w;
    int32_t stride_h, stride_w;
    int32_t dil_h, dil_w;
    int32_t pad_top, pad_left;
    int32_t in_offset;       /* -input zero point; padded taps are skipped */
    int32_t out_zp, act_min, act_max;
    int32_t rq_mode;         /* as rlx_gemm_params */
    /* per pair of output channels (2j, 2j+1), k_h * k_w bytes, tap t's byte holding channel
     * 2j's weight in its low nibble and 2j+1's in its high one; an odd last channel's taps
     * two per byte (low nibble first) */
    const uint8_t *weights;
    const int32_t *bias;     /* [out_c] */
    const int32_t *mult;
    const int32_t *shift;
    const int32_t *rq_add;
} rlx_dw_conv_s4_params;

void rlx_convolve_s4(const rlx_conv_s4_params *p, const int8_t *in, int8_t *out, int8_t *scratch);
void rlx_convolve_1x1_s4(const rlx_conv_s4_params *p, const int8_t *in, int8_t *out);
void rlx_fully_connected_s4(const rlx_fc_s4_params *p, const int8_t *in, int8_t *out);
void rlx_depthwise_conv_s4(const rlx_dw_conv_s4_params *p, const int8_t *in, int8_t *out);

/* ---- int16 activations, int8 weights (TFLite's 16x8 scheme; rlx_convolve_s16.c,
 * rlx_depthwise_conv_s16.c, rlx_elementwise_s16.c) ----------------------------------------
 * Activations NHWC int16; weights int8 in TFLite's layouts; bias int64 (0 without one).
 * Accumulators are exact int64; `wide` picks the requantization the reference runs:
 * TFLite's int64 form (Q15 multiplier) for an int64 bias, else int32 double rounding of
 * the accumulator wrapped to int32. */
typedef struct {
    int32_t batches, in_h, in_w, in_c;
    int32_t out_h, out_w, out_c;
    int32_t k_h, k_w;
    int32_t stride_h, stride_w;
    int32_t dil_h, dil_w;
    int32_t pad_top, pad_left;
    int32_t in_offset;       /* -input zero point; padded taps are skipped */
    int32_t out_zp, act_min, act_max;
    int32_t wide;
    const int8_t *weights;   /* [out_c][k_h][k_w][in_c] */
    const int64_t *bias;     /* [out_c] */
    const int32_t *mult;     /* [out_c] Q31 */
    const int32_t *shift;    /* [out_c] (positive: left) */
} rlx_conv_s16_params;

typedef struct {
    int32_t batches, in_features, out_c;
    int32_t in_offset;
    int32_t out_zp, act_min, act_max;
    int32_t wide;
    const int8_t *weights;   /* [out_c][in_features] */
    const int64_t *bias;
    const int32_t *mult;
    const int32_t *shift;
} rlx_fc_s16_params;

typedef struct {
    int32_t batches, in_h, in_w, in_c;
    int32_t out_h, out_w, out_c;
    int32_t ch_mult;
    int32_t k_h, k_w;
    int32_t stride_h, stride_w;
    int32_t dil_h, dil_w;
    int32_t pad_top, pad_left;
    int32_t in_offset;
    int32_t out_zp, act_min, act_max;
    int32_t wide;
    const int8_t *weights;   /* [k_h][k_w][out_c] */
    const int64_t *bias;
    const int32_t *mult;
    const int32_t *shift;
} rlx_dw_conv_s16_params;

/* add / sub / mul of two broadcast int16 operands. */
typedef struct {
    rlx_broadcast2 geo;
    int32_t a_offset, b_offset;   /* -zero points */
    int32_t left_shift;           /* add / sub: headroom bits (15) */
    int32_t a_mult, a_shift, b_mult, b_shift;
    int32_t out_mult, out_shift;
    int32_t out_zp, act_min, act_max;
    int32_t subtract;
} rlx_add_s16_params;

/* relu, relu6, clamp, leaky_relu on int16: out_zp + requantize(x - in_zp) by the
 * multiplier of the sign (pos_* for x - in_zp >= 0), clamped; identity only clamps. */
typedef struct {
    int32_t size;
    int32_t identity;
    int32_t in_zp, out_zp;
    int32_t pos_mult, pos_shift, neg_mult, neg_shift;
    int32_t act_min, act_max;
} rlx_rescale_s16_params;

typedef struct {
    int32_t rows, depth;
    int32_t mult, shift;     /* differences onto [-65535, 0] for [-10, 0] */
    const int16_t *exp_lut;  /* 513 entries: exp on [-10, 0] */
    const int16_t *recip_lut; /* 513 entries: 1 / (1 + x) on [0, 1] */
    rlx_mask_walk mask;      /* read when the mask argument is not NULL (masked -> 0) */
} rlx_softmax_s16_params;

void rlx_convolve_s16(const rlx_conv_s16_params *p, const int16_t *in, int16_t *out);
void rlx_fully_connected_s16(const rlx_fc_s16_params *p, const int16_t *in, int16_t *out);
void rlx_depthwise_conv_s16(const rlx_dw_conv_s16_params *p, const int16_t *in, int16_t *out);
void rlx_add_s16(const rlx_add_s16_params *p, const int16_t *a, const int16_t *b, int16_t *out);
void rlx_mul_s16(const rlx_add_s16_params *p, const int16_t *a, const int16_t *b, int16_t *out);
void rlx_rescale_s16(const rlx_rescale_s16_params *p, const int16_t *in, int16_t *out);
void rlx_avgpool_s16(const rlx_pool_params *p, const int16_t *in, int16_t *out);
void rlx_maxpool_s16(const rlx_pool_params *p, const int16_t *in, int16_t *out);
void rlx_softmax_s16(const rlx_softmax_s16_params *p, const int16_t *in, const uint8_t *mask, int16_t *out);

#ifdef __cplusplus
}
#endif

#endif /* RLX_NN_H */
