/*
 * 3x3 depthwise on DSP cores: a channel-planar ring (issue #17). Depth multiplier 1 without dilation in
 * pair_s8 and pair_clamp_s8; multiplier 2, and dilations as phases of plain 3x3s, in pair_gen_s8.
 *
 * The image is walked in lines along the output's longer axis (rows, or columns of a tall image
 * such as KWS's 25x5). The 3 input lines a window spans are widened (input offset added, padding
 * 0) into int16 planes, one per channel of a block, so that neighbours along the line share a
 * word: one word load is (in[2j], in[2j+1]) of a channel, and the 3 taps of a window line are one
 * SMLAD against (w0, w1) and one SMLABT against (w1, w2). A group of 4 channels interleaves its
 * planes word by word (word j of channel i at byte 16 j + 4 i), so that widening stores a pixel
 * pair of the 4 channels with one STM. Outputs along the line run several at a time and share
 * their loads: at stride 1 the words (in[x], in[x+1]) .. (in[x+4], in[x+5]) feed SMLAD, SMLATB and
 * SMLABT for x .. x+3 (the clamped lines' quad, 36 MACs in 66 instructions; the saturating lines
 * run 6 outputs, 54 MACs in about 88, then pairs and a last single output); at stride 2 output x
 * is SMLAD (in[2x], in[2x+1]) + SMLABT (in[2x+2], ..), whose second word is output x+1's first.
 * The saturating lines' requantization is 3 instructions, without the sign correction, which
 * changes nothing where out_zp is -128 (rlx_depthwise_conv_3x3_pair_s8's condition), nor under a
 * clamp whose low end is at or above out_zp (a ReLU's: pair_clamp_s8 runs them, then clamps the
 * layer's output; there, stride-2 lines of a multiple of 8 outputs run 8 a step, rlx_dwp_s2_octs).
 * One asm routine per stride and output rule runs a whole line of every channel
 * of the block with all 14 registers (C spills them). Each block's weight pairs and requantization constants are
 * laid out once in the scratch (weights and bias doubled for the fast requantization, whose
 * SMMLAR takes acc << 1). Lines outside the image read a ring slot of zeros (the one no line of the
 * window holds; zeroed when needed, the slots mapped so that the block before left it zero): a
 * padded tap adds nothing, TFLite's skipping it. Cores without DSP run rlx_depthwise_conv_3x3_s8,
 * whose scratch the rule reserves as well.
 */
#include "rlx_nn.h"
#include "rlx_nn_support.h"

#if RLX_USE_DSP

#if defined(__GNUC__)
#define RLX_DWP_NOINLINE __attribute__((noinline))
#else
#define RLX_DWP_NOINLINE
#endif

/* Per channel of a block, RLX_DWP_K words of scratch: the bias 4 times (LDMDB loads a quad's
 * accumulators), the right shift, mult and rq_add of the fast requantization (one LDM), the output
 * bytes between outputs along the line, (w0, w1), (w1, w2) of each window line, act_min and
 * act_max in both halfwords, then what to add to the plane pointers at the end of the channel's
 * line to reach the next channel's planes. The asm's base is the shift's word: its offsets are
 * these less 16. */
#define RLX_DWP_K 17
#define RLX_DWP_E 4  /* the shift, then mult and rq_add */
#define RLX_DWP_OS 7
#define RLX_DWP_W 8  /* the weight pairs of window line r at RLX_DWP_W + 2 r */
#define RLX_DWP_LH 14
#define RLX_DWP_PADJ 16

/* channel c's plane in a ring line (halfwords from the line's start; position 2 j + b of the plane
 * at 8 j + b past it) */
RLX_INLINE int32_t rlx_dwp_plane(int32_t c, int32_t wq) { return (c >> 2) * 4 * wq + 2 * (c & 3); }

/* One line of a block of channels, as the asm reads it (offsets fixed there): what to add to the
 * output pointer at the end of a channel's line to reach the next channel's; the end of the
 * block's constants; outputs along the line; channel 0's planes of the window's 3 lines, its
 * first output and its constants. */
typedef struct {
    int32_t oadj;
    const uint32_t *kend;
    int32_t n;
    const int16_t *x[3];
    int8_t *o;
    const uint32_t *k;
} rlx_dwp_job;

#if defined(__ARM_FEATURE_DSP) && (__ARM_FEATURE_DSP == 1) && !defined(RLX_NO_ASM) && defined(__GNUC__)
#define RLX_DWP_ASM 1
/* Registers: r0-r3 the accumulators of outputs x .. x+3, r4 r5 the input words, r6 r7 a window
 * line's weight pairs (then mult and rq_add, the shift in r4), r8-r10 the planes of the window's
 * 3 lines, r11 the output, r12 the channel's constants, lr the outputs left; [sp] the job. */
#define RLX_DWP_Q1(P, W)                                                                         \
    "ldrd r6, r7, [r12, #" W "]\n\t"                                                             \
    "ldr r4, [" P "], #32\n\t"                                                                   \
    "ldr r5, [" P ", #-16]\n\t"                                                                  \
    "smlad r0, r4, r6, r0\n\t"                                                                   \
    "smlatb r1, r4, r6, r1\n\t"                                                                  \
    "smlabt r0, r5, r7, r0\n\t"                                                                  \
    "smlad r1, r5, r7, r1\n\t"                                                                   \
    "smlad r2, r5, r6, r2\n\t"                                                                   \
    "smlatb r3, r5, r6, r3\n\t"                                                                  \
    "ldr r4, [" P "]\n\t"                                                                        \
    "smlabt r2, r4, r7, r2\n\t"                                                                  \
    "smlad r3, r4, r7, r3\n\t"
#define RLX_DWP_Q2(P, W)                                                                         \
    "ldrd r6, r7, [r12, #" W "]\n\t"                                                             \
    "ldr r4, [" P "], #64\n\t"                                                                   \
    "ldr r5, [" P ", #-48]\n\t"                                                                  \
    "smlad r0, r4, r6, r0\n\t"                                                                   \
    "smlabt r0, r5, r7, r0\n\t"                                                                  \
    "smlad r1, r5, r6, r1\n\t"                                                                   \
    "ldr r4, [" P ", #-32]\n\t"                                                                  \
    "smlabt r1, r4, r7, r1\n\t"                                                                  \
    "smlad r2, r4, r6, r2\n\t"                                                                   \
    "ldr r5, [" P ", #-16]\n\t"                                                                   \
    "smlabt r2, r5, r7, r2\n\t"                                                                  \
    "smlad r3, r5, r6, r3\n\t"                                                                   \
    "ldr r4, [" P "]\n\t"                                                                        \
    "smlabt r3, r4, r7, r3\n\t"
#define RLX_DWP_P1(P, W)                                                                         \
    "ldrd r6, r7, [r12, #" W "]\n\t"                                                             \
    "ldr r4, [" P "], #16\n\t"                                                                   \
    "ldr r5, [" P "]\n\t"                                                                        \
    "smlad r0, r4, r6, r0\n\t"                                                                   \
    "smlatb r1, r4, r6, r1\n\t"                                                                  \
    "smlabt r0, r5, r7, r0\n\t"                                                                  \
    "smlad r1, r5, r7, r1\n\t"
#define RLX_DWP_P2(P, W)                                                                         \
    "ldrd r6, r7, [r12, #" W "]\n\t"                                                             \
    "ldr r4, [" P "], #32\n\t"                                                                   \
    "ldr r5, [" P ", #-16]\n\t"                                                                  \
    "smlad r0, r4, r6, r0\n\t"                                                                   \
    "smlabt r0, r5, r7, r0\n\t"                                                                  \
    "smlad r1, r5, r6, r1\n\t"                                                                   \
    "ldr r4, [" P "]\n\t"                                                                        \
    "smlabt r1, r4, r7, r1\n\t"
/* the fast requantization of doubled accumulator A (mult r6, rq_add r7, shift r4), saturated */
#define RLX_DWP_RQ(A)                                                                            \
    "smmlar r5, " A ", r6, r7\n\t"                                                               \
    "add " A ", r5, " A ", asr #31\n\t"                                                          \
    "asr " A ", " A ", r4\n\t"                                                                   \
    "ssat " A ", #8, " A "\n\t"
/* the same without the sign correction, in place: the saturating lines run only where out_zp is
 * at most act_min (-128), and the correction (-1 for acc < 0) changes only outputs at most out_zp,
 * which saturate to -128 with it or without (rq_mode 2 layers after a ReLU: all of VWW's and KWS's) */
#define RLX_DWP_RQS(A)                                                                           \
    "smmlar " A ", " A ", r6, r7\n\t"                                                            \
    "asr " A ", " A ", r4\n\t"                                                                   \
    "ssat " A ", #8, " A "\n\t"
#define RLX_DWP_RQ_LOAD "ldmia r12, {r4, r6, r7}\n\t"
/* act_min and act_max of the two outputs in the halfwords of A (rq_mode 1) */
#define RLX_DWP_CLAMP(A)                                                                         \
    "ssub16 r5, " A ", r7\n\t"                                                                   \
    "sel " A ", r7, " A "\n\t"                                                                   \
    "ssub16 r5, " A ", r6\n\t"                                                                   \
    "sel " A ", " A ", r6\n\t"
/* the 4 outputs of a quad, and the first of a pair, stored (output step in r4) */
#define RLX_DWP_ST4_CLAMP                                                                        \
    "pkhbt r0, r0, r1, lsl #16\n\t"                                                              \
    "pkhbt r2, r2, r3, lsl #16\n\t"                                                              \
    "ldrd r6, r7, [r12, #40]\n\t" RLX_DWP_CLAMP("r0") RLX_DWP_CLAMP("r2")                        \
    "ldr r4, [r12, #12]\n\t"                                                                     \
    "strb r0, [r11]\n\tlsr r0, r0, #16\n\tstrb r0, [r11, r4]\n\tadd r11, r11, r4, lsl #1\n\t" \
    "strb r2, [r11]\n\tlsr r3, r2, #16\n\t"
#define RLX_DWP_ST2_SAT "ldr r4, [r12, #12]\n\tstrb r0, [r11]\n\tadd r11, r11, r4\n\t"
#define RLX_DWP_ST2_CLAMP                                                                        \
    "pkhbt r0, r0, r1, lsl #16\n\t"                                                              \
    "ldrd r6, r7, [r12, #40]\n\t" RLX_DWP_CLAMP("r0") "lsr r1, r0, #16\n\t"                     \
    "ldr r4, [r12, #12]\n\tstrb r0, [r11]\n\tadd r11, r11, r4\n\t"
/* the next channel of a job: the three plane pointers advance by its plane stride (at r12 + 48) */
#define RLX_DWP_NEXT_CHANNEL                                                                 \
    "ldr r1, [r12, #48]\n\t"                                                                 \
    "add r8, r8, r1\n\t"                                                                     \
    "add r9, r9, r1\n\t"                                                                     \
    "add r10, r10, r1\n\t"
/* A whole line of every channel of a job: quads while 3 outputs or more are left (the last of 3
 * left not stored), then a pair for 1 or 2 (its second output stored only if it exists). The
 * planes are long enough for the outputs not stored to read. No instruction between a flag
 * setting one and its branch sets the flags (SSUB16 sets only GE). */
#define RLX_DWP_LINE(NAME, Q, P, ST4, ST2)                                                       \
    static __attribute__((naked, noinline, noipa, used)) void NAME(const rlx_dwp_job *job __attribute__((unused))) \
    {                                                                                            \
        __asm__(".syntax unified\n\t"                                                            \
                "push {r4-r11, lr}\n\t"                                                          \
                "sub sp, sp, #4\n\t"                                                             \
                "str r0, [sp]\n\t"                                                               \
                "ldr lr, [r0, #8]\n\t"                                                           \
                "add r0, r0, #12\n\t"                                                            \
                "ldmia r0, {r8-r12}\n\t"                                                         \
                "1:\n\t"                                                                         \
                "subs lr, lr, #3\n\t"                                                            \
                "blt 3f\n\t"                                                                     \
                "2:\n\t"                                                                         \
                "ldmdb r12, {r0-r3}\n\t" Q("r8", "16") Q("r9", "24") Q("r10", "32")               \
                    RLX_DWP_RQ_LOAD RLX_DWP_RQ("r0") RLX_DWP_RQ("r1") RLX_DWP_RQ("r2")           \
                        RLX_DWP_RQ("r3") ST4 "beq 6f\n\t"                                        \
                "strb r3, [r11, r4]\n\t"                                                         \
                "add r11, r11, r4, lsl #1\n\t"                                                   \
                "subs lr, lr, #4\n\t"                                                            \
                "bge 2b\n\t"                                                                     \
                "3:\n\t"                                                                         \
                "adds lr, lr, #3\n\t"                                                            \
                "beq 5f\n\t"                                                                     \
                "cmp lr, #1\n\t"                                                                 \
                "ldrd r0, r1, [r12, #-8]\n\t" P("r8", "16") P("r9", "24") P("r10", "32")         \
                    RLX_DWP_RQ_LOAD RLX_DWP_RQ("r0") RLX_DWP_RQ("r1") ST2 "beq 5f\n\t"          \
                "strb r1, [r11]\n\t"                                                             \
                "6:\n\t"                                                                         \
                "add r11, r11, r4\n\t"                                                           \
                "5:\n\t"                                                                         \
                RLX_DWP_NEXT_CHANNEL                                                         \
                "ldr r0, [sp]\n\t"                                                               \
                "ldmia r0, {r4, r5, lr}\n\t"                                                     \
                "add r11, r11, r4\n\t"                                                           \
                "add r12, r12, #68\n\t"                                                          \
                "cmp r12, r5\n\t"                                                                \
                "bne 1b\n\t"                                                                     \
                "add sp, sp, #4\n\t"                                                             \
                "pop {r4-r11, pc}\n\t");                                                         \
    }
RLX_DWP_LINE(rlx_dwp_s1_clamp, RLX_DWP_Q1, RLX_DWP_P1, RLX_DWP_ST4_CLAMP, RLX_DWP_ST2_CLAMP)
RLX_DWP_LINE(rlx_dwp_s2_clamp, RLX_DWP_Q2, RLX_DWP_P2, RLX_DWP_ST4_CLAMP, RLX_DWP_ST2_CLAMP)

/* The saturating lines run 6 outputs a step (a hex), their requantization needing no register of
 * its own (RLX_DWP_RQS): r0-r5 the accumulators, r6 r7 a window line's weight pairs, lr the input
 * word (each loaded once, feeding the 2 to 4 outputs whose taps it holds); the job's oadj, kend
 * and n are copied to [sp] (one LDM a channel), the outputs left, less 6, kept at [sp, #12]. The
 * first window line starts outputs 4 and 5 from the bias of 2 and 3 (LDMDB loads 4), so it reads
 * the words of outputs 4 and 5 first. Stride 1: words (in[x], in[x+1]) ..
 * (in[x+6], in[x+7]), 54 MACs in 51 instructions; stride 2: (in[2x], ..) .. (in[2x+12], ..), 60. */
/* the runs the hex steps share: outputs 0-3 from a window line's words, the plane pointer P advanced
 * past them (stride 1: two words, stride 2: four) */
#define RLX_DWP_H1_R03(P)                                                                    \
    "ldr lr, [" P "], #48\n\t"                                                               \
    "smlad r0, lr, r6, r0\n\t"                                                               \
    "smlatb r1, lr, r6, r1\n\t"                                                              \
    "ldr lr, [" P ", #-32]\n\t"                                                              \
    "smlabt r0, lr, r7, r0\n\t"                                                              \
    "smlad r1, lr, r7, r1\n\t"                                                               \
    "smlad r2, lr, r6, r2\n\t"                                                               \
    "smlatb r3, lr, r6, r3\n\t"
#define RLX_DWP_H2_R03(P)                                                                    \
    "ldr lr, [" P "], #96\n\t"                                                               \
    "smlad r0, lr, r6, r0\n\t"                                                               \
    "ldr lr, [" P ", #-80]\n\t"                                                              \
    "smlabt r0, lr, r7, r0\n\t"                                                              \
    "smlad r1, lr, r6, r1\n\t"                                                               \
    "ldr lr, [" P ", #-64]\n\t"                                                              \
    "smlabt r1, lr, r7, r1\n\t"                                                              \
    "smlad r2, lr, r6, r2\n\t"                                                               \
    "ldr lr, [" P ", #-48]\n\t"                                                              \
    "smlabt r2, lr, r7, r2\n\t"                                                              \
    "smlad r3, lr, r6, r3\n\t"
#define RLX_DWP_H1_0(P, W)                                                                       \
    "ldrd r6, r7, [r12, #" W "]\n\t"                                                             \
    "ldr lr, [" P ", #32]\n\t"                                                                   \
    "smlad r4, lr, r6, r2\n\t"                                                                   \
    "smlatb r5, lr, r6, r3\n\t"                                                                  \
    "smlabt r2, lr, r7, r2\n\t"                                                                  \
    "smlad r3, lr, r7, r3\n\t"                                                                   \
    "ldr lr, [" P ", #48]\n\t"                                                                   \
    "smlabt r4, lr, r7, r4\n\t"                                                                  \
    "smlad r5, lr, r7, r5\n\t"                                                                   \
    RLX_DWP_H1_R03(P)
#define RLX_DWP_H1(P, W)                                                                         \
    "ldrd r6, r7, [r12, #" W "]\n\t"                                                             \
    RLX_DWP_H1_R03(P)                                                                        \
    "ldr lr, [" P ", #-16]\n\t"                                                                  \
    "smlabt r2, lr, r7, r2\n\t"                                                                  \
    "smlad r3, lr, r7, r3\n\t"                                                                   \
    "smlad r4, lr, r6, r4\n\t"                                                                   \
    "smlatb r5, lr, r6, r5\n\t"                                                                  \
    "ldr lr, [" P "]\n\t"                                                                        \
    "smlabt r4, lr, r7, r4\n\t"                                                                  \
    "smlad r5, lr, r7, r5\n\t"
#define RLX_DWP_H2_0(P, W)                                                                       \
    "ldrd r6, r7, [r12, #" W "]\n\t"                                                             \
    "ldr lr, [" P ", #80]\n\t"                                                                   \
    "smlad r5, lr, r6, r3\n\t"                                                                   \
    "smlabt r4, lr, r7, r2\n\t"                                                                  \
    "ldr lr, [" P ", #64]\n\t"                                                                   \
    "smlad r4, lr, r6, r4\n\t"                                                                   \
    "smlabt r3, lr, r7, r3\n\t"                                                                  \
    "ldr lr, [" P ", #96]\n\t"                                                                   \
    "smlabt r5, lr, r7, r5\n\t"                                                                  \
    RLX_DWP_H2_R03(P)
#define RLX_DWP_H2(P, W)                                                                         \
    "ldrd r6, r7, [r12, #" W "]\n\t"                                                             \
    RLX_DWP_H2_R03(P)                                                                        \
    "ldr lr, [" P ", #-32]\n\t"                                                                  \
    "smlabt r3, lr, r7, r3\n\t"                                                                  \
    "smlad r4, lr, r6, r4\n\t"                                                                   \
    "ldr lr, [" P ", #-16]\n\t"                                                                  \
    "smlabt r4, lr, r7, r4\n\t"                                                                  \
    "smlad r5, lr, r6, r5\n\t"                                                                   \
    "ldr lr, [" P "]\n\t"                                                                        \
    "smlabt r5, lr, r7, r5\n\t"
/* the last output of an odd count: a pair's first half, its plane pointers advanced as a pair's */
#define RLX_DWP_S1(P, W)                                                                         \
    "ldrd r6, r7, [r12, #" W "]\n\t"                                                             \
    "ldr r4, [" P "], #16\n\t"                                                                   \
    "ldr r5, [" P "]\n\t"                                                                        \
    "smlad r0, r4, r6, r0\n\t"                                                                   \
    "smlabt r0, r5, r7, r0\n\t"
#define RLX_DWP_S2(P, W)                                                                         \
    "ldrd r6, r7, [r12, #" W "]\n\t"                                                             \
    "ldr r4, [" P "], #32\n\t"                                                                   \
    "ldr r5, [" P ", #-16]\n\t"                                                                  \
    "smlad r0, r4, r6, r0\n\t"                                                                   \
    "smlabt r0, r5, r7, r0\n\t"
/* RLX_DWP_RQS with the shift in r6, mult in r7 and rq_add in lr (LDM of the three) */
#define RLX_DWP_RQH(A)                                                                           \
    "smmlar " A ", " A ", r7, lr\n\t"                                                            \
    "asr " A ", " A ", r6\n\t"                                                                   \
    "ssat " A ", #8, " A "\n\t"
/* A whole line of every channel of a job, saturated: hexes while 6 outputs or more are left, then
 * pairs while 2 are (the outputs left, less 2, in lr), then one output if one is left. */
#define RLX_DWP_LINE6(NAME, H0, H, P, S)                                                         \
    static __attribute__((naked, noinline, noipa, used)) void NAME(const rlx_dwp_job *job __attribute__((unused))) \
    {                                                                                            \
        __asm__(".syntax unified\n\t"                                                            \
                "push {r4-r11, lr}\n\t"                                                          \
                "sub sp, sp, #16\n\t"                                                            \
                "ldmia r0, {r4, r5, r6}\n\t"                                                     \
                "stmia sp, {r4, r5, r6}\n\t"                                                     \
                "add r0, r0, #12\n\t"                                                            \
                "ldmia r0, {r8-r12}\n\t"                                                         \
                "1:\n\t"                                                                         \
                "subs r1, r6, #6\n\t"                                                            \
                "blt 3f\n\t"                                                                     \
                "2:\n\t"                                                                         \
                "str r1, [sp, #12]\n\t"                                                          \
                "ldmdb r12, {r0-r3}\n\t" H0("r8", "16") H("r9", "24") H("r10", "32")              \
                "ldmia r12, {r6, r7, lr}\n\t" RLX_DWP_RQH("r0") RLX_DWP_RQH("r1")                \
                    RLX_DWP_RQH("r2") RLX_DWP_RQH("r3") RLX_DWP_RQH("r4") RLX_DWP_RQH("r5")      \
                "ldr r7, [r12, #12]\n\t"                                                         \
                "strb r0, [r11]\n\tstrb r1, [r11, r7]\n\tadd r11, r11, r7, lsl #1\n\t"           \
                "strb r2, [r11]\n\tstrb r3, [r11, r7]\n\tadd r11, r11, r7, lsl #1\n\t"           \
                "strb r4, [r11]\n\tstrb r5, [r11, r7]\n\tadd r11, r11, r7, lsl #1\n\t"           \
                "ldr r1, [sp, #12]\n\t"                                                          \
                "subs r1, r1, #6\n\t"                                                            \
                "bge 2b\n\t"                                                                     \
                "3:\n\t"                                                                         \
                "adds lr, r1, #5\n\t"                                                            \
                "blt 5f\n\t"                                                                     \
                "subs lr, lr, #1\n\t"                                                            \
                "blt 6f\n\t"                                                                     \
                "4:\n\t"                                                                         \
                "ldrd r0, r1, [r12, #-8]\n\t" P("r8", "16") P("r9", "24") P("r10", "32")         \
                    RLX_DWP_RQ_LOAD RLX_DWP_RQS("r0") RLX_DWP_RQS("r1")                          \
                "ldr r4, [r12, #12]\n\t"                                                         \
                "strb r0, [r11]\n\tstrb r1, [r11, r4]\n\tadd r11, r11, r4, lsl #1\n\t"           \
                "subs lr, lr, #2\n\t"                                                            \
                "bge 4b\n\t"                                                                     \
                "adds lr, lr, #2\n\t"                                                            \
                "beq 5f\n\t"                                                                     \
                "6:\n\t"                                                                         \
                "ldr r0, [r12, #-4]\n\t" S("r8", "16") S("r9", "24") S("r10", "32")             \
                    RLX_DWP_RQ_LOAD RLX_DWP_RQS("r0") RLX_DWP_ST2_SAT                            \
                "5:\n\t"                                                                         \
                RLX_DWP_NEXT_CHANNEL                                                         \
                "ldmia sp, {r4, r5, r6}\n\t"                                                     \
                "add r11, r11, r4\n\t"                                                           \
                "add r12, r12, #68\n\t"                                                          \
                "cmp r12, r5\n\t"                                                                \
                "bne 1b\n\t"                                                                     \
                "add sp, sp, #16\n\t"                                                            \
                "pop {r4-r11, pc}\n\t");                                                         \
    }
RLX_DWP_LINE6(rlx_dwp_s1_sat, RLX_DWP_H1_0, RLX_DWP_H1, RLX_DWP_P1, RLX_DWP_S1)
RLX_DWP_LINE6(rlx_dwp_s2_sat, RLX_DWP_H2_0, RLX_DWP_H2, RLX_DWP_P2, RLX_DWP_S2)

/* Stride 2, saturated: 8 outputs (an oct) of every channel of a job (job->n is 8; rlx_dwp_s2_octs runs
 * a line of a multiple of 8 outputs as a job per oct). The hex and a pair of an 8-wide line reload the
 * channel's constants: 150 instructions a channel's 8 outputs, this 129. r0-r7 the accumulators, r8 r9 a
 * window line's weight pairs, r10 its plane (the channel's 3 planes on the stack, [sp] .. [sp, #8]),
 * lr the input word, r11 the output, r12 the channel's constants; [sp, #12] the job's oadj and kend
 * (the output of the next channel from the fifth output of this one: rlx_dwp_s2_octs sets it).
 * Output x is SMLAD (in[2x], in[2x+1]) + SMLABT (in[2x+2], ..): the first window line starts every
 * accumulator from the bias in r7 (output 7's own the last). */
#define RLX_DWP_SRC_BIAS(X) "r7"
#define RLX_DWP_SRC_SELF(X) X
#define RLX_DWP_O8_W(J, A, B, S)                                                                 \
    "ldr lr, [r10, #" J "]\n\t"                                                                  \
    "smlabt " A ", lr, r9, " A "\n\t"                                                            \
    "smlad " B ", lr, r8, " S(B) "\n\t"
#define RLX_DWP_O8(F, W, S)                                                                      \
    "ldrd r8, r9, [r12, #" W "]\n\t"                                                             \
    "ldr r10, [sp, #" F "]\n\t"                                                                  \
    "ldr lr, [r10]\n\t"                                                                          \
    "smlad r0, lr, r8, " S("r0") "\n\t" RLX_DWP_O8_W("16", "r0", "r1", S)                       \
        RLX_DWP_O8_W("32", "r1", "r2", S) RLX_DWP_O8_W("48", "r2", "r3", S)                      \
            RLX_DWP_O8_W("64", "r3", "r4", S) RLX_DWP_O8_W("80", "r4", "r5", S)                  \
                RLX_DWP_O8_W("96", "r5", "r6", S) RLX_DWP_O8_W("112", "r6", "r7", S)             \
    "ldr lr, [r10, #128]\n\t"                                                                    \
    "smlabt r7, lr, r9, r7\n\t"
/* RLX_DWP_RQS with the shift in r8, mult in r9 and rq_add in r10 */
#define RLX_DWP_RQO(A)                                                                           \
    "smmlar " A ", " A ", r9, r10\n\t"                                                           \
    "asr " A ", " A ", r8\n\t"                                                                   \
    "ssat " A ", #8, " A "\n\t"
static __attribute__((naked, noinline, noipa, used)) void rlx_dwp_s2_oct_sat(
    const rlx_dwp_job *job __attribute__((unused)))
{
    __asm__(".syntax unified\n\t"
            "push {r4-r11, lr}\n\t"
            "sub sp, sp, #24\n\t"
            "ldmia r0, {r4, r5}\n\t"
            "strd r4, r5, [sp, #12]\n\t"
            "add r0, r0, #12\n\t"
            "ldmia r0, {r4, r5, r6, r11, r12}\n\t"
            "stmia sp, {r4, r5, r6}\n\t"
            "1:\n\t"
            "ldr r7, [r12, #-4]\n\t" RLX_DWP_O8("0", "16", RLX_DWP_SRC_BIAS)
                RLX_DWP_O8("4", "24", RLX_DWP_SRC_SELF) RLX_DWP_O8("8", "32", RLX_DWP_SRC_SELF)
            "ldmia r12, {r8, r9, r10}\n\t" RLX_DWP_RQO("r0") RLX_DWP_RQO("r1") RLX_DWP_RQO("r2")
                RLX_DWP_RQO("r3") RLX_DWP_RQO("r4") RLX_DWP_RQO("r5") RLX_DWP_RQO("r6")
                    RLX_DWP_RQO("r7")
            "ldr lr, [r12, #12]\n\t"
            "add r9, lr, lr, lsl #1\n\t"
            "strb r0, [r11]\n\tstrb r1, [r11, lr]\n\tstrb r2, [r11, lr, lsl #1]\n\tstrb r3, [r11, r9]\n\t"
            "add r11, r11, lr, lsl #2\n\t"
            "strb r4, [r11]\n\tstrb r5, [r11, lr]\n\tstrb r6, [r11, lr, lsl #1]\n\tstrb r7, [r11, r9]\n\t"
            "ldr r1, [r12, #48]\n\t"
            "ldmia sp, {r8, r9, r10}\n\t"
            "add r8, r8, r1\n\t"
            "add r9, r9, r1\n\t"
            "add r10, r10, r1\n\t"
            "stmia sp, {r8, r9, r10}\n\t"
            "ldrd r1, r2, [sp, #12]\n\t"
            "add r11, r11, r1\n\t"
            "add r12, r12, #68\n\t"
            "cmp r12, r2\n\t"
            "bne 1b\n\t"
            "add sp, sp, #24\n\t"
            "pop {r4-r11, pc}\n\t");
}
#undef RLX_DWP_SRC_BIAS
#undef RLX_DWP_SRC_SELF
#undef RLX_DWP_O8_W
#undef RLX_DWP_O8
#undef RLX_DWP_RQO

/* A stride-2 line of a multiple of 8 outputs (j->n) of every channel of a job: a job of its own per oct,
 * the planes 8 words on (the constants' output step os; the oct leaves the output at its fifth) */
static RLX_DWP_NOINLINE void rlx_dwp_s2_octs(const rlx_dwp_job *j)
{
    const int32_t os = (int32_t)j->k[RLX_DWP_OS - RLX_DWP_E];
    rlx_dwp_job q = *j;
    q.n = 8;
    q.oadj = 1 - 4 * os;
    for (int32_t x = 0; x < j->n; x += 8) {
        q.x[0] = j->x[0] + 8 * x, q.x[1] = j->x[1] + 8 * x, q.x[2] = j->x[2] + 8 * x;
        q.o = j->o + x * os;
        rlx_dwp_s2_oct_sat(&q);
    }
}
#endif

/* One line of every channel of a job, one output at a time: any stride and output rule (the
 * portable build of the DSP path, rq_mode 0, strides above 2). The constants' bias and weights
 * are doubled for the fast requantization (rq_mode 0 halves the weights and reads the bias from
 * the layer); sums wrap as the asm's. */
static void rlx_dwp_line_c(const rlx_dw_conv_params *p, const rlx_dwp_job *j, int32_t nc, int32_t c0, int32_t s,
                           int32_t wq, int32_t ms)
{
    const rlx_rq_params rq = {p->rq_mode, p->out_zp, p->act_min, p->act_max, p->mult, p->shift, p->rq_add};
    const int32_t h = rq.mode == 0;
    for (int32_t c = 0; c < nc; c++) {
        const uint32_t *const q = j->k - RLX_DWP_E + RLX_DWP_K * c, *const wk = q + RLX_DWP_W;
        const int32_t os = (int32_t)q[RLX_DWP_OS], pc = rlx_dwp_plane(c >> ms, wq);
        for (int32_t x = 0; x < j->n; x++) {
            uint32_t a = h ? (uint32_t)p->bias[c0 + c] : q[0];
            for (int32_t r = 0; r < 3; r++) {
                const int16_t *const xp = j->x[r] + pc;
                const uint32_t w01 = wk[2 * r], w12 = wk[2 * r + 1];
                const int32_t w[3] = {(int16_t)(w01 & 0xFFFFu) >> h, (int16_t)(w01 >> 16) >> h,
                                      (int16_t)(w12 >> 16) >> h};
                for (int32_t t = 0; t < 3; t++) {
                    const int32_t pos = x * s + t;
                    a += (uint32_t)(w[t] * xp[(pos >> 1) * 8 + (pos & 1)]);
                }
            }
            const int32_t acc = (int32_t)a;
            int32_t v;
            if (rq.mode == 0) {
                v = rlx_rq_out(&rq, acc, c0 + c);
            } else {
                /* the doubled accumulator: rlx_rq_fast without its acc << 1 */
                const int32_t t = rlx_smmlar(acc, (int32_t)q[RLX_DWP_E + 1], (int32_t)q[RLX_DWP_E + 2]) + (acc >> 31);
                v = rlx_clamp(t >> q[RLX_DWP_E], rq.act_min, rq.act_max);
            }
            j->o[c + x * os] = (int8_t)v;
        }
    }
}

/* One image line of a block into its planes, as the widening asm reads it: per group of 4
 * channels, a lead word (padding 0, the first pixel) where the pixels start at an odd position,
 * the pixel pairs (two words in, one STM of 4 out: SXTAB16 adds the input offset, PKHBT / PKHTB put
 * each channel's two pixels in one word), a trail word (the last pixel, 0) where one is left; what
 * to add to the source and plane pointers at a group's end to reach the next group's start. */
typedef struct {
    const int8_t *s;
    int32_t ps;
    int16_t *d;
    int32_t np16, ng;
    uint32_t off2;
    int32_t sadj, dadj, lead, trail;
} rlx_dwp_wjob;

#if defined(RLX_DWP_ASM)
/* two pixels of a group (4 pixels a source step: the first pair's at the source r7, the second's 2
 * pixels on, r5 the step of 3): the bytes paired first (PKHBT: channels 0 and 1 of both pixels, PKHTB:
 * 2 and 3), so that each SXTAB16 gives one channel's two pixels, widened with the offset added: 9 and
 * 10 instructions, not 12 */
#define RLX_DWP_WIDEN2A                                                                          \
    "ldr r0, [r7]\n\t"                                                                           \
    "ldr r1, [r7, r8]\n\t" RLX_DWP_WIDEN2
#define RLX_DWP_WIDEN2B                                                                          \
    "ldr r0, [r7, r8, lsl #1]\n\t"                                                               \
    "ldr r1, [r7, r5]\n\t"                                                                       \
    "add r7, r7, r8, lsl #2\n\t" RLX_DWP_WIDEN2
#define RLX_DWP_WIDEN2                                                                           \
    "pkhbt r2, r0, r1, lsl #16\n\t"                                                              \
    "pkhtb r3, r1, r0, asr #16\n\t"                                                              \
    "sxtab16 r0, r10, r2\n\t"                                                                    \
    "sxtab16 r1, r10, r2, ror #8\n\t"                                                            \
    "sxtab16 r2, r10, r3\n\t"                                                                    \
    "sxtab16 r3, r10, r3, ror #8\n\t"                                                            \
    "stmia r6!, {r0-r3}\n\t"
static __attribute__((naked, noinline, noipa, used)) void rlx_dwp_widen_asm(
    const rlx_dwp_wjob *j __attribute__((unused)))
{
    /* r7 the source, r6 the group's planes, r8 the pixel step, r9 the pairs' end, r10 the input
     * offset in both halves, r11 the groups left, r12 the pairs' bytes (16 a pair), r4 the lead
     * flag, r5 3 pixel steps, lr the job. The pairs run 4 a step, the first step entered where the
     * count modulo 4 says (bits 4 and 5 of r12): at a second pair of a source step for an odd count,
     * the source 2 pixels back. */
    __asm__(".syntax unified\n\t"
            "push {r4-r11, lr}\n\t"
            "mov lr, r0\n\t"
            "ldmia r0, {r7, r8}\n\t"
            "ldrd r6, r12, [r0, #8]\n\t"
            "ldrd r11, r10, [r0, #16]\n\t"
            "ldr r4, [r0, #32]\n\t"
            "add r5, r8, r8, lsl #1\n\t"
            "1:\n\t"
            "cbz r4, 2f\n\t"
            "ldr r0, [r7]\n\t"
            "add r7, r7, r8\n\t"
            "sxtab16 r2, r10, r0\n\t"
            "sxtab16 r3, r10, r0, ror #8\n\t"
            "lsl r0, r2, #16\n\t"
            "lsl r1, r3, #16\n\t"
            "lsr r2, r2, #16\n\t"
            "lsl r2, r2, #16\n\t"
            "lsr r3, r3, #16\n\t"
            "lsl r3, r3, #16\n\t"
            "stmia r6!, {r0-r3}\n\t"
            "2:\n\t"
            "add r9, r6, r12\n\t"
            "ands r1, r12, #48\n\t"
            "beq 7f\n\t"
            "cmp r1, #32\n\t"
            "beq 8f\n\t"
            "sub r7, r7, r8, lsl #1\n\t"
            "bhi 9f\n\t"
            "b 10f\n\t"
            "7:\n\t"
            "cmp r6, r9\n\t"
            "beq 3f\n\t"
            "4:\n\t" RLX_DWP_WIDEN2A "9:\n\t" RLX_DWP_WIDEN2B "8:\n\t" RLX_DWP_WIDEN2A "10:\n\t" RLX_DWP_WIDEN2B
            "cmp r6, r9\n\t"
            "bne 4b\n\t"
            "3:\n\t"
            "ldr r1, [lr, #36]\n\t"
            "cbz r1, 6f\n\t"
            "ldr r0, [r7]\n\t"
            "add r7, r7, r8\n\t"
            "sxtab16 r2, r10, r0\n\t"
            "sxtab16 r3, r10, r0, ror #8\n\t"
            "uxth r0, r2\n\t"
            "uxth r1, r3\n\t"
            "lsr r2, r2, #16\n\t"
            "lsr r3, r3, #16\n\t"
            "stmia r6!, {r0-r3}\n\t"
            "6:\n\t"
            "ldrd r1, r2, [lr, #24]\n\t"
            "add r7, r7, r1\n\t"
            "add r6, r6, r2\n\t"
            "subs r11, r11, #1\n\t"
            "bne 1b\n\t"
            "pop {r4-r11, pc}\n\t");
}
#endif

/* nc channels of image line src into the ring line at d, plane positions [lo, hi): groups of 4
 * channels as j says (its other fields set once per block), the rest one by one (pixel step
 * j->ps, input offset off). */
static void rlx_dwp_widen(rlx_dwp_wjob *j, const int8_t *src, int16_t *d, int32_t nc, int32_t wq, int32_t lo,
                          int32_t hi, int32_t off)
{
    const int32_t ps = j->ps;
    int32_t c = 0;
#if defined(RLX_DWP_ASM)
    if (j->ng > 0 && hi > lo) {
        j->s = src;
        j->d = d + (lo >> 1) * 8;
        rlx_dwp_widen_asm(j);
        c = 4 * j->ng;
    }
#endif
    for (; c < nc; c++) {
        /* position 2 j + b at 8 j + b: pixel pairs, and an odd first and last pixel */
        const int8_t *s = src + c;
        int16_t *pp = d + rlx_dwp_plane(c, wq) + (lo >> 1) * 8;
        int32_t i = lo;
        if (i & 1 && i < hi) {
            pp[1] = (int16_t)(*s + off);
            s += ps, pp += 8, i++;
        }
        for (; i + 2 <= hi; i += 2, s += 2 * ps, pp += 8) {
            pp[0] = (int16_t)(s[0] + off);
            pp[1] = (int16_t)(s[ps] + off);
        }
        if (i < hi) {
            pp[0] = (int16_t)(*s + off);
        }
    }
}

/* words [w, end) zeroed (end - w a multiple of 4): a ring slot for the lines outside the image */
#if defined(RLX_DWP_ASM)
static __attribute__((naked, noinline, noipa, used)) void rlx_dwp_zero(uint32_t *w __attribute__((unused)),
                                                                      const uint32_t *end __attribute__((unused)))
{
    /* 8 words a store, then 4 where 4 are left */
    __asm__(".syntax unified\n\t"
            "push {r4-r7, lr}\n\t"
            "movs r2, #0\n\t"
            "movs r3, #0\n\t"
            "movs r4, #0\n\t"
            "movs r5, #0\n\t"
            "movs r6, #0\n\t"
            "movs r7, #0\n\t"
            "mov r12, r2\n\t"
            "mov lr, r2\n\t"
            "subs r1, r1, r0\n\t"
            "b 2f\n\t"
            "1:\n\t"
            "stmia r0!, {r2-r7, r12, lr}\n\t"
            "2:\n\t"
            "subs r1, r1, #32\n\t"
            "bge 1b\n\t"
            "adds r1, r1, #32\n\t"
            "beq 3f\n\t"
            "stmia r0!, {r2, r3, r12, lr}\n\t"
            "3:\n\t"
            "pop {r4-r7, pc}\n\t");
}
#else
static void rlx_dwp_zero(uint32_t *w, const uint32_t *end)
{
    for (; w != end; w += 4) {
        w[0] = 0u, w[1] = 0u, w[2] = 0u, w[3] = 0u;
    }
}
#endif
#endif

/* scratch: per channel of a block RLX_DWP_K words (weight pairs, requantization), then 3 ring
 * lines, each the planes of the block's groups of 4 channels, 4 wq halfwords a group (wq and the
 * block's channels as rlx_dwp_run computes them; rules.py's _dw_pair_scratch mirrors both). */
#if RLX_USE_DSP
/* One output line of a block's channels (rlx_dwp_job): an asm routine per stride. */
typedef void (*rlx_dwp_line_fn)(const rlx_dwp_job *);

/* The kernel, with the line routines of its output rule where the caller found that they fit the
 * layer (NULL: the C lines, rlx_dwp_line_c, which strides above 2 run as well); hex: they run 6
 * outputs a step (the saturating ones), else 4; s2o, where not NULL, runs the stride-2 lines of a
 * multiple of 8 outputs (rlx_dwp_s2_octs: a kernel a model may leave unlinked). st: NULL for the
 * layer's own image, else the bytes between input pixels along W and along H, then between output
 * pixels along W and along H (a phase of a dilated layer, whose sizes and padding p gives:
 * rlx_depthwise_conv_3x3_pair_gen_s8). */
static RLX_DWP_NOINLINE void rlx_dwp_run(const rlx_dw_conv_params *p, const int8_t *in, int8_t *out, int16_t *scratch,
                                         rlx_dwp_line_fn s1, rlx_dwp_line_fn s2, rlx_dwp_line_fn s2o, int32_t hex,
                                         const int32_t *st)
{
    const int32_t ch = p->in_c, in_h = p->in_h, in_w = p->in_w, out_h = p->out_h, out_w = p->out_w;
    /* depth multiplier 2 (ms 1): output channels 2 i and 2 i + 1 read input channel i's planes; blocks
     * count input channels, the constants output channels */
    const int32_t ms = p->ch_mult - 1, oc = ch << ms;
    const int32_t ix = st ? st[0] : ch, iy = st ? st[1] : in_w * ch, ox = st ? st[2] : oc, oy = st ? st[3] : out_w * oc;
    /* L: the axis the line runs along; B: the one the ring steps across */
    const int32_t along_h = out_h > out_w;
    const int32_t n_l = along_h ? out_h : out_w, s_l = along_h ? p->stride_h : p->stride_w;
    const int32_t in_l = along_h ? in_h : in_w, pad_l = along_h ? p->pad_top : p->pad_left;
    const int32_t in_b = along_h ? in_w : in_h, pad_b = along_h ? p->pad_left : p->pad_top;
    const int32_t out_b = along_h ? out_w : out_h, s_b = along_h ? p->stride_w : p->stride_h;
    const int32_t ps = along_h ? iy : ix, bs = along_h ? ix : iy, ob = along_h ? ox : oy;
    const int32_t os = along_h ? oy : ox;
    /* plane length: the last output's taps and the word past them that a pair's second
     * output reads (stride 2: one more pair); even, so that planes stay word-aligned */
    const int32_t wq = ((n_l - 1) * s_l + 2 + 2 * s_l + 1) & ~1;
    /* channels per block: 4 to 32, the 3 ring lines in about 1 KB (2 KB on lines of 20 positions
     * or fewer, whose set-up per block and line weighs most), or up to 4 KB as a
     * sixteenth of the layer's input and output (KWS's arena is its dw layers', whose lines are longer) */
    const int32_t io = (in_h * in_w + out_h * out_w) * ch / 16, lo_io = wq <= 20 ? 2048 : 1024;
    int32_t cb = (io < lo_io ? lo_io : io > 4096 ? 4096 : io) / (24 * wq) * 4;
    cb = cb < 4 ? 4 : cb > 32 ? 32 : cb;
    cb = ch < cb ? ch : cb;
    const int32_t fast = p->rq_mode != 0;
    /* the layer's arrays as locals (the scratch's stores may alias the struct) */
    const int8_t *const wts = p->weights;
    const int32_t *const bias = p->bias, *const mult = p->mult, *const rq_add = p->rq_add;
    /* window line r's taps along the line: w[r * rstep + t * tstep] */
    const int32_t rstep = along_h ? oc : 3 * oc, tstep = along_h ? 3 * oc : oc;
    uint32_t *const wk = (uint32_t *)(void *)scratch;
    /* a ring line: the planes of the block's groups of 4 channels (the last one's missing channels
     * unused), 4 wq halfwords each */
    const int32_t ls = (cb + 3) / 4 * 4 * wq;
    int16_t *const ring = scratch + 2 * RLX_DWP_K * (cb << ms);
    /* the plane positions that hold image pixels: [lo, hi); the others are padding, zeroed once */
    const int32_t lo = pad_l < wq ? pad_l : wq, hi = in_l + pad_l < wq ? in_l + pad_l : wq;
    /* 3 ls halfwords: 6 wq words a group, a multiple of 4 (wq even) */
    rlx_dwp_zero((uint32_t *)(void *)ring, (uint32_t *)(void *)(ring + 3 * ls));
    /* the ring's slots all zero (bit s: slot s); the words of a slot that widening writes, within
     * [z0, z1): from the first group's first pixel pair, lo / 2 (4 words a pair), to the last
     * group's last, (hi - 1) / 2 (the padding pairs between are 0 already) */
    uint32_t zs = 7u;
    const int32_t z0 = 4 * (lo >> 1), z1 = 2 * wq * ((cb - 1) / 4) + 4 * ((hi + 1) >> 1), sb3 = s_b % 3;
    /* slot s % 3 at sl[s] (s < 5) */
    int16_t *const sl[5] = {ring, ring + ls, ring + 2 * ls, ring, ring + ls};
    /* the lines before the image (up to 3) as slot bits from the first window's first slot */
    const uint32_t pm = (1u << (pad_b < 3 ? pad_b : 3)) - 1u;
    const uint32_t off2 = ((uint32_t)p->in_offset & 0xFFFFu) | ((uint32_t)p->in_offset << 16);
    const uint32_t lo2 = ((uint32_t)p->act_min & 0xFFFFu) | ((uint32_t)p->act_min << 16);
    const uint32_t hi2 = ((uint32_t)p->act_max & 0xFFFFu) | ((uint32_t)p->act_max << 16);
    /* the bytes a plane pointer of the asm advances along a line: the clamp's quads (one more for 3
     * left), then a pair for 1 or 2 left; the saturating lines' hexes, then a pair for each 2 left;
     * none for the octs */
    const int32_t r4 = n_l % 4, r6 = n_l % 6, oct = s2o != NULL && s_l == 2 && n_l % 8 == 0;
    /* the octs' planes do not advance (rlx_dwp_s2_octs: a job per oct) */
    const int32_t adv = oct ? 0
                      : hex ? 16 * s_l * (3 * (n_l / 6) + (r6 + 1) / 2)
                            : 16 * s_l * (2 * (n_l / 4 + (r4 == 3)) + (r4 == 1 || r4 == 2));
    /* the constants every block's channel k shares, set once */
    for (int32_t k = 0; k < cb << ms; k++) {
        uint32_t *const q = wk + RLX_DWP_K * k;
        q[RLX_DWP_OS] = (uint32_t)os;
        q[RLX_DWP_LH] = lo2;
        q[RLX_DWP_LH + 1] = hi2;
        /* the next channel's planes: the same (the first of a multiplier's two), the next word of the
         * group, or the next group's first */
        q[RLX_DWP_PADJ] = (uint32_t)((k & ms) != ms ? 0 - adv : (k >> ms & 3) < 3 ? 4 - adv : 8 * wq - 12 - adv);
    }
    for (int32_t ic0 = 0; ic0 < ch; ic0 += cb) {
        /* the block's input channels [ic0, ic0 + cb), its output channels [c0, c0 + nc) */
        const int32_t c0 = ic0 << ms, nc = (ch - ic0 < cb ? ch - ic0 : cb) << ms;
        /* per channel and window line r: (w0, w1), (w1, w2) of its taps along the line, as int16,
         * doubled; 4 channels at a time from one word per tap (SXTB16 gives channels 0 and 2, ROR 8
         * 1 and 3; SXTAB16 of the word onto them doubles each half alone) */
        int32_t c = c0;
        for (; c + 4 <= c0 + nc; c += 4) {
            uint32_t *const q = wk + RLX_DWP_K * (c - c0) + RLX_DWP_W;
            for (int32_t r = 0; r < 3; r++) {
                const int8_t *const w = wts + r * rstep + c;
                const uint32_t t0 = rlx_rd32(w), t1 = rlx_rd32(w + tstep), t2 = rlx_rd32(w + 2 * tstep);
                const uint32_t e0 = rlx_sxtab16(rlx_sxtb16(t0), t0), o0 = rlx_sxtab16_ror8(rlx_sxtb16_ror8(t0), t0);
                const uint32_t e1 = rlx_sxtab16(rlx_sxtb16(t1), t1), o1 = rlx_sxtab16_ror8(rlx_sxtb16_ror8(t1), t1);
                const uint32_t e2 = rlx_sxtab16(rlx_sxtb16(t2), t2), o2 = rlx_sxtab16_ror8(rlx_sxtb16_ror8(t2), t2);
                q[2 * r] = rlx_pack_lo16(e0, e1), q[2 * r + 1] = rlx_pack_lo16(e1, e2);
                q[RLX_DWP_K + 2 * r] = rlx_pack_lo16(o0, o1), q[RLX_DWP_K + 2 * r + 1] = rlx_pack_lo16(o1, o2);
                q[2 * RLX_DWP_K + 2 * r] = rlx_pack_hi16(e0, e1);
                q[2 * RLX_DWP_K + 2 * r + 1] = rlx_pack_hi16(e1, e2);
                q[3 * RLX_DWP_K + 2 * r] = rlx_pack_hi16(o0, o1);
                q[3 * RLX_DWP_K + 2 * r + 1] = rlx_pack_hi16(o1, o2);
            }
        }
        for (; c < c0 + nc; c++) {
            uint32_t *const q = wk + RLX_DWP_K * (c - c0) + RLX_DWP_W;
            for (int32_t r = 0; r < 3; r++) {
                const int8_t *const w = wts + r * rstep + c;
                const uint32_t w0 = (uint32_t)(int32_t)w[0] << 1, w1 = (uint32_t)(int32_t)w[tstep] << 1;
                const uint32_t w2 = (uint32_t)(int32_t)w[2 * tstep] << 1;
                q[2 * r] = rlx_pack_lo16(w0, w1), q[2 * r + 1] = rlx_pack_lo16(w1, w2);
            }
        }
        for (c = c0; c < c0 + nc; c++) {
            uint32_t *const q = wk + RLX_DWP_K * (c - c0);
            const uint32_t b2 = (uint32_t)bias[c] << 1;
            q[0] = b2, q[1] = b2, q[2] = b2, q[3] = b2;
            if (fast) {
                const int32_t add = rq_add[c];
                q[RLX_DWP_E] = (uint32_t)rlx_rq_e(add);
                q[RLX_DWP_E + 1] = (uint32_t)mult[c];
                q[RLX_DWP_E + 2] = (uint32_t)add;
            }
        }
        rlx_dwp_job job;
        job.kend = wk + RLX_DWP_K * nc + RLX_DWP_E;
        job.k = wk + RLX_DWP_E;
        job.n = n_l;
        job.oadj = 1 - n_l * os;
        const int32_t npix = hi - lo;
        /* per group of a line: a lead word where the pixels start at an odd position, pairs, a
         * trail word where one pixel is left */
        const int32_t lead = lo & 1 && npix > 0, np = (npix - lead) / 2, trail = (npix - lead) & 1;
        rlx_dwp_wjob wj = {NULL, ps, NULL, 16 * np, (nc >> ms) / 4, off2, 4 - npix * ps,
                           8 * wq - 16 * (lead + np + trail), lead, trail};
        for (int32_t n = 0; n < p->batches; n++) {
            const int8_t *img = in + n * in_h * in_w * ch + (lo - pad_l) * ps + ic0;
            int8_t *o = out + n * out_h * out_w * oc + c0;
            /* image lines are widened in order into consecutive ring slots (mod 3): the ring holds
             * the last 3, the window's (strides up to 3). A line outside the image reads the slot
             * its index maps to, which no line of its window holds (3 lines, 3 slots), zeroed if it
             * is not. The first window's first line (s0: its slot) goes to a zero slot where there
             * is one (the last pass's bottom padding left one), sparing a zeroing per block. The
             * lines before the image get zero slots here, for every window that reads them (no
             * line is widened into those before); the windows check the lines after it. */
            int32_t s0 = zs & 1u ? 0 : zs & 2u ? 1 : 2;
            int32_t nxt = 0, ns = (s0 + pad_b) % 3;
            const uint32_t need = ((pm << s0 | pm >> (3 - s0)) & 7u) & ~zs;
            if (need != 0u) {
                for (int32_t z = 0; z < 3; z++) {
                    if (need >> z & 1u) {
                        rlx_dwp_zero((uint32_t *)(void *)sl[z] + z0, (uint32_t *)(void *)sl[z] + z1);
                    }
                }
                zs |= need;
            }
            for (int32_t k = 0, ib0 = -pad_b; k < out_b; k++, ib0 += s_b, o += ob) {
                for (const int32_t last = ib0 + 2 < in_b ? ib0 + 2 : in_b - 1; nxt <= last; nxt++) {
                    rlx_dwp_widen(&wj, img + nxt * bs, sl[ns], nc >> ms, wq, lo, hi, p->in_offset);
                    zs &= ~(1u << ns);
                    ns = ns == 2 ? 0 : ns + 1;
                }
                if (ib0 + 2 >= in_b) {
                    for (int32_t i = 0; i < 3; i++) {
                        /* line ib0 + i outside the image, and its slot not zero */
                        const int32_t z = s0 + i < 3 ? s0 + i : s0 + i - 3;
                        if ((uint32_t)(ib0 + i) >= (uint32_t)in_b && !(zs >> z & 1u)) {
                            rlx_dwp_zero((uint32_t *)(void *)sl[z] + z0, (uint32_t *)(void *)sl[z] + z1);
                            zs |= 1u << z;
                        }
                    }
                }
                job.x[0] = sl[s0], job.x[1] = sl[s0 + 1], job.x[2] = sl[s0 + 2];
                job.o = o;
                if (s1 != NULL && s_l <= 2) {
                    (s_l == 1 ? s1 : oct ? s2o : s2)(&job);
                } else {
                    rlx_dwp_line_c(p, &job, nc, c0, s_l, wq, ms);
                }
                s0 = s0 + sb3 < 3 ? s0 + sb3 : s0 + sb3 - 3;
            }
        }
    }
}
#endif

#if RLX_USE_DSP && defined(RLX_DWP_ASM)
/* n int8 values at o clamped to [lo, hi]: up to a word boundary one at a time, then 16 a step (LDM and STM of
 * 4 words, the registers pinned in ascending order as they fill them; SSUB8 sets GE where the first operand
 * is at least the second, SEL picks by it), the rest one at a time */
#define RLX_DWP_CLAMP4(X)                                                                        \
    "ssub8 %[t], %[" X "], %[l]\n\t"                                                               \
    "sel %[" X "], %[" X "], %[l]\n\t"                                                             \
    "ssub8 %[t], %[h], %[" X "]\n\t"                                                               \
    "sel %[" X "], %[" X "], %[h]\n\t"
static RLX_DWP_NOINLINE void rlx_dwp_clamp_out(int8_t *o, int32_t n, int32_t lo, int32_t hi)
{
    const uint32_t l4 = 0x01010101u * (uint8_t)lo, h4 = 0x01010101u * (uint8_t)hi;
    for (; n > 0 && ((uintptr_t)o & 3u) != 0u; n--, o++) {
        *o = (int8_t)rlx_clamp(*o, lo, hi);
    }
    if (n >= 16) {
        register uint32_t a __asm__("r2"), b __asm__("r3"), c __asm__("r12"), d __asm__("lr");
        uint32_t t;
        int32_t k = n >> 4;
        __asm__ volatile("1:\n\t"
                         "ldmia %[o], {%[a], %[b], %[c], %[d]}\n\t" RLX_DWP_CLAMP4("a") RLX_DWP_CLAMP4("b")
                             RLX_DWP_CLAMP4("c") RLX_DWP_CLAMP4("d")
                         "stmia %[o]!, {%[a], %[b], %[c], %[d]}\n\t"
                         "subs %[k], %[k], #1\n\t"
                         "bne 1b\n\t"
                         : [o] "+r"(o), [k] "+r"(k), [a] "=&r"(a), [b] "=&r"(b), [c] "=&r"(c), [d] "=&r"(d),
                           [t] "=&r"(t)
                         : [l] "r"(l4), [h] "r"(h4)
                         : "memory", "cc");
        n &= 15;
    }
    for (; n > 0; n--, o++) {
        *o = (int8_t)rlx_clamp(*o, lo, hi);
    }
}
#undef RLX_DWP_CLAMP4
#endif

/* rq_mode 2 (saturating) with out_zp -128 on the asm lines (RLX_DWP_RQS: no sign correction); any
 * other layer on the C lines (rules.py gives rq_mode 2 with another out_zp to pair_clamp_s8) */
void rlx_depthwise_conv_3x3_pair_s8(const rlx_dw_conv_params *p, const int8_t *in, int8_t *out, int16_t *scratch)
{
#if RLX_USE_DSP && defined(RLX_DWP_ASM)
    const int32_t sat = p->rq_mode == 2 && p->out_zp <= p->act_min;
    rlx_dwp_run(p, in, out, scratch, sat ? rlx_dwp_s1_sat : NULL, sat ? rlx_dwp_s2_sat : NULL, NULL, 1, NULL);
#elif RLX_USE_DSP
    rlx_dwp_run(p, in, out, scratch, NULL, NULL, NULL, 1, NULL);
#else
    rlx_depthwise_conv_3x3_s8(p, in, out, scratch);
#endif
}

/* rq_mode 1 (a clamp), and 2 with an out_zp above -128 (the clamp to -128..127), on the asm lines: a
 * kernel of its own, so that a model without such a layer links neither of its routines (flash) */
void rlx_depthwise_conv_3x3_pair_clamp_s8(const rlx_dw_conv_params *p, const int8_t *in, int8_t *out,
                                          int16_t *scratch)
{
#if RLX_USE_DSP && defined(RLX_DWP_ASM)
    if (p->rq_mode == 1 && p->out_zp <= p->act_min) {
        /* a ReLU's clamp (act_min at or above out_zp): the saturating lines, whose missing sign
         * correction changes only outputs at most out_zp, which the clamp raises to act_min with it
         * or without, then the clamp over the layer's output (M4 sweep, instructions/MAC, the
         * clamped lines then these: 3x3 8x8x96 valid 3.24, 2.74; 16x16x16 2.62, 2.38) */
        rlx_dwp_run(p, in, out, scratch, rlx_dwp_s1_sat, rlx_dwp_s2_sat, rlx_dwp_s2_octs, 1, NULL);
        rlx_dwp_clamp_out(out, p->batches * p->out_h * p->out_w * p->in_c, p->act_min, p->act_max);
        return;
    }
    const int32_t clamp = p->rq_mode == 1 || p->rq_mode == 2;
    rlx_dwp_run(p, in, out, scratch, clamp ? rlx_dwp_s1_clamp : NULL, clamp ? rlx_dwp_s2_clamp : NULL, NULL, 0,
                NULL);
#elif RLX_USE_DSP
    rlx_dwp_run(p, in, out, scratch, NULL, NULL, NULL, 0, NULL);
#else
    rlx_depthwise_conv_3x3_s8(p, in, out, scratch);
#endif
}

/* The pair kernel's lines where pair_s8 and pair_clamp_s8 do not take the layer (balanced, rules.py's
 * _dw_pair_gen): depth multiplier 2 (output channels 2 i and 2 i + 1 read input channel i's planes), and
 * a dilated 3x3 at stride 1: per phase (py, px), the outputs whose row and column are py and px modulo the
 * dilation read only the input rows and columns of one residue (r0, c0), so they are a plain 3x3 at
 * stride 1 over that sub-image (its own sizes and padding), run with pixel steps d times the layer's
 * (the block set-up again per phase). SMLAD on tap pairs, where the pixel kernel takes a tap of 4
 * channels in 8 instructions. The output rule as pair_s8 and pair_clamp_s8 choose theirs; cores
 * without DSP run the ring (the scratch is the larger of the two). */
void rlx_depthwise_conv_3x3_pair_gen_s8(const rlx_dw_conv_params *p, const int8_t *in, int8_t *out, int16_t *scratch)
{
#if RLX_USE_DSP
    rlx_dwp_line_fn s1 = NULL, s2 = NULL;
    int32_t hex = 1, post = 0;
#if defined(RLX_DWP_ASM)
    if (p->rq_mode != 0 && p->out_zp <= p->act_min) {
        /* saturating, or a ReLU's clamp after them (as pair_clamp_s8) */
        s1 = rlx_dwp_s1_sat;
        s2 = rlx_dwp_s2_sat;
        post = p->rq_mode == 1;
    } else if (p->rq_mode != 0) {
        s1 = rlx_dwp_s1_clamp;
        s2 = rlx_dwp_s2_clamp;
        hex = 0;
    }
#endif
    const int32_t dh = p->dil_h, dw = p->dil_w, ch = p->in_c, oc = p->out_c;
    const int32_t st[4] = {dw * ch, dh * p->in_w * ch, dw * oc, dh * p->out_w * oc};
    rlx_dw_conv_params q = *p;
    q.batches = 1;
    q.dil_h = 1;
    q.dil_w = 1;
    for (int32_t n = 0; n < p->batches; n++) {
        const int8_t *const img = in + n * p->in_h * p->in_w * ch;
        int8_t *const o = out + n * p->out_h * p->out_w * oc;
        for (int32_t py = 0; py < dh && py < p->out_h; py++) {
            /* the phase's first input row, and the padding rows before it at its step */
            const int32_t r0 = ((py - p->pad_top) % dh + dh) % dh;
            q.out_h = (p->out_h - py + dh - 1) / dh;
            q.in_h = (p->in_h - r0 + dh - 1) / dh;
            q.pad_top = (r0 - py + p->pad_top) / dh;
            for (int32_t px = 0; px < dw && px < p->out_w; px++) {
                const int32_t c0 = ((px - p->pad_left) % dw + dw) % dw;
                q.out_w = (p->out_w - px + dw - 1) / dw;
                q.in_w = (p->in_w - c0 + dw - 1) / dw;
                q.pad_left = (c0 - px + p->pad_left) / dw;
                rlx_dwp_run(&q, img + (r0 * p->in_w + c0) * ch, o + (py * p->out_w + px) * oc, scratch, s1, s2, NULL,
                            hex, st);
            }
        }
    }
#if defined(RLX_DWP_ASM)
    if (post) {
        rlx_dwp_clamp_out(out, p->batches * p->out_h * p->out_w * oc, p->act_min, p->act_max);
    }
#else
    (void)post;
#endif
#else
    rlx_depthwise_conv_ring_s8(p, in, out, scratch);
#endif
}
