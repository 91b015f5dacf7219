"""A failure of caplet itself at the command line: one line, never a traceback (issue 13).

Every error caplet means to raise is a :class:`~caplet._errors.CapletError`,
which the commands show as its message with the documented exit code. An
exception of any other class that reaches ``main()`` is a bug of caplet's
(the library translates foreign errors at its boundaries), so the user gets
one line saying so, how to see the traceback and how to report it, and the
exit code :data:`EXIT_INTERNAL`; ``CAPLET_DEBUG=1`` prints the traceback
first. A traceback is for whoever fixes caplet, and it may quote what a
plugin controls, so it is never printed unasked.

70 is ``EX_SOFTWARE`` of sysexits.h, "an internal software error has been
detected": no exit code of caplet's own (0-3) means it, and scripts can
tell a bug from a refusal.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from typing import Final, TextIO

from caplet._display import safe_line

__all__ = [
    "DEBUG_ENV",
    "EXIT_INTERNAL",
    "debug_enabled",
    "internal_error_line",
    "report_internal_error",
]

#: The exit code of a failure of caplet itself (sysexits.h EX_SOFTWARE).
EXIT_INTERNAL: Final = 70
#: Set to 1 to see tracebacks (of an internal error, and in logged failures of the host).
DEBUG_ENV: Final = "CAPLET_DEBUG"
#: How much of the exception's own text the one line quotes.
_SUMMARY_CHARS: Final = 160


def debug_enabled() -> bool:
    """True when ``CAPLET_DEBUG`` is set to anything but empty or ``0``."""
    return os.environ.get(DEBUG_ENV, "").strip() not in ("", "0")


def internal_error_line(exc: BaseException) -> str:
    """The one line for ``exc``: what failed, that it is a bug, and what to do."""
    summary = safe_line(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
    if len(summary) > _SUMMARY_CHARS:
        summary = summary[: _SUMMARY_CHARS - 3] + "..."
    return (
        f"caplet: internal error ({summary}); this is a bug in caplet, not in your input: "
        f"run the command again with {DEBUG_ENV}=1 to see the traceback, and report it to "
        "caplet's maintainers with that traceback and the output of `caplet --version`"
    )


def report_internal_error(
    exc: BaseException,
    *,
    as_json: bool,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
) -> int:
    """Tell the user about ``exc`` (with ``as_json``, also as the command's JSON document);
    return :data:`EXIT_INTERNAL`. Never raises: the streams may be gone."""
    out = stdout if stdout is not None else sys.stdout
    err = stderr if stderr is not None else sys.stderr
    line = internal_error_line(exc)
    try:
        if debug_enabled():
            traceback.print_exception(exc, file=err)
        if as_json:
            document = {"ok": False, "error": {"type": "InternalError", "message": line}}
            out.write(json.dumps(document, indent=2) + "\n")
            out.flush()
        err.write(line + "\n")
        err.flush()
    except (OSError, ValueError):  # a closed or broken stream: the exit code still says it
        pass
    return EXIT_INTERNAL
