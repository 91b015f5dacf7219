"""Worked examples of the manifest, mitigation, archive and scanner rules: the manifest
versus the code, defensive code, archive tricks and bombs, files the scan cannot read."""

from __future__ import annotations

from typing import Final

from caplet._scan._example_builders import LONG as _LONG
from caplet._scan._example_builders import MIB as _MIB
from caplet._scan._example_builders import PACKAGE_MODE as _K
from caplet._scan._example_builders import PLUGIN_MODE as _P
from caplet._scan._example_builders import TOKEN_READER as _PLUGIN
from caplet._scan._example_builders import code as _code
from caplet._scan._example_builders import tar_gz as _tar_gz
from caplet._scan._example_builders import tar_gz_of_zeros as _tar_gz_of_zeros
from caplet._scan._example_builders import tree as _tree
from caplet._scan._example_builders import zip as _zip
from caplet._scan._example_builders import zip_of_zeros as _zip_of_zeros
from caplet._scan._example_model import Link, RuleExample

__all__ = ["SCAN_EXAMPLES"]

#: In the order of RULES.
SCAN_EXAMPLES: Final[tuple[RuleExample, ...]] = (
    # -- manifest versus code ----------------------------------------------------------------
    RuleExample(
        "CPL-NET-003",
        _P,
        bad='API = "https://api.example.com/v1"\n',
        good=_code(
            """
            API = "https://{host}/v1"  # a template, configured later
            DOC = "see example.com/docs"
            """
        ),
        alias='url = f"https://api.example.com/v1/{item}"\n',
    ),
    RuleExample(
        "CPL-MAN-001",
        _P,
        bad="env.read:TOKEN declared, and the code never reads TOKEN",
        good="env.read:TOKEN declared, and the code reads os.environ['TOKEN']",
        alias="env.read:TOKEN declared, and the code reads TOKENS, a look-alike",
        capabilities=(_PLUGIN,),
        files=_tree(("plugin.py", "import json\n")),
        good_files=_tree(("plugin.py", 'import os\n\ntoken = os.environ["TOKEN"]\n')),
        alias_files=_tree(("plugin.py", 'import os\n\ntoken = os.getenv("TOKENS")\n')),
    ),
    # -- mitigations ---------------------------------------------------------------------
    RuleExample(
        "CPL-MIT-001",
        _P,
        bad=_code(
            """
            import os

            real = os.path.realpath(path)
            """
        ),
        good=_code(
            """
            import os

            full = os.path.abspath(path)  # keeps symlinks
            """
        ),
        alias=_code(
            """
            from pathlib import Path

            real = Path(path).resolve(strict=True)
            """
        ),
    ),
    RuleExample(
        "CPL-MIT-002",
        _P,
        bad=_code(
            """
            import os

            inside = os.path.commonpath([root, path]) == root
            """
        ),
        good=_code(
            """
            import os

            full = os.path.join(root, path)  # joins, checks nothing
            """
        ),
        alias=_code(
            """
            from pathlib import Path

            inside = Path(path).is_relative_to(root)
            """
        ),
    ),
    RuleExample(
        "CPL-MIT-003",
        _P,
        bad=_code(
            """
            import os

            if os.path.getsize(path) > LIMIT:
                raise ValueError(path)
            """
        ),
        good=_code(
            """
            if len(data) > LIMIT:  # already in memory: no cap on reading
                raise ValueError(path)
            """
        ),
        alias=_code(
            """
            import os

            size = os.stat(path).st_size
            """
        ),
    ),
    # -- archives (read in memory, never extracted) ----------------------------------------
    RuleExample(
        "CPL-ARC-001",
        _K,
        bad="pkg-1.0.tar.gz with a member named pkg-1.0/../../evil.py",
        good="pkg-1.0.tar.gz with a member named pkg-1.0/docs/..notes.py",
        alias="pkg-1.0.zip with a member named /etc/cron.d/evil",
        files=_tree(
            ("pkg-1.0.tar.gz", _tar_gz(("pkg-1.0/setup.cfg", ""), ("pkg-1.0/../../evil.py", "")))
        ),
        good_files=_tree(
            ("pkg-1.0.tar.gz", _tar_gz(("pkg-1.0/setup.cfg", ""), ("pkg-1.0/docs/..notes.py", "")))
        ),
        alias_files=_tree(
            ("pkg-1.0.zip", _zip(("pkg-1.0/setup.cfg", ""), ("/etc/cron.d/evil", "")))
        ),
        archive=True,
        disk_only="archives are read from a file",
    ),
    RuleExample(
        "CPL-ARC-002",
        _K,
        bad="pkg-1.0.tar.gz of a few KiB whose member expands to 2 MiB of zeros",
        good="pkg-1.0.tar.gz whose member is 256 KiB of zeros: small, so no ratio applies",
        alias="pkg-1.0.zip of a few KiB whose member expands to 2 MiB of zeros",
        files=_tree(("pkg-1.0.tar.gz", _tar_gz_of_zeros("pkg-1.0/data.bin", 2 * _MIB))),
        good_files=_tree(("pkg-1.0.tar.gz", _tar_gz_of_zeros("pkg-1.0/data.bin", _MIB // 4))),
        alias_files=_tree(("pkg-1.0.zip", _zip_of_zeros("pkg-1.0/data.bin", 2 * _MIB))),
        archive=True,
        disk_only="archives are read from a file",
    ),
    RuleExample(
        "CPL-ARC-003",
        _K,
        bad="pkg-1.0.tar.gz with a symlink member pointing at /etc/passwd",
        good="pkg-1.0.tar.gz with regular members only",
        alias="pkg-1.0.tar.gz with the same member name twice (the installer keeps the last)",
        files=_tree(
            (
                "pkg-1.0.tar.gz",
                _tar_gz(("pkg-1.0/setup.cfg", ""), ("pkg-1.0/data.txt", Link("/etc/passwd"))),
            )
        ),
        good_files=_tree(
            ("pkg-1.0.tar.gz", _tar_gz(("pkg-1.0/setup.cfg", ""), ("pkg-1.0/data.txt", "1\n")))
        ),
        alias_files=_tree(
            (
                "pkg-1.0.tar.gz",
                _tar_gz(("pkg-1.0/mod.py", "X = 1\n"), ("pkg-1.0/mod.py", "import os\n")),
            )
        ),
        archive=True,
        disk_only="archives are read from a file",
    ),
    RuleExample(
        "CPL-ARC-004",
        _K,
        bad="pkg-1.0.tar.gz holding a nested vendor/lib.zip",
        good="pkg-1.0.tar.gz holding zip_utils.py, a module about zips",
        alias="pkg-1.0.tar.gz holding a zip archive named like a Python file",
        files=_tree(
            (
                "pkg-1.0.tar.gz",
                _tar_gz(("pkg-1.0/vendor/lib.zip", _zip(("lib/mod.py", "X = 1\n")))),
            )
        ),
        good_files=_tree(("pkg-1.0.tar.gz", _tar_gz(("pkg-1.0/zip_utils.py", "import zipfile\n")))),
        alias_files=_tree(
            (
                "pkg-1.0.tar.gz",
                _tar_gz(("pkg-1.0/vendor/lib.py", _zip(("lib/mod.py", "X = 1\n")))),
            )
        ),
        archive=True,
        disk_only="archives are read from a file",
    ),
    # -- the scan itself ---------------------------------------------------------------------
    RuleExample(
        "CPL-SCAN-001",
        _P,
        bad="big.py of 1,200 bytes, scanned with max_file_bytes=1024",
        good="big.py of exactly 1,024 bytes: the limit itself is scanned",
        alias="extra.pth of 1,200 bytes: .pth files are read too",
        files=_tree(("big.py", "x = 0\n" * 200)),
        good_files=_tree(("big.py", "x = 0\n" * 170 + "#xx\n")),
        alias_files=_tree(("extra.pth", "../lib\n" * 172)),
        max_file_bytes=1024,
    ),
    RuleExample(
        "CPL-SCAN-002",
        _P,
        bad="x = " + "-" * 300 + "1\n",
        good="x = " + "-" * 150 + "1\n",
        alias="x = a" + ".b" * 300 + "\n",
    ),
    RuleExample(
        "CPL-SCAN-003",
        _P,
        bad="def broken(:\n    pass\n",
        good=_code(
            """
            match = 1  # soft keywords are names too
            match match:
                case _:
                    pass
            """
        ),
        alias="x = 1\0\n",
    ),
    RuleExample(
        "CPL-SCAN-004",
        _P,
        bad="a module nested deeper than PATH_MAX (4096 bytes): it cannot be opened",
        good="a module nested ten directories of 250 characters deep: long but openable",
        # Readability is the operating system's verdict: a mode of 000 is the
        # other spelling, and root reads it anyway, so it cannot be a portable
        # example.
        alias=None,
        files=_tree(("/".join([_LONG] * 17) + "/deep.py", "X = 1\n")),
        good_files=_tree(("/".join([_LONG] * 10) + "/deep.py", "X = 1\n")),
        disk_only="the operating system refuses the path; nothing in memory can",
    ),
    RuleExample(
        "CPL-SCAN-005",
        _P,
        bad="helpers.py is a symlink to a file outside the plugin",
        good="helpers.py is a regular file",
        alias="lib is a symlink to a directory outside the plugin",
        files=_tree(("plugin.py", "VERSION = 1\n"), ("helpers.py", Link("../outside.py"))),
        good_files=_tree(("plugin.py", "VERSION = 1\n"), ("helpers.py", "X = 1\n")),
        alias_files=_tree(("plugin.py", "VERSION = 1\n"), ("lib", Link("/usr/lib"))),
        disk_only="only the walk of a real directory meets a symlink",
    ),
    RuleExample(
        "CPL-SCAN-006",
        _P,
        bad="payload.tar.gz holding evil.py, which plugin.py extracts and imports",
        good="evil.py shipped unpacked beside plugin.py (scanned like any module)",
        alias="notes.dat, a zip by its bytes whatever its name",
        files=_tree(
            ("plugin.py", "VERSION = 1\n"),
            ("payload.tar.gz", _tar_gz(("evil.py", "X = 1\n"))),
        ),
        good_files=_tree(("plugin.py", "VERSION = 1\n"), ("evil.py", "X = 1\n")),
        alias_files=_tree(
            ("plugin.py", "VERSION = 1\n"), ("notes.dat", _zip(("evil.py", "X = 1\n")))
        ),
        disk_only="only the walk of a real directory opens a plugin's data files",
    ),
)
