#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Validate spyre-smi's JSON reports against docs/spyre-smi.schema.json.

usage: tests/smi_schema.py LOG...

The guest's smi_* selftests print every report spyre-smi gave them as a
"# smi-json: {...}" line; this reads those lines from the guest logs and
checks each against the schema (python3-jsonschema, draft 2020-12).
Prints TAP: one case per report, and one that every command (overview,
list, info, ps) was seen at least once.  Exits 1 if a case failed.
"""
import json
import pathlib
import sys

import jsonschema

PREFIX = "# smi-json: "
COMMANDS = ("overview", "list", "info", "ps")


def main(argv):
    if len(argv) < 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    root = pathlib.Path(__file__).resolve().parent.parent
    schema = json.loads((root / "docs" / "spyre-smi.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)

    reports = []
    for log in argv[1:]:
        for line in pathlib.Path(log).read_text(errors="replace").splitlines():
            if line.startswith(PREFIX):
                reports.append(line[len(PREFIX):])

    print("TAP version 13")
    print(f"1..{len(reports) + 1}")
    failed = 0
    seen = set()
    for n, text in enumerate(reports, 1):
        try:
            doc = json.loads(text)
            errors = sorted(validator.iter_errors(doc), key=str)
        except json.JSONDecodeError as e:
            doc, errors = {}, [e]
        what = doc.get("command", "?") if isinstance(doc, dict) else "?"
        if errors:
            failed += 1
            print(f"not ok {n} smi_schema_{what}_report_{n}")
            for e in errors[:5]:
                print(f"# {getattr(e, 'json_path', '')}: {e}")
        else:
            seen.add(what)
            print(f"ok {n} smi_schema_{what}_report_{n}")
    missing = [c for c in COMMANDS if c not in seen]
    n = len(reports) + 1
    if missing:
        failed += 1
        print(f"not ok {n} smi_schema_every_command_seen # missing: "
              f"{' '.join(missing)}")
    else:
        print(f"ok {n} smi_schema_every_command_seen")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
