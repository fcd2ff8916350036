# SPDX-License-Identifier: MIT
"""Tests of the ``spyre`` torch.distributed backend
(torch_spyre/distributed.py), run by test_torch.py (names start with
``torch_dist_``).  Two ranks, one card each: rank 0 is test_torch.py's own
process on spyre:0, rank 1 a worker started with ``spawn`` on spyre:1 when
the run begins (:func:`start`), so its ``import torch`` overlaps the other
tests.  Each test body runs on both ranks (the worker runs the same body
when told its name); every collective on spyre tensors is compared exactly
with the same collective of CPU tensors over a gloo group.
"""

import os
import tempfile
import traceback
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F

import ktap

TESTS = []
BODIES = {}
_W = {}         # the worker: process, command and result queues
_G = {}         # per process: the gloo reference group
TIMEOUT = timedelta(seconds=180)
R = dist.ReduceOp


def _env():
    # gloo over loopback (the guest brings lo up for torch runs); Debian's
    # torch has no libuv for the TCP store: the rendezvous is a file
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    os.environ["USE_LIBUV"] = "0"


def _init(rank, path):
    _env()
    torch.spyre.set_device(rank)
    dist.init_process_group("spyre", init_method="file://" + path,
                            rank=rank, world_size=2, timeout=TIMEOUT)
    _G["gloo"] = dist.new_group(backend="gloo", timeout=TIMEOUT)


def _worker(path, cmds, results):
    """Rank 1: join the group when told ("init"; its rendezvous times out
    after TIMEOUT, and the tests before the first torch_dist_* one may take
    longer than that, e.g. on the debug kernel), then run the bodies named
    on ``cmds`` until None."""
    if cmds.get() != "init":
        return
    try:
        _init(1, path)
    except Exception:               # noqa: BLE001
        results.put(traceback.format_exc())
        return
    results.put("ready")
    while True:
        name = cmds.get()
        if name is None:
            break
        try:
            BODIES[name](1)
            results.put("ok")
        except Exception:           # noqa: BLE001
            results.put(traceback.format_exc())
    dist.destroy_process_group()


def start():
    """Start rank 1 (call once, before the tests; a no-op with one card)."""
    if torch.spyre.device_count() < 2 or _W:
        return
    ctx = mp.get_context("spawn")
    path = tempfile.mktemp(prefix="spyre-dist-")
    cmds, results = ctx.Queue(), ctx.Queue()
    p = ctx.Process(target=_worker, args=(path, cmds, results), daemon=True)
    p.start()
    _W.update(proc=p, cmds=cmds, results=results, path=path, up=False)


def stop():
    """Let rank 1 leave the group and exit."""
    if not _W:
        return
    _W["cmds"].put(None)           # "init" was never sent, or the end
    if _W["up"]:
        dist.destroy_process_group()
    _W["proc"].join(60)
    if _W["proc"].is_alive():       # never joined, or stuck
        _W["proc"].kill()
        _W["proc"].join()
    _W.clear()


def _result():
    r = _W["results"].get(timeout=TIMEOUT.total_seconds())
    if r not in ("ok", "ready"):
        raise AssertionError("rank 1 failed:\n" + r)


def both(fn):
    """A test whose body ``fn(rank)`` runs on both ranks."""
    BODIES[fn.__name__] = fn

    def run():
        assert _W, "needs two cards"
        if not _W["up"]:
            _W["cmds"].put("init")
            _init(0, _W["path"])
            _result()                       # rank 1 joined
            _W["up"] = True
        _W["cmds"].put(fn.__name__)
        try:
            fn(0)
        finally:
            _result()
    run.__name__ = fn.__name__
    TESTS.append(run)
    return fn


def dev(rank):
    return torch.device("spyre", rank)


def gloo_ref(rank, coll, cpu, *args, **kw):
    """Run collective ``coll`` on CPU tensors over the gloo group."""
    return coll(*cpu, *args, group=_G["gloo"], **kw)


def data(rank, n, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed * 10 + rank)
    if dtype.is_floating_point:
        return torch.randn(n, generator=g).to(dtype)
    return torch.randint(-1000, 1000, (n,), generator=g, dtype=dtype)


def same(got, want):
    """``got`` (spyre) has exactly ``want``'s (CPU) values."""
    assert got.device.type == "spyre", got.device
    g = got.cpu()
    assert g.dtype == want.dtype and g.shape == want.shape, (g, want)
    assert torch.equal(g, want), (g - want).abs().max()


@both
def torch_dist_all_reduce(rank):
    pg = dist.group.WORLD
    assert pg.getBackendName() == "spyre" and pg.transport == "shm"
    cases = [(op, torch.float32, 1000) for op in
             (R.SUM, R.AVG, R.PRODUCT, R.MIN, R.MAX)]
    cases += [(R.SUM, torch.float16, 777), (R.MAX, torch.bfloat16, 300),
              (R.SUM, torch.int32, 500), (R.BXOR, torch.int32, 500),
              # 20 MiB: two rounds of the 16 MiB staging slots
              (R.SUM, torch.float32, 5 << 20)]
    for i, (op, dtype, n) in enumerate(cases):
        x = data(rank, n, dtype, i)
        t = x.to(dev(rank))
        dist.all_reduce(t, op=op)
        ref = x.clone()
        if op == R.AVG:         # gloo has no AVG: its sum, then / world
            gloo_ref(rank, dist.all_reduce, [ref], op=R.SUM)
            ref = ref / 2
        else:
            gloo_ref(rank, dist.all_reduce, [ref], op=op)
        same(t, ref)
    # SUM, AVG, PRODUCT, all_gather and broadcast run on the card alone
    # (strict mode: a CPU fallback would raise)
    x = data(rank, 4096, seed=8)
    t, outs = x.to(dev(rank)), torch.empty(2, 4096, device=dev(rank))
    with torch.spyre.strict():
        for op in (R.SUM, R.AVG, R.PRODUCT):
            dist.all_reduce(t, op=op)
        dist.all_gather_into_tensor(outs, t)
        dist.broadcast(t, src=1)
    for op in (R.SUM, R.AVG, R.PRODUCT):
        gloo_ref(rank, dist.all_reduce, [x], op=R.SUM if op == R.AVG else op)
        x = x / 2 if op == R.AVG else x
    same(t, x)
    same(outs, torch.stack([x, x]))
    # CPU tensors on the spyre group go to its gloo group
    c = data(rank, 64, seed=9)
    dist.all_reduce(c)
    want = data(0, 64, seed=9) + data(1, 64, seed=9)
    assert torch.equal(c, want)


@both
def torch_dist_all_gather(rank):
    for i, dtype in enumerate((torch.float32, torch.float16, torch.int64)):
        x = data(rank, 333, dtype, i)
        outs = [torch.empty(333, dtype=dtype, device=dev(rank))
                for _ in range(2)]
        dist.all_gather(outs, x.to(dev(rank)))
        refs = [torch.empty_like(x) for _ in range(2)]
        gloo_ref(rank, dist.all_gather, [refs, x])
        for o, r in zip(outs, refs):
            same(o, r)
        out = torch.empty(2, 333, dtype=dtype, device=dev(rank))
        dist.all_gather_into_tensor(out, x.to(dev(rank)))
        same(out, torch.stack(refs))
    # a misuse is a Python exception, the group stays usable
    try:
        dist.all_gather_into_tensor(torch.empty(3, device=dev(rank)),
                                    torch.ones(2, device=dev(rank)))
    except ValueError as e:
        assert "world x" in str(e), e
    else:
        raise AssertionError("bad all_gather_into_tensor accepted")


@both
def torch_dist_reduce_scatter(rank):
    for i, op in enumerate((R.SUM, R.MAX, R.AVG)):
        ins = [data(rank, 250, seed=10 * i + j) for j in range(2)]
        out = torch.empty(250, device=dev(rank))
        dist.reduce_scatter(out, [t.to(dev(rank)) for t in ins], op=op)
        # the reference: an all_reduce over gloo of rank-ordered inputs
        whole = torch.cat(ins)
        gloo_ref(rank, dist.all_reduce, [whole],
                 op=R.SUM if op == R.AVG else op)
        if op == R.AVG:
            whole = whole / 2
        same(out, whole[rank * 250:(rank + 1) * 250])
        big = torch.cat(ins).to(dev(rank))
        out2 = torch.empty(250, device=dev(rank))
        dist.reduce_scatter_tensor(out2, big, op=op)
        same(out2, whole[rank * 250:(rank + 1) * 250])


@both
def torch_dist_broadcast(rank):
    for root, dtype in ((0, torch.float32), (1, torch.bfloat16)):
        x = data(rank, 4099, dtype, root)
        t = x.to(dev(rank))
        dist.broadcast(t, src=root)
        ref = x.clone()
        gloo_ref(rank, dist.broadcast, [ref], src=root)
        same(t, ref)
        assert torch.equal(ref, data(root, 4099, dtype, root))


@both
def torch_dist_barrier_work_and_groups(rank):
    dist.barrier()
    # an async collective: its work completes on the caller's stream
    t = torch.full((1000,), float(rank + 1), device=dev(rank))
    w = dist.all_reduce(t, async_op=True)
    u = t * 2                           # queued after it, sees the sum
    w.synchronize()
    assert w.is_completed() and w.is_success()
    fut = w.get_future()
    assert fut.done() and fut.value()[0] is t
    same(u, torch.full((1000,), 6.0))
    # a new group with the spyre backend
    g = dist.new_group([0, 1], backend="spyre")
    x = torch.full((8,), float(rank), device=dev(rank))
    dist.all_reduce(x, op=R.MAX, group=g)
    same(x, torch.ones(8))
    dist.barrier(group=g)
    dist.destroy_process_group(g)


@both
def torch_dist_tensor_parallel_mlp(rank):
    # y = W2 gelu(W1 x + b1) + b2: W1 split by output rows (column
    # parallel), W2 by input columns (row parallel), one all_reduce; equal
    # to the whole MLP on one card
    g = torch.Generator().manual_seed(7)
    d, h = 32, 64
    x = torch.randn(4, d, generator=g)
    w1, b1 = torch.randn(h, d, generator=g) / 8, torch.randn(h, generator=g)
    w2, b2 = torch.randn(d, h, generator=g) / 8, torch.randn(d, generator=g)
    D = dev(rank)
    s = slice(rank * h // 2, (rank + 1) * h // 2)
    xh = x.to(D)
    part = F.linear(F.gelu(F.linear(xh, w1[s].to(D), b1[s].to(D))),
                    w2[:, s].to(D))
    dist.all_reduce(part)
    y = part + b2.to(D)
    whole = F.linear(F.gelu(F.linear(xh, w1.to(D), b1.to(D))), w2.to(D),
                     b2.to(D))
    torch.testing.assert_close(y.cpu(), whole.cpu(), rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(
        y.cpu(), F.linear(F.gelu(F.linear(x, w1, b1)), w2, b2),
        rtol=1e-4, atol=1e-4)


@both
def torch_dist_large_tensors_take_rounds(rank):
    # above the 16 MiB slot: several rounds each
    n = (4 << 20) + 4096                    # 16 MiB + 16 KiB of float32
    x = data(rank, n, seed=21)
    t = x.to(dev(rank))
    dist.broadcast(t, src=1)
    same(t, data(1, n, seed=21))
    outs = torch.empty(2, n, device=dev(rank))
    dist.all_gather_into_tensor(outs, x.to(dev(rank)))
    same(outs, torch.stack([data(0, n, seed=21), data(1, n, seed=21)]))
    m = (2 << 20) + 1024                    # a slot holds 2 x 2 Mi floats
    big = data(rank, 2 * m, seed=22)
    out = torch.empty(m, device=dev(rank))
    dist.reduce_scatter_tensor(out, big.to(dev(rank)))
    ref = big.clone()
    gloo_ref(rank, dist.all_reduce, [ref])
    same(out, ref[rank * m:(rank + 1) * m])


@both
def torch_dist_misuse_raises_on_every_rank(rank):
    # arguments one rank cannot use, calls that do not match, an op the
    # dtype cannot take: ValueError on both ranks, nobody waits for
    # gloo's timeout, and the group carries on
    def raises(fn, text):
        ktap.raises(fn, text, f"no ValueError ({text})", ValueError)
    good = torch.ones(8, 8, device=dev(rank))
    arg = good.t() if rank == 1 else good           # strided on rank 1
    raises(lambda: dist.all_reduce(arg),
           "contiguous" if rank == 1 else "rank(s) [1] passed arguments")
    raises(lambda: dist.all_reduce(torch.ones(10 + 2 * rank,
                                              device=dev(rank))),
           "do not match")
    raises(lambda: dist.all_reduce(torch.ones(4, dtype=torch.int32,
                                              device=dev(rank)),
                                   op=R.AVG), "AVG needs")
    raises(lambda: dist.broadcast(good, src=2 + rank), "no rank")
    dist.all_reduce(good)
    same(good, torch.full((8, 8), 2.0))


@both
def torch_dist_sticky_error(rank):
    # last: rank 1's context goes into error; the next collective fails
    # on both ranks with the same message, and nobody waits for a timeout
    t = torch.ones(16, device=dev(rank))
    dist.barrier()
    if rank == 1:
        torch.ops.spyre._inject_fault(1)
        assert torch.ops.spyre.context_error(1) != 0
    try:
        dist.all_reduce(t)
    except RuntimeError as e:
        assert "rank(s) [1]" in str(e) and "in error" in str(e), e
    else:
        raise AssertionError("collective with a failed rank succeeded")
