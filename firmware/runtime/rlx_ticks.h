#ifndef RLX_TICKS_H
#define RLX_TICKS_H

#include <stdint.h>

void rlx_ticks_init(void);
uint64_t rlx_ticks(void);

#endif
