#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Sort ThreadSanitizer's reports of the card model's qtest.

    scripts/tsan-report.py LOG...

Reads the tsan.log.<pid> files that `scripts/build-qemu.sh --tsan` leaves
and puts each report in one of three kinds:
  card state    a race on memory of the process's own (heap, globals) with
                a frame of the card model (hw/misc/spyre/) in it: a bug;
  guest memory  the card model's access to guest or device memory (RAM
                QEMU maps, no heap or global location) racing with another
                thread's: what DMA is, ordered by the completion protocol,
                not by locks TSan can see;
  QEMU          everything else (QEMU's core synchronizes its main loop,
                bottom halves and reference counts through glib and
                atomics TSan does not follow when glib is not instrumented).
Prints each distinct card-state report (its accesses' top frames) and the
count of each kind; exits 1 if there is a card-state report.
"""
import re
import sys

FRAME = re.compile(r"#\d+ (\S+) \S*?/src/(\S+?)(?::\d+)* ")


ACCESS = re.compile(r"\n  (?:Previous )?(?:atomic )?(?:[Ww]rite|[Rr]ead)[^\n]*"
                    r"((?:\n    #\d+ [^\n]*)+)")


def first_own_frame(stack):
    """The file of an access's first frame in QEMU's source (not libc's)."""
    for m in FRAME.finditer(stack + " "):
        if not m.group(2).startswith("/usr/include/"):
            return m.group(2)
    return ""


def classify(rep):
    if "hw/misc/spyre/" not in rep:
        return "QEMU"
    if "Location is heap block" not in rep and \
            "Location is global" not in rep:
        return "guest memory"
    # Where each racing access was made: the card model's own code, or
    # QEMU's (which the card model called: a reference count, a RAM block
    # lookup, a bottom half).
    files = [first_own_frame(m.group(1)) for m in ACCESS.finditer(rep)]
    if any(f.startswith("hw/misc/spyre/") for f in files):
        return "card state"
    return "QEMU"


def main():
    kinds = {"card state": 0, "guest memory": 0, "QEMU": 0}
    seen = {}
    for path in sys.argv[1:]:
        with open(path, errors="replace") as f:
            text = f.read()
        for rep in text.split("WARNING: ThreadSanitizer")[1:]:
            k = classify(rep)
            kinds[k] += 1
            if k != "card state":
                continue
            key = "\n".join(
                "%s (%s)" % (m.group(1), m.group(2))
                for m in FRAME.finditer(rep.split("Mutex M")[0]))
            seen.setdefault(key, (path, rep.split("\n")[0]))
    for key, (path, title) in seen.items():
        print("tsan-report: card state race%s, e.g. in %s:" % (title, path))
        for line in key.split("\n")[:12]:
            print("    " + line)
    print("tsan-report: %d card state, %d guest memory, %d QEMU report(s)" %
          (kinds["card state"], kinds["guest memory"], kinds["QEMU"]))
    return 1 if kinds["card state"] else 0


if __name__ == "__main__":
    sys.exit(main())
