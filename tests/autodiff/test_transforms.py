"""Every differentiable op's rules against JAX's own transforms of the lowered float function.

For each op of the registry, float draws of its sampler (in float64) become a
one-node graph and, for grad and hvp, that graph plus a scalar loss
(sum of each output times a fixed random tensor). ``grad``, ``vjp``, ``jvp``,
``hvp`` and ``vmap`` of it, run on the numpy reference after a ``.rlx`` round
trip, must match ``jax.grad`` / ``jax.vjp`` / ``jax.jvp`` / forward-over-reverse
/ ``jax.vmap`` of the JAX target's lowering of the same graph, and the
gradient must match central finite differences of the reference.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import numpy as np
import pytest

from rlx_edge.autodiff import grad, hvp, jvp, value_and_grad, vjp, vmap
from rlx_edge.errors import OpError
from rlx_edge.ir.graph import Graph
from rlx_edge.ir.ops import REGISTRY
from rlx_edge.ir.serialize import dumps, loads
from rlx_edge.ir.verify import verify
from rlx_edge.targets.jax import lower_graph
from rlx_edge.targets.reference import run

# Rules whose derivative is an estimator (fake_quant's straight-through) are not the
# derivative of the reference, so JAX and finite differences cannot judge them.
DIFFERENTIABLE = sorted(n for n, op in REGISTRY.items() if op.differentiable and not op.surrogate_grad)
NOT_DIFFERENTIABLE = sorted(n for n, op in REGISTRY.items() if not op.differentiable)
SEEDS = (0,)
REL = 1e-5  # float64 on both sides: the two computations differ by rounding only (~1e-13)
FD_REL = 1e-3  # central differences with h = 1e-6 in float64: truncation error ~h^2, rounding ~1e-10


@pytest.fixture(autouse=True)
def x64():
    with jax.enable_x64(True):
        yield


@dataclass
class Case:
    op: str
    graph: Graph  # the op's node alone; its outputs are the node's outputs
    loss: Graph  # the same plus the output "loss"
    args: list[np.ndarray]  # values of graph.inputs, in order


def float_case(name: str, seed: int) -> Case | None:
    """A float draw of the op's sampler in float64, or None when 300 draws give none."""
    op = REGISTRY[name]
    rng = np.random.default_rng(seed)
    for _ in range(300):
        inputs, attrs, out_q, in_q = op.draw(rng)
        if op.typed or any(q is not None for q in [*(out_q or []), *(in_q or [])]):
            continue
        if not all(x is None or np.asarray(x).dtype.kind == "f" for x in inputs):
            continue
        if not any(x is not None and np.asarray(x).size for x in inputs):
            continue
        # off the kinks and jumps the samplers aim at (halves for round, 0 for relu): there
        # neither JAX nor finite differences define one derivative
        args = [None if x is None else _jitter(rng, np.asarray(x, np.float64)) for x in inputs]
        case = _build(name, args, attrs, rng)
        # float64 throughout (a cast to f16 would leave finite differences nothing to measure)
        if all(case.graph.types[o].dtype.value == "f64" for o in case.graph.outputs):
            return case
    return None


def _jitter(rng: np.random.Generator, x: np.ndarray) -> np.ndarray:
    return x + rng.choice([-1, 1], x.shape) * rng.uniform(0.01, 0.02, x.shape)


def _build(name: str, args: list, attrs: dict, rng: np.random.Generator) -> Case:
    names = REGISTRY[name].input_names(len(args))
    g = Graph(f"{name}_case")
    handles = [None if a is None else g.input(n, a.shape, "f64") for n, a in zip(names, args)]
    outs = g.add_node(name, handles, attrs)
    g.output(*outs)
    lg = Graph(f"{name}_loss")
    lhandles = [None if a is None else lg.input(n, a.shape, "f64") for n, a in zip(names, args)]
    total = None
    for i, o in enumerate(lg.add_node(name, lhandles, attrs)):
        shape = tuple(o.shape)
        term = lg.mul(o, lg.param(f"r{i}", rng.standard_normal(shape)))
        if shape:
            term = lg.sum(term, axes=tuple(range(len(shape))))
        total = term if total is None else lg.add(total, term)
    lg.output(lg.reshape(total, shape=(), name="loss"))
    return Case(name, g, lg, [a for a in args if a is not None])


def _through_rlx(g: Graph) -> Graph:
    verify(g)
    back = loads(dumps(g))
    verify(back)
    return back


def _run(g: Graph, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return run(_through_rlx(g), feeds)


def _fn(g: Graph):
    return lower_graph(g).fn


def assert_close(got, want, what: str, rel: float = REL) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape}, want {want.shape}"
    scale = max(float(np.max(np.abs(want))) if want.size else 0.0, 1.0)
    # relative to the largest magnitude: elementwise rtol alone fails where the exact value is 0
    np.testing.assert_allclose(got, want, rtol=rel, atol=rel * scale, err_msg=what)


def _case(name: str, seed: int) -> Case:
    case = float_case(name, seed)
    assert case is not None, f"{name}: no float draw in 300 tries; every differentiable op needs one"
    return case


def _jax_transforms(c: Case, cts: list, tangents: list, axes: list, batched: list) -> dict:
    """jax.grad, jax.vjp, jax.jvp, forward-over-reverse and jax.vmap of the lowered graphs, in one jit
    (compiling each eagerly run primitive on its own would take most of this file's time)."""
    f_loss, f_op = _fn(c.loss), _fn(c.graph)
    argnums = tuple(range(len(c.args)))

    def grad_fn(*a):
        return jax.grad(lambda *x: f_loss(*x)[0], argnums=argnums)(*a)

    def everything(args, cts, tangents, batched):
        _, pullback = jax.vjp(lambda *a: f_op(*a), *args)
        primal, tan = jax.jvp(lambda *a: f_op(*a), tuple(args), tuple(tangents))
        return {
            "grad": grad_fn(*args),
            "vjp": pullback(tuple(cts)),
            "primal": primal,
            "tangent": tan,
            "hvp": jax.jvp(grad_fn, tuple(args), tuple(tangents))[1],
            "vmap": jax.vmap(lambda *a: f_op(*a), in_axes=tuple(axes))(*batched),
        }

    return jax.jit(everything)(c.args, cts, tangents, batched)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("name", DIFFERENTIABLE)
def test_rules_match_jax(name: str, seed: int) -> None:
    c = _case(name, seed)
    wrt, outs = list(c.graph.inputs), list(c.graph.outputs)
    feeds = dict(zip(wrt, c.args))
    rng = np.random.default_rng(100 + seed)
    cts = [rng.standard_normal(tuple(c.graph.types[o].shape)) for o in outs]
    tangents = [rng.standard_normal(a.shape) for a in c.args]
    # vmap over a new axis of some inputs (the first always), at random positions
    axes = [int(rng.integers(0, a.ndim + 1)) if i == 0 or rng.random() < 0.6 else None
            for i, a in enumerate(c.args)]  # fmt: skip
    size = 2
    batched = [
        a if ax is None else np.stack([a + 0.01 * k for k in range(size)], axis=ax) for a, ax in zip(c.args, axes)
    ]
    want = _jax_transforms(c, cts, tangents, axes, batched)
    where = f"{name} seed {seed}"

    G = grad(c.loss, "loss", wrt)
    assert G.inputs == wrt and G.outputs == [f"grad/{w}" for w in wrt]
    got = _run(G, feeds)
    for w, j in zip(wrt, want["grad"]):
        assert_close(got[f"grad/{w}"], j, f"{where}: grad/{w}")

    # central finite differences of the numpy reference along a random direction
    direction = [rng.standard_normal(a.shape) for a in c.args]
    h = 1e-6
    plus = run(c.loss, {w: a + h * d for w, a, d in zip(wrt, c.args, direction)})["loss"]
    minus = run(c.loss, {w: a - h * d for w, a, d in zip(wrt, c.args, direction)})["loss"]
    fd = float(plus - minus) / (2 * h)
    dot = sum(float(np.sum(got[f"grad/{w}"] * d)) for w, d in zip(wrt, direction))
    assert abs(fd - dot) <= FD_REL * max(abs(dot), 1.0), f"{where}: finite differences {fd} vs {dot}"

    got = _run(vjp(c.graph, wrt), {**feeds, **{f"ct/{o}": ct for o, ct in zip(outs, cts)}})
    for w, j in zip(wrt, want["vjp"]):
        assert_close(got[f"grad/{w}"], j, f"{where}: vjp grad/{w}")

    got = _run(jvp(c.graph, wrt), {**feeds, **{f"tangent/{w}": t for w, t in zip(wrt, tangents)}})
    for o, p, t in zip(outs, want["primal"], want["tangent"]):
        assert_close(got[o], p, f"{where}: jvp primal {o}")
        assert_close(got[f"tangent/{o}"], t, f"{where}: jvp tangent/{o}")

    got = _run(hvp(c.loss, "loss", wrt), {**feeds, **{f"tangent/{w}": t for w, t in zip(wrt, tangents)}})
    for w, j in zip(wrt, want["hvp"]):
        assert_close(got[f"hvp/{w}"], j, f"{where}: hvp/{w}")

    got = _run(vmap(c.graph, in_axes=axes, axis_size=size), dict(zip(wrt, batched)))
    for o, j in zip(outs, want["vmap"]):
        assert_close(got[o], j, f"{where}: vmap {o} in_axes {axes}")


def test_every_differentiable_op_is_covered() -> None:
    # the parametrization above must not silently shrink: every op declares its rules
    assert {"conv2d", "depthwise_conv2d", "fully_connected", "softmax", "max_pool2d"} <= set(DIFFERENTIABLE)
    missing = [n for n in DIFFERENTIABLE if REGISTRY[n].stage == "mir" and (REGISTRY[n]._vjp is None
               or REGISTRY[n]._jvp is None)]  # fmt: skip
    assert not missing, f"differentiable ops without jvp/vjp rules: {missing}"
    assert {"argmax", "quantize", "dequantize", "requantize"} <= set(NOT_DIFFERENTIABLE)


def _quant_chain(op: str) -> Graph:
    """A float input through quantize / dequantize / requantize (each needs the others around it) to a loss."""
    from rlx_edge.ir.types import QuantParams

    g = Graph(f"{op}_chain")
    x = g.input("x", (2, 3), "f32")
    q8 = QuantParams(0.05, 0)
    q = g.quantize(x, dtype="i8", out_quant=q8, name="under_test" if op == "quantize" else None)
    if op == "requantize":
        q = g.requantize(q, dtype="i8", out_quant=QuantParams(0.1, 1), name="under_test")
    y = g.dequantize(q, dtype="f32", name="under_test" if op == "dequantize" else None)
    g.output(g.sum(y, axes=(0, 1), name="loss"))
    return g


def _chain(op: str) -> Graph:
    """A float draw of ``op`` whose outputs (cast to float where they are not) add up to the loss."""
    if op in ("quantize", "dequantize", "requantize"):
        return _quant_chain(op)
    opdef = REGISTRY[op]
    rng = np.random.default_rng(0)
    chosen = None
    for _ in range(300):
        inputs, attrs, out_q, in_q = opdef.draw(rng)
        if any(q is not None for q in [*(out_q or []), *(in_q or [])]):
            continue
        chosen = inputs, attrs  # a float draw, if not one of float inputs only (if_'s condition is bool)
        if all(x is None or np.asarray(x).dtype.kind == "f" for x in inputs):
            break
    assert chosen is not None, f"{op}: no float draw in 300"
    inputs, attrs = chosen
    g = Graph(f"{op}_chain")
    names = opdef.input_names(len(inputs))
    handles = [None if x is None else g.input(n, np.shape(x), "f32") for n, x in zip(names, inputs)]
    # an op without float inputs (logical_and) is reached from a float value through a cast only
    handles = [h if h is None or np.asarray(x).dtype.kind == "f" else g.cast(h, dtype=np.asarray(x).dtype.name,
               name=f"to_{h.name}") for h, x in zip(handles, inputs)]  # fmt: skip
    total = None
    for o in g.add_node(op, handles, attrs, name="under_test"):
        v = o if o.dtype.is_float else g.cast(o, dtype="f32")
        v = g.sum(v, axes=tuple(range(len(v.shape)))) if v.shape else v
        total = v if total is None else g.add(total, v)
    g.output(g.reshape(total, shape=(), name="loss"))
    return g


@pytest.mark.parametrize("name", NOT_DIFFERENTIABLE)
def test_non_differentiable_ops_are_clear_errors(name: str) -> None:
    g = _chain(name)
    direct = [n for n in g.inputs if any(n in node.inputs for node in g.nodes if node.name == "under_test")]
    wrt = direct[:1] or [g.inputs[0]]
    # forward mode meets the first non-differentiable node of the path, reverse mode the last
    any_op = r"^node '[^']+' \((quantize|dequantize|requantize)\): \1 is not differentiable"
    ours = rf"^node 'under_test' \({name}\): {name} is not differentiable"
    if REGISTRY[name].stage == "hir":  # a block is lowered first: the MIR op it lowered to is named
        ours = r"^node 'under_test[^']*' \((\w+)\): \1 is not differentiable"
    quant = name in ("quantize", "dequantize", "requantize")
    with pytest.raises(OpError, match=any_op if quant and name != "dequantize" else ours):
        grad(g, "loss", wrt)
    if not direct:
        # forward, the derivative is lost first at the cast that feeds the op: that node is named
        ours = r"^node 'to_[^']+' \(cast\): value 'to_[^']+' is (bool|[iu]\d+); derivatives flow"
    with pytest.raises(OpError, match=any_op if quant and name != "quantize" else ours):
        jvp(g, wrt)


def test_integer_values_stop_derivatives_with_a_clear_error() -> None:
    g = Graph("int_path")
    x = g.input("x", (3,), "f32")
    i = g.cast(x, dtype="i32", name="to_int")
    g.output(g.sum(g.cast(i, dtype="f32"), axes=(0,), name="loss"))
    with pytest.raises(OpError, match=r"^node 'to_int' \(cast\): value 'to_int' is i32; derivatives flow"):
        grad(g, "loss", ["x"])


def test_floor_has_a_zero_gradient() -> None:
    g = Graph("floor")
    x = g.input("x", (3,), "f64")
    g.output(g.sum(g.floor(x), axes=(0,), name="loss"))
    got = run(grad(g, "loss", ["x"]), {"x": np.array([0.3, 1.7, -2.2])})
    assert np.array_equal(got["grad/x"], np.zeros(3))


def test_loss_must_be_a_scalar_output() -> None:
    g = Graph("vec")
    x = g.input("x", (3,), "f32")
    g.output(g.exp(x, name="y"))
    with pytest.raises(OpError, match=r"loss 'y' has shape \[3\]; a loss must be a scalar"):
        grad(g, "y", ["x"])
    with pytest.raises(OpError, match=r"loss 'nope' is not an output"):
        grad(g, "nope", ["x"])
    with pytest.raises(OpError, match=r"wrt 'w' is not a graph input or param"):
        grad(g, "y", ["w"])


def _mlp() -> tuple[Graph, dict[str, np.ndarray]]:
    rng = np.random.default_rng(7)
    g = Graph("mlp")
    x = g.input("x", (8, 4), "f32")
    t = g.input("t", (8, 3), "f32")
    w1 = g.param("w1", (rng.standard_normal((16, 4)) * 0.5).astype(np.float32))
    b1 = g.param("b1", np.zeros(16, np.float32))
    w2 = g.param("w2", (rng.standard_normal((3, 16)) * 0.5).astype(np.float32))
    h = g.fully_connected(x, w1, b1, activation="relu")
    logp = g.log_softmax(g.fully_connected(h, w2))
    g.output(g.neg(g.mean(g.mul(logp, t), axes=(0, 1)), name="loss"))
    feeds = {"x": rng.standard_normal((8, 4)).astype(np.float32),
             "t": np.eye(3, dtype=np.float32)[rng.integers(0, 3, 8)]}  # fmt: skip
    return g, feeds


def test_mlp_value_and_grad_trains_on_the_jax_target() -> None:
    from rlx_edge.targets.jax import compile_jax

    g, feeds = _mlp()
    wrt = ["w1", "b1", "w2"]
    vg = value_and_grad(g, "loss", wrt)
    assert vg.inputs == ["x", "t", *wrt] and vg.outputs == ["loss", *(f"grad/{w}" for w in wrt)]
    weights = {w: np.array(g.params[w]) for w in wrt}
    step = compile_jax(_through_rlx(vg), batch="exact")
    ref = run(vg, {**feeds, **weights})
    got = step({**feeds, **weights})
    for k in vg.outputs:  # float32 on both: the two sum in different orders
        np.testing.assert_allclose(got[k], ref[k], rtol=1e-4, atol=1e-6, err_msg=k)
    losses = []
    for _ in range(20):
        out = step({**feeds, **weights})
        losses.append(float(out["loss"]))
        weights = {w: weights[w] - 0.5 * out[f"grad/{w}"] for w in wrt}
    assert losses[-1] < 0.5 * losses[0], losses


def test_small_cnn_grad_matches_jax() -> None:
    rng = np.random.default_rng(3)
    g = Graph("cnn")
    x = g.input("x", (2, 9, 9, 3), "f64")
    ps = {
        "w1": rng.standard_normal((4, 3, 3, 3)), "b1": rng.standard_normal(4),
        "w2": rng.standard_normal((1, 3, 3, 8)), "w3": rng.standard_normal((5, 8)),
    }  # fmt: skip
    w = {k: g.param(k, v) for k, v in ps.items()}
    h = g.conv2d(x, w["w1"], w["b1"], strides=(2, 2), padding="same", activation="relu")
    h = g.depthwise_conv2d(h, w["w2"], padding="valid", depth_multiplier=2, activation="relu6")
    h = g.max_pool2d(h, kernel=(2, 2), strides=(1, 1), padding="same")
    h = g.avg_pool2d(h, kernel=(2, 2), strides=(2, 2), padding="valid")
    h = g.reshape(g.global_avg_pool(h), shape=(2, 8))
    p = g.softmax(g.fully_connected(h, w["w3"]))
    g.output(g.sum(g.square(p), axes=(0, 1), name="loss"))
    wrt = ["x", *ps]
    xv = rng.standard_normal((2, 9, 9, 3))
    got = _run(grad(g, "loss", wrt), {"x": xv, **ps})
    # value_and_grad's graph is the loss as a function of every wrt input (params lifted)
    fn = _fn(_loss_of(value_and_grad(g, "loss", wrt)))
    want = jax.jit(jax.grad(lambda *a: fn(*a)[0], argnums=tuple(range(len(wrt)))))(xv, *ps.values())
    for k, j in zip(wrt, want):
        assert_close(got[f"grad/{k}"], j, f"cnn grad/{k}")


def _loss_of(vg: Graph) -> Graph:
    """value_and_grad's graph with the loss as its only output (the grads pruned away)."""
    from rlx_edge.ir.passes.manager import get_pass

    g = vg.copy()
    g.outputs = ["loss"]
    return get_pass("dce")(g)


VMAP_DRAWS = 6


@pytest.mark.parametrize("name", sorted(n for n, op in REGISTRY.items() if not op.typed))
def test_vmap_matches_each_slice(name: str) -> None:
    """Any op, float or integer draws: the vmapped graph equals the graph run on every slice (numpy only)."""
    op = REGISTRY[name]
    rng = np.random.default_rng(11)
    done = 0
    for _ in range(60):
        inputs, attrs, out_q, in_q = op.draw(rng)
        if any(q is not None for q in [*(out_q or []), *(in_q or [])]) or any(x is None for x in inputs[:1]):
            continue
        xs = [np.asarray(x) for x in inputs if x is not None]
        names = op.input_names(len(inputs))
        g = Graph(f"{name}_vmap")
        handles = [None if x is None else g.input(n, np.shape(x), np.asarray(x).dtype.name)
                   for n, x in zip(names, inputs)]  # fmt: skip
        g.output(*g.add_node(name, handles, attrs))
        axes = [int(rng.integers(0, x.ndim + 1)) if i == 0 or rng.random() < 0.5 else None for i, x in enumerate(xs)]
        size = 3
        slices = [[x if x.dtype.kind != "f" else x + k for x in xs] for k in range(size)]
        batched = [xs[i] if ax is None else np.stack([s[i] for s in slices], axis=ax) for i, ax in enumerate(axes)]
        got = _run(vmap(g, in_axes=axes, axis_size=size), dict(zip(g.inputs, batched)))
        for k in range(size):
            feeds = {n: (x if ax is None else s) for n, x, s, ax in zip(g.inputs, xs, slices[k], axes)}
            want = run(g, feeds)
            for o in g.outputs:
                w, b = want[o], got[o][k]
                if w.dtype.kind == "f":  # the same float operations; a folded batch may sum in another order
                    np.testing.assert_allclose(b, w, rtol=1e-5, atol=1e-5, err_msg=f"{name} {o} slice {k} {axes}")
                else:
                    assert np.array_equal(b, w), f"{name} {o} slice {k} in_axes {axes}"
        done += 1
        if done == VMAP_DRAWS:
            return
    raise AssertionError(f"{name}: only {done} usable draws in 60")
