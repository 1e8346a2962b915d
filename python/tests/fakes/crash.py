"""Answers initialize, then on the next request writes a lot to stderr and
exits with status 3 without answering."""

import sys

from _fakelib import FakeRuntime, main


class Crash(FakeRuntime):
    def handle(self, request: dict) -> bool:
        if request.get("method") == "initialize":
            return super().handle(request)
        for i in range(400):
            sys.stderr.write(f"filler line {i:04d} " + "x" * 60 + "\n")
        sys.stderr.write("fatal: simulated runtime crash (CRASH-MARKER)\n")
        sys.stderr.flush()
        sys.exit(3)


if __name__ == "__main__":
    main(Crash())
