/* The few Cortex-M system registers the runtime touches. Written out here
 * rather than taken from CMSIS so the firmware builds with nothing but
 * arm-none-eabi-gcc and newlib. */
#ifndef RLX_CM_H
#define RLX_CM_H

#include <stdint.h>

#define RLX_REG32(addr) (*(volatile uint32_t *)(addr))

#define SCB_ICSR RLX_REG32(0xE000ED04u)
#define ICSR_PENDSTSET (1u << 26)
#define SCB_VTOR RLX_REG32(0xE000ED08u)
#define SCB_CPACR RLX_REG32(0xE000ED88u)
#define SYST_CSR RLX_REG32(0xE000E010u)
#define SYST_RVR RLX_REG32(0xE000E014u)
#define SYST_CVR RLX_REG32(0xE000E018u)

static inline void rlx_dsb(void) { __asm__ volatile("dsb 0xF" ::: "memory"); }
static inline void rlx_isb(void) { __asm__ volatile("isb 0xF" ::: "memory"); }
static inline void rlx_irq_disable(void) { __asm__ volatile("cpsid i" ::: "memory"); }
static inline void rlx_irq_enable(void) { __asm__ volatile("cpsie i" ::: "memory"); }

#endif
