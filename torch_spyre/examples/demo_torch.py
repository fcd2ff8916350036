# SPDX-License-Identifier: MIT
"""``make demo-torch``: greedy decoding with a small decoder-only
transformer (tiny_decoder.py: 2 layers, d_model 128, 4 heads, vocab 256,
KV cache of 32 positions, random weights from a fixed seed) on
``device="spyre"``, eager and ``torch.compile(backend="spyre")``, both
checked token for token against the CPU.  This file owns the demo's
report: per-token times (median, and eager / compiled), command lists and
card commands launched per token, ops on the card vs the CPU fallback,
card memory used, and the framework's cost on top of the same command
lists launched from C++ through libspyre.

    python3 demo_torch.py [--tokens N] [--seed S]

Exit status 0 when both runs produce the CPU's tokens, 1 otherwise.
"""

import argparse
import statistics
import sys
import time

import torch

import tiny_decoder as td


def per_token(ts):
    """Median of the per-token times in ms, ignoring the first (compile /
    warm-up) step."""
    return statistics.median(ts[1:]) * 1e3


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=12,
                    help="tokens to generate after the prompt")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    import torch_spyre.compiler as C
    C.keep_last_inputs(True)

    m = td.make_model(a.seed)
    prompt = [1, 7, 42, 3]
    t = time.perf_counter()
    want = td.generate(m, m, prompt, a.tokens, "cpu")
    print(f"model: {m.n} layers, d_model {m.d}, vocab {m.vocab}, cache "
          f"{m.L} positions, {sum(p.numel() for p in m.parameters())} "
          f"parameters; prompt {prompt}, {a.tokens} new tokens")
    print(f"cpu:      {want[len(prompt):]}  "
          f"({(time.perf_counter() - t) * 1e3:.0f} ms)")

    ms = td.make_model(a.seed).to("spyre")
    torch.spyre.synchronize()
    base = torch.spyre.memory_allocated()

    # eager on the card
    torch.spyre.reset_op_counts()
    te = []
    got_e = td.generate(ms, ms, prompt, a.tokens, "spyre", te)
    nsteps = len(te)
    oc = torch.spyre.op_counts()
    e_native = sum(v["native"] for v in oc.values())
    e_fb = sum(v["fallback"] for v in oc.values())
    print(f"eager:    {got_e[len(prompt):]}  "
          f"{'== cpu' if got_e == want else '!= cpu'}")

    # compiled
    torch._dynamo.reset()
    C.reset_compile_stats()
    step = torch.compile(ms, backend="spyre", dynamic=False)
    tc = []
    torch.spyre.reset_op_counts()
    torch.spyre.reset_peak_memory_stats()
    got_c = td.generate(step, ms, prompt, a.tokens, "spyre", tc)
    st = C.compile_stats()
    oc = torch.spyre.op_counts()
    c_native = sum(v["native"] for v in oc.values())
    c_fb = sum(v["fallback"] for v in oc.values())
    print(f"compiled: {got_c[len(prompt):]}  "
          f"{'== cpu' if got_c == want else '!= cpu'}")
    print()
    e_ms, c_ms = per_token(te), per_token(tc)
    print(f"per-token time (median of {nsteps - 1}, first step excluded): "
          f"eager {e_ms:.2f} ms, compiled {c_ms:.2f} ms: "
          f"{e_ms / c_ms:.1f}x (first compiled step, with the compile: "
          f"{tc[0]:.1f} s)")
    print(f"command lists launched per token: {st['launches'] / nsteps:.1f}"
          f" ({st['commands'] / nsteps:.0f} card commands, "
          f"{st['copy_jobs'] / nsteps:.1f} staging copy jobs, "
          f"{(st['bytes_in'] + st['bytes_out']) / nsteps / 1024:.1f} KiB "
          "staged)")
    print(f"ops per token, eager: {e_native / nsteps:.0f} on the card "
          f"(dispatcher calls), {e_fb / nsteps:.0f} CPU fallback")
    print(f"ops per token, compiled: "
          f"{st['lowered_nodes_run'] / nsteps:.0f} ATen nodes inside command "
          f"lists, {st['eager_nodes_run'] / nsteps:.0f} run eagerly "
          f"({c_native / nsteps:.0f} dispatcher calls on the card, "
          f"{c_fb / nsteps:.0f} CPU fallback, the input/output copies "
          "included)")
    print(f"lowered ops: {', '.join(sorted(st['lowered_ops']))}")
    if st["eager_ops"]:
        print(f"left eager: {st['eager_ops']}")
    progs = C.programs()
    arenas = sum(i[2] for p in progs for i in p.info())
    cmd_bytes = sum(i[1] for p in progs for i in p.info())
    print(f"card memory: weights {base / 2**20:.2f} MiB, peak while "
          f"decoding {torch.spyre.max_memory_allocated() / 2**20:.2f} MiB "
          f"(arenas {arenas / 1024:.0f} KiB, command lists "
          f"{cmd_bytes / 1024:.0f} KiB)")
    fc = td.framework_cost(ms)
    if fc:
        print(f"the same token step from C++ through libspyre (token in, "
              f"staging, launch, staging, logits out, wait): {fc['c']:.2f} "
              f"ms; compiled per-token time is {c_ms / fc['c']:.2f}x that "
              f"(the backend's callable called directly, without "
              f"Dynamo's frame and guards: {fc['python']:.2f} ms, "
              f"{fc['python'] / fc['c']:.2f}x)")
    print(f"graphs Dynamo compiled: {st['lean_graphs']} lean (called "
          f"without aot_autograd's runtime wrappers), "
          f"{st['wrapped_graphs']} wrapped")
    ok = got_e == want and got_c == want
    print("tokens match the CPU" if ok else "TOKENS DIFFER FROM THE CPU")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
