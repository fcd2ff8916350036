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

import copy
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


# ---- RNNs, losses and optimizers ---------------------------------------------
# nn.LSTM / nn.GRU forward and a training step, optimizer steps through the
# foreach paths, and each loss forward and backward: strict mode, against
# the same computation on the CPU.

def _assert_native(counts, *ops):
    for op in ops:
        assert counts.get(op, {}).get("native", 0) > 0, (op, counts)


def _close(got, want, tol=1e-4, msg=None):
    assert got.device.type == "spyre", got.device
    torch.testing.assert_close(got.detach().cpu(), want.detach(), rtol=tol,
                               atol=tol, msg=msg)


def _rnn_case(cls, cell_cls, fused_ops):
    """``cls`` (2 layers, batch_first, biases) and ``cell_cls`` on the
    card against the CPU: outputs, and the parameters after one SGD step
    (momentum, the foreach path) on a loss of every output."""
    torch.manual_seed(0)
    cpu = cls(6, 8, num_layers=2, batch_first=True)
    cell = cell_cls(6, 8, bias=False)
    dev = copy.deepcopy(cpu).to("spyre")
    dcell = copy.deepcopy(cell).to("spyre")
    x = torch.randn(3, 5, 6)
    hx = torch.randn(3, 8)

    def step(model, mcell, x, hx):
        opt = torch.optim.SGD(list(model.parameters()) +
                              list(mcell.parameters()), lr=0.1,
                              momentum=0.9)
        y, h = model(x)
        hs = h if isinstance(h, tuple) else (h,)
        c = mcell(x[:, 0], (hx, hx) if cls is torch.nn.LSTM else hx)
        cs = c if isinstance(c, tuple) else (c,)
        loss = y.square().mean() + sum(t.sum() for t in hs + cs) * 0.1
        loss.backward()
        opt.step()
        return [y] + list(hs) + list(cs)

    # (the CPU's time without one-time costs: the first optimizer step
    # imports torch._dynamo)
    step(copy.deepcopy(cpu), copy.deepcopy(cell), x, hx)
    want, tc = timed(lambda: step(cpu, cell, x, hx))
    (got, td), counts = strict_counts(
        lambda: timed(lambda: step(dev, dcell, x.to("spyre"),
                                   hx.to("spyre")), sync=True))
    _assert_native(counts, *fused_ops)
    for g, w in zip(got, want):
        _close(g, w)
    for (name, pc), pd in zip(list(cpu.named_parameters()) +
                              list(cell.named_parameters()),
                              list(dev.parameters()) +
                              list(dcell.parameters())):
        _close(pd, pc, msg=name)
    print(f"# {cls.__name__} forward and training step: card {td:.0f} ms, "
          f"cpu {tc:.0f} ms")


@test
def torch_models_lstm():
    """nn.LSTM and nn.LSTMCell: forward and one training step."""
    _rnn_case(torch.nn.LSTM, torch.nn.LSTMCell,
              ("aten::_thnn_fused_lstm_cell",
               "aten::_thnn_fused_lstm_cell_backward_impl"))


@test
def torch_models_gru():
    """nn.GRU and nn.GRUCell: forward and one training step."""
    _rnn_case(torch.nn.GRU, torch.nn.GRUCell,
              ("aten::_thnn_fused_gru_cell",
               "aten::_thnn_fused_gru_cell_backward"))


@test
def torch_models_optimizers():
    """Two steps of AdamW, Adam (amsgrad) and SGD with momentum and
    Nesterov on a small MLP, through their foreach paths: the card's
    parameters equal the CPU's (the CPU's for-loop path)."""
    for cls, kw, ops in (
            (torch.optim.AdamW, dict(lr=1e-2, weight_decay=0.1),
             ("aten::_foreach_lerp_.Scalar", "aten::_foreach_addcmul_.Scalar",
              "aten::_foreach_addcdiv_.ScalarList", "aten::_foreach_sqrt",
              "aten::_foreach_div_.ScalarList", "aten::_foreach_mul_.Scalar")),
            (torch.optim.Adam, dict(lr=1e-2, amsgrad=True),
             ("aten::_foreach_maximum_.List",)),
            (torch.optim.SGD, dict(lr=0.1, momentum=0.9, nesterov=True,
                                   weight_decay=0.01),
             ("aten::_foreach_add_.List", "aten::_foreach_mul_.Scalar"))):
        torch.manual_seed(1)
        cpu = torch.nn.Sequential(torch.nn.Linear(12, 16), torch.nn.GELU(),
                                  torch.nn.Linear(16, 4))
        dev = copy.deepcopy(cpu).to("spyre")
        x, y = torch.randn(8, 12), torch.randn(8, 4)

        def train(model, x, y, foreach):
            opt = cls(model.parameters(), foreach=foreach, **kw)
            for _ in range(2):
                opt.zero_grad()
                torch.nn.functional.mse_loss(model(x), y).backward()
                opt.step()

        _, tc = timed(lambda: train(cpu, x, y, False))
        (_, td), counts = strict_counts(lambda: timed(
            lambda: train(dev, x.to("spyre"), y.to("spyre"), True),
            sync=True))
        _assert_native(counts, *ops)
        for (name, pc), pd in zip(cpu.named_parameters(), dev.parameters()):
            _close(pd, pc, tol=1e-5, msg=f"{cls.__name__} {name}")
        print(f"# {cls.__name__}: two steps, card {td:.0f} ms, "
              f"cpu {tc:.0f} ms")


def _loss_case(fn, make, ops, dtypes=(torch.float32,), kwargs=({},)):
    """Loss ``fn(input, target, **kw)`` for every reduction and each of
    ``kwargs``: value and input gradient on the card (strict) against the
    CPU; ``make(g)`` gives CPU (input, target); ``ops`` must have run on
    the card."""
    g = torch.Generator().manual_seed(5)
    for dt in dtypes:
        tol = 1e-4 if dt == torch.float32 else 3e-2
        for kw in kwargs:
            for red in ("none", "mean", "sum"):
                x, t = make(g)
                x = x.to(dt)
                t = t.to(dt) if t.is_floating_point() else t
                kwc = {k: (v.to(dt) if isinstance(v, torch.Tensor) else v)
                       for k, v in kw.items()}
                xc = x.clone().requires_grad_()
                want = fn(xc, t, reduction=red, **kwc)
                want.sum().backward()
                xd = x.to("spyre").requires_grad_()
                kwd = {k: (v.to("spyre") if isinstance(v, torch.Tensor)
                           else v) for k, v in kwc.items()}

                def card():
                    r = fn(xd, t.to("spyre"), reduction=red, **kwd)
                    r.sum().backward()
                    return r
                got, counts = strict_counts(card)
                _assert_native(counts, *ops)
                m = f"{dt} {kw} {red}"
                _close(got.float(), want.float(), tol, msg=m)
                _close(xd.grad.float(), xc.grad.float(), tol, msg=m)


def _classes(g, n=6, c=5):
    t = torch.randint(0, c, (n,), generator=g)
    t[1] = -100         # the default ignore_index
    return torch.randn(n, c, generator=g), t


def _pair(g, shape=(4, 7)):
    return torch.randn(*shape, generator=g), torch.randn(*shape, generator=g)


@test
def torch_models_loss_nll():
    """nll_loss: class weights, ignore_index, a 1-D input, every
    reduction."""
    F = torch.nn.functional
    w = torch.rand(5) + 0.5
    ops = ("aten::nll_loss_forward", "aten::nll_loss_backward")

    def nll(x, t, **k):
        return F.nll_loss(F.log_softmax(x, 1), t, **k)
    _loss_case(nll, _classes, ops, kwargs=({"weight": w},))
    _loss_case(nll, _classes, ops, (torch.bfloat16,))

    def ignore2(g):
        x, t = _classes(g)
        t[1] = 2
        return x, t
    _loss_case(nll, ignore2, ops, kwargs=({"ignore_index": 2},))
    _loss_case(lambda x, t, **k: F.nll_loss(x, t, **k),
               lambda g: (torch.randn(5, generator=g), torch.tensor(3)), ops)


@test
def torch_models_loss_nll2d():
    """nll_loss over (N, C, H, W) (nll_loss2d) with weights and an ignored
    pixel."""
    F = torch.nn.functional

    def make(g):
        t = torch.randint(0, 4, (2, 3, 5), generator=g)
        t[0, 1, 2] = -100
        return torch.randn(2, 4, 3, 5, generator=g), t
    _loss_case(lambda x, t, **k: F.nll_loss(x, t, **k), make,
               ("aten::nll_loss2d_forward", "aten::nll_loss2d_backward"),
               kwargs=({"weight": torch.rand(4) + 0.5},))


@test
def torch_models_loss_cross_entropy():
    """cross_entropy (log_softmax and nll_loss): class indices with
    weights and label smoothing, and class probabilities."""
    F = torch.nn.functional
    _loss_case(F.cross_entropy, _classes, ("aten::nll_loss_forward",),
               kwargs=({"weight": torch.rand(5) + 0.5},
                       {"label_smoothing": 0.1}))
    _loss_case(F.cross_entropy,
               lambda g: (torch.randn(6, 5, generator=g),
                          torch.softmax(torch.randn(6, 5, generator=g), 1)),
               ("aten::_log_softmax",))


@test
def torch_models_loss_mse():
    """mse_loss in float32 and float16."""
    _loss_case(torch.nn.functional.mse_loss, _pair,
               ("aten::mse_loss", "aten::mse_loss_backward"),
               (torch.float32, torch.float16))


@test
def torch_models_loss_l1():
    """l1_loss (a composition of native ops)."""
    _loss_case(torch.nn.functional.l1_loss, _pair, ("aten::abs",))


@test
def torch_models_loss_smooth_l1():
    """smooth_l1_loss with beta 0.5 and 0 (l1_loss)."""
    _loss_case(torch.nn.functional.smooth_l1_loss, _pair,
               ("aten::smooth_l1_loss",), kwargs=({"beta": 0.5},))
    _loss_case(torch.nn.functional.smooth_l1_loss, _pair, (),
               kwargs=({"beta": 0.0},))


@test
def torch_models_loss_huber():
    """huber_loss with delta 0.3."""
    _loss_case(torch.nn.functional.huber_loss, _pair,
               ("aten::huber_loss", "aten::huber_loss_backward"),
               kwargs=({"delta": 0.3},))


@test
def torch_models_loss_bce():
    """binary_cross_entropy with weights (inputs at 0 and 1 included: the
    log is clamped at -100)."""
    def make(g):
        x = torch.rand(4, 6, generator=g)
        x[0, 0], x[1, 1] = 0.0, 1.0
        return x, torch.rand(4, 6, generator=g)
    _loss_case(torch.nn.functional.binary_cross_entropy, make,
               ("aten::binary_cross_entropy",
                "aten::binary_cross_entropy_backward"),
               kwargs=({"weight": torch.rand(6)},))


@test
def torch_models_loss_bce_with_logits():
    """binary_cross_entropy_with_logits with weight and pos_weight."""
    _loss_case(torch.nn.functional.binary_cross_entropy_with_logits,
               lambda g: (torch.randn(4, 6, generator=g) * 4,
                          torch.rand(4, 6, generator=g)),
               ("aten::log_sigmoid_forward",),
               kwargs=({"weight": torch.rand(6),
                        "pos_weight": torch.rand(6) + 0.5},))


@test
def torch_models_loss_kl_div():
    """kl_div with log-probabilities and probabilities as the target."""
    F = torch.nn.functional

    def make(g):
        return (F.log_softmax(torch.randn(4, 6, generator=g), 1),
                F.softmax(torch.randn(4, 6, generator=g), 1))
    _loss_case(F.kl_div, make, ("aten::xlogy.Tensor",))
    _loss_case(lambda x, t, **k: F.kl_div(x, t.log(), log_target=True, **k),
               make, ("aten::exp",))


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
