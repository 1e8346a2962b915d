"""Answers initialize and nothing else, ignores stdin EOF and SIGTERM, and
only dies when killed."""

import signal
import sys
import time

from _fakelib import FakeRuntime


class Stubborn(FakeRuntime):
    def handle(self, request: dict) -> bool:
        if request.get("method") == "initialize":
            return super().handle(request)
        return True


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    Stubborn().serve()
    sys.stderr.write("stubborn: stdin closed, staying alive\n")
    sys.stderr.flush()
    while True:
        time.sleep(1)
