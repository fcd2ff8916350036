# SPDX-License-Identifier: MIT
"""The torch_models_* tests (imported by test_torch.py, so part of `make
test`): small models people write, forward on the card in strict mode (a
CPU fallback anywhere in the model is a failure) against the same model on
the CPU, with the card's and the CPU's time printed (not asserted).

The guest's CPU model lacks what oneDNN wants, so the CPU reference runs
with ``torch.backends.mkldnn.enabled = False``.

Each family keeps its tests in its own section below.

    python3 test_models.py [NAME...]      these tests alone
"""

import functools
import sys
import time
import traceback
import warnings

import torch

warnings.simplefilter("ignore", UserWarning)

TESTS = []


def test(fn):
    """Register ``fn``; it runs with oneDNN off (the CPU reference), which
    is restored after it (test_torch.py runs other tests in this
    process)."""
    @functools.wraps(fn)
    def run():
        with torch.backends.mkldnn.flags(enabled=False):
            return fn()
    TESTS.append(run)
    return run


def strict_counts(fn):
    """Run ``fn`` in strict mode; return its result and the op counts
    (``torch.spyre.op_counts()``) of the run."""
    torch.spyre.reset_op_counts()
    with torch.spyre.strict():
        r = fn()
    return r, torch.spyre.op_counts()


def timed(fn, sync=False):
    """``fn()`` and its wall time in ms (after a card synchronize when
    ``sync``)."""
    t0 = time.perf_counter()
    r = fn()
    if sync:
        torch.spyre.synchronize()
    return r, 1e3 * (time.perf_counter() - t0)


def main(names):
    tests = [t for t in TESTS if not names or t.__name__ in names]
    print("KTAP version 1")
    print(f"1..{len(tests)}")
    failed = 0
    for i, t in enumerate(tests, 1):
        t0 = time.time()
        try:
            t()
            ok = True
        except Exception:       # noqa: BLE001
            ok = False
            for line in traceback.format_exc().splitlines():
                print("# " + line)
        print(f"# {t.__name__}: {time.time() - t0:.1f} s")
        print(f"{'ok' if ok else 'not ok'} {i} {t.__name__}")
        failed += not ok
    print(f"# Totals: pass:{len(tests) - failed} fail:{failed} xfail:0 "
          f"xpass:0 skip:0 error:0")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
