"""Host side of hardware-in-the-loop: the framed protocol, transports, QEMU, flashers, campaigns.

- :mod:`rlx_edge.hil.protocol`: frames (length-prefixed, CRC-8 header check,
  CRC-32), the streaming decoder that resynchronizes after garbage, payloads.
- :mod:`rlx_edge.hil.transport`: any pyserial URL (``/dev/ttyACM0``,
  ``socket://``, ``rfc2217://``, ``loop://``).
- :mod:`rlx_edge.hil.client`: :class:`~rlx_edge.hil.client.HilClient`, the
  commands with timeouts, bounded retries and end-to-end checks.
- :mod:`rlx_edge.hil.qemu`: boot firmware under QEMU with its UART on a
  loopback port; instruction counting.
- :mod:`rlx_edge.hil.boards`, :mod:`rlx_edge.hil.flash`: board definitions,
  pyOCD/OpenOCD flashing.
- :mod:`rlx_edge.hil.campaign`: :func:`~rlx_edge.hil.campaign.run_campaign`.
- :mod:`rlx_edge.hil.faults`: a fault-injecting TCP proxy for testing the link.
"""
