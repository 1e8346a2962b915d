"""A well-behaved fake runtime (see _fakelib)."""

from _fakelib import FakeRuntime, main

if __name__ == "__main__":
    main(FakeRuntime())
