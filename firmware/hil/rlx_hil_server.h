/* The model as the HIL server sees it: buffers, sizes, identity, tensors. */
#ifndef RLX_HIL_SERVER_H
#define RLX_HIL_SERVER_H

#include <stddef.h>
#include <stdint.h>

#define RLX_HIL_MAX_RANK 8

struct rlx_hil_tensor {
    const char *dtype;
    uint32_t rank;
    uint32_t shape[RLX_HIL_MAX_RANK];
    uint8_t has_quant;
    float scale;
    int32_t zero_point;
};

struct rlx_hil_target {
    void *in_buf;
    size_t input_bytes;
    const void *out_buf;
    size_t output_bytes;
    size_t arena_bytes;
    int (*invoke)(void);
    const char *model_hash;
    const char *model_name;
    const char *core;
    struct rlx_hil_tensor input;
    struct rlx_hil_tensor output;
};

/* Serves commands until EXIT; returns EXIT's status. */
int rlx_hil_serve(const struct rlx_hil_target *target);

#endif
