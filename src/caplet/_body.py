"""An HTTP response body from an untrusted server, read as text or JSON.

One rule for the host (:class:`caplet._broker._model.HttpResponse`) and for
the worker's ``ctx.http`` (:class:`caplet._sandbox._context_parts.Response`), so a
plugin reads exactly what the host would: the ``charset`` of Content-Type
(UTF-8 when absent or unknown), undecodable bytes as U+FFFD rather than an
error (reading data must not fail), and one :class:`ResponseError` for a
body that is not JSON. Base layer: workers import it, so stdlib only.
"""

from __future__ import annotations

import codecs

from caplet._errors import ResponseError

__all__ = ["body_json", "body_text"]


def _charset(content_type: str | None) -> str:
    for parameter in (content_type or "").split(";")[1:]:
        key, _, value = parameter.strip().partition("=")
        if key.strip().lower() == "charset":
            try:
                return codecs.lookup(value.strip().strip('"')).name
            except LookupError:
                break
    return "utf-8"


def body_text(body: bytes, content_type: str | None) -> str:
    """``body`` decoded with the Content-Type's charset (UTF-8 when absent or unknown)."""
    try:
        return body.decode(_charset(content_type), errors="replace")
    except LookupError:  # a charset naming a bytes-to-bytes codec ("base64")
        return body.decode("utf-8", errors="replace")


def body_json(body: bytes, content_type: str | None, *, url: str, status: int) -> object:
    """``body`` parsed as JSON; :class:`ResponseError` naming ``url`` when it is not."""
    import json  # here, not at the top: every worker imports this module

    try:
        return json.loads(body_text(body, content_type))
    except (ValueError, RecursionError) as exc:
        raise ResponseError(
            f"invalid response: the body from {url} is not valid JSON ({exc}); "
            f"check the status ({status}) and Content-Type "
            f"({content_type or 'none'}), or read it with text()",
            url=url,
        ) from exc
