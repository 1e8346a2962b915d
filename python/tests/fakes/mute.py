"""Reads every request and answers none, ignores stdin EOF and SIGTERM,
and only dies when killed: a runtime that hangs before initialize."""

import signal
import sys
import time

if __name__ == "__main__":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    for _line in sys.stdin.buffer:
        pass
    while True:
        time.sleep(1)
