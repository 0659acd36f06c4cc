/* RP2040 second-stage boot ("boot2") for the Raspberry Pi Pico, written for
 * rlx-edge. UNTESTED ON HARDWARE: see README.md.
 *
 * The boot ROM copies the first 256 bytes of flash to SRAM (0x20041F00),
 * checks the CRC-32 in their last 4 bytes (build.py appends it: polynomial
 * 0x04C11DB7, no reflection, initial value 0xFFFFFFFF, no final XOR) and
 * branches to the first byte. This stage then
 *   1. sets up the XIP SSI for plain serial reads (command 03h, 24-bit
 *      address, one data line): every SPI NOR flash answers 03h, so this needs
 *      nothing specific to the W25Q080 fitted on the Pico, at the price of
 *      speed (no quad I/O; the 16 KB XIP cache hides part of it);
 *   2. points VTOR at the vector table that follows it (0x10000100), loads
 *      the stack pointer and jumps to the reset vector, as a cold start would.
 * It never returns to its caller: nothing calls it again after boot.
 *
 * The code runs from the SRAM copy, so it is position-independent: only
 * PC-relative literal loads and absolute register addresses. */
    .syntax unified
    .cpu cortex-m0plus
    .thumb

    .equ SSI_BASE, 0x18000000
    .equ SSI_CTRLR0, 0x00
    .equ SSI_CTRLR1, 0x04
    .equ SSI_SSIENR, 0x08
    .equ SSI_BAUDR, 0x14
    .equ SSI_SPI_CTRLR0, 0xF4
    .equ PPB_VTOR, 0xE000ED08
    .equ IMAGE_BASE, 0x10000100

    /* CTRLR0: TMOD = EEPROM read (3, bits 9:8: send the command and address,
     * then receive), DFS_32 = 31 (32-bit frames, bits 20:16), SPI_FRF = 0
     * (standard one-line SPI, bits 22:21). */
    .equ CTRLR0_XIP, (3 << 8) | (31 << 16)
    /* SPI_CTRLR0: XIP_CMD = 03h (bits 31:24), INST_L = 8 bits (2, bits 9:8),
     * ADDR_L = 24 bits in units of 4 (6, bits 5:2), WAIT_CYCLES = 0,
     * TRANS_TYPE = 0 (command and address on one line too). */
    .equ SPI_CTRLR0_XIP, (0x03 << 24) | (2 << 8) | (6 << 2)
    /* SCK = clk_sys / 4: at most 33 MHz even at the 133 MHz top speed, within
     * the 50 MHz that 03h reads allow on common SPI NOR parts. */
    .equ SCK_DIVIDER, 4

    .section .boot2, "ax"
    .global rlx_boot2
    .type rlx_boot2, %function
    .thumb_func
rlx_boot2:
    ldr r3, =SSI_BASE
    movs r0, #0
    str r0, [r3, #SSI_SSIENR]      /* the SSI is configurable only while disabled */
    movs r0, #SCK_DIVIDER
    str r0, [r3, #SSI_BAUDR]
    ldr r0, =CTRLR0_XIP
    str r0, [r3, #SSI_CTRLR0]
    movs r0, #0
    str r0, [r3, #SSI_CTRLR1]      /* NDF = 0: one 32-bit frame per XIP access */
    ldr r0, =SPI_CTRLR0_XIP
    ldr r1, =SSI_BASE + SSI_SPI_CTRLR0
    str r0, [r1]                   /* offset 0xF4 is beyond a Thumb-1 store's reach */
    movs r0, #1
    str r0, [r3, #SSI_SSIENR]      /* flash now reads at 0x10000000 */

    ldr r0, =IMAGE_BASE
    ldr r1, =PPB_VTOR
    str r0, [r1]
    ldm r0, {r0, r1}               /* initial MSP, reset vector */
    msr msp, r0
    bx r1
    .size rlx_boot2, . - rlx_boot2
    .ltorg
