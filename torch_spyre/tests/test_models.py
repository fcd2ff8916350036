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
import sys
import time
import warnings

import ktap
import torch

warnings.simplefilter("ignore", UserWarning)

TESTS = []


test = ktap.registry(TESTS, ktap.without_onednn)


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


def cpu_ref(model, *args):
    """``model`` deep-copied to the CPU and run on ``args`` (card tensors
    copied to the CPU), with its time in ms."""
    import copy
    m = copy.deepcopy(model).cpu()
    a = [x.cpu() if isinstance(x, torch.Tensor) else x for x in args]
    with torch.no_grad():
        return timed(lambda: m(*a))


def card_run(model, *args, ops=()):
    """``model`` on the card on ``args`` in strict mode (no CPU fallback),
    after one untimed warm-up call (the programs are built then); assert
    each of ``ops`` ran on the card.  Returns the output and its time in
    ms."""
    with torch.no_grad():
        model(*args)
        torch.spyre.synchronize()
        (out, ms), counts = strict_counts(
            lambda: timed(lambda: model(*args), sync=True))
    for op in ops:
        assert counts.get(op, {}).get("native", 0) > 0, (op, counts)
    return out, ms


def report(name, card_ms, cpu_ms):
    print(f"# {name} forward: card {card_ms:.1f} ms, cpu {cpu_ms:.1f} ms")


# ---- attention and transformers (ops_attention.cpp) -----------------------------

SDPA_OP = "aten::_scaled_dot_product_fused_attention_overrideable"
SDPA_BW = SDPA_OP + "_backward"


def _sdpa_case(g, qs, ks, vs, dt=torch.float32, mask=None, bw=False, **kw):
    """F.scaled_dot_product_attention on the card in strict mode against the
    CPU (float32 from the same rounded inputs), forward and, with ``bw``,
    backward (the gradients of query, key, value and a float mask)."""
    import torch.nn.functional as F
    q, k, v = (torch.randn(*s, generator=g).to(dt).float() for s in (qs, ks, vs))
    grad = bw
    cq, ck, cv = (t.clone().requires_grad_(grad) for t in (q, k, v))
    cm = None
    if mask is not None:
        cm = mask.clone()
        if grad and mask.is_floating_point():
            cm.requires_grad_(True)
    want = F.scaled_dot_product_attention(cq, ck, cv, attn_mask=cm, **kw)
    dq, dk, dv = (t.to("spyre", dt).requires_grad_(grad) for t in (q, k, v))
    dm = None
    if mask is not None:
        dm = mask.to("spyre")
        if grad and mask.is_floating_point():
            dm.requires_grad_(True)
    got, counts = strict_counts(
        lambda: F.scaled_dot_product_attention(dq, dk, dv, attn_mask=dm, **kw))
    assert counts.get(SDPA_OP, {}).get("native", 0) == 1, counts
    tol = {torch.float32: 1e-4, torch.float16: 2e-3, torch.bfloat16: 2e-2}[dt]
    assert got.dtype == dt and got.device.type == "spyre"
    torch.testing.assert_close(got.cpu().float(), want.to(dt).float(),
                               rtol=tol, atol=tol)
    if not grad:
        return
    go = torch.randn(want.shape, generator=g)
    want.backward(go)
    _, counts = strict_counts(lambda: got.backward(go.to("spyre")))
    assert counts.get(SDPA_BW, {}).get("native", 0) == 1, counts
    pairs = [(dq, cq), (dk, ck), (dv, cv)]
    if cm is not None and cm.requires_grad:
        pairs.append((dm, cm))
    for d, c in pairs:
        torch.testing.assert_close(d.grad.cpu(), c.grad, rtol=1e-4, atol=1e-4)


@test
def torch_models_sdpa():
    """scaled_dot_product_attention on the card (the overrideable backend
    and its backward): plain, causal with L != S, float and bool masks
    that broadcast, grouped-query attention, 3-D inputs, scale, the half
    types; the Meta kernel's shapes; dropout and GQA without enable_gqa
    take the math path, still on the card."""
    import torch.nn.functional as F
    g = torch.Generator().manual_seed(38)
    _sdpa_case(g, (2, 3, 5, 8), (2, 3, 7, 8), (2, 3, 7, 6), bw=True)
    _sdpa_case(g, (2, 2, 5, 8), (2, 2, 7, 8), (2, 2, 7, 8), is_causal=True)
    _sdpa_case(g, (2, 3, 5, 8), (2, 3, 7, 8), (2, 3, 7, 8),
               mask=torch.randn(5, 7, generator=g), scale=0.3, bw=True)
    bm = torch.rand(2, 1, 5, 7, generator=g) > 0.3
    bm[..., 0] = True                       # no row fully masked
    _sdpa_case(g, (2, 3, 5, 8), (2, 3, 7, 8), (2, 3, 7, 8), mask=bm)
    _sdpa_case(g, (2, 4, 6, 8), (2, 2, 6, 8), (2, 2, 6, 8), is_causal=True,
               enable_gqa=True, bw=True)
    _sdpa_case(g, (4, 3, 8), (4, 6, 8), (4, 6, 8), is_causal=True)
    for dt in (torch.float16, torch.bfloat16):
        _sdpa_case(g, (2, 3, 5, 16), (2, 3, 9, 16), (2, 3, 9, 16), dt=dt,
                   is_causal=True)
    # a row with every key masked: zeros, as the math path's _safe_softmax
    q, k, v = (torch.randn(1, 1, 3, 4, device="spyre") for _ in range(3))
    m = torch.ones(3, 3, dtype=torch.bool, device="spyre")
    m[1] = False
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=m)
    assert torch.equal(out[0, 0, 1].cpu(), torch.zeros(4)), out
    assert not out.isnan().any().item()
    # the Meta kernel
    mq = torch.empty(2, 4, 5, 8, device="meta")
    mk = torch.empty(2, 2, 7, 8, device="meta")
    mv = torch.empty(2, 2, 7, 6, device="meta")
    r = torch.ops.aten._scaled_dot_product_fused_attention_overrideable(
        mq, mk, mv)
    assert r[0].shape == (2, 4, 5, 6) and r[1].shape == (2, 4, 5), r[:2]
    assert r[1].dtype == torch.float32 and r[4] == 5 and r[5] == 7
    # dropout and GQA without enable_gqa: the math path, on the card
    q = torch.randn(2, 4, 5, 8, device="spyre")
    kv = torch.randn(2, 1, 5, 8, device="spyre")
    for kw in (dict(dropout_p=0.5), dict()):
        _, counts = strict_counts(lambda: F.scaled_dot_product_attention(
            q, kv, kv, **kw))
        assert SDPA_OP not in counts, counts
    # the op itself refuses what it cannot run, with a clear error
    try:
        torch.ops.aten._scaled_dot_product_fused_attention_overrideable(
            q, kv[:, :, :, :4], kv)
    except RuntimeError as e:
        assert "Hq a multiple of Hk" in str(e), e
    else:
        raise AssertionError("mismatched head dims accepted")


@test
def torch_models_multihead_attention():
    """nn.MultiheadAttention in eval through its fast path
    (_native_multi_head_attention) on the card, strict, against the CPU:
    with and without weights, with a key padding mask."""
    g = torch.manual_seed(381)
    mha = torch.nn.MultiheadAttention(32, 4, batch_first=True).eval()
    x = torch.randn(3, 10, 32, generator=g)
    pad = torch.zeros(3, 10, dtype=torch.bool)
    pad[1, 7:] = True
    pad[2, 4:] = True
    dev = torch.nn.MultiheadAttention(32, 4, batch_first=True).eval()
    dev.load_state_dict(mha.state_dict())
    dev = dev.to("spyre")
    xd, pd = x.to("spyre"), pad.to("spyre")
    for kw in (dict(need_weights=False), dict(need_weights=True),
               dict(need_weights=False, key_padding_mask=None)):
        kpm = kw.pop("key_padding_mask", pad)
        kwd = dict(kw, key_padding_mask=None if kpm is None else pd)
        kwc = dict(kw, key_padding_mask=kpm)
        (got, ms) = card_run(lambda a: dev(a, a, a, **kwd), xd,
                             ops=("aten::_native_multi_head_attention",))
        with torch.no_grad():
            (want, cms) = timed(lambda: mha(x, x, x, **kwc))
        torch.testing.assert_close(got[0].cpu(), want[0].detach(),
                                   rtol=1e-4, atol=1e-4)
        if kw.get("need_weights"):
            torch.testing.assert_close(got[1].cpu(), want[1].detach(),
                                       rtol=1e-4, atol=1e-4)
    report("MultiheadAttention", ms, cms)


@test
def torch_models_transformer_encoder():
    """nn.TransformerEncoder (2 layers, gelu and norm_first in one, relu
    and post-norm in the other) in eval through the fused layer
    (_transformer_encoder_layer_fwd) on the card, strict, against the CPU,
    with a key padding mask and with a causal attention mask."""
    torch.manual_seed(382)
    layer = torch.nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0,
                                             batch_first=True)
    enc = torch.nn.TransformerEncoder(layer, 2,
                                      enable_nested_tensor=False).eval()
    enc.layers[1].norm_first = True
    enc.layers[1].activation_relu_or_gelu = 2
    enc.layers[1].activation = torch.nn.functional.gelu
    x = torch.randn(3, 12, 32)
    pad = torch.zeros(3, 12, dtype=torch.bool)
    pad[0, 9:] = True
    dev = __import__("copy").deepcopy(enc).to("spyre")
    xd, pd = x.to("spyre"), pad.to("spyre")
    got, ms = card_run(lambda a: dev(a, src_key_padding_mask=pd), xd,
                       ops=("aten::_transformer_encoder_layer_fwd",))
    with torch.no_grad():
        want, cms = timed(lambda: enc(x, src_key_padding_mask=pad))
    # padded positions are not defined the same way on every path
    keep = ~pad
    torch.testing.assert_close(got.cpu()[keep], want[keep], rtol=1e-4,
                               atol=1e-4)
    causal = torch.nn.Transformer.generate_square_subsequent_mask(12)
    got, _ = card_run(lambda a: dev(a, mask=causal.to("spyre")), xd,
                      ops=("aten::_transformer_encoder_layer_fwd",))
    with torch.no_grad():
        want = enc(x, mask=causal)
    torch.testing.assert_close(got.cpu(), want, rtol=1e-4, atol=1e-4)
    report("TransformerEncoder", ms, cms)


class _RMSNorm(torch.nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = torch.nn.Parameter(1 + 0.1 * torch.randn(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) \
            * self.weight


def _rope(x, cos, sin):
    h = x.shape[-1] // 2
    rot = torch.cat((-x[..., h:], x[..., :h]), dim=-1)
    return x * cos + rot * sin


class _LlamaBlock(torch.nn.Module):
    """Llama's shape, small: embedding, RMSNorm, RoPE (its tables computed
    in the forward, on the input's device), grouped-query causal attention,
    SwiGLU, residuals, final norm and the output projection."""

    def __init__(self, vocab=64, dim=32, heads=4, kv_heads=2, hidden=64):
        super().__init__()
        self.heads, self.kv_heads, self.hd = heads, kv_heads, dim // heads
        self.emb = torch.nn.Embedding(vocab, dim)
        self.n1, self.n2, self.nf = _RMSNorm(dim), _RMSNorm(dim), \
            _RMSNorm(dim)
        self.wq = torch.nn.Linear(dim, heads * self.hd, bias=False)
        self.wk = torch.nn.Linear(dim, kv_heads * self.hd, bias=False)
        self.wv = torch.nn.Linear(dim, kv_heads * self.hd, bias=False)
        self.wo = torch.nn.Linear(heads * self.hd, dim, bias=False)
        self.w1 = torch.nn.Linear(dim, hidden, bias=False)
        self.w3 = torch.nn.Linear(dim, hidden, bias=False)
        self.w2 = torch.nn.Linear(hidden, dim, bias=False)
        self.out = torch.nn.Linear(dim, vocab, bias=False)

    def forward(self, tokens):
        import torch.nn.functional as F
        b, t = tokens.shape
        dev = tokens.device
        inv = 1.0 / (10000.0 ** (torch.arange(0, self.hd, 2, device=dev)
                                 .float() / self.hd))
        f = torch.outer(torch.arange(t, device=dev).float(), inv)
        f = torch.cat((f, f), dim=-1)
        cos, sin = f.cos(), f.sin()
        x = self.emb(tokens)
        h = self.n1(x)
        q = self.wq(h).view(b, t, self.heads, self.hd).transpose(1, 2)
        k = self.wk(h).view(b, t, self.kv_heads, self.hd).transpose(1, 2)
        v = self.wv(h).view(b, t, self.kv_heads, self.hd).transpose(1, 2)
        q, k = _rope(q, cos, sin), _rope(k, cos, sin)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                           enable_gqa=True)
        x = x + self.wo(a.transpose(1, 2).reshape(b, t, -1))
        h = self.n2(x)
        x = x + self.w2(F.silu(self.w1(h)) * self.w3(h))
        return self.out(self.nf(x))


@test
def torch_models_llama_block():
    """A Llama-shaped decoder block forward on the card in strict mode (no
    CPU fallback anywhere, the RoPE tables included) against the CPU."""
    torch.manual_seed(383)
    model = _LlamaBlock().eval()
    tokens = torch.randint(0, 64, (2, 16))
    dev = __import__("copy").deepcopy(model).to("spyre")
    got, ms = card_run(dev, tokens.to("spyre"), ops=(SDPA_OP,))
    want, cms = cpu_ref(model, tokens)
    torch.testing.assert_close(got.cpu(), want, rtol=1e-4, atol=1e-4)
    report("Llama block", ms, cms)
# ---- torchvision models ------------------------------------------------------
# The image's python3-torchvision 0.21 (imported in the tests: importing it
# takes seconds under TCG), random weights from a fixed seed, small
# images; each forward in eval on the card in strict mode against the CPU.

CONV = "aten::convolution_overrideable"


def _vision_case(name, model, res, ops, seed):
    """``model`` in eval with random weights (seed ``seed``) and random
    batch-norm statistics (so eval's normalisation is not the identity) on
    a random ``res`` x ``res`` image: the card's logits (strict, ``ops``
    native) against the CPU's (one thread: the guest's worker threads
    spin on their emulated CPUs; one call, no warm-up, for the test's
    time).

    Tolerance: both sides sum the same float32 products in different
    orders (the card's unfold + GEMM, the CPU's slow_conv2d without
    oneDNN), each layer's rounding is then propagated through the later
    ones; the bound is relative to the size of the logits."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for mod in model.modules():
            if isinstance(mod, torch.nn.BatchNorm2d):
                n = mod.num_features
                mod.running_mean.copy_(torch.rand(n, generator=g) - 0.5)
                mod.running_var.copy_(torch.rand(n, generator=g) + 0.5)
                mod.weight.copy_(torch.rand(n, generator=g) + 0.5)
                mod.bias.copy_(torch.rand(n, generator=g) - 0.5)
    model.eval()
    x = torch.randn(1, 3, res, res, generator=g)
    dev = copy.deepcopy(model).to("spyre")
    model.cpu()         # (a model made on the card comes to the CPU)
    got, ms = card_run(dev, x.to("spyre"), ops=ops)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with torch.no_grad():
            want, cms = timed(lambda: model(x))
    finally:
        torch.set_num_threads(threads)
    err = (got.cpu() - want).abs().max().item() / want.abs().max().item()
    print(f"# {name}: max |card - cpu| / max |cpu| = {err:.1e}")
    torch.testing.assert_close(got.cpu(), want, rtol=1e-4,
                               atol=1e-4 * want.abs().max().item())
    report(name, ms, cms)


@test
def torch_models_resnet18():
    """torchvision's resnet18 (10 classes) on a 32x32 image; made on the
    card (its random initialisation of 11 M parameters took 9 s on the
    guest's CPU)."""
    import torchvision
    torch.manual_seed(384)
    with torch.device("spyre"):
        model = torchvision.models.resnet18(num_classes=10)
    _vision_case("resnet18 32x32", model, 32,
                 (CONV, "aten::native_batch_norm",
                  "aten::max_pool2d_with_indices", "aten::addmm"), 384)


@test
def torch_models_mobilenet_v3_small():
    """torchvision's mobilenet_v3_small (10 classes; depthwise
    convolutions, hardswish, squeeze-excitation) on a 32x32 image."""
    import torchvision
    torch.manual_seed(385)
    _vision_case("mobilenet_v3_small 32x32",
                 torchvision.models.mobilenet_v3_small(num_classes=10), 32,
                 (CONV, "aten::hardswish_", "aten::hardsigmoid"), 385)


@test
def torch_models_vit():
    """torchvision's VisionTransformer, small (32x32 images, 8x8 patches,
    2 layers, 4 heads, width 64): the patch convolution, the class token,
    the encoder blocks' attention through nn.MultiheadAttention's fast
    path."""
    from torchvision.models.vision_transformer import VisionTransformer
    torch.manual_seed(386)
    vit = VisionTransformer(image_size=32, patch_size=8, num_layers=2,
                            num_heads=4, hidden_dim=64, mlp_dim=128,
                            num_classes=10)
    # random, not torchvision's zero init, so the head does something
    torch.nn.init.normal_(vit.heads.head.weight, std=0.1)
    _vision_case("ViT 32x32/8", vit, 32,
                 (CONV, "aten::_native_multi_head_attention",
                  "aten::native_layer_norm"), 386)


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


if __name__ == "__main__":
    sys.exit(ktap.run(ktap.select(TESTS, sys.argv[1:])))
