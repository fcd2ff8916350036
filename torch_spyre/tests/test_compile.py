# SPDX-License-Identifier: MIT
"""Tests of ``torch.compile(backend="spyre")`` (torch_spyre/compiler.py and
csrc/compile.cpp), run by test_torch.py in the same guest process (names
start with ``torch_compile_``).  Each compiled result is compared with the
same code run eagerly on the card and on the CPU; the compiler's counters
show how the work ran (command lists launched, ops lowered or left
eager).  Timings are printed, never asserted.

Budget: at most 45 s of the 4 minutes the torch guest's tests share.  Under
TCG the first compile pays for importing Dynamo (15-35 s, depending on the
host's load; printed) and every Dynamo compile costs about 0.5-2 s plus
0.1-0.25 s per ATen node (Dynamo's and aot_autograd's traces with fake
tensors), so the tests make as few compiles as their checks need, with few
nodes: the native ops are one graph that returns every op's result, the
lean path is checked on the graph that recompiles, the wrapped path on the
graph after the graph break.
"""

import copy
import importlib
import sys
import time
import warnings

import ktap
import torch
import torch.nn as nn
import torch.nn.functional as F

import tiny_decoder as td

TESTS = []
TOL = dict(rtol=1e-4, atol=1e-4)


test = ktap.registry(TESTS)


def C():
    import torch_spyre.compiler as c
    return c


def compiled(fn):
    """``fn`` compiled with the spyre backend after resetting Dynamo's
    caches (so every test's compile counts start from zero).  The first
    call imports Dynamo and prints how long that took (seconds): most of
    the first compile test's time, whichever test that is."""
    if "torch._dynamo" not in sys.modules:
        t = time.time()
        importlib.import_module("torch._dynamo")
        print(f"# importing Dynamo: {time.time() - t:.1f} s")
    torch._dynamo.reset()
    return torch.compile(fn, backend="spyre", dynamic=False)


def check(got, want, **tol):
    """``got`` (spyre) equals ``want`` (CPU) within ``tol``."""
    assert got.device.type == "spyre", got.device
    torch.testing.assert_close(got.cpu(), want, **(tol or TOL))


# every result ops_fn returns, in order: each is checked on its own against
# the CPU and against eager on the card, so a failing lowering is named
OPS = ("addmm", "mm", "bmm", "gelu", "relu", "neg", "mul.Scalar",
       "div.Scalar", "sigmoid", "silu", "exp", "softmax", "layer_norm",
       "softmax.3d", "add.Scalar", "sum", "mean", "amax", "mul.bcast_col",
       "sub.alpha_bcast_row", "add.Tensor", "mm.fp16", "relu.fp16",
       "mul.Scalar.fp16", "add.Scalar.fp16")
FP16_TOL = dict(rtol=4e-3, atol=4e-3)


def ops_fn(x, w, b, y, z, a16, b16):
    """The ops part 1 made native, in one graph: x [6, 16], w [12, 16],
    b [12], y [3, 4, 8], z [3, 5, 8] (float32), a16 [8, 32], b16 [32, 16]
    (float16).  Returns one tensor per name of OPS: GEMMs (addmm through
    F.linear, mm and bmm with a transposed operand), unary and row ops,
    last-dim reductions, element-wise ops with scalars, broadcasts along
    either dim and alpha, and an fp16 chain."""
    h = F.linear(x, w, b)                           # [6, 12]: t, addmm
    m = torch.mm(x, w.t())
    a = torch.bmm(y, z.transpose(1, 2))             # [3, 4, 5]
    mx = h.amax(-1, keepdim=True)                   # [6, 1]
    m16 = torch.mm(a16, b16)
    r16 = torch.relu(m16)
    s16 = r16 * 0.5
    return (h, m, a, F.gelu(h), torch.relu(h), -h, h * 0.5, h / 4.0,
            torch.sigmoid(h), F.silu(h), torch.exp(h * 0.1),
            torch.softmax(h, dim=-1), F.layer_norm(h, (h.shape[-1],)),
            a.softmax(-1), a + 1.0, h.sum(-1, keepdim=True),
            h.mean(-1, keepdim=True), mx, h * mx, torch.sub(m, b, alpha=2),
            h + m, m16, r16, s16, s16 + 1.0)


@test
def torch_compile_native_ops():
    torch.manual_seed(1)
    cpu = [torch.randn(6, 16), torch.randn(12, 16), torch.randn(12),
           torch.randn(3, 4, 8), torch.randn(3, 5, 8),
           torch.randn(8, 32).half(), torch.randn(32, 16).half()]
    sp = [t.to("spyre") for t in cpu]
    # the CPU reference in float32, rounded once to fp16 where the card
    # computes in fp16
    want = ops_fn(*cpu[:5], cpu[5].float(), cpu[6].float())
    with torch.no_grad():
        eager = ops_fn(*sp)
        f = compiled(ops_fn)
        f(*sp)                              # compile + first launch
        C().reset_compile_stats()
        torch.spyre.reset_op_counts()
        got = f(*sp)
    st = C().compile_stats()
    assert len(got) == len(eager) == len(want) == len(OPS)
    bad = []
    for name, g, e, w in zip(OPS, got, eager, want):
        tol = FP16_TOL if e.dtype == torch.float16 else TOL
        try:
            assert g.dtype == e.dtype, (g.dtype, e.dtype)
            check(g, w.to(e.dtype), **tol)
            check(g, e.cpu(), **tol)
        except AssertionError as err:
            bad.append(f"{name}: {err}")
    assert not bad, "\n".join(bad)
    # one command list did all of it: no op went through the dispatcher
    assert st["launches"] == 1 and st["eager_nodes_run"] == 0, st
    assert st["lowered_nodes_run"] >= 30, st
    assert st["commands"] >= 30, st
    oc = torch.spyre.op_counts()
    compute = [k for k in oc if k not in ("aten::_copy_from", "aten::empty"
                                          ".memory_format")]
    assert not compute, oc
    lowered = set(C().LOWERED_OPS)
    for op in ("aten.mm.default", "aten.bmm.default", "aten.addmm.default",
               "aten._softmax.default", "aten.native_layer_norm.default",
               "aten.gelu.default", "aten.sigmoid.default"):
        assert op in lowered, op
    print(f"# native ops: {st['lowered_nodes_run']} ATen nodes, "
          f"{st['commands']} card commands in one command list")


@test
def torch_compile_mlp():
    torch.manual_seed(2)
    m = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 64),
                      nn.SiLU(), nn.LayerNorm(64), nn.Linear(64, 10))
    x = torch.randn(8, 32)
    want = m(x).detach()
    ms = copy.deepcopy(m).to("spyre")
    xs = x.to("spyre")
    with torch.no_grad():
        eager = ms(xs)
        f = compiled(ms)
        f(xs)
        C().reset_compile_stats()
        outs = [f(xs) for _ in range(3)]
    st = C().compile_stats()
    for o in outs:
        check(o, want)
        check(o, eager.cpu())
    assert st["launches"] == 3 and st["eager_nodes_run"] == 0, st
    assert st["compiles"] == 0, st
    # weights are read in place: only x is staged in, only the logits out
    assert st["bytes_in"] == 3 * x.numel() * 4, st
    assert st["bytes_out"] == 3 * 8 * 10 * 4, st
    assert st["copy_jobs"] == 6, st
    # Dynamo called the lean entry (no aot_autograd wrappers): the call
    # went straight to C++ (graph_call) and still counts as a run
    assert st["runs"] == 3, st
    assert st["lowered_nodes_run"] >= 3 * 6, st
    with torch.no_grad():
        # a weight updated in place: the graph reads it where it is
        ms[0].bias.add_(0.5)
        m[0].bias.add_(0.5)
        check(f(xs), m(x))
        # a weight given new storage: the plan is rebuilt for it
        ms[2].weight.data = (m[2].weight * 2).to("spyre")
        m[2].weight.data = m[2].weight * 2
        check(f(xs), m(x))
    st = C().compile_stats()
    assert st["builds"] == 1 and st["compiles"] == 0, st
    # a parameter replaced by another Parameter object: the graph's bound
    # tensor is not the argument any more (a new Dynamo graph, or the lean
    # entry's check fails and the plan is rebuilt): still the right result
    with torch.no_grad():
        ms[4].weight = nn.Parameter((m[4].weight + 1).to("spyre"))
        m[4].weight = nn.Parameter(m[4].weight + 1)
        check(f(xs), m(x))


@test
def torch_compile_decoder_block():
    torch.manual_seed(3)
    m = td.make_model(0, n_layers=1)
    blk = m.blocks[0]
    L, d = m.L, m.d
    x = torch.randn(1, d)
    pos = torch.zeros(L, 1)
    pos[5, 0] = 1.0
    mask = torch.full((1, L), -1e9)
    mask[0, :6] = 0.0
    kc, vc = torch.randn(L, d), torch.randn(L, d)
    with torch.no_grad():
        want = blk(x, pos, mask, kc, vc)
        bs = td.make_model(0, n_layers=1).blocks[0].to("spyre")
        args = [t.to("spyre") for t in (x, pos, mask, kc, vc)]
        eager = bs(*args)
        f = compiled(bs)
        f(*args)
        C().reset_compile_stats()
        got = f(*args)
    st = C().compile_stats()
    for g, e, w in zip(got, eager, want):
        check(g, w, rtol=2e-4, atol=2e-4)
        check(g, e.cpu(), rtol=2e-4, atol=2e-4)
    # the cache rows other than 5 are unchanged, row 5 is the new key
    torch.testing.assert_close(got[1].cpu()[:5], kc[:5])
    assert st["launches"] == 1 and st["eager_nodes_run"] == 0, st
    print(f"# decoder block: {st['lowered_nodes_run']} ATen nodes, "
          f"{st['commands']} card commands in one command list")


@test
def torch_compile_lean_graph_recompiles_on_new_shape():
    # a graph without input mutation or aliasing is "lean" (Dynamo calls it
    # without aot_autograd's runtime wrappers); a new shape fails Dynamo's
    # guards and compiles a second graph, the first one is used again after
    def f(x, y):
        return torch.relu(x) + y * 2.0
    torch.manual_seed(5)
    a, b = [torch.randn(4, 8), torch.randn(4, 8)], [torch.randn(6, 8),
                                                   torch.randn(6, 8)]
    sa, sb = [t.to("spyre") for t in a], [t.to("spyre") for t in b]
    with torch.no_grad():
        g = compiled(f)
        C().reset_compile_stats()
        for _ in range(2):
            check(g(*sa), f(*a))
        st = C().compile_stats()
        assert st["lean_graphs"] == 1 and st["wrapped_graphs"] == 0, st
        assert st["runs"] == 2 and st["launches"] == 2, st
        check(g(*sb), f(*b))                # a new shape: a new graph
        check(g(*sa), f(*a))                # the first one again
    st = C().compile_stats()
    assert st["compiles"] == 2 and st["segments"] == 2, st
    assert st["lean_graphs"] == 2 and st["wrapped_graphs"] == 0, st
    assert st["runs"] == 4 and st["launches"] == 4, st


@test
def torch_compile_graph_break_and_input_mutation():
    # Dynamo splits f in two graphs: the first is lean; the second mutates
    # an input, so it runs inside aot_autograd's wrappers ("wrapped": they
    # apply the mutation after the graph), and holds ops without a card
    # kernel, which run eagerly between its command lists
    def f(x, w, y):
        h = torch.relu(x @ w)
        torch._dynamo.graph_break()             # Dynamo splits here
        y.mul_(2.0)
        h = torch.log_softmax(h, dim=-1)        # no card kernel: eager
        # a constant the code makes (a graph attribute), cumsum (eager)
        return (h * torch.tensor(2.0, device=h.device) +
                torch.cumsum(h, -1) + y)
    torch.manual_seed(4)
    x, w, y = torch.randn(4, 8), torch.randn(8, 8), torch.randn(4, 8)
    ys = y.to("spyre")
    with torch.no_grad():
        g = compiled(f)
        C().reset_compile_stats()
        got = g(x.to("spyre"), w.to("spyre"), ys)
    check(got, f(x, w, y.clone()))
    check(ys, y * 2.0)                          # the mutation happened
    st = C().compile_stats()
    assert st["compiles"] == 2, st
    assert st["lean_graphs"] == 1 and st["wrapped_graphs"] == 1, st
    assert "aten._log_softmax.default" in st["eager_ops"], st
    assert "aten.cumsum.default" in st["eager_ops"], st
    assert st["launches"] >= 2 and st["lowered_nodes_run"] >= 3, st


@test
def torch_compile_autograd_on_runs_eagerly():
    lin = nn.Linear(4, 4).to("spyre")
    x = torch.randn(2, 4).to("spyre")
    C().reset_compile_stats()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        y = compiled(lin)(x)
    y.sum().backward()                          # autograd still works
    assert lin.weight.grad is not None
    st = C().compile_stats()
    assert st["eager_graphs"] == 1 and st["launches"] == 0, st


@test
def torch_compile_misuse_raises():
    ops = torch.ops.spyre
    arena = torch.empty(4096, dtype=torch.uint8, device="spyre")
    fill = [2, 0, 0, 16, 4, 0]                  # FILL 16 x 4 bytes at 0
    h = ops.graph_create(0, [arena], fill, [], [], [])
    try:
        assert ops.graph_info(h)[0] == 1
        for bad, exc in (
                (lambda: ops.graph_run(h, [arena]), ValueError),
                (lambda: ops.graph_run(123456, []), ValueError),
                (lambda: ops.graph_create(0, [arena], [99], [], [], []),
                 ValueError),
                (lambda: ops.graph_create(0, [arena], fill[:3], [], [], []),
                 ValueError),
                (lambda: ops.graph_create(0, [arena], [2, 5, 0, 1, 4, 0],
                                          [], [], []), ValueError),
                # 4 KiB arena, FILL of 8 KiB: libspyre's range check
                (lambda: ops.graph_create(0, [arena], [2, 0, 0, 2048, 4, 0],
                                          [], [], []), RuntimeError),
                (lambda: ops.graph_create(0, [arena], fill, [], [0, 8192],
                                          []), ValueError),
                (lambda: ops.graph_create(5, [arena], fill, [], [], []),
                 IndexError),
                (lambda: ops.graph_create(0, [arena.cpu()], fill, [], [],
                                          []), ValueError)):
            try:
                bad()
            except exc:
                pass
            else:
                raise AssertionError(f"no {exc.__name__}")
        assert ops.graph_run(h, []) == []
    finally:
        ops.graph_destroy(h)
    ops.graph_destroy(h)                        # twice: ignored
