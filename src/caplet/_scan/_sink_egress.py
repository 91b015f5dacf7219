"""Threat sinks of data leaving the host: the environment, secrets, credentials and
reconnaissance reaching an egress (CPL-THR-006, 007, 017) or a DNS name, credentials a
function is handed sent in clear text (CPL-THR-026), and a library's function replaced by one
that sends (CPL-THR-025).
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Callable
from typing import Final

import re2

from caplet._scan._commands import Commands
from caplet._scan._correlate import Tag
from caplet._scan._filescan import FileScan
from caplet._scan._flow import Flow, Labels, is_network
from caplet._scan._sink_documents import user_documents
from caplet._scan._source_labels import METADATA_HOSTS, RUNNER_CREDENTIALS
from caplet._scan._sources import (
    COOKIE_JAR_READERS,
    COOKIE_READERS,
    EGRESS_VERBS,
    NON_PAYLOAD_KEYWORDS,
    Source,
)
from caplet._scan._syntax import shorten
from caplet._scan._tags import Tagger

__all__ = ["EgressSinks", "fixed_host", "test_file"]


#: A host or address written into source: ``"https://x.example/"``, ``"192.0.2.1"``; a
#: websocket's or FTP server's URL too (``ws://203.0.113.9:8765``: blind14).
_FIXED_HOST: Final = re2.compile(
    r"""(?:https?|wss?|ftps?)://(?:(?:[A-Za-z0-9-]+\.)+[A-Za-z]{2,}|(?:\d{1,3}\.){3}\d{1,3})|"""
    r"""['"](?:\d{1,3}\.){3}\d{1,3}['"]"""
)


#: An address credentials must never be sent to: plain http, or an IP address.
_CLEARTEXT_DESTINATION: Final = re2.compile(
    r"(?i)http://|https://(?:\d{1,3}\.){3}\d{1,3}(?:[:/]|$)"
)


#: A parameter that holds a credential.
_CREDENTIAL_NAME: Final = re2.compile(
    r"(?i)passw|passphrase|^pw$|pkey|private_?key|secret|token$|api_?key|mnemonic|seed_?phrase"
)


_LOCAL_ADDRESS: Final = re2.compile(r"""(?:['"]|//)(?:127\.|0\.0\.0\.0|localhost\b)""")

#: Socket methods given an address ``(host, port)``, and the argument that holds it: the
#: host is resolved before anything is sent (``create_connection`` is a DNS function).
_ADDRESS_ARGUMENT: Final = {"connect": 0, "connect_ex": 0, "sendto": -1}
#: URL schemes whose host a request resolves.
_URL_SCHEMES: Final = ("http://", "https://", "ws://", "wss://", "ftp://")
#: What the data a name resolution carries may be: host data, the environment, secrets.
_RESOLVED_DATA: Final = frozenset(
    {Source.RECON, Source.ENVIRONMENT, Source.SECRET, Source.CREDENTIAL}
)


#: Folders and files of a test suite (where replacing a library's function is routine).
_TEST_DIRS = frozenset({"tests", "test", "testing"})
#: Modules whose functions replaced are no third-party library's (the visitor's rule).
_NOT_PATCHED: Final = frozenset(sys.stdlib_module_names) | {"builtins"}


def test_file(path: str) -> bool:
    """A file of a test suite: under ``tests/``, or ``test_*.py``/``conftest.py``."""
    parts = path.split("/")
    name = parts[-1]
    return (
        not _TEST_DIRS.isdisjoint(parts[:-1]) or name.startswith("test_") or name == "conftest.py"
    )


def fixed_host(text: str) -> bool:
    """A non-local host or address literal in ``text``."""
    encoded = text.encode("utf-8", "surrogatepass")
    return _FIXED_HOST.search(encoded) is not None and _LOCAL_ADDRESS.search(encoded) is None


#: The browser told to open a URL fetches it: what its query carries is sent (blind16:
#: b16-re-webbrowser-open, host details sent past egress filters by the user's browser).
BROWSER_OPENS: Final = frozenset(
    {"webbrowser.open", "webbrowser.open_new", "webbrowser.open_new_tab", "webbrowser.get().open"}
)


class EgressSinks:
    """The checks of :class:`caplet._scan._sinks.Sinks` this module holds (a mixin: the
    state is the sinks' own, declared here for the type checker)."""

    _scan: FileScan
    _flow: Flow
    _tags: Tagger
    _fixed_destination: bool
    _recon_egress: list[tuple[ast.Call, Labels, str]]
    _document_egress: list[tuple[ast.Call, str, str]]
    _secret_egress: list[tuple[ast.Call, str, str]]
    _patches: list[tuple[ast.AST, str, list[ast.AST]]]
    _commands: Commands
    _pending: list[Callable[[], None]]

    def browser_opened(self, node: ast.Call, funcs: tuple[str, ...]) -> None:
        """A URL handed to the user's browser: an egress of what it carries."""
        if self._tags.literal_destination(node):
            self._fixed_destination = True
        api = next(f for f in funcs if f in BROWSER_OPENS)
        self._pending.append(lambda: self._egress(node, api))

    def patched(self, node: ast.AST, api: str, value: ast.expr) -> None:
        """A third-party library's ``api`` replaced by ``value``: a threat when ``value``
        is a function of this file that reaches the network and a fixed host (checked
        once the file is seen)."""
        if "()" in api or test_file(self._scan.file):
            # an instance's attribute (a fixture's connection), or a test's monkeypatch:
            # tests replace library functions as a matter of course
            return
        wrappers = {"builtins.staticmethod", "builtins.classmethod"}
        while (
            isinstance(value, ast.Call)
            and value.args
            and wrappers & set(self._flow.resolve(value.func))
        ):
            value = value.args[0]  # staticmethod(f): f
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Name):
            # _wrap(original): a factory of this file, whose inner function replaces it
            value = value.func
        if isinstance(value, ast.Name):
            found = self._flow.bindings.named(value.id)
            body: list[ast.AST] = [*found[:4], *self._flow.bindings.classes.get(value.id, [])[:2]]
            body += [
                v
                for v in self._flow.bindings.assigned.get(value.id, ())
                if isinstance(v, ast.Lambda)
            ]
        elif isinstance(value, ast.Lambda):
            body = [value]
        else:
            return
        if body:
            self._patches.append((node, api, body))

    def looped_setattr(self, node: ast.Call) -> None:
        """``setattr(lib.Cls, name, f)`` with ``name`` taken by a loop from a literal list
        of names (``for n in ("from_bytes", "from_seed")``): a third-party library's
        function replaced, as a written-out name is (blind17, b17-ot-keypair-hfspace)."""
        name = node.args[1] if len(node.args) == 3 else None
        if not isinstance(name, ast.Name) or self._flow.name_value(name) is not None:
            return
        names = [
            e.value
            for iterable in self._flow.bindings.iterated.get(name.id, ())[:2]
            if isinstance(iterable, ast.List | ast.Tuple)
            for e in iterable.elts[:8]
            if isinstance(e, ast.Constant) and isinstance(e.value, str)
        ]
        if not names:
            return
        for base in self._flow.resolve(node.args[0]):
            top = base.split(".", 1)[0]
            if top and top not in _NOT_PATCHED and top not in self._scan.local_modules:
                self.patched(node, f"{base}.{names[0]}", node.args[2])
                return

    def _patch_check(self) -> None:
        fixed_file = self._fixed_destination or Tag.FIXED_ENDPOINT in self._scan.tags
        for node, api, bodies in self._patches:
            egress = fixed = False
            for body in [*bodies, *self._helpers(bodies)]:
                for n in self._with_bound(body):
                    if isinstance(n, ast.Name | ast.Attribute) and any(
                        is_network(r) and r.rsplit(".", 1)[-1] in EGRESS_VERBS
                        for r in self._flow.resolve(n)
                    ):
                        egress = True
                    elif (
                        isinstance(n, ast.Constant)
                        and isinstance(n.value, str)
                        and fixed_host(repr(n.value))
                    ):
                        fixed = True
            if (egress and (fixed or fixed_file)) or (fixed and fixed_file):
                self._scan.emit(
                    "CPL-THR-025",
                    f"{api} replaced",
                    getattr(node, "lineno", 0),
                    getattr(node, "col_offset", None),
                )

    def piped_shell(self, node: ast.Call, command: ast.expr) -> None:
        """A shell started with no script and its standard input piped or given a socket,
        in a file whose socket connects to a host written into it: a reverse shell that
        relays the socket to the shell by hand (two threads copying between them: the
        pycord-self backdoor, blind14). A shell given a script or a command (``-c``, ``/c``
        and its text), or started where nothing connects out, is not."""
        words = self._commands.words(command) or self._commands.literal_pieces(command)
        if not words or any(not w.startswith(("-", "/")) for w in words[1:]) or "-c" in words:
            return
        stdin = next((k.value for k in node.keywords if k.arg == "stdin"), None)
        if stdin is None or "subprocess.DEVNULL" in self._flow.resolve(stdin):
            return
        if self._fixed_destination and Tag.SOCKET in self._scan.tags:
            self._scan.emit(
                "CPL-THR-008",
                f"{words[0]} started with its input piped beside a socket to a fixed host",
                node.lineno,
                node.col_offset,
            )

    def _with_bound(self, body: ast.AST) -> list[ast.AST]:
        """``body``'s nodes and those of the values its names are bound to (bounded): a
        replacement sending to ``_SINK``, a module constant, sends to a fixed host."""
        nodes = list(ast.walk(body))
        names = {n.id for n in nodes if isinstance(n, ast.Name)}
        for name in sorted(names)[:32]:
            for value in self._flow.bindings.assigned.get(name, ())[:2]:
                if isinstance(value, ast.Constant | ast.Tuple | ast.JoinedStr | ast.BinOp):
                    nodes += ast.walk(value)
        return nodes

    def _helpers(self, bodies: list[ast.AST]) -> list[ast.AST]:
        """The functions of this file a replacement calls by name (one hop, bounded): a
        patched ``Account.create`` that hands each key to ``_send`` sends it (blind14)."""
        # called, or handed on to be called (Thread(target=_send): blind17): every name
        called = {n.id for body in bodies for n in ast.walk(body) if isinstance(n, ast.Name)}
        own = {id(b) for b in bodies}
        found: list[ast.AST] = [
            f for f in self._flow.bindings.functions if f.name in called and id(f) not in own
        ]
        # a class of this file made by the replacement (a path hook's factory returning
        # its finder, recall18)
        classes = self._flow.bindings.classes
        found += [c for name in sorted(called & classes.keys()) for c in classes[name][:2]]
        return [f for f in found if id(f) not in own][:8]

    def _egress(self, node: ast.Call, api: str) -> None:
        flow = self._flow
        payload = [
            *node.args,
            *(
                k.value
                for k in node.keywords
                if k.arg not in NON_PAYLOAD_KEYWORDS and not self._site_cookies(node, k)
            ),
        ]
        labels: set[tuple[Source, str]] = set()
        for arg in payload:
            labels |= flow.labels(arg)
        for k in node.keywords:
            if k.arg == "headers":
                # a header authenticates to the provider, but no provider takes a runner's
                # own credential from a package (blind17)
                labels |= {label for label in flow.labels(k.value) if label in RUNNER_CREDENTIALS}
        sources = {s for s, _ in labels}
        line, col = node.lineno, node.col_offset
        if Source.ENVIRONMENT in sources:
            self._scan.emit("CPL-THR-006", f"the environment sent by {api}", line, col)
        secrets = sorted({d for s, d in labels if s is Source.SECRET})
        if len(secrets) >= 2:
            # one token per provider, sent to it, is authentication; several
            # gathered for a host written into the code is collection
            self._secret_egress.append((node, ", ".join(secrets), api))
        credentials = sorted(d for s, d in labels if s is Source.CREDENTIAL)
        if credentials:
            self._scan.emit("CPL-THR-007", f"{', '.join(credentials)} sent by {api}", line, col)
        if (Source.RECON, "cloud metadata") in labels and self._asks_metadata(node):
            # the metadata service's token handed back to it (IMDSv2) is how it is read
            labels.discard((Source.RECON, "cloud metadata"))
            sources = {s for s, _ in labels}
        if Source.RECON in sources:
            self._recon_egress.append((node, frozenset(labels), api))
        folder = user_documents(flow, payload) if payload else None
        if folder is not None:
            self._document_egress.append((node, folder, api))
        self._handed_credentials(node, api, payload)
        if labels:
            self._named_host(node, api)

    def _asks_metadata(self, node: ast.Call) -> bool:
        """The request's URL (its literals, and those of the names it is built from, three
        bindings deep: ``req = Request(BASE + path)``) names a cloud metadata service."""
        assigned = self._flow.bindings.assigned
        todo: list[tuple[ast.AST, int]] = [(a, 0) for a in node.args[:1]]
        while todo:
            expr, depth = todo.pop()
            for part in ast.walk(expr):
                if isinstance(part, ast.Constant) and isinstance(part.value, str):
                    if any(h in part.value for h in METADATA_HOSTS):
                        return True
                elif isinstance(part, ast.Name) and depth < 3:
                    todo += [(v, depth + 1) for v in assigned.get(part.id, ())[:4]]
        return False

    def _site_cookies(self, node: ast.Call, keyword: ast.keyword) -> bool:
        """A browser's cookies handed to a request as its cookies, as their libraries are
        used (recall14): a jar (``cookies=browser_cookie3.chrome()``), which sends each
        cookie to its own site only, or the cookies read for the URL the request asks
        (``requests.get(url, cookies=chrome_cookies(url))``). A dict built from a jar, or
        another site's cookies, sent to a URL is the cookies sent."""
        if keyword.arg != "cookies":
            return False
        value = keyword.value
        if isinstance(value, ast.Name):
            bound = self._flow.bindings.assigned.get(value.id, ())
            value = bound[0] if len(bound) == 1 else value
        if not isinstance(value, ast.Call):
            return False
        modules = {f.split(".", 1)[0] for f in self._flow.resolve(value.func)}
        if modules & COOKIE_JAR_READERS:
            return True
        urls = [*node.args, *(k.value for k in node.keywords if k.arg == "url")]
        return bool(modules & COOKIE_READERS) and any(
            value.args and ast.dump(value.args[0]) == ast.dump(url) for url in urls
        )

    def _named_host(self, node: ast.Call, api: str) -> None:
        """The host name an egress resolves before it sends: a socket address's host, a
        URL's. Built from host data and a domain written in the code, it is a DNS query
        that carries the data whatever the request itself sends (CPL-THR-017, recall6)."""
        position = _ADDRESS_ARGUMENT.get(api.rsplit(".", 1)[-1])
        if position is not None:
            address = node.args[position] if node.args else None
            if isinstance(address, ast.Name):
                bound = self._flow.bindings.assigned.get(address.id, ())
                address = bound[0] if len(bound) == 1 else address
            if isinstance(address, ast.Tuple) and address.elts:
                self._dns(node, address.elts[0])
            return
        url = node.args[0] if node.args else None
        if url is None:
            url = next((k.value for k in node.keywords if k.arg == "url"), None)
        host = self._url_host(url) if url is not None else []
        computed = [h for h in host if not isinstance(h, str)]
        if computed:
            flow = self._flow
            labels = frozenset().union(*(flow.labels(h) for h in computed))
            domain = any("." in h.strip(".") for h in host if isinstance(h, str)) or any(
                self._tags.has_domain(h) for h in computed
            )
            self._resolved(node, labels, domain=domain)

    def _url_host(self, url: ast.expr) -> list[ast.expr | str]:
        """The host of a URL built by an f-string or ``+`` (a name bound once followed):
        its computed pieces and the literal text up to the path; empty when unknown."""
        if isinstance(url, ast.Name):
            bound = self._flow.bindings.assigned.get(url.id, ())
            url = bound[0] if len(bound) == 1 else url
        pieces: list[ast.expr] = []
        if isinstance(url, ast.JoinedStr):
            pieces = [v.value if isinstance(v, ast.FormattedValue) else v for v in url.values]
        elif isinstance(url, ast.BinOp) and isinstance(url.op, ast.Add):
            stack: list[ast.expr] = [url]
            while stack and len(pieces) < 32:
                item = stack.pop()
                if isinstance(item, ast.BinOp) and isinstance(item.op, ast.Add):
                    stack += [item.right, item.left]
                else:
                    pieces.append(item)
        if not pieces or not isinstance(pieces[0], ast.Constant):
            return []
        first = pieces[0].value
        if not isinstance(first, str) or not first.lower().startswith(_URL_SCHEMES):
            return []
        host: list[ast.expr | str] = []
        for piece in [first.split("://", 1)[1], *pieces[1:]]:
            text = piece.value if isinstance(piece, ast.Constant) else piece
            if isinstance(text, str):
                end = min((i for i in map(text.find, "/?#:") if i >= 0), default=-1)
                host.append(text if end < 0 else text[:end])
                if end >= 0:
                    break
            elif isinstance(piece, ast.expr):
                host.append(piece)
        return host

    def _handed_credentials(self, node: ast.Call, api: str, payload: list[ast.expr]) -> None:
        """Credentials a function of this file is handed (its parameters ``password``,
        ``pkey``...) sent by it to an ``http://`` or raw-IP address written in the call."""
        destination = self._flow.name_value(node.args[0]) if node.args else None
        if destination is None:
            url = next((k.value for k in node.keywords if k.arg == "url"), None)
            destination = self._flow.name_value(url) if url is not None else None
        if not destination or not _CLEARTEXT_DESTINATION.match(destination.encode()):
            return
        if _LOCAL_ADDRESS.search(b"//" + destination.encode().split(b"//", 1)[-1]):
            return
        params = self._parameters(node)
        if not params:
            return
        # the payload's names, and the values a local name of it was given (two steps)
        names: set[str] = set()
        stack: list[tuple[ast.AST, int]] = [(arg, 0) for arg in payload]
        while stack and len(names) < 64:
            item, step = stack.pop()
            for n in ast.walk(item):
                if isinstance(n, ast.Name) and n.id not in names:
                    names.add(n.id)
                    if step < 2 and n.id not in params:
                        bound = self._flow.bindings.assigned.get(n.id, ())[:4]
                        stack.extend((value, step + 1) for value in bound)
        handed = sorted(n for n in names & params if _CREDENTIAL_NAME.search(n))
        if handed:
            self._scan.emit(
                "CPL-THR-026",
                f"{', '.join(handed)} sent by {api} to {shorten(destination)}",
                node.lineno,
                node.col_offset,
            )

    def _parameters(self, node: ast.AST) -> set[str]:
        """The parameter names of the function ``node`` is in (empty at module level)."""
        scope = self._flow.scope(node)
        if not scope:
            return set()
        fn = self._flow.bindings.functions_by_id.get(scope)
        if fn is None:
            return set()
        a = fn.args
        return {p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)}

    def _dns(self, node: ast.Call, host: ast.expr) -> None:
        labels = self._flow.labels(host)
        if any(s in _RESOLVED_DATA for s, _ in labels):
            self._resolved(node, labels, domain=self._tags.has_domain(host))

    def _resolved(self, node: ast.Call, labels: Labels, *, domain: bool) -> None:
        """A name resolved that carries ``labels`` under a domain written in the code."""
        # the environment walked into labels too (for k, v in os.environ.items(): resolve)
        recon = sorted({d for s, d in labels if s in _RESOLVED_DATA})
        if recon and domain:
            api = min(self._flow.resolve(node.func), default="a name lookup")
            self._scan.emit(
                "CPL-THR-017",
                f"{', '.join(recon)} in a DNS query ({api})",
                node.lineno,
                node.col_offset,
            )
