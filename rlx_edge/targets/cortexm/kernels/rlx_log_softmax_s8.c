/*
 * TFLite's int8 log-softmax (gemmlowp fixed point), any axis.
 *
 * Each difference to the row max is an integer in [-255, 0]: its Q5.26 value
 * and its exp term are compile-time tables of the Python reference
 * (ir/ops/reduce.py). The log of the row's sum is TFLite's
 * log_x_for_x_greater_than_or_equal_to_1 (Q12.19 in, Q5.26 out), computed
 * here as the reference's fixedpoint.log_x_for_x_greater_than_or_equal_to_1.
 */
#include "rlx_log_softmax_s8.h"

#include "rlx_nn_support.h"

#define RLX_LOG_IN_BITS 12   /* the sum of exps, Q12.19 */
#define RLX_LOG_OUT_BITS 5   /* its log, Q5.26 */
#define RLX_LOG_ACCUM_BITS 6 /* one spare integer bit while summing */
#define RLX_OUTPUT_SHIFT 22  /* Q5.26 to the output's 16/256 steps: 31 - 5 - 4 */

RLX_INLINE int32_t rlx_sat_add32(int32_t a, int32_t b)
{
    const int64_t s = (int64_t)a + b;
    return s > INT32_MAX ? INT32_MAX : (s < INT32_MIN ? INT32_MIN : (int32_t)s);
}

/* ln(x) for a Q12.19 x >= 1: x = 2**k * r with r in [2**-1/2, 1) (the better of two
 * normalizations), k * ln 2 plus a rational approximation of ln r around 2**-1/4. */
static int32_t rlx_log_q12_to_q5(int32_t x)
{
    const int32_t ln_2 = 1488522236, sqrt_sqrt_half = 1805811301, sqrt_half = 1518500250;
    const int32_t alpha_n = 117049297, alpha_d = 127690142, alpha_i = 1057819769, alpha_f = 638450708;
    const int32_t quarter = rlx_rdbpot(1 << 29, RLX_LOG_ACCUM_BITS);
    const int32_t to_accum = 31 - RLX_LOG_ACCUM_BITS;

    const int32_t headroom_a = rlx_clz32((uint32_t)x);
    const int32_t r_a = rlx_sat_mul_pot(rlx_srdhm(rlx_sat_mul_pot(x, headroom_a - 1), sqrt_half), 1);
    const int32_t k_a = rlx_sat_add32(rlx_sat_mul_pot(RLX_LOG_IN_BITS - headroom_a, to_accum), quarter);
    const int32_t headroom_b = rlx_clz32((uint32_t)rlx_srdhm(x, sqrt_half)) - 1;
    const int32_t r_b = rlx_sat_mul_pot(x, headroom_b);
    const int32_t k_b = rlx_sat_add32(rlx_sat_mul_pot(RLX_LOG_IN_BITS - headroom_b, to_accum), -quarter);
    const int32_t r = r_a < r_b ? r_a : r_b;
    const int32_t k = k_a > k_b ? k_a : k_b;

    /* int32 adds wrap, as gemmlowp's do */
    const int32_t p = rlx_rounding_half_sum(r, sqrt_sqrt_half);
    const int32_t q = (int32_t)(2u * (uint32_t)(r - sqrt_sqrt_half));
    const int32_t sq = rlx_srdhm(q, q);
    const int32_t num = (int32_t)((uint32_t)rlx_srdhm(q, r) + (uint32_t)rlx_srdhm(rlx_srdhm(q, sq), alpha_n));
    const int32_t inner = (int32_t)((uint32_t)alpha_i + (uint32_t)q + (uint32_t)rlx_srdhm(alpha_d, sq));
    const int32_t denom_minus_one = (int32_t)((uint32_t)rlx_srdhm(p, inner) + (uint32_t)rlx_srdhm(alpha_f, q));
    const int32_t recip = rlx_one_over_one_plus_x(denom_minus_one);
    const int32_t total = (int32_t)((uint32_t)rlx_srdhm(k, ln_2) +
                                    (uint32_t)rlx_srdhm(rlx_rdbpot(num, RLX_LOG_ACCUM_BITS), recip));
    return rlx_sat_mul_pot(total, RLX_LOG_ACCUM_BITS - RLX_LOG_OUT_BITS);
}

void rlx_log_softmax_s8(const rlx_log_softmax_params *p, const int8_t *in, int8_t *out)
{
    const int32_t step = p->inner;
    for (int32_t o = 0; o < p->outer; o++) {
        for (int32_t j = 0; j < p->inner; j++) {
            const int8_t *x = in + o * p->depth * step + j;
            int8_t *y = out + o * p->depth * step + j;
            int32_t max = INT8_MIN;
            for (int32_t i = 0; i < p->depth; i++) {
                max = x[i * step] > max ? x[i * step] : max;
            }
            int32_t sum = 0; /* Q12.19; the table holds 0 below diff_min */
            for (int32_t i = 0; i < p->depth; i++) {
                sum += p->exp_table[max - x[i * step]];
            }
            const int32_t log_sum = rlx_log_q12_to_q5(sum);
            /* differences whose log-probability falls below Q5.26's range give the lowest output */
            const int32_t cut = rlx_requantize((int32_t)((uint32_t)log_sum + 0x80000000u), p->reverse_mult,
                                               p->reverse_shift);
            const int32_t adjusted_diff_min = cut > p->diff_min - 1 ? cut : p->diff_min - 1;
            for (int32_t i = 0; i < p->depth; i++) {
                const int32_t diff = x[i * step] - max;
                int32_t v = INT8_MIN;
                if (diff > adjusted_diff_min) {
                    const int32_t d = (int32_t)((uint32_t)p->scaled_table[-diff] - (uint32_t)log_sum);
                    v = rlx_sat8(rlx_rdbpot(d, RLX_OUTPUT_SHIFT) + 127);
                }
                y[i * step] = (int8_t)v;
            }
        }
    }
}
