# SPDX-License-Identifier: MIT
"""torch_spyre: the ``spyre`` device for PyTorch (the Spyre card, through
libspyre).

This package owns the Python side of the backend: the ``torch.backends``
entry point that ``import torch`` calls (:func:`_autoload`), which renames
PyTorch's PrivateUse1 device to ``spyre``, loads ``libtorch_spyre.so`` (the
dispatcher kernels, allocator, streams and events) and registers this module
as ``torch.spyre``.  Nothing opens ``/dev/accel`` until a card is first used.

Devices are ``spyre:0``, ``spyre:1``, ... in libspyre's order
(``SPYRE_VISIBLE_DEVICES`` applies).  Tensors live in the card's memory;
ops run asynchronously on the current stream; ops without a kernel on the
card run on the CPU through a counted fallback (see :func:`op_counts` and
:func:`set_strict`).  A process that used a card cannot use it in a
``fork()`` child: start workers with the ``spawn`` method.
"""

import contextlib
import os

import torch

__all__ = [
    "Event", "Stream", "current_device", "current_stream", "default_stream",
    "device", "device_count", "device_of", "empty_cache",
    "empty_host_cache", "host_memory_stats", "can_device_access_peer",
    "memory_cached", "max_memory_cached", "set_stream",
    "get_amp_supported_dtype", "get_device_capability", "get_device_name",
    "get_device_properties", "get_per_process_memory_fraction",
    "get_rng_state", "get_rng_state_all", "init", "initial_seed",
    "is_available", "is_bf16_supported", "is_initialized",
    "compile_stats", "max_memory_allocated", "max_memory_reserved",
    "mem_get_info", "memory_allocated", "memory_stats",
    "memory_stats_as_nested_dict", "memory_summary", "reset_compile_stats",
    "manual_seed", "manual_seed_all", "memory_reserved", "op_counts",
    "reset_accumulated_memory_stats", "reset_max_memory_allocated",
    "reset_max_memory_cached", "reset_op_counts",
    "reset_peak_memory_stats", "seed", "seed_all", "set_device",
    "set_per_process_memory_fraction", "set_rng_state",
    "set_rng_state_all", "set_strict", "strict", "stream", "synchronize",
]

_LIB = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                    "libtorch_spyre.so")
_loaded = False


def _autoload():
    """Entry point of the ``torch.backends`` group (called by ``import
    torch``): register the ``spyre`` device.  Idempotent."""
    global _loaded
    if _loaded:
        return
    torch.utils.rename_privateuse1_backend("spyre")
    torch.ops.load_library(_LIB)
    import sys
    torch._register_device_module("spyre", sys.modules[__name__])
    torch.utils.generate_methods_for_privateuse1_backend(
        for_tensor=True, for_module=True, for_packed_sequence=True,
        for_storage=False)
    from . import distributed
    distributed._register()
    _loaded = True


def _ops():
    return torch.ops.spyre


def _index(device=None):
    """Card index of ``device`` (None: the current card; an int, a string
    such as ``"spyre:1"`` or a torch.device).  Raises ValueError for a
    device of another type."""
    if device is None:
        return -1
    if isinstance(device, int):
        return device
    d = torch.device(device)
    if d.type != "spyre":
        raise ValueError(f"expected a spyre device, got {d}")
    return -1 if d.index is None else d.index


# ---- devices -----------------------------------------------------------------

def is_available():
    """True when at least one card is visible (reads sysfs; opens nothing)."""
    return device_count() > 0


def device_count():
    """Number of visible cards (int >= 0; opens nothing)."""
    return _ops().device_count()


def current_device():
    """Index of the calling thread's current card (int)."""
    return _ops().current_device()


def set_device(device):
    """Make ``device`` (int, "spyre:N" or torch.device) the calling thread's
    current card.  A negative index (or "spyre" without one) changes
    nothing, as on CUDA.  Raises IndexError for a card that does not
    exist."""
    i = _index(device)
    if i >= 0:
        _ops().set_device(i)


class device:
    """Context manager: make ``device`` (int, "spyre:N", torch.device, or a
    negative index / None for no change) the current card inside the block
    and restore the previous one after it."""

    def __init__(self, device):
        self.idx = _index(device)
        self.prev_idx = -1

    def __enter__(self):
        self.prev_idx = current_device()
        if self.idx >= 0 and self.idx != self.prev_idx:
            set_device(self.idx)

    def __exit__(self, *exc):
        if self.idx >= 0 and self.idx != self.prev_idx:
            set_device(self.prev_idx)
        return False


class device_of(device):
    """Context manager: make the card of tensor ``obj`` current inside the
    block (no change for a tensor that is not on a card)."""

    def __init__(self, obj):
        super().__init__(obj.get_device() if obj.is_spyre else -1)


def is_initialized(device=None):
    """True once this process opened ``device`` (default: the current
    card)."""
    return _ops().is_initialized(_index(device))


def init():
    """Open the current card now (it is otherwise opened on first use)."""
    _ops().synchronize(-1)


class _SpyreDeviceProperties:
    """What :func:`get_device_properties` returns: attributes with CUDA's
    names where they apply (``name``, ``total_memory`` in bytes,
    ``multi_processor_count`` = ``cores``, ``pci_bus_id``,
    ``pci_device_id``, ``pci_domain_id``) and the card's own (``queues``,
    ``contexts``, ``hw_version``, ``driver_version``, ``library_version``,
    ``pci_address``, ``devnode``, ...)."""

    def __init__(self, ints, strs):
        self.__dict__.update(ints)
        self.__dict__.update(strs)

    def __repr__(self):
        return (f"_SpyreDeviceProperties(name='{self.name}', "
                f"total_memory={self.total_memory >> 20}MB, "
                f"cores={self.cores}, queues={self.queues}, "
                f"pci_address='{self.pci_address}', "
                f"driver='{self.driver_version}', "
                f"libspyre='{self.library_version}')")


def get_device_properties(device=None):
    """The properties of ``device`` (default: the current card); opens it.
    IndexError for a card that does not exist."""
    ik, iv, sk, sv = _ops().device_properties(_index(device))
    return _SpyreDeviceProperties(dict(zip(ik, iv)), dict(zip(sk, sv)))


def get_device_name(device=None):
    """The name of ``device`` (default: the current card)."""
    return get_device_properties(device).name


def get_device_capability(device=None):
    """The card's register-interface version as (major, minor), the
    nearest thing to CUDA's compute capability."""
    v = get_device_properties(device).hw_version
    return (v >> 16, v & 0xFFFF)


def get_amp_supported_dtype():
    """The dtypes ``torch.autocast("spyre", dtype=...)`` accepts (another
    dtype: a warning and autocast disabled, as for every device in
    PyTorch 2.6)."""
    return [torch.float16, torch.bfloat16]


def is_bf16_supported(including_emulation=True):
    """True: the card computes in bfloat16."""
    return True


def synchronize(device=None):
    """Block until all work queued on every stream of ``device`` (default:
    the current card) has finished.  Raises RuntimeError with the card's
    error if a job failed."""
    _ops().synchronize(_index(device))


# ---- streams and events -------------------------------------------------------

class Stream(torch.Stream):
    """An in-order queue of work on one card (a libspyre stream on its own
    hardware queue).  ``Stream()`` is on the current card; ``priority`` < 0
    asks for a high-priority queue, which needs CAP_SYS_NICE (else
    RuntimeError naming it; no fallback to a normal queue).  Streams come
    from a small pool per card and priority (as CUDA's do)."""

    def __new__(cls, device=None, priority=0):
        if device is None:
            device = torch.device("spyre", current_device())
        return super().__new__(cls, device=device, priority=priority)


class Event(torch.Event):
    """A point in a stream's work (a TIMESTAMP job on the card);
    ``elapsed_time(end)`` is the card-clock time in milliseconds between
    two recorded, completed events of one card."""

    def __new__(cls, enable_timing=True, blocking=False, interprocess=False):
        return super().__new__(cls, device="spyre",
                               enable_timing=enable_timing,
                               blocking=blocking, interprocess=interprocess)


def current_stream(device=None):
    """The calling thread's current stream on ``device`` (default: the
    current card), a torch.Stream."""
    i = _index(device)
    return torch.accelerator.current_stream(
        torch.device("spyre", current_device() if i < 0 else i))


def default_stream(device=None):
    """The default stream (id 0) of ``device`` (default: the current card)."""
    i = _index(device)
    i = current_device() if i < 0 else i
    # device_type 20 is c10::DeviceType::PrivateUse1
    return torch.Stream(stream_id=0, device_index=i, device_type=20)


def set_stream(stream):
    """Make ``stream`` (a torch.Stream of a card) the current stream of its
    card for the calling thread (None: no change), as
    ``torch.cuda.set_stream``."""
    if stream is not None:
        torch.accelerator.set_stream(stream)


@contextlib.contextmanager
def stream(s):
    """Context manager: make ``s`` the current stream of its card inside the
    block (None: no change)."""
    if s is None:
        yield
        return
    prev = current_stream(s.device)
    torch.accelerator.set_stream(s)
    try:
        yield
    finally:
        torch.accelerator.set_stream(prev)


# ---- memory --------------------------------------------------------------------

def memory_allocated(device=None):
    """Bytes of card memory held by live tensors on ``device`` (as the
    caching allocator rounds them: 4 KiB pages, 2 MiB above 1 MiB)."""
    return _ops().memory_stats(_index(device))[0]


def max_memory_allocated(device=None):
    """Peak of :func:`memory_allocated` since the start or the last
    :func:`reset_peak_memory_stats`, in bytes."""
    return _ops().memory_stats(_index(device))[1]


def memory_reserved(device=None):
    """Bytes of card memory the allocator holds (live plus cached)."""
    return _ops().memory_stats(_index(device))[2]


def reset_peak_memory_stats(device=None):
    """Restart :func:`max_memory_allocated` from the current allocation."""
    _ops().reset_peak_memory_stats(_index(device))


def mem_get_info(device=None):
    """(free, total) bytes of the card's memory, device-wide (all
    processes)."""
    free, total = _ops().mem_get_info(_index(device))
    return free, total


def empty_cache():
    """Return the allocator's cached (unused) blocks to the card."""
    _ops().empty_cache()


def memory_stats(device=None):
    """The caching allocator's statistics of ``device`` as CUDA's flat
    dict, keys sorted: ``{allocated_bytes, reserved_bytes, active_bytes,
    inactive_split_bytes, requested_bytes}.{all, small_pool,
    large_pool}.{current, peak, allocated, freed}`` in bytes, the same
    for the counts ``allocation``, ``segment`` (card BOs), ``active``,
    ``inactive_split``, and ``num_alloc_retries``, ``num_ooms``,
    ``num_device_alloc``, ``num_device_free``.  The small pool holds
    blocks of up to 1 MiB (4 KiB pages), the large pool the rest (2 MiB
    granules).  Blocks are never split, so ``inactive_split*`` are 0, and
    frees are not deferred, so ``active*`` equal ``allocated*``."""
    keys, vals = _ops().memory_stats_full(_index(device))
    return dict(sorted(zip(keys, vals)))


def memory_stats_as_nested_dict(device=None):
    """:func:`memory_stats` nested at the dots, as CUDA's."""
    out = {}
    for k, v in memory_stats(device).items():
        d = out
        parts = k.split(".")
        for p in parts[:-1]:
            d = d.setdefault(p, {})
        d[parts[-1]] = v
    return out


def max_memory_reserved(device=None):
    """Peak of :func:`memory_reserved` since the start or the last
    :func:`reset_peak_memory_stats`, in bytes."""
    return memory_stats(device)["reserved_bytes.all.peak"]


def memory_cached(device=None):
    """:func:`memory_reserved` (CUDA's deprecated name)."""
    return memory_reserved(device)


def max_memory_cached(device=None):
    """:func:`max_memory_reserved` (CUDA's deprecated name)."""
    return max_memory_reserved(device)


def can_device_access_peer(device, peer_device):
    """False: one card cannot address another's memory (the guest has no
    peer-to-peer DMA; copies between cards go through system memory).
    IndexError for a card that does not exist."""
    n = device_count()
    for d in (_index(device), _index(peer_device)):
        if not 0 <= d < n:
            raise IndexError(f"spyre: device {d} does not exist ({n} "
                             "card(s) visible)")
    return False


def reset_max_memory_allocated(device=None):
    """Restart the peaks (as CUDA's, this resets every peak)."""
    reset_peak_memory_stats(device)


def reset_max_memory_cached(device=None):
    """Restart the peaks (CUDA's deprecated name)."""
    reset_peak_memory_stats(device)


def reset_accumulated_memory_stats(device=None):
    """Zero the ``allocated``/``freed`` sums and the retry, OOM and BO
    counters of :func:`memory_stats`."""
    _ops().reset_accumulated_memory_stats(_index(device))


def set_per_process_memory_fraction(fraction, device=None):
    """Cap the card memory this process reserves (live plus cached blocks)
    on ``device`` at ``fraction`` (a float in [0, 1]) of the card's memory.
    An allocation past the cap first returns the cache, then raises
    ``torch.OutOfMemoryError``.  ValueError (nothing changed) outside
    [0, 1]."""
    if not isinstance(fraction, (float, int)) or isinstance(fraction, bool):
        raise TypeError("fraction must be a float in [0, 1]")
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"invalid memory fraction {fraction}: allowed "
                         "range is [0, 1]")
    _ops().set_memory_fraction(float(fraction), _index(device))


def get_per_process_memory_fraction(device=None):
    """The fraction :func:`set_per_process_memory_fraction` set (1.0)."""
    return _ops().get_memory_fraction(_index(device))


def memory_summary(device=None, abbreviated=False):
    """A printable table of :func:`memory_stats` for ``device`` (current,
    peak, allocated and freed of each statistic per pool)."""
    st = memory_stats(device)
    i = _index(device)
    i = current_device() if i < 0 else i

    def fmt(v, is_bytes):
        if not is_bytes:
            return str(v)
        for unit in ("B", "KiB", "MiB", "GiB"):
            if abs(v) < 1024 or unit == "GiB":
                return f"{v:.0f} {unit}" if unit == "B" else \
                    f"{v:.1f} {unit}"
            v /= 1024
    rows = [("allocated_bytes", "Allocated memory", True),
            ("active_bytes", "Active memory", True),
            ("requested_bytes", "Requested memory", True),
            ("reserved_bytes", "Reserved memory", True),
            ("inactive_split_bytes", "Non-releasable memory", True),
            ("allocation", "Allocations", False),
            ("active", "Active allocs", False),
            ("segment", "Card BOs (segments)", False),
            ("inactive_split", "Non-releasable allocs", False)]
    pools = ("all",) if abbreviated else ("all", "large_pool", "small_pool")
    w = 26
    line = "|" + "=" * 91 + "|"
    out = [line,
           f"|{'spyre memory summary, device ' + str(i):^91}|",
           f"|{'num_alloc_retries: ' + str(st['num_alloc_retries']) + '  num_ooms: ' + str(st['num_ooms']):^91}|",
           line,
           f"| {'Metric':<{w}}| {'Cur Usage':>13} | {'Peak Usage':>13} | "
           f"{'Tot Alloc':>13} | {'Tot Freed':>13} |",
           line]
    for key, title, is_bytes in rows:
        for p in pools:
            name = title if p == "all" else "      from " + p.split("_")[0]
            k = f"{key}.{p}"
            out.append(f"| {name:<{w}}| "
                       + " | ".join(f"{fmt(st[k + '.' + f], is_bytes):>13}"
                                    for f in ("current", "peak", "allocated",
                                              "freed"))
                       + " |")
        out.append("|" + "-" * 91 + "|")
    out[-1] = line
    return "\n".join(out) + "\n"


# ---- pinned host memory ----------------------------------------------------------
# Tensor.pin_memory() / torch.empty(..., pin_memory=True) take host memory
# from libtorch_spyre's caching host allocator (pinned.cpp), registered with
# the cards; copies between it and a card with non_blocking=True are
# queued on the current stream (the card reads and writes the pages in
# place), as CUDA's.


def empty_host_cache():
    """Return the pinned host blocks no tensor holds (and whose copies have
    completed) to the system: unregistered from the cards and unmapped."""
    _ops().empty_host_cache()


def host_memory_stats():
    """``{"pinned_bytes": ..., "blocks": ...}``: host bytes registered with
    the cards by the pinned-memory cache (a block registered with two
    cards counts twice), and the blocks it holds (live and cached)."""
    b, n = _ops().pinned_stats()
    return {"pinned_bytes": b, "blocks": n}


# ---- random numbers and fork ---------------------------------------------------
# Each card has its own generator (a Philox seed and offset, in
# libtorch_spyre's generator.cpp); none of these touches the CPU's.

def _seed_bits(seed):
    """``seed`` as the signed int64 that carries its 64 bits through the op
    schema (Python ints of either sign, taken modulo 2**64 like
    torch.manual_seed)."""
    s = int(seed) & 0xFFFF_FFFF_FFFF_FFFF
    return s - (1 << 64) if s >= 1 << 63 else s


def _unsigned(v):
    return v & 0xFFFF_FFFF_FFFF_FFFF


def manual_seed(seed):
    """Seed the current card's default generator (its offset restarts at
    0).  ``seed`` is an int, taken modulo 2**64.  The CPU's generator is not
    touched."""
    _ops().manual_seed(-1, _seed_bits(seed))


def manual_seed_all(seed):
    """Seed the default generator of every card.  ``torch.manual_seed``
    calls this (besides seeding the CPU)."""
    for i in range(device_count()):
        _ops().manual_seed(i, _seed_bits(seed))


def seed():
    """Seed the current card's generator with a non-deterministic number."""
    _ops().seed(-1)


def seed_all():
    """Seed every card's generator with one non-deterministic number."""
    if device_count():
        s = _ops().seed(0)
        for i in range(1, device_count()):
            _ops().manual_seed(i, s)


def initial_seed():
    """The current seed of the current card's default generator (an int in
    [0, 2**64))."""
    return _unsigned(_ops().initial_seed(-1))


def get_rng_state(device="spyre"):
    """The state of ``device``'s default generator: a 16-byte uint8 CPU
    tensor (Philox seed and offset, little-endian)."""
    return _ops().get_rng_state(_index(device))


def set_rng_state(new_state, device="spyre"):
    """Restore ``device``'s default generator from :func:`get_rng_state`'s
    tensor.  RuntimeError (nothing changed) for a tensor that is not a
    16-byte uint8 CPU tensor."""
    if not isinstance(new_state, torch.Tensor):
        raise TypeError(f"expected an RNG state tensor, got "
                        f"{type(new_state).__name__}")
    _ops().set_rng_state(_index(device), new_state)


def get_rng_state_all():
    """The RNG states of all cards, a list indexed by card."""
    return [get_rng_state(i) for i in range(device_count())]


def set_rng_state_all(new_states):
    """Restore every card's RNG state from :func:`get_rng_state_all`'s
    list."""
    for i, st in enumerate(new_states):
        set_rng_state(st, i)


def __getattr__(name):
    # torch.spyre.default_generators: the cards' default generators (the
    # same torch.Generator objects every time), made on first access
    # torch.spyre.amp (GradScaler): imported on first use
    if name == "amp":
        import importlib
        return importlib.import_module(f"{__name__}.{name}")
    if name == "default_generators":
        return tuple(_ops().default_generator(i)
                     for i in range(device_count()))
    # torch.spyre._initialized: whether a card is open (what
    # torch.utils.checkpoint reads before saving the cards' RNG states)
    if name == "_initialized":
        return _loaded and any(is_initialized(i)
                               for i in range(device_count()))
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_fork_had_cards = False
_bad_fork = False


def _before_fork():
    global _fork_had_cards
    _fork_had_cards = _loaded and any(is_initialized(i)
                                      for i in range(device_count()))


def _after_fork_child():
    global _bad_fork
    _bad_fork = _fork_had_cards


os.register_at_fork(before=_before_fork, after_in_child=_after_fork_child)


def _is_in_bad_fork():
    """True in a child process forked after its parent opened a card: the
    child shares the parent's card contexts (file descriptors and mappings)
    and must not use them.  PyTorch's fork checks (e.g. torch.manual_seed)
    call this."""
    return _bad_fork


# ---- op accounting -------------------------------------------------------------

def op_counts():
    """Calls per aten op since the start (or :func:`reset_op_counts`): a dict
    ``{"aten::mm": {"native": n, "fallback": m}, ...}``, where native calls
    ran on the card and fallback calls on the CPU."""
    names, native, fb = _ops().op_counts()
    return {n: {"native": a, "fallback": b}
            for n, a, b in zip(names, native, fb)}


def reset_op_counts():
    """Zero the counts of :func:`op_counts`."""
    _ops().reset_op_counts()


def set_strict(on=True):
    """Strict mode: an op without a kernel on the card raises RuntimeError
    instead of running on the CPU.  Returns the previous setting."""
    return _ops().set_strict(bool(on))


@contextlib.contextmanager
def strict(on=True):
    """Context manager form of :func:`set_strict`."""
    prev = set_strict(on)
    try:
        yield
    finally:
        set_strict(prev)


# ---- torch.compile -------------------------------------------------------------

def compile_stats():
    """Counters of ``torch.compile(backend="spyre")`` (compiles, command
    lists built and launched, commands launched, staging copies, ops
    lowered vs run eagerly): see :func:`torch_spyre.compiler.compile_stats`.
    """
    from . import compiler
    return compiler.compile_stats()


def reset_compile_stats():
    """Zero the counters of :func:`compile_stats`."""
    from . import compiler
    compiler.reset_compile_stats()
