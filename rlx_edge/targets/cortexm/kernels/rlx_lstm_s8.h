/*
 * rlx_lstm_s8: TFLite Micro's quantized UNIDIRECTIONAL_SEQUENCE_LSTM (int8 activations with
 * int32 sums and biases, or int16x8 with int64 ones; int8 weights; int16 cell state), functional:
 * the previous hidden and cell states in, their updates out (ir/ops/recurrent.py).
 */
#ifndef RLX_LSTM_S8_H
#define RLX_LSTM_S8_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* gates in the order input, forget, cell, output (the IR op's and TFLite's) */
typedef struct {
    int32_t batch, steps, inputs, state;
    int32_t time_major; /* x [T, B, I] and y [T, B, S], else [B, T, ...] */
    int32_t act_bytes;  /* 1: int8 x and hidden state, int32 biases; 2: int16 ones, int64 biases */
    int32_t in_zp, hidden_zp;
    int32_t x_mult[4], x_shift[4]; /* input sums to the gates' 2**-12 */
    int32_t h_mult[4], h_shift[4]; /* recurrent sums to the gates' 2**-12 */
    int32_t forget_mult, forget_shift, input_mult, input_shift; /* gate products to the cell scale */
    int32_t hidden_mult, hidden_shift, hidden_min, hidden_max;  /* tanh(cell) x output gate to hidden */
    int32_t tanh_mult, tanh_shift;                              /* tanh of the cell state's scale */
    int32_t cell_clip;                                          /* 0: none */
} rlx_lstm_params;

/* ins: x, w_input..w_output [S, I] int8, r_input..r_output [S, S] int8, b_input..b_output [S],
 * hidden [B, S], cell [B, S] int16; outs: y, new hidden, new cell (shapes as ins');
 * scratch: 5 * state int16 */
void rlx_lstm_s8(const rlx_lstm_params *p, const void *const *ins, void *const *outs, int16_t *scratch);

#ifdef __cplusplus
}
#endif

#endif /* RLX_LSTM_S8_H */
