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
    "device_count", "empty_cache", "is_available", "is_initialized",
    "compile_stats", "max_memory_allocated", "mem_get_info",
    "memory_allocated", "reset_compile_stats",
    "manual_seed", "manual_seed_all", "memory_reserved", "op_counts",
    "reset_op_counts",
    "reset_peak_memory_stats", "set_device", "set_strict", "strict",
    "stream", "synchronize",
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
    current card.  Raises IndexError for a card that does not exist."""
    _ops().set_device(_index(device) if _index(device) >= 0 else 0)


def is_initialized(device=None):
    """True once this process opened ``device`` (default: the current
    card)."""
    return _ops().is_initialized(_index(device))


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


# ---- random numbers and fork ---------------------------------------------------

def manual_seed(seed):
    """Seed the random numbers of spyre tensors.  The cards have no
    generator of their own: a random op on a spyre tensor draws from the
    CPU's default generator (the backend's default generator is the CPU's),
    so this seeds that one, as ``torch.manual_seed(seed)`` does.  ``seed``
    is an int (taken modulo 2**64 like torch.manual_seed)."""
    torch.default_generator.manual_seed(int(seed))


def manual_seed_all(seed):
    """Seed the random numbers of every card: the same as
    :func:`manual_seed` (one generator, the CPU's, serves all cards).
    ``torch.manual_seed`` calls this."""
    manual_seed(seed)


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
