#!/usr/bin/env python3
"""Checks that docs/protocol.md's tagged examples are the golden wire files.

A ```json block of the reference preceded by

    <!-- wire: session.cancel.params.json session.cancel.result.json -->

names one golden file (tests/wire) per line of the block, in order; `-`
skips a line. Each named file must equal the part of its line that its name
says it holds (tests/wire/README.md):

    METHOD.params.json      the request's params (absent params read as {})
    METHOD.result*.json     the response's result
    error.*.json            the whole error response
    notification.*.json     the notification's params
    event.*.json            the event: params.event of a session.event
                            notification, or the line itself
    chunk.*.json            the chunk of that event's data

Exit status 1, with one line per mismatch, when any differs.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WIRE = ROOT / "tests" / "wire"
DOC = ROOT / "docs" / "protocol.md"

TAG = re.compile(r"^\s*<!--\s*wire:\s*(.*?)\s*-->\s*$")


def tagged_blocks(text: str):
    """(line number of the tag, [file names], [block lines]) of each tagged block."""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = TAG.match(lines[i])
        if not m:
            i += 1
            continue
        tag_line = i + 1
        j = i + 1
        if j >= len(lines) or lines[j].strip() != "```json":
            yield tag_line, m.group(1).split(), None
            i = j
            continue
        body = []
        j += 1
        while j < len(lines) and lines[j].strip() != "```":
            body.append(lines[j].strip())
            j += 1
        yield tag_line, m.group(1).split(), [line for line in body if line]
        i = j + 1


def event_of(frame):
    if frame.get("method") == "session.event":
        return frame["params"]["event"]
    return frame


def part(name: str, frame):
    """The part of a line's frame that the file `name` holds."""
    if name.startswith("error."):
        return frame
    if name.startswith("notification."):
        return frame["params"]
    if name.startswith("event."):
        return event_of(frame)
    if name.startswith("chunk."):
        return event_of(frame)["data"]["chunk"]
    if ".params." in name or name.endswith(".params.json"):
        return frame.get("params") or {}
    if ".result." in name or name.endswith(".result.json"):
        return frame["result"]
    raise KeyError(f"{name}: not a golden file name (tests/wire/README.md)")


def check(doc_text: str) -> list[str]:
    problems = []
    blocks = 0
    for tag_line, names, body in tagged_blocks(doc_text):
        where = f"docs/protocol.md:{tag_line}"
        if body is None:
            problems.append(f"{where}: a wire tag must come right before a ```json block")
            continue
        blocks += 1
        if len(names) != len(body):
            problems.append(f"{where}: {len(names)} names for {len(body)} lines")
            continue
        for name, line in zip(names, body):
            if name == "-":
                continue
            path = WIRE / name
            if not path.is_file():
                problems.append(f"{where}: no file tests/wire/{name}")
                continue
            try:
                shown = part(name, json.loads(line))
            except (KeyError, TypeError, ValueError) as exc:
                problems.append(f"{where}: {name}: the line does not hold it ({exc})")
                continue
            golden = json.loads(path.read_text())
            if shown != golden:
                problems.append(f"{where}: {name} differs from the example:\n  doc:  {json.dumps(shown)}\n"
                                f"  file: {json.dumps(golden)}")
    if blocks == 0:
        problems.append("docs/protocol.md: no tagged example found")
    return problems


def main() -> int:
    problems = check(DOC.read_text())
    for problem in problems:
        print(problem)
    if not problems:
        print("docs/protocol.md: every tagged example matches tests/wire")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
