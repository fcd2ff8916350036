# SPDX-License-Identifier: MIT
"""The ``spyre`` backend of torch.distributed: collectives on spyre tensors.

``torch.distributed.init_process_group("spyre")`` (registered when torch_spyre
loads, for the ``spyre`` and ``cpu`` devices) gives a process group whose
``all_reduce`` (SUM, AVG, PRODUCT, MIN, MAX; BAND/BOR/BXOR for integers),
``all_gather`` / ``all_gather_into_tensor``, ``reduce_scatter`` /
``reduce_scatter_tensor``, ``broadcast`` and ``barrier`` take spyre tensors
(one per call and process: one card per rank, the current card's or the
tensor's).  CPU tensors go to an inner gloo group unchanged.

Transports, chosen when the group is made:

* ``shm``, when every rank runs in this machine (the same boot id): one
  file in ``/dev/shm`` mapped by every rank and registered with its card
  (torch.ops.spyre.host_alias: the card reads and writes it without a CPU
  copy), two rounds of one 16 MiB slot per rank (larger tensors go in
  several rounds).  Each rank's card copies its part into its slot; after
  the round's barrier the card reduces with the peers' parts read in place
  from their slots (SUM, AVG, PRODUCT: element-wise ops on the card, in
  rank order, so every rank gets the same bits; MIN, MAX and the bitwise
  ops on the host over the mapping) or copies them out (all_gather,
  broadcast).  Device memory of one card cannot be mapped by another (no
  peer-to-peer DMA), so system memory is the meeting point.
* ``gloo`` otherwise (ranks in different machines): the tensor goes
  through a CPU tensor and the inner gloo group's collective.

Every round starts with a gloo exchange of one status word per rank, which
is the barrier and carries a sticky card error: when one rank's context is
in error (or its copy failed), the collective raises RuntimeError on every
rank instead of leaving the others waiting for gloo's timeout.

Work objects: ``wait()`` returns once the result is queued on the caller's
current stream (later work on that stream sees it); ``synchronize()``
blocks until the card has written it; ``is_completed()`` asks the card;
``get_future()`` gives a completed torch.futures.Future of the outputs.
Workers of a group must be separate processes started with ``spawn``.
"""

import os
import uuid
from datetime import timedelta

import torch
import torch.distributed as dist

__all__ = ["ProcessGroupSpyre", "SLOT_BYTES"]

SLOT_BYTES = 16 << 20           # staging bytes per rank and round
_ROUNDS = 2                     # slots per rank: a round may overlap the next
_R = dist.ReduceOp
_ON_CARD = {_R.SUM: torch.Tensor.add_, _R.AVG: torch.Tensor.add_,
            _R.PRODUCT: torch.Tensor.mul_}
_ON_HOST = {_R.MIN: torch.minimum, _R.MAX: torch.maximum,
            _R.BAND: torch.bitwise_and, _R.BOR: torch.bitwise_or,
            _R.BXOR: torch.bitwise_xor}


def _kind(opts, what):
    """The ReduceOp type (ReduceOp.SUM, ...) of ``opts.reduceOp`` (a
    ReduceOp object, equal to its type but not hashed like it); SUM
    without ``opts``.  Raises ValueError for an op this backend lacks."""
    if opts is None:
        return _R.SUM
    for k in (*_ON_CARD, *_ON_HOST):
        if opts.reduceOp == k:
            return k
    raise ValueError(f"spyre: {what}: unsupported reduce op "
                     f"{opts.reduceOp}")


def _boot_id():
    with open("/proc/sys/kernel/random/boot_id") as f:
        return f.read().strip()


def _one(tensors, what):
    if len(tensors) != 1:
        raise ValueError(f"spyre: {what} takes one tensor per process, "
                         f"got {len(tensors)}")
    return tensors[0]


def _flat(t):
    """A flat view of contiguous ``t`` (element order)."""
    if not t.is_contiguous():
        raise ValueError("spyre: collectives need contiguous tensors")
    return t.view(-1)


class _Work(dist.Work):
    """A collective's work: its outputs are queued on a stream, ``event``
    (a torch.Event recorded after them, or None when nothing was queued)
    marks their end on the card."""

    def __init__(self, outputs, event=None):
        super().__init__()
        self._outputs = outputs
        self._event = event

    def wait(self, timeout=timedelta(0)):
        """The outputs are in stream order already: nothing to wait for on
        the host.  Returns True."""
        return True

    def synchronize(self):
        if self._event is not None:
            self._event.synchronize()

    def is_completed(self):
        return self._event is None or self._event.query()

    def is_success(self):
        return True

    def result(self):
        return self._outputs

    def get_future(self):
        fut = torch.futures.Future()
        fut.set_result(self._outputs)
        return fut


class _Shm:
    """The shared staging file: ``_ROUNDS`` x world slots of SLOT_BYTES,
    mapped by every rank (a CPU uint8 tensor) and registered with the
    rank's card (a spyre host alias of it: the card reads and writes the
    slots directly).  The file is unlinked once every rank has mapped it,
    so nothing is left in /dev/shm."""

    def __init__(self, store, rank, world):
        if rank == 0:
            path = f"/dev/shm/spyre-c10d-{uuid.uuid4().hex}"
            store.set("shm", path)
        else:
            path = store.get("shm").decode()
        self.buf = torch.from_file(path, shared=True,
                                   size=_ROUNDS * world * SLOT_BYTES,
                                   dtype=torch.uint8)
        store.set(f"mapped{rank}", "1")
        if rank == 0:
            store.wait([f"mapped{r}" for r in range(world)])
            os.unlink(path)
        self.world = world
        self.alias = {}         # card index -> host alias of buf

    def slot(self, rnd, rank, like, n, card=True):
        """The first ``n`` elements of ``like``'s dtype in ``rank``'s slot
        of round ``rnd``: on ``like``'s card (``card``), else a CPU tensor
        over the mapping."""
        off = ((rnd % _ROUNDS) * self.world + rank) * SLOT_BYTES
        if not card:
            buf = self.buf
        else:
            i = like.device.index
            if i not in self.alias:
                self.alias[i] = torch.ops.spyre.host_alias(self.buf, i)
            buf = self.alias[i]
        return buf[off:off + SLOT_BYTES].view(like.dtype)[:n]


def _try(fn):
    """Run ``fn``; return (its result, None) or (None, the RuntimeError)."""
    try:
        return fn(), None
    except RuntimeError as e:
        return None, e


class ProcessGroupSpyre(dist.ProcessGroup):
    """A process group of ``world`` ranks, each on one card; see the module
    docstring.  Made by torch.distributed through the registered creator
    (``store`` a c10d Store private to the group, ``timeout`` a
    datetime.timedelta for the inner gloo group)."""

    def __init__(self, store, rank, world, timeout):
        super().__init__(rank, world)
        self._rank, self._world = rank, world
        self._gloo = dist.ProcessGroupGloo(dist.PrefixStore("gloo", store),
                                           rank, world, timeout)
        store.set(f"boot{rank}", _boot_id())
        boots = {store.get(f"boot{r}").decode() for r in range(world)}
        self._shm = _Shm(store, rank, world) if len(boots) == 1 else None
        self._round = 0
        self._reads = None      # event after the last round's slot reads
        self._name = self._desc = ""

    def getBackendName(self):
        return "spyre"

    # torch.distributed names each group it makes (_set_group_name(),
    # _set_group_desc()) and reads the name back to unregister it; the C++
    # base class keeps both in its backends, and a group written in Python
    # has none: keep them here
    def _set_group_name(self, name):
        self._name = name

    @property
    def group_name(self):
        return self._name

    def _set_group_desc(self, desc):
        self._desc = desc

    @property
    def group_desc(self):
        return self._desc

    @property
    def transport(self):
        """``"shm"`` or ``"gloo"`` (see the module docstring)."""
        return "shm" if self._shm is not None else "gloo"

    # ---- rounds --------------------------------------------------------------

    def _begin(self, dev, failed=None):
        """Start a round on card ``dev``; returns its number.  This rank's
        reads of earlier rounds' slots are done first (a slot is written
        again two rounds later), then every rank says whether its context
        is in error (or ``failed``, an exception it hit in this round): if
        any is, RuntimeError on every rank."""
        if self._reads is not None:
            _, e = _try(self._reads.synchronize)
            failed = failed or e
            self._reads = None
        bad, e = _try(lambda: torch.ops.spyre.context_error(dev.index))
        failed = failed or e
        st = torch.zeros(self._world, dtype=torch.int64)
        st[self._rank] = int(bool(bad) or failed is not None)
        opts = dist.AllreduceOptions()
        opts.reduceOp = _R.SUM
        self._gloo.allreduce([st], opts).wait()
        if st.any():
            ranks = [r for r in range(self._world) if st[r]]
            raise RuntimeError(
                f"spyre: collective aborted: rank(s) {ranks} of the group "
                "have their card context in error"
                + (f" (here: {failed})" if failed is not None else ""))
        self._round += 1
        return self._round - 1

    def _read_done(self, dev):
        """Mark the end of this round's work on ``dev``'s current stream."""
        ev = torch.Event(device=dev)
        ev.record()
        self._reads = ev

    def _work(self, outputs):
        return _Work(outputs, self._reads)

    def _stage(self, dsts, srcs):
        """Copy each of ``srcs`` (on the card) to its slot part in ``dsts``
        and wait for the card; returns the RuntimeError raised, if any, for
        _begin()."""
        def run():
            for d, x in zip(dsts, srcs):
                d.copy_(x)
            ev = torch.Event(device=srcs[0].device)
            ev.record()
            ev.synchronize()
        return _try(run)[1]

    def _reduce(self, own, rnd, off, op):
        """Reduce rank by rank, in rank order, with ``op``, the parts at
        element ``off`` of round ``rnd``'s slots, own's size: this rank's
        part is ``own`` (on its card), which gets the result.  SUM, AVG,
        PRODUCT run on the card, which reads the peers' slots in place (in
        place in ``own`` when that keeps rank order: rank 0, or two ranks,
        whose one operation commutes); the others on the host over the
        mapping."""
        n, me, w = own.numel(), self._rank, self._world

        def part(r, card):
            return self._shm.slot(rnd, r, own, off + n, card)[off:]
        if op in _ON_CARD:
            f = _ON_CARD[op]
            if me == 0 or w == 2:
                for r in range(w):
                    if r != me:
                        f(own, part(r, True))
                return
            acc = part(0, True).clone()
            for r in range(1, w):
                f(acc, own if r == me else part(r, True))
        else:
            f = _ON_HOST[op]
            acc = part(0, False).clone()
            for r in range(1, w):
                f(acc, part(r, False), out=acc)
        own.copy_(acc)

    def _check_op(self, op, t, what):
        if op in (_R.BAND, _R.BOR, _R.BXOR) and t.is_floating_point():
            raise ValueError(f"spyre: {what}: bitwise ops need integers")

    # ---- all_reduce ------------------------------------------------------------

    def allreduce(self, tensors, opts=None):
        """all_reduce of one tensor per rank, in place."""
        t = _one(tensors, "all_reduce")
        op = _kind(opts, "all_reduce")
        if t.device.type != "spyre":
            return self._gloo_allreduce(t, op)
        self._check_op(op, t, "all_reduce")
        flat = _flat(t)
        if self._shm is None:
            c, e = _try(flat.cpu)
            self._begin(t.device, e)
            self._gloo_allreduce(c, op).wait()
            flat.copy_(c)
            self._read_done(t.device)
            return self._work([t])
        step = SLOT_BYTES // t.element_size()
        for a in range(0, flat.numel(), step):
            part = flat[a:a + step]
            rnd = self._round
            mine = self._shm.slot(rnd, self._rank, part, part.numel())
            self._begin(t.device, self._stage([mine], [part]))
            self._reduce(part, rnd, 0, op)
            self._read_done(t.device)
        if op == _R.AVG:
            flat.div_(self._world)
            self._read_done(t.device)
        return self._work([t])

    def _gloo_allreduce(self, t, op):
        opts = dist.AllreduceOptions()
        opts.reduceOp = _R.SUM if op == _R.AVG else op
        w = self._gloo.allreduce([t], opts)
        if op != _R.AVG:
            return w
        w.wait()
        t.div_(self._world)
        return _Work([t])

    # ---- all_gather ------------------------------------------------------------

    def allgather(self, output_lists, input_list, opts=None):
        """all_gather: ``output_lists[0][r]`` gets rank r's input."""
        outs = _one(output_lists, "all_gather")
        t = _one(input_list, "all_gather")
        if len(outs) != self._world:
            raise ValueError(f"spyre: all_gather needs {self._world} "
                             f"outputs, got {len(outs)}")
        if t.device.type != "spyre":
            return self._gloo.allgather(output_lists, input_list)
        self._gather(_flat(t), [_flat(o) for o in outs])
        return self._work(outs)

    def _allgather_base(self, output, input, opts=None):
        """all_gather_into_tensor: ``output`` is world x ``input``."""
        if output.numel() != self._world * input.numel():
            raise ValueError("spyre: all_gather_into_tensor: the output "
                             "must hold world x the input's elements")
        n = input.numel()
        outs = [_flat(output)[r * n:(r + 1) * n] for r in range(self._world)]
        if input.device.type != "spyre":
            w = self._gloo.allgather([outs], [input.reshape(-1)])
            w.wait()
            return w
        self._gather(_flat(input), outs)
        return self._work([output])

    def _gather(self, flat, outs):
        dev = flat.device
        for o in outs:
            if o.numel() != flat.numel() or o.dtype != flat.dtype:
                raise ValueError("spyre: all_gather: outputs must match the "
                                 "input's size and dtype")
        if self._shm is None:
            c, e = _try(flat.cpu)
            self._begin(dev, e)
            cs = [torch.empty_like(c) for _ in range(self._world)]
            self._gloo.allgather([cs], [c]).wait()
            for o, x in zip(outs, cs):
                o.copy_(x)
            self._read_done(dev)
            return
        step = SLOT_BYTES // flat.element_size()
        for a in range(0, flat.numel(), step):
            part = flat[a:a + step]
            rnd, n = self._round, part.numel()
            mine = self._shm.slot(rnd, self._rank, part, n)
            self._begin(dev, self._stage([mine], [part]))
            for r in range(self._world):
                outs[r][a:a + step].copy_(
                    part if r == self._rank
                    else self._shm.slot(rnd, r, part, n))
            self._read_done(dev)

    # ---- reduce_scatter --------------------------------------------------------

    def reduce_scatter(self, output_list, input_lists, opts=None):
        """reduce_scatter: ``output_list[0]`` gets the reduction over ranks
        of their ``input_lists[0][rank]``."""
        out = _one(output_list, "reduce_scatter")
        ins = _one(input_lists, "reduce_scatter")
        op = _kind(opts, "reduce_scatter")
        if len(ins) != self._world:
            raise ValueError(f"spyre: reduce_scatter needs {self._world} "
                             f"inputs, got {len(ins)}")
        self._scatter(_flat(out), [_flat(i) for i in ins], op)
        return self._work([out])

    def _reduce_scatter_base(self, output, input, opts=None):
        """reduce_scatter_tensor: ``input`` is world x ``output``."""
        op = _kind(opts, "reduce_scatter_tensor")
        if input.numel() != self._world * output.numel():
            raise ValueError("spyre: reduce_scatter_tensor: the input must "
                             "hold world x the output's elements")
        n = output.numel()
        ins = [_flat(input)[r * n:(r + 1) * n] for r in range(self._world)]
        self._scatter(_flat(output), ins, op)
        return self._work([output])

    def _scatter(self, out, ins, op):
        for i in ins:
            if i.numel() != out.numel() or i.dtype != out.dtype:
                raise ValueError("spyre: reduce_scatter: inputs must match "
                                 "the output's size and dtype")
        if out.device.type != "spyre":
            # gloo has no reduce_scatter: an all_reduce of the whole input
            whole = torch.cat(ins)
            self._gloo_allreduce(whole, op).wait()
            n = out.numel()
            out.copy_(whole[self._rank * n:(self._rank + 1) * n])
            return
        self._check_op(op, out, "reduce_scatter")
        dev = out.device
        if self._shm is None:
            c, e = _try(lambda: torch.cat(ins).cpu())
            self._begin(dev, e)
            self._gloo_allreduce(c, op).wait()
            n = out.numel()
            out.copy_(c[self._rank * n:(self._rank + 1) * n])
            self._read_done(dev)
        else:
            # a slot holds this rank's chunk for every destination rank
            step = SLOT_BYTES // out.element_size() // self._world
            me = self._rank
            for a in range(0, out.numel(), step):
                m = min(step, out.numel() - a)
                rnd = self._round
                mine = self._shm.slot(rnd, me, out, m * self._world)
                e = self._stage([mine[d * m:(d + 1) * m]
                                 for d in range(self._world)],
                                [i[a:a + m] for i in ins])
                self._begin(dev, e)
                o = out[a:a + m]
                o.copy_(ins[me][a:a + m])
                self._reduce(o, rnd, me * m, op)
                self._read_done(dev)
            if op == _R.AVG:
                out.div_(self._world)
                self._read_done(dev)

    # ---- broadcast, barrier ----------------------------------------------------

    def broadcast(self, tensors, opts=None):
        """broadcast of rank ``opts.rootRank``'s tensor to every rank."""
        t = _one(tensors, "broadcast")
        root = opts.rootRank if opts is not None else 0
        if not 0 <= root < self._world:
            raise ValueError(f"spyre: broadcast: no rank {root}")
        if t.device.type != "spyre":
            o = dist.BroadcastOptions()
            o.rootRank = root
            return self._gloo.broadcast([t], o)
        flat = _flat(t)
        if self._shm is None:
            c, e = _try(flat.cpu)
            self._begin(t.device, e)
            o = dist.BroadcastOptions()
            o.rootRank = root
            self._gloo.broadcast([c], o).wait()
            if self._rank != root:
                flat.copy_(c)
            self._read_done(t.device)
            return self._work([t])
        step = SLOT_BYTES // t.element_size()
        for a in range(0, flat.numel(), step):
            part = flat[a:a + step]
            slot = self._shm.slot(self._round, root, part, part.numel())
            e = None
            if self._rank == root:
                e = self._stage([slot], [part])
            self._begin(t.device, e)
            if self._rank != root:
                part.copy_(slot)
            self._read_done(t.device)
        return self._work([t])

    def barrier(self, opts=None):
        """Every rank reached the barrier, and no rank's card context is in
        error (RuntimeError on every rank otherwise)."""
        dev = torch.device("spyre", torch.spyre.current_device())
        self._begin(dev)
        return _Work([])


def _create(store, rank, world, timeout):
    return ProcessGroupSpyre(store, rank, world, timeout)


def _register():
    """Register the ``spyre`` c10d backend; torch_spyre's autoload calls it
    once."""
    if dist.is_available():
        dist.Backend.register_backend("spyre", _create,
                                      devices=["spyre", "cpu"])
