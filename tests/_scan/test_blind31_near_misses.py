"""Honest near misses of the blind31 recall round (written before the scanner was read).

Each is a benign package shaped like one of blind31's samples (benchmarks/malware/tune/b31-*):
telemetry to the project's own fixed origin, a CLI running git, a configuration loader
reading its own environment variables, a setup.py building a C extension, a plugin loader,
a version check, a model download with a checksum, a clipboard command, a bundled base64
JSON resource, setuptools' editable-install ``.pth``. The scanner must not flag any of them
at DANGER in package mode (the benign corpus's bar).
"""

from __future__ import annotations

from pathlib import Path

import pytest

import caplet


def _setup(name: str, version: str) -> str:
    return (
        "from setuptools import setup\n"
        f'setup(name="{name}", version="{version}", packages=["{name}"])\n'
    )


NEAR_MISSES: dict[str, dict[str, str]] = {
    "telemetry-fixed-origin": {
        "setup.py": _setup("statlib", "1.0"),
        "statlib/_telemetry.py": '''import json
import os
import platform
import urllib.request

from . import __version__

ENDPOINT = "https://telemetry.statlib.org/v1/ping"


def ping():
    """Opt-in usage ping: library and Python versions only."""
    if os.environ.get("STATLIB_TELEMETRY") != "1":
        return
    body = json.dumps(
        {"version": __version__, "python": platform.python_version(), "os": platform.system()}
    ).encode()
    req = urllib.request.Request(ENDPOINT, data=body, headers={"Content-Type": "application/json"})
    try:
        urllib.request.urlopen(req, timeout=2)
    except OSError:
        pass
''',
        "statlib/__init__.py": '__version__ = "1.0"\n',
    },
    "cli-runs-git": {
        "setup.py": (
            "from setuptools import setup\n"
            'setup(name="gitstamp", version="0.2", packages=["gitstamp"],\n'
            '      entry_points={"console_scripts": ["gitstamp=gitstamp.cli:main"]})\n'
        ),
        "gitstamp/__init__.py": "",
        "gitstamp/cli.py": """import argparse
import subprocess
import sys


def _git(*args):
    return subprocess.run(["git", *args], capture_output=True, text=True, check=True).stdout.strip()


def main(argv=None):
    p = argparse.ArgumentParser(prog="gitstamp")
    p.add_argument("--file", default="_version.py")
    a = p.parse_args(argv)
    rev = _git("rev-parse", "--short", "HEAD")
    author = _git("config", "user.email")
    with open(a.file, "w") as fh:
        fh.write(f"revision = {rev!r}\\nbuilt_by = {author!r}\\n")
    print(f"stamped {rev}", file=sys.stderr)
    return 0
""",
    },
    "config-from-env": {
        "setup.py": _setup("envcfg", "0.1"),
        "envcfg/__init__.py": """import os
import tomllib
from pathlib import Path

PREFIX = "ENVCFG_"


def load():
    cfg = {}
    path = Path.home() / ".config" / "envcfg" / "config.toml"
    if path.exists():
        cfg.update(tomllib.loads(path.read_text()))
    for k, v in os.environ.items():
        if k.startswith(PREFIX):
            cfg[k[len(PREFIX):].lower()] = v
    for k in os.environ:
        if k.endswith("_TOKEN") and k.startswith(PREFIX):
            cfg.setdefault("tokens", []).append(k)
    return cfg
""",
    },
    "setup-builds-c-extension": {
        "setup.py": '''import os
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


class OptionalBuildExt(build_ext):
    """Build the accelerator when a compiler exists; fall back to pure Python."""

    def run(self):
        try:
            build_ext.run(self)
        except Exception as exc:
            print(f"warning: C accelerator not built ({exc})", file=sys.stderr)


ext = Extension(
    "fastx._speedups",
    sources=[os.path.join("src", "speedups.c")],
    extra_compile_args=["-O3"] if sys.platform != "win32" else [],
)

setup(name="fastx", version="2.0", packages=["fastx"], ext_modules=[ext],
      cmdclass={"build_ext": OptionalBuildExt})
''',
        "fastx/__init__.py": (
            "try:\n    from ._speedups import dumps\n"
            "except ImportError:\n    from ._pure import dumps\n"
        ),
        "fastx/_pure.py": "import json\n\n\ndef dumps(o):\n    return json.dumps(o)\n",
        "src/speedups.c": (
            "#include <Python.h>\n"
            'static struct PyModuleDef m = {PyModuleDef_HEAD_INIT, "_speedups"};\n'
            "PyMODINIT_FUNC PyInit__speedups(void) { return PyModule_Create(&m); }\n"
        ),
    },
    "plugin-loader-entry-points": {
        "setup.py": _setup("plugbus", "0.1"),
        "plugbus/__init__.py": """import importlib
from importlib.metadata import entry_points


def load(name):
    for ep in entry_points(group="plugbus.plugins"):
        if ep.name == name:
            return ep.load()
    module, _, attr = name.partition(":")
    return getattr(importlib.import_module(module), attr or "plugin")
""",
    },
    "version-check-pypi": {
        "setup.py": _setup("upcheck", "0.1"),
        "upcheck/__init__.py": """import json
import urllib.request

__version__ = "0.1"


def newer():
    with urllib.request.urlopen("https://pypi.org/pypi/upcheck/json", timeout=3) as r:
        latest = json.load(r)["info"]["version"]
    if latest != __version__:
        print(f"upcheck {latest} is available: pip install -U upcheck")
    return latest
""",
    },
    "model-download-checksum": {
        "setup.py": _setup("tinyvec", "0.3"),
        "tinyvec/__init__.py": """import hashlib
import os
from pathlib import Path

import requests

URL = "https://huggingface.co/tinyvec/base/resolve/main/weights.bin"
SHA256 = "0" * 64


def weights():
    path = Path(os.environ.get("TINYVEC_HOME", Path.home() / ".cache" / "tinyvec")) / "weights.bin"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        h = hashlib.sha256()
        with requests.get(URL, stream=True, timeout=30) as r, open(path, "wb") as fh:
            for chunk in r.iter_content(1 << 16):
                h.update(chunk)
                fh.write(chunk)
        if h.hexdigest() != SHA256:
            path.unlink()
            raise ValueError("checksum mismatch")
    return path.read_bytes()
""",
    },
    "clipboard-copy-command": {
        "setup.py": _setup("copyout", "0.1"),
        "copyout/__init__.py": """import re
import sys

import pyperclip

_ANSI = re.compile(r"\\x1b\\[[0-9;]*m")


def main():
    text = _ANSI.sub("", sys.stdin.read())
    pyperclip.copy(text)
    print(f"copied {len(text)} characters", file=sys.stderr)
""",
    },
    "base64-json-resource": {
        "setup.py": _setup("iconset", "0.1"),
        "iconset/__init__.py": """import base64
import json

_DATA = "eyJpY29ucyI6IFsiaG9tZSIsICJzZWFyY2giXX0="


def icons():
    return json.loads(base64.b64decode(_DATA))["icons"]
""",
    },
    "editable-install-pth": {
        "__editable__.mylib-1.0.pth": (
            "import __editable___mylib_1_0_finder; __editable___mylib_1_0_finder.install()\n"
        ),
        "__editable___mylib_1_0_finder.py": """import sys
from importlib.machinery import ModuleSpec, PathFinder

MAPPING = {"mylib": "/home/dev/src/mylib/src/mylib"}


class _EditableFinder:
    @classmethod
    def find_spec(cls, fullname, path=None, target=None):
        if fullname in MAPPING:
            return PathFinder.find_spec(fullname, [MAPPING[fullname].rsplit("/", 1)[0]])
        return None


def install():
    if not any(f is _EditableFinder for f in sys.meta_path):
        sys.meta_path.append(_EditableFinder)
""",
    },
}


@pytest.mark.parametrize("name", sorted(NEAR_MISSES))
def test_near_miss_is_not_danger(tmp_path: Path, name: str) -> None:
    for rel, text in NEAR_MISSES[name].items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    report = caplet.scan_tree(tmp_path, mode=caplet.ScanMode.PACKAGE)
    danger = [
        f"{f.file}:{f.line} {f.rule_id} {f.message}"
        for f in report.findings
        if f.severity is caplet.Severity.DANGER
    ]
    assert danger == []
