"""Red-team round 35 (attack35): the broker's URL rules, against real servers on 127.0.0.1.

A path segment holding an escaped ``%`` before a byte that is not UTF-8 (``%25%80``,
a literal percent sign before a Latin-1 byte) made ``_urls._bare``'s second decode
raise ``UnicodeEncodeError``: its first decode keeps such a byte as a surrogate, and
``unquote_to_bytes`` encodes a ``str`` as strict UTF-8. ``parse_url`` promises that no
exception but its own escapes; the fetch ended as the broker's "internal error" ("report
it as a caplet bug") with a traceback in the host's log, for a URL the plugin sent or a
``Location`` any server on a granted origin sent. Each attack test failed on main at
6cb954af; the near misses show the rule it serves still refuses disguised dots.
"""

from __future__ import annotations

import logging
import urllib.parse

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from caplet._broker._model import HttpRequest
from caplet._broker._urls import parse_url, resolve_location
from caplet._errors import InvalidUrlError
from tests._broker.conftest import Harness, RunningServer, grant

PLUGIN = "fetcher"

#: Paths with an escaped '%' before a byte that is not UTF-8, once or twice encoded.
_PERCENT_BEFORE_A_BYTE = ("/v1/%25%80", "/v1/100%25%E9t%E9", "/v1/a%25%25%C3", "/v1/%2525%FF")


@pytest.mark.security
@pytest.mark.parametrize("path", _PERCENT_BEFORE_A_BYTE)
def test_a_percent_before_a_byte_that_is_not_utf8_parses(path: str) -> None:
    parsed = parse_url(f"https://api.example.test{path}", plugin=PLUGIN, max_length=4096)
    assert parsed.path == path


@pytest.mark.security
@pytest.mark.parametrize("path", _PERCENT_BEFORE_A_BYTE)
def test_a_percent_before_a_byte_is_fetched_not_an_internal_error(
    harness: Harness,
    http_server: RunningServer,
    path: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    grants = [grant(f"net.http:http://api.example.test:{http_server.port}")]
    broker = harness.broker()
    origin = f"http://api.example.test:{http_server.port}"
    with caplog.at_level(logging.ERROR, logger="caplet"):
        sent = broker.fetch(PLUGIN, grants, HttpRequest(f"{origin}{path}"))
        # The same path in a server's Location (an open redirect on the granted origin).
        to = urllib.parse.quote(path, safe="")
        led = broker.fetch(PLUGIN, grants, HttpRequest(f"{origin}/redirect/302?to={to}"))
    assert sent.status == 200
    assert led.url == f"{origin}{path}"
    assert [seen.path for seen in http_server.seen][-1] == path
    assert not caplog.records, [record.getMessage() for record in caplog.records]
    assert all(d.outcome != "internal error" for d in harness.decisions)


@pytest.mark.security
@pytest.mark.parametrize(
    "path", ["/v1/%252e%252e/admin", "/v1/..%00/admin", "/v1/%c0%ae%c0%ae/admin"]
)
def test_near_miss_a_disguised_dot_segment_is_still_refused(path: str) -> None:
    with pytest.raises(InvalidUrlError) as info:
        parse_url(f"https://api.example.test{path}", plugin=PLUGIN, max_length=4096)
    assert "disguised" in str(info.value)


#: The pieces of the grammar fuzz that found the row above: authorities, brackets,
#: escapes (``%25`` before bytes that are not UTF-8 among them), numeric and Unicode
#: spellings, separators.
_PIECES = (
    "http:", "https:", "HTTP:", "//", "/", "[", "]", "::1", "::ffff:127.0.0.1", "@", ":", "80",
    "%25", "%", "%80", "%E9", "%C0%AE", "%2e", "lo", "api.example.test", "?", "#", ".", "..",
    "x", "1", "0x7f", "v1", "[::1]", "%5b", "%5d", "\u3002", "\uff0e", ":@", "]:", "[v1.x]",
    "[::1%25eth0]", "127.0.0.1", "\uff11", "xn--", "-",
)  # fmt: skip
_BASE = parse_url("http://api.example.test:8080/v1/x", plugin=PLUGIN, max_length=4096)


@settings(max_examples=600, deadline=None, database=None)
@given(st.lists(st.sampled_from(_PIECES), min_size=1, max_size=8).map("".join))
def test_a_location_of_any_pieces_is_a_url_or_caplets_refusal(location: str) -> None:
    """What a server on a granted origin sends never escapes as another exception,
    and what is accepted parses again to itself."""
    try:
        url = resolve_location(
            _BASE, location, plugin=PLUGIN, method="GET", status=302, max_length=4096
        )
    except InvalidUrlError:
        return
    assert parse_url(str(url), plugin=PLUGIN, max_length=4096) == url
