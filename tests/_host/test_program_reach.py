"""What a proc.exec program brings with it: shown, pinned in the approval, compared.

Red team round 19, through a real PluginHost on the real sandbox. A script's
``#!`` interpreter (and every program's ELF loader) is bound into the jail,
executable, with the approved program; nothing showed it, so approving
``proc.exec:mytool`` approved ``/usr/bin/python3`` unseen, and a script
whose ``#!`` line changed after the approval ran its new interpreter under
the old approval. And ``#!/usr/bin/env NAME`` was granted ``env``, which
looks NAME up on PATH inside the jail: refused at enable now, with the fix.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from caplet import PluginHost
from caplet._host._consent import ConsentRequest
from caplet._sandbox._programs import program_chain
from caplet._sandbox._sandboxed import SandboxLauncher
from tests._host.ctxkit import make_host
from tests.conftest import PluginFactory

RUNNER = """
import subprocess

def create_functions(config):
    def run(argv):
        try:
            done = subprocess.run(argv, capture_output=True, check=False)
        except OSError as exc:
            return f"refused: {exc.errno}"
        return done.stdout.decode(errors="replace")

    return {"main": {"run": run}}
"""


@pytest.fixture
def host(plugins_dir: Path, state_dir: Path, launcher: SandboxLauncher) -> Iterator[PluginHost]:
    with make_host(plugins_dir, state_dir, launcher) as made:
        yield made


class Recorder:
    """A consent callback that keeps what it was shown and agrees."""

    def __init__(self) -> None:
        self.requests: list[ConsentRequest] = []

    def __call__(self, request: ConsentRequest) -> bool:
        self.requests.append(request)
        return True


def _script(path: Path, first_line: str, body: str = "echo hello from the script\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{first_line}\n{body}", encoding="utf-8")
    path.chmod(0o755)
    return path


def _runner(make_plugin: PluginFactory, program: Path) -> None:
    make_plugin(
        "runner",
        source=RUNNER,
        extra=f'capabilities = ["proc.exec:{program}"]',
        modules='[modules.main]\nfunctions = ["run"]\n',
    )


def _approve(host: PluginHost) -> None:
    host.discover()
    host.audit("runner")
    outcome = host.approve("runner")
    assert outcome, outcome.reason


def _shells(tmp_path: Path) -> tuple[Path, Path]:
    """Two interpreters a script can name: each a ``#!/bin/sh`` script running it."""
    return tuple(  # type: ignore[return-value]
        _script(tmp_path / "shells" / name, "#!/bin/sh", 'exec /bin/sh "$@"\n')
        for name in ("first", "second")
    )


def test_the_consent_request_names_a_scripts_interpreter(
    host: PluginHost, make_plugin: PluginFactory, tmp_path: Path
) -> None:
    tool = _script(tmp_path / "bin" / "tool", "#!/bin/sh")
    _runner(make_plugin, tool)
    host.discover()
    recorder = Recorder()
    assert host.enable("runner", consent=recorder)
    (request,) = recorder.requests
    described = program_chain(str(tool)).describe()
    assert request.programs == (f"proc.exec:{tool}: {described}",)
    assert described.startswith(f"{tool}, a script for /bin/sh")
    assert ", loaded by /" in described, "the shell's ELF loader is shown too"
    # What the display asked about, before any enable, says the same.
    host.disable("runner")
    shown = host.consent_request("runner")
    assert shown is not None
    assert shown.programs == request.programs


def test_an_approval_pins_the_interpreter_and_a_new_one_needs_consent(
    host: PluginHost, make_plugin: PluginFactory, tmp_path: Path
) -> None:
    first, second = _shells(tmp_path)
    tool = _script(tmp_path / "bin" / "tool", f"#!{first}")
    _runner(make_plugin, tool)
    _approve(host)
    approval = host.get_approval_record("runner")
    assert approval is not None
    assert approval.programs == (f"proc.exec:{tool}: {program_chain(str(tool)).describe()}",)
    # The attack: the plugin's content is unchanged, the script's #! line is not.
    _script(tool, f"#!{second}")
    outcome = host.enable("runner")
    assert not outcome, "a program bringing an interpreter nobody was shown was enabled"
    assert outcome.reason.startswith(
        f"plugin 'runner' is approved at {approval.content_hash}, but what it runs on this "
        f"host changed since: proc.exec:{tool} now runs {tool}, a script for {second}, "
    )
    assert f"; approved: {tool}, a script for {first}, " in outcome.reason
    assert "(its #! line, its links or PATH changed since)" in outcome.reason
    assert host.worker_pid("runner") is None
    # A person shown the change may agree: the widening names it.
    recorder = Recorder()
    assert host.enable("runner", consent=recorder)
    (request,) = recorder.requests
    assert request.widening is not None
    (change,) = request.widening.programs
    assert change.startswith(f"proc.exec:{tool} now runs {tool}, a script for {second}, ")
    assert host.call("runner", "main.run", [str(tool)]) == "hello from the script\n"


def test_an_unchanged_program_keeps_the_approved_fast_path(
    host: PluginHost, make_plugin: PluginFactory, tmp_path: Path
) -> None:
    # The near miss: the approved program bringing what it brought is enabled on the
    # approval alone, and runs.
    tool = _script(tmp_path / "bin" / "tool", "#!/bin/sh")
    _runner(make_plugin, tool)
    _approve(host)
    outcome = host.enable("runner")
    assert outcome, outcome.reason
    assert "approved fast path" in outcome.reason
    assert host.call("runner", "main.run", [str(tool)]) == "hello from the script\n"


def test_an_approval_recorded_before_programs_were_kept_compares_nothing(
    host: PluginHost, make_plugin: PluginFactory, tmp_path: Path
) -> None:
    # The choice written down: an approval of schema 10 or older (programs None) vouches
    # for what its content declares, as before; a re-approval records the programs.
    first, second = _shells(tmp_path)
    tool = _script(tmp_path / "bin" / "tool", f"#!{first}")
    _runner(make_plugin, tool)
    _approve(host)
    approval = host.get_approval_record("runner")
    assert approval is not None
    host.manager.store.put_approval(replace(approval, programs=None))
    _script(tool, f"#!{second}")
    assert host.enable("runner")


@pytest.mark.parametrize("line", ["#!/usr/bin/env sh", "#!/usr/bin/env -S sh -e"])
def test_a_script_run_through_env_is_refused_at_enable(
    host: PluginHost, make_plugin: PluginFactory, tmp_path: Path, line: str
) -> None:
    # On main the enable succeeded, granting /usr/bin/env, and the script failed in
    # the jail: env looked sh up on a PATH where nothing it finds was granted.
    tool = _script(tmp_path / "bin" / "tool", line)
    _runner(make_plugin, tool)
    host.discover()
    outcome = host.enable("runner", consent=True)
    assert not outcome, "a script naming its interpreter through env was granted"
    assert outcome.reason.startswith(
        f"plugin 'runner': capability 'proc.exec:{tool}': proc.exec program {str(tool)!r} "
        f"is a script whose first line is {line!r}: /usr/bin/env looks 'sh' up on PATH "
    )
    assert "write the interpreter's absolute path in the #! line (#!/" in outcome.reason
    # The fix it names works.
    _script(tool, "#!/bin/sh")
    assert host.enable("runner", consent=True)
    assert host.call("runner", "main.run", [str(tool)]) == "hello from the script\n"


def test_a_relative_interpreter_is_refused_not_found_in_the_hosts_folder(
    host: PluginHost,
    make_plugin: PluginFactory,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``#!bin/helper`` is opened by the kernel relative to the current directory of
    whoever runs the script. At enable that was the host's: run in a cloned project, the
    project's own ``./bin/helper`` was granted and bound, executable, into the jail."""
    project = tmp_path / "project"
    _script(project / "bin" / "helper", "#!/bin/sh", "echo the projects own program\n")
    tool = _script(tmp_path / "vendor" / "tool", "#!bin/helper")
    monkeypatch.chdir(project)
    _runner(make_plugin, tool)
    host.discover()
    outcome = host.enable("runner", consent=True)
    assert not outcome, "an interpreter found in the host's current folder was granted"
    assert outcome.reason == (
        f"plugin 'runner': capability 'proc.exec:{tool}': proc.exec program {str(tool)!r} "
        "names its interpreter 'bin/helper' by a relative path in its #! line, which is "
        "found in the current directory of whoever runs it (this host's, here), not where "
        "the program is; write the interpreter's absolute path"
    )


def test_re_enabling_a_running_plugin_whose_interpreter_changed_needs_consent(
    host: PluginHost, make_plugin: PluginFactory, tmp_path: Path
) -> None:
    # Enabling an enabled plugin again with the same grants is a reconfiguration, which
    # asks nothing: the programs' files must be among those grants.
    first, second = _shells(tmp_path)
    tool = _script(tmp_path / "bin" / "tool", f"#!{first}")
    _runner(make_plugin, tool)
    _approve(host)
    assert host.enable("runner")
    _script(tool, f"#!{second}")
    outcome = host.enable("runner")
    assert not outcome, "a reconfiguration carried a new interpreter past the approval"
    assert f"proc.exec:{tool} now runs {tool}, a script for {second}, " in outcome.reason


@pytest.mark.parametrize("what", ["database", "ssh-key"])
def test_a_file_that_is_no_program_is_never_granted_as_one(
    host: PluginHost,
    make_plugin: PluginFactory,
    state_dir: Path,
    tmp_path: Path,
    what: str,
) -> None:
    """The program itself was bound into the jail, readable, whatever it was: the kernel
    runs only a file with an execute bit that is ELF or a script, but ``proc.exec:`` of
    caplet's own database (every plugin's ctx.kv, the approvals) or of a key put that
    file in the jail, readable by a worker of caplet's own uid (a user's host). Its
    interpreters were checked since round 17; now the program is too, and nothing of
    caplet's state directory is ever granted as a program."""
    host.discover()  # the state directory and its database exist
    target = state_dir / "caplet.db" if what == "database" else tmp_path / "id_ed25519"
    if what == "ssh-key":
        target.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n", encoding="utf-8")
    assert target.is_file()
    _runner(make_plugin, target)
    host.discover()
    outcome = host.enable("runner", consent=True)
    assert not outcome, "a file that is no program was granted as one"
    assert f"proc.exec program {str(target)!r} is not executable (an ELF program or a " in (
        outcome.reason
    )


def _templated_runner(make_plugin: PluginFactory, default: Path) -> None:
    make_plugin(
        "runner",
        source=RUNNER,
        extra='capabilities = ["proc.exec:${config.tool}"]\n'
        f'[config.tool]\ntype = "string"\ndefault = "{default}"\n',
        modules='[modules.main]\nfunctions = ["run"]\n',
    )


def test_a_templated_program_is_approved_with_what_its_default_brings(
    host: PluginHost, make_plugin: PluginFactory, tmp_path: Path
) -> None:
    # attack22: the lines were resolved from the declared capabilities, so
    # proc.exec:${config.tool} was "not found on this host" to `caplet approve` (the
    # approver was shown nothing of what the default program brings) and to the
    # approval, while every enable resolved the default: the approved plugin asked for
    # consent at every enable, as if its program had changed.
    first, second = _shells(tmp_path)
    tool = _script(tmp_path / "bin" / "tool", f"#!{first}")
    _templated_runner(make_plugin, tool)
    _approve(host)
    approval = host.get_approval_record("runner")
    assert approval is not None
    line = f"proc.exec:${{config.tool}}: {program_chain(str(tool)).describe()}"
    assert approval.programs == (line,)
    shown = host.consent_request("runner")
    assert shown is None, "an approved plugin's default needs no consent"
    outcome = host.enable("runner")
    assert outcome, outcome.reason
    assert host.call("runner", "main.run", [str(tool)]) == "hello from the script\n"
    # Near miss: still pinned. The default program's #! line changed: consent again.
    host.disable("runner")
    _script(tool, f"#!{second}")
    refused = host.enable("runner")
    assert not refused
    assert f"proc.exec:${{config.tool}} now runs {tool}, a script for {second}" in refused.reason


def test_a_templated_program_without_a_default_brings_nothing_until_set(
    host: PluginHost, make_plugin: PluginFactory, tmp_path: Path
) -> None:
    # Near miss: no default, nothing is resolved at approval; the operator's value is
    # resolved at enable, and the line it brings needs their consent once.
    tool = _script(tmp_path / "bin" / "tool", "#!/bin/sh")
    make_plugin(
        "runner",
        source=RUNNER,
        extra='capabilities = ["proc.exec:${config.tool}"]\n[config.tool]\ntype = "string"\n',
        modules='[modules.main]\nfunctions = ["run"]\n',
    )
    _approve(host)
    approval = host.get_approval_record("runner")
    assert approval is not None
    assert approval.programs == ("proc.exec:${config.tool}: not found on this host",)
    recorder = Recorder()
    assert host.enable("runner", config={"tool": str(tool)}, consent=recorder)
    assert host.call("runner", "main.run", [str(tool)]) == "hello from the script\n"


def test_a_program_the_host_cannot_look_up_is_refused_not_raised(
    host: PluginHost, make_plugin: PluginFactory, tmp_path: Path
) -> None:
    # attack22: proc.exec of a name longer than the file system takes raised OSError out
    # of the program's lookup, so out of host.consent_request and host.enable (the CLI's
    # "internal error"). Now the line says it is not found, and the enable refuses.
    program = tmp_path / ("a" * 300)
    _runner(make_plugin, program)
    host.discover()
    shown = host.consent_request("runner")
    assert shown is not None
    assert shown.programs == (f"proc.exec:{program}: not found on this host",)
    outcome = host.enable("runner", consent=True)
    assert not outcome
    assert f"proc.exec program {str(program)!r} cannot be looked up on this host" in (
        outcome.reason
    )
