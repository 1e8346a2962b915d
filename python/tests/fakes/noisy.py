"""Surrounds every real response with what a client must skip: warnings and
other non-JSON lines on stdout, non-object JSON, invalid UTF-8, responses
with unknown or malformed ids, a frame with neither id nor method, and
notifications with odd params."""

from _fakelib import FakeRuntime, main, send, send_raw


class Noisy(FakeRuntime):
    def before_response(self, request: dict) -> None:
        rid = request["id"]
        send_raw(b"warning: this runtime prints to stdout\n")
        send_raw(b"{\"jsonrpc\":\"2.0\",\"id\":\n")
        send_raw(b"\n")
        send_raw(b"   \r\n")
        send_raw(b"42\n")
        send_raw(b"[1,2,3]\n")
        send_raw(b"\"a string\"\n")
        send_raw(b"null\n")
        send_raw(b"{\"bad\":\"\xff\xfe\"}\n")
        send({"jsonrpc": "2.0", "id": f"{rid}-other", "result": {"status": "error", "reason": {"kind": "error"}}})
        send({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}})
        send({"jsonrpc": "2.0", "id": True, "result": {}})
        send({"jsonrpc": "2.0", "id": [rid], "result": {}})
        send({"jsonrpc": "2.0", "result": {"orphan": True}})
        send({"jsonrpc": "2.0", "method": "noise/list-params", "params": [1, 2]})
        send({"jsonrpc": "2.0", "method": 7, "params": {}})
        send({"jsonrpc": "2.0", "method": "noise/ping", "params": {"n": 1}})


if __name__ == "__main__":
    main(Noisy())
