/* The model interface the runner needs, taken from the generated model.h.
 *
 * The generator's model.h declares
 *     int rlx_model_invoke(const void *input, void *output, uint8_t *arena);
 * (hand-written models may use int8_t pointers) and the input, output and
 * arena byte sizes (RLX_INPUT_SIZE, RLX_OUTPUT_SIZE, RLX_ARENA_SIZE) and the
 * arena alignment (RLX_ARENA_ALIGN). The runner uses its own names
 * for the sizes (RLX_FW_*) so that it builds against any of the spellings the
 * generator uses; a missing size is a compile error here, not a silent zero.
 */
#ifndef RLX_MODEL_IFACE_H
#define RLX_MODEL_IFACE_H

#include <stdint.h>

#include "model.h"

#if defined(RLX_INPUT_BYTES)
#define RLX_FW_INPUT_BYTES RLX_INPUT_BYTES
#elif defined(RLX_INPUT_SIZE)
#define RLX_FW_INPUT_BYTES RLX_INPUT_SIZE
#else
#error "model.h defines no input size (RLX_INPUT_BYTES)"
#endif

#if defined(RLX_OUTPUT_BYTES)
#define RLX_FW_OUTPUT_BYTES RLX_OUTPUT_BYTES
#elif defined(RLX_OUTPUT_SIZE)
#define RLX_FW_OUTPUT_BYTES RLX_OUTPUT_SIZE
#else
#error "model.h defines no output size (RLX_OUTPUT_BYTES)"
#endif

#if defined(RLX_ARENA_SIZE)
/* A zero-byte array is not C; a model without scratch memory still gets one
 * byte of arena. */
#define RLX_FW_ARENA_BYTES (RLX_ARENA_SIZE > 0 ? RLX_ARENA_SIZE : 1)
#else
#error "model.h defines no RLX_ARENA_SIZE"
#endif

/* The arena alignment the model asks for; 16 covers every kernel otherwise. */
#if defined(RLX_ARENA_ALIGN)
#define RLX_FW_ARENA_ALIGN RLX_ARENA_ALIGN
#else
#define RLX_FW_ARENA_ALIGN 16
#endif

#endif
