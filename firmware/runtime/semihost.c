#include "semihost.h"

#include <stdint.h>

#define SYS_WRITE0 0x04u
#define SYS_EXIT_EXTENDED 0x20u
#define ADP_STOPPED_APPLICATION_EXIT 0x20026u

static uintptr_t semihost_call(uint32_t op, const void *arg)
{
    register uint32_t r0 __asm__("r0") = op;
    register const void *r1 __asm__("r1") = arg;
    __asm__ volatile("bkpt 0xAB" : "+r"(r0) : "r"(r1) : "memory");
    return r0;
}

void semihost_write0(const char *s) { (void)semihost_call(SYS_WRITE0, s); }

void semihost_exit(int status)
{
    /* SYS_EXIT_EXTENDED rather than newlib's SYS_EXIT: with SYS_EXIT QEMU
     * always exits 0 and the firmware's status would be lost. */
    const uint32_t block[2] = {ADP_STOPPED_APPLICATION_EXIT, (uint32_t)status};
    (void)semihost_call(SYS_EXIT_EXTENDED, block);
    for (;;) {
    }
}
