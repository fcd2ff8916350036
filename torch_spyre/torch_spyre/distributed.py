# SPDX-License-Identifier: MIT
"""The ``spyre`` backend of torch.distributed: collectives on spyre tensors.

``torch.distributed.init_process_group("spyre")`` (registered when torch_spyre
loads, for the ``spyre`` and ``cpu`` devices) gives a process group whose
``all_reduce`` (SUM, AVG, PRODUCT, MIN, MAX; BAND/BOR/BXOR for integers),
``all_gather`` / ``all_gather_into_tensor``, ``reduce_scatter`` /
``reduce_scatter_tensor``, ``broadcast`` and ``barrier`` take spyre tensors
(one contiguous tensor per call and process: one card per rank).  CPU
tensors go to an inner gloo group (gloo has no AVG and no reduce_scatter:
those become a SUM and an all_reduce of the whole input).  Every rank of a
call must pass tensors of the same device type.

Transports, chosen when the group is made:

* ``shm``, when every rank runs in this machine (the same boot id and the
  same ``/dev/shm``): one file in ``/dev/shm`` mapped by every rank and
  registered with its card (torch.ops.spyre.host_alias: the card reads and
  writes it without a CPU copy), two rounds of one 16 MiB slot per rank
  (larger tensors go in several rounds).  Each rank's card copies its part
  into its slot; after the round's barrier the card reduces with the
  peers' parts read in place from their slots (SUM, AVG, PRODUCT:
  element-wise ops on the card, in rank order, so every rank gets the same
  bits; MIN, MAX and the bitwise ops on the host over the mapping) or
  copies them out (all_gather, broadcast).  Device memory of one card
  cannot be mapped by another (no peer-to-peer DMA), so system memory is
  the meeting point.  The registration pins ``2 x world x 16 MiB`` per
  card (RLIMIT_MEMLOCK; ``make install`` raises it for group ``accel``).
* ``gloo`` otherwise, or when a rank cannot map or register the file
  (with a warning): the tensor goes through a CPU tensor and the inner
  gloo group's collective.

Every round starts with a gloo exchange of one status row per rank, which
is the barrier: it carries what the rank called (collective, op, dtype,
size, root) and whether its card context is in error or its copy failed.
Calls that do not match, or arguments one rank cannot use, raise
ValueError on every rank; a card error raises RuntimeError on every rank,
instead of leaving the others waiting for gloo's timeout.

Work objects: ``wait()`` returns at once (the result is queued on the
stream that was current on the tensor's card when the collective was
called: later work on that stream sees it); ``synchronize()`` blocks until
the card has written it; ``is_completed()`` asks the card;
``get_future()`` gives a completed torch.futures.Future of the outputs.
Workers of a group must be separate processes started with ``spawn``.
Not supported: ``init_process_group(device_id=...)`` (it asks for a C++
backend), the coalescing manager and the functional collectives
(torch.distributed._functional_collectives, DTensor), which call C++
methods a Python process group does not have.
"""

import os
import warnings
import zlib
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
_OPS = (*_ON_CARD, *_ON_HOST)
_CALLS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast",
          "barrier")
# status row: state, then what the rank called
_OK, _FAILED, _BAD_ARGS = 0, 1, 2


def _kind(opts, what):
    """The ReduceOp type (ReduceOp.SUM, ...) of ``opts.reduceOp`` (a
    ReduceOp object, equal to its type but not hashed like it); SUM
    without ``opts``.  Raises ValueError for an op this backend lacks."""
    if opts is None:
        return _R.SUM
    for k in _OPS:
        if opts.reduceOp == k:
            return k
    raise ValueError(f"spyre: {what}: unsupported reduce op "
                     f"{opts.reduceOp}")


def _boot_id():
    """This machine's boot id (ranks with the same one share memory)."""
    with open("/proc/sys/kernel/random/boot_id") as f:
        return f.read().strip()


def _one(tensors, what):
    """The only tensor of ``tensors``; ValueError for any other count."""
    if len(tensors) != 1:
        raise ValueError(f"spyre: {what} takes one tensor per process, "
                         f"got {len(tensors)}")
    return tensors[0]


def _flat(t):
    """A flat view of contiguous ``t`` (element order); ValueError for a
    strided tensor."""
    if not t.is_contiguous():
        raise ValueError("spyre: collectives need contiguous tensors")
    return t.view(-1)


def _try(fn):
    """Run ``fn``; return (its result, None) or (None, the RuntimeError)."""
    try:
        return fn(), None
    except RuntimeError as e:
        return None, e


def _record(dev):
    """A torch.Event recorded on ``dev``'s current stream."""
    ev = torch.Event(device=dev)
    ev.record(torch.spyre.current_stream(dev))
    return ev


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
        """Block until the card has written the outputs (RuntimeError if
        the card failed the work)."""
        if self._event is not None:
            self._event.synchronize()

    def is_completed(self):
        """True once the card has written the outputs."""
        return self._event is None or self._event.query()

    def is_success(self):
        """True: a failed collective raised instead of returning work."""
        return True

    def result(self):
        """The output tensors (a list)."""
        return self._outputs

    def get_future(self):
        """A completed torch.futures.Future of the output tensors."""
        fut = torch.futures.Future()
        fut.set_result(self._outputs)
        return fut


class _Shm:
    """The shared staging file: ``_ROUNDS`` x world slots of SLOT_BYTES,
    mapped by every rank (a CPU uint8 tensor) and registered with the
    rank's cards (host aliases of it: the card reads and writes the slots
    directly)."""

    def __init__(self, path, nonce, world):
        if not os.path.exists(path):        # another /dev/shm
            raise RuntimeError(f"{path} is not here")
        self.buf = torch.from_file(path, shared=True,
                                   size=_ROUNDS * world * SLOT_BYTES,
                                   dtype=torch.uint8)
        if bytes(self.buf[:len(nonce)].tolist()) != nonce:
            raise RuntimeError(f"{path} is another file here")
        self.world = world
        self.alias = {}         # card index -> host alias of buf

    def register(self, dev):
        """Register the file with card ``dev`` (once); RuntimeError from
        the kernel (e.g. RLIMIT_MEMLOCK) passes through."""
        if dev.index not in self.alias:
            self.alias[dev.index] = torch.ops.spyre.host_alias(self.buf,
                                                                dev.index)

    def slot(self, rnd, rank, like, n, card=True):
        """The first ``n`` elements of ``like``'s dtype in ``rank``'s slot
        of round ``rnd``: on ``like``'s card (``card``; registered with
        register()), else a CPU tensor over the mapping."""
        off = ((rnd % _ROUNDS) * self.world + rank) * SLOT_BYTES
        buf = self.alias[like.device.index] if card else self.buf
        return buf[off:off + SLOT_BYTES].view(like.dtype)[:n]


class ProcessGroupSpyre(dist.ProcessGroup):
    """A process group of ``world`` ranks, each on one card; see the module
    docstring.  Made by torch.distributed through the registered creator
    (``store`` a c10d Store private to the group, ``timeout`` a
    datetime.timedelta for the inner gloo group).  The shared-memory
    transport registers its file with the current card now, with other
    cards on their first collective."""

    def __init__(self, store, rank, world, timeout):
        super().__init__(rank, world)
        self._rank, self._world = rank, world
        self._gloo = dist.ProcessGroupGloo(dist.PrefixStore("gloo", store),
                                           rank, world, timeout)
        self._round = 0
        self._reads = None      # event after the last round's slot reads
        self._name = self._desc = ""
        store.set(f"boot{rank}", _boot_id())
        boots = {store.get(f"boot{r}").decode() for r in range(world)}
        self._shm = self._shm_setup(store) if len(boots) == 1 else None

    def _shm_setup(self, store):
        """Make, map and register the staging file on every rank; returns
        the _Shm, or None (with a warning) when some rank cannot."""
        size = _ROUNDS * self._world * SLOT_BYTES
        path = None
        if self._rank == 0:
            nonce = os.urandom(16)
            path = f"/dev/shm/spyre-c10d-{nonce.hex()}"
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                os.ftruncate(fd, size)
                os.pwrite(fd, nonce, 0)
            finally:
                os.close(fd)
            store.set("shm", f"{path} {nonce.hex()}")
        try:
            p, n = store.get("shm").decode().split()
            shm, err = _try(lambda: _Shm(p, bytes.fromhex(n), self._world))
            if shm is not None and torch.spyre.device_count():
                dev = torch.device("spyre", torch.spyre.current_device())
                _, err = _try(lambda: shm.register(dev))
            ok = torch.zeros(self._world, dtype=torch.int64)
            ok[self._rank] = int(err is None)
            self._gloo_sum(ok)
        finally:
            if path is not None:
                os.unlink(path)     # every rank has mapped it, or failed
        if ok.all():
            return shm
        bad = [r for r in range(self._world) if not ok[r]]
        warnings.warn(f"spyre: rank(s) {bad} cannot share /dev/shm staging"
                      + (f" ({err})" if err is not None else "")
                      + ": collectives of this group go through gloo")
        return None

    def getBackendName(self):
        """The backend's name, ``"spyre"``."""
        return "spyre"

    # torch.distributed names each group it makes (_set_group_name(),
    # _set_group_desc()) and reads the name back to unregister it; the C++
    # base class keeps both in its backends, and a group written in Python
    # has none: keep them here
    def _set_group_name(self, name):
        self._name = name

    @property
    def group_name(self):
        """The name torch.distributed gave the group."""
        return self._name

    def _set_group_desc(self, desc):
        self._desc = desc

    @property
    def group_desc(self):
        """The description torch.distributed gave the group."""
        return self._desc

    @property
    def transport(self):
        """``"shm"`` or ``"gloo"`` (see the module docstring)."""
        return "shm" if self._shm is not None else "gloo"

    # ---- rounds --------------------------------------------------------------

    def _gloo_sum(self, t):
        opts = dist.AllreduceOptions()
        opts.reduceOp = _R.SUM
        self._gloo.allreduce([t], opts).wait()

    def _begin(self, what, dev, sig, failed=None, bad_args=None):
        """Start a round of collective ``what`` on card ``dev``; returns its
        number.  This rank's reads of earlier rounds' slots end first (a
        slot is written again two rounds later), then the ranks exchange
        status rows: ``sig`` (what this rank called), whether its context
        is in error or ``failed`` (a RuntimeError of this round), or
        ``bad_args`` (its ValueError).  Raises, on every rank: ValueError
        if a rank's arguments were bad or the calls differ, RuntimeError
        if a rank failed."""
        if self._reads is not None:
            _, e = _try(self._reads.synchronize)
            failed = failed or e
            self._reads = None
        if dev is not None and bad_args is None:
            bad, e = _try(lambda: torch.ops.spyre.context_error(dev.index))
            failed = failed or e or (RuntimeError("context in error")
                                     if bad else None)
        st = torch.zeros(self._world, 6, dtype=torch.int64)
        st[self._rank, 0] = (_BAD_ARGS if bad_args is not None else
                             _FAILED if failed is not None else _OK)
        if sig is not None:
            st[self._rank, 1:] = torch.tensor(sig, dtype=torch.int64)
        self._gloo_sum(st)
        self._round += 1

        def ranks(state):
            return [r for r in range(self._world) if st[r, 0] == state]
        if ranks(_BAD_ARGS):
            if bad_args is not None:
                raise bad_args
            raise ValueError(f"spyre: {what}: rank(s) {ranks(_BAD_ARGS)} "
                             "passed arguments they cannot use (see their "
                             "error)")
        if not (st[:, 1:] == st[0, 1:]).all():
            raise ValueError(f"spyre: {what}: the ranks' calls do not match "
                             "(collective, op, dtype, size, root per rank: "
                             f"{st[:, 1:].tolist()})")
        if ranks(_FAILED):
            raise RuntimeError(
                f"spyre: collective aborted: rank(s) {ranks(_FAILED)} of "
                "the group have their card context in error"
                + (f" (here: {failed})" if failed is not None else ""))
        return self._round - 1

    def _call(self, what, setup):
        """Run collective ``what``: ``setup()`` checks this rank's
        arguments and returns (card, signature, run), or raises ValueError
        or TypeError, which the other ranks learn in the first round's
        exchange (so they raise too instead of waiting); ``run()`` does
        the rounds and returns the work."""
        try:
            dev, sig, run = setup()
        except (ValueError, TypeError) as e:
            self._begin(what, None, None, bad_args=e)
            raise AssertionError("unreachable")
        sig = [_CALLS.index(what), *sig]
        if self._shm is not None:
            _, e = _try(lambda: self._shm.register(dev))
            if e is not None:
                self._begin(what, dev, sig, failed=e)
        try:
            return run(dev, sig)
        finally:
            if dev is not None and self._reads is None:
                # a round that raised after its exchange: the reads it
                # queued end before the next round
                self._reads, _ = _try(lambda: _record(dev))

    def _sig(self, t, op=_R.SUM, numel=None, root=0):
        """The signature of a call: op, dtype, elements, root."""
        return [_OPS.index(op), zlib.crc32(str(t.dtype).encode()),
                t.numel() if numel is None else numel, root]

    def _work(self, outputs):
        return _Work(outputs, self._reads)

    def _done(self, dev):
        """Mark the end of this round's reads on ``dev``'s stream."""
        self._reads = _record(dev)

    def _stage(self, dsts, srcs):
        """Copy each of ``srcs`` (on the card) to its slot part in ``dsts``
        and wait for the card; returns the RuntimeError raised, if any, for
        _begin()."""
        def run():
            for d, x in zip(dsts, srcs):
                d.copy_(x)
            _record(srcs[0].device).synchronize()
        return _try(run)[1]

    def _via_gloo(self, what, dev, sig, to_cpu, coll, outs):
        """One round of collective ``what`` over gloo, on card ``dev``:
        ``to_cpu()`` gives this rank's CPU tensor, ``coll(cpu)`` runs the
        gloo collective on it and copies the result to the card.  Returns
        the work of ``outs``."""
        c, e = _try(to_cpu)
        self._begin(what, dev, sig, e)
        coll(c)
        self._done(dev)
        return self._work(outs)

    def _rounds(self, what, flat, sig, body, root=None):
        """The shm rounds of collective ``what`` over ``flat`` (on the
        card), one slot's worth each: this rank's part goes to its slot
        (with ``root``, only rank root's does), then after the round's
        exchange ``body(part, rnd, a)`` reads the slots of round ``rnd``
        for the part at element ``a``."""
        dev = flat.device
        step = SLOT_BYTES // flat.element_size()
        for a in range(0, flat.numel(), step):
            part = flat[a:a + step]
            rnd = self._round
            e = None
            if root is None or root == self._rank:
                mine = self._shm.slot(rnd, self._rank, part, part.numel())
                e = self._stage([mine], [part])
            self._begin(what, dev, sig, e)
            body(part, rnd, a)
            self._done(dev)

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
        """ValueError for an op ``t``'s dtype cannot take."""
        if op in (_R.BAND, _R.BOR, _R.BXOR) and t.is_floating_point():
            raise ValueError(f"spyre: {what}: bitwise ops need integers")
        if op == _R.AVG and not t.is_floating_point():
            raise ValueError(f"spyre: {what}: AVG needs a floating-point "
                             "tensor")

    def _gloo_allreduce(self, t, op):
        """all_reduce of CPU tensor ``t`` over gloo, AVG as SUM / world."""
        opts = dist.AllreduceOptions()
        opts.reduceOp = _R.SUM if op == _R.AVG else op
        w = self._gloo.allreduce([t], opts)
        if op != _R.AVG:
            return w
        w.wait()
        t.div_(self._world)
        return _Work([t])

    # ---- all_reduce ------------------------------------------------------------

    def allreduce(self, tensors, opts=None):
        """all_reduce: ``tensors`` is one contiguous tensor (any shape, the
        same numel and dtype on every rank), reduced in place with
        ``opts.reduceOp`` (SUM without ``opts``).  Returns the work.
        Raises ValueError (on every rank) for misuse or mismatched calls,
        RuntimeError (on every rank) when a rank's card failed."""
        t = _one(tensors, "all_reduce")
        if t.device.type != "spyre":
            op = _kind(opts, "all_reduce")
            self._check_op(op, t, "all_reduce")
            return self._gloo_allreduce(t, op)

        def setup():
            op = _kind(opts, "all_reduce")
            self._check_op(op, t, "all_reduce")
            flat = _flat(t)
            return t.device, self._sig(t, op), \
                lambda dev, sig: self._allreduce(flat, op, sig, [t])
        return self._call("all_reduce", setup)

    def _allreduce(self, flat, op, sig, outs):
        if self._shm is None:
            def coll(c):
                self._gloo_allreduce(c, op).wait()
                flat.copy_(c)
            return self._via_gloo("all_reduce", flat.device, sig, flat.cpu,
                                  coll, outs)
        self._rounds("all_reduce", flat, sig,
                     lambda part, rnd, a: self._reduce(part, rnd, 0, op))
        if op == _R.AVG:
            flat.div_(self._world)
            self._done(flat.device)
        return self._work(outs)

    # ---- all_gather ------------------------------------------------------------

    def allgather(self, output_lists, input_list, opts=None):
        """all_gather: ``input_list`` is one contiguous tensor (the same
        numel and dtype on every rank), ``output_lists`` one list of world
        tensors of its numel and dtype; ``output_lists[0][r]`` gets rank
        r's input.  Returns the work; errors as allreduce()."""
        outs = _one(output_lists, "all_gather")
        t = _one(input_list, "all_gather")
        if t.device.type != "spyre":
            return self._gloo.allgather(output_lists, input_list)

        def setup():
            if len(outs) != self._world:
                raise ValueError(f"spyre: all_gather needs {self._world} "
                                 f"outputs, got {len(outs)}")
            flats = [self._like(o, t, "all_gather") for o in outs]
            flat = _flat(t)
            return t.device, self._sig(t), \
                lambda dev, sig: self._gather(flat, flats, sig, outs)
        return self._call("all_gather", setup)

    def _allgather_base(self, output, input, opts=None):
        """all_gather_into_tensor: ``output`` holds world x ``input``'s
        elements (rank r's at r x input.numel()), both contiguous, one
        dtype.  Returns the work; errors as allreduce()."""
        def check():
            if output.numel() != self._world * input.numel() or \
                    output.dtype != input.dtype:
                raise ValueError("spyre: all_gather_into_tensor: the output "
                                 "must hold world x the input's elements, "
                                 "in its dtype")
            n = input.numel()
            return [_flat(output)[r * n:(r + 1) * n]
                    for r in range(self._world)]
        if input.device.type != "spyre":
            w = self._gloo.allgather([check()], [input.reshape(-1)])
            w.wait()
            return w

        def setup():
            outs, flat = check(), _flat(input)
            return input.device, self._sig(input), \
                lambda dev, sig: self._gather(flat, outs, sig, [output])
        return self._call("all_gather", setup)

    def _like(self, o, t, what):
        """Flat ``o``, which must match ``t``'s numel, dtype and card."""
        if o.numel() != t.numel() or o.dtype != t.dtype or \
                o.device != t.device:
            raise ValueError(f"spyre: {what}: the tensors must match in "
                             "size, dtype and card")
        return _flat(o)

    def _gather(self, flat, outs, sig, results):
        if self._shm is None:
            def coll(c):
                cs = [torch.empty_like(c) for _ in range(self._world)]
                self._gloo.allgather([cs], [c]).wait()
                for o, x in zip(outs, cs):
                    o.copy_(x)
            return self._via_gloo("all_gather", flat.device, sig, flat.cpu,
                                  coll, results)

        def body(part, rnd, a):
            for r in range(self._world):
                outs[r][a:a + part.numel()].copy_(
                    part if r == self._rank
                    else self._shm.slot(rnd, r, part, part.numel()))
        self._rounds("all_gather", flat, sig, body)
        return self._work(results)

    # ---- reduce_scatter --------------------------------------------------------

    def reduce_scatter(self, output_list, input_lists, opts=None):
        """reduce_scatter: ``input_lists`` is one list of world contiguous
        tensors, ``output_list`` one tensor, all of one numel and dtype;
        the output gets the reduction (``opts.reduceOp``) over the ranks of
        their input ``[rank]``.  Returns the work; errors as
        allreduce()."""
        out = _one(output_list, "reduce_scatter")
        ins = _one(input_lists, "reduce_scatter")

        def setup():
            op = _kind(opts, "reduce_scatter")
            if len(ins) != self._world:
                raise ValueError(f"spyre: reduce_scatter needs "
                                 f"{self._world} inputs, got {len(ins)}")
            self._check_op(op, out, "reduce_scatter")
            flats = [self._like(i, out, "reduce_scatter") for i in ins]
            flat = _flat(out)
            return out.device, self._sig(out, op), \
                lambda dev, sig: self._scatter(flat, flats, op, sig)
        return self._cpu_or_call(out, setup)

    def _reduce_scatter_base(self, output, input, opts=None):
        """reduce_scatter_tensor: ``input`` holds world x ``output``'s
        elements (the part for rank r at r x output.numel()), both
        contiguous, one dtype.  Returns the work; errors as
        allreduce()."""
        def setup():
            op = _kind(opts, "reduce_scatter_tensor")
            if input.numel() != self._world * output.numel() or \
                    input.dtype != output.dtype or \
                    input.device != output.device:
                raise ValueError("spyre: reduce_scatter_tensor: the input "
                                 "must hold world x the output's elements, "
                                 "in its dtype, on its card")
            self._check_op(op, output, "reduce_scatter_tensor")
            n = output.numel()
            ins = [_flat(input)[r * n:(r + 1) * n]
                   for r in range(self._world)]
            flat = _flat(output)
            return output.device, self._sig(output, op), \
                lambda dev, sig: self._scatter(flat, ins, op, sig)
        return self._cpu_or_call(output, setup)

    def _cpu_or_call(self, out, setup):
        if out.device.type == "spyre":
            return self._call("reduce_scatter", setup)
        _, _, run = setup()
        return run(None, None)

    def _scatter(self, out, ins, op, sig):
        me, n = self._rank, out.numel()
        if out.device.type != "spyre":
            # gloo has no reduce_scatter: an all_reduce of the whole input
            whole = torch.cat(ins)
            self._gloo_allreduce(whole, op).wait()
            out.copy_(whole[me * n:(me + 1) * n])
            return _Work([out])
        dev = out.device
        if self._shm is None:
            def coll(c):
                self._gloo_allreduce(c, op).wait()
                out.copy_(c[me * n:(me + 1) * n])
            return self._via_gloo("reduce_scatter", dev, sig,
                                  lambda: torch.cat(ins).cpu(), coll, [out])
        # a slot holds this rank's chunk for every destination rank
        step = SLOT_BYTES // out.element_size() // self._world
        for a in range(0, n, step):
            m = min(step, n - a)
            rnd = self._round
            mine = self._shm.slot(rnd, me, out, m * self._world)
            e = self._stage([mine[d * m:(d + 1) * m]
                             for d in range(self._world)],
                            [i[a:a + m] for i in ins])
            self._begin("reduce_scatter", dev, sig, e)
            o = out[a:a + m]
            o.copy_(ins[me][a:a + m])
            self._reduce(o, rnd, me * m, op)
            self._done(dev)
        if op == _R.AVG:
            out.div_(self._world)
            self._done(dev)
        return self._work([out])

    # ---- broadcast, barrier ----------------------------------------------------

    def broadcast(self, tensors, opts=None):
        """broadcast: ``tensors`` is one contiguous tensor (the same numel
        and dtype on every rank), overwritten with rank
        ``opts.rootRank``'s.  Returns the work; errors as allreduce()."""
        t = _one(tensors, "broadcast")
        root = opts.rootRank if opts is not None else 0
        o = dist.BroadcastOptions()
        o.rootRank = root
        if t.device.type != "spyre":
            return self._gloo.broadcast([t], o)

        def setup():
            if not 0 <= root < self._world:
                raise ValueError(f"spyre: broadcast: no rank {root}")
            flat = _flat(t)
            return t.device, self._sig(t, root=root), \
                lambda dev, sig: self._broadcast(flat, root, o, sig, t)
        return self._call("broadcast", setup)

    def _broadcast(self, flat, root, o, sig, t):
        if self._shm is None:
            def coll(c):
                self._gloo.broadcast([c], o).wait()
                if self._rank != root:
                    flat.copy_(c)
            return self._via_gloo("broadcast", flat.device, sig, flat.cpu,
                                  coll, [t])

        def body(part, rnd, a):
            if self._rank != root:
                part.copy_(self._shm.slot(rnd, root, part, part.numel()))
        self._rounds("broadcast", flat, sig, body, root=root)
        return self._work([t])

    def barrier(self, opts=None):
        """Every rank reached the barrier, and no rank's card context is in
        error (RuntimeError on every rank otherwise).  The card is
        ``opts.device_ids[0]`` when given, else the current one."""
        ids = list(getattr(opts, "device_ids", None) or [])
        dev = torch.device("spyre", ids[0] if ids else
                           torch.spyre.current_device())
        self._begin("barrier", dev, [_CALLS.index("barrier"), 0, 0, 0, 0])
        return _Work([])


def _create(store, rank, world, timeout):
    """The creator torch.distributed calls for backend ``spyre``."""
    return ProcessGroupSpyre(store, rank, world, timeout)


def _register():
    """Register the ``spyre`` c10d backend; torch_spyre's autoload calls it
    once."""
    if dist.is_available():
        dist.Backend.register_backend("spyre", _create,
                                      devices=["spyre", "cpu"])
