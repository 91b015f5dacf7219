"""The package-mode prefilter: which files need the AST pass at all.

``ast.parse`` runs at about 4 MB/s and the rule visitor halves that, while
one google-re2 ``Set`` over a file's text runs at hundreds of MB/s. When a
plain package (no manifest) is scanned, only *threats* and chains can be
danger (capabilities are merely observed), and every threat rule needs a
specific token to be present in the text: ``exec``/``eval``/``compile``
called or passed as a name, an indicator string from
:mod:`caplet._scan._indicators`, ``dup2``/``pty``/``urlretrieve``, or a
pair: ``environ`` and a network module, ``getattr``/``__import__`` and a
name concatenated from literals, ``builtins`` and ``getattr``/``exec``. A file whose text has
none of them cannot produce a threat finding, so it is not parsed.

Soundness: the patterns over-approximate the rules (they also match in
comments and strings, which only costs a parse). Python normalises
identifiers with NFKC (PEP 3131), so fullwidth ``exec`` is ``exec``: text with
non-ASCII characters is matched after NFKC normalisation too. Plugins are
never prefiltered (every file of a plugin gets the full AST pass, because
there undeclared *capabilities* are danger too).

Why a skipped file cannot match a rule, rule by rule: a data-flow threat
needs a source of a kind it follows and a sink, each an API the resolver
names from the text's own imports and attributes; their triggers are built
from the very tables the rules read (:mod:`caplet._scan._triggers`), each API
matched in every spelling the resolver accepts, so a file with no such
spelling has no such call. Names computed at run time reach an API only
through a lookup (``getattr``, ``__import__``, a namespace indexed), which has
its own pairs below; text rules that need no AST (long lines, Trojan Source,
text aimed at the auditor) run on skipped files too. What no pattern here
sees is a *literal* the data flow computes from pieces (a program name, an
environment key or a path reversed, sliced or concatenated), a known gap
written down in docs/architecture.md (``_triggers``). tests/_scan/test_triggers.py holds
the argument to the code: every entry of those tables, as written and
imported under an alias, and every rule's worked example, gives the same
danger findings prefiltered and not.
"""

from __future__ import annotations

import enum
import unicodedata
from collections.abc import Collection
from typing import Any, Final

import re2

from caplet._scan._aliases import follow, note_binding
from caplet._scan._indicators import AUDITOR_PATTERN, INDICATORS, IndicatorKind
from caplet._scan._sources import BOT_FRAMEWORKS
from caplet._scan._triggers import (
    DECODER_TOKENS,
    NETWORK_TOKENS,
    PROCESS_TOKENS,
    RECON_TOKENS,
    RUNS_FILE_TOKENS,
    words,
)

__all__ = ["PREFILTER_PATTERNS", "Need", "Prefilter", "prefilter"]

#: Indicator kinds that are no threat alone (see PREFILTER_PATTERNS).
_PAIRED_INDICATORS = frozenset({IndicatorKind.CLIPBOARD, IndicatorKind.DOWNLOAD_EXEC})
#: exec/eval/compile as a name (``re.compile`` and ``x.exec`` are attributes).
#: RE2's memory for each compiled set and for the one-alternation locator
#: (its default, 8 MiB, runs the DFA out of memory on large files).
_MAX_MEM = 64 << 20

_EXEC_NAME = r"(?:^|[^.\w])(?:exec|eval|compile|execfile)"

#: Patterns any one of which sends a file to the AST pass.
PREFILTER_PATTERNS: Final[tuple[str, ...]] = (
    r"\b(?:urlretrieve|SetValueEx|startfile)\b",
    # a string spelled in escapes ("\x77\x67\x65\x74") hides its text from
    # every pattern here, so it needs the AST pass (which sees the value)
    r"(?:\\x[0-9a-fA-F]{2}){8}",
    # exec imported under another name: the call site does not say exec
    r"\bimport\b[^\n]*\b(?:exec|eval|compile)\b",
    # browser and wallet folders spelled as path pieces
    r"['\"](?:Google|Chrome|User Data|Login Data|Local State|BraveSoftware|Exodus|Electrum)['\"]",
    # credential folders spelled as path pieces: os.path.join(home, ".aws", ...)
    r"['\"]\.(?:aws|ssh|kube|docker|gnupg)['\"]",
    # executable memory (shellcode loaders), pip run from code
    r"\b(?:PROT_EXEC|VirtualAlloc|VirtualProtect|PAGE_EXECUTE_READWRITE)\b",
    # a PowerShell command hidden in base64 (decoded and read by the command rules)
    r"(?i)['\"]-(?:EncodedCommand|enc|ec)['\"\s]",
    r"\bpip\s*\.\s*main\b|\bpip\._internal\b[^\n]*\bmain\b|\bfrom\s+pip\s+import\b[^\n]*\bmain\b",
    # an API named in a string for pkgutil to resolve ("os:system", CPL-THR-003)
    r"\bresolve_name\b",
    # Windows' DLL loaders, given a file the package ships or writes (CPL-THR-018)
    r"(?i)\b(?:rundll32|regsvr32)\b",
    # a browser shortcut rewritten to load an extension (CPL-THR-009)
    r"--load-extension\b",
    # bytecode loaded from a file (CPL-THR-027)
    r"\bSourcelessFileLoader\b|\bload_compiled\b",
    # keyloggers and screen grabbers (CPL-THR-017 and CPL-THR-004 beside an egress)
    r"\b(?:ImageGrab|pyscreenshot|pynput|pyHook)\b|\bkeyboard\s*\.\s*(?:on_press|on_release|hook)\b|"
    r"\bpyautogui\s*\.\s*screenshot\b|\bmss\s*\.\s*mss\b",
    # a builtin that runs code or looks names up stored into a namespace under another name
    # (Hyperion: locals()['lIlI'] = globals), or fetched from one by a string, maybe
    # spelled in escapes (globals()['\x65\x76\x61\x6c']): CPL-THR-003
    r"\)\s*\[[^\]\n]*\]\s*=\s*(?:exec|eval|compile|__import__|getattr|globals|locals|vars|dir)"
    r"\s*(?:[;#\n]|$)|\b(?:globals|locals|vars)\(\s*\)\s*\[\s*[rbuRBU]?['\"]"
    r"(?:\\x[0-9a-fA-F]{2}|\\[0-7]{3}|\\u[0-9a-fA-F]{4}|exec|eval|compile|__import__)",
    # every indicator but clipboard access, which means something only beside a
    # wallet pattern (CPL-THR-014), itself an indicator here, and a download piped to
    # a shell, which is only a tag (danger in an install script, always parsed, or as
    # the text of a command that is run: a pair below)
    *(i.pattern for i in INDICATORS if i.kind not in _PAIRED_INDICATORS),
)

#: What exec can only run harmfully when the file also has it: a decoder, code
#: points, a network read, a chat bot. Without any of them exec/eval/compile
#: run the file's own text (dataclasses, namedtuple, doctest); a string run
#: that reaches the network names a network module, one spelled in escapes
#: or looked up by a computed name is another pattern's (solo or pair).
_PAYLOAD = (
    r"\b(?:\w*b64decode|b32decode|b16decode|a85decode|b85decode|decodebytes|decodestring|unhexlify|"
    r"a2b_base64|a2b_hex|fromhex|decompress|decrypt|rot_?13|marshal|urlopen|urlretrieve|"
    r"requests|httpx|urllib3|aiohttp|recv|telebot|telegram|discord|aiogram|pyrogram|Fernet)\b|"
    r"\bcodecs\s*\.\s*decode\b|['\"]\s*\[\s*:\s*:\s*-\s*1\s*\]|"
    r"\bchr\s*\(\s*\(*\s*ord\b|\bmap\(\s*chr\b|join\(\s*chr\b|\^[^\n]*\bfor\s|\^=|"
    r"\w\s*\^\s*[\w(]|\bto_bytes\b|\bmaketrans\b|\boperator\s*\.\s*xor\b|"
    + DECODER_TOKENS
    + "|"
    + words(BOT_FRAMEWORKS)
)
#: A process or code sink, for the pairs below.
_SINK = (
    r"\b(?:system|popen|Popen|spawn[lv]p?e?|exec[lv]p?e?|startfile|check_output|getoutput|"
    r"check_call|run_path|create_subprocess_\w+)\s*\(|\bsubprocess\b|"
    r"(?:^|[^.\w])(?:exec|eval|compile)\s*\(|\b(?:pickle|marshal|dill|cloudpickle)\s*\.\s*loads\s*\(|"
    r"\b(?:CDLL|WinDLL|OleDLL|PyDLL|LoadLibrary|dlopen)\s*\(|"
    # a sink bound to a name (run = os.system; run(...))
    r"(?m:=\s*[\w.]*\b(?:system|popen|Popen|check_output|check_call|getoutput)\s*(?:#|$))|"
    + PROCESS_TOKENS
)
#: A network module or a program that reaches the network.
_NETWORK = (
    r"\b(?:socket|urllib|http\.client|requests|httpx|aiohttp|urllib3|smtplib|ftplib|dns|"
    r"ping|nslookup|dig|getaddrinfo|gethostbyname)\b|" + NETWORK_TOKENS
)

#: A lookup by name: getattr and its kin, a namespace indexed or asked with .get.
_LOOKUP = (
    r"(?:\b(?:getattr|__import__|import_module|attrgetter|methodcaller|__getattribute__)\s*\(|"
    r"(?:^|[^.\w])eval\s*\(|\b__builtins__\s*\.\s*get\s*\(|\b__getitem__\s*\(|"
    r"(?:__dict__|\bvars\([^)\n]*\)|\bmodules|\bglobals\(\s*\)|\bf_builtins)\s*(?:\[|\.\s*get\s*\())"
)
#: The same lookups by a bare name (getattr(os, name)): the name is built elsewhere.
_LOOKUP_BY_VARIABLE = (
    r"\b(?:getattr|__getattribute__)\s*\([^,\n]*,\s*[A-Za-z_]\w*\s*[,)]|"
    r"\b(?:__import__|import_module|attrgetter)\s*\(\s*[A-Za-z_]\w*\s*[,)]|"
    r"(?:__dict__|\bvars\([^)\n]*\)|\bmodules|\bglobals\(\s*\))\s*"
    r"(?:\[\s*[A-Za-z_]\w*\s*\]|\.\s*get\s*\(\s*[A-Za-z_]\w*\s*[,)])"
)
#: What a file that looks names up contains.
_LOOKUP_NAME = (
    r"\b(?:getattr|__import__|import_module|attrgetter|methodcaller|__getattribute__|__dict__|"
    r"vars|modules|globals|eval|__builtins__|__getitem__|f_builtins)\b"
)
#: The ways to build a name from literals: concatenated, joined, sliced, reversed, from
#: code points, a list of byte values or a builtin's repr, decoded, a literal formatted,
#: an integer literal unpacked into bytes.
_PIECES = (
    r"['\"]\s*\+\s*[rbuRBU]?['\"]|\.join\(|['\"]\s*\[\s*:*\s*:\s*-\s*1\s*\]|\bchr\s*\(|"
    r"\bbytes\(\s*\[|\bmap\(\s*chr\b|\breversed\(|\bstr\(\s*(?:oct|hex|bin|copyright|credits|"
    r"license)\s*\)|\b(?:b64decode|b32decode|b16decode|unhexlify|fromhex|rot_?13)\b|"
    r"\bcodecs\.decode\b|['\"]\s*\.\s*format\(\s*[rbuRBU]?['\"]|['\"]\s*%\s*\(?\s*[rbuRBU]?['\"]|"
    r"\b0[xX][0-9a-fA-F]+\s*\)\s*\.\s*to_bytes\(|"
    # a literal operated on (sliced, multiplied, a method called on it), bytes of a list,
    # str of bytes, an integer unpacked, a lambda's value, identifiers outside ASCII (the
    # CJK family), code points formatted with %c, an f-string of literals
    r"[rbuRBU]?['\"][^'\"\n]*['\"]\s*(?:\[|\*|\.\s*\w+\s*\()|\bbytearray\(\s*\[|"
    r"\bstr\(\s*[bB]['\"]|\bto_bytes\(|\bbytes\s*\.\s*decode\(|\blambda\b|[^\x00-\x7f]|"
    r"['\"]\s*%\s*\(\s*\d|\b[fF][rR]?['\"][^'\"\n]*\{\s*[rbuRBU]?['\"]"
)
#: A lookup whose name is not written out: anything but a quote after getattr's comma,
#: an importer's or a namespace subscript's parenthesis (a variable, an attribute, a
#: call). A name written out is spelled in the text (every table's tokens match
#: ``"system"`` too); a literal operated on is :data:`_LOOKUP_PIECES`.
_LOOKUP_ANY_NAME = (
    r"\b(?:getattr|__getattribute__)\s*\([^,\n]*,\s*[^'\"\s]|"
    r"\b(?:__import__|import_module|attrgetter|methodcaller|__getitem__)\s*\(\s*[^'\"\s)]|"
    r"(?:__dict__|\bvars\([^)\n]*\)|\bmodules|\bglobals\(\s*\)|\bf_builtins|__globals__|"
    r"__builtins__)\s*(?:\[\s*[^'\"\s]|\.\s*get\s*\(\s*[^'\"\s])"
)
#: A lookup with a name built from literals on its own line (the first pattern of pair 1).
_LOOKUP_PIECES = _LOOKUP + r"[^\n]*(?:" + _PIECES + r")"
#: Whatever runs something, as alternatives (each its own conjunction, so each pattern
#: is one the sets hold anyway or a small one: one alternation of them all made the
#: pairs' lazily built DFA half again as slow on a first pass over the stdlib): a
#: process or code sink; exec and its kin as a name, a file started
#: (:data:`~caplet._scan._sources.RUNS_FILE`), a lookup by a name not written out; a
#: lookup by a name built on its line. A lookup may be any of the others by a name the
#: lookup pairs do not see built (``getattr(_o, "%c%c" % (...))``: the tuned sample
#: cn-percent-c, found by tests/_scan/test_prefilter_trees.py). A rule that reads a
#: command's text (a downloader, pip install, python -c) reads it only where it is run:
#: a process call (the visitor hands a CPL-PROC-001 call to ``Sinks.process``), a file
#: written then started, code run by exec (whose own calls are in the text too); an
#: install script is always parsed (``_filepass``).
_RUNS: Final = (
    _SINK,
    _EXEC_NAME + r"\b|" + RUNS_FILE_TOKENS + "|" + _LOOKUP_ANY_NAME,
    _LOOKUP_PIECES,
)
#: Words of a command that only a run command makes a threat (see _RUNS).
_COMMAND_WORDS: Final = (
    # pip install run as a command ("pip install x", [..., "pip", "install", x]): "pip
    # install x" in an error message is not a command (a quarter of the benign bytes that
    # reached the AST pass for it alone, issue 16); pip.main and runpy have their own
    r"\bpip[0-9.]*(?:\.exe)?\s+install\b|\bpip[0-9.]*(?:\.exe)?['\"]\s*,\s*['\"]install['\"]",
    # downloaders: their command lines are often split over implicitly concatenated
    # literals, which a text pattern cannot see whole
    r"\b(?:curl|wget|Invoke-WebRequest|DownloadString|DownloadFile|certutil|bitsadmin)\b",
    # a download piped to a shell, written whole in one literal (an indicator that is
    # only a tag: danger in an install script, or as the text of a command that runs)
    *(i.pattern for i in INDICATORS if i.kind is IndicatorKind.DOWNLOAD_EXEC),
)
#: A fresh interpreter given a second stage: python -c SOURCE, or a file written and run.
_PYTHON_RUN: Final = (
    r"\bsys\.executable\b|['\"]pythonw?3?(?:\.\d+)?(?:\.exe)?['\" ]",
    r"['\"]-c['\"]|\brun_path\b|\bsuffix\s*=\s*['\"]\.pyw?['\"]|\bcommunicate\s*\(|"
    r"\binput\s*=|\.stdin\s*\.\s*write|['\"]-['\"]",
)
#: A function handed credentials, and a clear-text or raw-IP address (CPL-THR-026).
_HANDED_CREDENTIALS: Final = (
    r"\bdef\s+\w+\s*\([^)]*\b(?:\w*passw\w*|passphrase|\w*pkey|\w*private_?key|\w*secret\w*|"
    r"\w*token|\w*api_?key|mnemonic)\b",
    r"['\"]http://|['\"]https://(?:\d{1,3}\.){3}\d{1,3}",
)
#: Pieces that hardly ever build anything but a hidden name: code points joined, a
#: literal reversed, slices of a builtin's repr, a list of byte values, rot13 (a literal
#: formatted is everywhere: "{}: {}".format("x", y), so not here; on the lookup's own
#: line it is the first pair's).
_STRONG_PIECES = (
    r"\b(?:map|join)\(\s*chr\b|\bchr\(\s*\d+\s*\)\s*\+|['\"]\s*\[\s*:*\s*:\s*-\s*1\s*\]|"
    r"\breversed\(\s*['\"]|\bstr\(\s*(?:oct|hex|bin|copyright|credits|license)\s*\)|"
    r"\bbytes\(\s*\[\s*\d|\brot_?13\b"
)
#: getattr of a module worth hiding by anything but a plain literal (a variable, an
#: expression, a literal operated on): getattr(os, name), getattr(os, "X".lower()).
_SENSITIVE_LOOKUP = (
    r"\bgetattr\(\s*(?:os|posix|nt|subprocess|sys|shutil|socket|importlib|ctypes|pty|builtins|"
    r"__builtins__|marshal|base64|codecs|pip)\s*,\s*(?:[^'\"\s]|[rbuRBU]?(?:'[^'\n]*'|"
    r"\"[^\"\n]*\")\s*[^,)\s])"
)
#: A subscript or .get whose key is built from literals only ("lo" + "ad", "lave"[::-1],
#: "".join(["ex", "ec"]), "{}".format("ex"...), "%s" % "x", "ev" "al"), or from code
#: points, bytes or a builtin's repr (a list literal is not a subscript).
_BUILT_KEY = (
    r"(?:[\w\])]\s*\[|\.\s*get\s*\()\s*(?:[rbuRBU]?['\"][^'\"\n]*['\"]\s*"
    r"(?:\+\s*[rbuRBU]?['\"]|\[\s*:|\.\s*join\(\s*[\[(]\s*['\"]|\.\s*format\(\s*['\"]|"
    r"%\s*\(?\s*['\"]|[rbuRBU]?['\"])|(?:chr|map|reversed)\s*\(|bytes\(\s*\[|"
    r"str\(\s*(?:oct|hex|bin|copyright|credits|license)\b)"
)

#: Patterns that matter only together: each must match (a pair, or three for a rule
#: that needs three things: CPL-THR-026's credential parameter, clear-text address and
#: egress).
#: The name-building and builtins pairs are *local* (their rules look at the
#: call holding the first pattern) and can be focused; the others feed
#: file-wide chains. See ``_LOCAL_PAIRS``.
_PAIRS: Final[tuple[tuple[str, ...], ...]] = (
    # environment harvesting: the whole os.environ (dumped, copied, walked) next to a
    # network module; single keys (os.environ["HOME"]) are everywhere and harmless
    (
        r"(?:\bjson\.dumps?|(?:^|[^.\w])(?:dict|str|repr)|\burlencode|\bb64encode)\(\s*(?:os\.)?environ\b|"
        r"\b(?:data|json|params|body|payload|content|files)\s*=\s*(?:dict\(\s*)?(?:os\.)?environ\b|"
        r"\benviron\s*\.\s*(?:items|keys|values)\s*\(|\*\*\s*(?:os\.)?environ\b|"
        r"\bfor\s+\w+(?:\s*,\s*\w+)?\s+in\s+(?:os\.)?environ\b",
        r"\b(?:socket|urllib|http\.client|requests|httpx|aiohttp|urllib3|smtplib|ftplib)\b",
    ),
    # getattr(os, "sys" + "tem"), __import__("o" + "s"), vars(os)["sys" + "tem"],
    # os.__getattribute__("{}{}".format(...)): a name built from literals (concatenated,
    # joined, sliced, reversed, formatted, decoded, from code points or a builtin's repr)
    # on the lookup's own line (a name prepared on another line: the next pairs)
    (_LOOKUP_PIECES, _LOOKUP_NAME),
    # a socket wired to a shell: dup2 or pty.spawn next to a socket
    (r"\b(?:dup2|pty)\b", r"\bsocket\b"),
    # network next to a process call: a second stage fetched and run
    (
        r"\b(?:socket|urllib|http\.client|requests|httpx|aiohttp|urllib3)\b",
        r"\b(?:Popen|system|startfile|spawn[lv]p?e?|check_output|getoutput|check_call|"
        r"create_subprocess_\w+)\s*\(|\bsubprocess\s*\.\s*(?:run|call)\s*\(",
    ),
    # getattr(builtins, name) and builtins.exec(...)
    (
        r"\b(?:get|set)attr\(\s*(?:builtins|__builtins__)\b|(?:builtins|__builtins__)\s*\.\s*__dict__|"
        r"(?:builtins|__builtins__)\s*\.\s*__getattribute__\b|"
        r"\bobject\s*\.\s*__getattribute__\(\s*(?:builtins|__builtins__)\b|"
        r"\bvars\(\s*(?:builtins|__builtins__)|__builtins__\s*\[|['\"]__builtins__['\"]\s*\]|"
        r"\bbuiltins\s*\.\s*(?:exec|eval|compile|__import__|getattr)\b|"
        r"__import__\(\s*['\"]builtins['\"]|\bimport\s+builtins\s+as\b|from\s+builtins\s+import\s+\*",
        r"\b(?:builtins|__builtins__)\b",
    ),
    # decoded data into a process or code sink: os.system(b64decode(...))
    (
        r"\b(?:\w*b64decode|b32decode|b16decode|a85decode|b85decode|decodebytes|unhexlify|a2b_hex|"
        r"a2b_base64|fromhex|decompress|decrypt|rot_?13|maketrans|to_bytes)\b|"
        r"\bcodecs\s*\.\s*decode\b|\^=|"
        r"\b(?:join|map)\(\s*chr\b|['\"]\s*\[\s*:\s*:\s*-\s*1\s*\]|" + DECODER_TOKENS,
        _SINK,
    ),
    # a chat bot's handlers running what its users send
    (
        r"(?m)^\s*(?:import\s+[\w., ]*|from\s+)\b(?:telebot|telegram|aiogram|pyrogram|telethon|"
        r"discord|nextcord|disnake)\b|^\s*(?:import\s+[\w., ]*|from\s+)"
        + words(BOT_FRAMEWORKS)
        + "|"
        r"\b(?:__import__|import_module)\(\s*['\"]" + words(BOT_FRAMEWORKS),
        _SINK,
    ),
    # host reconnaissance next to the network (DNS included)
    (
        r"\b(?:gethostname|getfqdn|getuser|getlogin|getnode|getpwall|USERNAME|COMPUTERNAME|"
        r"getouterframes)\b|\binspect\s*\.\s*stack\b|"
        r"platform\.node|/etc/passwd|" + RECON_TOKENS,
        _NETWORK,
    ),
    # credentials or the environment walked, next to the network
    (
        r"\bid_rsa\b|\.ssh\b|\.aws\b|\.netrc\b|git-credentials|\.kube\b|\.pypirc|"
        r"SECRET_ACCESS|\bin\s+os\.environ\b|_history\b",
        _NETWORK,
    ),
    # a second stage run by a fresh interpreter: python -c SOURCE, or a file written and run
    # and something that runs it (a test's "python -c" in a docstring runs nothing): the
    # first of _RUNS here, the others at the end (the indices above are numbered)
    (*_PYTHON_RUN, _RUNS[0]),
    # a .pth file written into site-packages
    (r"\.pth\b", r"\b(?:getsitepackages|getusersitepackages|purelib|site-packages)\b"),
    # a file copied out of the package and started
    (
        r"\b(?:copy2?|copyfile|move)\s*\(",
        r"\bstartfile\b|\.(?:exe|scr|bat|ps1|vbs|msi|pif|hta)['\"]",
    ),
    # exec/eval/compile called (local: the call's statement is enough) or passed
    # as a value (``run = eval``: the call through the alias is elsewhere)
    (_EXEC_NAME + r"\s*\(", _PAYLOAD),
    (r"[=,(\[:]\s*(?:exec|eval|compile|execfile)\s*(?:[,)\]}\n#;]|$)", _PAYLOAD),
    # the interpreter's classes walked for os/subprocess
    (
        r"\bobject\s*\.\s*__subclasses__|__base__\s*\.\s*__subclasses__|"
        r"__(?:bases|mro)__\s*\[[^\]\n]*\]\s*\.\s*__subclasses__",
        r"\b(?:_wrap_close|Popen|catch_warnings|BuiltinImporter|__globals__)\b",
    ),
    # a name built on one line and looked up on another (name = "metsys"[::-1];
    # getattr(os, name)): the lookups are visited, the name is found by the data flow
    (_LOOKUP_BY_VARIABLE, _STRONG_PIECES),
    # a sensitive module's attribute looked up by a variable (getattr(os, name)): the
    # name may be built anywhere, by any string operation; rare in real code
    (_SENSITIVE_LOOKUP, _SENSITIVE_LOOKUP),
    # a dispatch table of builtins or a copy of a namespace, indexed by a built name:
    # ACTIONS = {"load": exec}; ACTIONS["lo" + "ad"](code)
    (
        _BUILT_KEY,
        r"[:=,(\[{]\s*(?:exec|eval|compile|execfile|__import__)\s*[,)\]}\n]|"
        r"__dict__|\bvars\(|\bmodules\b|\bglobals\(|\bdir\(\s*(?:builtins|__builtins__)",
    ),
    # a library's function replaced at module level by one of this file, next to the
    # network: Account.from_key = _from_key (a patched library that steals, CPL-THR-025)
    (
        r"(?m)^[A-Za-z_]\w*(?:\.\w+)+\s*=\s*[A-Za-z_]\w*\s*$|"
        r"\bsetattr\(\s*[A-Za-z_][\w.]*\s*,\s*['\"]\w+['\"]\s*,\s*[A-Za-z_]\w*\s*\)",
        _NETWORK,
    ),
    # a function handed credentials, and a clear-text or raw-IP address (CPL-THR-026)
    # sent: the rule runs on egress calls only (_sink_egress), network APIs all, or one
    # looked up by name (the two lookups at the end)
    (*_HANDED_CREDENTIALS, _NETWORK),
    # a spec made for a .pyc path (CPL-THR-027)
    (r"\bspec_from_file_location\b", r"\.pyc\b"),
    # bytes XORed by hand beside a process, code or library sink: a packaged payload
    # decoded, written and started (JPCERT/CC's Lazarus .dat files)
    (r"[\w)\]]\s*\^=?\s*[\w(]", _SINK),
    # pip run through runpy with an install put in sys.argv (CPL-THR-019)
    (r"\b(?:run_module|run_path|_run_module_as_main)\b", r"\bargv\b"),
    # the user's own folders swept for documents, next to the network (CPL-THR-007)
    (r"['\"/\\](?i:desktop|documents|downloads|onedrive)['\"/\\]", _NETWORK),
    # the other alternatives of the conjunctions above that end with _RUNS[0] or _NETWORK
    *((*_PYTHON_RUN, r) for r in _RUNS[1:]),
    *((*_HANDED_CREDENTIALS, r) for r in _RUNS[1:]),
    # a command's words beside whatever runs them (CPL-THR-019, 015, 011 at a process call)
    *((word, r) for word in _COMMAND_WORDS for r in _RUNS),
)


#: Indices into _PAIRS whose first pattern binds what other lines use: a namespace,
#: a looked-up function, exec passed as a value, what exec/eval/compile return (a code
#: object compiled on one line runs where it is used: ``FunctionType(c, g)()``, found
#: by tests/_scan/test_prefilter_trees.py) (see :func:`caplet._scan._aliases.follow`).
_ALIASING_PAIRS: Final = frozenset({1, 4, 12, 13, 15, 16, 17})
#: Indices into _PAIRS whose first pattern's lines are enough to visit.
_LOCAL_PAIRS: Final = frozenset({1, 4, 12, 15, 16, 17})


class Need(enum.Enum):
    """What :meth:`Prefilter.check` found a file needs (or a set of focus lines)."""

    NOTHING = "nothing"
    FULL = "full"


#: More focus lines than this and the whole file is visited anyway.
_MAX_FOCUS_LINES = 64
#: A file this large (characters) that needs the AST is still only visited around
#: its hits: the statements holding any pattern's match or a sink token below.
_FOCUS_FROM = 12_000
#: ... unless it has more hit lines than this.
_MAX_LARGE_FOCUS = 400
#: Tokens of sinks that only widen the focus of a file that needs the AST anyway
#: (a send or a write may sit in a statement with no threat token).
_FOCUS_ONLY: Final = (
    r"\.(?:post|put|patch|send|sendall|sendto|sendmail|send_message|request|urlopen|connect|"
    r"write|write_bytes|write_text|recv|startfile|chmod)\s*\(|__file__",
)


class _Sets:
    """Groups of numbered patterns, one RE2 set each, answering as one set.

    RE2 builds a set's DFA lazily, state by state, and a state holds a
    position in every pattern at once: one set of the solo patterns and one of
    the pairs build fewer states than one set of both (the product of their
    positions). On a first pass over new text, which every ``caplet scan``
    process makes, that halves the matching (issue 16); a warm DFA pays a
    second pass instead.
    """

    def __init__(self, groups: list[list[tuple[int, str]]]) -> None:
        #: Each set, with the indices (the caller's numbering) its patterns answer for:
        #: a pattern two pairs share (a network module, a process call) is added once
        #: and answers for both, one DFA position instead of two.
        self.parts: list[tuple[list[list[int]], Any]] = []
        for group in groups:
            options = re2.Options()
            options.max_mem = _MAX_MEM
            compiled: Any = re2.Set.SearchSet(options)
            owners: dict[str, list[int]] = {}
            for index, pattern in group:
                owners.setdefault(pattern, []).append(index)
            for pattern in owners:
                compiled.Add(pattern)
            compiled.Compile()
            self.parts.append((list(owners.values()), compiled))

    def Match(self, data: bytes) -> list[int]:  # noqa: N802 -- the RE2 Set's own name
        found: list[int] = []
        for owners, compiled in self.parts:
            for i in compiled.Match(data) or ():
                found.extend(owners[i])
        return found

    def each_answers(self, data: bytes) -> bool:
        """Whether every set finds some pattern in ``data`` (the self-check's probe)."""
        return all(compiled.Match(data) for _, compiled in self.parts)


class Prefilter:
    """Every pattern in two RE2 sets (:class:`_Sets`); a check is two C-level matches.

    Hits of the exec and name-building patterns only matter at the call
    itself, so for them the check returns the lines to visit (the AST pass
    then visits only the statements holding them, see the scanner's
    ``_focus``), with the uses of whatever such a line binds (a namespace
    bound on one line is looked up on another); any other hit (an
    indicator, a chain half) needs the whole file, because chains combine
    what different statements do.
    """

    def __init__(self) -> None:
        patterns = list(PREFILTER_PATTERNS)
        # Each conjunction's patterns' indices (the first one's hits are the focus lines).
        self._pairs: list[tuple[int, ...]] = []
        for together in _PAIRS:
            self._pairs.append(tuple(range(len(patterns), len(patterns) + len(together))))
            patterns.extend(together)
        self._solo = len(PREFILTER_PATTERNS)
        # Not a threat token: whether text addressed to the auditor may be
        # there (CPL-AUD-001), answered by the same match.
        self._auditor = len(patterns)
        # A command's words join the solo patterns' set (they were solo patterns; in the
        # pairs' set they made its first pass over the stdlib a tenth slower, issue 16).
        numbered = [*enumerate(patterns), (self._auditor, AUDITOR_PATTERN)]
        light = {i for i, p in numbered if i < self._solo or p in _COMMAND_WORDS}
        self._set: Any = _Sets(
            [[n for n in numbered if n[0] in light], [n for n in numbered if n[0] not in light]]
        )
        # Indices whose hits are local to one call: their match positions
        # become focus lines. Everything else means "visit the whole file".
        # exec passed as a value (``run = exec``) is not focused: the call
        # through the alias is on another line.
        self._focused = {self._pairs[i][0] for i in _LOCAL_PAIRS}
        # Hits whose line may bind what a later line looks up or calls: followed.
        self._aliasing = {self._pairs[i][0] for i in _ALIASING_PAIRS}
        self._locators: dict[int, Any] = {i: re2.compile(patterns[i]) for i in self._focused}
        self._patterns = [*patterns, *_FOCUS_ONLY]
        self._focus_only = range(len(patterns), len(self._patterns))
        self._all_locator: Any = None

    def engine_answers(self, probe: str) -> bool:
        """Whether each compiled set finds something in ``probe`` (written to hit all)."""
        answers = getattr(self._set, "each_answers", None)
        if answers is None:  # a stand-in set (tests): asked as one
            return bool(self._set.Match(_utf8(probe)))
        return bool(answers(_utf8(probe)))

    def check_text(self, text: str) -> tuple[Need | frozenset[int], bool]:
        """:meth:`check`, and whether text addressed to an auditor may be in ``text``.

        One match answers both (a Set reports every pattern it saw); the
        answer is computed per call, so concurrent threads do not mix them up.
        """
        encoded = _utf8(text)
        matched = self._set.Match(encoded) or []
        auditor = self._auditor in matched
        return self._answer(text, encoded, matched), auditor

    def check(self, text: str) -> Need | frozenset[int]:
        """Nothing, the whole file, or the 1-based lines the AST pass must visit.

        A large file that needs the whole AST is still visited only around
        its hits (the statements holding them, whole functions and class
        members; every module-level binding is collected): the rest of a
        large library holds no threat token, and its visit was most of the
        scanner's time.
        """
        encoded = _utf8(text)
        return self._answer(text, encoded, self._set.Match(encoded) or [])

    def _answer(self, text: str, encoded: bytes, matched: list[int]) -> Need | frozenset[int]:
        need = self._check(encoded, matched, focus=True)
        if need is not Need.FULL and not text.isascii():
            # identifiers Python folds (fullwidth, mathematical letters) may hide a hit
            # beside others seen as written: then the focus lines are not enough either
            normalised = _utf8(unicodedata.normalize("NFKC", text))
            if normalised != encoded:
                folded = self._check(normalised, self._set.Match(normalised) or [], focus=False)
                if folded is not Need.NOTHING:
                    return Need.FULL  # line numbers of the normalised text are not the file's
            if need is Need.NOTHING:
                return need
        if need is Need.FULL and len(text) > _FOCUS_FROM:
            lines = self.hit_lines(text, _MAX_LARGE_FOCUS, matched, encoded)
            return Need.FULL if lines is None else lines
        return need

    def _check(self, encoded: bytes, matched: list[int], *, focus: bool) -> Need | frozenset[int]:
        if not matched:
            return Need.NOTHING
        found = set(matched)
        relevant = {i for i in found if i < self._solo}
        for together in self._pairs:
            if found.issuperset(together):
                relevant.add(together[0])
        if not relevant:
            return Need.NOTHING
        if not focus or not relevant <= self._focused:
            return Need.FULL
        lines: set[int] = set()
        bound: set[bytes] = set()
        seen: set[int] = set()
        for index in relevant:
            # Located in the UTF-8 bytes, not the str: google-re2's wrapper turns
            # every byte offset of a str match back into a character offset by
            # scanning from the last one, which cost more than the matching
            # (issue 16). A newline is one byte in UTF-8, so lines count the same.
            for match in self._locators[index].finditer(encoded):
                # the last byte: the first may be the newline before the name
                lines.add(encoded.count(b"\n", 0, match.end() - 1) + 1)
                if len(lines) > _MAX_FOCUS_LINES:
                    return Need.FULL
                if index in self._aliasing and not note_binding(
                    encoded, match.start(), bound, seen
                ):
                    return Need.FULL
        if not follow(encoded, bound, lines, _MAX_FOCUS_LINES):
            return Need.FULL
        return frozenset(lines)

    def hit_lines(
        self,
        text: str,
        limit: int,
        matched: Collection[int] | None = None,
        encoded: bytes | None = None,
    ) -> frozenset[int] | None:
        """The lines any pattern (or sink token) matches, ``None`` past ``limit`` lines.

        With ``matched`` (the set's answer for ``text``, whose UTF-8 is
        ``encoded``), only the patterns the set found are located, one at a
        time: a pattern the set did not find has no line to add. Each is
        located on its own, so no match of one can hide a match of another:
        the lines are those of one alternation of them all, or more. Without
        ``matched``, one pass of the alternation of every pattern. Matching
        runs over the UTF-8 bytes (see :meth:`_check`); line numbers are counted
        between consecutive matches, so each pass costs one scan.
        """
        if not text.isascii():
            try:
                text.encode("utf-8")
            except UnicodeEncodeError:
                return None  # lone surrogates: RE2 cannot take the text as it is
        data = encoded if encoded is not None else _utf8(text)
        if matched is None:
            if self._all_locator is None:
                # One alternation of every pattern: its DFA needs more than RE2's
                # default 8 MiB on large files (kubernetes: "DFA out of memory" on
                # stderr for every file, and the slow NFA instead), like the sets.
                options = re2.Options()
                options.max_mem = _MAX_MEM
                self._all_locator = re2.compile(
                    "|".join(f"(?:{p})" for p in self._patterns), options
                )
            located = [(self._all_locator, False)]
        else:
            # A pattern several pairs share (a network module, a process call, a payload)
            # has the same lines for each: located once, its lines' bindings followed if
            # any of them asks (issue 16: a third of the locating on the benign corpus).
            wanted: dict[str, tuple[int, bool]] = {}
            for i in sorted({i for i in matched if i < self._auditor} | set(self._focus_only)):
                first, aliasing = wanted.get(self._patterns[i], (i, False))
                wanted[self._patterns[i]] = (first, aliasing or i in self._aliasing)
            located = [(self._locator(i), aliasing) for i, aliasing in wanted.values()]
        lines: set[int] = set()
        bound: set[bytes] = set()
        seen: set[int] = set()
        for locator, aliasing in located:
            position, line = 0, 1
            for match in locator.finditer(data):
                # the last byte: the first may be the newline before the name
                end = max(match.start(), match.end() - 1)
                line += data.count(b"\n", position, end)
                position = end
                lines.add(line)
                if len(lines) > limit:
                    return None
                if aliasing and not note_binding(data, match.start(), bound, seen):
                    return None
        return frozenset(lines) if follow(data, bound, lines, limit) else None

    def _locator(self, index: int) -> Any:
        """The compiled pattern ``index`` of :attr:`_patterns` (compiled on first use)."""
        found = self._locators.get(index)
        if found is None:
            found = self._locators[index] = re2.compile(self._patterns[index])
        return found


def _utf8(text: str) -> bytes:
    """``text`` for RE2; surrogatepass: an in-memory str may hold lone surrogates."""
    return text.encode("utf-8", "surrogatepass")


_CACHE: list[Prefilter] = []


def prefilter() -> Prefilter:
    """The process-wide compiled prefilter."""
    if not _CACHE:
        _CACHE.append(Prefilter())
    return _CACHE[0]
