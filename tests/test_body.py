"""Reading an untrusted HTTP body: the rule shared by the host and the worker."""

from __future__ import annotations

import pytest

from caplet._body import body_json, body_text
from caplet._errors import ResponseError


@pytest.mark.parametrize(
    ("content_type", "expected"),
    [
        (None, "café"),
        ("text/plain", "café"),
        ('text/plain; charset="latin-1"', "cafÃ©"),
        ("text/plain; charset=no-such-codec", "café"),
        ("text/plain; charset=base64", "café"),  # bytes-to-bytes: UTF-8 instead
    ],
)
def test_text_uses_the_charset_and_falls_back_to_utf8(
    content_type: str | None, expected: str
) -> None:
    assert body_text("café".encode(), content_type) == expected


def test_undecodable_bytes_become_replacement_characters() -> None:
    assert body_text(b"ok \xff", "text/plain; charset=utf-8") == "ok \ufffd"


def test_json_parses_and_refuses_what_is_not_json() -> None:
    assert body_json(b'{"a": [1]}', "application/json", url="https://x.example/", status=200) == {
        "a": [1]
    }
    with pytest.raises(ResponseError) as info:
        body_json(b"<html>", "text/html", url="https://x.example/", status=502)
    message = str(info.value)
    assert message.startswith(
        "invalid response: the body from https://x.example/ is not valid JSON"
    )
    assert "check the status (502) and Content-Type (text/html), or read it with text()" in message
    assert info.value.url == "https://x.example/"
