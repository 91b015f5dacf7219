"""HttpResponse helpers: header lookup, text decoding, JSON."""

from __future__ import annotations

import pytest

from caplet._broker._model import HttpResponse
from caplet._errors import ResponseError


def _response(body: bytes, content_type: str | None = None) -> HttpResponse:
    headers = (("Content-Type", content_type),) if content_type is not None else ()
    return HttpResponse(200, headers, body, "https://a.example/x")


def test_header_lookup_is_case_insensitive_and_first_wins() -> None:
    response = HttpResponse(200, (("X-A", "1"), ("x-a", "2")), b"", "https://a.example/")
    assert response.header("X-A") == "1"
    assert response.header("x-b") is None


@pytest.mark.parametrize(
    ("content_type", "body", "text"),
    [
        (None, "café".encode(), "café"),
        ("text/plain; charset=ISO-8859-1", "café".encode("latin-1"), "café"),
        ('text/plain; Charset="utf-16"', "hi".encode("utf-16"), "hi"),
        ("text/plain; charset=no-such-codec", "café".encode(), "café"),
        ("text/plain; charset=base64", b"abc", "abc"),
        ("text/plain", b"\xff\xfe-ok", "\ufffd\ufffd-ok"),
    ],
)
def test_text(content_type: str | None, body: bytes, text: str) -> None:
    assert _response(body, content_type).text() == text


def test_json() -> None:
    assert _response(b'{"a": [1, null]}').json() == {"a": [1, None]}
    with pytest.raises(ResponseError) as exc:
        _response(b"<html>", "text/html").json()
    message = str(exc.value)
    assert message.startswith(
        "invalid response: the body from https://a.example/x is not valid JSON"
    )
    assert "Content-Type (text/html)" in message
    assert exc.value.category == "invalid response"
