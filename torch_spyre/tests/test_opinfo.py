# SPDX-License-Identifier: MIT
"""PyTorch's OpInfo database (torch.testing._internal.common_methods_invocations
.op_db) run on the spyre device and compared with the CPU.

PyTorch 2.6 ships the database but not the test that compares a device with
the CPU (test_ops.py's test_compare_cpu); this is ours on the same model:
sample inputs are made on the CPU, moved to the card, the op runs on both
and the results are compared (atol = rtol = 1e-3, as test_compare_cpu;
bfloat16 at its own resolution, 1.6e-2).

    torch_opinfo_* tests (imported by test_torch.py, so part of `make
    test`): the OpInfos of the op families the card runs natively, one
    sample per op and dtype, strict mode around the op call alone: an op
    listed here that falls back to the CPU fails, as does a wrong value.

    python3 test_opinfo.py --full [--samples N] [--only NAME...]
        (`make test-opinfo`) the whole op_db, N samples (default 3) per op
        and dtype, a table per op family and dtype of samples passed on the
        card / passed through the CPU fallback / refused by design (float64
        and complex are TypeError on the card) / failed, and the totals.
"""

import sys
import time
import traceback
import warnings

import torch

warnings.simplefilter("ignore")

DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.int32,
          torch.int64, torch.bool]

# The OpInfos (name or name.variant) whose every sample must run on the
# card, by family.  A name here that falls back is a failure.
NATIVE = {
    "unary": [
        "abs", "neg", "exp", "log", "sqrt", "rsqrt", "reciprocal", "tanh",
        "sigmoid", "erf", "floor", "ceil", "round", "trunc", "frac", "sign",
        "sgn", "nan_to_num", "isnan", "isinf", "isposinf", "isneginf",
        "signbit", "logical_not", "bitwise_not", "logit", "log2", "log10",
        "positive", "square",
    ],
    "activation": [
        "nn.functional.relu", "nn.functional.relu6", "nn.functional.hardtanh",
        "nn.functional.leaky_relu", "nn.functional.elu", "nn.functional.selu",
        "nn.functional.celu", "nn.functional.gelu", "nn.functional.silu",
        "nn.functional.mish", "nn.functional.softplus",
        "nn.functional.hardswish", "nn.functional.hardsigmoid",
        "nn.functional.threshold",
    ],
    "binary": [
        "add", "sub", "rsub", "mul", "div.no_rounding_mode",
        "div.trunc_rounding", "div.floor_rounding", "true_divide",
        "floor_divide", "remainder", "fmod", "pow", "copysign", "maximum",
        "minimum", "fmax", "fmin", "xlogy", "lerp", "addcmul", "addcdiv",
        "clamp", "clamp_min", "clamp_max", "eq", "ne", "lt", "le", "gt", "ge",
        "logical_and", "logical_or", "logical_xor", "bitwise_and",
        "bitwise_or", "bitwise_xor", "bitwise_left_shift",
        "bitwise_right_shift", "where", "hypot",
    ],
    "reduction": [
        "sum", "prod", "mean", "amax", "amin", "max.reduction_no_dim",
        "max.reduction_with_dim", "min.reduction_no_dim",
        "min.reduction_with_dim", "argmax", "argmin", "var", "std",
        "var_mean", "std_mean", "logsumexp", "any", "all", "count_nonzero",
        "linalg.vector_norm",
    ],
    "softmax_norm": [
        "softmax", "log_softmax", "nn.functional.layer_norm",
        "nn.functional.rms_norm",
    ],
    "matrix": ["tril", "triu", "mm", "bmm", "addmm", "baddbmm"],
    # gathers, scatters and copies into slices (ops_index.cpp)
    "indexing": [
        "index_select", "gather", "take", "scatter", "scatter_add",
        "index_add", "index_copy", "nn.functional.embedding", "flip", "roll",
        "cat", "stack", "masked_fill", "constant_pad_nd", "repeat",
        "index_put",
    ],
}

# Native for the floating dtypes only (the card's GEMM has no int32/int64).
FLOAT_ONLY = {"mm", "bmm", "addmm", "baddbmm"}

# The math library libspyre's builder does not have yet (part 2 of the
# card's kernels): compared, native as soon as the builder takes them.
MATHLIB = ["exp2", "expm1", "log1p", "sin", "cos", "tan", "asin", "acos",
           "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "erfc",
           "erfinv", "lgamma", "atan2"]

TOL = {torch.bfloat16: 1.6e-2}

_DB = None


def op_db():
    global _DB
    if _DB is None:
        from torch.testing._internal.common_methods_invocations import \
            op_db as db
        _DB = {full_name(o): o for o in db}
    return _DB


def full_name(op):
    return op.name + ("." + op.variant_test_name if op.variant_test_name
                      else "")


def family(op):
    cls = type(op).__name__
    if op.name.startswith("nn.functional."):
        return "nn.functional"
    for p in ("linalg.", "special.", "fft.", "_refs."):
        if op.name.startswith(p):
            return p[:-1]
    return {"UnaryUfuncInfo": "unary", "BinaryUfuncInfo": "binary",
            "ReductionOpInfo": "reduction"}.get(cls, "other")


def _spyre(t):
    return t.to("spyre") if isinstance(t, torch.Tensor) else t


def _tensors(x):
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (list, tuple)):
        return [t for e in x for t in _tensors(e)]
    if isinstance(x, dict):
        return [t for e in x.values() for t in _tensors(e)]
    return []


def compare(got, want, dtype):
    """Assert ``got`` (spyre results) equals ``want`` (CPU results)."""
    tol = TOL.get(dtype, 1e-3)
    if isinstance(want, torch.Tensor):
        assert isinstance(got, torch.Tensor), type(got)
        assert got.device.type == "spyre", got.device
        torch.testing.assert_close(got.cpu(), want, rtol=tol, atol=tol,
                                   equal_nan=True)
    elif isinstance(want, (list, tuple)):
        assert len(got) == len(want), (len(got), len(want))
        for g, w in zip(got, want):
            compare(g, w, dtype)
    else:
        assert got == want or (got != got and want != want), (got, want)


def run_sample(op, sample, dtype, strict):
    """Run one sample on both devices; return 'native' or 'fallback'
    (passed), raise on a difference or an error only the card raised."""
    s = sample.transform(_spyre)
    cpu_err = None
    try:
        want = op(sample.input, *sample.args, **sample.kwargs)
        want = sample.output_process_fn_grad(want)
    except Exception as e:   # the CPU refuses it too: the card must raise
        cpu_err = e
    torch.spyre.reset_op_counts()
    try:
        if strict:
            with torch.spyre.strict():
                got = op(s.input, *s.args, **s.kwargs)
        else:
            got = op(s.input, *s.args, **s.kwargs)
        got = s.output_process_fn_grad(got)
        torch.spyre.synchronize()
    except Exception:
        if cpu_err is not None:
            return "cpu-error"
        raise
    fell = any(v["fallback"] for v in torch.spyre.op_counts().values())
    assert cpu_err is None, f"the CPU raised {cpu_err!r}, the card did not"
    compare(got, want, dtype)
    return "fallback" if fell else "native"


def samples(op, dtype, n):
    out = []
    try:
        for i, smp in enumerate(op.sample_inputs("cpu", dtype,
                                                 requires_grad=False)):
            if i >= n:
                break
            out.append(smp)
    except Exception:
        pass
    return out


def check_family(names, strict=True):
    """The KTAP test body of one family: one sample per op and dtype."""
    db = op_db()
    failures = []
    runs = 0
    for name in names:
        op = db.get(name)
        if op is None:          # not in this PyTorch's database
            print(f"# no OpInfo {name}")
            continue
        dts = op.supported_dtypes("cpu")
        for dt in DTYPES:
            if dt not in dts:
                continue
            st = strict and (name not in FLOAT_ONLY or dt.is_floating_point)
            for smp in samples(op, dt, 1):
                runs += 1
                try:
                    run_sample(op, smp, dt, st)
                except Exception as e:
                    failures.append(f"{name} {str(dt)[6:]}: "
                                    f"{type(e).__name__}: "
                                    f"{str(e).splitlines()[0][:160]}")
    for f in failures:
        print("#   " + f)
    print(f"# {runs} samples, {len(failures)} failed")
    assert not failures, f"{len(failures)} of {runs} samples failed"


TESTS = []


def _family_test(fam, names, strict=True):
    def t():
        check_family(names, strict)
    t.__name__ = "torch_opinfo_" + fam
    TESTS.append(t)


for _fam, _names in NATIVE.items():
    _family_test(_fam, _names)
_family_test("mathlib", MATHLIB, strict=False)


# ---- the whole database ------------------------------------------------------

CATS = ("native", "fallback", "refused", "failed")


def classify(op, smp, dt):
    try:
        return run_sample(op, smp, dt, strict=False), None
    except TypeError as e:
        if "not supported on the card" in str(e) or "float64" in str(e):
            return "refused", None
        return "failed", e
    except Exception as e:
        if "sparse" in str(e).lower():
            return "refused", None
        return "failed", e


def full(nsamples, only):
    db = op_db()
    table = {}          # (family, dtype) -> {cat: n}
    fails = []
    t0 = time.time()
    for name, op in sorted(db.items()):
        if only and name not in only:
            continue
        fam = family(op)
        try:
            dts = op.supported_dtypes("cpu")
        except Exception:
            continue
        for dt in DTYPES:
            if dt not in dts:
                continue
            for smp in samples(op, dt, nsamples):
                cat, err = classify(op, smp, dt)
                if cat == "cpu-error":
                    continue
                row = table.setdefault((fam, str(dt)[6:]), dict.fromkeys(
                    CATS, 0))
                row[cat] += 1
                if err is not None:
                    fails.append(f"{name} {str(dt)[6:]}: {type(err).__name__}:"
                                 f" {str(err).splitlines()[0][:160]}"
                                 if str(err) else f"{name} {str(dt)[6:]}: "
                                 f"{type(err).__name__}")
    print(f"# op_db: {len(db)} OpInfos, {nsamples} sample(s) per op and dtype,"
          f" {time.time() - t0:.0f} s")
    hdr = f"# {'family':<14} {'dtype':<9}" + "".join(f"{c:>10}" for c in CATS)
    print(hdr)
    tot = dict.fromkeys(CATS, 0)
    for (fam, dt), row in sorted(table.items()):
        print(f"# {fam:<14} {dt:<9}" + "".join(f"{row[c]:>10}" for c in CATS))
        for c in CATS:
            tot[c] += row[c]
    n = sum(tot.values())
    print(f"# {'total':<24}" + "".join(f"{tot[c]:>10}" for c in CATS))
    if n:
        print(f"# on the card: {100.0 * tot['native'] / n:.1f} % of {n} "
              f"samples; through the fallback {100.0 * tot['fallback'] / n:.1f}"
              f" %; refused {100.0 * tot['refused'] / n:.1f} %; failed "
              f"{100.0 * tot['failed'] / n:.1f} %")
    # the families of the card's native ops, strict
    nat = [x for v in NATIVE.values() for x in v]
    ok = bad = 0
    for name in nat:
        op = db.get(name)
        if op is None:
            continue
        for dt in DTYPES:
            if dt not in op.supported_dtypes("cpu"):
                continue
            if name in FLOAT_ONLY and not dt.is_floating_point:
                continue
            for smp in samples(op, dt, nsamples):
                try:
                    run_sample(op, smp, dt, strict=True)
                    ok += 1
                except Exception:
                    bad += 1
    if ok + bad:
        print(f"# native families, strict: {ok} of {ok + bad} samples pass "
              f"({100.0 * ok / (ok + bad):.1f} %)")
    for f in fails:
        print("# FAILED " + f)
    return 0


def main(argv):
    if "--full" in argv:
        n = 3
        if "--samples" in argv:
            n = int(argv[argv.index("--samples") + 1])
        only = argv[argv.index("--only") + 1:] if "--only" in argv else []
        return full(n, set(only))
    names = [a for a in argv if not a.startswith("-")]
    tests = [t for t in TESTS if not names or t.__name__ in names]
    print("KTAP version 1")
    print(f"1..{len(tests)}")
    failed = 0
    for i, t in enumerate(tests, 1):
        t0 = time.time()
        try:
            t()
            print(f"ok {i} {t.__name__} # {time.time() - t0:.1f} s")
        except Exception:
            failed += 1
            for line in traceback.format_exc().splitlines():
                print("# " + line)
            print(f"not ok {i} {t.__name__}")
    print(f"# Totals: pass:{len(tests) - failed} fail:{failed} xfail:0 "
          f"xpass:0 skip:0 error:0")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
