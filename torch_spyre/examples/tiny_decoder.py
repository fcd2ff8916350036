# SPDX-License-Identifier: MIT
"""A small decoder-only transformer with a static-shape KV cache, for the
torch.compile demo (demo_torch.py), its tests (tests/test_compile.py) and
the bench (bench_torch.py).  This file owns the model and the greedy
decoding loop; nothing in it is specific to the card.

Shapes are static so one compiled decode step serves every position: the
KV cache of each layer is a [max_len, d_model] tensor, the position is a
one-hot column ``pos`` [max_len, 1] (the cache update is
``cache + pos * (new - cache)``, which writes row p and keeps the others),
and attention masks the positions after p with an additive ``mask``
[1, max_len] (0 or -1e9).  The token enters as a one-hot row [1, vocab]
(embedding = one-hot @ table), so the whole step is GEMMs, element-wise
ops, layer norms and a softmax.
"""

import os
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    """Pre-norm transformer block over one new token.

    forward(x [1, d], pos [L, 1], mask [1, L], kc [L, d], vc [L, d]) ->
    (x' [1, d], kc' [L, d], vc' [L, d]): the caches with row p replaced by
    this token's key and value."""

    def __init__(self, d_model, n_heads, max_len):
        super().__init__()
        self.h, self.dh, self.L = n_heads, d_model // n_heads, max_len
        self.ln1 = nn.LayerNorm(d_model)
        self.q = nn.Linear(d_model, d_model)
        self.k = nn.Linear(d_model, d_model)
        self.v = nn.Linear(d_model, d_model)
        self.o = nn.Linear(d_model, d_model)
        self.ln2 = nn.LayerNorm(d_model)
        self.fc1 = nn.Linear(d_model, 4 * d_model)
        self.fc2 = nn.Linear(4 * d_model, d_model)

    def forward(self, x, pos, mask, kc, vc):
        H, dh, L = self.h, self.dh, self.L
        h = self.ln1(x)
        q, k, v = self.q(h), self.k(h), self.v(h)
        kc = kc + pos * (k - kc)
        vc = vc + pos * (v - vc)
        qh = q.view(H, 1, dh)
        kh = kc.view(L, H, dh).transpose(0, 1)          # [H, L, dh]
        vh = vc.view(L, H, dh).transpose(0, 1)
        s = (qh @ kh.transpose(1, 2)) * (dh ** -0.5) + mask
        a = torch.softmax(s, dim=-1) @ vh               # [H, 1, dh]
        x = x + self.o(a.reshape(1, H * dh))
        x = x + self.fc2(F.gelu(self.fc1(self.ln2(x))))
        return x, kc, vc


class TinyDecoder(nn.Module):
    """Decoder-only LM: token and position embeddings, ``n_layers`` blocks,
    a final layer norm and an untied head.

    forward(tok [1, V] one-hot, pos [L, 1] one-hot, mask [1, L], *caches
    (2 per layer, [L, d] each)) -> (logits [1, V], *new caches)."""

    def __init__(self, vocab=256, d_model=128, n_layers=2, n_heads=4,
                 max_len=32):
        super().__init__()
        self.vocab, self.d, self.L, self.n = vocab, d_model, max_len, n_layers
        self.wte = nn.Parameter(torch.randn(vocab, d_model) * 0.5)
        self.wpe = nn.Parameter(torch.randn(max_len, d_model) * 0.1)
        self.blocks = nn.ModuleList(Block(d_model, n_heads, max_len)
                                    for _ in range(n_layers))
        self.ln_f = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab, bias=False)

    def forward(self, tok, pos, mask, *caches):
        x = tok @ self.wte + pos.view(1, self.L) @ self.wpe
        out = []
        for i, b in enumerate(self.blocks):
            x, kc, vc = b(x, pos, mask, caches[2 * i], caches[2 * i + 1])
            out += [kc, vc]
        return (self.head(self.ln_f(x)), *out)


def make_model(seed=0, **kw):
    """TinyDecoder with random weights from ``seed`` (CPU, eval mode)."""
    g = torch.Generator().manual_seed(seed)
    m = TinyDecoder(**kw)
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(torch.randn(p.shape, generator=g) *
                    (0.5 if p.dim() == 2 and p.shape[0] == m.vocab else
                     0.1 if p.dim() == 2 else 0.02))
        for b in list(m.blocks) + [m]:
            for ln in b.modules():
                if isinstance(ln, nn.LayerNorm):
                    ln.weight.fill_(1.0)
                    ln.bias.zero_()
    return m.eval()


def one_hot_rows(m):
    """The token one-hots: row t is a [1, vocab] CPU view of an identity
    matrix, made once (indexing a tensor per token is a dispatcher call,
    about 0.2 ms in the TCG guest)."""
    return list(torch.eye(m.vocab).view(m.vocab, 1, m.vocab))


def step_inputs(m, device):
    """Per position p: (pos [L, 1], mask [1, L]) on ``device``, made once."""
    out = []
    for p in range(m.L):
        pos = torch.zeros(m.L, 1)
        pos[p, 0] = 1.0
        mask = torch.full((1, m.L), -1e9)
        mask[0, :p + 1] = 0.0
        out.append((pos.to(device), mask.to(device)))
    return out


def generate(step, m, prompt, n_new, device, timings=None):
    """Greedy decoding with ``step`` (the model, or a compiled version of
    it, on ``device``): feeds the prompt token by token, then ``n_new``
    generated tokens.  Returns the token list (prompt + generated);
    appends the wall time of each step (seconds, including the host's
    read of the logits) to ``timings`` if given."""
    assert len(prompt) + n_new <= m.L, "sequence longer than the cache"
    caches = [torch.zeros(m.L, m.d, device=device)
              for _ in range(2 * m.n)]
    ins = step_inputs(m, device)
    rows = one_hot_rows(m)
    tokens = list(prompt)
    with torch.no_grad():
        for p in range(len(prompt) + n_new - 1):
            t0 = time.perf_counter()
            tok = rows[tokens[p]].to(device)
            logits, *caches = step(tok, ins[p][0], ins[p][1], *caches)
            nxt = int(logits.cpu().argmax())
            if timings is not None:
                timings.append(time.perf_counter() - t0)
            if p + 1 >= len(prompt):
                tokens.append(nxt)
    return tokens


def card_busy_ns():
    """Card time (ns, the card's clock) this process's queues were busy so
    far: the sum of the ``drm-engine-compute`` DRM fdinfo key over its open
    /dev/accel files (0 if none is open)."""
    total = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            if not os.readlink(f"/proc/self/fd/{fd}").startswith(
                    "/dev/accel/"):
                continue
            with open(f"/proc/self/fdinfo/{fd}") as f:
                for line in f:
                    if line.startswith("drm-engine-compute:"):
                        total += int(line.split()[1])
        except (OSError, ValueError):
            continue
    return total


def framework_cost(m, n=20, rounds=3):
    """The framework's cost per decode step, for a model compiled with
    torch.compile(backend="spyre") after torch_spyre.compiler.
    keep_last_inputs(True) and at least one generate() call.  Returns a
    dict of per-step times in ms, each the median over ``rounds`` of the
    median of ``n`` steps (a median, so a garbage-collector pause in one
    step does not count):

    * ``python``: one token step as generate() does it (the one-hot token
      copied to the card with tensor.to(), the compiled program's staging,
      launch and staging, the logits read back with tensor.cpu(), the
      argmax), calling the callable the backend gave Dynamo directly
      (without Dynamo's frame and guards); ``to``, ``call`` and ``cpu``:
      its three parts (the token's to(), the call, the logits' cpu() with
      the wait for the card and the argmax);
    * ``c``: the same copies and command lists from C++ through libspyre
      (torch.ops.spyre.graph_bench with the token input copied from host
      memory and the logits output copied back, one step per call);
    * ``card_python``, ``card_c``: the card's busy time per step in each
      (:func:`card_busy_ns` over ``n`` steps / ``n``; for C++ one call of
      ``n`` steps, less graph_bench's untimed first launch): what is left
      of a step is the guest's CPU (Python, PyTorch, libspyre, the
      driver) and waits.  The card counts a job busy from its start,
      which for a job the vCPU starts includes waking a worker;

    or None when the last program is not one command list."""
    import statistics
    import torch_spyre.compiler as C
    progs = [p for p in C.programs() if p.fast is not None and
             p.last_args is not None]
    if not progs:
        return None
    p = progs[-1]
    h, idx, _omap, _nodes = p.fast
    args = list(p.last_args)
    ins = [args[i] for i in idx]
    tok_i = [i for i, t in enumerate(ins) if tuple(t.shape) == (1, m.vocab)]
    outs = torch.ops.spyre.graph_run(h, ins)
    log_i = [i for i, t in enumerate(outs) if tuple(t.shape) == (1, m.vocab)]
    if len(tok_i) != 1 or len(log_i) != 1:
        return None
    tok_a = idx[tok_i[0]]   # the token's position among the call's args
    call = p.entry if p.entry is not None else (lambda *a: p(list(a)))
    res = call(*args)
    log_o = [i for i, t in enumerate(res) if tuple(t.shape) == (1, m.vocab)]
    rows = one_hot_rows(m)
    pc = time.perf_counter
    fig = {"python": [], "to": [], "call": [], "cpu": [], "c": [],
           "card_python": [], "card_c": []}
    with torch.no_grad():
        for _ in range(rounds):
            torch.spyre.synchronize()
            ph = [[], [], [], []]
            b0 = card_busy_ns()
            for k in range(n):
                t0 = pc()
                args[tok_a] = rows[k % m.vocab].to("spyre")
                t1 = pc()
                out = call(*args)
                t2 = pc()
                int(out[log_o[0]].cpu().argmax())
                t3 = pc()
                for i, d in enumerate((t3 - t0, t1 - t0, t2 - t1, t3 - t2)):
                    ph[i].append(d * 1e3)
            b1 = card_busy_ns()
            for key, v in zip(("python", "to", "call", "cpu"), ph):
                fig[key].append(statistics.median(v))
            fig["c"].append(statistics.median(
                torch.ops.spyre.graph_bench(h, ins, 1, tok_i[0], log_i[0])
                / 1e6 for _k in range(n)))
            # The card's time of n C++ steps: graph_bench launches the
            # graph once untimed before its steps, so that launch's own
            # busy time (measured alone) comes off.
            b2 = card_busy_ns()
            torch.ops.spyre.graph_bench(h, ins, n, tok_i[0], log_i[0])
            b3 = card_busy_ns()
            torch.ops.spyre.graph_run(h, ins)
            torch.spyre.synchronize()
            b4 = card_busy_ns()
            fig["card_python"].append((b1 - b0) / n / 1e6)
            fig["card_c"].append((b3 - b2 - (b4 - b3)) / n / 1e6)
    return {k: statistics.median(v) for k, v in fig.items()}


def _nothing_backend(gm, example_inputs):
    """A torch.compile backend that runs ``gm`` once and then only returns
    those outputs again: what is left of a compiled call is Dynamo's own
    cost (the frame, its guards, the call of the backend's callable)."""
    cache = []

    def call(*args):
        if not cache:
            cache.append(gm.forward(*args))
        return cache[0]
    return call


def dynamo_floor(m, n=20, rounds=3):
    """The floor under a compiled decode step, in ms, medians over
    ``rounds`` of the median of ``n`` calls each (model ``m`` on the card,
    at least one compiled generate() done): returns a dict of

    * ``dynamo_call``: one call of ``m`` compiled by Dynamo with a backend
      that does nothing (:func:`_nothing_backend`), same inputs as a decode
      step: Dynamo's frame, its guards and the call, no card work;
    * ``to``: the token's ``tensor.to("spyre")`` (queued, not waited for);
    * ``cpu``: ``logits.cpu()`` of a [1, vocab] card tensor with nothing
      else queued (one card->host copy and its wait) and the argmax.
    """
    import statistics
    step = torch.compile(m, backend=_nothing_backend, dynamic=False)
    caches = [torch.zeros(m.L, m.d, device="spyre") for _ in range(2 * m.n)]
    pos, mask = step_inputs(m, "spyre")[3]
    rows = one_hot_rows(m)
    tok = rows[5].to("spyre")
    logits = torch.zeros(1, m.vocab, device="spyre")
    fig = {"dynamo_call": [], "to": [], "cpu": []}
    pc = time.perf_counter

    def per_call_ms(fn):
        ts = []
        for k in range(n):
            t = pc()
            fn(k)
            ts.append((pc() - t) * 1e3)
        return statistics.median(ts)

    with torch.no_grad():
        step(tok, pos, mask, *caches)
        for _ in range(rounds):
            torch.spyre.synchronize()
            fig["dynamo_call"].append(per_call_ms(
                lambda k: step(tok, pos, mask, *caches)))
            fig["to"].append(per_call_ms(
                lambda k: rows[k % m.vocab].to("spyre")))
            torch.spyre.synchronize()
            fig["cpu"].append(per_call_ms(
                lambda k: int(logits.cpu().argmax())))
    torch._dynamo.reset()
    return {k: statistics.median(v) for k, v in fig.items()}
