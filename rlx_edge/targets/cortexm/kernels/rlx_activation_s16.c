/*
 * int16 logistic and tanh (TFLite's 16x8 LOGISTIC / TANH): see rlx_activation_s16.h. The
 * arithmetic is rlx_edge.ir.fixedpoint.logistic_int16 / tanh_int16, the table its
 * SIGMOID_TABLE_UINT16 (tests/targets/cortexm/kernels/test_activation_s16.py holds them equal).
 */
#include "rlx_activation_s16.h"

/* sigmoid(i / 24) in unsigned Q0.16, i = 0..255, each entry biased by half the error of linear
 * interpolation at its step's midpoint; tanh reads it at twice the argument
 * (tanh(x) = 2 sigmoid(2x) - 1). */
static const uint16_t rlx_sigmoid_table_u16[256] = {
    32768, 33451, 34133, 34813, 35493, 36169, 36843, 37513, 38180, 38841, 39498, 40149,
    40794, 41432, 42064, 42688, 43304, 43912, 44511, 45102, 45683, 46255, 46817, 47369,
    47911, 48443, 48964, 49475, 49975, 50464, 50942, 51409, 51865, 52311, 52745, 53169,
    53581, 53983, 54374, 54755, 55125, 55485, 55834, 56174, 56503, 56823, 57133, 57433,
    57724, 58007, 58280, 58544, 58800, 59048, 59288, 59519, 59743, 59959, 60168, 60370,
    60565, 60753, 60935, 61110, 61279, 61441, 61599, 61750, 61896, 62036, 62172, 62302,
    62428, 62549, 62666, 62778, 62886, 62990, 63090, 63186, 63279, 63368, 63454, 63536,
    63615, 63691, 63765, 63835, 63903, 63968, 64030, 64090, 64148, 64204, 64257, 64308,
    64357, 64405, 64450, 64494, 64536, 64576, 64614, 64652, 64687, 64721, 64754, 64786,
    64816, 64845, 64873, 64900, 64926, 64950, 64974, 64997, 65019, 65039, 65060, 65079,
    65097, 65115, 65132, 65149, 65164, 65179, 65194, 65208, 65221, 65234, 65246, 65258,
    65269, 65280, 65291, 65301, 65310, 65319, 65328, 65337, 65345, 65352, 65360, 65367,
    65374, 65381, 65387, 65393, 65399, 65404, 65410, 65415, 65420, 65425, 65429, 65433,
    65438, 65442, 65445, 65449, 65453, 65456, 65459, 65462, 65465, 65468, 65471, 65474,
    65476, 65479, 65481, 65483, 65485, 65488, 65489, 65491, 65493, 65495, 65497, 65498,
    65500, 65501, 65503, 65504, 65505, 65507, 65508, 65509, 65510, 65511, 65512, 65513,
    65514, 65515, 65516, 65517, 65517, 65518, 65519, 65520, 65520, 65521, 65522, 65522,
    65523, 65523, 65524, 65524, 65525, 65525, 65526, 65526, 65526, 65527, 65527, 65528,
    65528, 65528, 65529, 65529, 65529, 65529, 65530, 65530, 65530, 65530, 65531, 65531,
    65531, 65531, 65531, 65532, 65532, 65532, 65532, 65532, 65532, 65533, 65533, 65533,
    65533, 65533, 65533, 65533, 65533, 65534, 65534, 65534, 65534, 65534, 65534, 65534,
    65534, 65534, 65534, 65535,
};

/* The input on the table's grid: x * multiplier with a rounding right shift, or, for a
 * power-of-two input scale (multiplier 0), x * (3 << shift). The int32 product does not
 * overflow for the multipliers (<= 32767) and shifts prepare gives; it wraps as the
 * reference's does otherwise. */
static inline int32_t rlx_lut_input(int32_t x, int32_t mult, int32_t shift)
{
    const int32_t rnd = shift > 0 ? (int32_t)(1u << (shift - 1)) : 0;
    return (int32_t)((uint32_t)x * (uint32_t)mult + (uint32_t)rnd) >> shift;
}

/* The table interpolated at a / 2**frac_bits (a >= 0), scaled by 2**frac_bits; sat where a is
 * past its last step (entry 255 and beyond). */
static inline uint32_t rlx_sigmoid_interp(uint32_t a, int32_t frac_bits, uint32_t sat)
{
    const uint32_t uh = a >> frac_bits;
    if (uh >= 255u) {
        return sat;
    }
    const uint32_t ua = rlx_sigmoid_table_u16[uh];
    const uint32_t ub = rlx_sigmoid_table_u16[uh + 1u];
    return (ua << frac_bits) + (a & ((1u << frac_bits) - 1u)) * (ub - ua);
}

void rlx_logistic_s16(int32_t input_multiplier, int32_t input_left_shift, int32_t size, const int16_t *in,
                      int16_t *out)
{
    if (input_multiplier == 0) {
        input_multiplier = 3 << input_left_shift;
        input_left_shift = 0;
    }
    for (int32_t i = 0; i < size; i++) {
        const int32_t v = rlx_lut_input(in[i], input_multiplier, input_left_shift);
        const uint32_t a = v >= 0 ? (uint32_t)v : 0u - (uint32_t)v;
        uint32_t r = rlx_sigmoid_interp(a, 9, 0x7FFFu << 10);
        /* 1 - sigmoid(|x|) for negative inputs, rounded to the 16-bit output */
        r = v >= 0 ? r + (1u << 9) : (1u << 25) - r + (1u << 9) - 1u;
        out[i] = (int16_t)(r >> 10);
    }
}

void rlx_tanh_s16(int32_t input_multiplier, int32_t input_left_shift, int32_t size, const int16_t *in,
                  int16_t *out)
{
    if (input_multiplier == 0) {
        input_multiplier = 3 << input_left_shift;
        input_left_shift = 0;
    }
    for (int32_t i = 0; i < size; i++) {
        const int32_t v = rlx_lut_input(in[i], input_multiplier, input_left_shift);
        const uint32_t a = v >= 0 ? (uint32_t)v : 0u - (uint32_t)v;
        const int32_t s = (int32_t)rlx_sigmoid_interp(a, 8, 0xFFFFu << 8);
        /* 2 sigmoid - 1, mirrored for negative inputs; an arithmetic shift back to 16 bits */
        const int32_t r = v >= 0 ? s - (1 << 23) + (1 << 7) : -s + (1 << 23) + (1 << 7) - 1;
        out[i] = (int16_t)(r >> 8);
    }
}

void rlx_activation_s16(const rlx_activation_s16_params *p, const int16_t *in, int16_t *out)
{
    if (p->op == RLX_ACTIVATION_S16_TANH) {
        rlx_tanh_s16(p->input_multiplier, p->input_left_shift, p->size, in, out);
    } else {
        rlx_logistic_s16(p->input_multiplier, p->input_left_shift, p->size, in, out);
    }
}
