/* rlx_batch_matmul_s16 (TFLite's int16 BATCH_MATMUL) is declared with the int8 kernel: the
 * emitter includes <kernel>.h. */
#ifndef RLX_BATCH_MATMUL_S16_H
#define RLX_BATCH_MATMUL_S16_H

#include "rlx_batch_matmul_s8.h"

#endif /* RLX_BATCH_MATMUL_S16_H */
