#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""How long vCPUs wait for QEMU's big lock while the card computes.

    scripts/bql-profile.py [--seconds S] [--rate JOBS] [--json FILE]
                           [--idle-card] [-- VM.SH-RUN-ARGS...]

Boots a guest with QEMU's lock profiler on (`vm.sh run --qemu-arg
-enable-sync-profile --qmp SOCKET`) and runs `spyre-bench --only load`
there: four queues of ELTWISE, REDUCE and GEMM work on system memory for
--seconds, as fast as the card goes or, with --rate, JOBS jobs per second
per queue on a fixed schedule (`spyre-bench --rate`): the same work per
second on any card model that keeps up, so two models' waits compare
(the report says how many jobs were done and offered).  When the guest prints "load: start" the profile is reset
(HMP `sync-profile reset`), when it prints "load: end" it is read
(`info sync-profile -n`), and the waits for the BQL are summed by who
waited: the card's worker threads (call sites in hw/misc/spyre/), the
main loop (util/main-loop.c) and the rest, which is the vCPU threads
(MMIO, interrupts, TCG's own acquisitions); and the waits for the card's
device lock by its MMIO handlers (vCPUs holding the BQL) and by the rest
of the card.  Prints each as milliseconds of waiting per second of the
window, and with --json writes them as numbers.  --idle-card runs a load
with no card work instead (four busy shell loops, the same markers): the
floor the guest's own activity sets.  A figure for `make bench`, not a
test: the exit status says only whether the measurement ran.
"""
import argparse
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location(
    "qmp_hotplug", os.path.join(HERE, "qmp-hotplug.py"))
_qh = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_qh)
Qmp = _qh.Qmp

# one row of `info sync-profile -n`: type, object, call site, wait (s),
# count, average (us)
ROW = re.compile(r"^(BQL mutex|\S+)\s+(0x[0-9a-f]+|\(nil\))\s+(\S+)\s+"
                 r"([\d.]+)\s+(\d+)\s+([\d.]+)\s*$")


def parse(text):
    """Rows of the report as (type, object, call site, wait s, count)."""
    rows = []
    for line in text.splitlines():
        m = ROW.match(line.strip())
        if m:
            rows.append((m.group(1), m.group(2), m.group(3),
                         float(m.group(4)), int(m.group(5))))
    return rows


def summarize(rows, window):
    """Waits per second of @window, grouped by who waited."""
    bql = {r[1] for r in rows if r[0] == "BQL mutex"}
    out = {"window_s": window}
    groups = {"vcpu": [0.0, 0], "card": [0.0, 0], "main_loop": [0.0, 0],
              "device_lock": [0.0, 0], "device_lock_mmio": [0.0, 0]}
    for typ, obj, site, wait, count in rows:
        if obj in bql:
            if site.startswith("hw/misc/spyre/"):
                g = "card"
            elif site.startswith("util/main-loop.c"):
                g = "main_loop"
            else:
                g = "vcpu"
        elif site.startswith("hw/misc/spyre/spyre-regs.c") and \
                typ == "mutex":
            g = "device_lock_mmio"      # MMIO handlers: vCPUs, BQL held
        elif site.startswith("hw/misc/spyre/") and typ == "mutex":
            g = "device_lock"
        else:
            continue
        groups[g][0] += wait
        groups[g][1] += count
    for g, (wait, count) in groups.items():
        out[f"{g}_wait_ms_per_s"] = 1e3 * wait / window if window else 0.0
        out[f"{g}_acquisitions"] = count
    out["bql_found"] = bool(bql)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--json", help="write the figures here")
    ap.add_argument("--rate", type=float, default=0.0,
                    help="jobs per second per queue (default: free-running)")
    ap.add_argument("--idle-card", action="store_true",
                    help="four busy loops in the guest, no card work")
    ap.add_argument("vm_args", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    if a.vm_args[:1] == ["--"]:
        a.vm_args = a.vm_args[1:]

    marks = {}
    end_line = []   # "load: end SECONDS JOBS [OFFERED]"
    cond = threading.Condition()

    def forward(proc):
        for raw in proc.stdout:
            sys.stdout.buffer.write(raw)
            sys.stdout.buffer.flush()
            for key in (b"load: start", b"load: end"):
                if key in raw:
                    with cond:
                        marks[key] = time.monotonic()
                        if key == b"load: end":
                            end_line.append(raw.decode(errors="replace"))
                        cond.notify_all()
        with cond:
            marks[b"gone"] = time.monotonic()
            cond.notify_all()

    def wait_for(key, timeout):
        with cond:
            cond.wait_for(lambda: key in marks or b"gone" in marks, timeout)
            return key in marks

    result = None
    with tempfile.TemporaryDirectory(prefix="spyre-bql.") as tmp:
        sock = os.path.join(tmp, "qmp")
        load = ["spyre-bench", "--only", "load", "--time", str(a.seconds)]
        if a.rate > 0:
            load += ["--rate", str(a.rate)]
        if a.idle_card:
            load = ["sh", "-c", 'echo "load: start"; for i in 1 2 3 4; do '
                    'timeout "$0" sh -c "while :; do :; done" & done; wait; '
                    'echo "load: end $0 0"', str(int(a.seconds))]
        cmd = [os.path.join(HERE, "vm.sh"), "run", "--qmp", sock,
               "--qemu-arg", "-enable-sync-profile"] + a.vm_args + [
               "--"] + load
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT)
        out = threading.Thread(target=forward, args=(proc,))
        out.start()
        try:
            qmp = Qmp(sock, 120)
            if wait_for(b"load: start", 600):
                qmp.command("human-monitor-command",
                            **{"command-line": "sync-profile reset"})
                t0 = time.monotonic()
                if wait_for(b"load: end", a.seconds + 600):
                    text = qmp.command(
                        "human-monitor-command",
                        **{"command-line": "info sync-profile -n 100000"})
                    result = summarize(parse(text), time.monotonic() - t0)
                    m = re.search(r"load: end [\d.]+ (\d+)(?: (\d+))?",
                                  end_line[0] if end_line else "")
                    result["jobs"] = int(m.group(1)) if m else None
                    result["jobs_offered"] = \
                        int(m.group(2)) if m and m.group(2) else 0
                    result["rate"] = a.rate
                    if os.environ.get("BQL_PROFILE_RAW"):
                        with open(os.environ["BQL_PROFILE_RAW"], "w") as f:
                            f.write(text)
        except (EOFError, OSError, RuntimeError) as e:
            print(f"bql-profile: {e}", flush=True)
        rc = proc.wait()
        out.join()
    if not result or not result["bql_found"]:
        print("bql-profile: no profile of the load", flush=True)
        return rc or 1
    print(f"bql-profile: over {result['window_s']:.2f} s of card load: "
          f"vCPUs waited {result['vcpu_wait_ms_per_s']:.3f} ms/s for the BQL "
          f"({result['vcpu_acquisitions']} acquisitions), the card's "
          f"workers {result['card_wait_ms_per_s']:.3f} ms/s "
          f"({result['card_acquisitions']}), the main loop "
          f"{result['main_loop_wait_ms_per_s']:.3f} ms/s; the device "
          f"lock: MMIO handlers {result['device_lock_mmio_wait_ms_per_s']:.3f}"
          f" ms/s ({result['device_lock_mmio_acquisitions']}), workers "
          f"{result['device_lock_wait_ms_per_s']:.3f} ms/s "
          f"({result['device_lock_acquisitions']}); jobs done "
          f"{result['jobs']}, offered "
          f"{result['jobs_offered'] or 'as fast as the card goes'}",
          flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)
    return rc


if __name__ == "__main__":
    sys.exit(main())
