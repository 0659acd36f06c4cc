/* The model interface the runner needs, taken from the generated model.h.
 *
 * The generator's model.h declares
 *     int rlx_model_invoke(const void *input, void *output, uint8_t *arena);
 * for a model with one input and one output (hand-written models may use
 * int8_t pointers), rlx_model_invoke_multi for any model (used here when
 * there are several, see RLX_FW_MULTI_IO), and the input, output and
 * arena byte sizes (RLX_INPUT_SIZE, RLX_OUTPUT_SIZE, RLX_ARENA_SIZE) and the
 * arena alignment (RLX_ARENA_ALIGN). The runner uses its own names
 * for the sizes (RLX_FW_*) so that it builds against any of the spellings the
 * generator uses; a missing size is a compile error here, not a silent zero.
 */
#ifndef RLX_MODEL_IFACE_H
#define RLX_MODEL_IFACE_H

#include <stdint.h>

#include "model.h"

/* Several inputs or outputs (RLX_NUM_INPUTS/RLX_NUM_OUTPUTS from the generator):
 * the runner's input buffer holds the inputs' bytes back to back in the
 * model's order, its output buffer the outputs' likewise, and it calls
 * rlx_model_invoke_multi. The host concatenates and splits the same way. Up
 * to RLX_FW_MAX_IO of each; RLX_FW_INk / RLX_FW_OUTk are 0 past the last. */
#if defined(RLX_NUM_INPUTS) && defined(RLX_NUM_OUTPUTS) && (RLX_NUM_INPUTS != 1 || RLX_NUM_OUTPUTS != 1)
#define RLX_FW_MULTI_IO 1
#define RLX_FW_MAX_IO 8
#if RLX_NUM_INPUTS > RLX_FW_MAX_IO || RLX_NUM_OUTPUTS > RLX_FW_MAX_IO
#error "the runner handles at most 8 inputs and 8 outputs"
#endif
#define RLX_FW_IN0 RLX_INPUT0_SIZE
#if RLX_NUM_INPUTS > 1
#define RLX_FW_IN1 RLX_INPUT1_SIZE
#else
#define RLX_FW_IN1 0u
#endif
#if RLX_NUM_INPUTS > 2
#define RLX_FW_IN2 RLX_INPUT2_SIZE
#else
#define RLX_FW_IN2 0u
#endif
#if RLX_NUM_INPUTS > 3
#define RLX_FW_IN3 RLX_INPUT3_SIZE
#else
#define RLX_FW_IN3 0u
#endif
#if RLX_NUM_INPUTS > 4
#define RLX_FW_IN4 RLX_INPUT4_SIZE
#else
#define RLX_FW_IN4 0u
#endif
#if RLX_NUM_INPUTS > 5
#define RLX_FW_IN5 RLX_INPUT5_SIZE
#else
#define RLX_FW_IN5 0u
#endif
#if RLX_NUM_INPUTS > 6
#define RLX_FW_IN6 RLX_INPUT6_SIZE
#else
#define RLX_FW_IN6 0u
#endif
#if RLX_NUM_INPUTS > 7
#define RLX_FW_IN7 RLX_INPUT7_SIZE
#else
#define RLX_FW_IN7 0u
#endif
#define RLX_FW_OUT0 RLX_OUTPUT0_SIZE
#if RLX_NUM_OUTPUTS > 1
#define RLX_FW_OUT1 RLX_OUTPUT1_SIZE
#else
#define RLX_FW_OUT1 0u
#endif
#if RLX_NUM_OUTPUTS > 2
#define RLX_FW_OUT2 RLX_OUTPUT2_SIZE
#else
#define RLX_FW_OUT2 0u
#endif
#if RLX_NUM_OUTPUTS > 3
#define RLX_FW_OUT3 RLX_OUTPUT3_SIZE
#else
#define RLX_FW_OUT3 0u
#endif
#if RLX_NUM_OUTPUTS > 4
#define RLX_FW_OUT4 RLX_OUTPUT4_SIZE
#else
#define RLX_FW_OUT4 0u
#endif
#if RLX_NUM_OUTPUTS > 5
#define RLX_FW_OUT5 RLX_OUTPUT5_SIZE
#else
#define RLX_FW_OUT5 0u
#endif
#if RLX_NUM_OUTPUTS > 6
#define RLX_FW_OUT6 RLX_OUTPUT6_SIZE
#else
#define RLX_FW_OUT6 0u
#endif
#if RLX_NUM_OUTPUTS > 7
#define RLX_FW_OUT7 RLX_OUTPUT7_SIZE
#else
#define RLX_FW_OUT7 0u
#endif
#define RLX_FW_INPUT_BYTES \
    (RLX_FW_IN0 + RLX_FW_IN1 + RLX_FW_IN2 + RLX_FW_IN3 + RLX_FW_IN4 + RLX_FW_IN5 + RLX_FW_IN6 + RLX_FW_IN7)
#define RLX_FW_OUTPUT_BYTES \
    (RLX_FW_OUT0 + RLX_FW_OUT1 + RLX_FW_OUT2 + RLX_FW_OUT3 + RLX_FW_OUT4 + RLX_FW_OUT5 + RLX_FW_OUT6 + RLX_FW_OUT7)
#elif defined(RLX_INPUT_BYTES)
#define RLX_FW_INPUT_BYTES RLX_INPUT_BYTES
#elif defined(RLX_INPUT_SIZE)
#define RLX_FW_INPUT_BYTES RLX_INPUT_SIZE
#else
#error "model.h defines no input size (RLX_INPUT_BYTES)"
#endif

#if defined(RLX_FW_MULTI_IO)
/* RLX_FW_OUTPUT_BYTES: above */
#elif defined(RLX_OUTPUT_BYTES)
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
