"""The JAX target: MIR graphs as jitted JAX functions on CPU, GPU or TPU.

Float graphs follow the ops' float references; quantized graphs (int8
MLPerf Tiny models imported with ``load_tflite``) follow the integer
reference bit for bit, batched and optionally sharded over several devices::

    from rlx_edge.targets.jax import compile_jax
    model = compile_jax(graph, device="gpu")
    outputs = model({"input_1": batch})          # batch: [B, 49, 10, 1] int8

The rule table (``RULES``) imports without jax, so legalization can ask for
it anywhere; compiling needs jax (``pip install 'rlx-edge[jax]'``).
"""

from rlx_edge.targets.jax import (  # noqa: F401  (registration of the rules)
    rules_compare,
    rules_control,
    rules_conv,
    rules_detection,
    rules_elementwise,
    rules_layout,
    rules_pool,
    rules_quant,
    rules_recurrent,
    rules_reduce,
)
from rlx_edge.targets.jax._table import INT_MATMUL_MODES, RULES, LowerOptions
from rlx_edge.targets.jax.evaluate import eval_dataset, run_jax
from rlx_edge.targets.jax.lower import JaxModel, compile_jax, lower_graph, resolve_devices

__all__ = [
    "INT_MATMUL_MODES",
    "RULES",
    "JaxModel",
    "LowerOptions",
    "compile_jax",
    "eval_dataset",
    "lower_graph",
    "resolve_devices",
    "run_jax",
]
