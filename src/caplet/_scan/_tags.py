"""Correlation tags a call records for the per-file chains (caplet._scan._correlate).

A network call to a URL written into the code (a fixed endpoint), path pieces
joined into a credential or autostart path, the whole environment handed to
a serialiser or a sender, a literal destination address: facts that mean
intent only together, so each is recorded as a tag (or a flag) and the
chains decide.
"""

from __future__ import annotations

import ast

from caplet._scan._correlate import Tag
from caplet._scan._filescan import FileScan
from caplet._scan._flow import Flow
from caplet._scan._indicators import IndicatorKind
from caplet._scan._resolve import is_network
from caplet._scan._rules import ENV_METHODS, ENVIRON_MAPPINGS
from caplet._scan._sources import Source
from caplet._scan._syntax import literal_prefix, shorten, url_host

__all__ = ["Tagger"]

#: Nodes looked at inside one expression (and the values its names are bound to).
_BUDGET = 400
#: Calls whose constant arguments are path pieces (joined for the indicators).
_PATH_BUILDERS = frozenset(
    {
        "os.path.join",
        "posixpath.join",
        "ntpath.join",
        "pathlib.Path",
        "pathlib.PurePath",
        "pathlib.PureWindowsPath",
        "pathlib.PurePosixPath",
    }
)
#: pathlib's searches of a folder, whose pattern names what is looked for under it.
_GLOBS = frozenset({"glob", "rglob"})
#: Serialisers: the whole environment passed to one is being packed up.
_SERIALISERS = frozenset(
    {
        "json.dumps",
        "json.dump",
        "pickle.dumps",
        "marshal.dumps",
        "builtins.str",
        "builtins.repr",
        "builtins.bytes",
        "base64.b64encode",
        "urllib.parse.urlencode",
    }
)
#: Method names that send or write data on whatever object they are called.
_SENDING_METHODS = frozenset(
    {"post", "put", "send", "sendall", "sendto", "urlopen", "request", "write", "dumps"}
)
#: URLs whose host a network call reaches: a websocket's and an FTP server's too (blind14).
_URL_PREFIXES = ("http://", "https://", "ws://", "wss://", "ftp://", "ftps://")
_LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1", "0.0.0.0"})  # noqa: S104 -- matched
#: logging's handlers that send every record to a host (its first argument, or the keyword
#: naming it): a logger with one is an egress (blind16: b16-re-logging-httphandler).
_REMOTE_LOG_HANDLERS = frozenset(
    f"logging.handlers.{n}"
    for n in ("HTTPHandler", "SocketHandler", "DatagramHandler", "SysLogHandler", "SMTPHandler")
)
_HANDLER_HOSTS = frozenset({"host", "address", "mailhost"})
#: A logger's methods that emit a record (to every handler the logger has).
_LOG_METHODS = frozenset({"debug", "info", "warning", "warn", "error", "critical", "exception"})


def _dotted_labels(node: ast.AST) -> bool:
    """``".".join([data, "q", "example"])``: two labels or more written out, joined by dots."""
    if not (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "join"
        and isinstance(node.func.value, ast.Constant)
        and node.func.value.value == "."
        and node.args
        and isinstance(node.args[0], ast.List | ast.Tuple)
    ):
        return False
    written = [
        e
        for e in node.args[0].elts
        if isinstance(e, ast.Constant) and isinstance(e.value, str) and e.value.strip(".")
    ]
    return len(written) >= 2


class Tagger:
    """The tags and destination facts of one file's calls."""

    def __init__(self, scan: FileScan, flow: Flow) -> None:
        self._scan = scan
        self._flow = flow
        #: Whether this file made a logging handler that sends to a host it names.
        self._remote_log = False
        #: The whole environment logged (line, spelling), until such a handler is seen.
        self._logged_env: list[tuple[int, str]] = []

    def _decoded(self, node: ast.AST) -> bool:
        return any(s is Source.DECODED for s, _ in self._flow.labels(node))

    def has_domain(self, node: ast.AST) -> bool:
        """A literal piece with a dot: the fixed domain a DNS query carries data to.

        Also a piece computed from literals (a domain base64-decoded, ``"x" + ".example"``)
        and labels written out and joined by dots (``".".join([data, "q", "example"])``),
        recall6, issue 16.
        """
        stack = [node]
        budget = _BUDGET
        while stack and budget:
            budget -= 1
            item = stack.pop()
            if isinstance(item, ast.Constant):
                if isinstance(item.value, str) and "." in item.value.strip("."):
                    return True
                continue
            if isinstance(item, ast.Call | ast.BinOp | ast.Subscript):
                value = self._flow.name_value(item)
                if value is not None and "." in value.strip("."):
                    return True
                if _dotted_labels(item):
                    return True
            if isinstance(item, ast.Name):
                stack.extend(self._flow.bindings.assigned.get(item.id, ())[:8])
            stack.extend(ast.iter_child_nodes(item))
        return False

    def literal_destination(self, node: ast.Call) -> bool:
        """A host, address or URL written into the call (or hidden by a decoder)."""
        candidates: list[ast.AST] = list(node.args[:1])
        if node.args and isinstance(node.args[0], ast.Tuple) and node.args[0].elts:
            candidates = [node.args[0].elts[0]]
        if len(node.args) >= 2 and isinstance(node.args[1], ast.Tuple) and node.args[1].elts:
            candidates.append(node.args[1].elts[0])  # sock.sendto(data, (host, port))
        for arg in candidates:
            value = self._flow.name_value(arg)
            if value is None:
                prefix = literal_prefix(arg)
                if not (prefix and prefix.startswith(_URL_PREFIXES)):
                    prefix = self._named_prefix(arg)
                value = prefix if prefix and prefix.startswith(_URL_PREFIXES) else None
            if value is None:
                if self._decoded(arg):
                    return True
                continue
            host = url_host(value) if value.startswith(_URL_PREFIXES) else value.split(":")[0]
            if host and host not in _LOCAL_HOSTS and "." in host and " " not in host:
                return True
        return self._packet_destination(node)

    def _packet_destination(self, node: ast.Call) -> bool:
        """A packet built in the call's first argument with an address written into it:
        scapy's ``send(IP(dst="192.0.2.9") / ICMP() / Raw(load=data))`` (blind18)."""
        if not node.args or not isinstance(node.args[0], ast.BinOp | ast.Call):
            return False
        for part in list(ast.walk(node.args[0]))[:64]:
            if not isinstance(part, ast.Call):
                continue
            for kw in part.keywords:
                value = self._flow.name_value(kw.value) if kw.arg == "dst" else None
                host = value.split(":")[0] if value else ""
                if host and host not in _LOCAL_HOSTS and "." in host and " " not in host:
                    return True
        return False

    def _named_prefix(self, node: ast.AST) -> str | None:
        """The start of a string expression that begins with a name bound to a literal:
        ``BASE + query`` with ``BASE = "https://x/dns-query?"`` (blind17)."""
        for _ in range(8):
            if _leading_field(node, "%s") and isinstance(node, ast.BinOp):
                # "%s/hosts/%s.json" % (BASE, key): the template starts with its first
                # value (blind18: b18-re-firebase-rtdb, a per-host key in the path)
                right = node.right
                node = right.elts[0] if isinstance(right, ast.Tuple) and right.elts else right
            elif _leading_field(node, "{}") and isinstance(node, ast.Call) and node.args:
                node = node.args[0]  # "{}/hosts/{}.json".format(BASE, key)
            elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Mod):
                node = node.left
            elif isinstance(node, ast.JoinedStr) and node.values:
                first = node.values[0]
                node = first.value if isinstance(first, ast.FormattedValue) else first
            else:
                break
        return self._flow.name_value(node) if isinstance(node, ast.Name) else None

    def fixed_endpoint(self, node: ast.Call, funcs: tuple[str, ...]) -> None:
        """A network call whose URL is written into the code (a fixed endpoint)."""
        if not any(is_network(f) for f in funcs):
            return
        arg = node.args[0] if node.args else None
        for kw in node.keywords:
            if kw.arg == "url":
                arg = kw.value
        if arg is None:
            return
        for value in self.values(arg):
            prefix = literal_prefix(value)
            if prefix is not None and prefix.startswith(_URL_PREFIXES):
                host = url_host(prefix) or ""
                if host and host not in _LOCAL_HOSTS:
                    self._scan.tag(Tag.FIXED_ENDPOINT, node.lineno, prefix[:80])
                    return

    def joined_path(self, node: ast.Call, funcs: tuple[str, ...]) -> None:
        """``os.path.join(home, ".aws", "credentials")``: indicators see the joined path;
        so do pathlib's joins handed to a call and a ``glob``/``rglob`` pattern under
        the folder it searches (mend19)."""
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in _GLOBS and node.args:
            pattern = node.args[0]
            if isinstance(pattern, ast.Constant) and isinstance(pattern.value, str):
                folder = self.path_pieces(func.value) or ["?"]
                star = "**/" if func.attr == "rglob" else ""
                text = "/".join([*folder, star + pattern.value])
                self._scan.indicators(text, node.lineno, node.col_offset)
        for arg in node.args:
            if isinstance(arg, ast.BinOp) and isinstance(arg.op, ast.Div):
                self.path_chain(arg)
        if _PATH_BUILDERS.isdisjoint(funcs):
            return
        parts = [
            a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)
        ]
        if len(parts) >= 2:
            self._scan.indicators("/".join(parts), node.lineno, node.col_offset)

    def path_chain(self, node: ast.BinOp) -> None:
        """A pathlib path joined by ``/`` (``Path.home() / "Exodus" / "exodus.wallet"``):
        indicators see its pieces joined, as they see ``os.path.join``'s (mend19)."""
        pieces = self.path_pieces(node)
        if sum(piece != "?" for piece in pieces) >= 2:
            self._scan.indicators("/".join(pieces), node.lineno, node.col_offset)

    def path_pieces(self, node: ast.expr, hops: int = 2) -> list[str]:
        """The pieces of a path: ``/`` joins of literals, a path built from literals
        (``Path("a", "b")``), a name bound once to either (``hops`` at most); "?" for a
        piece not written out (``Path.home()``, an environment variable)."""
        pieces: list[str] = []
        while isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            right = node.right
            value = right.value if isinstance(right, ast.Constant) else None
            pieces.append(value if isinstance(value, str) else "?")
            node = node.left
            if len(pieces) > _BUDGET:
                break
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            head = [node.value]
        elif isinstance(node, ast.Call) and not _PATH_BUILDERS.isdisjoint(
            self._flow.resolve(node.func)
        ):
            head = [
                a.value if isinstance(a, ast.Constant) and isinstance(a.value, str) else "?"
                for a in node.args
            ] or ["?"]
        elif isinstance(node, ast.Name) and hops:
            bound = self._flow.bindings.assigned.get(node.id, ())
            head = self.path_pieces(bound[0], hops - 1) if len(bound) == 1 else ["?"]
        else:
            head = ["?"]
        return [*head, *reversed(pieces)]

    def environ_dump(self, node: ast.Call, funcs: tuple[str, ...]) -> None:
        """Tag the whole environment passed to a serialiser or a sender."""
        func = node.func
        method = func.attr if isinstance(func, ast.Attribute) else ""
        if not _REMOTE_LOG_HANDLERS.isdisjoint(funcs):
            self._remote_handler(node, funcs)
        elif method in _LOG_METHODS:
            whole = next(filter(None, map(self.whole_environ, node.args)), None)
            if whole is not None:
                self._logged_env.append((node.lineno, whole))
                self._logged_sent()
            return
        if not (
            method in _SENDING_METHODS
            or not _SERIALISERS.isdisjoint(funcs)
            or any(is_network(f) for f in funcs)
        ):
            return
        for arg in (*node.args, *(k.value for k in node.keywords)):
            whole = self.whole_environ(arg)
            if whole is not None:
                self._scan.tag(Tag.ENV_DUMP, node.lineno, whole)
                return

    def _remote_handler(self, node: ast.Call, funcs: tuple[str, ...]) -> None:
        """A logging handler built to send to a host written into the code: every record
        a logger of this file emits is sent there (its egress and its fixed endpoint)."""
        host = next((k.value for k in node.keywords if k.arg in _HANDLER_HOSTS), None)
        probe = ast.Call(node.func, [host] if host is not None else node.args[:1], [])
        if not self.literal_destination(ast.copy_location(probe, node)):
            return
        api = next(f for f in funcs if f in _REMOTE_LOG_HANDLERS)
        self._scan.tag(Tag.EGRESS, node.lineno, api)
        self._scan.tag(Tag.FIXED_ENDPOINT, node.lineno, api)
        self._remote_log = True
        self._logged_sent()

    def _logged_sent(self) -> None:
        """The whole environment logged in a file whose logging sends to a fixed host."""
        if self._remote_log:
            for line, whole in self._logged_env:
                self._scan.tag(Tag.ENV_DUMP, line, whole)
            self._logged_env.clear()

    def whole_environ(self, arg: ast.AST) -> str | None:
        """``os.environ`` itself somewhere in ``arg`` (not one key of it)."""
        stack = [arg]
        budget = _BUDGET
        while stack and budget > 0:
            node = stack.pop()
            budget -= 1
            if isinstance(node, ast.Subscript):
                stack.append(node.slice)  # os.environ["HOME"] is one key
                continue
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ENV_METHODS
            ):
                stack.extend(node.args)  # os.environ.get("HOME") too
                continue
            if isinstance(node, ast.Name | ast.Attribute):
                for name in self._flow.resolve(node):
                    if name in ENVIRON_MAPPINGS:
                        return name
            stack.extend(ast.iter_child_nodes(node))
        return None

    def persistence_marker(self, node: ast.AST) -> str | None:
        """An autostart location named by the strings inside ``node`` (names followed once).

        Pieces count joined too: ``os.path.join(appdata, "Start Menu",
        "Programs", "Startup")`` names the Startup folder without any one
        literal doing so.
        """
        stack: list[ast.AST] = [node]
        seen: set[str] = set()
        pieces: list[str] = []
        budget = _BUDGET
        while stack and budget > 0:
            item = stack.pop()
            budget -= 1
            if isinstance(item, ast.Constant) and isinstance(item.value, str):
                pieces.append(item.value)
                continue
            if isinstance(item, ast.BinOp | ast.JoinedStr | ast.Call | ast.Subscript):
                # "~/.ba" + "shrc", "cront" + "ab -": the text the code computes
                computed = self._flow.name_value(item)
                if computed is not None:
                    pieces.append(computed)
            if isinstance(item, ast.Call):
                joined = [
                    a.value
                    for a in item.args
                    if isinstance(a, ast.Constant) and isinstance(a.value, str)
                ]
                if len(joined) >= 2:
                    pieces.append("/".join(joined))
            elif isinstance(item, ast.Name) and item.id not in seen:
                seen.add(item.id)
                stack.extend(self._flow.bindings.assigned.get(item.id, ())[:8])
            stack.extend(ast.iter_child_nodes(item))
        path = self._flow.path_text(node)
        if path is not None:
            # Path.home() / ".config" / "systemd" / "user": pathlib's pieces (branch blind13)
            pieces.append(path)
        for text in pieces:
            if any(i.kind is IndicatorKind.PERSISTENCE for i in self._flow.indicators(text)):
                return shorten(text)
        return None

    def values(self, node: ast.AST) -> list[ast.AST]:
        """``node`` and, for a name, the values it was bound to (one hop)."""
        if isinstance(node, ast.Name):
            return [node, *self._flow.bindings.assigned.get(node.id, ())[:8]]
        return [node]


def _leading_field(node: ast.AST, field: str) -> bool:
    """``node`` formats a template written into the code that starts with ``field``: ``"%s"
    % ...`` (``field`` ``%s``) or ``"{}".format(...)`` (``field`` ``{}``, ``{0}`` too)."""
    if field == "%s":
        template = (
            node.left if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod) else None
        )
        starts: tuple[str, ...] = ("%s",)
    else:
        func = node.func if isinstance(node, ast.Call) else None
        template = func.value if isinstance(func, ast.Attribute) and func.attr == "format" else None
        starts = ("{}", "{0}")
    return (
        isinstance(template, ast.Constant)
        and isinstance(template.value, str)
        and template.value.startswith(starts)
    )
