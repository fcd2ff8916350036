# SPDX-License-Identifier: MIT
"""The PyTorch figures of ``make bench`` (run in the guest by
scripts/bench-torch.sh), each next to its reference in the same run:

* per-token decode time of the demo model (tiny_decoder.py), eager vs
  ``torch.compile(backend="spyre")``: the median over three generations of
  each one's median per-token time (the compile excluded);
* the framework's cost on top of the command lists: one decode step of the
  compiled program called from Python (token in with tensor.to(), logits
  out with tensor.cpu()), and each of those three parts, vs the same
  copies, staging and launch from C++ through libspyre
  (tiny_decoder.framework_cost(), graph_bench), per-step medians, and
  the card's busy time per step in each (DRM fdinfo): what is left is
  the guest's CPU, which TCG runs about 10x slower than the host (the
  card's work runs at the host's speed);
* the floor under that cost: a call of the same model compiled by Dynamo
  with a backend that does nothing (Dynamo's frame, guards and call), and
  the token's tensor.to() and the logits' cpu() on their own
  (tiny_decoder.dynamo_floor(), measured last: it compiles the model
  again);
* the same compiled-vs-C++ step for a wider model (``--wide-d-model``,
  512 by default, 2 layers: 16x the GEMM work, about 6x the card's busy
  time per token, the same commands and framework calls), measured after
  the demo model's, with the card's busy time under each: how much of
  the framework's cost per step (compiled per-token time less the C++
  step) stays fixed as the card's share grows, and how much more the
  card takes while the guest's CPU competes with it for the host's;
* per-op dispatch cost of a small eager op (an 8x8 add) on ``spyre`` vs the
  same op on a CPU tensor in the guest (the spyre figure includes the
  card's work, waited for once at the end: the ops are queued in the
  stream's batches, SPYRE_TORCH_BATCH);
* host -> card copy bandwidth of ``tensor.to("spyre")`` vs libspyre's own
  copy (spyre_stream_copy_h2d of the same bytes from ordinary memory,
  torch.ops.spyre.bench_copy_h2d), both waited for.

This file owns those measurements.  Each figure is printed as a line
``torch-<name> <value>`` (machine-readable) after a human-readable table.
Figures are reported, never judged.

    python3 bench_torch.py [--tokens N] [--copy-mib M] [--only dispatch]

``--only dispatch`` measures the dispatch figure alone (no model, no
compile: a guest run of about a minute).
"""

import argparse
import statistics
import time

import torch

import tiny_decoder as td


def decode_ms(step, m, tokens):
    """Median per-token time (ms) of one generation, first step
    excluded."""
    ts = []
    td.generate(step, m, [1, 7, 42, 3], tokens, "spyre", ts)
    return statistics.median(ts[1:]) * 1e3


def dispatch_us(dev, n=300):
    """Host time per eager 8x8 add on ``dev`` (us), card work waited for
    at the end."""
    a = torch.ones(8, 8, device=dev)
    for _ in range(20):
        a + a
    if dev == "spyre":
        torch.spyre.synchronize()
    t = time.perf_counter()
    for _ in range(n):
        a + a
    if dev == "spyre":
        torch.spyre.synchronize()
    return (time.perf_counter() - t) / n * 1e6


def dispatch_pair(runs=3):
    """Medians over ``runs`` of dispatch_us() on the CPU and on spyre,
    the two measured alternately (so both see the same host load)."""
    pairs = [(dispatch_us("cpu"), dispatch_us("spyre")) for _ in range(runs)]
    return (statistics.median(p[0] for p in pairs),
            statistics.median(p[1] for p in pairs))


def to_gbps(nbytes, iters=5):
    """GB/s of ``cpu_tensor.to("spyre")`` (waited for), best of
    ``iters``."""
    x = torch.ones(nbytes // 4)
    best = float("inf")
    for _ in range(iters + 1):
        t = time.perf_counter()
        y = x.to("spyre")
        torch.spyre.synchronize()
        best = min(best, time.perf_counter() - t)
        del y
    return nbytes / best / 1e9


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=8)
    ap.add_argument("--copy-mib", type=int, default=16)
    ap.add_argument("--wide-d-model", type=int, default=512,
                    help="d_model of the wider model (0: skip it)")
    ap.add_argument("--only", choices=["dispatch"],
                    help="measure this figure alone")
    a = ap.parse_args()
    if a.only == "dispatch":
        d_cpu, d_sp = dispatch_pair()
        print(f"eager 8x8 add dispatch: spyre {d_sp:.1f} us/op, cpu "
              f"{d_cpu:.1f} us/op ({d_sp / d_cpu:.1f}x)")
        print(f"torch-dispatch-spyre-us {d_sp:.2f}")
        print(f"torch-dispatch-cpu-us {d_cpu:.2f}")
        return
    import torch_spyre.compiler as C
    C.keep_last_inputs(True)
    m = td.make_model(0).to("spyre")
    step = torch.compile(m, backend="spyre", dynamic=False)
    td.generate(step, m, [1], 1, "spyre")               # compile
    eager = statistics.median(decode_ms(m, m, a.tokens) for _ in range(3))
    s0 = C.compile_stats()
    comp = statistics.median(decode_ms(step, m, a.tokens) for _ in range(3))
    st = C.compile_stats()
    # launches per compiled call of these generations only (the counters
    # also count framework_cost's C++ launches below)
    per_call = ((st["launches"] - s0["launches"]) /
                max(st["runs"] - s0["runs"], 1))

    fc = td.framework_cost(m)
    fw_py, fw_c = (fc["python"], fc["c"]) if fc else (None, None)

    wide = None
    if a.wide_d_model and fc:
        w = td.make_model(0, d_model=a.wide_d_model).to("spyre")
        wstep = torch.compile(w, backend="spyre", dynamic=False)
        td.generate(wstep, w, [1], 1, "spyre")          # compile
        wcomp = statistics.median(decode_ms(wstep, w, a.tokens)
                                  for _ in range(3))
        wfc = td.framework_cost(w)
        if wfc:
            wide = (wcomp, wfc["c"], wfc["card_c"], wfc["card_python"])
        del wstep, w

    d_cpu, d_sp = dispatch_pair()

    fl = td.dynamo_floor(m)

    nb = a.copy_mib << 20
    to = to_gbps(nb)
    lib = nb / (min(torch.ops.spyre.bench_copy_h2d(nb, 1)
                    for _ in range(5)) * 1e-9) / 1e9

    print(f"decode per token (2 layers, d_model 128, median of 3 runs): "
          f"eager {eager:.2f} ms, compiled {comp:.2f} ms -> "
          f"{eager / comp:.1f}x")
    if fw_py is not None:
        print(f"one token step (token in, staging, launch, staging, logits "
              f"out) from C++ through libspyre: {fw_c:.2f} ms; compiled "
              f"per-token time {comp / fw_c:.2f}x that (the compiled "
              f"program called directly: {fw_py:.2f} ms, "
              f"{fw_py / fw_c:.2f}x: token to() {fc['to']:.2f} ms, the "
              f"call (staging, launch, staging: queued) {fc['call']:.2f} "
              f"ms, logits cpu() with the wait for the card and argmax "
              f"{fc['cpu']:.2f} ms)")
        cc, cp = fc["card_c"], fc["card_python"]
        if cc > 0:
            # (busy is a mean over the steps, the step time a median)
            print(f"card busy per step (fdinfo drm-engine-compute, card "
                  f"clock, a mean): the C++ step {cc:.2f} ms of its "
                  f"{fw_c:.2f} ms, the compiled program {cp:.2f} ms of its "
                  f"{fw_py:.2f} ms: the rest, {max(fw_py - cp, 0):.2f} ms, "
                  f"is the guest's CPU (Python, PyTorch, libspyre, the "
                  f"driver: under TCG about 10x the host's time) and its "
                  f"waits")
        least = fw_c + fl["dynamo_call"]
        print(f"floor: a Dynamo-compiled call of the same model with a "
              f"backend that does nothing {fl['dynamo_call']:.2f} ms "
              f"(tensor.to() of the token {fl['to']:.2f} ms, logits cpu() "
              f"and argmax {fl['cpu']:.2f} ms); C++ step + that call "
              f"{least:.2f} ms = {least / fw_c:.2f}x the C++ step: the "
              f"least a compiled step can cost here; compiled per-token "
              f"time {comp / least:.2f}x that")
    if wide:
        wc, wl, wk, wp = wide
        print(f"wider model (d_model {a.wide_d_model}, 2 layers): compiled "
              f"per token {wc:.2f} ms, the C++ step {wl:.2f} ms: "
              f"{wc / wl:.2f}x; the framework's cost per step (compiled "
              f"less C++) {wc - wl:.2f} ms here, {comp - fw_c:.2f} ms with "
              f"d_model 128; card busy per step {wk:.2f} ms under the C++ "
              f"step, {wp:.2f} ms under the compiled program (the card's "
              f"work runs on the host's CPUs, which the guest shares)")
    print(f"compiled calls: {st['lean_graphs']} lean graph(s) (no "
          f"aot_autograd wrappers), {st['wrapped_graphs']} wrapped; "
          f"{per_call:.1f} command-list launch(es) per call while "
          "decoding, staging included (one submit ioctl each)")
    print(f"eager 8x8 add dispatch: spyre {d_sp:.1f} us/op, cpu "
          f"{d_cpu:.1f} us/op ({d_sp / d_cpu:.1f}x)")
    print(f"host->card copy of {a.copy_mib} MiB: tensor.to() {to:.2f} GB/s, "
          f"libspyre spyre_stream_copy_h2d {lib:.2f} GB/s "
          f"({to / lib:.2f}x)")
    print(f"torch-decode-eager-ms {eager:.3f}")
    print(f"torch-decode-compiled-ms {comp:.3f}")
    if fw_py is not None:
        print(f"torch-step-program-ms {fw_py:.3f}")
        print(f"torch-step-libspyre-ms {fw_c:.3f}")
        for k in ("to", "call", "cpu"):
            print(f"torch-step-{k}-ms {fc[k]:.3f}")
        print(f"torch-step-card-libspyre-ms {fc['card_c']:.3f}")
        print(f"torch-step-card-program-ms {fc['card_python']:.3f}")
        print(f"torch-compiled-vs-libspyre {comp / fw_c:.3f}")
    if wide:
        print(f"torch-wide-decode-compiled-ms {wide[0]:.3f}")
        print(f"torch-wide-step-libspyre-ms {wide[1]:.3f}")
        print(f"torch-wide-step-card-libspyre-ms {wide[2]:.3f}")
        print(f"torch-wide-step-card-program-ms {wide[3]:.3f}")
    print(f"torch-decode-speedup {eager / comp:.3f}")
    print(f"torch-floor-dynamo-call-ms {fl['dynamo_call']:.3f}")
    print(f"torch-floor-to-ms {fl['to']:.3f}")
    print(f"torch-floor-cpu-ms {fl['cpu']:.3f}")
    print(f"torch-dispatch-spyre-us {d_sp:.2f}")
    print(f"torch-dispatch-cpu-us {d_cpu:.2f}")
    print(f"torch-h2d-to-gbps {to:.3f}")
    print(f"torch-h2d-libspyre-gbps {lib:.3f}")


if __name__ == "__main__":
    main()
