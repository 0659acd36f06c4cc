"""JAX-shaped transforms over the IR: graph in, graph out.

Each differentiable op declares its rules next to its other decorators
(``@op.jvp``, ``@op.vjp``, optionally ``@op.batch``; see
:meth:`rlx_edge.ir.ops.OpDef.vjp` for the signature). A rule builds graph
nodes with an :class:`~rlx_edge.ir.emitter.Emitter`, so every transform
returns an ordinary MIR graph: it verifies, saves as ``.rlx`` and runs on the
reference, the JAX target and any target with rules for its ops.

- :func:`grad` / :func:`value_and_grad`: reverse mode from a scalar loss
  output; params named in ``wrt`` become graph inputs of the same name, so
  the weights are fed each step (a training loop does not rebuild the graph);
- :func:`vjp`: reverse mode with cotangent inputs ``ct/<output>``;
- :func:`jvp`: forward mode with tangent inputs ``tangent/<name>``;
- :func:`hvp`: Hessian-vector products, forward over reverse;
- :func:`vmap`: a batch axis added to chosen inputs and to every output.

Gradients pass through float values only: a path through an integer or
quantized value, or through an op declared ``differentiable=False``
(argmax, quantize, dequantize, requantize), is an ``OpError`` naming the
node; floor, ceil and round have zero derivatives, as in JAX. HIR blocks are
lowered to MIR first.

Example: one SGD step of a two-layer MLP on the JAX target::

    import numpy as np
    from rlx_edge import Graph
    from rlx_edge.autodiff import value_and_grad
    from rlx_edge.targets.jax import compile_jax

    g = Graph("mlp")
    x = g.input("x", (8, 4), "f32")
    t = g.input("t", (8, 3), "f32")
    w1 = g.param("w1", np.random.randn(16, 4).astype(np.float32))
    w2 = g.param("w2", np.random.randn(3, 16).astype(np.float32))
    h = g.fully_connected(x, w1, activation="relu")
    logp = g.log_softmax(g.fully_connected(h, w2))
    g.output(g.neg(g.mean(g.mul(logp, t), axes=(0, 1)), name="loss"))

    vg = value_and_grad(g, loss="loss", wrt=["w1", "w2"])
    # inputs: x, t, w1, w2; outputs: loss, grad/w1, grad/w2
    step = compile_jax(vg, batch="exact")
    out = step({"x": xs, "t": ts, "w1": w1_now, "w2": w2_now})
    w1_now = w1_now - 0.1 * out["grad/w1"]
"""

from rlx_edge.autodiff._transforms import grad, hvp, jvp, value_and_grad, vjp
from rlx_edge.autodiff._vmap import vmap

__all__ = ["grad", "hvp", "jvp", "value_and_grad", "vjp", "vmap"]
