"""How the zygote, its spares and its children say what failed.

A set-up step that fails raises a :class:`SandboxError` naming the step and
the errno (``_step``); a child writes the traceback and that summary to the
worker's log, which the host quotes (``_report_failure``); the zygote's own
notes go to its stderr (``_say``). Apart because every part of the zygote
reports through them, and they import nothing of it.
"""

from __future__ import annotations

import errno
import os
import traceback
from collections.abc import Iterator
from contextlib import contextmanager

from caplet._errors import SandboxError

__all__: list[str] = []


@contextmanager
def _step(what: str) -> Iterator[None]:
    """Turn an OSError of one setup step into a SandboxError naming the step and errno."""
    try:
        yield
    except OSError as exc:
        code = exc.errno or 0
        name = errno.errorcode.get(code, str(code))
        raise SandboxError(f"sandbox setup: {what} failed: {os.strerror(code)} ({name})") from exc


def _explain(exc: BaseException) -> str:
    """One line for the worker's log: the exception, with the errno's name when it has one."""
    text = f"{type(exc).__name__}: {exc}"
    cause = exc if isinstance(exc, OSError) else exc.__cause__
    if isinstance(cause, OSError) and cause.errno:
        name = errno.errorcode.get(cause.errno, "")
        if name and name not in text:
            text += f" ({name})"
    return text


def _report_failure(exc: BaseException, fd: int = 2) -> None:
    """Write why the sandbox setup failed to ``fd`` (the worker's log), never raising."""
    try:
        # The traceback first and the summary last: the host quotes the log's tail.
        text = "".join(traceback.format_exception(exc))
        text += f"caplet sandbox setup failed: {_explain(exc)}\n"
        os.write(fd, text.encode("utf-8", "replace"))
    except BaseException:  # noqa: S110 - nothing is left to report to
        pass


def _say(text: str) -> None:
    try:
        os.write(2, f"caplet zygote: {text}\n".encode("utf-8", "replace"))
    except OSError:
        pass
