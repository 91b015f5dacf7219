"""The one message shape of broker errors."""

from __future__ import annotations

from caplet._broker._messages import broker_error
from caplet._errors import ConnectionFailedError, InvalidUrlError


def test_message_shape_and_attributes() -> None:
    error = broker_error(
        ConnectionFailedError,
        plugin="p",
        method="GET",
        url="https://a.example/",
        reason="the server refused the connection",
        fix="check the service",
        category="connection refused",
    )
    assert str(error) == (
        "connection refused: plugin 'p', GET https://a.example/: the server refused the "
        "connection; check the service"
    )
    assert (error.plugin, error.url, error.category) == (
        "p",
        "https://a.example/",
        "connection refused",
    )


def test_without_target_or_fix() -> None:
    error = broker_error(InvalidUrlError, plugin="p", method="", url="", reason="bad")
    assert str(error) == "blocked by policy: plugin 'p': bad"
    assert error.category == "blocked by policy"
    assert ConnectionFailedError("x").category == "connection failed"
