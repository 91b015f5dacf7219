"""A native payload the package ships, loaded: ``rundll32``/``regsvr32`` of a file the
package ships, or writes or copies from what it ships (a mixin of
:class:`caplet._scan._sinks.Sinks`).

Split out of :mod:`caplet._scan._sinks` when it grew past 600 lines (the thirteenth
session): these read only what the sinks collected (the file's writes and its flow).
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from caplet._scan._commands import Commands
from caplet._scan._filescan import FileScan
from caplet._scan._flow import Flow
from caplet._scan._sink_stages import Write
from caplet._scan._sources import Source

__all__ = ["DLL_LOADERS", "PackagedSinks"]

#: Windows' loaders of a DLL (its entry point, or its registration function, is run): a
#: payload renamed ``.dat`` or ``.bin`` loaded by them.
DLL_LOADERS = frozenset({"rundll32", "rundll32.exe", "regsvr32", "regsvr32.exe"})


class PackagedSinks:
    """The checks of :class:`caplet._scan._sinks.Sinks` this module holds (a mixin: the
    state is the sinks' own, declared here for the type checker)."""

    _scan: FileScan
    _flow: Flow
    _writes: list[Write]
    _commands: Commands
    _through_parameters: Callable[[frozenset[str], ast.AST], frozenset[str]]

    def _dll_loaded(self, node: ast.Call, api: str, command: ast.expr, loader: str) -> None:
        """``rundll32``/``regsvr32`` of a file the package ships, or writes or copies from
        what it ships: a native payload renamed (``.dat``, ``.bin``) and loaded (CPL-THR-018;
        a file written from decoded or downloaded data is the data flow's, CPL-THR-001/002)."""
        flow = self._flow
        shown = f"{api}({loader} ...)"
        if any(s is Source.PACKAGED for s, _ in flow.labels(command)):
            self._scan.emit("CPL-THR-018", shown, node.lineno, node.col_offset)
            return
        # the loader's argument is "<path>,<export>": every name in the command may be the path
        named = {n.id for n in ast.walk(command) if isinstance(n, ast.Name)}
        named -= self._commands.modules()
        keys = self._through_parameters(
            self._commands.program_keys(command) | frozenset(named), node
        )
        for write in self._writes:
            if not keys & self._through_parameters(write.keys, write.node):
                continue
            labels = set(write.labels)
            for data in write.data:
                labels |= flow.labels(data)
            written = list(write.data)
            if write.handle is not None:
                written += flow.contributed.get(write.handle, {}).get(write.scope, ())[:8]
            if any(s is Source.PACKAGED for s, _ in labels) or any(
                self._read_from_package(d) for d in written
            ):
                self._scan.emit("CPL-THR-018", shown, node.lineno, node.col_offset)
                return

    def _read_from_package(self, data: ast.expr) -> bool:
        """``data`` is read from a file of the package: ``open(<packaged path>).read()``
        (through the handle's name too) or ``pkgutil.get_data``."""
        flow = self._flow
        pending: list[ast.AST] = [data]
        seen: set[str] = set()
        while pending and len(seen) < 8:
            for n in ast.walk(pending.pop()):
                if isinstance(n, ast.Name) and n.id not in seen:
                    seen.add(n.id)
                    pending.extend(flow.bindings.assigned.get(n.id, ())[:4])
                if not isinstance(n, ast.Call):
                    continue
                funcs = flow.resolve(n.func)
                if "pkgutil.get_data" in funcs:
                    return True
                if (
                    not {"builtins.open", "io.open"}.isdisjoint(funcs)
                    and n.args
                    and any(s is Source.PACKAGED for s, _ in flow.labels(n.args[0]))
                ):
                    return True
        return False
