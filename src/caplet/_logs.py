"""caplet's own loggers: records that carry no terminal control and start no line of
someone else's text (CWE-117), whatever handler the application reads them with.

A library host logs through ``caplet`` (and ``caplet.store``) to handlers of its own: a
file, journald, a plain ``StreamHandler`` on the operator's terminal. caplet's records
quote text others wrote: a cloned project's ``caplet.lock`` and ``caplet.toml``, a worker's
stderr, an application handler's exception (whose message often quotes what a plugin
sent), another host's notes. Escaping each at its call (``safe_line`` in ``_discovery``,
``_manager``) missed some (attack37), so every logger made here escapes its records:

- each argument that is text (a ``str``, an exception, a path) goes through
  :func:`~caplet._display.safe_line`: control, format and line-break characters become
  their visible escapes, so an argument can neither act on a terminal nor start a line
  of its own. The format string is caplet's constant and stays as written;
- a traceback (``exc_info``) is formatted here, once, with each exception's own text
  (``Type: message``, each line of its notes) on one escaped line and the frames through
  :func:`~caplet._display.safe_text`; a handler's formatter uses it as it is
  (``logging.Formatter.format`` keeps a record's ``exc_text``).

The ``caplet.plugins`` loggers are not made here: ``ctx.log`` escapes its lines itself
(:mod:`caplet._host._plugin_log`), and a filter on a parent logger never sees a child's
records.
"""

from __future__ import annotations

import logging
import os
import traceback
from collections.abc import Callable, Iterator, Mapping
from typing import Final

from caplet._display import safe_line, safe_text

__all__ = ["EscapedRecords", "caplet_logger", "escaped_traceback"]

#: The lines the standard library puts between two exceptions of a chain (traceback.py).
_CAUSE: Final = "\nThe above exception was the direct cause of the following exception:\n\n"
_CONTEXT: Final = "\nDuring handling of the above exception, another exception occurred:\n\n"
_HEADER: Final = "Traceback (most recent call last):\n"
#: How deep a chain of causes is followed (a longer one ends with a note).
_MAX_CHAIN: Final = 32


class _Shown:
    """An argument that is neither text nor a number, as ``%s`` and ``%r`` show it: its
    ``str`` and ``repr`` escaped to one line, worked out once when the record is made.

    An object's ``__str__`` is anyone's code (a URL type, an enum, a dataclass holding a
    plugin's text), so it may yield terminal sequences and line breaks, raise, or yield
    something that is not a ``str``; none of it may reach a handler (attack38).
    """

    __slots__ = ("_repr", "_str")

    def __init__(self, value: object) -> None:
        self._str = _text_of(value, str)
        self._repr = _text_of(value, repr)

    def __str__(self) -> str:
        return self._str

    def __repr__(self) -> str:
        return self._repr


def _text_of(value: object, how: Callable[[object], object]) -> str:
    try:
        text = how(value)
    except Exception:  # an object's own __str__ may raise anything
        text = None
    if not isinstance(text, str):
        return f"<{type(value).__name__} object that cannot be shown>"
    return safe_line(text)


def _escaped(value: object) -> object:
    """``value`` as a record may carry it: text escaped to one line, numbers as they are
    (``%d`` and ``%.1f`` still format them), anything else shown through :class:`_Shown`."""
    if isinstance(value, str):
        return safe_line(value)
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, BaseException | os.PathLike):
        return _text_of(value, str)
    return _Shown(value)


def _pieces(error: traceback.TracebackException, depth: int) -> Iterator[str]:
    """The text of one exception of a chain and of the ones before it, escaped."""
    if depth >= _MAX_CHAIN:
        yield f"(earlier exceptions of the chain left out after {_MAX_CHAIN})\n"
    elif error.__cause__ is not None:
        yield from _pieces(error.__cause__, depth + 1)
        yield _CAUSE
    elif error.__context__ is not None and not error.__suppress_context__:
        yield from _pieces(error.__context__, depth + 1)
        yield _CONTEXT
    if error.stack:
        yield _HEADER
        yield safe_text("".join(error.stack.format()))
    # The exception's own text, piece by piece as the standard library writes it (its
    # message, each note's line, a SyntaxError's source and caret): each piece one
    # escaped line, so a message holding a newline cannot start a line of its own.
    for piece in error.format_exception_only():
        yield safe_line(piece.removesuffix("\n")) + "\n"


def escaped_traceback(error: BaseException) -> str:
    """The traceback of ``error`` as ``logging.Formatter.formatException`` writes it
    (without the final newline), every exception's own text on one escaped line."""
    summary = traceback.TracebackException.from_exception(error)
    return "".join(_pieces(summary, 0)).rstrip("\n")


class EscapedRecords(logging.Filter):
    """Escapes a record's arguments and traceback where it is made (module docstring)."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, Mapping):
            record.args = {key: _escaped(value) for key, value in args.items()}
        elif args:
            record.args = tuple(_escaped(value) for value in args)
        elif isinstance(record.msg, str):
            # No arguments: logging uses the message as it is, so one built before the
            # call (an f-string, ``%`` applied by hand) is escaped as an argument would be;
            # caplet's constant messages hold no character this changes.
            record.msg = safe_line(record.msg)
        else:
            record.msg = _escaped(record.msg)  # logged as an object: its text is someone's
        if record.exc_info is not None and record.exc_text is None:
            error = record.exc_info[1]
            if error is not None:
                record.exc_text = escaped_traceback(error)
        return True


_FILTER: Final = EscapedRecords()


def caplet_logger(name: str = "caplet") -> logging.Logger:
    """The logger ``name`` (``caplet`` or below it), escaping every record made on it."""
    logger = logging.getLogger(name)
    if not any(isinstance(f, EscapedRecords) for f in logger.filters):
        logger.addFilter(_FILTER)
    return logger
