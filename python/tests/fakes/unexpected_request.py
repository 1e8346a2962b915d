"""Sends a server->client request frame, reusing the pending request's id,
before every real response. A client must ignore it."""

from _fakelib import FakeRuntime, main, send


class UnexpectedRequest(FakeRuntime):
    def before_response(self, request: dict) -> None:
        rid = request.get("id")
        send({"jsonrpc": "2.0", "id": rid, "method": "client/confirm", "params": {"question": "allow?"}})
        # Even one that looks like a response as well must not resolve anything.
        send({"jsonrpc": "2.0", "id": rid, "method": "client/confirm", "result": {"status": "bogus"}})


if __name__ == "__main__":
    main(UnexpectedRequest())
