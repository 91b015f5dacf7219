"""The prefilter's patterns: what sends a file, or a line, to the AST pass.

Apart from :mod:`caplet._scan._prefilter` (which compiles them into RE2
sets and decides a file with them) because the tables are reviewed data that
grow with every rule, while the machinery that runs them seldom changes; the
module docstring of ``_prefilter`` explains the design (solo patterns, pairs
that need both sides, focus lines).
"""

from __future__ import annotations

from typing import Final

from caplet._scan._bytecode_caches import CACHE_TOKENS
from caplet._scan._code_runners import CODE_RUNNER_TOKENS
from caplet._scan._config_factories import FACTORY_TOKENS
from caplet._scan._indicators import INDICATORS, IndicatorKind
from caplet._scan._lookup_patterns import (
    BUILT_KEY,
    DEFAULT_LOOKUP,
    JOINED_KEY,
    KEYWORD_NAMED,
    LOOKUP_ANY_NAME,
    LOOKUP_BY_HELPER,
    LOOKUP_BY_VARIABLE,
    LOOKUP_NAME,
    LOOKUP_PIECES,
    MEMBERS_OF_BUILTINS,
    NAMESPACE_BY_NAME,
    NAMESPACE_FILLED,
    SENSITIVE_LOOKUP,
    SPEC_BY_NAME,
    STRONG_PIECES,
)
from caplet._scan._prefilter_solo import PREFILTER_PATTERNS
from caplet._scan._sources import BOT_FRAMEWORKS
from caplet._scan._triggers import (
    CONTAINER_COMMAND,
    COOKIE_READER_TOKENS,
    DECODER_TOKENS,
    DOCKER_API,
    ENV_READ_TOKENS,
    ESCAPE_KEYS,
    NETWORK_INPUT_TOKENS,
    NETWORK_MODULE_TOKENS,
    NETWORK_PROGRAM_TOKENS,
    PROCESS_CALL_TOKENS,
    PROCESS_TOKENS,
    RECON_ENV_TOKENS,
    RECON_TOKENS,
    RUNS_FILE_TOKENS,
    words,
)

__all__ = [
    "ALIASING_PAIRS",
    "COMMAND_WORDS",
    "DEFERRED",
    "LOCAL_PAIRS",
    "PAIRS",
    "PREFILTER_PATTERNS",
]

#: exec/eval/compile as a name (``re.compile`` and ``x.exec`` are attributes).
_EXEC_NAME = r"(?:^|[^.\w])(?:exec|eval|compile|execfile)"

#: exec/eval/compile as code spells the builtin: called, or used as a value (followed by
#: what can end or continue an expression: punctuation, the end of the line, an attribute,
#: a keyword), or imported under another name. "compile the extension", "eval mode" in
#: prose is none of them: as a bare word it sent a tenth of the benign bytes that the
#: command words' conjunctions sent (issue 16).
_EXEC_AS_CODE = (
    _EXEC_NAME + r"\s*(?:[(,)\]}:;#.=\n\r\\]|$|(?:if|else|or|and|for|in|is|not)\b)|"
    r"\bimport\b[^\n]*\b(?:exec|eval|compile)\b"
)

#: What exec can only run harmfully when the file also has it: a decoder, code
#: points, a network read, a chat bot. Without any of them exec/eval/compile
#: run the file's own text (dataclasses, namedtuple, doctest); a string run
#: that reaches the network names a network module, one spelled in escapes
#: or looked up by a computed name is another pattern's (solo or pair).
_PAYLOAD = (
    r"\b(?:\w*b64decode|b32(?:hex)?decode|b16decode|a85decode|b85decode|decodebytes|decodestring|unhexlify|"
    r"a2b_base64|a2b_hex|fromhex|decompress|decrypt|rot_?13|marshal|urlopen|urlretrieve|"
    r"recv|telebot|telegram|discord|aiogram|pyrogram|Fernet)\b|"
    r"\bcodecs\s*\.\s*decode\b|['\"]\s*\[\s*:\s*:\s*-\s*1\s*\]|"
    r"\bchr\s*\(\s*\(*\s*ord\b|\bmap\(\s*chr\b|join\(\s*chr\b|\^[^\n]*\bfor\s|\^=|"
    r"\w\s*\^\s*[\w(]|\bto_bytes\b|\bmaketrans\b|\boperator\s*\.\s*xor\b|"
    + DECODER_TOKENS
    + "|"
    + words(BOT_FRAMEWORKS)
    # a network module, as code spells it (issue 16: "requests" in prose sent files)
    + "|"
    + NETWORK_MODULE_TOKENS
)
#: A process or code sink, for the pairs below: exec and its kin called, a pickle loaded,
#: a native library loaded, a process call or a call that starts a file as code spells it
#: (:data:`~caplet._scan._triggers.PROCESS_TOKENS`, ``RUNS_FILE_TOKENS``: ``os.system``,
#: ``from os import system as s``, ``import subprocess``), a sink bound to a name. Not the
#: bare words: "the system (and slow down ...)" and "run with a subprocess" in prose were a
#: third of the benign bytes the XOR and decoder pairs sent (issue 16).
_SINK = (
    r"(?:^|[^.\w])(?:exec|eval|compile)\s*\(|\b(?:pickle|marshal|dill|cloudpickle)\s*\.\s*loads\s*\(|"
    r"\b(?:CDLL|WinDLL|OleDLL|PyDLL|LoadLibrary|dlopen)\s*\(|"
    # a sink bound to a name (run = os.system; run(...))
    r"(?m:=\s*[\w.]*\b(?:system|popen|Popen|check_output|check_call|getoutput)\s*(?:#|$))|"
    + PROCESS_TOKENS
    + "|"
    + RUNS_FILE_TOKENS
    + "|"
    + CODE_RUNNER_TOKENS
)
#: A network module or DNS function as code spells it
#: (:data:`~caplet._scan._triggers.NETWORK_MODULE_TOKENS`); a network program in a command
#: literal is a trigger only beside whatever runs it (the conjunctions with ``_RUNS`` at
#: the end of ``PAIRS``).
_NETWORK = NETWORK_MODULE_TOKENS
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
    # a crontab's new job runs its command, a shell runs its start-up files (blind14)
    _EXEC_AS_CODE
    + "|"
    + RUNS_FILE_TOKENS
    + "|"
    + LOOKUP_ANY_NAME
    + r"|\bCronTab\s*\(|\.(?:bashrc|zshrc|bash_profile|profile)\b",
    LOOKUP_PIECES,
)
#: Words of a command that only a run command makes a threat (see _RUNS).
COMMAND_WORDS: Final = (
    # pip install run as a command ("pip install x", [..., "pip", "install", x]): "pip
    # install x" in an error message is not a command (a quarter of the benign bytes that
    # reached the AST pass for it alone, issue 16); pip.main and runpy have their own
    r"\bpip[0-9.]*(?:\.exe)?\s+install\b|\bpip[0-9.]*(?:\.exe)?['\"]\s*,\s*['\"]install['\"]",
    # downloaders: their command lines are often split over implicitly concatenated
    # literals, which a text pattern cannot see whole; a VBScript's fetchers too (a
    # dropper kept in a string, written and started with wscript: blind14), also right
    # after an escaped line break (a batch file's lines in one literal: "off\r\ncurl ...")
    r"(?:\b|\\[nrt])(?:curl|wget|Invoke-WebRequest|DownloadString|DownloadFile|certutil|bitsadmin|"
    r"(?:Server)?XMLHTTP|WinHttpRequest)\b",
    # a download piped to a shell, written whole in one literal (an indicator that is
    # only a tag: danger in an install script, or as the text of a command that runs)
    *(i.pattern for i in INDICATORS if i.kind is IndicatorKind.DOWNLOAD_EXEC),
    # -- attack8: a download piped to a shell whose downloader is computed ----------------
    # chr(99) + 'url -s https://... | sh', '{}url ... | sh'.format('c'), f'{c}url ...': the
    # rules read the built command at the process call, the text has no downloader's word;
    # its tail (an address piped into a shell, or made executable) is written out
    r"(?i)://[^\n|;&]*\|\s*(?:sudo\s+)?(?:ba|z|da)?sh\b|(?:&&|;)\s*chmod\s+\+?[0-7x]",
    # a repository cloned, a folder the run that follows starts from (_git_clones, recall17)
    r"\bgit(?:\.exe)?['\"]?[ \t]*,?[ \t]*['\"]?clone\b",
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
#: What gives a literal with junk characters removed its meaning (the last pair below).
_JUNK_CONTEXT = r"\bopen\(|\bcopy(?:file|2)?\(|" + _SINK + "|" + _NETWORK

#: Patterns that matter only together: each must match (a pair, or three for a rule
#: that needs three things: CPL-THR-026's credential parameter, clear-text address and
#: egress).
#: The name-building and builtins pairs are *local* (their rules look at the
#: call holding the first pattern) and can be focused; the others feed
#: file-wide chains. See ``LOCAL_PAIRS``.
_PAIRS: Final[tuple[tuple[str, ...], ...]] = (
    # environment harvesting: the whole os.environ (dumped, copied, walked) next to a
    # network module; single keys (os.environ["HOME"]) are everywhere and harmless
    (
        r"(?:\bjson\.dumps?|(?:^|[^.\w])(?:dict|str|repr)|\burlencode|\bb64encode)\(\s*(?:os\.)?environ\b|"
        r"\b(?:data|json|params|body|payload|content|files)\s*=\s*(?:dict\(\s*)?(?:os\.)?environ\b|"
        r"\benviron\s*\.\s*(?:items|keys|values)\s*\(|\*\*\s*(?:os\.)?environ\b|"
        r"\bfor\s+\w+(?:\s*,\s*\w+)?\s+in\s+(?:os\.)?environ\b|"
        # the mapping as a value however spelled (the data flow labels any reference to it,
        # _flow._reference_labels): passed, bound, put in a container, bound by an import
        # under another name, named in a literal; environb too. Not one key's subscript,
        # .get or membership test (attack5: e = os.environ, dict( os . environ ), from os
        # import environ as E were clean in package mode). A copy or the raw mapping too
        # (.copy(), ._data, recall6): the flow takes one entry of it by a key written out
        # for that variable, not the whole environment, so jupyter-server's
        # gateway/managers.py (a field of the answer to a request that sent a filtered
        # copy) is no longer a whole-file false positive
        r"\benvironb?[ \t\f]*(?:[),}\]|\n\r#;\\]|$)|"
        r"\benvironb?[ \t\f]*\.[ \t\f]*(?:items|keys|values|copy|_data|__\w+__)\b|"
        r"\benvironb?(?:\s|\\)+as\b|['\"]environb?['\"]|"
        # a .env file's values (ENV_FILE_READERS, recall17; its class's .dict(), recall18)
        r"\bdotenv_values\b|\bDotEnv\b",
        _NETWORK,
    ),
    # getattr(os, "sys" + "tem"), __import__("o" + "s"), vars(os)["sys" + "tem"],
    # os.__getattribute__("{}{}".format(...)): a name built from literals (concatenated,
    # joined, sliced, reversed, formatted, decoded, from code points or a builtin's repr)
    # on the lookup's own line (a name prepared on another line: the next pairs)
    (LOOKUP_PIECES, LOOKUP_NAME),
    # a socket wired to a shell: dup2 or pty.spawn next to a socket
    (r"\b(?:dup2|pty)\b", _NETWORK),
    # network next to a process call: a second stage fetched and run. The call need not
    # say "Popen(": getattr(subprocess, 'Popen')(...), (os .system)(...), ``from os import
    # system as run`` then run(...), ``import subprocess as sp`` then sp.run(...) are
    # spellings PROCESS_CALL_TOKENS knows (attack5)
    (
        _NETWORK,
        r"\b(?:Popen|system|startfile|spawn[lv]p?e?|check_output|getoutput|check_call|"
        r"create_subprocess_\w+)\s*\(|\bsubprocess\s*\.\s*(?:run|call)\s*\(|" + PROCESS_CALL_TOKENS,
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
        r"\b(?:\w*b64decode|b32(?:hex)?decode|b16decode|a85decode|b85decode|decodebytes|unhexlify|a2b_hex|"
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
    # (each recon call as code spells it: "getouterframes()" in a docstring calls nothing)
    (r"\b(?:USERNAME|COMPUTERNAME)\b|" + RECON_TOKENS, _NETWORK),
    # credentials or the environment walked, next to the network
    (
        r"\bid_rsa\b|\.ssh\b|\.aws\b|\.netrc\b|git-credentials|\.kube\b|\.pypirc|"
        r"kubernetes\.io/serviceaccount|"
        r"SECRET_ACCESS|_history['\"]|" + COOKIE_READER_TOKENS + "|"
        # the environment walked: a for loop or a comprehension over it ("X" in os.environ
        # is one key's test); the target may span lines in a comprehension's brackets
        r"\bfor\b[\w\s,.()\[\]*]*\bin\s+(?:os\s*\.\s*)?environ\b",
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
    # as a value (``run = eval``: the call through the alias is elsewhere; ``{eval}``, a
    # set of them, recall14)
    (_EXEC_NAME + r"\s*\(", _PAYLOAD),
    (r"[=,(\[:{]\s*(?:exec|eval|compile|execfile)\s*(?:[,)\]}\n#;]|$)", _PAYLOAD),
    # the interpreter's classes walked for os/subprocess
    (
        r"\bobject\s*\.\s*__subclasses__|__base__\s*\.\s*__subclasses__|"
        r"__(?:bases|mro)__\s*\[[^\]\n]*\]\s*\.\s*__subclasses__",
        r"\b(?:_wrap_close|Popen|catch_warnings|BuiltinImporter|__globals__)\b",
    ),
    # a name built on one line and looked up on another (name = "metsys"[::-1];
    # getattr(os, name)): the lookups are visited, the name is found by the data flow
    (LOOKUP_BY_VARIABLE, STRONG_PIECES),
    # a sensitive module's attribute looked up by a variable (getattr(os, name)): the
    # name may be built anywhere, by any string operation; rare in real code
    (SENSITIVE_LOOKUP, SENSITIVE_LOOKUP),
    # a dispatch table of builtins or a copy of a namespace, indexed by a built name:
    # ACTIONS = {"load": exec}; ACTIONS["lo" + "ad"](code)
    (
        BUILT_KEY,
        r"[:=,(\[{]\s*(?:exec|eval|compile|execfile|__import__)\s*[,)\]}\n]|"
        r"__dict__|\bvars\(|\bmodules\b|\bglobals\(|\bdir\(\s*(?:builtins|__builtins__)",
    ),
    # a library's function replaced at module level by one of this file, next to the
    # network: Account.from_key = _from_key (a patched library that steals, CPL-THR-025)
    (
        r"(?m)^[A-Za-z_]\w*(?:\.\w+)+\s*=\s*[A-Za-z_]\w*\s*$|"
        r"\bsetattr\(\s*[A-Za-z_][\w.]*\s*,\s*['\"]\w+['\"]\s*,\s*[A-Za-z_]\w*\s*\)|"
        # blind17: a name a loop takes, a value wrapped (staticmethod(_wrap(original)))
        r"\bsetattr\(\s*[A-Za-z_][\w.]*\s*,\s*[A-Za-z_]\w*\s*,\s*"
        r"(?:staticmethod\s*\(|classmethod\s*\(|[A-Za-z_]\w*\s*\(\s*getattr\s*\()|"
        # recall18: through the module's namespace (vars(m)["f"] = g, m.__dict__[...])
        r"(?:\bvars\([\w.]+\)|\.__dict__|\b__builtins__)\s*\[[^\]\n]+\]\s*=\s*[A-Za-z_]\w*\s*(?:[#;\n]|$)",
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
    *((word, r) for word in COMMAND_WORDS for r in _RUNS),
    # the environment's host and user names, where the environment is read, beside the
    # network (pair 7 holds the other reconnaissance)
    (RECON_ENV_TOKENS, ENV_READ_TOKENS, _NETWORK),
    # -- recall5 (issue 16, computed names) ------------------------------------------------
    # getattr wrapped in a lambda bound to a name (g = lambda o, n: getattr(o, n)), called
    # with a name built from pieces elsewhere: the call site says g
    (
        r"(?m)^[ \t]*[^\s=()\[\],.'\"]+[ \t]*=[ \t]*lambda[^:\n]*:[ \t]*getattr\(",
        r"['\"]\s*\+\s*[rbuRBU]?['\"]|" + STRONG_PIECES,
    ),
    # getattr (or exec's kin) bound to another name (取 = getattr), and a name built from
    # pieces: the lookup's call site says 取
    (
        r"(?m)^[ \t]*[^\s=()\[\],.'\"]+[ \t]*=[ \t]*(?:builtins[ \t]*\.[ \t]*)?"
        r"(?:getattr|__import__)[ \t]*(?:[#;]|$)|:=[ \t]*(?:getattr|__import__)[ \t]*\)",
        r"['\"]\s*\+\s*[rbuRBU]?['\"]|\.join\(|\bchr\s*\(|" + STRONG_PIECES,
    ),
    # an importer given an f-string of names only (f"{a}{b}") or a name, and a name bound
    # to one code point (a = chr(111)) or strong pieces; import_module(name) beside any
    # literals added together is every plugin loader (turtle.py, markdown's core.py)
    (
        r"\b(?:__import__|import_module)\(\s*(?:[fF][rR]?['\"]\{\w+\}\{|[A-Za-z_]\w*\s*[,)])",
        r"\b[A-Za-z_]\w*\s*=\s*chr\(\s*\d+\s*\)\s*(?:[\n#;]|$)|" + STRONG_PIECES,
    ),
    # attrgetter or methodcaller given a name built on another line from pieces
    (
        r"\b(?:attrgetter|methodcaller)\(\s*[A-Za-z_]\w*\s*[,)]",
        r"['\"]\s*\+\s*[rbuRBU]?['\"]|" + STRONG_PIECES,
    ),
    # -- blindcn (issue 16, computed names written blind to the rules) -------------------
    # a lookup given what a helper of the file returns for literal arguments
    # (import_module(n(18, 20, 1)), getattr(sp, _x(b"...")), __import__(weave("sbrcs",
    # "upoes"))): the name is built in the helper's body, away from the lookup
    (LOOKUP_BY_HELPER, LOOKUP_BY_HELPER),
    # a subscript keyed by code points joined (ns["".join(chr(97 + i) for i in OFFS)],
    # ns = vars(sys.modules[len.__module__])) beside a namespace
    (
        JOINED_KEY,
        r"__dict__|\bvars\(|\bmodules\b|\bglobals\(|\bdir\(\s*(?:builtins|__builtins__)",
    ),
    # getattr or __import__ given as a parameter's default (lambda g=getattr, ...: g(m,
    # n)): the call site says g (not getattr=getattr, a builtin made local for speed)
    (
        DEFAULT_LOOKUP,
        DEFAULT_LOOKUP,
    ),
    # getattr mapped over lists or given its arguments spread (map(getattr, [b], [n]),
    # getattr(*args)): the owner and the name are elsewhere
    (
        r"\bmap\(\s*(?:builtins\s*\.\s*)?getattr\s*,|\bgetattr\(\s*\*",
        r"\bmap\(\s*(?:builtins\s*\.\s*)?getattr\s*,|\bgetattr\(\s*\*",
    ),
    # a frame's builtins or a function's globals indexed by a built name
    # (sys._getframe().f_builtins["ex" + "ec"])
    (BUILT_KEY, r"\bf_builtins\b|__globals__"),
    # a class's attribute hook beside an importer: a proxy or a metaclass that imports
    # what the attribute's or the class's name spells (lazy.os__system(cmd); class
    # subprocess(metaclass=M) then subprocess.llac_kcehc(...)); a module's own
    # __getattr__(name) (PEP 562, every lazy loader) takes one parameter and is not this
    (
        r"\bdef\s+__getattr(?:ibute)?__\s*\(\s*\w+\s*,",
        r"\b(?:__import__|import_module)\s*\(",
    ),
    # a literal with junk characters removed ('c#u#r#l'.replace('#', '')) beside what
    # gives a hidden indicator its meaning (a file opened or copied, a process, the
    # network); literals added together or joined are _glued_strings'
    (
        r"['\"]\s*\.\s*replace\(\s*['\"][^'\"\n]{1,3}['\"]\s*,\s*(?:''|\"\")\s*\)",
        _JUNK_CONTEXT,
    ),
    # -- recall6 (issue 16 point 1, remote commands) ---------------------------------------
    # network input outside the network modules (asyncio's streams, an asyncio protocol)
    # beside a process or code sink: a C2 loop running what the peer sends
    (NETWORK_INPUT_TOKENS, _SINK),
    # -- blind35 -------------------------------------------------------------------------
    # a folder put on sys.path beside a file named as a module that is written: the
    # module written there runs at its import (Sinks's sys.path run)
    (
        r"\bsys\s*\.\s*path\s*\.\s*(?:insert|append)\s*\(",
        r"\.(?:pyw?|pyc|so|pyd)['\"]",
        r"\.\s*write(?:_bytes|_text|lines)?\s*\(",
    ),
)
#: A network program in a command that is run (``Sinks.process``: reconnaissance sent by
#: ping, nslookup, curl) is an egress too, for every conjunction above whose egress is
#: :data:`_NETWORK`: the same sides, the program and whatever runs it (appended, so the
#: indices above stay).
# -- blind8 (issue 16 point 1, a blind recall round) ---------------------------------------
#: A loader of code objects reached under another name, or a function made from a code
#: object: ``import marshal as m`` then ``m.loads(...)``, ``from marshal import loads``,
#: ``types.FunctionType(code, globals())()`` (its module imported as ``t``): the sink's
#: call site spells none of :data:`_SINK`'s APIs, so a decoded blob reached it unparsed.
_ALIASED_LOADER: Final = (
    r"\bimport\s+(?:marshal|pickle|dill|cloudpickle)\s+as\b|"
    r"\bfrom\s+(?:marshal|pickle|dill|cloudpickle)\s+import\b|\bFunctionType\s*\("
)
#: Appended after every other conjunction, so the indices above stay.
#: The decoder side of "decoded data into a process or code sink" (found by what it is, not
#: by its place: the same string is one slot of the set).
_DECODED: Final = next(p[0] for p in _PAIRS if p[-1] is _SINK and "b64decode" in p[0])
_BLIND8_PAIRS: Final[tuple[tuple[str, ...], ...]] = (
    # a decoder beside it
    (_DECODED, _ALIASED_LOADER),
    # find_spec given a name, and a name built from pieces anywhere in the file
    (SPEC_BY_NAME, r"['\"]\s*\+\s*[rbuRBU]?['\"]|\.join\(|\bchr\s*\(|" + STRONG_PIECES),
    # a lookup or an importer given a name filled code point by code point (n += chr(c))
    (LOOKUP_BY_VARIABLE, r"\+=\s*chr\s*\("),
    # builtins' members made a table: what is looked up in it is found by the data flow
    (MEMBERS_OF_BUILTINS, MEMBERS_OF_BUILTINS),
)

_ATTACK9_PAIRS: Final[tuple[tuple[str, ...], ...]] = ((_DECODED, NAMESPACE_BY_NAME),)
_RECALL10_PAIRS: Final[tuple[tuple[str, ...], ...]] = ((_DECODED, NAMESPACE_FILLED),)

#: blind13: secrets read from the environment by name beside the network (CPL-THR-006 takes
#: two or more sent to a host that is not their provider): a name written out anywhere in
#: the file (a list a loop walks, ``{k: os.environ.get(k) for k in (...)}``), where the
#: environment is read. The whole-file pass found them; the prefilter's environment
#: pairs looked only for the whole mapping and for ``SECRET_ACCESS``.
_SECRET_NAME: Final = (
    r"['\"][A-Za-z0-9_]*(?i:TOKEN|SECRET|PASSW|API_?KEY|ACCESS_KEY|CREDENTIAL)"  # noqa: S105
    r"[A-Za-z0-9_]*['\"]"
)
#: The environment read by a key (``os.environ[k]``, ``.get(k)``, ``os.getenv(k)``): not
#: ``"TOKEN" in os.environ``, a membership test that reads nothing.
_ENV_READ_BY_KEY: Final = r"\benvironb?\s*(?:\[|\.\s*(?:get|pop|setdefault)\s*\()|\bgetenvb?\s*\("
_BLIND13_PAIRS: Final[tuple[tuple[str, ...], ...]] = (
    (_SECRET_NAME, _ENV_READ_BY_KEY, _NETWORK),
    # a program the package ships (joined to __file__'s folder), started at import or
    # install (CPL-THR-018): a Windows program, or any file started in the background
    # (recall16: an ELF, a jar handed to java)
    (r"\b__file__\b", PROCESS_TOKENS),
)

#: recall18: logging's loaders of a whole configuration (_config_factories.DATA_LOADERS).
_LOGGING_LOADERS: Final = r"\b(?:dictConfig|fileConfig|DictConfigurator)\b"
#: recall18: a file written (the write side of a download saved and then run).
_WRITES_FILE: Final = r"\.\s*write(?:_bytes|_text)?\s*\(|\bcopyfileobj\s*\("

#: blind31's conjunctions (each beside the rule it keeps a file for).
_BLIND31_PAIRS: Final[tuple[tuple[str, ...], ...]] = (
    # a cloud SDK's resolved credentials beside the network (SDK_CREDENTIAL_READERS)
    (r"\bget_credentials\b", _NETWORK),
    # a file written beside a module made of a file by its path (a stage written to a
    # temporary .py and imported, CPL-THR-001/-016 at the import)
    (r"\b(?:spec_from_file_location|SourceFileLoader)\b", _WRITES_FILE),
    # a JSON document written in the file beside a lookup: names kept in it, \u-escaped
    # (the evaluator reads json.loads(TEXT)["k"], CPL-THR-003)
    (r"\bloads\s*\(\s*[rbuRBU]{0,2}['\"]", LOOKUP_NAME),
    # a bytearray or list reversed in place beside a lookup (b.reverse(), CPL-THR-003)
    (r"\b(?:bytearray|list)\s*\(", r"\.\s*reverse\s*\(\s*\)", LOOKUP_NAME),
    # a runtime told to run a script by URL (deno run -A https://.../agent.ts, CPL-THR-002)
    (
        r"(?i)https?://[^\s'\"]+\.(?:[cm]?[jt]sx?|py|sh|ps1)\b",
        r"['\"]run['\"]\s*,|\b(?:deno|bun)\s+run\b",
        PROCESS_TOKENS,
    ),
)

PAIRS: Final[tuple[tuple[str, ...], ...]] = (
    *_PAIRS,
    *((*p[:-1], NETWORK_PROGRAM_TOKENS, r) for p in _PAIRS if p[-1] == _NETWORK for r in _RUNS),
    *_BLIND8_PAIRS,
    *_ATTACK9_PAIRS,
    *_RECALL10_PAIRS,
    *_BLIND13_PAIRS,
    # blind16: a network read run by exec under another name (timeit, cProfile.run, ...)
    (_NETWORK, CODE_RUNNER_TOKENS),
    # blind16: the whole environment beside a logging handler that sends to a host
    (_PAIRS[0][0], r"\b(?:HTTP|Socket|Datagram|SysLog|SMTP)Handler\b"),
    # blind16: host details beside the browser that sends them
    (RECON_TOKENS, r"\bwebbrowser\b"),
    (DOCKER_API, ESCAPE_KEYS),  # a container escaping to its host (recall16, CPL-THR-028)
    CONTAINER_COMMAND,  # ... started by a command line (docker run --privileged, recall17)
    FACTORY_TOKENS,  # a factory a configuration names, called by its loader (recall17)
    # blind17: another module's bytecode cache written by a compiler (CPL-THR-009)
    (CACHE_TOKENS, r"\bpy_compile\b"),
    # blind18: a download beside a call that starts a file or loads a library (a DLL
    # written under %APPDATA% and loaded with ctypes.WinDLL, runpy.run_path of a fetch)
    (_NETWORK, RUNS_FILE_TOKENS),
    KEYWORD_NAMED,  # a name given as a keyword's name to a **kwargs helper, looked up
    # blind18: a program found on PATH beside a file written (a command rewritten)
    (
        r"\b(?:which|find_executable)\s*\(",
        r"\bopen\(\s*[A-Za-z_][\w.]*\s*,\s*['\"][wa]|\.write_(?:text|bytes)\s*\(|"
        r"\bcopy(?:file|2)?\s*\(\s*[^,\n]+,\s*[A-Za-z_]",
    ),
    # recall18: a file written beside the network, and exec or run_path called: a download
    # written on one line and run from the file on another (CPL-THR-002). Pair 12 focused
    # such a file on the exec alone, and the write was never visited
    (_EXEC_NAME + r"\s*\(|\brun_path\s*\(", _NETWORK, _WRITES_FILE),
    # recall18: an import hook added beside the network (a finder that sends, CPL-THR-025)
    (r"\b(?:meta_path|path_hooks)\s*\.\s*(?:insert|append|extend)\s*\(", _NETWORK),
    # recall18: a logging configuration downloaded or decoded (the callables it names are
    # called), or a file fileConfig reads written by the file (its Python is evaluated)
    (_LOGGING_LOADERS, _NETWORK),
    (_LOGGING_LOADERS, _DECODED),
    (r"\bfileConfig\b", _WRITES_FILE),
    # mend19: logging's configuration listener (a socket that applies what a peer sends)
    (r"\blogging\s*\.\s*config\b|\bfrom\s+logging\s+import\b[^\n]*\bconfig\b", r"\blisten\b"),
    *_BLIND31_PAIRS,
    # blind32: a store of records opened from the package's own folder beside a code or
    # process sink (a stage kept in a shipped SQLite row, CPL-THR-029)
    (
        r"\b(?:sqlite3|shelve|dbm)\b",
        r"\b__file__\b",
        _EXEC_NAME + r"\s*\(|" + PROCESS_TOKENS,
    ),
)


#: Indices into PAIRS whose first pattern binds what other lines use: a namespace,
#: a looked-up function, exec passed as a value, what exec/eval/compile return (a code
#: object compiled on one line runs where it is used: ``FunctionType(c, g)()``, found
#: by tests/_scan/test_prefilter_trees.py) (see :func:`caplet._scan._aliases.follow`).
ALIASING_PAIRS: Final = frozenset({1, 4, 12, 13, 15, 16, 17})
#: Indices into PAIRS whose first pattern's lines are enough to visit.
LOCAL_PAIRS: Final = frozenset({1, 4, 12, 15, 16, 17})


# -- prefilter6 (issue 16, speed): sides looked for only where their conjunction may hold --
#: Sides of conjunctions that neither of the two RE2 sets holds: they are a third set,
#: asked only in a file whose two sets found every other side of one of their
#: conjunctions (``Prefilter._match``), so the answers are those of sets holding them
#: (benchmarks/prefilter_answers.py holds them to main's on both speed corpora). Chosen
#: by measurement: the pairs' set builds its DFA lazily, and a state holds a position in
#: every pattern at once; these sides (``\w*b64decode`` inside any identifier, ``\bfor\b``
#: then anything but an operator, a ``def``'s parameters up to its parenthesis, ``=`` then
#: any dotted name, case-folded host lists, many ``from X import (...`` spellings) kept
#: positions alive across much of the text, so their product of states was most of the
#: set's first pass over new text (docs/benchmarks.md, branch prefilter6). Every
#: conjunction keeps a side in the two sets (its gate), and a rare one: exec called, the
#: network, a decoder, a command's words, a literal with junk removed.
DEFERRED: Final = frozenset(
    {
        _PAYLOAD,  # beside exec called or passed as a value
        _PAIRS[0][0],  # the whole environment as a value, beside the network
        _PAIRS[3][1],  # a process call, beside the network
        _PAIRS[7][0],  # host reconnaissance, beside the network
        _PAIRS[8][0],  # credential files or the environment walked, beside the network
        _HANDED_CREDENTIALS[0],  # a credential parameter, beside an address and an egress
        _SINK,  # a process or code sink, beside a decoder, a bot, python -c, XOR, a command
        _RUNS[1],  # exec as a name, a file started, a lookup: beside a command, python -c
        _JUNK_CONTEXT,  # a file opened or copied, a sink, the network: beside junk removed
        _WRITES_FILE,  # a file written, beside exec called and the network (recall18)
    }
)
