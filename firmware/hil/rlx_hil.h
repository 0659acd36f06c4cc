/* The HIL protocol: framed commands between a host and the model runner.
 *
 * Every message, in both directions, is one frame (multi-byte fields are
 * little-endian):
 *
 *     offset  size  field
 *     0       2     start of frame: 0xA5 0x5A
 *     2       1     type (a command; its answer is type | 0x80)
 *     3       1     sequence number (an answer carries its command's)
 *     4       2     payload length N, at most RLX_HIL_MAX_PAYLOAD
 *     6       1     header check: CRC-8 (poly 0x07, init 0) of bytes 2..5
 *     7       N     payload
 *     7+N     4     CRC-32 (IEEE 802.3, as zlib.crc32) of bytes 2..6+N
 *
 * The header has its own check so that a corrupted length is caught after 7
 * bytes, instead of making the receiver wait for a payload that never comes.
 * rlx_edge/hil/protocol.py is the host's copy of these numbers; a test keeps
 * the two equal.
 */
#ifndef RLX_HIL_H
#define RLX_HIL_H

#define RLX_HIL_VERSION 1u
#define RLX_HIL_SOF0 0xA5u
#define RLX_HIL_SOF1 0x5Au
#define RLX_HIL_HEADER_BYTES 7u
#define RLX_HIL_CRC_BYTES 4u
/* Large enough that a chunk costs little framing, small enough for the RAM
 * of the smallest board next to its model. */
#define RLX_HIL_MAX_PAYLOAD 1024u

/* Commands (host -> board). */
#define RLX_HIL_HELLO 0x01u       /* -> identity, sizes, shapes, clock */
#define RLX_HIL_WRITE_INPUT 0x02u /* u32 offset, bytes -> u32 end offset */
#define RLX_HIL_RUN 0x03u         /* -> BUSY now, then status and ticks */
#define RLX_HIL_READ_OUTPUT 0x04u /* u32 offset, u16 length -> u32 run id, u32 offset, bytes */
#define RLX_HIL_RESET 0x05u       /* -> answer, then a system reset and a BOOT frame */
#define RLX_HIL_EXIT 0x06u        /* i32 status -> answer, then board_exit(status) */

#define RLX_HIL_ANSWER 0x80u /* added to a command's type in its answer */

/* Frames the board sends on its own. */
#define RLX_HIL_BUSY 0x70u  /* RUN accepted; the result follows */
#define RLX_HIL_BOOT 0x7Eu  /* u16 protocol version: sent once after every reset */
#define RLX_HIL_ERROR 0x7Fu /* u8 code, u8 offending type, text */

/* Error codes. */
#define RLX_HIL_E_CRC 1u          /* payload CRC-32 mismatch */
#define RLX_HIL_E_HEADER 2u       /* header check mismatch */
#define RLX_HIL_E_TOO_LONG 3u     /* payload length over RLX_HIL_MAX_PAYLOAD */
#define RLX_HIL_E_UNKNOWN 4u      /* unknown command type */
#define RLX_HIL_E_LENGTH 5u       /* payload length wrong for the command */
#define RLX_HIL_E_RANGE 6u        /* offset/length outside the buffer */
#define RLX_HIL_E_NO_OUTPUT 7u    /* READ_OUTPUT before any RUN since boot */

/* Tick sources reported by RUN and HELLO. */
#define RLX_HIL_TICKS_SYSTICK 0u
#define RLX_HIL_TICKS_DWT 1u

#endif
