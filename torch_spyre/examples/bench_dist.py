# SPDX-License-Identifier: MIT
"""The torch.distributed figure of the bench (scripts/bench-torch.sh, in
the PyTorch guest with two cards): all_reduce (SUM) of a 16 MiB float32
tensor between two processes, one card each, over the ``spyre`` backend,
against the same all_reduce of CPU tensors over gloo in the same guest.
Bandwidth is the tensor's bytes over the median time of ``--iters`` calls
(each ended by a synchronize), after one warm-up call.  Prints a table and
``torch-<name> <value>`` lines; the figure is reported, never judged.

    python3 bench_dist.py [--mib 16] [--iters 5]
"""

import argparse
import os
import statistics
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def run(rank, path, mib, iters, results):
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    os.environ["USE_LIBUV"] = "0"
    torch.spyre.set_device(rank)
    dist.init_process_group("spyre", init_method="file://" + path,
                            rank=rank, world_size=2)
    gloo = dist.new_group(backend="gloo")
    n = (mib << 20) // 4
    out = {}
    for name, dev, group in (("spyre", torch.device("spyre", rank), None),
                             ("gloo", torch.device("cpu"), gloo)):
        t = torch.ones(n, device=dev)
        times = []
        for i in range(iters + 1):
            dist.barrier(group=gloo)
            t0 = time.perf_counter()
            dist.all_reduce(t, group=group)
            if dev.type == "spyre":
                torch.spyre.synchronize()
            if i:
                times.append(time.perf_counter() - t0)
        # every call doubled it: 2 ** (iters + 1)
        want = float(2 ** (iters + 1))
        got = t[:1].cpu().item()
        assert got == want, (name, got, want)
        out[name] = (mib << 20) / statistics.median(times) / 1e9
    if results is not None:
        results.put(out)
    dist.destroy_process_group()
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=int, default=16)
    ap.add_argument("--iters", type=int, default=5)
    a = ap.parse_args()
    if torch.spyre.device_count() < 2:
        raise SystemExit("bench_dist: needs two cards")
    ctx = mp.get_context("spawn")
    path = tempfile.mktemp(prefix="spyre-bench-dist-")
    q = ctx.Queue()
    p = ctx.Process(target=run, args=(1, path, a.mib, a.iters, q))
    p.start()
    mine = run(0, path, a.mib, a.iters, None)
    theirs = q.get(timeout=600)
    p.join()
    sp = min(mine["spyre"], theirs["spyre"])
    gl = min(mine["gloo"], theirs["gloo"])
    print(f"all_reduce of {a.mib} MiB float32, 2 ranks (median of "
          f"{a.iters}, the slower rank): spyre tensors on 2 cards "
          f"{sp:.3f} GB/s, CPU tensors over gloo {gl:.3f} GB/s: "
          f"{sp / gl:.2f}x")
    print(f"torch-dist-allreduce-spyre-gbs {sp:.4f}")
    print(f"torch-dist-allreduce-gloo-gbs {gl:.4f}")


if __name__ == "__main__":
    main()
