"""A 2-layer, 4-head transformer classifier for the bundled 8x8 digits, from training to QEMU.

    python examples/tiny_transformer.py [--mask causal|none] [--epochs N] [--json] [--skip-qemu]

Each image is a sequence of 8 tokens (its rows) of 8 features. The network
(``rlx_edge.models.tiny_transformer``, which the demo's ``transformer`` stage
also runs) is built with the HIR blocks (``linear``, ``multi_head_attention``,
``residual_layer_norm``) and trained here: ``rlx_edge.autodiff`` differentiates
the same graph the device runs, and the JAX target runs the gradient graph
(Adam, seeded, float32). The trained graph is then calibrated, quantized to
int8 (``rlx_edge.quant``; layer norms get integer semantics of their own,
docs/ARCHITECTURE.md) and checked three ways:

- accuracy on the held-out digits, float and int8 (the reference interpreter);
- the JAX target bit-exact with the reference on 500 inputs;
- the Cortex-M4 build bit-exact under QEMU on 20 inputs, with its instruction
  count per MAC, flash, RAM and arena from the same firmware.

Run time on two cores: about a minute of training, then a firmware build and
a QEMU boot. ``--json`` prints one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile

import numpy as np

from rlx_edge import Graph
from rlx_edge.models.digits import digits_data
from rlx_edge.models.tiny_transformer import as_input, jax_bit_exact, tokens, train_and_quantize
from rlx_edge.targets.reference import RunPlan


def run_example(
    mask: str = "causal",
    epochs: int = 40,
    *,
    calibration: int = 200,
    qemu_inputs: int = 20,
    jax_inputs: int = 500,
    qemu: bool = True,
    log=print,
) -> dict:
    """Train, quantize and check; every figure in one dict (``qemu_bit_exact`` only when ``qemu``)."""
    _, qgraph, result = train_and_quantize(mask, epochs, calibration=calibration, log=log)
    log(
        f"accuracy on the held-out digits: float {result['float_accuracy']:.2f} %, int8 {result['int8_accuracy']:.2f} %"
    )
    # JAX: the held-out digits, then training digits, in one batch
    jax_x = np.concatenate([tokens(digits_data("test")[0]), tokens(digits_data("train")[0])])[:jax_inputs]
    result["jax_inputs"] = len(jax_x)
    result["jax_bit_exact"] = jax_bit_exact(qgraph, jax_x)
    log(f"jax: {'bit-exact' if result['jax_bit_exact'] else 'MISMATCH'} on {len(jax_x)} inputs")

    if qemu:
        result.update(run_qemu(qgraph, tokens(digits_data("test")[0])[:qemu_inputs], RunPlan(qgraph), log))
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mask", choices=("causal", "none"), default="causal", help="attention mask (default causal)")
    ap.add_argument("--epochs", type=int, default=40, help="training epochs (default 40)")
    ap.add_argument("--calibration", type=int, default=200, help="training images used to calibrate (default 200)")
    ap.add_argument("--qemu-inputs", type=int, default=20, help="held-out inputs run on QEMU M4 (default 20)")
    ap.add_argument("--jax-inputs", type=int, default=500, help="inputs run on the JAX target (default 500)")
    ap.add_argument("--skip-qemu", action="store_true", help="stop before the firmware build")
    ap.add_argument("--json", action="store_true", help="print one JSON object with every figure")
    args = ap.parse_args(argv)

    def log(msg: str) -> None:
        print(msg, file=sys.stderr if args.json else sys.stdout, flush=True)

    result = run_example(
        args.mask,
        args.epochs,
        calibration=args.calibration,
        qemu_inputs=args.qemu_inputs,
        jax_inputs=args.jax_inputs,
        qemu=not args.skip_qemu,
        log=log,
    )
    if args.json:
        print(json.dumps(result, sort_keys=True))
    return 0 if result["jax_bit_exact"] and result.get("qemu_bit_exact", True) else 1


def run_qemu(qgraph: Graph, xs: np.ndarray, ref: RunPlan, log) -> dict:
    """The int8 graph on QEMU's Cortex-M4 board: bit-exact on every input, counted on the first."""
    from rlx_edge.hil.profile import profile
    from rlx_edge.runners import prepare

    with tempfile.TemporaryDirectory(prefix="rlx-tiny-transformer-") as tmp:
        run = prepare("qemu-m4", qgraph, tmp)
        exact = 0
        for x in xs:
            feed = {"tokens": as_input(qgraph, x)}
            exact += bool(np.array_equal(run(feed)["logits"], ref(feed)["logits"]))
        prof = profile(qgraph, "m4", {"tokens": as_input(qgraph, xs[0])}, workdir=tmp)
    out = {
        "qemu_inputs": len(xs),
        "qemu_bit_exact": exact == len(xs) and prof.bit_exact,
        "macs": prof.macs,
        "instructions": prof.instructions,
        "instr_per_mac": round(prof.instructions / prof.macs, 3),
        "flash_bytes": prof.flash_bytes,
        "ram_bytes": prof.ram_bytes,
        "arena_bytes": prof.arena_bytes,
    }
    log(
        f"qemu-m4: bit-exact on {exact}/{len(xs)} inputs; {out['instructions']} instructions "
        f"({out['instr_per_mac']}/MAC), flash {out['flash_bytes']} B, RAM {out['ram_bytes']} B, "
        f"arena {out['arena_bytes']} B"
    )
    return out


if __name__ == "__main__":
    sys.exit(main())
