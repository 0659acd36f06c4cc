/*
 * int16 ABS (elementwise.cc), QUANTIZE and DEQUANTIZE (TFLite's reference affine quantize):
 * the same integer steps as their evals in rlx_edge/ir/ops. Float arithmetic goes through
 * volatile temporaries so that no compiler setting contracts or reorders it.
 */
#include "rlx_unary_s16.h"

#include "rlx_nn_support.h"

static void abs_s16(const rlx_unary_s16_params *p, const int16_t *in, int16_t *out)
{
    for (int32_t i = 0; i < p->size; i++) {
        int32_t v = (int32_t)in[i] - p->in_zp; /* |v| <= 65535: no overflow anywhere below */
        v = v < 0 ? -v : v;
        if (p->rescale) {
            v = rlx_requantize(v, p->mult, p->shift);
        }
        out[i] = (int16_t)rlx_clamp(v + p->out_zp, p->out_min, p->out_max);
    }
}

/* round(x / scale) half away from zero, plus the zero point, saturated; NaN gives the zero
 * point (the reference's nan_to_num), values beyond any int16 saturate before the cast */
static void quantize_f32_s16(const rlx_unary_s16_params *p, const float *in, int16_t *out)
{
    for (int32_t i = 0; i < p->size; i++) {
        volatile float v = in[i] / p->scale;
        int32_t q;
        if (v != v) {
            q = p->out_zp;
        } else if (v > 1.0e9f) {
            q = p->out_max;
        } else if (v < -1.0e9f) {
            q = p->out_min;
        } else {
            q = rlx_round_half_away_f32(v) + p->out_zp;
        }
        out[i] = (int16_t)rlx_clamp(q, p->out_min, p->out_max);
    }
}

/* (q - zp) is exact in float32 (|q - zp| < 2**17) and one float32 product rounds it as the
 * reference's double product rounded to float32 does (the reference's narrow form) */
static void dequantize_s16_f32(const rlx_unary_s16_params *p, const int16_t *in, float *out)
{
    for (int32_t i = 0; i < p->size; i++) {
        volatile float d = (float)((int32_t)in[i] - p->in_zp);
        out[i] = d * p->scale;
    }
}

void rlx_unary_s16(const rlx_unary_s16_params *p, const void *in, void *out)
{
    switch (p->op) {
    case RLX_UNARY_S16_ABS:
        abs_s16(p, (const int16_t *)in, (int16_t *)out);
        break;
    case RLX_UNARY_S16_QUANTIZE:
        quantize_f32_s16(p, (const float *)in, (int16_t *)out);
        break;
    default:
        dequantize_s16_f32(p, (const int16_t *)in, (float *)out);
        break;
    }
}
