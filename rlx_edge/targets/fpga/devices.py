"""The FPGA parts ``rlx-edge fpga --device`` places and routes for: one table.

Each row names the Yosys flow (``synth.FAMILIES`` key), the nextpnr build and
its device/package arguments, and the capacity of the part, which the fit check
before place and route compares with Yosys' cell counts (nextpnr's own report
gives the same numbers for the routed design).
"""

from __future__ import annotations

from dataclasses import dataclass

from rlx_edge.errors import RlxError


@dataclass(frozen=True)
class Device:
    name: str
    family: str  # Yosys flow and nextpnr architecture: "ecp5" or "ice40"
    part: str  # the vendor's part number, for reports
    nextpnr_args: tuple[str, ...]
    lut: int  # LUT4s (iCE40: logic cells, each one LUT4 + one FF)
    ff: int
    bram: int  # ECP5 DP16KD (18 Kb), iCE40 SB_RAM40_4K (4 Kb)
    dsp: int  # ECP5 MULT18X18D, iCE40 SB_MAC16
    io: int  # user I/O pins of the package (nextpnr's report counts the die's I/O sites: 365 on the 85K)
    default_mhz: float  # nextpnr's timing target when no clock is asked for
    bram_kbit: int


# nextpnr-ecp5's default router (router1) ripped up and rerouted AD at PE x SIMD 2 on the 85K for 20
# minutes without converging (13,000 arcs left, 9% of the LUTs used); router2, the negotiated-congestion
# router, brought the same netlist's overuse down 6x in 6 iterations of 30 s
_ROUTER2 = ("--router", "router2")

# Capacities from the Lattice data sheets (ECP5 FPGA-DS-02012, iCE40 UltraPlus FPGA-DS-02008), checked
# against nextpnr 0.11's utilization report. Packages: the ones on the common boards (ULX3S: CABGA381,
# iCEBreaker: SG48).
DEVICES: dict[str, Device] = {
    d.name: d
    for d in (
        Device("ecp5-25k", "ecp5", "LFE5U-25F-6BG381C", ("--25k", "--package", "CABGA381", *_ROUTER2),
               24288, 24288, 56, 28, 197, 100.0, 18),
        Device("ecp5-85k", "ecp5", "LFE5U-85F-6BG381C", ("--85k", "--package", "CABGA381", *_ROUTER2),
               83640, 83640, 208, 156, 205, 100.0, 18),
        Device("up5k", "ice40", "iCE40UP5K-SG48", ("--up5k", "--package", "sg48"),
               5280, 5280, 30, 8, 39, 24.0, 4),
    )
}  # fmt: skip


def device(name: str) -> Device:
    try:
        return DEVICES[name]
    except KeyError:
        raise RlxError(f"unknown FPGA device {name!r}; use {', '.join(DEVICES)}") from None
