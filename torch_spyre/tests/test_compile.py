# SPDX-License-Identifier: MIT
"""Tests of ``torch.compile(backend="spyre")`` (torch_spyre/compiler.py and
csrc/compile.cpp), run by test_torch.py in the same guest process (names
start with ``torch_compile_``).  Each compiled result is compared with the
same code run eagerly on the card and on the CPU; the compiler's counters
show how the work ran (command lists launched, ops lowered or left
eager).  Graphs are kept small: every Dynamo compile costs seconds under
TCG.  Timings are printed, never asserted.
"""

import copy
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F

import tiny_decoder as td

TESTS = []
TOL = dict(rtol=1e-4, atol=1e-4)


def test(fn):
    TESTS.append(fn)
    return fn


def C():
    import torch_spyre.compiler as c
    return c


def compiled(fn):
    torch._dynamo.reset()
    return torch.compile(fn, backend="spyre", dynamic=False)


def check(got, want, **tol):
    """``got`` (spyre) equals ``want`` (CPU) within ``tol``."""
    assert got.device.type == "spyre", got.device
    torch.testing.assert_close(got.cpu(), want, **(tol or TOL))


def ops_fn(x, w, b, y, z, a16, b16):
    # the ops part 1 made native, as one graph: GEMMs (mm, addmm through
    # F.linear, bmm with a transposed operand), element-wise with scalars,
    # broadcasts and alpha, unary ops, row ops and last-dim reductions
    h = F.linear(x, w, b)                               # addmm, t
    h = F.gelu(h) + torch.relu(-h) * 0.5 - h / 4.0      # gelu relu neg mul div
    h = torch.sigmoid(h) + F.silu(h) + torch.exp(h * 0.1)
    s = torch.softmax(h, dim=-1)
    n = F.layer_norm(h, (h.shape[-1],))
    a = y @ z.transpose(1, 2)                           # bmm, transposed B
    r = h.sum(-1, keepdim=True) + h.mean(-1, keepdim=True) + h.amax(
        -1, keepdim=True)
    m = x @ w.t()                                       # mm
    h16 = torch.relu(a16 @ b16) * 0.5 + 1.0              # fp16
    return s + n * r + torch.sub(m, b, alpha=2), a.softmax(-1) + 1, h16


@test
def torch_compile_native_ops():
    torch.manual_seed(1)
    cpu = [torch.randn(6, 16), torch.randn(12, 16), torch.randn(12),
           torch.randn(3, 4, 8), torch.randn(3, 5, 8),
           torch.randn(8, 32).half(), torch.randn(32, 16).half()]
    sp = [t.to("spyre") for t in cpu]
    want = list(ops_fn(*cpu[:5], cpu[5].float(), cpu[6].float()))
    want[2] = want[2].half()
    with torch.no_grad():
        eager = ops_fn(*sp)
        f = compiled(ops_fn)
        f(*sp)                              # compile + first launch
        C().reset_compile_stats()
        torch.spyre.reset_op_counts()
        got = f(*sp)
    st = C().compile_stats()
    for g, e, w in zip(got[:2], eager, want):
        check(g, w)
        check(g, e.cpu())
    check(got[2], want[2], rtol=4e-3, atol=4e-3)
    check(got[2], eager[2].cpu(), rtol=4e-3, atol=4e-3)
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
def torch_compile_lean_only_without_mutation():
    # an input mutated in place needs aot_autograd's runtime wrappers (they
    # apply the mutation after the graph): that graph is "wrapped", a
    # graph without mutation or aliasing is "lean"; both equal eager
    def mut(x, y):
        y.mul_(2.0)
        return torch.relu(x) + y

    def pure(x, y):
        return torch.relu(x) + y * 2.0
    torch.manual_seed(5)
    x, y = torch.randn(4, 8), torch.randn(4, 8)
    with torch.no_grad():
        C().reset_compile_stats()
        ys = y.to("spyre")
        got = compiled(mut)(x.to("spyre"), ys)
        st = C().compile_stats()
        assert st["wrapped_graphs"] == 1 and st["lean_graphs"] == 0, st
        want_y = y * 2.0
        check(ys, want_y)                       # the mutation happened
        check(got, torch.relu(x) + want_y)
        C().reset_compile_stats()
        g = compiled(pure)
        xs, ys = x.to("spyre"), y.to("spyre")
        for _ in range(2):
            check(g(xs, ys), pure(x, y))
        st = C().compile_stats()
        assert st["lean_graphs"] == 1 and st["wrapped_graphs"] == 0, st
        assert st["runs"] == 2 and st["launches"] == 2, st


@test
def torch_compile_recompile_on_new_shape():
    def f(x):
        return torch.relu(x) * 2.0 + 1.0
    with torch.no_grad():
        g = compiled(f)
        C().reset_compile_stats()
        a, b = torch.randn(4, 8), torch.randn(6, 8)
        check(g(a.to("spyre")), f(a))
        check(g(b.to("spyre")), f(b))        # a new shape: a new graph
        check(g(a.to("spyre")), f(a))        # the first one again
    st = C().compile_stats()
    assert st["compiles"] == 2 and st["segments"] == 2, st
    assert st["launches"] == 3, st


@test
def torch_compile_graph_break_falls_back():
    def f(x, w):
        h = torch.relu(x @ w)
        torch._dynamo.graph_break()             # Dynamo splits here
        h = torch.log_softmax(h, dim=-1)        # no card kernel: eager
        # a constant the code makes (a graph attribute), cumsum (eager)
        return h * torch.tensor(2.0, device=h.device) + torch.cumsum(h, -1)
    torch.manual_seed(4)
    x, w = torch.randn(4, 8), torch.randn(8, 8)
    with torch.no_grad():
        g = compiled(f)
        C().reset_compile_stats()
        got = g(x.to("spyre"), w.to("spyre"))
    check(got, f(x, w))
    st = C().compile_stats()
    assert st["compiles"] == 2, st
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
