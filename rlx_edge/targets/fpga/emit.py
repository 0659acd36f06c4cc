"""Verilog out of a design (amaranth.back.verilog) and a documented SystemVerilog wrapper."""

from __future__ import annotations

from pathlib import Path

from amaranth.back import verilog

from rlx_edge.targets.fpga.arith import DSP_SIM_MODEL, FF_SIM_MODEL, dsp_primitives
from rlx_edge.targets.fpga.components import hex_lines
from rlx_edge.targets.fpga.design import REGISTER_BUFFER_DEPTH, FpgaDesign

_RAM = """
// {top}_ram: one activation buffer of {top}. Synchronous read (a read and a
// write of the same word in one cycle return the old word), one write port
// with a write enable per int8 lane. Written by rlx-edge. Block RAM even when
// small: distributed (LUT) RAM reads asynchronously, so its read, the banks'
// multiplexer and the layers' address multiplexer would share one cycle (12.8
// ns on ECP5-85K); a block RAM registers the address at its pins.
module {top}_ram #(
    parameter WIDTH = 8,
    parameter LANES = 1,
    parameter DEPTH = 1,
    parameter ABITS = 1
) (
    input wire clk,
    input wire [ABITS-1:0] rd_addr,
    input wire rd_en,
    output reg [WIDTH-1:0] rd_data,
    input wire [ABITS-1:0] wr_addr,
    input wire [LANES-1:0] wr_en,
    input wire [WIDTH-1:0] wr_data
);
    (* ram_style = "block" *) reg [WIDTH-1:0] mem [0:DEPTH-1];
    integer k;
`ifndef SYNTHESIS
    integer i;
    initial begin
        rd_data = 0;
        for (i = 0; i < DEPTH; i = i + 1) mem[i] = 0;
    end
`endif
    always @(posedge clk) begin
        for (k = 0; k < LANES; k = k + 1)
            if (wr_en[k]) mem[wr_addr][8*k +: 8] <= wr_data[8*k +: 8];
        if (rd_en) rd_data <= mem[rd_addr];
    end
endmodule
"""

_ROM = """
// {top}_rom: a constant table of {top} (weights, biases, multipliers, exp
// table), read from the $readmemh file FILE (one word per line, hex) that
// rlx-edge writes next to this Verilog. Synchronous read.
module {top}_rom #(
    parameter WIDTH = 8,
    parameter DEPTH = 1,
    parameter ABITS = 1,
    parameter FILE = ""
) (
    input wire clk,
    input wire [ABITS-1:0] addr,
    output reg [WIDTH-1:0] data
);
    reg [WIDTH-1:0] mem [0:DEPTH-1];
    // (tools that elaborate the module alone, with the default FILE, skip the load)
    generate
        if (FILE != "") begin : load
            initial $readmemh(FILE, mem);
        end
    endgenerate
`ifndef SYNTHESIS
    initial data = 0;
`endif
    always @(posedge clk) data <= mem[addr];
endmodule
"""


def to_verilog(design: FpgaDesign) -> str:
    """The design as one Verilog file (top module ``design.top_name``, plus ``clk`` and ``rst``).

    The file also defines the buffer RAM and ROM modules the top level
    instantiates; the ROM contents go to ``$readmemh`` files that
    :func:`rom_files` returns after this call (:func:`write` writes both).
    Amaranth's output is deterministic for a given design: no timestamps, and
    names follow the elaboration order, so equal inputs give equal bytes.
    """
    with dsp_primitives(design.dsp):
        text = verilog.convert(design, name=design.top_name, emit_src=False)
    if design.dsp is not None:
        text += DSP_SIM_MODEL + FF_SIM_MODEL
    text += _RAM.format(top=design.top_name)
    if any(b.depth <= REGISTER_BUFFER_DEPTH for b in design.buffers):
        # a shallow buffer in flip-flops: a block RAM cannot hold every shape (Yosys found no mapping for
        # a 16-lane word 1 deep on ECP5), and a word or a few need no RAM; its read is still registered
        ram = _RAM.format(top=design.top_name)
        text += ram.replace(f"module {design.top_name}_ram #(", f"module {design.top_name}_ram_regs #(").replace(
            '(* ram_style = "block" *)', '(* ram_style = "logic" *)'
        )
    if design.rom_sink.roms:
        text += _ROM.format(top=design.top_name)
    return text


def rom_files(design: FpgaDesign) -> dict[str, str]:
    """``{file name: $readmemh text}`` of every ROM of the design (after :func:`to_verilog`)."""
    return {name: hex_lines(width, words) for name, width, words in design.rom_sink.roms}


def _stream_ports(lines: list[str], side: str, k: int, s: dict, direction: str) -> list[str]:
    """Documents stream ``k`` (side ``s``: one the wrapper takes, ``m``: one it sends) in ``lines``;
    returns its data and valid ports, which point ``direction`` (``"input "`` or ``"output"``)."""
    w = 8 * s["lanes"]
    what = direction.strip()
    lines.append(
        f"//   {side}{k}_axis_*: {what} {s['value']!r} shape {s['shape']}, {s['lanes']} int8 lanes x {s['beats']} beats"
    )
    host = s.get("host")
    if host:  # a float model interface: the driver converts, as the model's quantize/dequantize node does
        lines.append(
            f"//     the host computes it: {host['op']} of {host['value']!r} ({host['dtype']}), scale {host['scale']}, "
            f"zero point {host['zero_point']} (TFLite's float32 arithmetic)"
        )
    return [
        f"    {direction} wire [{w - 1}:0] {side}{k}_axis_tdata,   // {s['lanes']} int8 elements, lane 0 in [7:0]",
        f"    {direction} wire {side}{k}_axis_tvalid,           // beat offered",
    ]


def wrapper_sv(design: FpgaDesign) -> str:
    """An AXI-Stream-style SystemVerilog wrapper with every port documented."""
    info = design.stream_info()
    name = design.top_name
    lines = [
        f"// {name}_axis: AXI-Stream wrapper of the rlx-edge generated datapath `{name}`.",
        "//",
        "// Generated by rlx-edge (targets/fpga). Clocking: one clock `aclk`, synchronous",
        "// active-low reset `aresetn`. Every stream moves one beat on a rising edge of",
        "// `aclk` where TVALID and TREADY are both high. Beats carry int8 elements of a",
        "// tensor in NHWC (row-major) order, element 0 in bits [7:0].",
        "//",
        "// The datapath is layer-sequential: it accepts a whole inference on every",
        "// s_axis stream, computes, then sends every m_axis stream (TLAST on the last",
        "// beat of each) before accepting the next inference.",
        "//",
        "// Ports",
    ]
    ports = ["    input  wire aclk,      // clock", "    input  wire aresetn,   // synchronous reset, active low"]
    for k, s in enumerate(info["inputs"]):
        ports += _stream_ports(lines, "s", k, s, "input ")
        ports.append(f"    output wire s{k}_axis_tready,           // datapath accepts (only while loading)")
    for k, s in enumerate(info["outputs"]):
        ports += _stream_ports(lines, "m", k, s, "output")
        ports += [
            f"    input  wire m{k}_axis_tready,           // sink accepts",
            f"    output wire m{k}_axis_tlast,            // last beat of this inference",
        ]
    lines.append(
        f"//   status_phase: 0 loading, 1..{len(design.layers)} layer i-1 running, {len(design.layers) + 1} draining"
    )
    ports.append("    output wire [7:0] status_phase          // which step of the inference runs")
    lines.append("")
    lines.append(f"module {name}_axis (")
    lines.append(
        ",\n".join(
            p.split("//")[0].rstrip().rstrip(",") + ("," if i < len(ports) - 1 else "") + "  //" + p.split("//", 1)[1]
            for i, p in enumerate(ports)
        )
    )
    lines.append(");")
    conns = ["        .clk(aclk)", "        .rst(~aresetn)"]
    for k, _ in enumerate(info["inputs"]):
        conns += [
            f"        .in{k}_data(s{k}_axis_tdata)",
            f"        .in{k}_valid(s{k}_axis_tvalid)",
            f"        .in{k}_ready(s{k}_axis_tready)",
        ]
    for k, _ in enumerate(info["outputs"]):
        conns += [
            f"        .out{k}_data(m{k}_axis_tdata)",
            f"        .out{k}_valid(m{k}_axis_tvalid)",
            f"        .out{k}_ready(m{k}_axis_tready)",
            f"        .out{k}_last(m{k}_axis_tlast)",
        ]
    conns.append("        .phase(status_phase)")
    lines.append(f"    {name} core (")
    lines.append(",\n".join(conns))
    lines.append("    );")
    lines.append("endmodule")
    return "\n".join(lines) + "\n"


def write(design: FpgaDesign, out_dir: str | Path) -> dict[str, Path | list[Path]]:
    """Write ``<top>.v``, its ROM files and ``<top>_axis.sv`` into ``out_dir``; returns their paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    v = out / f"{design.top_name}.v"
    sv = out / f"{design.top_name}_axis.sv"
    v.write_text(to_verilog(design))
    roms = []
    for name, text in rom_files(design).items():
        (out / name).write_text(text)
        roms.append(out / name)
    sv.write_text(wrapper_sv(design))
    return {"verilog": v, "wrapper": sv, "roms": roms}
