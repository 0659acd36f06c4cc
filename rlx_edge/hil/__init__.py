"""Host side of hardware-in-the-loop: running firmware under QEMU and on boards."""
