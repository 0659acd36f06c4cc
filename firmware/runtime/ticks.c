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
static uint64_t last_ticks; /* rlx_ticks runs in thread mode only */

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
     * high and low parts belong together. */
    uint32_t hi, lo, pending;
    do {
        hi = wraps;
        lo = SYST_CVR;
        pending = SCB_ICSR & ICSR_PENDSTSET;
    } while (hi != wraps);
    /* A wrap whose interrupt has not run yet leaves SysTick pending; when the
     * counter was read after it (it is then high, just reloaded), count it. */
    if (pending && lo > SYST_RELOAD / 2u) hi += 1u;
    uint64_t t = ((uint64_t)hi << 24) + (SYST_RELOAD - lo);
    /* Under load a run once measured end - start < 0 (near 2^64 as a u64): a
     * reading made after the reload but before the interrupt shows as pending
     * is 2^24 short. Time never goes back, so a reading below the last one is
     * such a reading. */
    if (t < last_ticks) t += (uint64_t)1u << 24;
    last_ticks = t;
    return t;
}
