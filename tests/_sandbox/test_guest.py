"""The guest runner, in this process: values, output capture, the guest's own traceback.

The runner's behaviour inside a real sandbox is tested through
``PluginHost.exec`` in tests/_host/test_guest.py; these tests pin the
details that do not need one.
"""

from __future__ import annotations

import sys

import pytest

from caplet._sandbox._guest import describe, run_snippet
from caplet._sandbox._guest_wire import GuestReply, GuestRequest


def _run(code: str, *, limit: int = 1000, value_bytes: int = 1000) -> GuestReply:
    return run_snippet(GuestRequest(code, (), {}, limit, value_bytes))


def test_the_final_expression_is_the_value_like_in_the_repl() -> None:
    reply = _run("x = 20\nprint('side effect')\nx * 2 + 2")
    assert (reply.value, reply.value_repr, reply.stdout) == (42, "42", "side effect\n")
    assert reply.error is None


def test_no_final_expression_or_none_means_no_value() -> None:
    for code in ("x = 1", "print('only output')", "None", ""):
        reply = _run(code)
        assert (reply.has_value, reply.value, reply.value_repr) == (False, None, None), code


def test_a_value_that_cannot_cross_keeps_its_repr_only() -> None:
    reply = _run("{1, 2}")
    assert (reply.has_value, reply.value, reply.value_repr) == (True, None, "{1, 2}")


def test_a_value_over_the_cap_keeps_its_repr_only() -> None:
    reply = _run("'x' * 2000", limit=5000, value_bytes=100)
    assert reply.value is None
    assert reply.value_repr == repr("x" * 2000)


def test_tuples_and_subclasses_cross_as_plain_values() -> None:
    reply = _run("class D(dict):\n    pass\n(1, D(a=(2, 3)))")
    assert reply.value == [1, {"a": [2, 3]}]
    assert isinstance(reply.value, list)
    assert type(reply.value[1]) is dict


def test_output_is_captured_and_capped_per_stream() -> None:
    reply = _run("import sys\nprint('a' * 30)\nsys.stderr.write('e' * 5)", limit=10)
    assert (reply.stdout, reply.stderr, reply.truncated) == ("a" * 10, "eeeee", True)
    assert sys.stdout is not None  # the host's streams are back


def test_the_traceback_shows_only_the_guests_frames() -> None:
    reply = _run("import json\n\ndef parse(text):\n    return json.loads(text)\n\nparse('{')")
    assert reply.error_type == "json.decoder.JSONDecodeError"
    assert reply.error is not None
    assert reply.error.startswith("Traceback (most recent call last):\n")
    assert "File \"<guest>\", line 6, in <module>\n    parse('{')" in reply.error
    assert 'File "<guest>", line 4, in parse\n    return json.loads(text)' in reply.error
    assert reply.error.endswith(
        "json.decoder.JSONDecodeError: Expecting property name enclosed in double quotes: "
        "line 1 column 2 (char 1)\n"
    )
    assert "json/" not in reply.error  # the standard library's frames are not the guest's
    assert "caplet" not in reply.error


def test_chained_exceptions_are_shown_like_python_does() -> None:
    reply = _run("try:\n    {}['k']\nexcept KeyError as e:\n    raise ValueError('bad') from e")
    assert reply.error is not None
    assert "KeyError: 'k'\n\nThe above exception was the direct cause" in reply.error
    assert reply.error.endswith("ValueError: bad\n")
    reply = _run("try:\n    1/0\nexcept ZeroDivisionError:\n    undefined_name")
    assert reply.error is not None
    assert "During handling of the above exception, another exception occurred" in reply.error
    assert reply.error.endswith("NameError: name 'undefined_name' is not defined\n")


def test_a_syntax_error_points_into_the_guest_code() -> None:
    reply = _run("x = 1\ny = (")
    assert reply.error_type == "SyntaxError"
    assert reply.error is not None
    assert reply.error.startswith('  File "<guest>", line 2\n    y = (\n')
    assert "SyntaxError: '(' was never closed" in reply.error


def test_system_exit_and_hostile_exceptions_are_the_guests_errors() -> None:
    assert _run("raise SystemExit(3)").error_type == "SystemExit"
    hostile = "class E(Exception):\n    def __str__(self):\n        raise RuntimeError\nraise E()"
    reply = _run(hostile)
    assert reply.error_type == "E"
    assert reply.error is not None
    assert reply.error.endswith("E: <the message could not be formatted>\n")
    reply = _run("class R:\n    def __repr__(self):\n        raise RuntimeError\nR()")
    assert reply.value_repr == "<R object: repr() failed>"


def test_caplets_own_errors_are_named_without_their_module() -> None:
    from caplet._errors import HostCallError

    try:
        raise HostCallError("host.call failed: x")
    except HostCallError as exc:
        name, text = describe(exc)
    assert name == "HostCallError"
    assert text == "HostCallError: host.call failed: x\n"  # no guest frame: no traceback header


def test_the_snippet_does_not_inherit_the_runners_future_imports() -> None:
    # The runner module uses `from __future__ import annotations`; guest code must not.
    reply = _run("def f(x: int) -> None:\n    pass\nf.__annotations__['x']")
    assert reply.value_repr == "<class 'int'>"


@pytest.mark.parametrize("code", ["1 +", "\0", "(" * 300 + ")" * 300])
def test_code_that_cannot_compile_is_an_error_not_a_crash(code: str) -> None:
    reply = _run(code)
    assert reply.error_type in ("SyntaxError", "ValueError", "RecursionError", "MemoryError")
