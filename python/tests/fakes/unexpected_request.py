"""Writes request frames (``id`` and ``method``) that reuse the id of the
request being answered, before every real response. The directional
protocol has no server-to-client requests: a client must ignore them and
must never take one for the response. For the prompt ``@trap`` the real
response never comes, so only a request frame could end the wait."""

from _fakelib import FakeRuntime, main, prompt_text, send


class UnexpectedRequest(FakeRuntime):
    def collide(self, request: dict) -> None:
        rid = request.get("id")
        send({"jsonrpc": "2.0", "id": rid, "method": "client/confirm", "params": {"question": "allow?"}})
        # One that looks like a response as well must not resolve anything either.
        send({"jsonrpc": "2.0", "id": rid, "method": "client/confirm",
              "result": {"status": "ok", "reason": {"kind": "completed"}}})
        send({"jsonrpc": "2.0", "id": rid, "method": "client/confirm", "error": {"code": 1, "message": "no"}})

    def before_response(self, request: dict) -> None:
        self.collide(request)

    def prompt(self, request: dict) -> bool:
        if prompt_text(request.get("params") or {}) == "@trap":
            self.collide(request)
            return True
        return super().prompt(request)


if __name__ == "__main__":
    main(UnexpectedRequest())
