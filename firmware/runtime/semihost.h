/* ARM semihosting, used by QEMU boards only (a real board without a debugger
 * attached would fault on the BKPT). */
#ifndef RLX_SEMIHOST_H
#define RLX_SEMIHOST_H

__attribute__((noreturn)) void semihost_exit(int status);
void semihost_write0(const char *s);

#endif
