"""Network input the data flow finds outside a call's result (recall6, issue 16).

:class:`caplet._scan._flow.Flow` labels what a network read returns
(``requests.get(...)``, ``sock.recv(...)``); a C2 loop also takes its
commands where no call returns them:

* handed to a callback: ftplib's ``retrlines(cmd, callback)`` calls a
  function of the file with every line the server sends, or fills a list
  (``lines.append``) or a buffer (``buf.write``) with them
  (:data:`~caplet._scan._sources.NETWORK_CALLBACKS`);
* handed to a chat bot's handlers as their parameters (moved here from the
  flow, the same concern);
* read from a socket the resolver does not know as one: a socket wrapped by
  an object that is no network call itself (``ctx.wrap_socket(raw)`` of a
  ``ssl.create_default_context()``), or unpacked from a network call's result
  (``conn, addr = s.accept()``), whose ``recv`` is the peer's message;
* handed to a server's request handler: ``self.request``, ``self.rfile``,
  ``self.path`` of a ``socketserver`` or ``http.server`` handler, the data
  of an asyncio protocol's ``data_received``
  (:data:`~caplet._scan._sources.REQUEST_HANDLERS`): a bind shell's or a web
  shell's commands.

The answers are plain data for the flow, computed once per file from its
calls and bindings (bounded like every other question of the flow).
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from caplet._scan._resolve import is_network
from caplet._scan._sources import BOT_FRAMEWORKS, NETWORK_CALLBACKS, REQUEST_HANDLERS
from caplet._scan._syntax import MAX_CANDIDATES, Bindings
from caplet._scan._syntax import dotted as _dotted

__all__ = [
    "CallbackData",
    "PeerInput",
    "bot_handler_params",
    "callback_data",
    "peer_input",
    "wraps_network",
]

#: Methods of a container or a file that a callback fills with what it is handed.
_FILLED_BY = frozenset({"append", "extend", "write", "writelines", "put", "put_nowait"})


@dataclass(frozen=True, slots=True)
class CallbackData:
    """Where a network callback delivers the data it receives."""

    #: Parameter names of the file's functions (and lambdas) called with it, by function.
    params: dict[str, set[int]]
    #: Names (``lines``, ``self.buf``) of containers and files filled with it, and the
    #: network call that fills each.
    filled: dict[str, list[ast.Call]]


def callback_data(
    calls: Iterable[ast.Call],
    bindings: Bindings,
    resolve: Callable[[ast.AST], tuple[str, ...]],
) -> CallbackData:
    """The callbacks the file's network calls are given (see the module docstring)."""
    params: dict[str, set[int]] = {}
    filled: dict[str, list[ast.Call]] = {}
    for call in calls:
        func = call.func
        if not isinstance(func, ast.Attribute):
            continue
        if func.attr == "setopt":
            given = _write_option(call)
        elif func.attr in NETWORK_CALLBACKS:
            position, keyword = NETWORK_CALLBACKS[func.attr]
            given = [k.value for k in call.keywords if k.arg == keyword]
            if len(call.args) > position:
                given.append(call.args[position])
        else:
            continue
        if not given or not any(is_network(f) for f in resolve(func)):
            continue
        for callback in given:
            if isinstance(callback, ast.Attribute) and callback.attr in _FILLED_BY:
                name = _dotted(callback.value)
                if name is not None:
                    filled.setdefault(name, []).append(call)
                continue
            targets: list[ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda] = []
            if isinstance(callback, ast.Lambda):
                targets.append(callback)
            elif isinstance(callback, ast.Name):
                targets += bindings.named(callback.id)
                targets += [
                    v for v in bindings.assigned.get(callback.id, ()) if isinstance(v, ast.Lambda)
                ]
            if not targets and func.attr == "setopt":
                # pycurl's WRITEDATA: the buffer or file itself is written to
                name = _dotted(callback)
                if name is not None:
                    filled.setdefault(name, []).append(call)
                continue
            for fn in targets[:MAX_CANDIDATES]:
                first = [*fn.args.posonlyargs, *fn.args.args]
                if first and first[0].arg in {"self", "cls"}:
                    first = first[1:]
                if first:
                    params.setdefault(first[0].arg, set()).add(id(fn))
    return CallbackData(params, filled)


#: pycurl's options that name where a transfer's body goes (recall10): a file or a buffer
#: (``WRITEDATA``, ``WRITETODATA``, ``FILE``), or a callable handed every piece
#: (``WRITEFUNCTION``: a function of the file, ``buf.write``). What lands there is the
#: server's answer, as ftplib's callbacks are handed theirs.
_WRITE_OPTIONS = frozenset({"WRITEDATA", "WRITEFUNCTION", "WRITETODATA", "FILE"})


def _write_option(call: ast.Call) -> list[ast.expr]:
    """The target of ``curl.setopt(pycurl.WRITEDATA, target)`` (any option named by an
    attribute or a name in :data:`_WRITE_OPTIONS`), else nothing."""
    if len(call.args) != 2:
        return []
    option = call.args[0]
    named = option.attr if isinstance(option, ast.Attribute) else getattr(option, "id", None)
    return [call.args[1]] if named in _WRITE_OPTIONS else []


def wraps_network(
    receiver: ast.expr,
    bindings: Bindings,
    resolve: Callable[[ast.AST], tuple[str, ...]],
) -> bool:
    """``receiver`` is bound to an object made from a network object: a socket wrapped
    (``s = ctx.wrap_socket(raw)``, ``with ctx.wrap_socket(raw) as s``) or unpacked from
    a network call's result (``conn, addr = s.accept()``), so what its ``recv`` returns
    is what the peer sent."""
    if not isinstance(receiver, ast.Name):
        return False
    values = [v for vs in bindings.scoped.get(receiver.id, {}).values() for v in vs]
    for bound in values[:MAX_CANDIDATES]:
        made = bound.value if isinstance(bound, ast.Await) else bound
        if not isinstance(made, ast.Call):
            continue
        if any(is_network(f) for f in resolve(made)):
            return True
        for arg in [*made.args, *(k.value for k in made.keywords)][:MAX_CANDIDATES]:
            if any(is_network(f) for f in resolve(arg)):
                return True
    return False


def _called(
    node: ast.Call, bindings: Bindings, resolve: Callable[[ast.AST], tuple[str, ...]]
) -> list[str]:
    """What a call calls, and for a method of a name bound to a call's result, that call
    too: ``client = zulip.Client(...)``, ``client.call_on_each_message(on)`` registers
    ``on`` with zulip (blind15), which the resolver does not follow into an instance."""
    names = list(resolve(node.func))
    func = node.func
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        for value in bindings.assigned.get(func.value.id, ())[:MAX_CANDIDATES]:
            if isinstance(value, ast.Call):
                names += resolve(value.func)
    return names


def bot_handler_params(
    calls: Iterable[ast.Call],
    bindings: Bindings,
    resolve: Callable[[ast.AST], tuple[str, ...]],
) -> dict[str, set[int]]:
    """Parameters of a chat bot's handlers, by name and handler: a remote user's message.

    A handler is a function of a file that imports a bot framework and is
    decorated, or passed to a call into the framework
    (``CommandHandler("run", run)``).
    """
    found: dict[str, set[int]] = {}
    frameworks = {
        module.split(".", 1)[0] for modules in bindings.imports.values() for module in modules
    } & BOT_FRAMEWORKS
    if not frameworks:
        # telebot = __import__("telebot") or importlib.import_module(...): imported all
        # the same (benchmarks/mutate_recall.py's import-* rewrites, issue 16)
        frameworks = {
            name.split(".", 1)[0]
            for values in bindings.assigned.values()
            for value in values[:MAX_CANDIDATES]
            if isinstance(value, ast.Call)
            for name in resolve(value)
        } & BOT_FRAMEWORKS
    if frameworks:
        registered = {
            a.id
            for n in calls
            if any(f.split(".", 1)[0] in frameworks for f in _called(n, bindings, resolve))
            for a in n.args
            if isinstance(a, ast.Name)
        }
        # class Bot(discord.Client): async def on_message(self, message): the framework
        # calls a subclass's on_* methods with what its users send, undecorated (blind33)
        overridden = {
            id(stmt)
            for found in bindings.classes.values()
            for cls in found[:MAX_CANDIDATES]
            if any(
                name.split(".", 1)[0] in frameworks
                for base in cls.bases[:MAX_CANDIDATES]
                for name in resolve(base)
            )
            for stmt in cls.body
            if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef)
            and stmt.name.startswith("on_")
        }
        for fn in bindings.functions:
            if fn.decorator_list or fn.name in registered or id(fn) in overridden:
                a = fn.args
                params = [*a.posonlyargs, *a.args, *a.kwonlyargs]
                params += [p for p in (a.vararg, a.kwarg) if p is not None]
                for p in params:
                    if p.arg not in {"self", "cls"}:
                        found.setdefault(p.arg, set()).add(id(fn))
    return found


@dataclass(frozen=True, slots=True)
class PeerInput:
    """What a server's request handlers of the file are handed by the peer."""

    #: ``self`` attributes that are the peer's, by name: the handler methods they are in.
    attributes: dict[str, set[int]]
    #: Parameters that are the peer's data (``data_received(self, data)``), by name.
    params: dict[str, set[int]]


def peer_input(
    classes: Iterable[ast.ClassDef], resolve: Callable[[ast.AST], tuple[str, ...]]
) -> PeerInput:
    """The request handlers among ``classes`` (a base of :data:`REQUEST_HANDLERS`, through
    the file's own classes too) and what the peer hands them."""
    by_name = {c.name: c for c in classes}
    attributes: dict[str, set[int]] = {}
    params: dict[str, set[int]] = {}
    for cls in by_name.values():
        kinds = _handler_kinds(cls, by_name, resolve, 0)
        if not kinds:
            continue
        peer_attributes = frozenset().union(*(a for a, _ in kinds))
        peer_methods = frozenset().union(*(m for _, m in kinds))
        for fn in cls.body:
            if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for attribute in peer_attributes:
                attributes.setdefault(attribute, set()).add(id(fn))
            given = [*fn.args.posonlyargs, *fn.args.args][1:2]
            if fn.name in peer_methods and given:
                params.setdefault(given[0].arg, set()).add(id(fn))
    return PeerInput(attributes, params)


def _handler_kinds(
    cls: ast.ClassDef,
    by_name: dict[str, ast.ClassDef],
    resolve: Callable[[ast.AST], tuple[str, ...]],
    depth: int,
) -> list[tuple[frozenset[str], frozenset[str]]]:
    """The :data:`REQUEST_HANDLERS` entries ``cls`` derives from (bounded)."""
    found = []
    for base in cls.bases[:MAX_CANDIDATES]:
        for name in resolve(base):
            if name in REQUEST_HANDLERS:
                found.append(REQUEST_HANDLERS[name])
        own = by_name.get(base.id) if isinstance(base, ast.Name) else None
        if own is not None and own is not cls and depth < 4:
            found += _handler_kinds(own, by_name, resolve, depth + 1)
    return found
