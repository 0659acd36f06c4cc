/* rlx_norm_s16 is declared with the int8 kernel: the emitter includes <kernel>.h. */
#ifndef RLX_NORM_S16_H
#define RLX_NORM_S16_H

#include "rlx_norm_s8.h"

#endif /* RLX_NORM_S16_H */
