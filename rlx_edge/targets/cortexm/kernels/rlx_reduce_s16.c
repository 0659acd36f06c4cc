/*
 * int16 MEAN / SUM: the int8 MEAN's walk (RLX_MEAN_LOOP) on int16 elements.
 */
#include "rlx_reduce_s16.h"

#include "rlx_nn_support.h"

void rlx_reduce_s16(const rlx_mean_params *p, const int16_t *in, int16_t *out)
{
    RLX_MEAN_LOOP(int16_t);
}
