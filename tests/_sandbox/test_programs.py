"""Resolving proc.exec programs: the file, its ELF interpreter, or its #! interpreter."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from caplet._errors import SandboxError
from caplet._sandbox._programs import program_grants


def test_dynamic_program_brings_its_elf_interpreter() -> None:
    grants = program_grants("true", search_path="/usr/bin:/bin")
    paths = [g.path for g in grants]
    assert os.path.realpath(paths[0]) == os.path.realpath("/usr/bin/true")
    assert all(g.executable and not g.writable for g in grants)
    loaders = [p for p in paths[1:] if "ld-" in Path(p).name]
    assert loaders, paths
    assert all(Path(p).exists() for p in loaders)


def test_script_brings_its_interpreter(tmp_path: Path) -> None:
    script = tmp_path / "tool"
    script.write_text("#!/bin/sh -e\necho hi\n")
    script.chmod(0o755)
    paths = [g.path for g in program_grants(str(script))]
    assert paths[0] == str(script)
    assert "/bin/sh" in paths


def test_missing_program_is_refused_with_the_search_path() -> None:
    with pytest.raises(SandboxError, match=r"'no-such-tool' was not found .*PATH=/nowhere"):
        program_grants("no-such-tool", search_path="/nowhere")
