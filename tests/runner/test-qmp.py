#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Tests of scripts/qmp-hotplug.py's QMP client (TAP), against a fake QEMU
monitor on a unix socket: an event that arrives in the same read as the
reply before it is kept (it used to be lost: make soak-unplug then waited
for a DEVICE_DELETED that QEMU had sent); events before a reply and
between polls are found; an error reply raises; a closed monitor raises
EOFError.  No QEMU needed, about 1 s."""
import importlib.util
import json
import os
import socket
import sys
import tempfile
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location(
    "qmp_hotplug", os.path.join(HERE, "..", "..", "scripts", "qmp-hotplug.py"))
_qh = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_qh)

GREETING = b'{"QMP": {"version": {}, "capabilities": ["oob"]}}\n'


def ev(name, device):
    return json.dumps({"event": name, "data": {"device": device}}).encode() \
        + b"\n"


def serve(path, script, ready):
    """A monitor that answers the Nth command with script[N] (bytes, sent
    in one write; None closes the connection)."""
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(1)
    ready.set()
    conn, _ = srv.accept()
    rfile = conn.makefile("rb")
    conn.sendall(GREETING)
    for answer in script:
        if not rfile.readline() or answer is None:
            break
        conn.sendall(answer)
    conn.close()
    srv.close()


def run(script, body):
    """Start the fake monitor with @script and call body(Qmp)."""
    with tempfile.TemporaryDirectory(prefix="spyre-qmp-test.") as tmp:
        path = os.path.join(tmp, "qmp")
        ready = threading.Event()
        t = threading.Thread(target=serve, args=(path, script, ready),
                             daemon=True)
        t.start()
        ready.wait(5)
        qmp = _qh.Qmp(path, 5)
        try:
            return body(qmp)
        finally:
            qmp.close()
            t.join(5)


OK = b'{"return": {}}\n'
STATUS = b'{"return": {"status": "running"}}\n'


def t_event_after_reply():
    # device_del's reply and the event in one read, then polls
    def body(qmp):
        qmp.command("device_del", id="spyre1")
        return qmp.wait_event("DEVICE_DELETED", "spyre1", 2)
    return run([OK, OK + ev("DEVICE_DELETED", "spyre1"), STATUS, STATUS],
               body)["data"]["device"] == "spyre1"


def t_event_after_poll_reply():
    # the event in the same read as a query-status reply
    def body(qmp):
        qmp.command("device_del", id="spyre1")
        return qmp.wait_event("DEVICE_DELETED", "spyre1", 2)
    return run([OK, OK, STATUS + ev("DEVICE_DELETED", "spyre1"), STATUS,
                STATUS], body) is not None


def t_event_before_reply():
    # an event for another device first, ours before the reply
    def body(qmp):
        qmp.command("device_del", id="spyre1")
        e = qmp.wait_event("DEVICE_DELETED", "spyre1", 2)
        return e and qmp.events and \
            qmp.events[0]["data"]["device"] == "spyre0"
    return run([OK, ev("DEVICE_DELETED", "spyre0") +
                ev("DEVICE_DELETED", "spyre1") + OK, STATUS], body)


def t_timeout():
    def body(qmp):
        try:
            qmp.wait_event("DEVICE_DELETED", "spyre1", 0.3)
        except TimeoutError:
            return True
        return False
    return run([OK] + [STATUS] * 200, body)


def t_error_reply():
    def body(qmp):
        try:
            qmp.command("device_del", id="nope")
        except RuntimeError as e:
            return "not found" in str(e)
        return False
    return run([OK, b'{"error": {"class": "DeviceNotFound", '
                b'"desc": "Device \'nope\' not found"}}\n'], body)


def t_closed():
    def body(qmp):
        try:
            qmp.command("query-status")
        except EOFError:
            return True
        return False
    return run([OK, None], body)


TESTS = [
    ("an event in the same read as the reply before it is kept",
     t_event_after_reply),
    ("an event in the same read as a poll's reply is kept",
     t_event_after_poll_reply),
    ("events before a reply are kept, others left queued",
     t_event_before_reply),
    ("no event: TimeoutError", t_timeout),
    ("an error reply raises RuntimeError", t_error_reply),
    ("a closed monitor raises EOFError", t_closed),
]


def main():
    print("TAP version 13")
    print(f"1..{len(TESTS)}")
    failed = 0
    for n, (name, fn) in enumerate(TESTS, 1):
        try:
            ok = bool(fn())
            why = ""
        except Exception as e:  # a hang shows up as the timeout's error
            ok, why = False, f" ({type(e).__name__}: {e})"
        print(f"{'ok' if ok else 'not ok'} {n} {name}{why}", flush=True)
        failed += not ok
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
