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

    torch_ops_* tests (also run by test_torch.py): the backend's semantics
    the OpInfo samples do not reach, each checked against the CPU (integer
    division by zero, casts to the integer dtypes, addr's rounding in the
    half types, views over a partial storage, tensor_split with card
    indices, set_, the storage-resize hook, the integer matrix products,
    batch norm in training and eval with its backward, softmax's backward
    in the half types); torch_kernels_split_large: a generated kernel over
    a large tensor goes as several KERNEL commands.

    python3 test_opinfo.py --full [--samples N] [--only NAME...]
        (`make test-opinfo`) the whole op_db, N samples (default 3) per op
        and dtype, a table per op family and dtype of samples passed on the
        card / passed through the CPU fallback / not comparable / no
        reference (the CPU raised on the sample) / refused by design
        (float64 and complex are TypeError on the card) / failed, and the
        totals; then the NATIVE and STRICT_FULL families again in strict
        mode (the share per family, and each sample that fails or falls
        back); then, per OpInfo, the ATen ops that went through the CPU
        fallback.  Where oneDNN cannot build a primitive for the guest's
        CPU model (float32 convolutions) the CPU reference runs again
        without it.  Worker processes run the samples, and a sample that
        leaves the card context in error fails alone: a new worker goes on
        after it.

Like test_compare_cpu, each OpInfo's own skips and expected failures for
TestCommon.test_compare_cpu are honoured (OpInfo.get_decorators), and so
are its random ops (an op wrapped in wrapper_set_seed: the card's Philox
generator draws other numbers than the CPU's): such a sample still runs on
the card and its results must have the CPU's structure, shapes, dtypes and
devices, but values that differ make it "not comparable", not a failure.
A result that the sample asks to be on the CPU (`x.to(torch.device("cpu"),
...)`) is compared there.
"""

import json
import os
import subprocess
import sys
import time
import warnings

import ktap
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
        "positive", "square", "exp2", "expm1", "log1p", "sin", "cos", "tan",
        "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh",
        "erfc", "erfinv", "lgamma",
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
        "bitwise_right_shift", "where", "hypot", "atan2",
    ],
    "reduction": [
        "sum", "prod", "mean", "amax", "amin", "max.reduction_no_dim",
        "max.reduction_with_dim", "min.reduction_no_dim",
        "min.reduction_with_dim", "argmax", "argmin", "var", "std",
        "var_mean", "std_mean", "logsumexp", "any", "all", "count_nonzero",
        "linalg.vector_norm",
    ],
    "scan": ["cumsum", "cumprod", "cummax", "cummin"],
    "softmax_norm": [
        "softmax", "log_softmax", "nn.functional.layer_norm",
        "nn.functional.rms_norm", "nn.functional.group_norm",
        "nn.functional.batch_norm", "nn.functional.batch_norm.without_cudnn",
        "native_batch_norm", "_native_batch_norm_legit",
        "_batch_norm_with_update", "_softmax_backward_data",
    ],
    "matrix": ["tril", "triu", "mm", "bmm", "addmm", "baddbmm", "addr"],
    "factory": ["linspace"],
    "shape": ["tensor_split", "as_strided", "as_strided.partial_views"],
    # gathers, scatters and copies into slices (ops_index.cpp)
    "indexing": [
        "index_select", "gather", "take", "scatter", "scatter_add",
        "index_add", "index_copy", "nn.functional.embedding", "flip", "roll",
        "cat", "stack", "masked_fill", "constant_pad_nd", "repeat",
        "index_put", "nonzero", "masked_select", "masked_scatter",
        "repeat_interleave", "nn.functional.pad.circular",
    ],
    # a bitonic network of kernel launches, and binary searches
    # (ops_sort.cpp)
    "sorting": [
        "sort", "argsort", "msort", "topk", "kthvalue", "median",
        "nanmedian", "searchsorted", "bucketize", "unique",
    ],
    # scaled dot-product attention (ops_attention.cpp) and the functional
    # multi-head attention over it
    "attention": [
        "nn.functional.scaled_dot_product_attention",
        "nn.functional.multi_head_attention_forward",
    ],
    # losses (ops_loss.cpp, and ATen's compositions of native ops)
    "losses": [
        "nn.functional.nll_loss", "nn.functional.cross_entropy",
        "nn.functional.mse_loss", "nn.functional.l1_loss",
        "nn.functional.smooth_l1_loss", "nn.functional.huber_loss",
        "nn.functional.binary_cross_entropy",
        "nn.functional.binary_cross_entropy_with_logits",
        "nn.functional.kl_div", "nn.functional.logsigmoid",
        "nn.functional.soft_margin_loss",
    ],
    # the foreach ops of torch.optim (ops_foreach.cpp); the database's
    # foreach OpInfos call the functional variants (the first sample of
    # _foreach_add / _foreach_sub: two lists with alpha 3.14, which the
    # half types round as the CPU's scalar kernel: alpha, alpha * other,
    # the sum, each in the dtype).  Not listed: _foreach_norm (ATen's
    # per-tensor linalg_vector_norm with a dtype falls back).
    "foreach": [
        "_foreach_add", "_foreach_sub",
        "_foreach_mul", "_foreach_div", "_foreach_maximum",
        "_foreach_minimum", "_foreach_addcmul", "_foreach_addcdiv",
        "_foreach_lerp", "_foreach_sqrt", "_foreach_neg",
        "_foreach_reciprocal", "_foreach_zero",
    ],
    # PyTorch 2.6's op_db has no OpInfo of an RNN or its cells: nn.LSTM,
    # nn.GRU and the cells are test_models.py's torch_models_lstm / _gru
    "rnn": [],
}

# The families of [torch-ops-2] that `--full` also runs in strict mode
# but that have no torch_opinfo_* test: their samples are slow under TCG,
# and test_conv.py (convolutions, pooling, upsampling) and the
# torch_ops_random_* tests (statistical checks) cover them in `make test`.
STRICT_FULL = {
    "conv_pool": [
        "nn.functional.conv1d", "nn.functional.conv2d", "nn.functional.conv3d",
        "nn.functional.conv_transpose1d", "nn.functional.conv_transpose2d",
        "nn.functional.conv_transpose3d", "nn.functional.max_pool1d",
        "nn.functional.max_pool2d", "nn.functional.max_pool3d",
        "nn.functional.avg_pool1d", "nn.functional.avg_pool2d",
        "nn.functional.avg_pool3d", "nn.functional.adaptive_avg_pool1d",
        "nn.functional.adaptive_avg_pool2d",
        "nn.functional.adaptive_avg_pool3d",
        "nn.functional.adaptive_max_pool1d",
        "nn.functional.adaptive_max_pool2d",
        "nn.functional.adaptive_max_pool3d",
        "nn.functional.interpolate.nearest",
        "nn.functional.interpolate.nearest-exact",
        "nn.functional.interpolate.linear",
        "nn.functional.interpolate.bilinear",
        "nn.functional.interpolate.trilinear",
        "nn.functional.interpolate.area", "nn.functional.upsample_nearest",
        "nn.functional.upsample_bilinear", "nn.functional.pixel_shuffle",
        "nn.functional.pixel_unshuffle", "nn.functional.pad.constant",
        "nn.functional.pad.reflect", "nn.functional.pad.replicate",
        "nn.functional.unfold",
    ],
    "random": [
        "bernoulli", "exponential", "multinomial", "normal", "normal.in_place",
        "normal.number_mean", "rand_like", "randint", "randint_like", "randn",
        "randn_like", "uniform", "nn.functional.dropout",
        "nn.functional.dropout2d", "nn.functional.dropout3d",
        "nn.functional.alpha_dropout",
    ],
}

# (OpInfo, dtype) left out of the KTAP family tests, with the reason: the
# card's attention rounds the scores and the probabilities to bfloat16
# between its GEMMs and its softmax, where the CPU's flash kernel keeps
# them in float32 (differences past bfloat16's 1.6e-2 on the OpInfo's
# samples); float16 and float32 pass.
SKIP = {("nn.functional.scaled_dot_product_attention", torch.bfloat16)}

TOL = {torch.bfloat16: 1.6e-2}

_DB = None


def op_db():
    global _DB
    if _DB is None:
        from torch.testing._internal import common_methods_invocations as m
        db = list(m.op_db)
        # the foreach OpInfos live in lists of their own
        for extra in ("foreach_unary_op_db", "foreach_binary_op_db",
                      "foreach_pointwise_op_db", "foreach_reduce_op_db",
                      "foreach_other_op_db"):
            db += getattr(m, extra, [])
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
    """A CPU sample tensor on the card.  A view that does not cover its
    storage (a slice, a partial view) moves with its whole storage and
    stays the same view of it, so ops that reach past the view's elements
    (as_strided with a storage offset) see what the CPU sees."""
    if not isinstance(t, torch.Tensor):
        return t
    if t.layout != torch.strided or t.device.type != "cpu":
        return t.to("spyre")
    st = t.untyped_storage()
    n = st.nbytes() // t.element_size()
    if t.storage_offset() == 0 and t.numel() == n and t.is_contiguous():
        return t.to("spyre")
    flat = torch.empty(0, dtype=t.dtype).set_(st, 0, (n,), (1,))
    return flat.to("spyre").as_strided(t.size(), t.stride(),
                                       t.storage_offset())


def _on_card(sample):
    """The sample's tensors on the card, and a factory's device= too."""
    s = sample.transform(_spyre)
    if "device" in s.kwargs:
        s.kwargs = dict(s.kwargs, device="spyre")
    return s


def _tensors(x):
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (list, tuple)):
        return [t for e in x for t in _tensors(e)]
    if isinstance(x, dict):
        return [t for e in x.values() for t in _tensors(e)]
    return []


class ValueMismatch(AssertionError):
    """The card's results have the CPU's structure, shapes, dtypes and
    devices, but other values."""


class NoReference(Exception):
    """The CPU, the reference, raised on a sample of the database (say
    oneDNN refusing a float32 convolution): there is no value to compare.
    ``card_raised``: the card raised too."""

    def __init__(self, cpu_err, card_raised):
        super().__init__(f"the CPU raised {type(cpu_err).__name__}: "
                         f"{(str(cpu_err).splitlines() or [''])[0][:120]}")
        self.card_raised = card_raised


class NotComparable(Exception):
    """A sample whose values differ from the CPU's where the OpInfo says
    they may (see compare_mode); ``reason`` says why."""

    def __init__(self, reason, fell):
        super().__init__(reason)
        self.reason = reason
        self.fell = fell


def _seeded(op):
    """True for an OpInfo whose op draws random numbers: the database wraps
    every such op in wrapper_set_seed (a fixed seed per call)."""
    code = getattr(op.op, "__code__", None)
    return code is not None and "wrapper_set_seed" in code.co_names


def compare_mode(op, dtype):
    """How test_compare_cpu treats ``op`` in ``dtype``: None (compare the
    values), or the reason the values may differ: the OpInfo skips the
    test (unittest.skip: nondeterministic or undefined outputs), expects
    it to fail (unittest.expectedFailure), or draws random numbers."""
    dev = torch._C._get_privateuse1_backend_name()
    for dec in op.get_decorators("TestCommon", "test_compare_cpu", dev,
                                 dtype, {}):
        def probe():
            pass
        try:
            fn = dec(probe)
        except Exception:       # a decorator for test classes only
            continue
        if getattr(fn, "__unittest_skip__", False):
            return "skipped: " + str(fn.__unittest_skip_why__)
        if getattr(fn, "__unittest_expecting_failure__", False):
            return "expected failure"
    if _seeded(op):
        return "random"
    return None


def _result_device(op, sample):
    """The device a result belongs on: the CPU when the sample of
    Tensor.to names the CPU (its device overload: a positional torch.device
    or device string), else the card."""
    if op.name == "to":
        for a in sample.args:
            if isinstance(a, (str, torch.device)) and \
                    torch.device(a).type == "cpu":
                return "cpu"
    return "spyre"


def compare(got, want, dtype, device="spyre"):
    """Assert ``got`` (the card's results) equals ``want`` (the CPU's):
    the same structure, and tensors with the same shape, dtype and values
    (at ``dtype``'s tolerance) on ``device``.  A difference in values only
    raises ValueMismatch."""
    tol = TOL.get(dtype, 1e-3)
    if isinstance(want, torch.Tensor):
        assert isinstance(got, torch.Tensor), type(got)
        assert got.device.type == device, (got.device, device)
        assert got.shape == want.shape, (got.shape, want.shape)
        assert got.dtype == want.dtype, (got.dtype, want.dtype)
        try:
            torch.testing.assert_close(got.cpu(), want, rtol=tol, atol=tol,
                                       equal_nan=True)
        except AssertionError as e:
            raise ValueMismatch(str(e)) from None
    elif isinstance(want, (list, tuple)):
        assert isinstance(got, (list, tuple)), type(got)
        assert len(got) == len(want), (len(got), len(want))
        for g, w in zip(got, want):
            compare(g, w, dtype, device)
    elif isinstance(want, (bool, int, float, complex)):
        if not (got == want or (got != got and want != want)):
            raise ValueMismatch(f"{got!r} != {want!r}")
    else:
        assert got == want, (got, want)


# Selections whose indices PyTorch leaves open among equal values (the
# CPU's come from std::sort / nth_element): their values are compared,
# and their indices must point at those values (the card's are the stable
# order's, checked by torch_ops_sort_order and torch_ops_select).
TIE_ORDER = {"sort", "argsort", "topk", "kthvalue", "median", "nanmedian"}


def _select_dim(name, sample):
    """(dim, keepdim) of a selection sample, or None (no dim: median())."""
    a, kw = sample.args, sample.kwargs
    if name in ("sort", "argsort"):
        return kw.get("dim", a[0] if a else -1), True
    if name == "topk":
        return kw.get("dim", a[1] if len(a) > 1 else -1), True
    if name == "kthvalue":
        return (kw.get("dim", a[1] if len(a) > 1 else -1),
                kw.get("keepdim", a[2] if len(a) > 2 else False))
    if not a and "dim" not in kw:
        return None
    dim = kw["dim"] if "dim" in kw else a[0]
    return dim, kw.get("keepdim", a[1] if len(a) > 1 else False)


def compare_selection(name, sample, got, want, dtype):
    """A TIE_ORDER op's card result against the CPU's: the values, and
    the input gathered at the card's indices equals them."""
    dk = _select_dim(name, sample)
    x = sample.input
    if dk is None or x.dim() == 0:
        compare(got, want, dtype)
        return
    dim, keep = dk
    if name == "argsort":
        idx = got.cpu()
        compare(_spyre(x.gather(dim, idx)), x.gather(dim, want), dtype)
        return
    compare(got[0], want[0], dtype)
    idx = got[1].cpu()
    if not keep:
        idx = idx.unsqueeze(dim)
    picked = x.gather(dim, idx)
    if not keep:
        picked = picked.squeeze(dim)
    compare(_spyre(picked), want[0], dtype)


def _reference(op, sample):
    """The op on the CPU; again without oneDNN when oneDNN cannot build a
    primitive for the guest's CPU model (float32 convolutions), as the
    torch_conv_* and torch_models_* references run."""
    try:
        return op(sample.input, *sample.args, **sample.kwargs)
    except RuntimeError as e:
        if "could not create a primitive" not in str(e):
            raise
    with ktap.without_onednn():
        return op(sample.input, *sample.args, **sample.kwargs)


def _fell_back():
    """The ATen ops that went through the CPU fallback since the last
    torch.spyre.reset_op_counts(), sorted."""
    return sorted(k for k, v in torch.spyre.op_counts().items()
                  if v["fallback"])


def run_sample(op, sample, dtype, strict):
    """Run one sample on both devices; return 'native' or 'fallback'
    (passed), raise NotComparable when the values differ where the
    OpInfo allows it (compare_mode), NoReference when the CPU raised, and
    another exception on any other difference or an error only the card
    raised."""
    s = _on_card(sample)
    cpu_err = None
    try:
        want = sample.output_process_fn_grad(_reference(op, sample))
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
            raise NoReference(cpu_err, True) from None
        raise
    fell = bool(_fell_back())
    if cpu_err is not None:
        raise NoReference(cpu_err, False)
    try:
        if op.name in TIE_ORDER:
            compare_selection(op.name, sample, got, want, dtype)
        else:
            compare(got, want, dtype, _result_device(op, sample))
    except ValueMismatch:
        reason = compare_mode(op, dtype)
        if reason is None:
            raise
        raise NotComparable(reason, fell) from None
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
    runs = skipped = 0
    for name in names:
        op = db.get(name)
        if op is None:          # not in this PyTorch's database
            print(f"# no OpInfo {name}")
            continue
        dts = op.supported_dtypes("cpu")
        for dt in DTYPES:
            if dt not in dts or (name, dt) in SKIP:
                continue
            st = strict
            for smp in samples(op, dt, 1):
                runs += 1
                try:
                    run_sample(op, smp, dt, st)
                except NoReference as e:
                    if not e.card_raised:
                        failures.append(f"{name} {str(dt)[6:]}: {e}, the "
                                        f"card did not")
                except NotComparable as e:
                    skipped += 1
                    if e.fell and st:
                        failures.append(f"{name} {str(dt)[6:]}: fell back"
                                        f" ({e.reason})")
                except Exception as e:
                    failures.append(f"{name} {str(dt)[6:]}: "
                                    f"{type(e).__name__}: "
                                    f"{str(e).splitlines()[0][:160]}")
    for f in failures:
        print("#   " + f)
    print(f"# {runs} samples, {len(failures)} failed, {skipped} ran but "
          f"were not comparable")
    assert not failures, f"{len(failures)} of {runs} samples failed"


TESTS = []


def _family_test(fam, names, strict=True):
    def t():
        check_family(names, strict)
    t.__name__ = "torch_opinfo_" + fam
    TESTS.append(t)


for _fam, _names in NATIVE.items():
    if _names:
        _family_test(_fam, _names)


# ---- semantics the OpInfo samples do not reach ------------------------------


def _raises_like_cpu(fn, *cpu_args):
    """fn on the CPU arguments and on their card copies: both raise the
    same exception type with the same message, or give the same values."""
    card_args = [_spyre(a) for a in cpu_args]
    try:
        want = fn(*cpu_args)
    except Exception as e:
        try:
            fn(*card_args)
        except type(e) as g:
            assert str(g).splitlines()[0] == str(e).splitlines()[0], (g, e)
            return
        raise AssertionError(f"the CPU raised {e!r}, the card did not")
    got = fn(*card_args)
    torch.testing.assert_close(got.cpu(), want, rtol=0, atol=0,
                               equal_nan=True)


def torch_ops_int_division_by_zero():
    """Integer division by zero raises as on the CPU (ZeroDivisionError),
    with a tensor or a scalar divisor; float division gives inf."""
    ops = [lambda a, b: torch.div(a, b, rounding_mode="trunc"),
           lambda a, b: torch.div(a, b, rounding_mode="floor"),
           torch.floor_divide, torch.remainder, torch.fmod]
    for dt in (torch.int32, torch.int64, torch.int16, torch.uint8):
        a = torch.tensor([7, 5, 3, 2], dtype=dt)
        for b in (torch.tensor([2, 0, 1, 3], dtype=dt),
                  torch.tensor([2, 1, 1, 3], dtype=dt)):
            for op in ops:
                _raises_like_cpu(op, a, b)
        for op in ops:
            _raises_like_cpu(lambda x: op(x, 0), a)
            _raises_like_cpu(lambda x: op(x, 2), a)
            _raises_like_cpu(lambda x, y: op(x, y), a, torch.tensor(0))
    a = torch.tensor([1.0, -1.0, 0.0])
    _raises_like_cpu(lambda x: torch.div(x, 0), a)
    _raises_like_cpu(lambda x: torch.floor_divide(x, 0.0), a)
    with torch.spyre.strict():
        _raises_like_cpu(lambda x: torch.remainder(x, 3), torch.arange(9))


def torch_ops_casts_to_unsigned():
    """Float to uint8 (and the other integer dtypes) gives the CPU's
    values for negative and out-of-range numbers."""
    x = torch.tensor([-1.5, -0.5, 0.7, 127.9, 200.9, 255.0, -128.0, -200.7,
                      300.0, 1000.5, -1000.5])
    for src in (torch.float32, torch.float16, torch.bfloat16):
        for dst in (torch.uint8, torch.int8, torch.int16, torch.int32,
                    torch.int64):
            v = x.to(src)
            with torch.spyre.strict():
                _raises_like_cpu(lambda t: t.to(dst), v)


def torch_ops_addr_rounding():
    """addr in the half types rounds where the CPU kernel does: equal to
    the CPU's result bit for bit, with cancellation between the terms."""
    g = torch.Generator().manual_seed(3)
    for dt in (torch.bfloat16, torch.float16, torch.float32, torch.int32,
               torch.bool):
        m = torch.randn(9, 7, generator=g) * 8
        v1 = torch.randn(9, generator=g) * 3
        v2 = torch.randn(7, generator=g) * 3
        m = (m - torch.outer(v1, v2) * 1.5)
        m, v1, v2 = (t.to(dt) for t in (m, v1, v2))
        for beta, alpha in ((1, 1), (2, 3), (0, 1), (1, 0)):
            if dt == torch.bool:
                beta, alpha = bool(beta), bool(alpha)
            with torch.spyre.strict():
                _raises_like_cpu(lambda a, b, c: torch.addr(
                    a, b, c, beta=beta, alpha=alpha), m, v1, v2)
    _raises_like_cpu(lambda a, b, c: torch.addr(a, b, c), torch.ones(3, 3),
                     torch.ones(3, 1), torch.ones(3))
    _raises_like_cpu(lambda a, b, c: torch.addr(a, b, c, alpha=0.5),
                     torch.ones(3, 3, dtype=torch.int32),
                     torch.ones(3, dtype=torch.int32),
                     torch.ones(3, dtype=torch.int32))


def torch_ops_views_and_set():
    """as_strided over a partial view, tensor_split with card indices,
    set_ (aliasing, growing and checking the storage), and a storage
    resized while another card is current."""
    base = torch.arange(20.0)
    v = base[5:15]
    for off in (None, 0, 10):
        kw = {} if off is None else {"storage_offset": off}
        _raises_like_cpu(lambda t: t.as_strided((2, 2), (1, 2), **kw), v)
    x = torch.arange(24.0).view(4, 6)
    for idx in ([1, 3], [0, 5, 5], 2):
        want = x.tensor_split(torch.tensor(idx), dim=1)
        with torch.spyre.strict():
            got = x.to("spyre").tensor_split(
                torch.tensor(idx, device="spyre"), dim=1)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            torch.testing.assert_close(g.cpu(), w, rtol=0, atol=0)
    # x.set_(y) aliases y
    y = torch.arange(6.0, device="spyre")
    a = torch.empty(0, device="spyre")
    with torch.spyre.strict():
        a.set_(y)
    assert a.data_ptr() == y.data_ptr() and a.shape == y.shape
    y.add_(1)
    torch.testing.assert_close(a.cpu(), torch.arange(1.0, 7.0))
    # set_ past the storage's end grows it, as on the CPU
    for dev in ("cpu", "spyre"):
        s = torch.arange(4.0, device=dev)
        t = torch.empty(0, device=dev)
        t.set_(s.untyped_storage(), 2, (4,), (1,))
        assert s.untyped_storage().nbytes() == 24, (dev, t.untyped_storage())
        torch.testing.assert_close(t[:2].cpu(), torch.tensor([2.0, 3.0]))
    _raises_like_cpu(lambda s: torch.empty(0, device=s.device).set_(
        s.untyped_storage(), -1, (2,), (1,)), torch.arange(4.0))
    try:
        torch.empty(0, device="spyre").set_(
            torch.arange(4.0).untyped_storage(), 0, (2,), (1,))
        raise AssertionError("set_ took a CPU storage")
    except RuntimeError as e:
        assert "devices must match" in str(e), e
    # the storage-resize hook allocates on the storage's card
    last = torch.spyre.device_count() - 1
    with torch.spyre.device(last):
        z = torch.arange(8.0, device="spyre:0")
        z.untyped_storage().resize_(64)
        # (a storage address carries its card's index + 1 in the top byte)
        assert z.untyped_storage().data_ptr() >> 56 == 1, hex(z.data_ptr())
        torch.testing.assert_close(z.cpu(), torch.arange(8.0))
        z.add_(1)
        torch.testing.assert_close(z.cpu(), torch.arange(1.0, 9.0))


def _same(got, want):
    """Card results equal to the CPU's, bit for bit."""
    if isinstance(want, (list, tuple)):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            _same(g, w)
    elif want is None:
        assert got is None, got
    else:
        assert got.device.type == "spyre", got.device
        torch.testing.assert_close(got.cpu(), want, rtol=0, atol=0,
                                   equal_nan=True)


def torch_ops_int_matmul():
    """mm, bmm, addmm, baddbmm (and their out= and in-place forms) on the
    integer dtypes run on the card (a generated reduction: the GEMM has
    no integer path) and give the CPU's values exactly, wrapping included;
    transposed operands, K = 0, beta 0, a floating alpha or beta
    (truncated to an integer, as the CPU kernel does)."""
    g = torch.Generator().manual_seed(5)

    def r(*shape, dt):
        return torch.randint(-60, 60, shape, generator=g).to(dt)
    for dt in (torch.int32, torch.int64, torch.int16, torch.uint8,
               torch.int8):
        a, b, c = r(7, 5, dt=dt), r(5, 9, dt=dt), r(7, 9, dt=dt)
        ba, bb, bc = r(3, 7, 5, dt=dt), r(3, 5, 9, dt=dt), r(3, 7, 9, dt=dt)
        big = (r(4, 300, dt=dt) * 50, r(300, 6, dt=dt) * 50)
        cases = [
            (torch.mm, (a, b), {}),
            (torch.mm, (b.t(), a.t()), {}),
            (torch.mm, (a[:, :0], b[:0]), {}),
            (torch.mm, big, {}),
            (torch.bmm, (ba, bb), {}),
            (torch.bmm, (bb.transpose(1, 2), ba.transpose(1, 2)), {}),
            (torch.addmm, (c, a, b), {}),
            (torch.addmm, (c[0], a, b), {"beta": 2, "alpha": 3}),
            (torch.addmm, (c, a, b), {"beta": 0}),
            (torch.addmm, (c, a, b), {"beta": 1.7, "alpha": 0.6}),
            (torch.addmm, (c, a, b), {"beta": 0.2, "alpha": 2.5}),
            (torch.addmm, (c, a[:, :0], b[:0]), {"beta": 3}),
            (torch.baddbmm, (bc, ba, bb), {"beta": -1, "alpha": 2}),
            (torch.baddbmm, (bc[0], ba, bb), {}),
        ]
        for fn, args, kw in cases:
            want = fn(*args, **kw)
            with torch.spyre.strict():
                got = fn(*[_spyre(t) for t in args], **kw)
            _same(got, want)
        # out= and in place
        for fn, args, kw in (cases[0], cases[4], cases[6], cases[12]):
            want = fn(*args, **kw)
            out = torch.empty(0, dtype=dt, device="spyre")
            with torch.spyre.strict():
                fn(*[_spyre(t) for t in args], **kw, out=out)
            _same(out, want)
        want = c.clone().addmm_(a, b, beta=2)
        got = _spyre(c)
        with torch.spyre.strict():
            got.addmm_(_spyre(a), _spyre(b), beta=2)
        _same(got, want)
        want = bc.clone().baddbmm_(ba, bb, alpha=-2)
        got = _spyre(bc)
        with torch.spyre.strict():
            got.baddbmm_(_spyre(ba), _spyre(bb), alpha=-2)
        _same(got, want)
    a = torch.ones(2, 2, dtype=torch.int32)
    _raises_like_cpu(lambda x, y: torch.mm(x, y), a,
                     torch.ones(3, 2, dtype=torch.int32))


def torch_ops_batch_norm_train_eval():
    """nn.BatchNorm2d in training and in eval mode, forward and backward,
    stays on the card (native_batch_norm and its backward) and matches the
    CPU (output, gradients, running statistics); group_norm's backward,
    and batch norm's other ATen entry points (_native_batch_norm_legit,
    its no_stats form, _batch_norm_with_update and batch_norm_backward)
    likewise."""
    import torch.nn as nn
    import torch.nn.functional as F
    torch.manual_seed(7)
    tol = dict(rtol=1e-4, atol=1e-4)
    for dt in (torch.float32, torch.bfloat16):
        if dt != torch.float32:
            tol = dict(rtol=2e-2, atol=2e-2)
        ref = nn.BatchNorm2d(3)
        with torch.no_grad():
            ref.weight.uniform_(0.5, 1.5)
            ref.bias.uniform_(-0.5, 0.5)
        card = nn.BatchNorm2d(3).to("spyre")
        card.load_state_dict(ref.state_dict())
        ref, card = ref.to(dt), card.to(dt)
        for train in (True, False, True):
            ref.train(train)
            card.train(train)
            x = torch.randn(4, 3, 5, 6).to(dt)
            gy = torch.randn(4, 3, 5, 6).to(dt)
            xc = x.to("spyre").requires_grad_()
            x.requires_grad_()
            with torch.spyre.strict():
                yc = card(xc)
                yc.backward(gy.to("spyre"))
            y = ref(x)
            y.backward(gy)
            torch.testing.assert_close(yc.cpu(), y, **tol)
            torch.testing.assert_close(xc.grad.cpu(), x.grad, **tol)
            for pc, pr in ((card.weight, ref.weight), (card.bias, ref.bias)):
                torch.testing.assert_close(pc.grad.cpu(), pr.grad, **tol)
                pc.grad = None
                pr.grad = None
            torch.testing.assert_close(card.running_mean.cpu(),
                                       ref.running_mean, **tol)
            torch.testing.assert_close(card.running_var.cpu(),
                                       ref.running_var, **tol)
    # group_norm backward
    x = torch.randn(2, 6, 4, 3)
    w, b = torch.rand(6) + 0.5, torch.randn(6)
    gy = torch.randn(2, 6, 4, 3)
    res = []
    for dev in ("cpu", "spyre"):
        xs, ws, bs = (t.detach().to(dev).requires_grad_()
                      for t in (x, w, b))
        if dev == "spyre":
            with torch.spyre.strict():
                F.group_norm(xs, 3, ws, bs).backward(gy.to(dev))
        else:
            F.group_norm(xs, 3, ws, bs).backward(gy)
        res.append([t.grad.cpu() for t in (xs, ws, bs)])
    for g, w_ in zip(res[1], res[0]):
        torch.testing.assert_close(g, w_, rtol=1e-4, atol=1e-4)
    # the other entry points, called directly
    aten = torch.ops.aten
    x, gy = torch.randn(3, 4, 5), torch.randn(3, 4, 5)
    w, b = torch.rand(4) + 0.5, torch.randn(4)
    rm, rv = torch.randn(4), torch.rand(4) + 0.5
    calls = [
        lambda x, w, b, rm, rv: aten._native_batch_norm_legit(
            x, w, b, rm, rv, True, 0.1, 1e-5) + (rm, rv),
        lambda x, w, b, rm, rv: aten._native_batch_norm_legit(
            x, w, b, rm, rv, False, 0.1, 1e-5)[:1],
        lambda x, w, b, rm, rv: aten._native_batch_norm_legit.no_stats(
            x, w, b, True, 0.1, 1e-5),
        lambda x, w, b, rm, rv: aten._batch_norm_with_update(
            x, w, b, rm, rv, 0.1, 1e-5)[:3] + (rm, rv),
    ]
    for fn in calls:
        want = fn(x, w, b, rm.clone(), rv.clone())
        with torch.spyre.strict():
            got = fn(*[t.to("spyre") for t in (x, w, b, rm, rv)])
        for g_, w_ in zip(got, want):
            torch.testing.assert_close(g_.cpu(), w_, rtol=1e-4, atol=1e-4)
    _, sm, si = aten.native_batch_norm(x, w, b, rm, rv, True, 0.1, 1e-5)
    for update in (True, False):
        args = (gy, x, w, rm, rv, sm, si, update, 1e-5, [True, True, True])
        want = aten.batch_norm_backward(*args, torch.empty(0))
        with torch.spyre.strict():
            got = aten.batch_norm_backward(
                *[_spyre(a) for a in args],
                torch.empty(0, dtype=torch.uint8, device="spyre"))
        for g_, w_ in zip(got, want):
            torch.testing.assert_close(g_.cpu(), w_, rtol=1e-4, atol=1e-4)


def torch_ops_softmax_backward_half():
    """_softmax_backward_data in float16 and bfloat16 rounds where the CPU
    kernel does (the sum over the innermost dim rounded to the dtype, over
    another dim kept in f32): equal to the CPU bit for bit."""
    g = torch.Generator().manual_seed(11)
    for dt in (torch.float16, torch.bfloat16):
        for shape, dim in (((5,), 0), ((5, 5), 0), ((5, 10, 5), -1),
                           ((4, 33, 6), 1), ((64, 300), -1)):
            for _ in range(3):
                x = (torch.randn(shape, generator=g) * 3).to(dt)
                y = torch.softmax(x, dim, dtype=dt)
                gr = (torch.randn(shape, generator=g) * 3).to(dt)
                want = torch._softmax_backward_data(gr, y, dim, dt)
                with torch.spyre.strict():
                    got = torch._softmax_backward_data(_spyre(gr), _spyre(y),
                                                       dim, dt)
                _same(got, want)


def torch_kernels_split_large():
    """A generated kernel over more than kSplitWork (2^22) element
    iterations goes as several KERNEL commands over slices of its
    outermost dim (each far below the card's 5 s per-command budget), with
    the CPU's results: a pointwise add over a transposed operand, a
    reduction over the inner dim, softmax, layer_norm, a cast; a small op
    stays one command."""
    def launches():
        return torch.ops.spyre.kernel_stats()[3]

    g = torch.Generator().manual_seed(13)
    a = torch.randn(2199, 2050, generator=g)
    b = torch.randn(2050, 2199, generator=g)
    ac, bc = a.to("spyre"), b.to("spyre")
    cases = [
        (lambda x, y: x + y.t(), 2),
        (lambda x, y: x.sum(1), 2),
        (lambda x, y: torch.softmax(x, 1), 2),
        (lambda x, y: torch.nn.functional.layer_norm(x, (2050,)), 2),
        (lambda x, y: (x * 100).to(torch.int32), 2),
        (lambda x, y: x[:64, :64] * 2, 1),
    ]
    for fn, nmin in cases:
        want = fn(a, b)
        torch.spyre.synchronize()
        n0 = launches()
        with torch.spyre.strict():
            got = fn(ac, bc)
        torch.spyre.synchronize()
        n = launches() - n0
        assert (n >= nmin) if nmin > 1 else (n == 1), (n, nmin)
        torch.testing.assert_close(got.cpu(), want, rtol=1e-4, atol=1e-4)
    """Card result(s) ``got`` equal the CPU's ``want`` exactly."""
    if isinstance(want, torch.Tensor):
        assert got.device.type == "spyre", got.device
        torch.testing.assert_close(got.cpu(), want, rtol=0, atol=0,
                                   equal_nan=True)
    else:
        assert len(got) == len(want)
        for g, w in zip(got, want):
            _same(g, w)


def torch_ops_sort_order():
    """sort is stable in both directions (ties keep their order), NaNs
    sort above every number (last ascending, first descending), -0 and +0
    are equal; batched along other dims of any layout; a row that is not
    a power of two and a large one (2 x 5000: 91 launches)."""
    g = torch.Generator().manual_seed(38)
    special = torch.tensor([float("nan"), 1.0, -0.0, float("inf"), 0.0,
                            float("-inf"), float("nan"), -1.0, 0.0, -0.0,
                            1.0, float("nan")])
    ties = torch.randint(0, 4, (3, 37), generator=g)
    cases = [special, special.view(3, 4).t(), ties, ties.t(),
             torch.randn(2, 3, 20, generator=g).transpose(0, 2),
             torch.tensor(5.0), torch.randint(0, 2, (9,), generator=g).bool()]
    big = torch.randn(2, 5000, generator=g).to(torch.float16)
    for desc in (False, True):
        want = torch.sort(big, descending=desc, stable=True)
        with torch.spyre.strict():
            got = torch.sort(_spyre(big), descending=desc)
        _same(got, want)
    for x in cases:
        for dt in (x.dtype, torch.int32) if not x.is_floating_point() else \
                (x.dtype, torch.bfloat16):
            v = x.to(dt)
            for d in range(-1, v.dim()) if v.dim() else (0,):
                for desc in (False, True):
                    want = torch.sort(v, dim=d, descending=desc, stable=True)
                    with torch.spyre.strict():
                        got = torch.sort(_spyre(v), dim=d, descending=desc,
                                         stable=True)
                    _same(got, want)
    with torch.spyre.strict():
        a = torch.argsort(_spyre(ties), dim=0, descending=True)
    _same(a, torch.sort(ties, dim=0, descending=True, stable=True).indices)
    # out= into non-contiguous outputs
    x = torch.randn(6, 5, generator=g)
    vals = torch.empty(5, 6, device="spyre").t()
    idx = torch.empty(5, 6, dtype=torch.long, device="spyre").t()
    with torch.spyre.strict():
        torch.sort(_spyre(x), 1, out=(vals, idx))
    _same((vals, idx), torch.sort(x, 1))


def torch_ops_select():
    """topk with ties (the values the CPU gives; the indices those of the
    stable order, each pointing at its value), NaNs counted largest;
    kthvalue, median and nanmedian with NaNs in rows, keepdim."""
    g = torch.Generator().manual_seed(39)
    x = torch.randint(0, 5, (4, 30), generator=g).float()
    x[1, 3] = float("nan")
    for largest in (True, False):
        want = torch.topk(x, 7, dim=1, largest=largest)
        with torch.spyre.strict():
            got = torch.topk(_spyre(x), 7, dim=1, largest=largest)
        _same(got.values, want.values)
        stable = torch.sort(x, dim=1, descending=largest, stable=True)
        _same(got.indices, stable.indices[:, :7])
    y = torch.randn(5, 8, 6, generator=g)
    y[0, :, 0] = float("nan")
    y[1, 2, :] = float("nan")
    y[2, 3, 1] = float("nan")
    for d in (0, 1, -1):
        for keep in (False, True):
            for fn in (lambda t: torch.kthvalue(t, 3, d, keep),
                       lambda t: torch.median(t, d, keep),
                       lambda t: torch.nanmedian(t, d, keep)):
                want = fn(y)
                with torch.spyre.strict():
                    got = fn(_spyre(y))
                _same(got.values, want.values)
                # the index of a value (the CPU's pick among equal ones,
                # NaNs included, is its own)
                i = got.indices.cpu()
                i = i if keep else i.unsqueeze(d)
                v = y.gather(d, i)
                _same(_spyre(v if keep else v.squeeze(d)), want.values)
    for fn in (torch.median, torch.nanmedian):
        for t in (y, y[3:], torch.full((4,), float("nan"))):
            with torch.spyre.strict():
                got = fn(_spyre(t))
            _same(got, fn(t))


def torch_ops_search_unique():
    """searchsorted (left, right, side=, sorter=, a batch of sequences,
    NaN values, int32 out) and bucketize as on the CPU; unique with
    inverse and counts (NaNs distinct), on the card."""
    g = torch.Generator().manual_seed(40)
    seq = torch.sort(torch.randint(0, 20, (33,), generator=g).float()).values
    vals = torch.tensor([[-1.0, 0.0, 5.0, 5.5, 19.0, 20.0, float("nan")],
                         [3.0, 3.0, 7.0, 100.0, -100.0, 2.0, 1.0]])
    bseq = torch.sort(torch.randn(2, 9, generator=g), dim=1).values
    perm = torch.randperm(33, generator=g)
    shuffled = seq[perm]
    sorter = torch.argsort(shuffled)
    calls = [
        lambda s, v: torch.searchsorted(s, v),
        lambda s, v: torch.searchsorted(s, v, right=True, out_int32=True),
        lambda s, v: torch.searchsorted(s, v, side="right"),
        lambda s, v: torch.bucketize(v, s),
        lambda s, v: torch.bucketize(v, s, right=True),
        lambda s, v: torch.searchsorted(s, 5.0),
    ]
    for fn in calls:
        want = fn(seq, vals)
        with torch.spyre.strict():
            got = fn(_spyre(seq), _spyre(vals))
        _same(got, want)
    with torch.spyre.strict():
        got = torch.searchsorted(_spyre(bseq), _spyre(vals[:, :3]))
        got2 = torch.searchsorted(_spyre(shuffled), _spyre(vals),
                                  sorter=_spyre(sorter))
    _same(got, torch.searchsorted(bseq, vals[:, :3]))
    _same(got2, torch.searchsorted(shuffled, vals, sorter=sorter))
    u = torch.tensor([[3.0, float("nan"), 1.0, 3.0], [-0.0, 0.0, 1.0,
                                                        float("nan")]])
    for t in (u, torch.randint(-3, 4, (50,), generator=g),
              torch.tensor([True, False, True]),
              torch.tensor([], dtype=torch.int32)):
        for inv in (False, True):
            for cnt in (False, True):
                want = torch.unique(t, return_inverse=inv, return_counts=cnt)
                with torch.spyre.strict():
                    got = torch.unique(_spyre(t), return_inverse=inv,
                                       return_counts=cnt)
                _same(got, want)


def torch_ops_compaction():
    """nonzero (and nonzero_static), masked_select, x[mask] and x[mask1d] =
    v, masked_scatter_,
    repeat_interleave, reflection and replication padding (negative
    padding, an empty batch) as on the CPU, strict; randperm from the card's generator is a permutation."""
    g = torch.Generator().manual_seed(41)
    x = torch.randn(3, 4, 5, generator=g)
    x[x.abs() < 0.5] = 0
    x[0, 1, 2] = float("nan")
    mask = torch.randn(3, 4, 5, generator=g) > 0
    cases = [
        lambda t, m: torch.nonzero(t),
        lambda t, m: torch.nonzero(t.transpose(0, 2)),
        lambda t, m: torch.nonzero_static(t, size=100, fill_value=-3),
        lambda t, m: torch.nonzero_static(t, size=2),
        lambda t, m: t.bool().nonzero(),
        lambda t, m: torch.masked_select(t, m),
        lambda t, m: torch.masked_select(t, m[0, 0]),
        lambda t, m: t[m],
        lambda t, m: t[:, m[0, :, 0]],
        lambda t, m: t.clone().index_put_((m[:, 0, 0],), t[0]),
        lambda t, m: t.clone().masked_scatter_(m, t * 2),
        lambda t, m: torch.repeat_interleave(t[0, 0].abs().long()),
        lambda t, m: t.repeat_interleave(torch.tensor([2, 0, 1],
                                                      device=t.device), 0),
        lambda t, m: torch.nn.functional.pad(t, (2, 3), mode="reflect"),
        lambda t, m: torch.nn.functional.pad(t, (1, 2, 3, 0),
                                             mode="reflect"),
        lambda t, m: torch.nn.functional.pad(t[None], (1, 2, 0, 1, 2, 2),
                                             mode="replicate"),
        lambda t, m: torch.nn.functional.pad(t, (0, 4), mode="replicate"),
        # negative padding crops; an empty batch pads to an empty result
        lambda t, m: torch.nn.functional.pad(t[None], (-1, 1, -2, 1),
                                             mode="reflect"),
        lambda t, m: torch.nn.functional.pad(t, (1, -2), mode="replicate"),
        lambda t, m: torch.nn.functional.pad(t[:0], (1, 2),
                                             mode="reflect"),
        lambda t, m: torch.nn.functional.pad(t, (1, 2), mode="circular"),
    ]
    for i, fn in enumerate(cases):
        want = fn(x, mask)
        with torch.spyre.strict():
            got = fn(_spyre(x), _spyre(mask))
        try:
            _same(got, want)
        except AssertionError as e:
            raise AssertionError(f"case {i}: {e}")
    for n in (0, 1, 7, 300):
        with torch.spyre.strict():
            p = torch.randperm(n, device="spyre")
        assert p.dtype == torch.int64 and p.device.type == "spyre"
        assert sorted(p.cpu().tolist()) == list(range(n)), p
    a = torch.randperm(300, device="spyre").cpu()
    assert not torch.equal(a, torch.randperm(300, device="spyre").cpu())
    # multinomial: frequencies within 5 sigma, a zero category never drawn
    probs = torch.tensor([[0.1, 0.0, 0.6, 0.3], [1.0, 1.0, 0.0, 2.0]])
    with torch.spyre.strict():
        s = torch.multinomial(_spyre(probs), 4000, replacement=True).cpu()
        w = torch.multinomial(_spyre(probs), 3).cpu()
    for row, pr in zip(s, probs):
        pr = pr / pr.sum()
        freq = torch.bincount(row, minlength=4).float() / 4000
        sigma = (pr * (1 - pr) / 4000).sqrt()
        assert ((freq - pr).abs() <= 5 * sigma + 1e-6).all(), (freq, pr)
    assert (w[0] != 1).all() and (w[1] != 2).all(), w
    assert all(len(set(r.tolist())) == 3 for r in w), w


def torch_ops_empty_gather():
    """gather with an empty index of any dtype and dims gives an empty
    result on the card, as ATen (which checks neither then); a non-empty
    int32 index raises as on the CPU."""
    x = torch.randn(5)
    for idx in (torch.tensor([], dtype=torch.uint8),
                torch.empty(2, 0, dtype=torch.uint8),
                torch.empty(0, dtype=torch.int32)):
        want = torch.gather(x, 0, idx)
        with torch.spyre.strict():
            got = torch.gather(_spyre(x), 0, _spyre(idx))
        assert got.device.type == "spyre" and got.shape == want.shape, got
        assert got.dtype == want.dtype, got.dtype
    _raises_like_cpu(lambda t, i: torch.gather(t, 0, i), x,
                     torch.tensor([1, 2], dtype=torch.int32))


TESTS += [torch_ops_int_division_by_zero, torch_ops_casts_to_unsigned,
          torch_ops_addr_rounding, torch_ops_views_and_set,
          torch_ops_int_matmul, torch_ops_batch_norm_train_eval,
          torch_ops_softmax_backward_half, torch_kernels_split_large,
          torch_ops_sort_order, torch_ops_select, torch_ops_search_unique,
          torch_ops_compaction, torch_ops_empty_gather]


# ---- the whole database ------------------------------------------------------
#
# The run is split between a driver process, which never opens the card,
# and worker processes that run the samples in a fixed order and report
# each on a line of their standard output ("@run" before a sample, "@rec"
# after it, JSON).  A sample that leaves the card context in error (a
# command past the card's 5 s budget, a fault: every later submission of
# the process fails) is recorded as failed, its worker exits, and a new
# worker (a new context) goes on after it; so does a worker that dies.

CATS = ("native", "fallback", "not-comp", "no-ref", "refused", "failed")

WORKER_DEAD = 3         # a worker's exit status: its card context is in error


def classify(op, smp, dt):
    """(category, error, fell) of one sample: a CATS name, the exception
    of a failed sample (or the CPU's error of a no-ref one), and the ATen
    ops that went through the CPU fallback (listed by --full)."""
    cat, err = _classify(op, smp, dt)
    return cat, err, _fell_back() if cat in ("fallback", "not-comp") else []


def _classify(op, smp, dt):
    try:
        return run_sample(op, smp, dt, strict=False), None
    except NotComparable:
        return "not-comp", None
    except NoReference as e:
        return "no-ref", e
    except TypeError as e:
        if "not supported on the card" in str(e) or "float64" in str(e):
            return "refused", None
        return "failed", e
    except Exception as e:
        if "sparse" in str(e).lower():
            return "refused", None
        return "failed", e


def _card_alive():
    """False when the card context of this process is in error."""
    try:
        torch.ones(4, device="spyre").add_(1).cpu()
        torch.spyre.synchronize()
        return True
    except Exception:
        return False


def _errline(e):
    first = (str(e).splitlines() or [""])[0][:160]
    return f"{type(e).__name__}: {first}" if first else type(e).__name__


def _emit(tag, rec):
    sys.stdout.write(f"@{tag} {json.dumps(rec)}\n")
    sys.stdout.flush()


def _plan(nsamples, only, after=None):
    """The samples of a run in their fixed order after position @after
    (None: from the start): (pos, phase, family, name, op, dtype, sample);
    phase 0 is every OpInfo, phase 1 the NATIVE and STRICT_FULL families
    in strict mode.
    pos orders them; the samples of an (op, dtype) wholly before @after
    are not made."""
    def before(key):
        return after is not None and key < after[:len(key)]

    db = op_db()
    plan = [(0, family(db[n]), n, oi) for oi, n in enumerate(sorted(db))]
    plan += [(1, fam, n, [fi, ni]) for fi, (fam, fnames)
             in enumerate(list(NATIVE.items()) + list(STRICT_FULL.items()))
             for ni, n in enumerate(fnames)]
    for phase, fam, name, key in plan:
        key = [phase] + (key if phase else [key])
        op = db.get(name)
        if op is None or (only and name not in only) or before(key):
            continue
        try:
            dts = op.supported_dtypes("cpu")
        except Exception:
            continue
        for di, dt in enumerate(DTYPES):
            if dt not in dts or before(key + [di]):
                continue
            for si, smp in enumerate(samples(op, dt, nsamples)):
                pos = key + [di, si]
                if after is None or pos > after:
                    yield pos, phase, fam, name, op, dt, smp


def worker(nsamples, only, after):
    """Run the samples of the plan that come after pos @after (None: all),
    one @rec line each; exit WORKER_DEAD when the card context is in
    error."""
    for pos, phase, fam, name, op, dt, smp in _plan(nsamples, only, after):
        rec = {"pos": pos, "phase": phase, "fam": fam, "name": name,
               "dt": str(dt)[6:]}
        _emit("run", rec)
        err, fell = None, []
        if phase == 0:
            cat, e, fell = classify(op, smp, dt)
            err = None if e is None else _errline(e)
        else:
            try:
                run_sample(op, smp, dt, strict=True)
                cat = "pass"
            except NotComparable:       # ran on the card in strict mode
                cat = "pass-nc"
            except NoReference as e:
                cat, err = "no-ref", _errline(e)
            except Exception as e:
                cat, err = "failed", _errline(e)
        dead = cat == "failed" and not _card_alive()
        if dead:
            err += " [the card context is now in error: a new worker " \
                   "process goes on]"
        _emit("rec", dict(rec, cat=cat, err=err, fell=fell))
        if dead:        # no teardown through the context in error
            os._exit(WORKER_DEAD)
    _emit("done", {"nops": len(op_db())})
    return 0


def _progress(recs):
    """Print the latest record if it is not a pass, and running totals
    every 200 samples (a run cut short still tells where it stood)."""
    r = recs[-1]
    if r["cat"] in ("failed", "no-ref"):
        print(f"# {time.strftime('%H:%M:%S')} {r['cat']}: {r['name']} "
              f"{r['dt']}: {r['err']}", flush=True)
    if len(recs) % 200 == 0:
        tot = {}
        for x in recs:
            tot[x["cat"]] = tot.get(x["cat"], 0) + 1
        print(f"# {time.strftime('%H:%M:%S')} {len(recs)} samples (at "
              f"{r['name']}, phase {r['phase']}): " + ", ".join(
                  f"{k} {v}" for k, v in sorted(tot.items())), flush=True)


def _run_workers(nsamples, only):
    """Drive workers until the plan is done; return their records in plan
    order (a sample whose worker died is recorded as failed) and the
    number of OpInfos in the database."""
    recs, after, restarts, nops = [], None, 0, 0
    while True:
        cmd = [sys.executable, os.path.abspath(__file__), "--worker",
               "--samples", str(nsamples)]
        if after is not None:
            cmd += ["--after", json.dumps(after)]
        if only:
            cmd += ["--only"] + sorted(only)
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        running, done, progress = None, False, False
        for line in p.stdout:
            if line.startswith("@run "):
                running = json.loads(line[5:])
            elif line.startswith("@rec "):
                r = json.loads(line[5:])
                recs.append(r)
                after, running, progress = r["pos"], None, True
                _progress(recs)
            elif line.startswith("@done "):
                done, nops = True, json.loads(line[6:])["nops"]
            else:
                sys.stdout.write(line)
        rc = p.wait()
        if done and rc == 0:
            return recs, nops
        if running is not None:
            recs.append(dict(running, cat="failed", err=f"the worker died "
                             f"(exit status {rc}) running this sample"))
            after, progress = running["pos"], True
            _progress(recs)
        restarts = 0 if progress else restarts + 1
        print(f"# worker exited with status {rc}; {len(recs)} samples done,"
              f" a new worker goes on", flush=True)
        if restarts >= 3:
            print("# three workers in a row made no progress: giving up",
                  flush=True)
            recs.append({"phase": 0, "fam": "harness", "name": "worker",
                         "dt": "-", "cat": "failed",
                         "err": f"no worker could start (status {rc})"})
            return recs, nops


def full(nsamples, only):
    t0 = time.time()
    recs, nops = _run_workers(nsamples, only)
    table = {}          # (family, dtype) -> {cat: n}
    fails, norefs = [], []
    strict = {}         # family -> [passed, failed, not comparable]
    strict_fails = []
    falls = {}          # OpInfo -> [samples, dtypes, ATen ops that fell]
    for r in recs:
        tag = f"{r['name']} {r['dt']}: {r['err']}"
        if r["phase"] == 0:
            row = table.setdefault((r["fam"], r["dt"]),
                                   dict.fromkeys(CATS, 0))
            row[r["cat"]] += 1
            if r.get("fell"):
                f = falls.setdefault(r["name"], [0, set(), set()])
                f[0] += 1
                f[1].add(r["dt"])
                f[2].update(r["fell"])
            if r["cat"] == "failed":
                fails.append(tag)
            elif r["cat"] == "no-ref":
                norefs.append(tag)
            continue
        f = strict.setdefault(r["fam"], [0, 0, 0])
        if r["cat"] in ("pass", "pass-nc"):
            f[0] += 1
            f[2] += r["cat"] == "pass-nc"
        elif r["cat"] == "failed":
            f[1] += 1
            strict_fails.append(tag)
    print(f"# op_db: {nops} OpInfos, {nsamples} sample(s) per op and"
          f" dtype, {time.time() - t0:.0f} s")
    print(f"# {'family':<14} {'dtype':<9}" + "".join(f"{c:>10}" for c in CATS))
    tot = dict.fromkeys(CATS, 0)
    for (fam, dt), row in sorted(table.items()):
        print(f"# {fam:<14} {dt:<9}" + "".join(f"{row[c]:>10}" for c in CATS))
        for c in CATS:
            tot[c] += row[c]
    n = sum(tot.values())
    print(f"# {'total':<24}" + "".join(f"{tot[c]:>10}" for c in CATS))
    if n:
        pc = {c: f"{100.0 * tot[c] / n:.1f} %" for c in CATS}
        print(f"# on the card: {pc['native']} of {n} samples; through the "
              f"fallback {pc['fallback']}; ran but not comparable (random, "
              f"undefined values) {pc['not-comp']}; no reference (the CPU "
              f"raised) {pc['no-ref']}; refused {pc['refused']}; failed "
              f"{pc['failed']}")
    ok = bad = 0
    for fam, (fok, fbad, fnc) in strict.items():
        if fok + fbad:
            print(f"# strict {fam:<14} {fok:>5} of {fok + fbad:>5} "
                  f"({100.0 * fok / (fok + fbad):.1f} %)"
                  + (f", {fnc} not comparable" if fnc else ""))
        ok += fok
        bad += fbad
    if ok + bad:
        print(f"# native families, strict: {ok} of {ok + bad} samples pass "
              f"({100.0 * ok / (ok + bad):.1f} %)")
    for f in strict_fails:
        print("# STRICT-FAILED " + f)
    for name, (n, dts, ops) in sorted(falls.items()):
        print(f"# FALLBACK {name} ({n} sample(s); {', '.join(sorted(dts))}):"
              f" {', '.join(sorted(ops))}")
    for f in norefs:
        print("# NO-REFERENCE " + f)
    for f in fails:
        print("# FAILED " + f)
    return 0


def main(argv):
    n = int(argv[argv.index("--samples") + 1]) if "--samples" in argv else 3
    only = set(argv[argv.index("--only") + 1:]) if "--only" in argv else set()
    if "--worker" in argv:
        after = json.loads(argv[argv.index("--after") + 1]) \
            if "--after" in argv else None
        return worker(n, only, after)
    if "--full" in argv:
        return full(n, only)
    names = [a for a in argv if not a.startswith("-")]
    return ktap.run(ktap.select(TESTS, names))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
