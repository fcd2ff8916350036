#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Run a vm.sh guest and hot-unplug / re-plug one of its cards through QMP.

    scripts/qmp-hotplug.py [--device spyre1] [--bus rp1] [--cycles N]
                           [--gap S] -- VM.SH-RUN-ARGS...

Starts `vm.sh run --qmp SOCKET VM.SH-RUN-ARGS...` (a socket of its own),
passes the guest's output through, and waits for the guest's test to
print READY (spyre_unplug prints it once it holds both cards and its load
runs): the host must not pull a card while the guest still boots or
enumerates.  Then it cycles until the guest exits (at most 10 x --cycles
times): device_del, wait for DEVICE_DELETED (the guest let go of the
card: its driver was unbound), --gap seconds, device_add on the same root
port with the same id, --gap seconds.  Prints a line per cycle.  Exits
with vm.sh's status, or 1 if fewer than --cycles ran or QMP refused a
command.
"""
import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time

# the line spyre_unplug (selftests/spyre_unplug.c) prints when the host
# may start
READY = "ready for the host's hot-unplug cycles"


class Qmp:
    """A QMP client: commands in order, events kept until asked for."""

    def __init__(self, path, timeout):
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                self.sock.connect(path)
                break
            except OSError:
                self.sock.close()
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        self.file = self.sock.makefile("rw")
        self.events = []
        self._read()  # the greeting
        self.command("qmp_capabilities")

    def _read(self):
        line = self.file.readline()
        if not line:
            raise EOFError("QMP closed")
        return json.loads(line)

    def command(self, name, **args):
        self.file.write(json.dumps({"execute": name, "arguments": args}) + "\n")
        self.file.flush()
        while True:
            msg = self._read()
            if "event" in msg:
                self.events.append(msg)
            elif "error" in msg:
                raise RuntimeError(f"{name}: {msg['error'].get('desc')}")
            else:
                return msg.get("return")

    def wait_event(self, name, device, timeout):
        deadline = time.monotonic() + timeout
        while True:
            for i, ev in enumerate(self.events):
                if ev["event"] == name and \
                        ev.get("data", {}).get("device") == device:
                    del self.events[i]
                    return ev
            if time.monotonic() > deadline:
                raise TimeoutError(f"no {name} for {device}")
            # query-status is cheap and brings pending events along
            self.command("query-status")
            time.sleep(0.05)


def forward(proc, ready):
    """Copy the guest's output to ours; set @ready on the READY line."""
    for raw in proc.stdout:
        sys.stdout.buffer.write(raw)
        sys.stdout.buffer.flush()
        if READY.encode() in raw:
            ready.set()


def cycle(a, sock, proc, ready):
    """The QMP side: returns the number of cycles done."""
    done = 0
    try:
        qmp = Qmp(sock, 60)
        while not ready.wait(0.2):
            if proc.poll() is not None:
                print("qmp-hotplug: guest exited before its test was ready",
                      flush=True)
                return 0
        while done < 10 * a.cycles:
            t0 = time.monotonic()
            qmp.command("device_del", id=a.device)
            qmp.wait_event("DEVICE_DELETED", a.device, 60)
            t1 = time.monotonic()
            time.sleep(a.gap)
            qmp.command("device_add", driver="spyre", id=a.device,
                        bus=a.bus)
            done += 1
            print(f"qmp-hotplug: cycle {done}: {a.device} unplugged in "
                  f"{t1 - t0:.2f} s, plugged back", flush=True)
            time.sleep(a.gap)
    except (EOFError, OSError) as e:
        print(f"qmp-hotplug: guest gone ({e})", flush=True)
    except (RuntimeError, TimeoutError) as e:
        print(f"qmp-hotplug: {e}", flush=True)
    return done


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="spyre1")
    ap.add_argument("--bus", default="rp1")
    ap.add_argument("--cycles", type=int, default=3)
    ap.add_argument("--gap", type=float, default=2.0)
    ap.add_argument("vm_args", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    if a.vm_args[:1] == ["--"]:
        a.vm_args = a.vm_args[1:]

    vm = os.path.join(os.path.dirname(os.path.abspath(__file__)), "vm.sh")
    with tempfile.TemporaryDirectory(prefix="spyre-qmp.") as tmp:
        sock = os.path.join(tmp, "qmp")
        proc = subprocess.Popen([vm, "run", "--qmp", sock] + a.vm_args,
                                stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT)
        ready = threading.Event()
        out = threading.Thread(target=forward, args=(proc, ready))
        out.start()
        done = cycle(a, sock, proc, ready)
        rc = proc.wait()
        out.join()
    print(f"qmp-hotplug: {done} of {a.cycles} cycles", flush=True)
    return rc if rc else (0 if done >= a.cycles else 1)


if __name__ == "__main__":
    sys.exit(main())
