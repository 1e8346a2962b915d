"""Answers session/prompt with the JSON value given as the prompt text
(e.g. '{"status":"maybe","reason":{"kind":"completed"}}')."""

import json

from _fakelib import FakeRuntime, main


class MalformedResult(FakeRuntime):
    def prompt_result(self, session_id: str, text: str) -> object:
        return json.loads(text)


if __name__ == "__main__":
    main(MalformedResult())
