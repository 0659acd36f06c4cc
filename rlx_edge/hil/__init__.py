"""Host side of hardware-in-the-loop: the framed protocol, transports, QEMU sessions, flashers, campaigns.

- :mod:`rlx_edge.hil.protocol`: frames (length-prefixed, CRC-8 header check,
  CRC-32), the streaming decoder that resynchronizes after garbage, payloads.
- :mod:`rlx_edge.hil.transport`: any pyserial URL (``/dev/ttyACM0``,
  ``socket://``, ``rfc2217://``, ``loop://``).
- :mod:`rlx_edge.hil.client`: :class:`~rlx_edge.hil.client.HilClient`, the
  commands with timeouts, bounded retries and end-to-end checks.
- :mod:`rlx_edge.hil.qemu`: the protocol over a firmware under QEMU
  (:mod:`rlx_edge.targets.cortexm.qemu` boots it); instructions per inference.
- :mod:`rlx_edge.hil.flash`: pyOCD/OpenOCD flashing of the boards of
  :mod:`rlx_edge.boards`.
- :mod:`rlx_edge.hil.campaign`: :func:`~rlx_edge.hil.campaign.run_campaign`.
- :mod:`rlx_edge.hil.faults`: a fault-injecting TCP proxy for testing the link.
"""
