/*
 * TFLite's int8 SELECT_V2 (select.cc): out = cond ? x : y, all three broadcast over up to four
 * dimensions; an operand quantized unlike the output goes through its table.
 */
#include "rlx_select_s8.h"

#include "rlx_nn_support.h"

/* the stored value through the operand's table (itself, or its requantization) */
#define RLX_SELECT_S8_PICK(p, c, xv, yv) ((c) ? (p)->x_table[(uint8_t)(xv)] : (p)->y_table[(uint8_t)(yv)])

void rlx_select_s8(const rlx_select_params *p, const uint8_t *cond, const int8_t *x, const int8_t *y, int8_t *out)
{
    RLX_SELECT_LOOP(RLX_SELECT_S8_PICK);
}
