"""Worked examples of the capability rules: processes, dynamic code, native code,
introspection, global mutation, network, files, the environment, obfuscation, install hooks
and third-party code (one per rule, in the order of RULES)."""

from __future__ import annotations

from typing import Final

from caplet._scan._example_builders import ELF as _ELF
from caplet._scan._example_builders import PACKAGE_MODE as _K
from caplet._scan._example_builders import PLUGIN_MODE as _P
from caplet._scan._example_builders import PYC as _PYC
from caplet._scan._example_builders import SETUP as _SETUP
from caplet._scan._example_builders import code as _code
from caplet._scan._example_builders import tree as _tree
from caplet._scan._example_model import RuleExample

__all__ = ["CAPABILITY_EXAMPLES"]

#: In the order of RULES.
CAPABILITY_EXAMPLES: Final[tuple[RuleExample, ...]] = (
    # -- process execution ---------------------------------------------------------------
    RuleExample(
        "CPL-PROC-001",
        _P,
        bad=_code(
            """
            import subprocess

            subprocess.run(["git", "status"])
            """
        ),
        good=_code(
            """
            import asyncio


            class Job:
                def run(self) -> None: ...


            asyncio.run(main())
            Job().run()
            """
        ),
        alias=_code(
            """
            import subprocess as sp

            sp.Popen(["git", "status"])
            """
        ),
    ),
    RuleExample(
        "CPL-PROC-002",
        _P,
        bad="import subprocess\n",
        good=_code(
            """
            from . import subprocess  # the plugin's own module of that name

            subprocess_timeout = 5
            """
        ),
        alias='terminal = __import__("pty")\n',
    ),
    # -- dynamic code --------------------------------------------------------------------
    RuleExample(
        "CPL-DYN-001",
        _P,
        bad="result = eval(expression)\n",
        good=_code(
            '''
            """Never call eval() on user input."""
            import re

            # eval(expression) would run the user's text
            pattern = re.compile(r"\\d+")
            cursor.exec(query)
            result = evaluate(expression)
            '''
        ),
        alias=_code(
            """
            import builtins

            result = builtins.__dict__["eval"](expression)
            """
        ),
    ),
    RuleExample(
        "CPL-DYN-002",
        _P,
        bad=_code(
            """
            import importlib

            module = importlib.import_module(name)
            """
        ),
        good=_code(
            """
            import importlib.metadata

            version = importlib.metadata.version("caplet")
            """
        ),
        alias=_code(
            """
            from importlib import import_module as load

            module = load(name)
            """
        ),
    ),
    RuleExample(
        "CPL-DYN-003",
        _P,
        bad=_code(
            """
            import pickle

            state = pickle.loads(data)
            """
        ),
        good=_code(
            """
            import json
            import pickle

            state = json.loads(data)
            blob = pickle.dumps(state)  # writing a pickle runs nothing
            """
        ),
        alias=_code(
            """
            from marshal import loads as unpack

            code = unpack(data)
            """
        ),
    ),
    RuleExample(
        "CPL-DYN-004",
        _P,
        bad=_code(
            """
            import types

            function = types.FunctionType(code, {})
            """
        ),
        good=_code(
            """
            import types

            options = types.SimpleNamespace(verbose=True)
            """
        ),
        alias=_code(
            """
            import types

            make = getattr(types, "Code" + "Type")
            """
        ),
    ),
    RuleExample(
        "CPL-DYN-006",
        _P,
        bad=_code(
            """
            import os

            def run(name, *args):
                return getattr(os, name)(*args)
            """
        ),
        good=_code(
            """
            import os

            def run():
                return getattr(os, "getcwd")(), hasattr(os, "fork")
            """
        ),
        alias=_code(
            """
            import functools, os

            run = functools.reduce(getattr, ["getcwd"], os)
            """
        ),
    ),
    # -- native code ---------------------------------------------------------------------
    RuleExample(
        "CPL-NAT-001",
        _P,
        bad=_code(
            """
            import ctypes

            libc = ctypes.CDLL(None)
            """
        ),
        good=_code(
            """
            from . import cffi_notes  # the plugin's own module

            ctypes_available = False
            """
        ),
        alias=_code(
            """
            import importlib

            ffi = importlib.import_module("cffi")
            """
        ),
    ),
    RuleExample(
        "CPL-NAT-002",
        _P,
        bad="_speedups.so, a native library, next to the plugin",
        good="build.so.txt, a text file whose name only contains .so",
        alias="native/helper.dylib, a macOS library in a subfolder",
        files=_tree(("plugin.py", "VERSION = 1\n"), ("_speedups.so", _ELF)),
        good_files=_tree(("plugin.py", "VERSION = 1\n"), ("build.so.txt", "gcc -shared\n")),
        alias_files=_tree(("plugin.py", "VERSION = 1\n"), ("native/helper.dylib", _ELF)),
    ),
    RuleExample(
        "CPL-NAT-003",
        _P,
        bad="plugin.pyc, compiled bytecode, next to the plugin",
        good="notes.pyc.md, a text file whose name only contains .pyc",
        alias="legacy.pyo, optimised bytecode of old Pythons",
        files=_tree(("plugin.py", "VERSION = 1\n"), ("helpers.pyc", _PYC)),
        good_files=_tree(("plugin.py", "VERSION = 1\n"), ("notes.pyc.md", "# bytecode\n")),
        alias_files=_tree(("plugin.py", "VERSION = 1\n"), ("legacy.pyo", _PYC)),
    ),
    # -- introspection escapes -------------------------------------------------------------
    RuleExample(
        "CPL-INTRO-001",
        _P,
        bad="classes = ().__class__.__base__.__subclasses__()\n",
        good=_code(
            '''
            """Lists the __subclasses__ of nothing; only reads names."""
            kind = type(value).__name__


            class Registry:
                def subclasses(self) -> list[type]: ...
            '''
        ),
        alias='namespace = getattr(function, "__glo" + "bals__")\n',
    ),
    RuleExample(
        "CPL-INTRO-002",
        _P,
        bad=_code(
            """
            import sys

            frame = sys._getframe(1)
            """
        ),
        good=_code(
            """
            import sys

            limit = sys.getrecursionlimit()
            """
        ),
        alias=_code(
            """
            from inspect import currentframe as here

            frame = here()
            """
        ),
    ),
    # -- global mutation -------------------------------------------------------------------
    RuleExample(
        "CPL-GLOB-001",
        _P,
        bad=_code(
            """
            import builtins

            builtins.open = audited_open
            """
        ),
        good=_code(
            """
            import sys


            class Config: ...


            sys.argv = ["tool"]  # the plugin's own worker only
            config = Config()
            config.open = audited_open
            """
        ),
        alias=_code(
            """
            import sys

            sys.modules["json"] = fake_json
            """
        ),
    ),
    # -- network ---------------------------------------------------------------------------
    RuleExample(
        "CPL-NET-001",
        _P,
        bad="import socket\n",
        good=_code(
            """
            from caplet import ctx

            socket_timeout = 5.0
            """
        ),
        alias="from http import client\n",
    ),
    RuleExample(
        "CPL-NET-002",
        _P,
        bad=_code(
            """
            import asyncio

            streams = asyncio.open_connection(host, 80)
            """
        ),
        good=_code(
            """
            import asyncio

            pause = asyncio.sleep(1)
            """
        ),
        alias=_code(
            """
            from asyncio import open_connection as dial

            streams = dial(host, 80)
            """
        ),
    ),
    # -- filesystem ------------------------------------------------------------------------
    RuleExample(
        "CPL-FS-001",
        _P,
        bad=_code(
            """
            with open("report.txt", "w") as out:
                out.write(text)
            """
        ),
        good=_code(
            """
            with open("report.txt") as source:  # reading is CPL-FS-002
                text = source.read()
            """
        ),
        alias=_code(
            """
            from io import open as io_open

            log = io_open("log.txt", mode="ab")
            """
        ),
    ),
    RuleExample(
        "CPL-FS-002",
        _P,
        bad=_code(
            """
            with open("data.csv") as source:
                rows = source.read()
            """
        ),
        good=_code(
            """
            rows = stream.read()  # an object the plugin was given
            file_name = "data.csv"
            """
        ),
        alias=_code(
            """
            from pathlib import Path

            rows = Path("data.csv").read_text()
            """
        ),
    ),
    RuleExample(
        "CPL-FS-003",
        _P,
        bad=_code(
            """
            import os

            os.remove(path)
            """
        ),
        good=_code(
            """
            items.remove(path)
            name = path.replace("/", "_")
            """
        ),
        alias=_code(
            """
            import shutil as sh

            sh.rmtree(folder)
            """
        ),
    ),
    RuleExample(
        "CPL-FS-004",
        _P,
        bad='PASSWORDS = "/etc/passwd"\n',
        good=_code(
            """
            DOC = "etc/passwd.md"
            NOTES = "/etcetera/notes"
            """
        ),
        alias='KEY = "~/.ssh/id_ed25519"\n',
    ),
    RuleExample(
        "CPL-FS-005",
        _P,
        bad='OUTPUT = "/srv/reports/daily.csv"\n',
        good=_code(
            """
            OUTPUT = "reports/daily.csv"  # relative: inside the plugin's own directory
            SEPARATOR = "/"
            """
        ),
        alias='output = f"/srv/reports/{day}.csv"\n',
    ),
    # -- environment -----------------------------------------------------------------------
    RuleExample(
        "CPL-ENV-001",
        _P,
        bad=_code(
            """
            import os

            token = os.environ["TOKEN"]
            """
        ),
        good=_code(
            """
            environ = {"TOKEN": "x"}  # a dict of the plugin's own
            token = environ["TOKEN"]
            """
        ),
        alias=_code(
            """
            from os import environ as e

            token = e.get("TOKEN")
            """
        ),
    ),
    RuleExample(
        "CPL-ENV-002",
        _P,
        bad=_code(
            """
            import os

            value = os.environ[name]
            """
        ),
        good=_code(
            """
            import os

            value = os.environ["TOKEN"]  # a literal name is CPL-ENV-001
            """
        ),
        alias=_code(
            """
            import os

            snapshot = dict(os.environ)
            """
        ),
    ),
    # -- obfuscation -----------------------------------------------------------------------
    RuleExample(
        "CPL-OBF-001",
        _P,
        bad=f'DATA = "{bytes(range(150)).hex()}"\n',
        good=f'TEXT = "{"lorem ipsum dolor sit amet " * 10}"\n',
        # adjacent literals are one string to the parser, line breaks or not
        alias="DATA = (\n"
        + "".join(f'    "{bytes(range(i * 40, i * 40 + 40)).hex()}"\n' for i in range(6))
        + ")\n",
    ),
    RuleExample(
        "CPL-OBF-002",
        _P,
        bad='name = "".join(chr(c) for c in (101, 118, 97, 108))\n',
        good=_code(
            """
            digits = "".join(str(c) for c in codes)
            letter = chr(65)
            """
        ),
        alias='name = "".join(map(chr, codes))\n',
    ),
    RuleExample(
        "CPL-OBF-003",
        _P,
        bad="CODES = [" + "0, " * 329 + "1000]\n",
        # 1000 characters exactly: the limit itself is allowed
        good="CODES = [" + "0, " * 329 + "100]\n",
        alias="# " + "x" * 1100 + "\n",
    ),
    # -- install hooks and supply chain ----------------------------------------------------
    RuleExample(
        "CPL-HOOK-001",
        _P,
        bad="setup.py at the root of the plugin",
        good="setup_helpers.py and pyproject.toml: no install script",
        alias="tools/setup.py, an install script in a subfolder",
        files=_tree(("plugin.py", "VERSION = 1\n"), ("setup.py", _SETUP)),
        good_files=_tree(
            ("plugin.py", "VERSION = 1\n"),
            ("setup_helpers.py", "NAME = 'demo'\n"),
            ("pyproject.toml", '[project]\nname = "demo"\n'),
        ),
        alias_files=_tree(("plugin.py", "VERSION = 1\n"), ("tools/setup.py", _SETUP)),
    ),
    RuleExample(
        "CPL-HOOK-002",
        _P,
        bad="extra.pth, read at every interpreter start",
        good="extra.pth.txt, a text file whose name only contains .pth",
        alias="site/zz-extra.pth, a .pth file in a subfolder",
        files=_tree(("plugin.py", "VERSION = 1\n"), ("extra.pth", "../lib\n")),
        good_files=_tree(("plugin.py", "VERSION = 1\n"), ("extra.pth.txt", "../lib\n")),
        alias_files=_tree(("plugin.py", "VERSION = 1\n"), ("site/zz-extra.pth", "../lib\n")),
    ),
    RuleExample(
        "CPL-HOOK-003",
        _K,
        bad="sitecustomize.py at the import root of a package",
        good="tests/fixtures/sitecustomize.py: not at an import root, so inert",
        alias="src/usercustomize.py, at the import root of a src layout",
        files=_tree(("sitecustomize.py", "print('started')\n")),
        good_files=_tree(("tests/fixtures/sitecustomize.py", "print('started')\n")),
        alias_files=_tree(("src/usercustomize.py", "print('started')\n")),
    ),
    RuleExample(
        "CPL-SUP-001",
        _P,
        bad="import yaml\n",
        good=_code(
            """
            import json

            from caplet import ctx

            from . import helpers
            """
        ),
        alias=_code(
            """
            import importlib

            numpy = importlib.import_module("numpy")
            """
        ),
    ),
)
