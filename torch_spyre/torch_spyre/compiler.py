# SPDX-License-Identifier: MIT
"""torch_spyre.compiler: the ``spyre`` backend of ``torch.compile``.

This module owns the lowering of an ATen graph to the card's command lists:
the Dynamo backend :func:`spyre` (found by ``torch.compile(backend="spyre")``
through the ``torch_dynamo_backends`` entry point, so importing torch does
not import Dynamo), the segmentation of aot_autograd's inference graph into
runs of supported ops, their lowering into one libspyre command list per
run with its intermediates planned once in one arena, and the runtime that
replays the plan.  The command lists are built by ``csrc/compile.cpp``
(``torch.ops.spyre.graph_*``) in the program format documented there.

Semantics:

* Inference: a graph is compiled when autograd is off (``torch.no_grad()``
  or ``torch.inference_mode()``) or no input requires grad; otherwise the
  Dynamo graph runs eagerly (``compile_stats()["eager_graphs"]`` counts it).
* Static shapes: use ``torch.compile(..., dynamic=False)``; a new shape is a
  new Dynamo graph and so a new compile (Dynamo's guards decide).  Nodes
  with symbolic sizes (``dynamic=True``) run eagerly.
* A run of supported ops on ``spyre`` tensors of float32/float16/bfloat16
  becomes one *segment*: one frozen command list (a libspyre graph) whose
  intermediates live at offsets of one arena tensor planned once (buffers
  whose lifetimes do not overlap share memory).  Parameters are read in
  place (the graph holds them; if a parameter's storage changes, the plan
  is rebuilt).  Other inputs are *staged*: copied into the arena by one
  copy job before the launch; outputs are copied out into new tensors by
  one copy job after it; all on the current stream, so a segment costs
  three jobs however many ops it holds, submitted together with one
  ioctl (libspyre's spyre_graph_launch_staged()).
* Per call: a graph without input mutation or outputs aliasing inputs
  (checked at compile time by aot_autograd's aot_export_joint_simple) is
  handed to Dynamo as a lean callable, without aot_autograd's runtime
  wrappers; when its plan is one command list, a call is one C++ call
  (torch.ops.spyre.graph_call).  Other graphs run inside aot_autograd's
  wrappers (which apply mutations and rebuild aliases) as before.
* Any other op (unsupported op, dtype, device, layout) ends the segment and
  runs eagerly through the dispatcher (native spyre kernel or the counted
  CPU fallback), as does anything the lowering cannot prove it handles.

Why frozen command lists plus copies rather than patching a launch's
buffer addresses: the command list lives in a BO the card reads; patching
it per launch means writing it through the BAR while no earlier launch of
it is still queued (a host wait, or one copy of the list per launch in
flight), and growing the job's BO list per launch.  Copies cost the card a
memcpy of the (small) activations, need no host wait, and let launches
queue back to back; weights, the bulk of the bytes, are bound in place and
never copied.  What libspyre added for it (0.7) is only the submission of
the two copy jobs and the launch in one ioctl.
"""

import operator
import os
import sys
import warnings

import torch

__all__ = ["spyre", "compile_stats", "reset_compile_stats", "LOWERED_OPS",
           "keep_last_inputs", "programs"]

aten = torch.ops.aten
_DT = {torch.float32: 1, torch.float16: 2, torch.bfloat16: 3}
_U8 = 6
_ALIGN = 256            # bytes: every arena buffer starts at a multiple
_MAX_COPY_CMDS = 4096   # a strided copy needing more runs eagerly
_INF = 1 << 62

_STATS = {"compiles": 0, "eager_graphs": 0, "lean_graphs": 0,
          "wrapped_graphs": 0, "builds": 0, "segments": 0,
          "runs": 0, "lowered_nodes_run": 0, "eager_nodes_run": 0,
          "lowered_ops": {}, "eager_ops": {}}


class Unsupported(Exception):
    """Raised by a lowering rule: this node runs eagerly instead."""


def compile_stats():
    """Counters of the compiler and its launches since the start (or
    :func:`reset_compile_stats`), a dict:

    * ``compiles``: graphs Dynamo handed to the backend; ``eager_graphs``:
      those run eagerly (autograd on); ``lean_graphs``: those Dynamo calls
      without aot_autograd's runtime wrappers (no input mutation, no output
      aliasing an input: the common inference case); ``wrapped_graphs``:
      those that run inside aot_autograd's wrappers; ``builds``: plans
      built (first call, or a parameter's storage changed); ``segments``:
      command lists built.
    * ``runs``: compiled calls; ``lowered_nodes_run`` / ``eager_nodes_run``:
      ATen nodes executed inside command lists / eagerly, summed over runs.
    * ``lowered_ops`` / ``eager_ops``: per ATen op name, how many nodes of
      the built plans were lowered / left eager.
    * from the C++ side: ``graphs`` (live), ``graphs_created``, ``launches``
      (command-list launches), ``commands`` (card commands launched),
      ``copy_jobs`` (staging jobs), ``bytes_in`` / ``bytes_out`` (staged).
      A launch and its staging jobs go to the card in one submit ioctl
      (spyre_graph_launch_staged()).
    """
    s = dict(_STATS)
    s["lowered_ops"] = dict(_STATS["lowered_ops"])
    s["eager_ops"] = dict(_STATS["eager_ops"])
    keys = ("graphs", "graphs_created", "launches", "commands", "copy_jobs",
            "bytes_in", "bytes_out", "calls", "call_nodes")
    s.update(zip(keys, torch.ops.spyre.graph_stats()))
    # calls that went straight to C++ (graph_call) count as runs too
    s["runs"] += s.pop("calls")
    s["lowered_nodes_run"] += s.pop("call_nodes")
    return s


def reset_compile_stats():
    """Zero every counter of :func:`compile_stats` (live graphs stay)."""
    for k, v in _STATS.items():
        _STATS[k] = {} if isinstance(v, dict) else 0
    torch.ops.spyre.graph_reset_stats()


# ---- values inside a segment --------------------------------------------------

class _Block:
    """An arena buffer: size in bytes and its lifetime in command indices
    (first write .. last use); placed by _Segment.finalize()."""
    __slots__ = ("nbytes", "first", "last", "off")

    def __init__(self, nbytes):
        self.nbytes = max(int(nbytes), 1)
        self.first = None
        self.last = None
        self.off = None


class _Val:
    """A tensor inside a segment: ``loc`` (a _Block, or the index of a bound
    buffer), ``off`` (bytes from the start of loc), sizes and strides in
    elements, dtype."""
    __slots__ = ("loc", "off", "size", "stride", "dtype")

    def __init__(self, loc, off, size, stride, dtype):
        self.loc, self.off = loc, int(off)
        self.size, self.stride = tuple(size), tuple(stride)
        self.dtype = dtype

    @property
    def es(self):
        return _esize(self.dtype)

    def numel(self):
        n = 1
        for s in self.size:
            n *= s
        return n


class _Ref:
    """A memory operand of a command before placement."""
    __slots__ = ("loc", "off")

    def __init__(self, loc, off):
        self.loc, self.off = loc, off


def _esize(dt):
    return _ES.get(dt) or torch.empty((), dtype=dt).element_size()


_ES = {torch.float32: 4, torch.float16: 2, torch.bfloat16: 2,
       torch.uint8: 1}


def _contig_strides(size):
    st, acc = [], 1
    for s in reversed(size):
        st.append(acc)
        acc *= max(s, 1)
    return tuple(reversed(st))


def _dense(size, stride):
    """Contiguous, ignoring dims of size 1."""
    acc = 1
    for s, st in zip(reversed(size), reversed(stride)):
        if s != 1 and st != acc:
            return False
        acc *= s
    return True


def _bits(value, dt):
    b = torch.tensor([value], dtype=dt).view(torch.uint8).tolist()
    return int.from_bytes(bytes(b), "little")


class _Segment:
    """A run of lowered nodes: the commands, the buffers, the staged inputs
    and the outputs of one command list."""

    def __init__(self, card):
        self.card = card
        self.cmds = []          # per command: list of ints / _Ref
        self.fvals = []         # per command: list of floats
        self.bound = []         # tensors read in place (buffers 1..)
        self.bound_ids = {}     # id(tensor) -> buffer index
        self.staged = []        # (node, _Block)
        self.vals = {}          # node -> _Val or tuple
        self.ones = {}          # (dtype, n) -> _Val
        self.nodes = []         # lowered nodes, in order
        self.outputs = []       # (node, _Val)

    # -- bookkeeping
    def snapshot(self):
        return (len(self.cmds), len(self.staged), dict(self.ones),
                len(self.bound), dict(self.vals))

    def rollback(self, snap):
        """Undo a failed lowering attempt.  Blocks it extended keep the
        longer lifetime (only wastes arena space); blocks it created are no
        longer referenced and are not placed."""
        n, ns, ones, nb, vals = snap
        del self.cmds[n:]
        del self.fvals[n:]
        del self.staged[ns:]
        self.ones = ones
        self.vals = vals
        for t in self.bound[nb:]:
            del self.bound_ids[id(t)]
        del self.bound[nb:]

    def emit(self, items, floats=()):
        i = len(self.cmds)
        for it in items:
            if isinstance(it, _Ref) and isinstance(it.loc, _Block):
                b = it.loc
                b.first = i if b.first is None else min(b.first, i)
                b.last = i if b.last is None else max(b.last, i)
        self.cmds.append(list(items))
        self.fvals.append([float(f) for f in floats])

    def new(self, size, dtype):
        size = tuple(int(s) for s in size)
        n = 1
        for s in size:
            n *= s
        return _Val(_Block(n * _esize(dtype)), 0, size,
                    _contig_strides(size), dtype)

    @staticmethod
    def ref(v, extra=0):
        return _Ref(v.loc, v.off + extra)

    # -- building blocks
    def copy(self, d, s):
        """Strided copy of _Val ``s`` into ``d`` (same sizes; dtypes equal
        or both card floats).  Raises Unsupported past _MAX_COPY_CMDS."""
        if d.size != s.size:
            raise Unsupported("copy of mismatched shapes")
        conv = d.dtype != s.dtype
        des, ses = d.es, s.es
        sz, ds, ss = [], [], []
        for n, a, b in zip(d.size, d.stride, s.stride):
            if n == 1:
                continue
            if sz and ds[-1] == a * n and ss[-1] == b * n:
                sz[-1] *= n
                ds[-1], ss[-1] = a, b
                continue
            sz.append(n)
            ds.append(a)
            ss.append(b)
        if not sz:
            sz, ds, ss = [1], [1], [1]
        L = len(sz) - 1
        width = height = 1
        dp = sp = 0
        if ds[L] == 1 and ss[L] == 1:
            width = sz[L]
            L -= 1
        if L >= 0:
            dpp, spp = ds[L] * des, ss[L] * ses
            if dpp >= width * des and spp >= width * ses and dpp and spp:
                height = sz[L]
                dp, sp = dpp, spp
                L -= 1
        total = 1
        for i in range(L + 1):
            total *= sz[i]
        if total > _MAX_COPY_CMDS:
            raise Unsupported("copy needs too many commands")
        if conv:
            ddt, sdt, w = _DT[d.dtype], _DT[s.dtype], width
        else:
            ddt = sdt = _U8
            w = width * des
        idx = [0] * (L + 1)
        for _ in range(total):
            do = sum(i * st for i, st in zip(idx, ds)) * des
            so = sum(i * st for i, st in zip(idx, ss)) * ses
            self.emit([1, self.ref(d, do), dp, ddt, self.ref(s, so), sp,
                       sdt, w, height, 0])
            for i in range(L, -1, -1):
                idx[i] += 1
                if idx[i] < sz[i]:
                    break
                idx[i] = 0

    def dense(self, v):
        """``v`` if contiguous, else a contiguous copy."""
        if _dense(v.size, v.stride):
            return v
        d = self.new(v.size, v.dtype)
        self.copy(d, v)
        return d

    def convert(self, v, dtype):
        """``v`` contiguous in ``dtype``."""
        v = self.dense(v)
        if v.dtype == dtype:
            return v
        d = self.new(v.size, dtype)
        self.emit([7, self.ref(d), _DT[dtype], self.ref(v), _DT[v.dtype],
                   v.numel(), 0])
        return d

    def const_ones(self, dtype, n):
        key = (dtype, n)
        if key not in self.ones:
            v = self.new((n,), dtype)
            self.emit([2, self.ref(v), n, v.es, _bits(1.0, dtype)])
            v.loc.last = _INF
            self.ones[key] = v
        return self.ones[key]

    def fill(self, size, dtype, value):
        v = self.new(size, dtype)
        self.emit([2, self.ref(v), v.numel(), v.es, _bits(value, dtype)])
        return v

    def gemm(self, c, a, b, m, n, k, alpha=1.0, beta=0.0, bias=None,
             batch=1, ta=False, tb=False, lda=0, ldb=0, ldc=0, sa=0, sb=0,
             sc=0, cdt=None):
        dt = _DT[a.dtype]
        flags = (1 if ta else 0) | (2 if tb else 0)
        bias_ref = self.ref(bias) if bias is not None else None
        self.emit([3, flags, dt, _DT[b.dtype], _DT[cdt or c.dtype],
                   _DT[bias.dtype] if bias is not None else 0, m, n, k,
                   batch, self.ref(a), self.ref(b), self.ref(c), lda, ldb,
                   ldc, sa, sb, sc, bias_ref], [alpha, beta])

    def spread(self, v, shape, dtype):
        """``v`` broadcast to ``shape``, contiguous, in ``dtype``: one GEMM
        with a ones vector for broadcasts along leading or trailing dims
        (exact: every element is one product by 1.0), else strided
        copies."""
        shape = tuple(shape)
        v = self.convert(v, dtype) if v.dtype != dtype else v
        if v.size == shape:
            return self.dense(v)
        nd = len(shape)
        n = 1
        for s in shape:
            n *= s
        ts = (1,) * (nd - len(v.size)) + v.size
        if len(v.size) > nd:
            raise Unsupported("broadcast to fewer dims")
        lead = 0
        while lead < nd and ts[lead] == 1:
            lead += 1
        lead_ok = all(ts[i] == shape[i] for i in range(lead, nd))
        trail = nd
        while trail > 0 and ts[trail - 1] == 1:
            trail -= 1
        trail_ok = all(ts[i] == shape[i] for i in range(trail))
        if lead_ok or trail_ok:
            q = v.numel()
            vv = self.dense(v)
            out = self.new(shape, dtype)
            if lead_ok:         # ones[P x 1] @ v[1 x Q]
                P = n // q
                self.gemm(out, self.const_ones(dtype, P), vv, P, q, 1)
            else:               # v[P x 1] @ ones[1 x Q]
                Q = n // q
                self.gemm(out, vv, self.const_ones(dtype, Q), q, Q, 1)
            return out
        # general: strided copy from the expanded view
        st = (0,) * (nd - len(v.size)) + tuple(
            0 if sz == 1 and shape[i + nd - len(v.size)] != 1 else s
            for i, (sz, s) in enumerate(zip(v.size, v.stride)))
        out = self.new(shape, dtype)
        self.copy(out, _Val(v.loc, v.off, shape, st, dtype))
        return out

    # -- finalize
    def finalize(self):
        """Place the blocks (first fit over lifetimes), resolve the
        operands; returns (arena bytes, code, fvals, ins, outs)."""
        blocks = {}
        for c in self.cmds:
            for it in c:
                if isinstance(it, _Ref) and isinstance(it.loc, _Block):
                    blocks[id(it.loc)] = it.loc
        for _, b in self.staged:
            b.first = -1
            blocks[id(b)] = b
        for _, v in self.outputs:
            v.loc.last = _INF
        placed = []
        top = 0
        for b in sorted(blocks.values(), key=lambda b: (b.first, -b.nbytes)):
            if b.last is None:
                b.last = b.first
            size = (b.nbytes + _ALIGN - 1) // _ALIGN * _ALIGN
            live = sorted((p.off, p.off + (p.nbytes + _ALIGN - 1) //
                           _ALIGN * _ALIGN) for p in placed
                          if not (p.last < b.first or p.first > b.last))
            off = 0
            for lo, hi in live:
                if off + size <= lo:
                    break
                off = max(off, hi)
            b.off = off
            top = max(top, off + size)
            placed.append(b)
        code, fv = [], []
        for c, f in zip(self.cmds, self.fvals):
            for it in c:
                if isinstance(it, _Ref):
                    if isinstance(it.loc, _Block):
                        code += [0, it.loc.off + it.off]
                    else:
                        code += [it.loc, it.off]
                elif it is None:
                    code += [-1, 0]
                else:
                    code.append(int(it))
            fv += f
        ins = []
        for _, b in self.staged:
            ins += [b.off, b.nbytes]
        outs = []
        for _, v in self.outputs:
            outs += [v.loc.off + v.off, _DT[v.dtype], len(v.size),
                     *v.size]
        return max(top, _ALIGN), code, fv, ins, outs


# ---- lowering rules -----------------------------------------------------------

def _attr(mod, target):
    """The attribute ``target`` ("a.b.c") of module ``mod``."""
    for part in target.split("."):
        mod = getattr(mod, part)
    return mod


def _dbg(x):
    if isinstance(x, _Ref):
        loc = (f"arena@{x.loc.off}" if isinstance(x.loc, _Block)
               else f"buf{x.loc}")
        return f"[{loc}+{x.off}]"
    return str(x)


def _meta(node):
    v = node.meta.get("val") if hasattr(node, "meta") else None
    return v


def _is_node(x):
    return isinstance(x, torch.fx.Node)


_VIEW_OPS = {
    aten.view.default, aten._unsafe_view.default,
    aten.unsqueeze.default, aten.squeeze.dim, aten.squeeze.dims,
    aten.squeeze.default, aten.permute.default, aten.transpose.int,
    aten.t.default, aten.expand.default, aten.slice.Tensor,
    aten.select.int, aten.alias.default, aten.detach.default,
    aten.split.Tensor, aten.split_with_sizes.default, aten.unbind.int,
    aten.as_strided.default,
}


def _lower_view(seg, node, args):
    v = args[0]
    if any(_is_node(a) for a in node.args[1:]) or any(
            _is_node(a) for a in node.kwargs.values()):
        raise Unsupported("view with a traced argument")
    es = v.es
    span = v.off // es + 1 + sum((s - 1) * st for s, st in
                                 zip(v.size, v.stride) if s > 0)

    def apply(val):
        base = torch.empty(span, dtype=val.dtype, device="meta").as_strided(
            val.size, val.stride, val.off // es)
        return node.target(base, *node.args[1:], **node.kwargs)

    try:
        r = apply(v)
    except RuntimeError:
        v = seg.dense(v)
        span = 1 + v.numel()
        r = apply(v)

    def mk(t):
        return _Val(v.loc, t.storage_offset() * es, t.shape, t.stride(),
                    v.dtype)
    if isinstance(r, (list, tuple)):
        return tuple(mk(t) for t in r)
    return mk(r)


def _scalar(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _binary(seg, node, args, op):
    out = _meta(node)
    dt, shape = out.dtype, tuple(out.shape)
    a, b = args[0], args[1]
    alpha = node.kwargs.get("alpha", 1)
    if op == "rsub":            # other - alpha * self
        if not (_is_node(node.args[0]) and _scalar(b)):
            raise Unsupported("rsub form")
        x = seg.spread(a, shape, dt)
        t = seg.new(shape, dt)
        seg.emit([4, 3, _DT[dt], t.numel(), seg.ref(t), seg.ref(x), None],
                 [-float(alpha)])
        return _add_scalar(seg, t, float(b), dt)
    if op == "sub":
        op, alpha = "add", -alpha
    if op == "div":
        if not _scalar(b):
            raise Unsupported("division by a tensor")
        op, b = "mul", 1.0 / b
    if isinstance(a, _Val) and _scalar(b):
        x = seg.spread(a, shape, dt)
        if op == "mul":
            o = seg.new(shape, dt)
            seg.emit([4, 3, _DT[dt], o.numel(), seg.ref(o), seg.ref(x),
                      None], [float(b)])
            return o
        return _add_scalar(seg, x, float(b) * alpha, dt)
    if _scalar(a) and isinstance(b, _Val) and op in ("add", "mul"):
        return _binary_swap(seg, node, b, a, op, alpha, dt, shape)
    if not (isinstance(a, _Val) and isinstance(b, _Val)):
        raise Unsupported("operands")
    x = seg.spread(a, shape, dt)
    y = seg.spread(b, shape, dt)
    if op == "add" and alpha != 1:
        t = seg.new(shape, dt)
        seg.emit([4, 3, _DT[dt], t.numel(), seg.ref(t), seg.ref(y), None],
                 [float(alpha)])
        y = t
    o = seg.new(shape, dt)
    seg.emit([4, 1 if op == "add" else 2, _DT[dt], o.numel(), seg.ref(o),
              seg.ref(x), seg.ref(y)], [1.0])
    return o


def _binary_swap(seg, node, v, s, op, alpha, dt, shape):
    x = seg.spread(v, shape, dt)
    if op == "mul":
        o = seg.new(shape, dt)
        seg.emit([4, 3, _DT[dt], o.numel(), seg.ref(o), seg.ref(x), None],
                 [float(s)])
        return o
    # s + alpha * v
    if alpha != 1:
        t = seg.new(shape, dt)
        seg.emit([4, 3, _DT[dt], t.numel(), seg.ref(t), seg.ref(x), None],
                 [float(alpha)])
        x = t
    return _add_scalar(seg, x, float(s), dt)


def _add_scalar(seg, x, value, dt):
    c = seg.fill(x.size, dt, value)
    o = seg.new(x.size, dt)
    seg.emit([4, 1, _DT[dt], o.numel(), seg.ref(o), seg.ref(x), seg.ref(c)],
             [1.0])
    return o


_ELT = {aten.relu.default: 4, aten.gelu.default: 5, aten.silu.default: 6,
        aten.exp.default: 7}


def _unary(seg, node, args):
    x = seg.dense(args[0])
    dt = x.dtype
    if node.target is aten.gelu.default:
        appr = node.kwargs.get("approximate",
                               node.args[1] if len(node.args) > 1 else "none")
        if appr != "none":
            raise Unsupported("tanh gelu")
    o = seg.new(x.size, dt)
    if node.target is aten.neg.default:
        seg.emit([4, 3, _DT[dt], o.numel(), seg.ref(o), seg.ref(x), None],
                 [-1.0])
    else:
        seg.emit([4, _ELT[node.target], _DT[dt], o.numel(), seg.ref(o),
                  seg.ref(x), None], [1.0])
    return o


def _sigmoid(seg, node, args):
    # sigmoid(x) = softmax([x, 0])[0], as the eager kernel does it
    x = seg.dense(args[0])
    dt, n, es = x.dtype, x.numel(), x.es
    R = seg.new((n, 2), dt)
    seg.emit([2, seg.ref(R), 2 * n, es, 0])
    seg.emit([1, seg.ref(R), 2 * es, _DT[dt], seg.ref(x), es, _DT[dt], 1, n,
              0])
    seg.emit([6, 1, _DT[dt], n, 2, seg.ref(R), 0, seg.ref(R), 0, None, None],
             [0.0])
    o = seg.new(x.size, dt)
    seg.emit([1, seg.ref(o), es, _DT[dt], seg.ref(R), 2 * es, _DT[dt], 1, n,
              0])
    return o


def _mat(seg, v):
    """GEMM view of the last two dims: (val, trans, ld, batch stride)."""
    r, c = v.size[-2], v.size[-1]
    s0, s1 = v.stride[-2], v.stride[-1]
    bs = v.stride[0] if len(v.size) == 3 and v.size[0] > 1 else 0
    if (s1 == 1 or c == 1) and (r == 1 or s0 >= c):
        return v, False, max(s0, c), bs
    if (s0 == 1 or r == 1) and (c == 1 or s1 >= r):
        return v, True, max(s1, r), bs
    d = seg.dense(v)
    return d, False, c, (r * c if len(v.size) == 3 else 0)


def _gemm_check(*vals):
    dt = vals[0].dtype
    for v in vals:
        if v.dtype != dt:
            raise Unsupported("mixed dtypes")
        if any(s == 0 for s in v.size):
            raise Unsupported("empty")


def _mm(seg, node, args):
    a, b = args[0], args[1]
    _gemm_check(a, b)
    A, ta, lda, _ = _mat(seg, a)
    B, tb, ldb, _ = _mat(seg, b)
    M, K, N = a.size[0], a.size[1], b.size[1]
    c = seg.new((M, N), a.dtype)
    seg.gemm(c, A, B, M, N, K, ta=ta, tb=tb, lda=lda, ldb=ldb, ldc=N)
    return c


def _bmm(seg, node, args):
    a, b = args[0], args[1]
    _gemm_check(a, b)
    A, ta, lda, sa = _mat(seg, a)
    B, tb, ldb, sb = _mat(seg, b)
    Bt, M, K, N = a.size[0], a.size[1], a.size[2], b.size[2]
    c = seg.new((Bt, M, N), a.dtype)
    seg.gemm(c, A, B, M, N, K, batch=Bt, ta=ta, tb=tb, lda=lda, ldb=ldb,
             ldc=N, sa=sa if Bt > 1 else 0, sb=sb if Bt > 1 else 0,
             sc=M * N if Bt > 1 else 0)
    return c


def _addmm(seg, node, args):
    bias, a, b = args[0], args[1], args[2]
    beta = float(node.kwargs.get("beta", 1))
    alpha = float(node.kwargs.get("alpha", 1))
    if not isinstance(bias, _Val):
        raise Unsupported("bias")
    _gemm_check(bias, a, b)
    A, ta, lda, _ = _mat(seg, a)
    B, tb, ldb, _ = _mat(seg, b)
    M, K, N = a.size[0], a.size[1], b.size[1]
    row = bias.size in ((N,), (1, N))
    if beta == 1.0 and row:
        bv = seg.dense(_Val(bias.loc, bias.off, (N,), (bias.stride[-1],),
                            bias.dtype))
        c = seg.new((M, N), a.dtype)
        seg.gemm(c, A, B, M, N, K, alpha=alpha, bias=bv, ta=ta, tb=tb,
                 lda=lda, ldb=ldb, ldc=N)
        return c
    c = seg.spread(bias, (M, N), a.dtype)
    if c is bias:       # C is written: never into the bias' own memory
        d = seg.new((M, N), a.dtype)
        seg.copy(d, c)
        c = d
    seg.gemm(c, A, B, M, N, K, alpha=alpha, beta=beta, ta=ta, tb=tb,
             lda=lda, ldb=ldb, ldc=N)
    return c


def _last_dim(node, x, dim):
    nd = len(x.size)
    if nd == 0:
        raise Unsupported("0-d")
    d = dim if dim >= 0 else dim + nd
    if d != nd - 1:
        raise Unsupported("not the last dim")


def _softmax(seg, node, args):
    x, dim, half = args[0], args[1], args[2]
    if half:
        raise Unsupported("half_to_float")
    _last_dim(node, x, dim)
    x = seg.dense(x)
    cols = x.size[-1]
    rows = x.numel() // cols
    o = seg.new(x.size, x.dtype)
    seg.emit([6, 1, _DT[x.dtype], rows, cols, seg.ref(o), 0, seg.ref(x), 0,
              None, None], [0.0])
    return o


def _layer_norm(seg, node, args):
    x, shape, w, b, eps = args[:5]
    for u in node.users:
        if u.target is not operator.getitem or u.args[1] != 0:
            raise Unsupported("mean/rstd used")
    x = seg.dense(x)
    N = 1
    for s in shape:
        N *= s
    M = x.numel() // N
    gw = seg.convert(w, torch.float32) if isinstance(w, _Val) else None
    gb = seg.convert(b, torch.float32) if isinstance(b, _Val) else None
    o = seg.new(x.size, x.dtype)
    seg.emit([6, 2, _DT[x.dtype], M, N, seg.ref(o), 0, seg.ref(x), 0,
              seg.ref(gw) if gw else None, seg.ref(gb) if gb else None],
             [float(eps)])
    return (o, None, None)


def _reduce(seg, node, args):
    x = args[0]
    op = node.target
    dims = args[1] if len(args) > 1 else None
    keep = node.kwargs.get("keepdim", args[2] if len(args) > 2 else False)
    if node.kwargs.get("dtype") not in (None, x.dtype):
        raise Unsupported("dtype")
    nd = len(x.size)
    lead = sorted(d % nd for d in dims) if dims and nd >= 2 else []
    if op is not aten.amax.default and lead and lead == list(
            range(len(lead))) and len(lead) < nd:
        # sum / mean over the leading dims: ones[1 x P] @ X[P x Q]
        x = seg.dense(x)
        P = 1
        for d in x.size[:len(lead)]:
            P *= d
        Q = x.numel() // P
        o = seg.new(tuple(_meta(node).shape), x.dtype)
        seg.gemm(o, seg.const_ones(x.dtype, P), x, 1, Q, P,
                 alpha=1.0 / P if op is aten.mean.dim else 1.0)
        return o
    if not dims or len(dims) != 1:
        raise Unsupported("not one dim")
    _last_dim(node, x, dims[0])
    del keep
    x = seg.dense(x)
    cols = x.size[-1]
    rows = x.numel() // cols
    out = _meta(node)
    o = seg.new(tuple(out.shape), x.dtype)
    seg.emit([5, 2 if op is aten.amax.default else 1, _DT[x.dtype], rows,
              cols, seg.ref(o), seg.ref(x), 0])
    if op is aten.mean.dim:
        seg.emit([4, 3, _DT[x.dtype], rows, seg.ref(o), seg.ref(o), None],
                 [1.0 / cols])
    return o


def _clone(seg, node, args):
    return seg.dense(args[0])


def _to_copy(seg, node, args):
    kw = dict(node.kwargs)
    dt = kw.pop("dtype", None)
    kw.pop("memory_format", None)
    kw.pop("layout", None)
    dev = kw.pop("device", None)
    if kw or (dev is not None and torch.device(dev) != _meta(node).device):
        raise Unsupported("_to_copy arguments")
    x = args[0]
    return seg.convert(x, dt or x.dtype)


def _full(seg, node, args):
    out = _meta(node)
    v = {aten.zeros.default: 0.0, aten.ones.default: 1.0}.get(node.target)
    if v is None:
        v = args[1]
        if not _scalar(v):
            raise Unsupported("fill value")
    return seg.fill(tuple(out.shape), out.dtype, float(v))


_RULES = {
    aten.add.Tensor: lambda s, n, a: _binary(s, n, a, "add"),
    aten.add.Scalar: lambda s, n, a: _binary(s, n, a, "add"),
    aten.sub.Tensor: lambda s, n, a: _binary(s, n, a, "sub"),
    aten.sub.Scalar: lambda s, n, a: _binary(s, n, a, "sub"),
    aten.mul.Tensor: lambda s, n, a: _binary(s, n, a, "mul"),
    aten.mul.Scalar: lambda s, n, a: _binary(s, n, a, "mul"),
    aten.div.Tensor: lambda s, n, a: _binary(s, n, a, "div"),
    aten.div.Scalar: lambda s, n, a: _binary(s, n, a, "div"),
    aten.rsub.Scalar: lambda s, n, a: _binary(s, n, a, "rsub"),
    aten.neg.default: _unary,
    aten.relu.default: _unary,
    aten.gelu.default: _unary,
    aten.silu.default: _unary,
    aten.exp.default: _unary,
    aten.sigmoid.default: _sigmoid,
    aten.mm.default: _mm,
    aten.bmm.default: _bmm,
    aten.addmm.default: _addmm,
    aten._softmax.default: _softmax,
    aten.native_layer_norm.default: _layer_norm,
    aten.sum.dim_IntList: _reduce,
    aten.mean.dim: _reduce,
    aten.amax.default: _reduce,
    aten.clone.default: _clone,
    aten._to_copy.default: _to_copy,
    aten.full.default: _full,
    aten.zeros.default: _full,
    aten.ones.default: _full,
}

#: The ATen ops the compiler lowers into command lists (their names).
LOWERED_OPS = sorted(str(op) for op in list(_RULES) + list(_VIEW_OPS)) + [
    "operator.getitem"]


def _name(node):
    return str(node.target) if node.op == "call_function" else node.op


def _tensor_ok(t, card):
    # static shapes only: a symbolic size (dynamic=True) runs eagerly
    return (isinstance(t, torch.Tensor) and t.device.type == "spyre" and
            t.device.index == card and t.dtype in _DT and
            all(type(d) is int for d in t.shape) and
            all(type(d) is int for d in t.stride()) and
            0 < t.numel() < (1 << 29))


# ---- the program: plan and runtime --------------------------------------------

class _Program:
    """One inference graph: builds the plan on the first call (with the real
    inputs, to bind parameters in place) and replays it afterwards.  Called
    by aot_autograd (boxed calling convention: a list of inputs), or, for
    lean graphs, through ``entry`` (Dynamo's own flat arguments)."""

    _boxed_call = True

    def __init__(self, gm):
        self.gm = gm
        self.plan = None
        self.handles = []
        self.bound = []         # (placeholder index, tensor) read in place
        self.last_args = None   # with keep_last_inputs(True)
        self.last_inputs = None
        self.fast = None        # (handle, input indices, output map, nodes)
        # [handle]: the graph entry hands the whole call to (graph_call),
        # 0 while there is none (no plan yet, or not one command list)
        self.direct = [0]
        self.entry = None       # set by _lean()

    def __del__(self):
        self._free()

    def _free(self):
        d = getattr(self, "direct", None)
        if d:
            d[0] = 0
        for h in getattr(self, "handles", ()):
            try:
                torch.ops.spyre.graph_destroy(h)
            except Exception:   # noqa: BLE001 (interpreter shutdown)
                pass
        self.handles = []

    def __call__(self, args):
        # the bound tensors must be the same objects (cheap); that their
        # storage did not change is checked by graph_run (C++)
        if self.plan is None or any(args[i] is not t
                                    for i, t in self.bound):
            self._build_or_eager(args)
        _STATS["runs"] += 1
        if _KEEP[0]:
            self.last_args = list(args)
        try:
            return self._run(args)
        except ValueError:
            if not any(torch.ops.spyre.graph_stale(h) for h in self.handles):
                raise
        self._build_or_eager(args)      # a parameter got new storage
        return self._run(args)

    def _build_or_eager(self, args):
        try:
            self._build(args)
        except Exception as e:  # noqa: BLE001 (a lowering bug)
            warnings.warn(f"spyre: lowering failed ({e}); the graph runs "
                          "eagerly")
            self._free()
            self._eager_plan()

    # -- plan
    def _build(self, args):
        self._free()
        _STATS["builds"] += 1
        nodes = list(self.gm.graph.nodes)
        phs = [n for n in nodes if n.op == "placeholder"]
        ph_index = {n: i for i, n in enumerate(phs)}
        real = {n: args[i] for n, i in ph_index.items()}
        # constants of the graph (get_attr: e.g. a tensor the code made)
        consts = {n: _attr(self.gm, n.target) for n in nodes
                  if n.op == "get_attr"}
        real.update(consts)
        plan, seg, where = [], None, {}
        lowered_ops, eager_ops = _STATS["lowered_ops"], _STATS["eager_ops"]
        bound = []

        def value(seg, a):
            """_Val (or tuple) of node ``a`` inside ``seg``."""
            if a in seg.vals:
                return seg.vals[a]
            m = _meta(a)
            if isinstance(m, (list, tuple)) or not _tensor_ok(m, seg.card):
                raise Unsupported("input")
            t = real.get(a)
            if isinstance(t, torch.Tensor) and t.is_leaf and (
                    isinstance(t, torch.nn.Parameter) or t.requires_grad or
                    a in consts) and t.is_spyre and t.dtype in _DT:
                k = id(t)
                if k not in seg.bound_ids:
                    seg.bound.append(t)
                    seg.bound_ids[k] = len(seg.bound)
                    if a in ph_index:
                        bound.append((ph_index[a], t))
                v = _Val(seg.bound_ids[k], 0, t.shape, t.stride(), t.dtype)
            else:
                blk = _Block(m.numel() * _esize(m.dtype))
                seg.staged.append((a, blk))
                v = _Val(blk, 0, m.shape, _contig_strides(m.shape), m.dtype)
            seg.vals[a] = v
            return v

        def lower(seg, node):
            if node.op != "call_function":
                raise Unsupported(node.op)
            m = _meta(node)
            outs = m if isinstance(m, (list, tuple)) else [m]
            for t in outs:
                if t is not None and not _tensor_ok(t, seg.card):
                    raise Unsupported("output")
            if node.target is operator.getitem:
                src = value(seg, node.args[0])
                if not isinstance(src, tuple) or src[node.args[1]] is None:
                    raise Unsupported("getitem")
                return src[node.args[1]]
            rule = _RULES.get(node.target)
            if rule is None and node.target not in _VIEW_OPS:
                raise Unsupported("op")

            def conv(a):
                if _is_node(a):
                    return value(seg, a)
                if isinstance(a, (list, tuple)):
                    if any(_is_node(x) for x in a):
                        raise Unsupported("list of tensors")
                return a
            cargs = [conv(a) for a in node.args]
            if any(_is_node(v) for v in node.kwargs.values()):
                raise Unsupported("tensor kwarg")
            if node.target in _VIEW_OPS:
                return _lower_view(seg, node, cargs)
            return rule(seg, node, cargs)

        def card_of(node):
            m = _meta(node)
            t = m[0] if isinstance(m, (list, tuple)) and m else m
            if isinstance(t, torch.Tensor) and t.device.type == "spyre":
                return t.device.index if t.device.index is not None else 0
            return None

        segs = []
        for node in nodes:
            if node.op in ("placeholder", "output", "get_attr"):
                continue
            card = card_of(node)
            done = False
            if card is not None and node.op == "call_function":
                if seg is not None and seg.card != card:
                    segs.append(seg)
                    plan.append(("seg", seg))
                    seg = None
                if seg is None:
                    seg = _Segment(card)
                snap = seg.snapshot()
                try:
                    seg.vals[node] = lower(seg, node)
                    seg.nodes.append(node)
                    where[node] = seg
                    done = True
                except Exception:   # noqa: BLE001 (Unsupported, or a
                    # case a rule did not foresee: either way, eager)
                    seg.rollback(snap)
                    seg.vals.pop(node, None)
            if not done:
                if seg is not None:
                    segs.append(seg)
                    plan.append(("seg", seg))
                    seg = None
                plan.append(("eager", node))
                where[node] = None
        if seg is not None:
            segs.append(seg)
            plan.append(("seg", seg))

        # what each segment must hand out: values used outside it
        out_node = nodes[-1]
        final = []
        bound_of = {}           # handle -> the tensors its graph binds
        for step in plan:
            if step[0] == "eager":
                final.append(step)
                continue
            seg = step[1]
            members = set(seg.nodes)
            has_compute = any(n.target not in _VIEW_OPS and n.target is not
                              operator.getitem for n in seg.nodes)
            if not has_compute:
                # views only: run them eagerly, nothing to launch
                for n in seg.nodes:
                    where[n] = None
                    final.append(("eager", n))
                continue
            replay, outs = [], []
            for n in seg.nodes:
                if all(u in members for u in n.users):
                    continue
                v = seg.vals[n]
                if not isinstance(v, _Val):
                    raise AssertionError("tuple value used outside")
                if isinstance(v.loc, _Block) and not any(
                        v.loc is b for _, b in seg.staged):
                    if not _dense(v.size, v.stride):
                        d = seg.new(v.size, v.dtype)
                        seg.copy(d, v)
                        v = d
                    outs.append((n, v))
                else:
                    replay.append(n)
            # a view of an input needed outside: replay it (and the views
            # it is made from) eagerly on the real input
            need = set(replay)
            stack = list(replay)
            while stack:
                n = stack.pop()
                for a in n.all_input_nodes:
                    if a in members and a not in need:
                        need.add(a)
                        stack.append(a)
            seg.outputs = outs
            arena_bytes, code, fv, ins, ospec = seg.finalize()
            arena = torch.empty(arena_bytes, dtype=torch.uint8,
                                device=torch.device("spyre", seg.card))
            try:
                h = torch.ops.spyre.graph_create(
                    seg.card, [arena] + seg.bound, code, fv, ins, ospec)
            except Exception:
                if os.environ.get("SPYRE_COMPILE_DEBUG"):
                    for i, (c, f) in enumerate(zip(seg.cmds, seg.fvals)):
                        print(f"# cmd {i}: " + " ".join(
                            f"{_dbg(x)}" for x in c) + f" {f}",
                            file=sys.stderr)
                raise
            self.handles.append(h)
            bound_of[h] = list(seg.bound)
            _STATS["segments"] += 1
            for n in seg.nodes:
                lowered_ops[_name(n)] = lowered_ops.get(_name(n), 0) + 1
            final.append(("seg", h, [n for n, _ in seg.staged],
                          [n for n, _ in outs], len(seg.nodes), arena))
            for n in seg.nodes:
                if n in need:
                    final.append(("eager", n))
        for step in final:
            if step[0] == "eager":
                n = step[1]
                eager_ops[_name(n)] = eager_ops.get(_name(n), 0) + 1
        self.plan = final
        self.consts = consts
        self.phs = phs
        self.out_node = out_node
        self.bound = bound
        # one command list fed by placeholders only and producing every
        # output: the runtime skips the interpreter (per-call cost)
        self.fast = None
        outs_arg = out_node.args[0]
        if len(final) == 1 and final[0][0] == "seg" and isinstance(
                outs_arg, (tuple, list)):
            _, h, ins, outs, nn_, _arena = final[0]
            if all(n in ph_index for n in ins) and all(
                    isinstance(o, torch.fx.Node) and o in outs
                    for o in outs_arg):
                self.fast = (h, [ph_index[n] for n in ins],
                             [outs.index(o) for o in outs_arg], nn_)
                # the whole call in one C++ call (graph_call): where the
                # graph's inputs and bound tensors are among the arguments
                arg_of = {id(t): i for i, t in bound}
                torch.ops.spyre.graph_set_call(
                    h, self.fast[1],
                    [arg_of.get(id(t), -1) for t in bound_of[h]],
                    self.fast[2], nn_)
                self.direct[0] = h

    def _eager_plan(self):
        self.fast = None
        self.direct[0] = 0
        nodes = list(self.gm.graph.nodes)
        self.phs = [n for n in nodes if n.op == "placeholder"]
        self.consts = {n: _attr(self.gm, n.target) for n in nodes
                       if n.op == "get_attr"}
        self.out_node = nodes[-1]
        self.plan = [("eager", n) for n in nodes
                     if n.op not in ("placeholder", "output", "get_attr")]
        self.bound = []

    # -- runtime
    def _run(self, args):
        if self.fast is not None:
            h, idx, omap, nn_ = self.fast
            xs = [args[i] for i in idx]
            if _KEEP[0]:
                self.last_inputs = xs
            res = torch.ops.spyre.graph_run.default(h, xs)
            _STATS["lowered_nodes_run"] += nn_
            return [res[i] for i in omap]
        env = dict(zip(self.phs, args))
        env.update(self.consts)
        neager = nlow = 0

        def get(a):
            return env[a]
        for step in self.plan:
            if step[0] == "seg":
                _, h, ins, outs, nn_, _arena = step
                xs = [env[n] for n in ins]
                if _KEEP[0]:
                    self.last_inputs = xs
                res = torch.ops.spyre.graph_run(h, xs)
                for n, t in zip(outs, res):
                    env[n] = t
                nlow += nn_
            else:
                n = step[1]
                a = torch.fx.node.map_arg(n.args, get)
                kw = torch.fx.node.map_arg(n.kwargs, get)
                env[n] = n.target(*a, **kw)
                neager += 1
        _STATS["lowered_nodes_run"] += nlow
        _STATS["eager_nodes_run"] += neager
        out = torch.fx.node.map_arg(self.out_node.args[0], get)
        return list(out) if isinstance(out, (list, tuple)) else [out]

    def info(self):
        """Per segment (graph_info): [commands, command bytes, arena bytes,
        buffers, staged inputs, outputs]."""
        return [torch.ops.spyre.graph_info(h) for h in self.handles]


_PROGRAMS = []          # weak references to the live programs (for stats)
_KEEP = [False]


def _lean(prog):
    """The callable Dynamo gets for a lean graph (see :func:`spyre`): called
    with the graph's flat arguments, returns its outputs.  Once the plan is
    one command list fed by arguments only, a call is one C++ call
    (``graph_call``: the bound tensors checked, the inputs staged, the graph
    launched, the outputs staged out, one submit ioctl); otherwise, and when
    a bound tensor changed (``ValueError``: the plan is rebuilt), the
    program's own interpreter runs it."""
    call = torch.ops.spyre.graph_call.default
    direct, keep = prog.direct, _KEEP

    def spyre_compiled_call(*args):
        h = direct[0]
        if h:
            if keep[0]:
                prog.last_args = args
            try:
                return call(h, args)
            except ValueError:
                pass
        return prog(list(args))

    prog.entry = spyre_compiled_call
    return spyre_compiled_call


def keep_last_inputs(on=True):
    """For benchmarks: each compiled program keeps its last call's inputs
    (``last_args``, aot_autograd's flat list) and its last segment's staged
    inputs (``last_inputs``), holding those tensors alive until the next
    call.  Returns the previous setting."""
    prev = _KEEP[0]
    _KEEP[0] = bool(on)
    return prev


def _fw_compiler(gm, example_inputs):
    import weakref
    p = _Program(gm)
    _PROGRAMS.append(weakref.ref(p))
    return p


def _lean_graph(gm, example_inputs):
    """aot_autograd's ATen graph of ``gm`` (traced with the fake
    ``example_inputs``, functionalized, under no_grad) when calling it needs
    none of aot_autograd's runtime wrappers: no input is mutated, no output
    aliases an input or another output, the arguments are flat tensors and
    the graph takes them as they are (aot_export_joint_simple checks all of
    that and raises otherwise).  None when it does not apply."""
    if not all(isinstance(t, torch.Tensor) for t in example_inputs):
        return None
    if os.environ.get("SPYRE_COMPILE_WRAPPED") == "1":
        return None     # measurements: every graph inside the wrappers
    from torch._functorch.aot_autograd import aot_export_joint_simple
    try:
        g = aot_export_joint_simple(gm, list(example_inputs),
                                    trace_joint=False)
    except Exception:   # noqa: BLE001 (mutation, aliasing, anything
        return None     # export refuses: aot_autograd's full path)
    phs = [n for n in g.graph.nodes if n.op == "placeholder"]
    if len(phs) != len(example_inputs):
        return None
    return g


def programs():
    """The live compiled programs (for reports: ``p.info()`` lists each
    segment's commands, command bytes and arena bytes)."""
    out = [r() for r in _PROGRAMS]
    return [p for p in out if p is not None]


_warned = False


def spyre(gm, example_inputs, **kwargs):
    """The ``spyre`` Dynamo backend: ``torch.compile(model,
    backend="spyre", dynamic=False)``.

    ``gm`` is the torch.fx graph Dynamo captured, ``example_inputs`` its
    (fake) inputs.  With autograd off (or no input requiring grad), the
    graph goes through aot_autograd's inference path and its ATen graph is
    lowered to command lists (see the module's docstring); with autograd
    on, it runs eagerly (a warning, once).  Returns the callable Dynamo
    runs.  Lowering problems never raise: what cannot be lowered runs
    eagerly.  Errors of the card while running are the eager backend's
    (RuntimeError, torch.OutOfMemoryError).

    Per-call cost: an inference graph that mutates no input and returns no
    alias of an input (checked by aot_autograd's
    ``aot_export_joint_simple`` at compile time) needs none of
    aot_autograd's runtime wrappers, so Dynamo gets a lean callable
    (:func:`_lean`) and one call of a one-command-list graph is one C++
    call; any other graph runs inside aot_autograd's wrappers as before."""
    global _warned
    _STATS["compiles"] += 1
    if torch.is_grad_enabled() and any(
            isinstance(t, torch.Tensor) and t.requires_grad
            for t in example_inputs):
        _STATS["eager_graphs"] += 1
        if not _warned:
            warnings.warn("spyre: torch.compile lowers inference graphs "
                          "only (use torch.no_grad()); this graph runs "
                          "eagerly")
            _warned = True
        return gm.forward
    g = _lean_graph(gm, example_inputs)
    if g is not None:
        import weakref
        p = _Program(g)
        _PROGRAMS.append(weakref.ref(p))
        _STATS["lean_graphs"] += 1
        return _lean(p)
    _STATS["wrapped_graphs"] += 1
    from torch._dynamo.backends.common import aot_autograd
    return aot_autograd(fw_compiler=_fw_compiler,
                        inference_compiler=_fw_compiler)(gm, example_inputs)
