/* rlx_add_n_s8 lives with the other arithmetic kernels; the emitter includes <kernel>.h. */
#ifndef RLX_ADD_N_S8_H
#define RLX_ADD_N_S8_H

#include "rlx_arith_s8.h"

#endif /* RLX_ADD_N_S8_H */
