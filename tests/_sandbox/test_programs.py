"""Resolving proc.exec programs: the file, its ELF interpreter, or its #! interpreter."""

from __future__ import annotations

import os
import shutil
import struct
from collections.abc import Callable
from pathlib import Path

import pytest

from caplet._errors import SandboxError
from caplet._sandbox._programs import link_hops, program_chain, program_grants


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
    # ... and the shell's own ELF interpreter, which the kernel opens for execution too.
    assert set(program_grants("/bin/sh")) <= set(program_grants(str(script)))
    assert any("ld-" in Path(p).name for p in paths), paths


def test_missing_program_is_refused_with_the_search_path() -> None:
    with pytest.raises(SandboxError, match=r"'no-such-tool' was not found .*PATH=/nowhere"):
        program_grants("no-such-tool", search_path="/nowhere")


def test_every_link_on_the_way_to_a_program_is_a_hop(tmp_path: Path) -> None:
    # bin/tool -> ../shared/current -> /usr/bin/true, and a linked directory on the way:
    # the jail follows each again at every worker start, so each must be checked.
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "current").symlink_to("/usr/bin/true")
    (tmp_path / "real-bin").mkdir()
    (tmp_path / "real-bin" / "tool").symlink_to("../shared/current")
    (tmp_path / "bin").symlink_to("real-bin")
    root = tmp_path.resolve()
    hops = link_hops(f"{root}/bin/tool")
    # Then whatever links /usr/bin/true itself passes through on this host.
    assert hops == (
        f"{root}/bin",
        f"{root}/real-bin/tool",
        f"{root}/shared/current",
        *link_hops("/usr/bin/true"),
    )
    assert all(Path(hop).is_symlink() for hop in hops)
    assert link_hops(f"{root}/missing/tool") == ()


def test_a_loop_of_links_is_refused(tmp_path: Path) -> None:
    (tmp_path / "a").symlink_to("b")
    (tmp_path / "b").symlink_to("a")
    with pytest.raises(SandboxError, match="more than 40 links"):
        link_hops(f"{tmp_path}/a")


@pytest.mark.parametrize("kind", ["device", "directory"])
def test_an_interpreter_that_is_no_regular_file_is_refused_unopened(
    tmp_path: Path, kind: str
) -> None:
    """Red team round 17: the interpreter a ``#!`` line names was opened for reading,
    whatever it was: a device was opened (and granted as an executable), a FIFO
    waited for a writer for ever (tests/_host/test_grant_check.py, with a guard)."""
    target = Path("/dev/null") if kind == "device" else tmp_path
    script = tmp_path / "tool"
    script.write_text(f"#!{target}\necho hi\n")
    script.chmod(0o755)
    with pytest.raises(SandboxError) as exc:
        program_grants(str(script))
    assert str(exc.value).startswith(f"proc.exec program {str(target)!r} is not a regular file")


def test_a_name_is_searched_on_the_absolute_entries_of_the_path_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Red team round 17 (tests/_host/test_grant_check.py runs it on a host): an empty
    or relative entry of PATH is the current directory, where ``which`` found it."""
    tool = tmp_path / "tool-r17"
    tool.write_text("#!/bin/sh\necho hi\n")
    tool.chmod(0o755)
    monkeypatch.chdir(tmp_path)
    for path in ("", ".", "/nowhere:", f"x:{tmp_path.name}"):
        with pytest.raises(SandboxError) as exc:
            program_grants("tool-r17", search_path=path)
        assert "was not found on this host" in str(exc.value)
    assert "relative entries of PATH are not searched" in str(exc.value)
    # The near miss: the same directory named absolutely is searched.
    assert program_grants("tool-r17", search_path=f".:{tmp_path}")[0].path == str(tool)


def test_an_interpreter_must_be_a_program_the_kernel_can_run(tmp_path: Path) -> None:
    """Red team round 17 (tests/_host/test_grant_check.py reads the key in a jail on
    main): a ``#!`` line naming a data file granted that file as an interpreter."""
    key = tmp_path / "id_ed25519"
    key.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n")
    key.chmod(0o600)
    data = tmp_path / "data.bin"  # an execute bit alone is no program either
    data.write_text("not a program\n")
    data.chmod(0o755)
    for target in (key, data):
        script = tmp_path / f"tool-{target.name}"
        script.write_text(f"#!{target}\n")
        script.chmod(0o755)
        with pytest.raises(SandboxError) as exc:
            program_grants(str(script))
        assert str(exc.value).startswith(f"proc.exec program {str(target)!r} is not executable")
    # The near miss: a script run by another script, run by /bin/sh, is a chain of programs.
    inner = tmp_path / "inner"
    inner.write_text("#!/bin/sh\necho hi\n")
    inner.chmod(0o755)
    outer = tmp_path / "outer"
    outer.write_text(f"#!{inner}\n")
    outer.chmod(0o755)
    paths = [g.path for g in program_grants(str(outer))]
    assert paths[:3] == [str(outer), str(inner), "/bin/sh"]


def _patched_true(tmp_path: Path, patch: Callable[[bytearray], None]) -> Path:
    """A copy of /usr/bin/true with its ELF header changed by ``patch``."""
    image = bytearray(Path("/usr/bin/true").read_bytes())
    patch(image)
    copy = tmp_path / "true-patched"
    copy.write_bytes(bytes(image))
    copy.chmod(0o755)
    return copy


def _interp_entry(image: bytearray) -> int:
    """The file offset of the PT_INTERP program header of an ELF64 little-endian image."""
    phoff: int = struct.unpack_from("<Q", image, 32)[0]
    phentsize: int = struct.unpack_from("<H", image, 54)[0]
    phnum: int = struct.unpack_from("<H", image, 56)[0]
    for index in range(phnum):
        entry = phoff + index * phentsize
        if struct.unpack_from("<I", image, entry)[0] == 3:
            return entry
    raise AssertionError("no PT_INTERP")


def test_an_interpreter_name_ends_at_a_nul_as_the_kernel_reads_it(tmp_path: Path) -> None:
    """Red team round 17: a NUL inside the ``#!`` line or the PT_INTERP string (the
    kernel reads both up to it) reached os.open, whose ValueError ("embedded null
    byte") came out of ``host.enable`` as a traceback."""
    script = tmp_path / "tool"
    script.write_bytes(b"#!/bin/sh\x00 anything\necho hi\n")
    script.chmod(0o755)
    assert "/bin/sh" in [g.path for g in program_grants(str(script))]

    def longer_interp(image: bytearray) -> None:
        # p_filesz (offset 32 of the entry) four bytes longer: the string, its NUL,
        # and three bytes of whatever follows it in the file.
        entry = _interp_entry(image)
        struct.pack_into(
            "<Q", image, entry + 32, struct.unpack_from("<Q", image, entry + 32)[0] + 4
        )

    patched = _patched_true(tmp_path, longer_interp)
    loaders = {g.path for g in program_grants("/usr/bin/true")} - {"/usr/bin/true"}
    assert {g.path for g in program_grants(str(patched))} == {str(patched)} | loaders


def test_a_malformed_elf_header_is_a_refusal_not_a_traceback(tmp_path: Path) -> None:
    """Red team round 17: a program header offset past what a file offset holds made
    ``seek`` raise ValueError out of ``host.enable``; the kernel runs no such file."""
    patched = _patched_true(tmp_path, lambda image: struct.pack_into("<Q", image, 32, 2**64 - 1))
    with pytest.raises(SandboxError) as exc:
        program_grants(str(patched))
    assert str(exc.value) == (
        f"cannot read proc.exec program {str(patched)!r}: its ELF header is malformed "
        "(ValueError); the kernel cannot run it either"
    )


@pytest.mark.parametrize(
    ("line", "name"),
    [("#!/usr/bin/env python3", "python3"), ("#!/usr/bin/env -S python3 -u", "python3")],
)
def test_a_script_run_through_env_is_refused_with_the_line_and_the_fix(
    tmp_path: Path, line: str, name: str
) -> None:
    """Red team round 19: ``#!/usr/bin/env NAME`` looks NAME up on PATH inside the jail,
    so the program it runs is neither shown in the approval nor bound in the jail:
    refused at enable, naming the script, its line and the one-line fix."""
    script = tmp_path / "tool"
    script.write_text(f"{line}\nprint('hi')\n")
    script.chmod(0o755)
    with pytest.raises(SandboxError) as exc:
        program_grants(str(script), search_path="/usr/bin:/bin")
    assert str(exc.value) == (
        f"proc.exec program {str(script)!r} is a script whose first line is {line!r}: "
        f"/usr/bin/env looks {name!r} up on PATH when the script runs, inside the jail, so "
        "the program it runs would be neither shown in the approval nor bound in the jail; "
        "write the interpreter's absolute path in the #! line "
        f"(#!{shutil.which(name, path='/usr/bin:/bin')} on this host)"
    )


@pytest.mark.parametrize("launcher", ["nice", "nohup", "setsid", "ionice"])
def test_a_script_run_through_another_launcher_is_refused_as_env_is(
    tmp_path: Path, launcher: str
) -> None:
    """attack21: ``#!/usr/bin/nice python3`` is ``#!/usr/bin/env python3`` by another name
    (nice, nohup, setsid and ionice run their one argument with execvp, a PATH lookup
    in the jail); only a #! line naming env was refused."""
    found = shutil.which(launcher, path="/usr/bin:/bin")
    assert found is not None
    line = f"#!{found} python3"
    script = tmp_path / "tool"
    script.write_text(f"{line}\nprint('hi')\n")
    script.chmod(0o755)
    with pytest.raises(SandboxError) as exc:
        program_grants(str(script), search_path="/usr/bin:/bin")
    assert str(exc.value).startswith(
        f"proc.exec program {str(script)!r} is a script whose first line is {line!r}: "
        f"{found} looks 'python3' up on PATH when the script runs, inside the jail"
    )


@pytest.mark.parametrize("line", ["#!/bin/sh -e", "#!/usr/bin/python3 -u"])
def test_a_script_naming_its_interpreter_is_granted(tmp_path: Path, line: str) -> None:
    script = tmp_path / "tool"
    script.write_text(f"{line}\necho hi\n")
    script.chmod(0o755)
    chain = program_chain(str(script), search_path="/usr/bin:/bin")
    assert chain.steps[1].path == line[2:].split(maxsplit=1)[0]


def test_env_itself_as_the_program_is_no_script_and_is_granted() -> None:
    # The near miss: proc.exec:env (a shell-or-interpreter the composition lint names)
    # is the program itself, not a script's #! line: granted as before.
    chain = program_chain("env", search_path="/usr/bin:/bin")
    assert Path(chain.steps[0].real).name == "env"
    assert [step.named_by for step in chain.steps[1:]] == ["ELF"]


def test_a_chain_describes_every_file_the_kernel_runs(tmp_path: Path) -> None:
    script = tmp_path / "tool"
    script.write_text("#!/bin/sh\necho hi\n")
    script.chmod(0o755)
    chain = program_chain(str(script))
    shell = os.path.realpath("/bin/sh")
    assert chain.describe().startswith(
        f"{script}, a script for /bin/sh"
        + (f" (-> {shell})" if shell != "/bin/sh" else "")
        + ", loaded by /"
    )
    assert [g.path for g in chain.grants] == [g.path for g in program_grants(str(script))]


def test_a_relative_interpreter_is_refused(tmp_path: Path) -> None:
    """Red team round 19: ``#!bin/helper`` was opened in the host's current directory and
    granted by its relative name; the kernel finds it in whatever directory runs it."""
    script = tmp_path / "tool"
    script.write_text("#!bin/helper\necho hi\n")
    script.chmod(0o755)
    with pytest.raises(SandboxError, match=r"names its interpreter 'bin/helper' by a relative"):
        program_chain(str(script))


def test_a_program_path_the_host_cannot_look_up_is_a_refusal_not_a_traceback(
    tmp_path: Path,
) -> None:
    """attack22: a name longer than the file system takes (ENAMETOOLONG), or a folder
    the host may not search (EACCES: a user's host and ``/root/...``), raised OSError
    out of the lookup: ``caplet info``, ``approve`` and ``call --enable`` of a plugin
    declaring it ended in "internal error" (exit 70), and ``host.enable`` raised."""
    long_name = str(tmp_path / ("a" * 300))
    with pytest.raises(SandboxError) as exc:
        program_chain(long_name)
    assert str(exc.value) == (
        f"proc.exec program {long_name!r} cannot be looked up on this host: "
        f"{long_name}: File name too long; declare a program this host can find and read"
    )
    # The same for an interpreter its #! line names.
    script = tmp_path / "tool"
    script.write_text(f"#!{tmp_path / ('b' * 300)}\necho hi\n")
    script.chmod(0o755)
    with pytest.raises(SandboxError) as exc:
        program_chain(str(script))
    assert str(exc.value).startswith(f"proc.exec program {str(script)!r} cannot be looked up ")
    # Near miss: a script naming an interpreter the host can read is still a chain.
    script.write_text("#!/bin/sh\necho hi\n")
    assert program_chain(str(script)).describe().startswith(f"{script}, a script for /bin/sh")
