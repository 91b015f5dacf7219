"""The prefilter's triggers for the data-flow rules, derived from the rules' own tables.

The prefilter (:mod:`caplet._scan._prefilter`) skips a file only when no rule
could fire on it; for the data-flow threats that means: no source of a kind
the rule follows, or no sink. Written out by hand, those token lists drifted
from the tables the rules read (:mod:`caplet._scan._sources`, the process
calls of :data:`~caplet._scan._rules.API_RULES`): ``os.uname()`` or
``os.environ["USER"]`` sent to a host, ``marshal.loads`` into
``os.system``, a ``twitchio`` bot running its messages, all found by the
rules and all hidden by the prefilter (tests/_scan/test_prefilter_soundness.py
enumerates the tables and holds the two to the same findings). Here each
trigger is built from the table, so an entry added there is a trigger here.

Each API is matched only as code can spell it (:func:`_function_spellings`,
:func:`_module_spellings`): ``sys.platform`` is not the ``platform`` module
and "the file system" is not ``os.system``, which keeps the added triggers
from sending every file with such prose to the AST pass. What no text
pattern can see: a name or literal *computed* at run time (``"gnip"[::-1]``,
``"US" + "ER"``) that the data flow evaluates; names computed for lookups
have their own pairs in the prefilter, other literals do not (a known gap,
written down in docs/architecture.md).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final

from caplet._scan._packed_bytes import MIN_INTEGERS
from caplet._scan._reachable import REACHABLE_MODULES
from caplet._scan._rules import API_RULES, ENV_FUNCTIONS, ENVIRON_MAPPINGS
from caplet._scan._source_labels import CREDENTIAL_MARKERS, METADATA_HOSTS
from caplet._scan._sources import (
    COOKIE_READERS,
    DECODER_METHODS,
    DECODERS,
    DNS_FUNCTIONS,
    LITERAL_DECODERS,
    NETWORK_MODULES,
    NETWORK_PROGRAMS,
    NETWORK_STREAMS,
    PUBLIC_IP_SERVICES,
    RECON_ENV_NAMES,
    RECON_FILES,
    RECON_FUNCTIONS,
    RECON_PROGRAMS,
    REQUEST_HANDLERS,
    RUNS_FILE,
)
from caplet._scan._vendored import VENDORED_NETWORK

__all__ = [
    "CONTAINER_COMMAND",
    "DECODER_TOKENS",
    "DOCKER_API",
    "ENV_READ_TOKENS",
    "ESCAPE_KEYS",
    "NETWORK_INPUT_TOKENS",
    "NETWORK_MODULE_TOKENS",
    "NETWORK_PROGRAM_TOKENS",
    "NETWORK_TOKENS",
    "PROCESS_CALL_TOKENS",
    "PROCESS_TOKENS",
    "RECON_ENV_TOKENS",
    "RECON_TOKENS",
    "RUNS_FILE_TOKENS",
    "words",
]


def words(names: Iterable[str]) -> str:
    """``names`` as one alternation of whole words (RE2 syntax), longest first."""
    ordered = sorted(set(names), key=lambda n: (-len(n), n))
    return r"\b(?:" + "|".join(re.escape(n) for n in ordered) + r")\b"


#: Function names every module has one of: for an API named so, the code must name
#: its module instead (``marshal.loads``, ``subprocess.run``, ``platform.node``).
_GENERIC_NAMES: Final = frozenset(
    {"loads", "decode", "run", "call", "node", "resolve", "query", "get", "open"}
)
#: Function names common as attributes of anything, whose module is common too: the code
#: must name the function *with* its module (:func:`_qualified_spellings`). inspect.stack
#: is reconnaissance, ``np.stack`` and ``self.stack`` are not: two thirds of the benign
#: bytes parsed for reconnaissance beside the network (issue 16); ``import inspect``
#: alone is in a twentieth of them. ``platform.node`` likewise: ``import platform``
#: (for ``platform.system()``, ``python_version()``) is in a tenth of the stdlib's files.
_QUALIFIED_NAMES: Final = frozenset(
    # recall6: asyncio's protocol classes, a request handler's base (``REQUEST_HANDLERS``):
    # ``typing.Protocol`` is everywhere
    {"stack", "node", "Protocol", "BaseProtocol", "DatagramProtocol"}
)


def _spelled(apis: Iterable[str]) -> tuple[dict[str, set[str]], frozenset[str]]:
    """(function names by module, module names): how the text of code reaching one of
    ``apis`` spells it.

    The resolver gives a call the dotted name ``mod.name`` only through a binding the
    text spells: ``import mod`` then ``mod.name`` (or an alias's ``.name``), ``from mod
    import name [as x]``, ``from mod import *`` then a bare ``name``, ``__import__("mod")``;
    a name *computed* at run time is the lookup pairs' (below). So the function's name
    is in the text, in one of the forms of :func:`_function_spellings`; for a name every
    module has (:data:`_GENERIC_NAMES`) the module's is, in one of
    :func:`_module_spellings`. A method of any receiver (``x.decrypt``) has module "".
    """
    functions: dict[str, set[str]] = {}
    modules: set[str] = set()
    for api in apis:
        head, _, name = api.removeprefix("builtins.").rpartition(".")
        if name in _GENERIC_NAMES:
            modules.add(head.split(".", 1)[0])
        else:
            functions.setdefault(head, set()).add(name)
    return functions, frozenset(modules)


#: Between the words of an import statement: blanks, or a backslash ending a line.
_GAP = r"(?:\s|\\)"


def _alternation(names: Iterable[str]) -> str:
    ordered = sorted(set(names), key=lambda n: (-len(n), n))
    return "(?:" + "|".join(re.escape(n) for n in ordered) + ")"


def _function_spellings(by_module: dict[str, set[str]], *, dot: str = r"\.\s*") -> str:
    """Every way code can name one of the functions of ``by_module``, in the resolver's terms.

    An attribute (``os.system``, ``m.system``, ``f.decrypt``); a literal name
    (``getattr(os, "system")``, ``vars(os)["system"]``); an import from its module
    naming it (``from os import (path, system as run)``: anything but a closing
    parenthesis between, so line breaks and backslashes too); a star import of its
    module, after which any bare name may be it. Prose ("the file system") is none
    of them. No pattern spans more than an import statement: one that did (``import``
    anywhere, the name anywhere after) made the RE2 set's lazily built DFA five times
    slower on a first pass over new text.
    """
    every = _alternation(n for names in by_module.values() for n in names)
    parts = [rf"{dot}{every}\b|['\"]{every}['\"]"]
    for module, names in sorted(by_module.items()):
        if module:
            spelled = r"\s*\.\s*".join(re.escape(p) for p in module.split("."))
            parts.append(
                rf"\bfrom{_GAP}+{spelled}{_GAP}+import\b(?:[^)]*\b{_alternation(names)}\b|{_GAP}*\*)"
            )
    return "|".join(parts)


def _module_spellings(modules: Iterable[str], *, reachable: bool = True) -> str:
    """Every way code can bind one of the top-level ``modules``: ``from m import``, ``import
    a, m as x`` (``import m.sub`` too), a literal name (``__import__("m")``,
    ``import_module("m.sub")``, ``sys.modules["m"]``), and for a module the resolver
    finds on any imported module (:data:`~caplet._scan._reachable.REACHABLE_MODULES`:
    ``shutil.os``, ``platform.subprocess``, ``tempfile._os``) that attribute.
    ``sys.platform`` is none of them (``platform`` is not reachable so)."""
    wanted = set(modules)
    name = _alternation(wanted)
    attributes = sorted({a for a, m in REACHABLE_MODULES.items() if m in wanted})
    attribute = rf"|\.\s*{_alternation(attributes)}\b" if reachable and attributes else ""
    return (
        rf"\bfrom{_GAP}+{name}\b|['\"]{name}[.'\"]|"
        rf"\bimport{_GAP}+(?:[\w.]+(?:{_GAP}+as{_GAP}+\w+)?{_GAP}*,{_GAP}*)*{name}\b{attribute}"
    )


def _qualified_spellings(head: str, names: Iterable[str]) -> str:
    """Every way code can reach one of ``names`` of the module ``head`` in the resolver's
    terms, the function and its module named together: ``inspect.stack``
    (``x.inspect.stack`` too), ``from inspect import stack`` or ``*``, a literal name
    (``getattr(inspect, "stack")``), or the module bound to another name (``import
    inspect as i``, ``__import__("inspect")``, ``i = inspect``, ``f(inspect)``), after
    which its ``.stack`` may be any attribute's. One pattern for all of a module's names
    (recall6: one each made the pairs' RE2 set too large for its DFA's memory)."""
    top = re.escape(head.split(".", 1)[0])
    spelled = r"\s*\.\s*".join(re.escape(p) for p in head.split("."))
    word = _alternation(names)
    return "|".join(
        [
            rf"\b{spelled}\s*\.\s*{word}\b",
            rf"\bfrom{_GAP}+{spelled}{_GAP}+import\b(?:[^)]*\b{word}\b|{_GAP}*\*)",
            rf"['\"]{word}['\"]",
            rf"\bimport{_GAP}+(?:[\w.]+(?:{_GAP}+as{_GAP}+\w+)?{_GAP}*,{_GAP}*)*{top}{_GAP}+as\b",
            rf"['\"]{top}[.'\"]",
            rf"(?:[=(,:\[{{]|\.)\s*{top}\s*(?:[,)\]}}\n;#]|$)",
        ]
    )


def _api_tokens(apis: Iterable[str], *, dot: str = r"\.\s*") -> str:
    """A pattern one of whose matches is in the text of any code reaching ``apis``
    (``dot``: what may be between an attribute's dot and its name)."""
    apis = list(apis)
    qualified = [a for a in apis if a.rpartition(".")[2] in _QUALIFIED_NAMES]
    functions, modules = _spelled(a for a in apis if a not in qualified)
    parts = [_function_spellings(functions, dot=dot)] if functions else []
    if modules:
        parts.append(_module_spellings(modules))
    by_head: dict[str, set[str]] = {}
    for api in qualified:
        head, _, name = api.rpartition(".")
        by_head.setdefault(head, set()).add(name)
    parts.extend(_qualified_spellings(head, names) for head, names in sorted(by_head.items()))
    return "|".join(parts)


#: An integer literal, and what may stand between two of a list's (a comment, a
#: continuation).
_INTEGER = r"(?:0[xXoObB][0-9a-fA-F_]+|\d[\d_]*)"
_GAP_IN_LIST = r"(?:\s|\\|#[^\n]*)*"
#: A list, tuple or set of integer literals written out where
#: :mod:`~caplet._scan._packed_bytes` reads one (recall16), :data:`MIN_INTEGERS` of them in
#: a row: bound to a name (``D = [105, ...]``, ``D = 105, 109, ...``), iterated by a
#: comprehension (``in [...]``), a ``map``'s list (``, [...]``, its bracket on the comma's
#: line) or a builder's argument (``bytes([...])``, ``array('B', [...])``). Not any
#: bracket: a file past the size limit padded with a table of integer tuples made every
#: line of it a hit, its focus too large to check (tests/_scan/test_collect.py).
_LISTED_INTEGERS = (
    r"(?:=\s*[\[({]?|\bin\s*[\[({]|,[ \t]*[\[({]|"
    r"\b(?:bytes|bytearray|array)\s*\((?:[^,()\n]*,)?\s*[\[({])"
    + _GAP_IN_LIST
    + _INTEGER
    + (_GAP_IN_LIST + "," + _GAP_IN_LIST + _INTEGER) * (MIN_INTEGERS - 1)
)
#: The decoders the data flow follows (:data:`DECODERS`, :data:`DECODER_METHODS`, bytes
#: of listed integers).
DECODER_TOKENS: Final = (
    _api_tokens(DECODERS | LITERAL_DECODERS | {f".{m}" for m in DECODER_METHODS})
    + "|"
    + _LISTED_INTEGERS
    # a MIME part decoded by the email package (blind32)
    + r"|\.\s*get_payload\s*\([^)\n]*\bdecode\s*=\s*(?:True|1)\b"
    # bytes(int(t, 8) for t in text.split()): text of numbers in a base, built into
    # bytes or code points (blind33: an octal command the whole-file pass evaluated)
    + r"|\b(?:bytes|bytearray|chr)\s*\(\s*\[?\s*int\s*\("
)
#: Every process call the rules know (CPL-PROC-001), however it is spelled: ``from os
#: import system as s`` has no call ``system(`` in its text.
PROCESS_TOKENS: Final = _api_tokens(a for a, r in API_RULES.items() if r == "CPL-PROC-001")
#: PROCESS_TOKENS for a pair whose other side is common (the network, pair 3), an
#: attribute spelled as code spells it: the name right after its dot (``os .system``,
#: ``(os  # c`` then `` .system)``; ``os. system(`` is the pair's ``system(``). "(e.g.
#: Popen kwargs)" in a docstring is prose; as any ``. Popen`` it sent jupyter-server's
#: gateway/managers.py to a whole-file false positive, a flagged package (attack5).
PROCESS_CALL_TOKENS: Final = _api_tokens(
    (a for a, r in API_RULES.items() if r == "CPL-PROC-001"), dot=r"\."
)
#: Every call that starts a file the rules follow (:data:`RUNS_FILE`: ``os.startfile``,
#: ``runpy.run_path``, a native library loaded), however it is spelled.
RUNS_FILE_TOKENS: Final = _api_tokens(RUNS_FILE)
#: Every network module (a dotted one as ``a.b`` or ``from a import``) and DNS function the
#: egress and DNS rules know, as code spells them: an egress is a call the resolver names
#: under :data:`~caplet._scan._sources.NETWORK_MODULES`, so its module is imported, named
#: in a literal (``__import__("socket")``) or reached as another module's attribute; the
#: word in prose ("requests made to the proxy", "a socket connection") is none of them.
NETWORK_MODULE_TOKENS: Final = "|".join(
    [
        _module_spellings(m.split(".", 1)[0] for m in NETWORK_MODULES),
        # a vendored copy of a network library (pip._vendor.urllib3: blind17, _vendored)
        VENDORED_NETWORK,
        _api_tokens(d for d in DNS_FUNCTIONS if "()." not in d),
    ]
)
#: recall6: network input outside the network modules, whose data the flow labels the
#: peer's: a connection opened by asyncio (trio, anyio), a request handler's base (the
#: bases under a network module are spelled by :data:`NETWORK_MODULE_TOKENS`). Its own
#: side, beside a process or code sink only: in :data:`NETWORK_MODULE_TOKENS`, which
#: a score of conjunctions repeat, it made the pairs' RE2 set too large for its DFA's
#: memory (RE2 then falls back to a far slower matcher). An event loop's getaddrinfo is
#: socket.getaddrinfo's spelling (``.getaddrinfo``) above.
NETWORK_INPUT_TOKENS: Final = "|".join(
    [
        _api_tokens(NETWORK_STREAMS),
        _api_tokens(b for b in REQUEST_HANDLERS if not b.startswith(NETWORK_MODULES)),
    ]
)
#: A network program (:data:`~caplet._scan._sources.NETWORK_PROGRAMS`) as a word of a
#: command literal (the rule splits it like a shell and lowers it): after a quote, a blank,
#: a path's slash or an escape (\\t). The rules read it only in a command that is run
#: (``Sinks.process``), so the prefilter pairs it with whatever runs something.
NETWORK_PROGRAM_TOKENS: Final = (
    r"(?i:(?:^|['\"\s/]|\\[a-z])" + _alternation(NETWORK_PROGRAMS) + r"(?:['\"\s]|\\[a-z]|$))"
)
#: Both: every way the egress and DNS rules' sinks can be in a file's text.
NETWORK_TOKENS: Final = NETWORK_MODULE_TOKENS + "|" + NETWORK_PROGRAM_TOKENS
#: Host reconnaissance the recon rules know: the calls, the files (a literal path, or
#: ``"/etc"`` joined to a name), the programs and the public-IP services, and the credential
#: stores and cloud metadata services the labels know; the environment variables are
#: :data:`RECON_ENV_TOKENS`.
RECON_TOKENS: Final = "|".join(
    [
        _api_tokens(RECON_FUNCTIONS),
        # a program whose output is the host's identity, first word of a command literal
        r"(?i:['\"/\\](?:" + "|".join(sorted(RECON_PROGRAMS)) + r")(?:\.exe)?(?:['\"\s]|$))",
        "|".join(re.escape(p) for p in sorted(RECON_FILES)),
        # a service asked for the host's public IP address (a URL literal naming it)
        r"(?i:" + "|".join(re.escape(h) for h in sorted(PUBLIC_IP_SERVICES)) + r")\b",
        r"['\"]/etc/?['\"]",
        # the credential stores and cloud metadata services the labels know (blind15); a
        # store's last folder, which a path joined from pieces still spells
        "|".join(re.escape(m.rsplit("/", 1)[-1]) for m in sorted(CREDENTIAL_MARKERS)),
        "|".join(re.escape(h) for h in METADATA_HOSTS),
    ]
)
#: The libraries that read the browsers' cookies (:data:`~caplet._scan._sources.COOKIE_READERS`)
#: bound however code binds a module: what they return is a credential the egress rules
#: follow (recall14).
COOKIE_READER_TOKENS: Final = _module_spellings(COOKIE_READERS, reachable=False)
#: The environment variables that name the host or its user, as a key literal: a
#: reconnaissance source only where the environment is read (:data:`ENV_READ_TOKENS`);
#: ``role="USER"`` or ``{"HOME": ...}`` alone reads nothing.
RECON_ENV_TOKENS: Final = r"['\"](?:" + "|".join(sorted(RECON_ENV_NAMES)) + r")['\"]"
#: The environment read at all: the flow labels a key only at a subscript or method of
#: :data:`~caplet._scan._rules.ENVIRON_MAPPINGS` or a call of
#: :data:`~caplet._scan._rules.ENV_FUNCTIONS`, each spelled with its name (a name computed
#: for a lookup is the lookup pairs').
ENV_READ_TOKENS: Final = words(n.rpartition(".")[2] for n in ENVIRON_MAPPINGS | ENV_FUNCTIONS)
#: A file that talks to the Docker daemon: the socket's path (or a URL quoting it), or the
#: Docker SDK (docker, aiodocker) imported (:mod:`~caplet._scan._container_escape`, which
#: asks it of the file's text too, recall16).
DOCKER_API: Final = r"docker(?:\.|%2[Ee])sock\b|(?m:^[ \t]*(?:import|from)[ \t]+(?:aio)?docker\b)"
#: The keys of a container's ways out to its host; an escape holds two, one among these.
ESCAPE_KEYS: Final = r"\b(?:[Pp]rivileged|PidMode|pid_mode|CapAdd|cap_add)\b"
#: A container started by a command line with a way out among its flags
#: (:func:`~caplet._scan._container_escape.command_escape`): the program and its verb, and
#: one of the flags (two ways out hold one of these: the root mount is one way; recall17).
CONTAINER_COMMAND: Final = (
    r"\b(?:docker|podman|nerdctl)(?:\.exe)?['\"]?[ \t]*,?[ \t]*['\"]?(?:run|create)\b",
    r"--(?:privileged|pid|cap-add)\b",
)
