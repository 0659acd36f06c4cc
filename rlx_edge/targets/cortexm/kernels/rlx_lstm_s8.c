/*
 * TFLite Micro's quantized LSTM step (lstm_eval.h LstmStep), one batch row at a time as
 * TFLite Micro does for batch-major inputs (time-major ones batch the rows; the numbers
 * are the same either way):
 *
 *   forget, input, cell (tanh) and output gates: the input's and the previous hidden
 *   state's sums, each requantized to 2**-12 and clamped to int16, added with int16
 *   saturation, through TFLite's int16 Logistic / Tanh (rlx_activation_s16);
 *   cell = sat16(rq(forget x cell) + rq(input x cell gate)), clipped when cell_clip;
 *   hidden = clamp(rq(tanh(cell) x output gate) + zero point), copied to y.
 *
 * The output gate reads the previous hidden state too: it is computed before the hidden
 * state is overwritten. int32 sums wrap as TFLite Micro's do (computed in uint32).
 */
#include "rlx_lstm_s8.h"

#include <string.h>

#include "rlx_activation_s16.h"
#include "rlx_nn_support.h"
#include "rlx_s16_support.h"

RLX_INLINE int32_t rlx_lstm_load(const void *base, int32_t bytes, int32_t i)
{
    return bytes == 2 ? ((const int16_t *)base)[i] : ((const int8_t *)base)[i];
}

RLX_INLINE int32_t rlx_lstm_sat16(int32_t v) { return rlx_clamp(v, INT16_MIN, INT16_MAX); }

/* sum_i w[s, i] * (v[i] - zp) (+ bias[s]) requantized and clamped to int16 */
static int32_t rlx_lstm_fc(const rlx_lstm_params *p, const void *v, int32_t zp, int32_t n, const int8_t *w,
                           const void *bias, int32_t s, int32_t mult, int32_t shift)
{
    const int8_t *row = w + s * n;
    if (p->act_bytes == 1) {
        const int8_t *x = (const int8_t *)v;
        uint32_t acc = bias != 0 ? (uint32_t)((const int32_t *)bias)[s] : 0u;
        for (int32_t i = 0; i < n; i++) {
            acc += (uint32_t)((int32_t)row[i] * ((int32_t)x[i] - zp));
        }
        return rlx_lstm_sat16(rlx_requantize((int32_t)acc, mult, shift));
    }
    const int16_t *x = (const int16_t *)v;
    int64_t acc = bias != 0 ? ((const int64_t *)bias)[s] : 0;
    for (int32_t i = 0; i < n; i++) {
        acc += (int64_t)row[i] * ((int32_t)x[i] - zp);
    }
    return rlx_lstm_sat16(rlx_requantize_int64(acc, mult, shift));
}

/* gate k of one batch row: x_t [I] and h [S] (act_bytes each) into out [S] */
static void rlx_lstm_gate(const rlx_lstm_params *p, const void *const *ins, int32_t k, const void *xt, const void *h,
                          int16_t *out, int32_t tanh_gate)
{
    const int8_t *w = (const int8_t *)ins[1 + k], *r = (const int8_t *)ins[5 + k];
    const void *bias = ins[9 + k];
    for (int32_t s = 0; s < p->state; s++) {
        const int32_t a = rlx_lstm_fc(p, xt, p->in_zp, p->inputs, w, bias, s, p->x_mult[k], p->x_shift[k]);
        const int32_t b = rlx_lstm_fc(p, h, p->hidden_zp, p->state, r, 0, s, p->h_mult[k], p->h_shift[k]);
        out[s] = (int16_t)rlx_lstm_sat16(a + b);
    }
    if (tanh_gate) {
        rlx_tanh_s16(0, 0, p->state, out, out);
    } else {
        rlx_logistic_s16(0, 0, p->state, out, out);
    }
}

void rlx_lstm_s8(const rlx_lstm_params *p, const void *const *ins, void *const *outs, int16_t *scratch)
{
    const int32_t n = p->state, ab = p->act_bytes;
    int16_t *forget = scratch, *input = scratch + n, *cell_gate = scratch + 2 * n, *output = scratch + 3 * n;
    int16_t *tanh_cell = scratch + 4 * n;
    for (int32_t b = 0; b < p->batch; b++) {
        uint8_t *h = (uint8_t *)outs[1] + b * n * ab;
        int16_t *c = (int16_t *)outs[2] + b * n;
        memcpy(h, (const uint8_t *)ins[13] + b * n * ab, (size_t)(n * ab));
        memcpy(c, (const int16_t *)ins[14] + b * n, (size_t)n * sizeof(int16_t));
        for (int32_t t = 0; t < p->steps; t++) {
            const int32_t row = p->time_major ? t * p->batch + b : b * p->steps + t;
            const uint8_t *xt = (const uint8_t *)ins[0] + row * p->inputs * ab;
            rlx_lstm_gate(p, ins, 1, xt, h, forget, 0);
            rlx_lstm_gate(p, ins, 0, xt, h, input, 0);
            rlx_lstm_gate(p, ins, 2, xt, h, cell_gate, 1);
            for (int32_t s = 0; s < n; s++) {
                const int32_t kept = rlx_lstm_sat16(rlx_requantize(forget[s] * c[s], p->forget_mult, p->forget_shift));
                const int32_t added =
                    rlx_lstm_sat16(rlx_requantize(input[s] * cell_gate[s], p->input_mult, p->input_shift));
                int32_t v = rlx_lstm_sat16(kept + added);
                if (p->cell_clip) {
                    v = rlx_clamp(v, -p->cell_clip, p->cell_clip);
                }
                c[s] = (int16_t)v;
            }
            rlx_lstm_gate(p, ins, 3, xt, h, output, 0);
            rlx_tanh_s16(p->tanh_mult, p->tanh_shift, n, c, tanh_cell);
            for (int32_t s = 0; s < n; s++) {
                int32_t v = rlx_requantize(tanh_cell[s] * output[s], p->hidden_mult, p->hidden_shift) + p->hidden_zp;
                v = rlx_clamp(v, p->hidden_min, p->hidden_max);
                if (ab == 2) {
                    ((int16_t *)h)[s] = (int16_t)v;
                } else {
                    ((int8_t *)h)[s] = (int8_t)v;
                }
            }
            memcpy((uint8_t *)outs[0] + row * n * ab, h, (size_t)(n * ab));
        }
    }
}
