#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Hot-unplug and re-plug one card of a running vm.sh guest through QMP.

    scripts/qmp-hotplug.py SOCKET [--device spyre1] [--bus rp1]
                           [--cycles N] [--start S] [--gap S]

Connects to the QMP socket of a guest started with `vm.sh run --qmp
SOCKET`, waits --start seconds (the guest boots and its test starts),
then cycles until the guest exits (at most 10 x --cycles times):
device_del, wait for DEVICE_DELETED (the guest let go of the card: its
driver was unbound), --gap seconds, device_add on the same root port with
the same id, --gap seconds.  The guest's test ends once it has seen the
cycles it needs, however late it started.  Prints a line per cycle;
exits 1 if fewer than --cycles ran or QMP refused a command.
"""
import argparse
import json
import socket
import sys
import time


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


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("socket")
    ap.add_argument("--device", default="spyre1")
    ap.add_argument("--bus", default="rp1")
    ap.add_argument("--cycles", type=int, default=3)
    ap.add_argument("--start", type=float, default=15.0)
    ap.add_argument("--gap", type=float, default=2.0)
    a = ap.parse_args()

    done = 0
    try:
        qmp = Qmp(a.socket, 60)
        time.sleep(a.start)
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
    print(f"qmp-hotplug: {done} of {a.cycles} cycles", flush=True)
    return 0 if done >= a.cycles else 1


if __name__ == "__main__":
    sys.exit(main())
