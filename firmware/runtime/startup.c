/* Vector table and reset handler shared by every board.
 *
 * The linker script (runtime/sections.ld) places .vectors first in the code
 * region and defines the symbols used below. The reset handler also sets VTOR
 * and MSP itself, so the same image starts correctly when a debugger loads it
 * into RAM and jumps to the entry point without a hardware reset (a board
 * definition with ram_image relies on this).
 */
#include <stdint.h>
#include <string.h>

#include "rlx_board.h"
#include "rlx_cm.h"

extern uint32_t __data_load__[], __data_start__[], __data_end__[];
extern uint32_t __bss_start__[], __bss_end__[];
extern uint32_t __stack_top__[];
extern const uint32_t __vectors_start__[];

int main(void);
void Reset_Handler(void);
void Default_Handler(void);
void SysTick_Handler(void);

/* Faults end the run with a recognisable status instead of spinning, so a
 * crashing model fails a QEMU test quickly rather than timing it out. */
void Default_Handler(void)
{
    uint32_t ipsr;
    __asm__ volatile("mrs %0, ipsr" : "=r"(ipsr));
    static const char msg[] = "E fault\n";
    for (const char *p = msg; *p; ++p) board_putc(*p);
    board_exit(128 + (int)(ipsr & 0x1FFu));
}

void NMI_Handler(void) __attribute__((weak, alias("Default_Handler")));
void HardFault_Handler(void) __attribute__((weak, alias("Default_Handler")));
void MemManage_Handler(void) __attribute__((weak, alias("Default_Handler")));
void BusFault_Handler(void) __attribute__((weak, alias("Default_Handler")));
void UsageFault_Handler(void) __attribute__((weak, alias("Default_Handler")));
void SecureFault_Handler(void) __attribute__((weak, alias("Default_Handler")));
void SVC_Handler(void) __attribute__((weak, alias("Default_Handler")));
void DebugMon_Handler(void) __attribute__((weak, alias("Default_Handler")));
void PendSV_Handler(void) __attribute__((weak, alias("Default_Handler")));

/* 16 system exceptions plus 16 external interrupts: enough for every board
 * here, since the runtime enables no peripheral interrupt. A stray one lands
 * in Default_Handler and is reported. */
typedef void (*vector_t)(void);
__attribute__((section(".vectors"), used)) const vector_t rlx_vectors[32] = {
    (vector_t)(uintptr_t)__stack_top__,
    Reset_Handler,
    NMI_Handler,
    HardFault_Handler,
    MemManage_Handler,
    BusFault_Handler,
    UsageFault_Handler,
    SecureFault_Handler,
    0,
    0,
    0,
    SVC_Handler,
    DebugMon_Handler,
    0,
    PendSV_Handler,
    SysTick_Handler,
    [16 ... 31] = Default_Handler,
};

__attribute__((noreturn, used)) void Reset_Handler(void)
{
    /* The FPU must be on before any compiler-generated FP instruction; nothing
     * before this point in the function uses one. */
#if defined(__ARM_FP)
    SCB_CPACR |= 0xFu << 20;
    rlx_dsb();
    rlx_isb();
#endif
    __asm__ volatile("msr msp, %0" ::"r"(__stack_top__));
    SCB_VTOR = (uint32_t)(uintptr_t)__vectors_start__;

    /* Word loops rather than memcpy/memset: newlib-nano's versions are byte
     * loops, and these sections are word aligned by the linker script. */
    uint32_t *dst = __data_start__;
    const uint32_t *src = __data_load__;
    if (src != dst) {
        while (dst < __data_end__) *dst++ = *src++;
    }
    for (dst = __bss_start__; dst < __bss_end__;) *dst++ = 0;

    board_exit(main());
}
