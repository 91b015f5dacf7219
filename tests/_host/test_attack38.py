"""attack38: records of caplet's loggers that passed attack37's filter unescaped.

attack37 escapes a record's text arguments (``str``, exceptions, paths) and its
traceback. Three shapes of record still reached an application's handler raw: an argument
that is some other object whose ``__str__`` yields someone's text (a URL type, a
dataclass holding a plugin's field), a message built before the call (an f-string: no
arguments, so nothing was escaped), and an argument whose ``__str__`` raises, which made
the logging call itself raise inside caplet's error paths. The filter shows each now.
"""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from caplet._logs import caplet_logger

#: An OSC title sequence, a newline and a line that reads like caplet's own.
FORGED = "\x1b]0;owned\x07\nCRITICAL caplet: plugin evil approved by the maintainers"


@dataclass(frozen=True)
class Named:
    """An object whose text is someone else's (as a URL type or a record holding a field)."""

    name: str

    def __str__(self) -> str:
        return self.name


class UnshowableError(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no text")


class NotText:
    def __str__(self) -> str:
        return 42  # type: ignore[return-value]  # noqa: PLE0307


@pytest.fixture
def plain_log() -> Iterator[io.StringIO]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    logger = caplet_logger()
    logger.addHandler(handler)
    before = logger.level
    logger.setLevel(logging.WARNING)
    try:
        yield stream
    finally:
        logger.removeHandler(handler)
        logger.setLevel(before)


def _assert_escaped(text: str) -> None:
    assert "\x1b" not in text
    assert "\x07" not in text
    assert "\nCRITICAL" not in text, "the text started a line of its own"
    assert "plugin evil approved" in text, "the text is still shown, escaped"


@pytest.mark.security
def test_an_object_argument_cannot_act_in_the_hosts_log(plain_log: io.StringIO) -> None:
    """On main the filter passed an object that is not a str, an exception or a path as it
    was, and ``%s`` and ``%r`` wrote its text raw."""
    caplet_logger().warning("plugin %s: %r", Named(FORGED), Named(FORGED))
    _assert_escaped(plain_log.getvalue())


@pytest.mark.security
def test_a_message_built_before_the_call_cannot_act_in_the_hosts_log(
    plain_log: io.StringIO,
) -> None:
    """On main a record without arguments kept its message as it was: one built with an
    f-string (or ``%`` applied by hand) wrote the foreign text raw."""
    caplet_logger().warning(f"skipping plugin {FORGED}")
    caplet_logger().warning(Named(FORGED))
    _assert_escaped(plain_log.getvalue())


@pytest.mark.security
@pytest.mark.parametrize("value", [UnshowableError("x"), NotText()], ids=["raises", "not a str"])
def test_an_argument_without_text_does_not_fail_the_logging_call(
    plain_log: io.StringIO, value: object
) -> None:
    """On main an exception whose ``__str__`` raised made ``logger.warning`` raise (the
    filter called it), and an object whose ``__str__`` returned no str failed in the
    handler (logging's "--- Logging error ---" on stderr, the record lost)."""
    caplet_logger().warning("the store failed: %s", value)
    assert f"the store failed: <{type(value).__name__} object that cannot be shown>" in (
        plain_log.getvalue()
    )


def test_near_miss_numbers_paths_and_text_are_formatted_as_written(
    plain_log: io.StringIO, tmp_path: Path
) -> None:
    caplet_logger().warning(
        "plugin %r: %d bytes, %.1f s, %s, %s, %s (100%% of it)",
        "notes",
        2048,
        1.25,
        tmp_path / "notes.db",
        None,
        b"raw\x00",
    )
    caplet_logger().warning("no arguments: 100% as written")
    assert plain_log.getvalue() == (
        f"WARNING caplet: plugin 'notes': 2048 bytes, 1.2 s, {tmp_path / 'notes.db'}, None, "
        "b'raw\\x00' (100% of it)\nWARNING caplet: no arguments: 100% as written\n"
    )
