"""The KTAP runner of the torch_spyre tests: runs test functions in order,
one ``ok``/``not ok`` line each with its time, and a ``# Totals:`` line that
scripts/run-tests.sh counts; and the assertion helpers the test files share.
Shared by test_torch.py (the whole suite) and the files that also run on
their own (test_conv.py, test_opinfo.py)."""

import contextlib
import functools
import sys
import time
import traceback


def registry(tests, context=contextlib.nullcontext):
    """A ``@test`` decorator that appends each function it decorates to
    @tests (the list run() takes).  @context: a function returning the
    context manager the test runs in (entered and left around each run,
    since test_torch.py runs every file's tests in one process)."""
    def test(fn):
        @functools.wraps(fn)
        def run():
            with context():
                return fn()
        tests.append(run)
        return run
    return test


def raises(fn, text, what, exc=RuntimeError):
    """Assert ``fn()`` raises ``exc`` (a class or a tuple of them) whose
    message holds ``text`` (None: any message); ``what`` names the case
    in the failure."""
    try:
        fn()
    except exc as e:
        assert text is None or text in str(e), e
    else:
        raise AssertionError(what)


def without_onednn():
    """The context of tests whose CPU reference runs with oneDNN off (the
    guest's CPU model lacks what oneDNN's convolutions want)."""
    import torch
    return torch.backends.mkldnn.flags(enabled=False)


def select(tests, names):
    """The tests named in @names (all of them when @names is empty); an
    unknown name is an error, so a typo cannot pass as an empty run."""
    known = {t.__name__ for t in tests}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise SystemExit(f"no such test: {', '.join(unknown)}")
    return [t for t in tests if not names or t.__name__ in names]


def run(tests, header=(), after_each=None, trailer=None):
    """Run @tests (functions taking no argument; an exception fails one)
    and print KTAP.  @header: comment lines printed after the version line;
    @after_each(test): called after each test; @trailer(): comment lines
    printed before the totals.  Returns the exit status: 1 if any failed."""
    print("KTAP version 1")
    for line in header:
        print("# " + line)
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
        sys.stdout.flush()
        if after_each:
            after_each(t)
    for line in (trailer() if trailer else ()):
        print("# " + line)
    print(f"# Totals: pass:{len(tests) - failed} fail:{failed} xfail:0 "
          f"xpass:0 skip:0 error:0")
    return 1 if failed else 0
