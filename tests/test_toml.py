"""TOML someone else wrote, parsed with bounded cost (red-team round 3).

The attacks: a dotted key of many parts (``a.a.a...a = 1``) makes
``tomllib`` take quadratic time and memory; deeply nested arrays make it
raise ``RecursionError``. Each is run in a child process whose address
space is capped at 1 GiB, so that on a parser without the bound the attack
ends as a MemoryError there instead of taking the machine's memory.
"""

from __future__ import annotations

import resource
import subprocess
import sys
import tomllib

import pytest

from caplet._toml import MAX_DOTS, MAX_DOTS_PER_LINE, TomlLimitError, parse_toml

#: 200,000 key parts in 400 KB: the parser's prefix tuples alone would be ~160 GB.
DEEP_KEY = ".".join(["a"] * 200_000) + " = 1\n"
DEEP_ARRAY = "x = " + "[" * 5_000 + "]" * 5_000 + "\n"


def _capped() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))


def run_capped(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -c code args`` with 1 GiB of address space."""
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        preexec_fn=_capped,
        check=False,
        timeout=300,
    )


def test_a_deep_dotted_key_is_refused_before_the_parser_runs() -> None:
    result = run_capped(
        "import sys\n"
        "from caplet._toml import parse_toml, TomlLimitError\n"
        "try:\n"
        "    parse_toml(open(sys.argv[1]).read())\n"
        "except TomlLimitError as exc:\n"
        "    print('refused:', exc)\n",
        _write(DEEP_KEY),
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.startswith(
        f"refused: line 1 has more than {MAX_DOTS_PER_LINE} dots outside strings"
    )


def _write(text: str) -> str:
    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as handle:
        handle.write(text)
    return handle.name


def test_deep_nesting_is_a_limit_error_not_a_recursion_error() -> None:
    with pytest.raises(TomlLimitError, match="nested too deeply"):
        parse_toml(DEEP_ARRAY)


def test_too_many_dots_in_the_whole_document_are_refused() -> None:
    text = "".join(f"k{i}.a.b = 1\n" for i in range(MAX_DOTS // 2 + 1))
    with pytest.raises(TomlLimitError, match=f"more than {MAX_DOTS} dots"):
        parse_toml(text)


@pytest.mark.parametrize(
    "text",
    [
        'a.b.c = 1\nd = "x.y.z' + "." * 500 + '"\n',
        "# " + "." * 500 + "\nx = 1\n",
        'x = """\n' + "a." * 500 + '\n"""\ny.z = 2\n',
        "x = '''\n" + "a." * 500 + "''''\ny.z = 2\n",
        "x = '" + "." * 500 + "'\n",
        'x = "a\\"' + "." * 500 + '"\n',
        "[" + ".".join(["t"] * MAX_DOTS_PER_LINE) + "]\nv = 1.5\n",
    ],
)
def test_dots_in_strings_and_comments_do_not_count_and_the_result_is_tomllibs(
    text: str,
) -> None:
    assert parse_toml(text) == tomllib.loads(text)


def test_invalid_toml_is_still_tomllibs_error() -> None:
    with pytest.raises(tomllib.TOMLDecodeError):
        parse_toml("a = = 1")


@pytest.mark.parametrize(
    "text",
    [
        "x = " + "9" * 5_000 + "\n",  # tomllib's int() raised the digit limit's ValueError
        "x = 0x" + "f" * 5_000 + "\n",  # parsed (no limit on base 16): raised where shown
        "[t]\ny = [1, {z = 0o" + "7" * 3_000 + "}]\n",
        f"x = {2**63}\n",
        f"x = {-(2**63) - 1}\n",
    ],
)
def test_an_integer_past_64_bits_is_a_limit_error_not_a_value_error(text: str) -> None:
    # attack29: a manifest, policy or lock file holding one stopped `caplet list` (and
    # every other command reading it) with an internal error.
    with pytest.raises(TomlLimitError, match="outside TOML's 64-bit range"):
        parse_toml(text)


def test_the_64_bit_extremes_and_long_floats_still_parse() -> None:
    text = f"a = {2**63 - 1}\nb = {-(2**63)}\nc = 0x7fffffffffffffff\nd = 1{'0' * 400}.5\n"
    assert parse_toml(text) == tomllib.loads(text)
