#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Run a vm.sh guest and hot-unplug / re-plug one of its cards through QMP.

    scripts/qmp-hotplug.py [--device spyre1] [--bus rp1] [--cycles N]
                           [--gap S] -- VM.SH-RUN-ARGS...

Starts `vm.sh run --qmp SOCKET VM.SH-RUN-ARGS...` (a socket of its own),
passes the guest's output through, and waits for the guest's test to
print READY (spyre_unplug prints it once it holds both cards and its load
runs): the host must not pull a card while the guest still boots or
enumerates.  Then it runs --cycles cycles, each paced by the guest, so a
slow (debug) kernel sets the pace rather than a timer: device_del, wait
for DEVICE_DELETED (the guest's driver let go of the card) and for the
guest's "unplug N seen", --gap seconds, device_add on the same root port
with the same id, wait for the guest's "re-plug N seen" (it opened the new
node and ran a job on it), --gap seconds.  Each wait gives up after
--step-timeout seconds.  Prints a line per cycle.  Exits with vm.sh's
status, or 1 if fewer than --cycles ran or QMP refused a command.
"""
import argparse
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time

# the line spyre_unplug (selftests/spyre_unplug.c) prints when the host
# may start
READY = "ready for the host's hot-unplug cycles"
# ... and the lines it prints when it has seen each step of a cycle
SEEN = re.compile(rb"(unplug|re-plug) (\d+) seen")


class Guest:
    """What the guest's test has reported, shared by the two threads."""

    def __init__(self):
        self.cond = threading.Condition()
        self.ready = False
        self.seen = {b"unplug": 0, b"re-plug": 0}
        self.gone = False

    def wait(self, pred, timeout):
        """Wait until @pred() holds; False on timeout or guest exit."""
        with self.cond:
            return self.cond.wait_for(lambda: pred() or self.gone, timeout) \
                and pred()

    def wait_seen(self, what, n, timeout):
        """Wait for "@what @n seen" (or later); say so if it never came."""
        if self.wait(lambda: self.seen[what] >= n, timeout):
            return True
        print(f"qmp-hotplug: the guest did not report {what.decode()} {n}",
              flush=True)
        return False


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
        # Replies and events are read through a binary reader and commands
        # sent with sendall(): a text file opened "rw" on the socket
        # (io.TextIOWrapper) throws away what it has read ahead whenever it
        # is written to, and so lost an event (DEVICE_DELETED) that came in
        # the same read as the reply before it.
        self.rfile = self.sock.makefile("rb")
        self.events = []
        self._read()  # the greeting
        self.command("qmp_capabilities")

    def close(self):
        self.rfile.close()
        self.sock.close()

    def _read(self):
        line = self.rfile.readline()
        if not line:
            raise EOFError("QMP closed")
        return json.loads(line)

    def command(self, name, **args):
        self.sock.sendall(json.dumps({"execute": name,
                                      "arguments": args}).encode() + b"\n")
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


def forward(proc, guest):
    """Copy the guest's output to ours and note what its test reports."""
    for raw in proc.stdout:
        sys.stdout.buffer.write(raw)
        sys.stdout.buffer.flush()
        m = SEEN.search(raw)
        with guest.cond:
            if READY.encode() in raw:
                guest.ready = True
            if m:
                guest.seen[m.group(1)] = int(m.group(2))
            guest.cond.notify_all()
    with guest.cond:
        guest.gone = True
        guest.cond.notify_all()


def cycle(a, sock, guest):
    """The QMP side: returns the number of cycles done."""
    done = 0
    try:
        qmp = Qmp(sock, 60)
        if not guest.wait(lambda: guest.ready, a.step_timeout):
            print("qmp-hotplug: the guest's test never said it was ready",
                  flush=True)
            return 0
        while done < a.cycles:
            n = done + 1
            t0 = time.monotonic()
            qmp.command("device_del", id=a.device)
            qmp.wait_event("DEVICE_DELETED", a.device, a.step_timeout)
            t1 = time.monotonic()
            if not guest.wait_seen(b"unplug", n, a.step_timeout):
                break
            time.sleep(a.gap)
            qmp.command("device_add", driver="spyre", id=a.device,
                        bus=a.bus)
            t2 = time.monotonic()
            if not guest.wait_seen(b"re-plug", n, a.step_timeout):
                break
            done = n
            print(f"qmp-hotplug: cycle {done}: {a.device} unplugged in "
                  f"{t1 - t0:.2f} s, back in use "
                  f"{time.monotonic() - t2:.2f} s after device_add",
                  flush=True)
            time.sleep(a.gap)
    except (RuntimeError, TimeoutError) as e:
        # first: TimeoutError is an OSError
        print(f"qmp-hotplug: {e}", flush=True)
    except (EOFError, OSError) as e:
        print(f"qmp-hotplug: guest gone ({e})", flush=True)
    return done


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="spyre1")
    ap.add_argument("--bus", default="rp1")
    ap.add_argument("--cycles", type=int, default=3)
    ap.add_argument("--gap", type=float, default=2.0)
    ap.add_argument("--step-timeout", type=float, default=120.0)
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
        guest = Guest()
        out = threading.Thread(target=forward, args=(proc, guest))
        out.start()
        done = cycle(a, sock, guest)
        rc = proc.wait()
        out.join()
    print(f"qmp-hotplug: {done} of {a.cycles} cycles", flush=True)
    return rc if rc else (0 if done >= a.cycles else 1)


if __name__ == "__main__":
    sys.exit(main())
