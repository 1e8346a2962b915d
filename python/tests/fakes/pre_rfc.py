"""A runtime from before the RFC: it ends a turn with a ``session.finished``
notification and answers the prompt ``{"accepted": true}``. The SDK must
reject that result as malformed rather than report a turn status."""

from _fakelib import FakeRuntime, main, send


class PreRfc(FakeRuntime):
    def prompt_result(self, session_id: str, text: str) -> object:
        send({"jsonrpc": "2.0", "method": "session.finished",
              "params": {"sessionId": session_id, "status": "ok", "reason": {"kind": "completed"}}})
        return {"accepted": True}


if __name__ == "__main__":
    main(PreRfc())
