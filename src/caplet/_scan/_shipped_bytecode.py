"""Bytecode a package ships that Python imports in place of any source (scandos37).

A ``.pyc`` is code no rule reads (unmarshalling untrusted bytecode is itself unsafe),
and Python runs one in two cases whatever the ``.py`` files beside it say:

* a *sourceless* ``pkg/evil.pyc`` outside ``__pycache__`` with no ``pkg/evil.py``:
  the path finder's last loader (``importlib.machinery.SourcelessFileLoader``, the
  ``BYTECODE_SUFFIXES``) imports it as ``pkg.evil``, so ``from . import evil`` in a
  clean ``__init__.py`` ran a payload the scan never saw (exit 0, one info finding);
* a cache ``pkg/__pycache__/mod.cpython-312.pyc`` compiled *unchecked-hash* (PEP 552,
  flags ``0b01``): the import system never compares it with ``mod.py``, so the source
  reads clean and the cache runs. pip's byte-compile rewrites its own interpreter's
  cache, uv and ``pip --no-compile`` do not.

A ``.pyc`` beside its own source is shadowed by it, and a timestamp or checked-hash
cache is recompiled when its source differs: those stay what they were (an observed
capability, CPL-NAT-003). Package mode only: in plugin mode every ``.pyc`` is danger
(CPL-NAT-003) already. A tree's ``__pycache__`` folders are never walked (a checkout's
own caches); an archive's are read.
"""

from __future__ import annotations

from typing import Final

__all__ = ["ShippedBytecode"]

#: The bytecode suffix the import system loads (``importlib.machinery.BYTECODE_SUFFIXES``).
_BYTECODE: Final = ".pyc"
#: PEP 552's flags word: hash-based (bit 0) and not checked against the source (bit 1 clear).
_UNCHECKED_HASH: Final = 0b01


def unchecked(head: bytes) -> bool:
    """Whether a ``.pyc`` header says the import system uses it without its source."""
    return len(head) >= 8 and int.from_bytes(head[4:8], "little") == _UNCHECKED_HASH


class ShippedBytecode:
    """The ``.pyc`` files of one tree or archive and the sources beside them."""

    def __init__(self) -> None:
        self._names: set[str] = set()
        self._bytecode: dict[str, bool] = {}  # relative -> unchecked-hash by its header
        self._special: set[str] = set()  # names that are no regular file (links, FIFOs)

    def not_a_file(self, relative: str) -> None:
        """``relative`` is a link or a special file in a tree: a ``.py`` of that name does
        not shadow its ``.pyc``. The path finder loads a source only where
        ``_path_isfile`` holds, and tries the next suffix otherwise, so a dangling link
        (or a FIFO) ``pkg/evil.py`` beside ``pkg/evil.pyc`` imports the bytecode
        (attack38)."""
        self._special.add(relative)

    def note(self, relative: str, head: bytes | None = None) -> None:
        """A file of the tree; for a ``.pyc``, its first bytes when they were read."""
        self._names.add(relative)
        if relative.endswith(_BYTECODE):
            known = self._bytecode.get(relative, False)
            self._bytecode[relative] = known or (head is not None and unchecked(head))

    def imported(self) -> list[tuple[str, str]]:
        """Each ``.pyc`` Python imports in place of any source, with why."""
        found = []
        for relative, hashed in sorted(self._bytecode.items()):
            folder = relative.rpartition("/")[0]
            if folder.rpartition("/")[2] == "__pycache__":
                if hashed:
                    found.append((relative, "a cache compiled unchecked-hash (PEP 552)"))
                continue
            if not _importable(relative):
                continue
            source = relative.removesuffix("c")  # pkg/evil.py
            if source not in self._names or source in self._special:
                found.append((relative, "sourceless: no .py of its name beside it"))
        return found


def _importable(relative: str) -> bool:
    """Whether a sourceless ``.pyc`` can be imported by a module name from the tree's top.

    A module name's parts are split at dots, so no name reaches a file under a folder
    whose name holds one (``test/bytecode_3.8/``: xdis's sdist ships 900 such test
    fixtures, each danger in scandos37's rule) or a file whose stem holds one. A wheel's
    ``NAME.data/purelib`` and ``platlib`` are installed as the top of site-packages, and
    its other ``.data`` folders anywhere under the prefix, so a ``.pyc`` under a ``.data``
    folder is judged as importable (attack38). Code that puts such a folder itself on
    ``sys.path`` is what the rules of that call read.
    """
    parts = relative.split("/")
    if parts[0].endswith(".data"):
        return True
    return not any("." in part for part in parts[:-1]) and "." not in parts[-1][: -len(_BYTECODE)]
