/* A 64-bit cycle counter from SysTick.
 *
 * SysTick exists on every Cortex-M (DWT->CYCCNT does not on M0/M0+, and reads
 * 0 under QEMU), and with CLKSOURCE = processor clock it counts core cycles on
 * real hardware. Under QEMU it follows the virtual clock: host time normally,
 * instruction count with -icount. The interrupt only extends the 24-bit
 * counter, every 2^24 cycles.
 */
#include "rlx_ticks.h"

#include "rlx_cm.h"

#define SYST_RELOAD 0x00FFFFFFu

static volatile uint32_t wraps;

void SysTick_Handler(void) { wraps = wraps + 1; }

void rlx_ticks_init(void)
{
    SYST_CSR = 0;
    SYST_RVR = SYST_RELOAD;
    SYST_CVR = 0;
    /* ENABLE | TICKINT | CLKSOURCE(processor clock) */
    SYST_CSR = 0x7u;
}

uint64_t rlx_ticks(void)
{
    /* Re-read when the interrupt ran between the two reads of `wraps`, so the
     * high and low parts belong together. (A wrap whose interrupt is still
     * pending can make one reading 2^24 short; the runtime only reads ticks
     * with interrupts enabled, where that window is a few instructions.) */
    uint32_t hi, lo;
    do {
        hi = wraps;
        lo = SYST_CVR;
    } while (hi != wraps);
    return ((uint64_t)hi << 24) + (SYST_RELOAD - lo);
}
