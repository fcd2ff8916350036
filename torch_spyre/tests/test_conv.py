# SPDX-License-Identifier: MIT
"""The torch_conv_* tests (imported by test_torch.py, so part of `make
test`): convolutions and pooling on the card against PyTorch's CPU
kernels, in strict mode (a CPU fallback inside the op is a failure).

The guest's CPU model lacks what oneDNN's convolutions want, so the CPU
reference runs with ``torch.backends.mkldnn.enabled = False``.  Half-type
references are computed in float32 from the same rounded inputs and
rounded once (the card accumulates in float32 and rounds at the store),
except in torch_conv_transposed_rounding: a transposed convolution in a
half type adds its columns in the dtype, as the CPU's own kernel, which
is its reference there.

    python3 test_conv.py [NAME...]      these tests alone
"""

import sys
import time
import warnings

import ktap
import torch
import torch.nn as nn
import torch.nn.functional as F

warnings.simplefilter("ignore", UserWarning)

TESTS = []
TOL = {torch.float32: dict(rtol=1e-4, atol=1e-4),
       torch.float16: dict(rtol=2e-3, atol=2e-3),
       torch.bfloat16: dict(rtol=2e-2, atol=2e-2)}


test = ktap.registry(TESTS, ktap.without_onednn)


def native(fn, *ops):
    """Run ``fn`` in strict mode; assert each of ``ops`` ran on the card."""
    torch.spyre.reset_op_counts()
    with torch.spyre.strict():
        r = fn()
    counts = torch.spyre.op_counts()
    for op in ops:
        assert counts.get(op, {}).get("native", 0) > 0, (op, counts)
    return r


def close(got, want, dt, scale=1.0):
    """``got`` (spyre) equals ``want`` (a float32 CPU result) rounded to
    ``dt``, within dt's tolerance times ``scale`` (sums of many terms)."""
    assert got.device.type == "spyre", got.device
    assert got.dtype == dt, (got.dtype, dt)
    tol = {k: v * scale for k, v in TOL[dt].items()}
    torch.testing.assert_close(got.cpu().float(), want.to(dt).float(), **tol)


def rnd(g, *shape, dt=torch.float32):
    """A CPU float32 tensor of values exactly representable in ``dt``."""
    return torch.randn(*shape, generator=g).to(dt).float()


CONV = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}
CONVT = {1: F.conv_transpose1d, 2: F.conv_transpose2d,
         3: F.conv_transpose3d}

# (spatial dims, N, C_in, C_out, input size, kernel, stride, padding,
#  dilation, groups, bias, output_padding for the transposed case)
CASES = [
    (1, 2, 3, 4, (11,), (3,), 1, 1, 1, 1, True, 0),
    (1, 1, 4, 6, (16,), (5,), 2, 2, 2, 2, False, 1),
    (2, 2, 3, 5, (9, 8), (3, 3), 1, 1, 1, 1, True, 0),
    (2, 3, 4, 8, (10, 7), (3, 2), (2, 1), (1, 0), (1, 2), 2, True, (1, 0)),
    (2, 2, 6, 6, (7, 7), (3, 3), 2, 1, 1, 6, False, 1),   # depthwise
    (2, 1, 2, 3, (5, 5), (1, 1), 1, 0, 1, 1, True, 0),    # 1x1
    (3, 2, 2, 4, (5, 6, 4), (3, 2, 2), (1, 2, 1), 1, 1, 2, True,
     (0, 1, 0)),
]


@test
def torch_conv_forward():
    """convolution_overrideable: 1-D/2-D/3-D, stride, padding, dilation,
    groups, bias, fp32 and fp16/bf16, against the CPU."""
    g = torch.Generator().manual_seed(5)
    for (D, n, ci, co, size, k, s, p, d, groups, bias, _) in CASES:
        for dt in (torch.float32, torch.float16, torch.bfloat16):
            x = rnd(g, n, ci, *size, dt=dt)
            w = rnd(g, co, ci // groups, *k, dt=dt)
            b = rnd(g, co, dt=dt) if bias else None
            want = CONV[D](x, w, b, s, p, d, groups)
            X, W = x.to(dt).to("spyre"), w.to(dt).to("spyre")
            B = b.to(dt).to("spyre") if bias else None
            got = native(lambda: CONV[D](X, W, B, s, p, d, groups),
                         "aten::convolution_overrideable")
            assert got.shape == want.shape, (got.shape, want.shape)
            close(got, want, dt, scale=1 if dt == torch.float32 else 2)
    # a strided (non-contiguous) input and a channels-last one
    x = torch.randn(2, 4, 9, 9, generator=g)
    w = torch.randn(6, 4, 3, 3, generator=g)
    X = x.to("spyre")
    close(native(lambda: F.conv2d(X[:, :, ::2, 1:], w.to("spyre"),
                                  padding=1)),
          F.conv2d(x[:, :, ::2, 1:], w, padding=1), torch.float32)
    XL = x.to(memory_format=torch.channels_last).to("spyre")
    close(native(lambda: F.conv2d(XL, w.to("spyre"), stride=2)),
          F.conv2d(x, w, stride=2), torch.float32)
    # padding="same" and an unbatched input
    close(native(lambda: F.conv2d(X[0], w.to("spyre"), padding="same")),
          F.conv2d(x[0], w, padding="same"), torch.float32)


@test
def torch_conv_transposed():
    """Transposed convolutions (output_padding, groups, dilation); in
    float16 against the CPU's own float16 result (its col2im rounds at
    every add, and so does the card's)."""
    g = torch.Generator().manual_seed(6)
    for (D, n, ci, co, size, k, s, p, d, groups, bias, op) in CASES:
        for dt in (torch.float32, torch.float16):
            x = rnd(g, n, ci, *size, dt=dt).to(dt)
            w = rnd(g, ci, co // groups, *k, dt=dt).to(dt)
            b = rnd(g, co, dt=dt).to(dt) if bias else None
            want = CONVT[D](x, w, b, s, p, op, groups, d)
            X, W = x.to("spyre"), w.to("spyre")
            B = b.to("spyre") if bias else None
            got = native(lambda: CONVT[D](X, W, B, s, p, op, groups, d),
                         "aten::convolution_overrideable")
            assert got.shape == want.shape, (got.shape, want.shape)
            close(got, want.float(), dt)


@test
def torch_conv_transposed_rounding():
    """Transposed convolutions in float16 and bfloat16 round as the CPU's
    slow_conv_transpose kernels (col2im adds each column entry into the
    image in the dtype, by increasing window offset), where float32 sums
    rounded once differ from them: the OpInfo samples' geometry against
    the CPU's own result, and a window whose entries cancel in that order
    only."""
    g = torch.Generator().manual_seed(15)
    kw = dict(stride=2, padding=2, output_padding=1)
    for D in (1, 2, 3):
        for dt in (torch.float16, torch.bfloat16):
            x = (torch.rand(1, 3, *[4] * D, generator=g) * 18 - 9).to(dt)
            w = (torch.rand(3, 3, *[3] * D, generator=g) * 18 - 9).to(dt)
            b = (torch.rand(3, generator=g) * 18 - 9).to(dt)
            want = CONVT[D](x, w, b, **kw)
            X, W, B = x.to("spyre"), w.to("spyre"), b.to("spyre")
            got = native(lambda: CONVT[D](X, W, B, **kw),
                         "aten::convolution_overrideable")
            tol = 1e-3 if dt == torch.float16 else 1.6e-2
            torch.testing.assert_close(got.cpu(), want, rtol=tol, atol=tol)
    # a 2^D window over ones: its entries in row-major order are 2048, 1,
    # -2048, 0.5, then zeros; 2048 + 1 rounds to 2048 in float16, so the
    # centre is 0.5 (1.5 in float32, or in another order)
    for D in (2, 3):
        x = torch.ones(1, 1, *[2] * D, dtype=torch.float16)
        w = torch.zeros(2 ** D, dtype=torch.float16)
        w[:4] = torch.tensor([2048, 1, -2048, 0.5])
        w = w.view(1, 1, *[2] * D)
        want = CONVT[D](x, w)
        centre = (0, 0) + (1,) * D
        assert want[centre].item() == 0.5, want[centre]
        X, W = x.to("spyre"), w.to("spyre")
        got = native(lambda: CONVT[D](X, W),
                     "aten::convolution_overrideable").cpu()
        assert torch.equal(got, want), (got, want)
    # 2.4 M column entries: blocks of first-dim window offsets (0-4, 5-9,
    # 10-11), each a KERNEL command of its own, in order
    x = (torch.rand(1, 2, 128, 128, generator=g) * 4 - 2).half()
    w = (torch.rand(2, 1, 12, 12, generator=g) * 4 - 2).half()
    want = F.conv_transpose2d(x, w, stride=4)
    X, W = x.to("spyre"), w.to("spyre")
    torch.spyre.synchronize()
    n0 = torch.ops.spyre.kernel_stats()[3]
    got = native(lambda: F.conv_transpose2d(X, W, stride=4),
                 "aten::convolution_overrideable")
    torch.spyre.synchronize()
    n = torch.ops.spyre.kernel_stats()[3] - n0
    assert n >= 3, n
    torch.testing.assert_close(got.cpu(), want, rtol=1e-3, atol=1e-3)


@test
def torch_conv_backward():
    """convolution_backward_overrideable: grad_input, grad_weight and
    grad_bias of convolutions and transposed ones against the CPU's."""
    g = torch.Generator().manual_seed(7)
    for transposed in (False, True):
        for (D, n, ci, co, size, k, s, p, d, groups, bias, op) in CASES:
            x = torch.randn(n, ci, *size, generator=g)
            if transposed:
                w = torch.randn(ci, co // groups, *k, generator=g)
                fn = (lambda x_, w_, b_:
                      CONVT[D](x_, w_, b_, s, p, op, groups, d))
            else:
                w = torch.randn(co, ci // groups, *k, generator=g)
                fn = lambda x_, w_, b_: CONV[D](x_, w_, b_, s, p, d, groups)
            b = torch.randn(co, generator=g) if bias else None
            leaves = [x, w] + ([b] if bias else [])
            cpu = [t.clone().requires_grad_() for t in leaves]
            dev = [t.to("spyre").requires_grad_() for t in leaves]
            y = fn(cpu[0], cpu[1], cpu[2] if bias else None)
            r = torch.randn(y.shape, generator=g)
            (y * r).sum().backward()
            R = r.to("spyre")

            def step():
                Y = fn(dev[0], dev[1], dev[2] if bias else None)
                (Y * R).sum().backward()
            native(step, "aten::convolution_backward_overrideable")
            for c, t in zip(cpu, dev):
                close(t.grad, c.grad, torch.float32, scale=3)
    # fp16 gradients, and one of them only (the others not requested)
    x = torch.randn(2, 4, 8, 8, generator=g).half()
    w = torch.randn(4, 4, 3, 3, generator=g).half()
    X = x.to("spyre")
    W = w.to("spyre").requires_grad_()
    native(lambda: F.conv2d(X, W, padding=1).sum().backward(),
           "aten::convolution_backward_overrideable")
    wc = w.float().requires_grad_()
    F.conv2d(x.float(), wc, padding=1).sum().backward()
    assert X.grad is None
    close(W.grad, wc.grad, torch.float16, scale=10)


@test
def torch_conv_batch_chunks():
    """Convolutions whose columns exceed the per-chunk bound (4 MiB) run
    over chunks of the batch: forward, transposed and backward match the
    CPU."""
    g = torch.Generator().manual_seed(12)
    for transposed in (False, True):
        if transposed:
            x = torch.randn(8, 16, 48, 48, generator=g)
            w = torch.randn(16, 32, 3, 3, generator=g)
            fn = lambda x_, w_: F.conv_transpose2d(x_, w_, stride=2,
                                                   padding=1)
        else:
            x = torch.randn(8, 16, 64, 64, generator=g)
            w = torch.randn(8, 16, 3, 3, generator=g)
            fn = lambda x_, w_: F.conv2d(x_, w_, padding=1)
        xc, wc = x.clone().requires_grad_(), w.clone().requires_grad_()
        y = fn(xc, wc)
        r = torch.randn(y.shape, generator=g)
        (y * r).sum().backward()
        X, W = x.to("spyre").requires_grad_(), w.to("spyre").requires_grad_()
        R = r.to("spyre")
        Y = native(lambda: fn(X, W), "aten::convolution_overrideable")
        close(Y, y.detach(), torch.float32, scale=3)
        native(lambda: (Y * R).sum().backward(),
               "aten::convolution_backward_overrideable")
        close(X.grad, xc.grad, torch.float32, scale=3)
        close(W.grad, wc.grad, torch.float32, scale=30)


@test
def torch_conv_blocks():
    """An unfold or fold over more than 2^22 element iterations goes as
    several KERNEL commands (blocks of images, channels and rows, each
    within the card's per-command budget) and matches the CPU: a fold of
    260 x 260 x 64 iterations (two blocks of rows), an unfold of 4 x 9 x
    360 x 360 (two blocks of channels), a 3-D transposed one with groups
    over two images (four blocks)."""
    g = torch.Generator().manual_seed(14)

    def launches():
        return torch.ops.spyre.kernel_stats()[3]
    cases = [
        (lambda x, w, b: F.conv_transpose2d(x, w, b, stride=4),
         rnd(g, 1, 2, 64, 64), rnd(g, 2, 1, 8, 8), rnd(g, 1), 2),
        (lambda x, w, b: F.conv2d(x, w, b, padding=1),
         rnd(g, 1, 4, 360, 360), rnd(g, 3, 4, 3, 3), rnd(g, 3), 2),
        (lambda x, w, b: F.conv_transpose3d(x, w, b, stride=3, padding=1,
                                            output_padding=2, groups=2),
         rnd(g, 2, 4, 8, 8, 8), rnd(g, 4, 3, 4, 3, 4), rnd(g, 6), 4),
    ]
    for fn, x, w, b, nmin in cases:
        want = fn(x, w, b)
        X, W, B = x.to("spyre"), w.to("spyre"), b.to("spyre")
        torch.spyre.synchronize()
        n0 = launches()
        got = native(lambda: fn(X, W, B), "aten::convolution_overrideable")
        torch.spyre.synchronize()
        assert launches() - n0 >= nmin, (launches() - n0, nmin)
        close(got, want, torch.float32, scale=3)


@test
def torch_conv_errors():
    """Bad arguments raise PyTorch's errors (the card takes none of them;
    what reaches the fallback gets the CPU's checks), never a crash."""
    X = torch.randn(1, 4, 6, 6).to("spyre")
    W = torch.randn(5, 3, 3, 3).to("spyre")
    cases = [
        # channels that do not match the weight
        (lambda: F.conv2d(X, W), RuntimeError, "channels"),
        # a kernel larger than the padded input
        (lambda: F.conv2d(X, torch.randn(2, 4, 9, 9).to("spyre")),
         RuntimeError, "Kernel size"),
        # groups that do not divide the channels
        (lambda: F.conv2d(X, torch.randn(6, 2, 3, 3).to("spyre"),
                          groups=3), RuntimeError, "groups"),
        # padding above half the kernel (pooling)
        (lambda: F.max_pool2d(X, 2, padding=2), RuntimeError, "pad"),
        (lambda: F.avg_pool2d(X, 3, padding=2), RuntimeError, "pad"),
    ]
    for fn, exc, text in cases:
        ktap.raises(fn, text, f"no {exc.__name__} ({text})", exc)
    # the card still works afterwards
    close(native(lambda: F.conv2d(X, W[:, :1].expand(5, 4, 3, 3)
                                  .contiguous())),
          F.conv2d(X.cpu(), W[:, :1].expand(5, 4, 3, 3).cpu()),
          torch.float32)


def distinct(g, *shape, dt=torch.float32):
    """Distinct values (no ties for max pooling), exact in ``dt``."""
    n = 1
    for d in shape:
        n *= d
    assert n <= 4096
    v = (torch.randperm(n, generator=g).float() - n / 2) * 0.125
    return v.reshape(shape).to(dt).float()


# (input size, kernel, stride, padding, dilation, ceil_mode)
POOLS = [
    ((8, 8), 2, None, 0, 1, False),
    ((9, 7), 3, 2, 1, 1, False),
    ((9, 7), 3, 2, 1, 1, True),
    ((10, 11), (3, 2), (2, 3), (1, 1), (2, 1), True),
    ((5, 6), (2, 3), 1, (1, 0), 1, False),
]


@test
def torch_conv_max_pool():
    """max_pool2d (values and indices) and its backward, fp32 and fp16."""
    g = torch.Generator().manual_seed(9)
    for (size, k, s, p, d, cm) in POOLS:
        for dt in (torch.float32, torch.float16):
            x = distinct(g, 2, 3, *size, dt=dt)
            want, wind = F.max_pool2d(x, k, s, p, d, cm, return_indices=True)
            X = x.to(dt).to("spyre")
            got, gind = native(lambda: F.max_pool2d(X, k, s, p, d, cm,
                                                    return_indices=True),
                               "aten::max_pool2d_with_indices")
            close(got, want, dt)
            assert torch.equal(gind.cpu(), wind), (size, k, s, p, d, cm)
            xc = x.clone().requires_grad_()
            r = torch.randn(want.shape, generator=g).to(dt).float()
            (F.max_pool2d(xc, k, s, p, d, cm) * r).sum().backward()
            XG = x.to(dt).to("spyre").requires_grad_()
            R = r.to(dt).to("spyre")
            native(lambda: (F.max_pool2d(XG, k, s, p, d, cm) * R).sum()
                   .backward(), "aten::max_pool2d_with_indices_backward")
            close(XG.grad, xc.grad, dt)
    # unbatched, and a strided input
    x = torch.randn(3, 9, 9, generator=g)
    X = x.to("spyre")
    close(native(lambda: F.max_pool2d(X, 3, 2, 1)), F.max_pool2d(x, 3, 2, 1),
          torch.float32)
    close(native(lambda: F.max_pool2d(X[:, 1:, ::2], 2)),
          F.max_pool2d(x[:, 1:, ::2], 2), torch.float32)


@test
def torch_conv_avg_pool():
    """avg_pool2d (count_include_pad, ceil_mode, divisor_override),
    adaptive_avg_pool2d and their backward."""
    g = torch.Generator().manual_seed(10)
    # every pool with and without count_include_pad, divisor_override on
    # some, both dtypes across them
    for i, (size, k, s, p, _, cm) in enumerate(POOLS):
        for cip in (True, False):
            dv = 3 if i % 2 and not cip else None
            dt = (torch.float32, torch.float16)[(i + cip) % 2]
            x = rnd(g, 2, 3, *size, dt=dt)
            xc = x.clone().requires_grad_()
            want = F.avg_pool2d(xc, k, s, p, cm, cip, dv)
            r = rnd(g, *want.shape, dt=dt)
            (want * r).sum().backward()
            X = x.to(dt).to("spyre").requires_grad_()
            R = r.to(dt).to("spyre")
            got = native(lambda: F.avg_pool2d(X, k, s, p, cm, cip, dv),
                         "aten::avg_pool2d")
            close(got, want.detach(), dt)
            native(lambda: (got * R).sum().backward(),
                   "aten::avg_pool2d_backward")
            close(X.grad, xc.grad, dt)
    for size, osz in (((7, 7), (3, 3)), ((5, 9), (2, 4)), ((8, 8), (4, 4)),
                      ((6, 5), (1, 1)), ((3, 4), (5, 6))):
        for dt in (torch.float32, torch.float16):
            x = rnd(g, 2, 3, *size, dt=dt)
            xc = x.clone().requires_grad_()
            want = F.adaptive_avg_pool2d(xc, osz)
            r = rnd(g, *want.shape, dt=dt)
            (want * r).sum().backward()
            X = x.to(dt).to("spyre").requires_grad_()
            R = r.to(dt).to("spyre")
            got = native(lambda: F.adaptive_avg_pool2d(X, osz))
            close(got, want.detach(), dt)
            native(lambda: (got * R).sum().backward())
            close(X.grad, xc.grad, dt)
    X = torch.randn(2, 3, 7, 7).to("spyre").requires_grad_()
    native(lambda: F.adaptive_avg_pool2d(X, (3, 3)).sum().backward(),
           "aten::_adaptive_avg_pool2d",
           "aten::_adaptive_avg_pool2d_backward")


@test
def torch_conv_pool_3d():
    """max_pool3d (values, indices, backward), avg_pool3d and
    adaptive_avg_pool3d with their backward, adaptive max pooling in 2-D
    and 3-D (values, indices, backward), max_pool2d of integers."""
    g = torch.Generator().manual_seed(12)

    def both(fn, x, dt, *ops, ind=False):
        # fn forward and backward on the CPU and the card, compared
        xc = x.clone().requires_grad_()
        want = fn(xc)
        out = want[0] if ind else want
        r = rnd(g, *out.shape, dt=dt)
        (out * r).sum().backward()
        X = x.to(dt).to("spyre").requires_grad_()
        R = r.to(dt).to("spyre")
        got = native(lambda: fn(X), *ops[:1])
        if ind:
            assert torch.equal(got[1].cpu(), want[1]), fn
            got, out = got[0], out
        close(got, out.detach(), dt)
        native(lambda: (got * R).sum().backward(), *ops[1:])
        close(X.grad, xc.grad, dt)

    for dt in (torch.float32, torch.float16):
        x = distinct(g, 2, 2, 5, 6, 4, dt=dt)
        both(lambda t: F.max_pool3d(t, (3, 2, 2), (2, 2, 1), (1, 1, 0),
                                    return_indices=True), x, dt,
             "aten::max_pool3d_with_indices",
             "aten::max_pool3d_with_indices_backward", ind=True)
        both(lambda t: F.max_pool3d(t, 2, 1, 0, 2, True,
                                    return_indices=True), x, dt,
             "aten::max_pool3d_with_indices", ind=True)
        both(lambda t: F.avg_pool3d(t, 3, 2, 1, True, False), x, dt,
             "aten::avg_pool3d", "aten::avg_pool3d_backward")
        both(lambda t: F.avg_pool3d(t, (2, 3, 2), 1, 0, False, True, 5), x,
             dt, "aten::avg_pool3d", "aten::avg_pool3d_backward")
        if dt == torch.float32:     # half types: the CPU fallback
            both(lambda t: F.adaptive_avg_pool3d(t, (2, 4, 3)), x, dt,
                 "aten::_adaptive_avg_pool3d",
                 "aten::_adaptive_avg_pool3d_backward")
        both(lambda t: F.adaptive_max_pool3d(t, (3, 4, 3),
                                             return_indices=True), x, dt,
             "aten::adaptive_max_pool3d",
             "aten::adaptive_max_pool3d_backward", ind=True)
        x2 = distinct(g, 2, 3, 7, 5, dt=dt)
        for osz in ((3, 2), (7, 5), (4, 9)):
            both(lambda t: F.adaptive_max_pool2d(t, osz,
                                                 return_indices=True),
                 x2, dt, "aten::adaptive_max_pool2d",
                 "aten::adaptive_max_pool2d_backward", ind=True)
    for dt in (torch.int32, torch.int64):
        x = torch.randint(-1000, 1000, (2, 3, 7, 6), generator=g, dtype=dt)
        X = x.to("spyre")
        want, wind = F.max_pool2d(x, 3, 2, 1, return_indices=True)
        got, gind = native(lambda: F.max_pool2d(X, 3, 2, 1,
                                                return_indices=True),
                           "aten::max_pool2d_with_indices")
        assert torch.equal(got.cpu(), want), dt
        # ties (equal values) may pick another index: the value there
        # must be the maximum
        assert torch.equal(x.flatten(2).gather(2, gind.cpu().flatten(2)),
                           want.flatten(2)), dt


@test
def torch_conv_integer():
    """Integer convolutions on the card's integer matmul and exact fold,
    equal to the CPU's in the CPU's types (int64; int32 forward without
    dilation; int8 and int32 sums that wrap), and int64
    average pooling: the sum's truncating division (toward zero,
    negative values too) by PyTorch's divisor, divisor_override
    (negative too) and count_include_pad."""
    g = torch.Generator().manual_seed(15)
    for (D, n, ci, co, size, k, s, p, d, groups, bias, op) in CASES:
        for dt in (torch.int64, torch.int32):
            if dt != torch.int64 and d != 1:    # the CPU's: int64 only
                continue
            x = torch.randint(-9, 10, (n, ci, *size), generator=g, dtype=dt)
            w = torch.randint(-9, 10, (co, ci // groups, *k), generator=g,
                              dtype=dt)
            b = torch.randint(-99, 100, (co,), generator=g, dtype=dt) \
                if bias else None
            X, W = x.to("spyre"), w.to("spyre")
            B = b.to("spyre") if bias else None
            want = CONV[D](x, w, b, s, p, d, groups)
            got = native(lambda: CONV[D](X, W, B, s, p, d, groups),
                         "aten::convolution_overrideable")
            assert got.dtype == dt and torch.equal(got.cpu(), want), (D, dt)
            if dt != torch.int64:   # the CPU's transposed: int64 only
                continue
            wt = torch.randint(-9, 10, (ci, co // groups, *k), generator=g,
                               dtype=dt)
            want = CONVT[D](x, wt, b, s, p, op, groups, d)
            got = native(lambda: CONVT[D](X, wt.to("spyre"), B, s, p, op,
                                          groups, d),
                         "aten::convolution_overrideable")
            assert got.dtype == dt and torch.equal(got.cpu(), want), (D, dt)
    # products and sums past the dtype's range wrap as the CPU's
    for dt, v in ((torch.int32, 40000), (torch.int8, 7)):
        x = torch.full((1, 2, 4, 4), v, dtype=dt)
        w = torch.full((3, 2, 3, 3), -v + 1, dtype=dt)
        want = F.conv2d(x, w, padding=1)
        got = native(lambda: F.conv2d(x.to("spyre"), w.to("spyre"),
                                      padding=1))
        assert torch.equal(got.cpu(), want), dt
    # the forms the CPU refuses raise its error (through the fallback)
    xi = torch.ones(1, 2, 4, 4, dtype=torch.int32).to("spyre")
    wi = torch.ones(2, 2, 2, 2, dtype=torch.int32).to("spyre")
    for fn in (lambda: F.conv_transpose2d(xi, wi),
               lambda: F.conv2d(xi, wi, dilation=2)):
        ktap.raises(fn, "not implemented for 'Int'",
                    "an int32 form the CPU refuses ran")
    x = torch.randint(-50, 50, (2, 3, 9, 7), generator=g, dtype=torch.int64)
    X = x.to("spyre")
    for i, (size, k, s, p, _, cm) in enumerate(POOLS):
        for cip in (True, False):
            dv = (3, -4)[i % 2] if i % 3 == 0 else None
            want = F.avg_pool2d(x, k, s, p, cm, cip, dv)
            got = native(lambda: F.avg_pool2d(X, k, s, p, cm, cip, dv),
                         "aten::avg_pool2d")
            assert torch.equal(got.cpu(), want), (i, cip)
    x3 = x.view(2, 3, 9, 7, 1).expand(2, 3, 9, 7, 3)
    want = F.avg_pool3d(x3, 2, 1, 1, False, False)
    got = native(lambda: F.avg_pool3d(x3.to("spyre"), 2, 1, 1, False, False),
                 "aten::avg_pool3d")
    assert torch.equal(got.cpu(), want)


@test
def torch_conv_max_unpool():
    """max_unpool2d/3d (batched or not, a larger output_size; repeated
    indices: the last one wins) on the card, against the CPU."""
    g = torch.Generator().manual_seed(16)
    x = distinct(g, 2, 3, 6, 8)
    v, i = F.max_pool2d(x, 2, return_indices=True)
    for osz in (None, (7, 9)):
        got = native(lambda: F.max_unpool2d(v.to("spyre"), i.to("spyre"), 2,
                                            output_size=osz),
                     "aten::max_unpool2d")
        assert torch.equal(got.cpu(), F.max_unpool2d(v, i, 2,
                                                     output_size=osz)), osz
    # every value to element 0: the card keeps the last one (the CPU's
    # result with two threads varies from run to run there)
    rep = torch.zeros_like(i)
    got = native(lambda: F.max_unpool2d(v[0].to("spyre"), rep[0].to("spyre"),
                                        2)).cpu()
    want = torch.zeros(3, 6, 8)
    want[:, 0, 0] = v[0, :, -1, -1]
    assert torch.equal(got, want)
    x3 = distinct(g, 1, 2, 4, 4, 6)
    v3, i3 = F.max_pool3d(x3, 2, return_indices=True)
    got = native(lambda: F.max_unpool3d(v3.to("spyre"), i3.to("spyre"), 2),
                 "aten::max_unpool3d")
    assert torch.equal(got.cpu(), F.max_unpool3d(v3, i3, 2))


@test
def torch_conv_im2col():
    """nn.functional.unfold (ATen's im2col) on the card: float and bool
    images, batched or not, with stride, padding and dilation, equal
    to the CPU's."""
    g = torch.Generator().manual_seed(13)
    x = torch.randn(2, 3, 7, 6, generator=g)
    for dt in (torch.float32, torch.float16, torch.bfloat16, torch.bool):
        xc = x.to(dt) if dt != torch.bool else x > 0
        for img, kw in ((xc, dict(kernel_size=3)),
                        (xc[1], dict(kernel_size=(2, 3), stride=(2, 1),
                                     padding=1, dilation=(1, 2))),
                        (xc[:, :, ::2], dict(kernel_size=2, padding=(0, 1)))):
            want = F.unfold(img, **kw)
            got = native(lambda: F.unfold(img.to("spyre"), **kw),
                         "aten::im2col")
            assert got.is_contiguous() and got.dtype == dt, (got.stride(), dt)
            assert torch.equal(got.cpu(), want), (dt, kw)


@test
def torch_conv_upsample():
    """upsampling forward: nearest and bilinear in 2-D (align_corners both
    ways, sizes and scale factors), nearest, nearest-exact, linear and
    trilinear in 1-D and 3-D, nearest-exact in 2-D."""
    g = torch.Generator().manual_seed(11)
    for dt in (torch.float32, torch.float16):
        x = rnd(g, 2, 3, 5, 7, dt=dt)
        X = x.to(dt).to("spyre")
        for kw in (dict(size=(10, 14)), dict(size=(5, 7)), dict(size=(8, 3)),
                   dict(scale_factor=2), dict(scale_factor=(1.5, 0.7))):
            close(native(lambda: F.interpolate(X, mode="nearest", **kw),
                         "aten::upsample_nearest2d"),
                  F.interpolate(x, mode="nearest", **kw), dt)
            for ac in (False, True):
                close(native(lambda: F.interpolate(X, mode="bilinear",
                                                   align_corners=ac, **kw),
                             "aten::upsample_bilinear2d"),
                      F.interpolate(x, mode="bilinear", align_corners=ac,
                                    **kw), dt)
    # 1-D and 3-D, and nearest-exact in every rank
    for dt in (torch.float32, torch.bfloat16):
        for shape, lin, sizes in (((2, 3, 9), "linear", ((17,), (4,))),
                                  ((1, 2, 3, 4, 5), "trilinear",
                                   ((6, 5, 9), (2, 4, 3)))):
            if lin == "trilinear" and dt != torch.float32:
                continue        # the CPU fallback (ops_pool.cpp up_ok())
            x = rnd(g, *shape, dt=dt)
            X = x.to(dt).to("spyre")
            d = len(shape) - 2
            for size in sizes:
                for mode in ("nearest", "nearest-exact"):
                    op = ("aten::upsample_nearest" if mode == "nearest"
                          else "aten::_upsample_nearest_exact") + f"{d}d"
                    close(native(lambda: F.interpolate(X, size, mode=mode),
                                 op), F.interpolate(x, size, mode=mode), dt)
                for ac in (False, True):
                    close(native(lambda: F.interpolate(
                        X, size, mode=lin, align_corners=ac),
                        "aten::upsample_" + lin + f"{d}d"),
                        F.interpolate(x, size, mode=lin, align_corners=ac),
                        dt)
        X = rnd(g, 1, 2, 5, 6).to(dt).to("spyre")
        close(native(lambda: F.interpolate(X, (9, 4), mode="nearest-exact"),
                     "aten::_upsample_nearest_exact2d"),
              F.interpolate(X.cpu().float(), (9, 4), mode="nearest-exact"),
              dt)


class Block(nn.Module):
    """A small ResNet-like block: conv-bn-relu, conv-bn, residual, relu,
    pooling."""

    def __init__(self, c=8, bn=True):
        super().__init__()
        self.c1 = nn.Conv2d(c, c, 3, padding=1, bias=not bn)
        self.c2 = nn.Conv2d(c, c, 3, padding=1, bias=not bn)
        self.b1 = nn.BatchNorm2d(c) if bn else nn.Identity()
        self.b2 = nn.BatchNorm2d(c) if bn else nn.Identity()

    def forward(self, x):
        y = F.relu(self.b1(self.c1(x)))
        y = F.relu(self.b2(self.c2(y)) + x)
        return y


class Net(nn.Module):
    def __init__(self, bn):
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.block = Block(8, bn)
        self.head = nn.Linear(8, 5)

    def forward(self, x):
        y = F.max_pool2d(F.relu(self.stem(x)), 3, 2, 1)
        y = F.adaptive_avg_pool2d(self.block(y), 1)
        return self.head(y.flatten(1))


def _bn_native():
    """Whether batch norm (forward in training mode and backward) runs on
    the card on this build."""
    x = torch.randn(2, 3, 4, 4).to("spyre").requires_grad_()
    w = torch.ones(3).to("spyre").requires_grad_()
    try:
        with torch.spyre.strict():
            F.batch_norm(x, None, None, w, training=True).sum().backward()
        return True
    except (RuntimeError, NotImplementedError):
        return False


def sgd(model, lr=0.1):
    """One plain SGD step (torch.optim's first step imports Dynamo, tens
    of seconds under TCG)."""
    with torch.no_grad():
        for p in model.parameters():
            p.sub_(lr * p.grad)


@test
def torch_conv_model_step():
    """A ResNet-like net (conv-relu-maxpool stem, a conv-bn-relu block with
    a residual (conv-relu where batch_norm is not native), global average
    pooling, linear head) forward and one SGD step in strict mode,
    matching the CPU."""
    bn = _bn_native()
    print(f"# batch_norm on the card: {bn}")
    torch.manual_seed(8)
    cpu = Net(bn)
    dev = Net(bn)
    dev.load_state_dict(cpu.state_dict())
    dev.to("spyre")
    x = torch.randn(4, 3, 32, 32)
    t = torch.randint(0, 5, (4,))
    tgt = F.one_hot(t, 5).float()
    X, TGT = x.to("spyre"), tgt.to("spyre")
    t0 = time.time()
    with torch.spyre.strict():
        yd = dev(X)
    torch.spyre.synchronize()
    t1 = time.time()
    yc = cpu(x)
    t2 = time.time()
    close(yd, yc.detach(), torch.float32, scale=5)
    print(f"# model forward: card {1e3 * (t1 - t0):.1f} ms, "
          f"cpu {1e3 * (t2 - t1):.1f} ms")
    lc = F.mse_loss(yc, tgt)
    lc.backward()
    sgd(cpu)

    def step():
        ld = F.mse_loss(dev(X), TGT)
        ld.backward()
        sgd(dev)
    native(step, "aten::convolution_backward_overrideable")
    for (name, pc), pd in zip(cpu.named_parameters(), dev.parameters()):
        torch.testing.assert_close(pd.detach().cpu(), pc.detach(),
                                   rtol=1e-3, atol=1e-3, msg=name)


if __name__ == "__main__":
    sys.exit(ktap.run(ktap.select(TESTS, sys.argv[1:])))
