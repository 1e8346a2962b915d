#!/usr/bin/env python3
"""A private PostgreSQL for bench/run.sh's postgres columns: Debian's server
with its default durability (fsync, full_page_writes, synchronous_commit on),
started in a throwaway directory. Writes the database URL to the file named
by its argument, then runs until its stdin closes (run.sh holds it open), and
removes everything when it ends."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "integration"))
from pg_server import PgServer  # noqa: E402

# Back to PostgreSQL's defaults where the test server relaxes them.
DEFAULT_DURABILITY = {"fsync": "on", "full_page_writes": "on", "synchronous_commit": "on",
                      "shared_buffers": "128MB"}


def main() -> int:
    server = PgServer(settings=DEFAULT_DURABILITY)
    try:
        tmp = Path(sys.argv[1] + ".tmp")
        tmp.write_text(server.url("harnessd") + "\n")
        tmp.rename(sys.argv[1])
        sys.stdin.read()  # until run.sh exits
    finally:
        server.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
