"""The static scanner's rule table: what each rule means, how bad it is, what covers it.

Rules are data, not code paths (design.md section 6): a :class:`Rule` says
which family a finding belongs to, its severity with and without a covering
capability, and the message and fix shown to the approver. The lookup tables
below map the *spellings* the scanner recognises (fully qualified names such
as ``subprocess.run``, module names, attribute names, file names) to rule ids,
so that growing the scanner later means adding rows here, not branches in
:mod:`caplet._scan._scanner`.

Builtins are spelled ``builtins.<name>``: the scanner resolves a bare ``eval``
that no import shadows to ``builtins.eval``, so ``import builtins;
builtins.eval`` and ``builtins.__dict__["eval"]`` hit the same row.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

from caplet._capabilities._model import CapabilityKind
from caplet._findings import Severity

__all__ = [
    "API_RULES",
    "BLOB_MIN_DISTINCT",
    "BLOB_MIN_LENGTH",
    "CHR_FUNCTIONS",
    "DYNAMIC_IMPORTERS",
    "ENVIRON_MAPPINGS",
    "ENV_FUNCTIONS",
    "ENV_METHODS",
    "FILE_NAME_RULES",
    "FILE_SUFFIX_RULES",
    "FS_READ_METHODS",
    "FS_WRITE_METHODS",
    "IMPORT_STATE",
    "INTROSPECTION_ATTRIBUTES",
    "INTROSPECTION_NAMES",
    "LONG_LINE",
    "MODULE_RULES",
    "MUTATING_METHODS",
    "OPEN_FUNCTIONS",
    "OS_OPEN_WRITE_FLAGS",
    "PROGRAM_ARGUMENTS",
    "RULES",
    "SENSITIVE_PATH_MARKERS",
    "SENSITIVE_PATH_PREFIXES",
    "ArgumentSpec",
    "Rule",
    "RuleFamily",
    "RuleKind",
    "rule",
]


class RuleFamily(enum.Enum):
    """What kind of behaviour a rule detects (design.md section 6)."""

    PROCESS = "process"
    DYNAMIC_CODE = "dynamic-code"
    NATIVE = "native"
    INTROSPECTION = "introspection"
    GLOBAL_MUTATION = "global-mutation"
    NETWORK = "network"
    FILESYSTEM = "filesystem"
    ENVIRONMENT = "environment"
    OBFUSCATION = "obfuscation"
    INSTALL_HOOK = "install-hook"
    SUPPLY_CHAIN = "supply-chain"
    PERSISTENCE = "persistence"
    EXFILTRATION = "exfiltration"
    MINING = "mining"
    #: Findings about the scan itself: a file too large, too deep, unparsable.
    SCANNER = "scanner"
    #: Defensive code worth showing the approver (design.md section 6).
    MITIGATION = "mitigation"
    #: Text aimed at whoever reviews the code: the LLM auditor (design.md section 2, item 3).
    AUDITOR = "auditor"


class RuleKind(enum.Enum):
    """What a finding of the rule says about the code (GuardDog 3's split).

    ``CAPABILITY``: what the code *can do* (run programs, open sockets). In a
    plugin, a capability the manifest does not declare is danger; in a plain
    package it is only an observed capability (info), because single-API
    rules hit a large share of benign packages.
    ``THREAT``: a sign of malicious *intent* (decoded data reaching exec,
    browser credential paths, messenger webhooks, miners): danger everywhere.
    ``SIGNAL``: weak evidence (an encoded blob, a very long line): a warning
    everywhere, never enough to refuse on its own.
    ``SCANNER``: something could not be checked. ``MITIGATION``: defensive
    code (info), shown in plugin reports.
    """

    CAPABILITY = "capability"
    THREAT = "threat"
    SIGNAL = "signal"
    SCANNER = "scanner"
    MITIGATION = "mitigation"


@dataclass(frozen=True, slots=True)
class Rule:
    """One rule of the static scanner.

    ``message`` is a template with one ``{api}`` placeholder (the spelling
    found, e.g. ``subprocess.run``); ``hint`` is the fix, appended when the
    finding is not covered. ``covered_by`` is the capability kind that can
    cover the behaviour, and ``covered_severity`` the severity it then has;
    both are ``None`` when nothing can cover it (raw sockets: all network
    goes through the broker, so no capability makes a socket acceptable).
    """

    rule_id: str
    family: RuleFamily
    severity: Severity
    covered_severity: Severity | None
    covered_by: CapabilityKind | None
    message: str
    hint: str
    kind: RuleKind = RuleKind.CAPABILITY
    #: One line for ``caplet scan --rules`` and the SARIF rule description.
    rationale: str = ""


@dataclass(frozen=True, slots=True)
class ArgumentSpec:
    """Where a call takes the value the scanner wants (program, mode, key).

    ``index`` is the positional index, ``keyword`` the keyword name (``None``
    when the parameter is positional-only).
    """

    index: int
    keyword: str | None


_D, _W, _I = Severity.DANGER, Severity.WARNING, Severity.INFO
_K = CapabilityKind


def _rules(*rules: Rule) -> Mapping[str, Rule]:
    return MappingProxyType({r.rule_id: r for r in rules})


#: Every rule, by id.
RULES: Final[Mapping[str, Rule]] = _rules(
    # -- process execution ---------------------------------------------------
    Rule(
        "CPL-PROC-001",
        RuleFamily.PROCESS,
        _D,
        _W,
        _K.PROC_EXEC,
        "{api} executes a program",
        "declare proc.exec:<program> for the one program it runs, or remove the call",
        rationale="running programs escapes every Python-level restriction",
    ),
    Rule(
        "CPL-PROC-002",
        RuleFamily.PROCESS,
        _W,
        _I,
        _K.PROC_EXEC,
        "import of {api}, a process execution module",
        "declare proc.exec:<program> if the plugin runs a program, or remove the import",
        rationale="a process module is imported: the plugin may run programs",
    ),
    # -- dynamic code ----------------------------------------------------------
    Rule(
        "CPL-DYN-001",
        RuleFamily.DYNAMIC_CODE,
        _D,
        None,
        None,
        "{api} runs code built at run time",
        "no capability allows this: call the code directly instead",
        rationale="eval/exec/compile run code the scanner never saw",
    ),
    Rule(
        "CPL-DYN-002",
        RuleFamily.DYNAMIC_CODE,
        _D,
        None,
        None,
        "{api} imports or runs a module chosen at run time",
        "no capability allows this: use a plain import statement",
        rationale="a module chosen at run time hides what the plugin really imports",
    ),
    Rule(
        "CPL-DYN-003",
        RuleFamily.DYNAMIC_CODE,
        _D,
        None,
        None,
        "{api} deserialises data that can run code",
        "no capability allows this: use json (or msgpack) for data",
        rationale="pickle and marshal run code while loading data",
    ),
    Rule(
        "CPL-DYN-004",
        RuleFamily.DYNAMIC_CODE,
        _D,
        None,
        None,
        "{api} builds code or function objects by hand",
        "no capability allows this: write the function in source",
        rationale="hand-built code objects bypass the source the scanner read",
    ),
    Rule(
        "CPL-DYN-006",
        RuleFamily.DYNAMIC_CODE,
        _D,
        None,
        None,
        "module {api}: what is called on it cannot be read from the code",
        "no capability allows this: call the function you need on the module directly "
        "(os.getcwd(), not getattr(os, name) or a function that returns os)",
        rationale="a module handed on as a value hides which of its functions run",
    ),
    # -- native code -------------------------------------------------------------
    Rule(
        "CPL-NAT-001",
        RuleFamily.NATIVE,
        _D,
        None,
        None,
        "import of {api}, a foreign function interface (native code)",
        "no capability allows native code: remove the import",
        rationale="ctypes/cffi call into native code, beyond any Python-level check",
    ),
    Rule(
        "CPL-NAT-002",
        RuleFamily.NATIVE,
        _D,
        None,
        None,
        "native library {api} in the plugin tree",
        "no capability allows native code: remove the file",
        rationale="a shipped native library cannot be scanned",
    ),
    Rule(
        "CPL-NAT-003",
        RuleFamily.NATIVE,
        _D,
        None,
        None,
        "compiled bytecode {api} in the plugin tree (its code cannot be scanned)",
        "ship the .py source instead and remove the file",
        rationale="shipped bytecode can differ from the source next to it",
    ),
    # -- introspection escapes -----------------------------------------------------
    Rule(
        "CPL-INTRO-001",
        RuleFamily.INTROSPECTION,
        _D,
        None,
        None,
        "attribute {api} reaches interpreter internals (sandbox escape pattern)",
        "no capability allows this: remove the attribute access",
        rationale="__subclasses__/__globals__/frames are the classic Python sandbox escapes",
    ),
    Rule(
        "CPL-INTRO-002",
        RuleFamily.INTROSPECTION,
        _D,
        None,
        None,
        "{api} walks frames or live objects (sandbox escape pattern)",
        "no capability allows this: remove the call",
        rationale="frame and gc walking reaches objects the plugin was never given",
    ),
    # -- global mutation -----------------------------------------------------------
    Rule(
        "CPL-GLOB-001",
        RuleFamily.GLOBAL_MUTATION,
        _D,
        None,
        None,
        "{api} modifies builtins, another module or the import system",
        "no capability allows this: keep changes local to the plugin's own objects",
        rationale="patching builtins or other modules changes code the plugin does not own",
    ),
    # -- network -----------------------------------------------------------------------
    Rule(
        "CPL-NET-001",
        RuleFamily.NETWORK,
        _D,
        None,
        None,
        "import of {api}, direct network access",
        "use ctx.http (brokered) instead and declare net.http:<origin>",
        rationale="direct network access bypasses the broker's host and address checks",
    ),
    Rule(
        "CPL-NET-002",
        RuleFamily.NETWORK,
        _D,
        None,
        None,
        "{api} opens a raw network stream or a channel to another process",
        "use ctx.http (brokered) instead and declare net.http:<origin>",
        rationale="raw streams and Unix sockets bypass the broker and reach the host's daemons",
    ),
    # -- filesystem ----------------------------------------------------------------------
    Rule(
        "CPL-FS-001",
        RuleFamily.FILESYSTEM,
        _W,
        _I,
        _K.FS_WRITE,
        "{api} opens a file for writing",
        "declare fs.write:<directory> for the place it writes",
        rationale="writing files needs a declared fs.write path",
    ),
    Rule(
        "CPL-FS-002",
        RuleFamily.FILESYSTEM,
        _W,
        _I,
        _K.FS_READ,
        "{api} reads a file",
        "declare fs.read:<directory> for the place it reads",
        rationale="reading files needs a declared fs.read path",
    ),
    Rule(
        "CPL-FS-003",
        RuleFamily.FILESYSTEM,
        _W,
        _I,
        _K.FS_WRITE,
        "{api} creates, changes or deletes files",
        "declare fs.write:<directory> for the place it changes",
        rationale="creating, moving or deleting files needs a declared fs.write path",
    ),
    Rule(
        "CPL-FS-004",
        RuleFamily.FILESYSTEM,
        _W,
        _I,
        _K.FS_READ,
        "sensitive path {api} outside the declared file capabilities",
        "declare an fs.read or fs.write capability whose path contains it, or remove it",
        rationale="system and credential paths are what stealers read first",
    ),
    Rule(
        "CPL-FS-005",
        RuleFamily.FILESYSTEM,
        _W,
        _I,
        _K.FS_READ,
        "absolute path {api} outside the declared file capabilities",
        "declare fs.read or fs.write for the directory, or take the path from configuration",
        rationale="every path a plugin touches must be visible in its manifest",
    ),
    # -- environment ----------------------------------------------------------------------
    Rule(
        "CPL-ENV-001",
        RuleFamily.ENVIRONMENT,
        _D,
        _I,
        _K.ENV_READ,
        "{api} reads an environment variable",
        "declare env.read:<NAME> for that variable",
        rationale="environment variables hold tokens; each one read must be declared",
    ),
    Rule(
        "CPL-ENV-002",
        RuleFamily.ENVIRONMENT,
        _D,
        _W,
        _K.ENV_READ,
        "{api} reads the environment with a name that is not a literal",
        "read each variable by its literal name and declare env.read:<NAME> for it",
        rationale="reading the environment by a computed name can read every secret",
    ),
    # -- obfuscation ------------------------------------------------------------------------
    Rule(
        "CPL-OBF-001",
        RuleFamily.OBFUSCATION,
        _W,
        None,
        None,
        "{api} looks like an encoded blob (base64 or hex)",
        "ship data as readable files or explain the blob in the description",
        kind=RuleKind.SIGNAL,
        rationale="long encoded blobs hide code or data from review",
    ),
    Rule(
        "CPL-OBF-002",
        RuleFamily.OBFUSCATION,
        _W,
        None,
        None,
        "{api} builds a string character by character (obfuscation pattern)",
        "write the string as a literal",
        kind=RuleKind.SIGNAL,
        rationale="character-by-character strings hide names from review",
    ),
    Rule(
        "CPL-OBF-003",
        RuleFamily.OBFUSCATION,
        _W,
        None,
        None,
        "{api} is longer than 1000 characters (hides code from review)",
        "wrap the line; ship generated or minified data as a separate file",
        kind=RuleKind.SIGNAL,
        rationale="very long lines hide code past the edge of the reviewer's screen",
    ),
    # -- install hooks / supply chain ---------------------------------------------------------
    Rule(
        "CPL-HOOK-001",
        RuleFamily.INSTALL_HOOK,
        _D,
        None,
        None,
        "{api} runs arbitrary code when the tree is installed",
        "plugins are not installed with pip: remove setup.py (use pyproject.toml metadata)",
        rationale="setup.py runs with the installing user's rights",
    ),
    Rule(
        "CPL-HOOK-002",
        RuleFamily.INSTALL_HOOK,
        _D,
        None,
        None,
        "{api} is a .pth file: its import lines run at every interpreter start",
        "remove the .pth file",
        rationale=".pth files are read at every interpreter start",
    ),
    Rule(
        "CPL-HOOK-003",
        RuleFamily.INSTALL_HOOK,
        _D,
        None,
        None,
        "{api} runs automatically at interpreter start",
        "rename or remove the module",
        kind=RuleKind.THREAT,
        rationale="sitecustomize/usercustomize run at every interpreter start",
    ),
    Rule(
        "CPL-SUP-001",
        RuleFamily.SUPPLY_CHAIN,
        _W,
        None,
        None,
        "third-party import {api} (supply chain: its code is not part of this scan)",
        "vendor the code into the plugin or use the standard library",
        rationale="third-party code is not part of what was scanned and approved",
    ),
    # -- threats: signs of malicious intent, danger in plugins and packages alike ------------
    Rule(
        "CPL-THR-001",
        RuleFamily.DYNAMIC_CODE,
        _D,
        None,
        None,
        "{api} runs code that is decoded, decompressed or decrypted at run time (dropper)",
        "ship the code as readable source instead of an encoded payload",
        kind=RuleKind.THREAT,
        rationale="base64/zlib/marshal layers reaching exec are the commonest PyPI dropper",
    ),
    Rule(
        "CPL-THR-002",
        RuleFamily.DYNAMIC_CODE,
        _D,
        None,
        None,
        "{api} runs code or a program fetched from the network (download and execute)",
        "ship the code with the plugin; never execute downloaded data",
        kind=RuleKind.THREAT,
        rationale="second-stage payloads are fetched at run time so that scanners never see them",
    ),
    Rule(
        "CPL-THR-003",
        RuleFamily.INTROSPECTION,
        _D,
        None,
        None,
        "{api} looks up a builtin or module attribute by a computed name (hides what is called)",
        "call the function by its name",
        kind=RuleKind.THREAT,
        rationale="getattr(__builtins__, 'ex'+'ec') exists only to hide eval/exec from review",
    ),
    Rule(
        "CPL-THR-004",
        RuleFamily.EXFILTRATION,
        _D,
        None,
        None,
        "{api} is a messenger webhook or data-drop service in a file that collects host data, "
        "files or credentials (exfiltration)",
        "remove the endpoint; plugins send data only through declared net.http origins",
        kind=RuleKind.THREAT,
        rationale="Discord/Telegram webhooks and paste/tunnel services are where stolen data goes",
    ),
    Rule(
        "CPL-THR-005",
        RuleFamily.EXFILTRATION,
        _D,
        None,
        None,
        "{api} names a browser, wallet or messenger credential store",
        "remove the path; no plugin needs another program's credentials",
        kind=RuleKind.THREAT,
        rationale="stealers read browser Login Data, wallet files and Discord token databases",
    ),
    Rule(
        "CPL-THR-006",
        RuleFamily.EXFILTRATION,
        _D,
        None,
        None,
        "{api}: the environment (walked, dumped, or several secrets of it) is sent over the "
        "network (environment harvesting)",
        "read only the variables you need, by name, and declare env.read for each",
        kind=RuleKind.THREAT,
        rationale="dumping os.environ next to a network call is how CI tokens and API keys leak",
    ),
    Rule(
        "CPL-THR-007",
        RuleFamily.EXFILTRATION,
        _D,
        None,
        None,
        "credential path {api} in a file that also collects host details and reaches the "
        "network (credential theft)",
        "remove the credential access",
        kind=RuleKind.THREAT,
        rationale="credential files plus host fingerprinting plus egress is the stealer recipe",
    ),
    Rule(
        "CPL-THR-008",
        RuleFamily.NETWORK,
        _D,
        None,
        None,
        "{api} wires a socket to a shell (reverse shell)",
        "remove the shell; plugins never hand a terminal to the network",
        kind=RuleKind.THREAT,
        rationale="socket + dup2/pty.spawn or '/dev/tcp/' strings are textbook reverse shells",
    ),
    Rule(
        "CPL-THR-009",
        RuleFamily.PERSISTENCE,
        _D,
        None,
        None,
        "{api} is an autostart location written by this file (persistence)",
        "remove the autostart entry; plugins run only when the host calls them",
        kind=RuleKind.THREAT,
        rationale="crontab, systemd units, shell rc files and Run keys keep malware alive",
    ),
    Rule(
        "CPL-THR-010",
        RuleFamily.MINING,
        _D,
        None,
        None,
        "{api} is a crypto-mining marker",
        "remove the miner",
        kind=RuleKind.THREAT,
        rationale="stratum pools, xmrig and coinhive appear only in miners",
    ),
    Rule(
        "CPL-THR-011",
        RuleFamily.INSTALL_HOOK,
        _D,
        None,
        None,
        "{api} in setup.py runs when the package is installed",
        "do the work at build time in a declared build backend, not in setup.py",
        kind=RuleKind.THREAT,
        rationale="install-time network, exec or credential access is the typosquat payload",
    ),
    Rule(
        "CPL-THR-012",
        RuleFamily.OBFUSCATION,
        _D,
        None,
        None,
        "{api}: a bidirectional-text or invisible control character in the source "
        "(Trojan Source, CVE-2021-42574)",
        "remove the control character; the code does not read the way it runs",
        kind=RuleKind.THREAT,
        rationale="bidi overrides make reviewers see different code than the interpreter runs",
    ),
    Rule(
        "CPL-THR-013",
        RuleFamily.INSTALL_HOOK,
        _D,
        None,
        None,
        "{api} is a .pth file whose import line runs code at every interpreter start",
        "remove the code from the .pth file",
        kind=RuleKind.THREAT,
        rationale="a .pth 'import' line with exec/network/process calls is a persistent payload",
    ),
    Rule(
        "CPL-THR-014",
        RuleFamily.EXFILTRATION,
        _D,
        None,
        None,
        "{api}: clipboard access next to a crypto-wallet address pattern (clipboard hijacker)",
        "remove the clipboard code",
        kind=RuleKind.THREAT,
        rationale="clippers swap copied wallet addresses for the attacker's",
    ),
    Rule(
        "CPL-THR-015",
        RuleFamily.PROCESS,
        _D,
        None,
        None,
        "shell command {api} downloads and runs a program",
        "ship the program with the plugin; never pipe a download into a shell",
        kind=RuleKind.THREAT,
        rationale="curl|sh, wget && chmod +x and PowerShell IEX fetch the real payload",
    ),
    Rule(
        "CPL-THR-016",
        RuleFamily.DYNAMIC_CODE,
        _D,
        None,
        None,
        "{api} runs Python source kept in a string, and that source reaches processes, the "
        "network or native code (a second stage)",
        "ship the code as a module of its own, where it is reviewed and scanned as code",
        kind=RuleKind.THREAT,
        rationale="a second stage in a string (exec'd, run with python -c, or written to a file "
        "and started) is invisible to a reviewer reading the code",
    ),
    Rule(
        "CPL-THR-017",
        RuleFamily.EXFILTRATION,
        _D,
        None,
        None,
        "{api}: data about this host or its user leaves the machine (reconnaissance or "
        "exfiltration beacon)",
        "remove the beacon; a package has no reason to report who installed it, or where",
        kind=RuleKind.THREAT,
        rationale="host name, user and working directory sent to a fixed host, by HTTP or in a "
        "DNS name (ping, nslookup, getaddrinfo), are how dependency-confusion payloads report in",
    ),
    Rule(
        "CPL-THR-018",
        RuleFamily.PROCESS,
        _D,
        None,
        None,
        "{api} starts a program it copied out of the package (a dropper)",
        "ship programs as declared entry points or data files that nothing starts behind the "
        "user's back",
        kind=RuleKind.THREAT,
        rationale="droppers carry their payload as a package file and copy it out to run it",
    ),
    Rule(
        "CPL-THR-019",
        RuleFamily.INSTALL_HOOK,
        _D,
        None,
        None,
        "{api} installs another package from code, behind the resolver and the reviewer",
        "declare the dependency in the package metadata instead",
        kind=RuleKind.THREAT,
        rationale="pip.main(['install', URL]) at install or import time pulls a second stage "
        "nobody reviewed",
    ),
    Rule(
        "CPL-THR-020",
        RuleFamily.PROCESS,
        _D,
        None,
        None,
        "{api}: commands sent by a chat bot's users or a network peer are run (remote control)",
        "remove the command channel",
        kind=RuleKind.THREAT,
        rationale="Telegram/Discord bots and socket loops that run what they receive are "
        "remote-access trojans",
    ),
    Rule(
        "CPL-THR-021",
        RuleFamily.NATIVE,
        _D,
        None,
        None,
        "{api} is a native executable named like Python source",
        "remove the file; ship source as source",
        kind=RuleKind.THREAT,
        rationale="a binary named .py is hidden from every source scanner and from review",
    ),
    Rule(
        "CPL-THR-022",
        RuleFamily.NATIVE,
        _D,
        None,
        None,
        "{api} is a compiled library in a source tree that has no source or build file for it",
        "ship the library's source and build it, or publish a wheel",
        kind=RuleKind.THREAT,
        rationale="a prebuilt .pyd/.so in an sdist without anything that builds it cannot be "
        "reviewed, and is imported like any module",
    ),
    Rule(
        "CPL-THR-023",
        RuleFamily.NATIVE,
        _D,
        None,
        None,
        "{api}: executable memory called through ctypes (shellcode loader)",
        "remove the loader; no package maps executable memory by hand",
        kind=RuleKind.THREAT,
        rationale="mmap(PROT_EXEC) or VirtualAlloc plus a ctypes function pointer runs machine "
        "code no scanner can read",
    ),
    Rule(
        "CPL-THR-024",
        RuleFamily.INTROSPECTION,
        _D,
        None,
        None,
        "{api}: the interpreter's classes are walked to reach os or subprocess without "
        "importing them (sandbox escape)",
        "import what you need by name",
        kind=RuleKind.THREAT,
        rationale="object.__subclasses__() searched for _wrap_close or Popen is the classic way "
        "to call os.system while hiding the import",
    ),
    Rule(
        "CPL-THR-025",
        RuleFamily.EXFILTRATION,
        _D,
        None,
        None,
        "{api}: a function of an installed library is replaced by one of this file that "
        "sends what passes through it to a fixed host (a patched library that steals)",
        "remove the patch; wrap the library in your own function and call that",
        kind=RuleKind.THREAT,
        rationale="set-utils and ccxt-mexc-futures replaced eth_account's and ccxt's own "
        "functions so that private keys and API secrets went to the attacker with every call",
    ),
    Rule(
        "CPL-THR-026",
        RuleFamily.EXFILTRATION,
        _D,
        None,
        None,
        "{api}: credentials this code is handed (a password, a private key, a token) are "
        "sent to a fixed host in clear text (credential theft)",
        "send credentials only to the service they belong to, over TLS",
        kind=RuleKind.THREAT,
        rationale="ssh-decorator posted the host, user name, password and private key of every "
        "SSH connection it made to an http:// address of its author",
    ),
    Rule(
        "CPL-THR-027",
        RuleFamily.DYNAMIC_CODE,
        _D,
        None,
        None,
        "{api} runs compiled bytecode shipped without its source (a .pyc loader)",
        "ship the module as source; a package's code must be readable",
        kind=RuleKind.THREAT,
        rationale="fshec2 (ReversingLabs, 2023) kept its payload in a .pyc loaded through "
        "importlib, where source scanners and reviewers never look",
    ),
    Rule(
        "CPL-AUD-001",
        RuleFamily.AUDITOR,
        _W,
        None,
        None,
        "{api} is text addressed to an AI auditor or reviewer (prompt injection)",
        "remove the text; instructions to reviewers belong in the documentation, not in code",
        kind=RuleKind.SIGNAL,
        rationale="comments and strings telling an LLM reviewer to rate the code low or ignore "
        "its instructions try to turn the audit off; danger beside a dangerous capability or a "
        "threat",
    ),
    Rule(
        "CPL-NET-004",
        RuleFamily.EXFILTRATION,
        _W,
        None,
        None,
        "{api} is a messenger webhook or data-drop service",
        "remove the endpoint, or explain it in the description",
        kind=RuleKind.SIGNAL,
        rationale="a webhook alone may be a notifier (tqdm's Telegram bar); with collected "
        "data it is exfiltration (CPL-THR-004)",
    ),
    Rule(
        "CPL-PER-001",
        RuleFamily.PERSISTENCE,
        _W,
        None,
        None,
        "{api} is an autostart location",
        "remove the reference, or explain it in the description",
        kind=RuleKind.SIGNAL,
        rationale="autostart paths are rare in libraries; written, they are a threat (CPL-THR-009)",
    ),
    Rule(
        "CPL-OBF-004",
        RuleFamily.OBFUSCATION,
        _W,
        None,
        None,
        "{api} is a high-entropy string (encrypted or compressed data)",
        "ship data as files, or explain the string in the description",
        kind=RuleKind.SIGNAL,
        rationale="encrypted payloads (Fernet, XOR) look random; benign literals rarely do",
    ),
    # -- what the manifest says versus what the code does -----------------------------------
    Rule(
        "CPL-NET-003",
        RuleFamily.NETWORK,
        _W,
        _I,
        _K.NET_HTTP,
        "URL {api} names a host no net.http capability declares",
        "declare net.http for that origin, or remove the URL",
        rationale="every host a plugin talks to must be visible in its manifest",
    ),
    Rule(
        "CPL-MAN-001",
        RuleFamily.SUPPLY_CHAIN,
        _I,
        None,
        None,
        "declared capability {api} is never used by the code (over-broad manifest)",
        "remove the capability from the manifest",
        kind=RuleKind.SIGNAL,
        rationale="capabilities nobody uses are attack surface an approver grants for nothing",
    ),
    # -- mitigations: defensive code, shown in the report --------------------------------------
    Rule(
        "CPL-MIT-001",
        RuleFamily.MITIGATION,
        _I,
        None,
        None,
        "{api} resolves or refuses symlinks",
        "",
        kind=RuleKind.MITIGATION,
        rationale="resolving links before a check closes symlink escapes",
    ),
    Rule(
        "CPL-MIT-002",
        RuleFamily.MITIGATION,
        _I,
        None,
        None,
        "{api} guards against path traversal",
        "",
        kind=RuleKind.MITIGATION,
        rationale="containment checks keep '..' inside the granted directory",
    ),
    Rule(
        "CPL-MIT-003",
        RuleFamily.MITIGATION,
        _I,
        None,
        None,
        "{api} caps a size",
        "",
        kind=RuleKind.MITIGATION,
        rationale="size caps stop memory and disk exhaustion",
    ),
    # -- archives (sdists and wheels read without extracting) ------------------------------
    Rule(
        "CPL-ARC-001",
        RuleFamily.INSTALL_HOOK,
        _D,
        None,
        None,
        "archive member {api} would be written outside the install directory",
        "rebuild the archive with relative member names only",
        kind=RuleKind.THREAT,
        rationale="absolute and '..' member names overwrite files on extraction (CVE-2007-4559)",
    ),
    Rule(
        "CPL-ARC-002",
        RuleFamily.INSTALL_HOOK,
        _D,
        None,
        None,
        "archive {api} expands far beyond its size (decompression bomb)",
        "ship the data uncompressed or split it",
        kind=RuleKind.THREAT,
        rationale="a bomb exhausts the disk or memory of whoever installs or scans it",
    ),
    Rule(
        "CPL-ARC-003",
        RuleFamily.INSTALL_HOOK,
        _W,
        None,
        None,
        "archive member {api} is a link, a special file, a duplicate or an odd name",
        "replace it with a regular file of a plain name",
        kind=RuleKind.SIGNAL,
        rationale="links, duplicates and odd names make the installed tree differ from the "
        "scanned one",
    ),
    Rule(
        "CPL-ARC-004",
        RuleFamily.SCANNER,
        _W,
        None,
        None,
        "not scanned: archive member {api}",
        "rebuild the archive, or scan its members after extracting them",
        kind=RuleKind.SCANNER,
        rationale="nested, corrupt or oversized members are not known to be clean",
    ),
    # -- the scan itself ---------------------------------------------------------------------------
    Rule(
        "CPL-SCAN-001",
        RuleFamily.SCANNER,
        # Danger for a plugin (the gate fails closed: padding a plugin.py past
        # the limit hid `import ctypes` from it); a warning in package mode.
        _D,
        None,
        None,
        "not scanned: too large ({api})",
        "split the file (a plugin's code that was not scanned is refused) or raise max_file_bytes",
        kind=RuleKind.SCANNER,
        rationale="a file too large to scan is not known to be clean",
    ),
    Rule(
        "CPL-SCAN-002",
        RuleFamily.SCANNER,
        # Danger for a plugin, as CPL-SCAN-001: an 800-term expression made the
        # whole file "too complex" and its `import ctypes` passed the gate.
        _D,
        None,
        None,
        "not scanned: too complex ({api})",
        "simplify the code (split deep expressions, shorten the file): a plugin's code "
        "that was not scanned is refused",
        kind=RuleKind.SCANNER,
        rationale="a file too complex to scan is not known to be clean",
    ),
    Rule(
        "CPL-SCAN-003",
        RuleFamily.SCANNER,
        _W,
        None,
        None,
        "does not parse as Python ({api}); code rules were not applied",
        "fix the syntax or encoding error",
        kind=RuleKind.SCANNER,
        rationale="code that does not parse cannot be checked by the AST rules",
    ),
    Rule(
        "CPL-SCAN-004",
        RuleFamily.SCANNER,
        _W,
        None,
        None,
        "not scanned: cannot be read ({api})",
        "make the file readable by the scanning user",
        kind=RuleKind.SCANNER,
        rationale="an unreadable file is not known to be clean",
    ),
    Rule(
        "CPL-SCAN-005",
        RuleFamily.SCANNER,
        _W,
        None,
        None,
        "not scanned: {api} is not a regular file (symlinks are not followed)",
        "replace the link or special file with a regular file",
        kind=RuleKind.SCANNER,
        rationale="links and special files are never followed, so their targets are unscanned",
    ),
)


def rule(rule_id: str) -> Rule:
    """The rule with this id; ``KeyError`` names the id (a programming error)."""
    return RULES[rule_id]


def _table(rule_id: str, *names: str) -> dict[str, str]:
    return dict.fromkeys(names, rule_id)


#: Fully qualified callables and attributes -> rule id. Any *reference* fires,
#: not only a call: ``f = os.system; f("ls")`` is caught at ``os.system``.
_API_RULES: Final[Mapping[str, str]] = MappingProxyType(
    {
        **_table(
            "CPL-PROC-001",
            *(
                f"subprocess.{n}"
                for n in (
                    "run",
                    "call",
                    "check_call",
                    "check_output",
                    "Popen",
                    "getoutput",
                    "getstatusoutput",
                )
            ),
            "os.system",
            "os.popen",
            *(f"os.exec{s}" for s in ("l", "le", "lp", "lpe", "v", "ve", "vp", "vpe")),
            *(f"os.spawn{s}" for s in ("l", "le", "lp", "lpe", "v", "ve", "vp", "vpe")),
            "os.posix_spawn",
            "os.posix_spawnp",
            "os.fork",
            "os.forkpty",
            "pty.spawn",
            "pty.fork",
            "asyncio.create_subprocess_exec",
            "asyncio.create_subprocess_shell",
            "asyncio.subprocess.create_subprocess_exec",
            "asyncio.subprocess.create_subprocess_shell",
            "_posixsubprocess.fork_exec",
            # Standard-library functions that run a program for you.
            "pydoc.pipepager",
            "pydoc.tempfilepager",
            "webbrowser.open",
            "webbrowser.open_new",
            "webbrowser.open_new_tab",
            "webbrowser.get",
            "distutils.spawn.spawn",
            "multiprocessing.Process",
            "multiprocessing.Pool",
            "multiprocessing.get_context",
            "concurrent.futures.ProcessPoolExecutor",
        ),
        **_table(
            "CPL-DYN-001",
            "builtins.eval",
            "builtins.exec",
            "builtins.compile",
            "code.interact",
            "code.InteractiveInterpreter",
            "code.InteractiveConsole",
        ),
        **_table(
            "CPL-DYN-002",
            "builtins.__import__",
            "importlib.import_module",
            "importlib.__import__",
            "runpy.run_path",
            "runpy.run_module",
            # Loaders and import hooks that take code from files the scan does not
            # read as modules (a zip archive, a .txt holding source); the worker
            # drops the zip hook, and code that touches these could put it back.
            "zipimport.zipimporter",
            "importlib.machinery.SourceFileLoader",
            "importlib.machinery.SourcelessFileLoader",
            "importlib.machinery.ExtensionFileLoader",
            "importlib.machinery.FileFinder",
            "importlib.util.spec_from_file_location",
            "importlib.util.spec_from_loader",
            "sys.path_hooks",
            "sys.meta_path",
            "imp.load_source",
            "imp.load_compiled",
            "imp.load_dynamic",
            "imp.load_module",
            "imp.load_package",
        ),
        **_table(
            "CPL-DYN-003",
            "marshal.loads",
            "marshal.load",
            "pickle.loads",
            "pickle.load",
            "pickle.Unpickler",
            "_pickle.loads",
            "_pickle.load",
            "_pickle.Unpickler",
            "shelve.open",
        ),
        **_table("CPL-DYN-004", "types.CodeType", "types.FunctionType"),
        **_table(
            "CPL-INTRO-002",
            "sys._getframe",
            "sys._current_frames",
            "gc.get_referrers",
            "gc.get_referents",
            "gc.get_objects",
            "inspect.currentframe",
            "inspect.stack",
            "inspect.trace",
        ),
        **_table(
            "CPL-NET-002",
            "asyncio.open_connection",
            "asyncio.open_unix_connection",
            "asyncio.start_server",
            "asyncio.start_unix_server",
            # issue 13: IPC that reaches other processes of the host
            "socket.AF_UNIX",
            "multiprocessing.connection.Client",
            "multiprocessing.connection.Listener",
            "logging.handlers.SysLogHandler",
            "logging.handlers.SocketHandler",
            "logging.handlers.DatagramHandler",
        ),
        **_table(
            "CPL-FS-003",
            *(
                f"os.{n}"
                for n in (
                    "remove",
                    "unlink",
                    "rmdir",
                    "removedirs",
                    "rename",
                    "renames",
                    "replace",
                    "makedirs",
                    "mkdir",
                    "chmod",
                    "lchmod",
                    "chown",
                    "lchown",
                    "truncate",
                    "link",
                    "symlink",
                    "mkfifo",
                    "mknod",
                    "utime",
                )
            ),
            *(
                f"shutil.{n}"
                for n in (
                    "rmtree",
                    "copy",
                    "copy2",
                    "copyfile",
                    "copytree",
                    "copymode",
                    "copystat",
                    "move",
                    "chown",
                    "make_archive",
                    "unpack_archive",
                )
            ),
        ),
    }
)

#: What ``os`` takes from ``posix`` (its C module) under the same names: the
#: rules' os functions are reachable there too (``import posix;
#: posix.system("id")`` passed the danger gate). Fixed, not read from this
#: interpreter, so a scan says the same on every platform.
_POSIX_FUNCTIONS: Final = frozenset(
    {
        *("system", "execv", "execve", "fork", "forkpty", "posix_spawn", "posix_spawnp"),
        *("chmod", "chown", "lchown", "link", "mkdir", "mkfifo", "mknod", "remove"),
        *("rename", "replace", "rmdir", "unlink", "symlink", "truncate", "open"),
        *("putenv", "unsetenv"),
    }
)

#: ... and the same functions under ``posix``, the module ``os`` re-exports.
API_RULES: Final[Mapping[str, str]] = MappingProxyType(
    {
        **_API_RULES,
        **{
            f"posix.{name[3:]}": rule_id
            for name, rule_id in _API_RULES.items()
            if name.startswith("os.") and name[3:] in _POSIX_FUNCTIONS
        },
    }
)

#: Modules whose import alone is a finding (a dotted prefix matches too:
#: ``ctypes.util`` hits ``ctypes``). ``from asyncio import open_connection``
#: is checked as ``asyncio.open_connection`` against :data:`API_RULES` instead.
MODULE_RULES: Final[Mapping[str, str]] = MappingProxyType(
    {
        **_table("CPL-PROC-002", "subprocess", "pty"),
        # Third-party modules whose whole purpose is running programs: any use of
        # them runs one (sh.ls(), plumbum's local["ls"]), so importing them is the
        # finding. They passed the gate as a supply-chain warning only.
        **_table(
            "CPL-PROC-001",
            "sh",
            "pexpect",
            "ptyprocess",
            "plumbum",
            "sarge",
            "invoke",
            "fabric",
            "delegator",
            "envoy",
        ),
        # numpy.ctypeslib is ctypes under another name (its .ctypes, load_library).
        **_table(
            "CPL-NAT-001",
            "ctypes",
            "_ctypes",
            "cffi",
            "numpy.ctypeslib",
            # Compile and run native code at run time.
            "numba",
            "llvmlite",
            "pyximport",
        ),
        **_table(
            "CPL-NET-001",
            "socket",
            "_socket",
            "ssl",
            "_ssl",
            "urllib.request",
            "http.client",
            "http.server",
            "socketserver",
            "xmlrpc.client",
            "requests",
            "httpx",
            "aiohttp",
            "urllib3",
            "websockets",
            "websocket",
            "smtplib",
            "ftplib",
            "telnetlib",
            "poplib",
            "imaplib",
            "nntplib",
        ),
    }
)

#: Calls whose literal first argument names a module that gets imported.
DYNAMIC_IMPORTERS: Final = frozenset(
    {"builtins.__import__", "importlib.import_module", "importlib.__import__"}
)

#: Where each process-running call takes the program (a list's first element,
#: or a command string's first word).
PROGRAM_ARGUMENTS: Final[Mapping[str, ArgumentSpec]] = MappingProxyType(
    {
        **{
            f"subprocess.{n}": ArgumentSpec(0, "args")
            for n in ("run", "call", "check_call", "check_output", "Popen")
        },
        "subprocess.getoutput": ArgumentSpec(0, "cmd"),
        "subprocess.getstatusoutput": ArgumentSpec(0, "cmd"),
        "os.system": ArgumentSpec(0, "command"),
        "os.popen": ArgumentSpec(0, "cmd"),
        **{
            f"os.exec{s}": ArgumentSpec(0, None)
            for s in ("l", "le", "lp", "lpe", "v", "ve", "vp", "vpe")
        },
        # os.spawn*(mode, file, ...): the program is the second argument.
        **{
            f"os.spawn{s}": ArgumentSpec(1, None)
            for s in ("l", "le", "lp", "lpe", "v", "ve", "vp", "vpe")
        },
        "os.posix_spawn": ArgumentSpec(0, None),
        "os.posix_spawnp": ArgumentSpec(0, None),
        "pty.spawn": ArgumentSpec(0, "argv"),
        "asyncio.create_subprocess_exec": ArgumentSpec(0, "program"),
        "asyncio.create_subprocess_shell": ArgumentSpec(0, "cmd"),
    }
)

#: ``open``-like calls and where their mode is; no mode means read.
OPEN_FUNCTIONS: Final[Mapping[str, ArgumentSpec]] = MappingProxyType(
    {
        "builtins.open": ArgumentSpec(1, "mode"),
        "io.open": ArgumentSpec(1, "mode"),
        "codecs.open": ArgumentSpec(1, "mode"),
        "gzip.open": ArgumentSpec(1, "mode"),
        "bz2.open": ArgumentSpec(1, "mode"),
        "lzma.open": ArgumentSpec(1, "mode"),
        # os.open takes flags, not a mode string: see OS_OPEN_WRITE_FLAGS.
        "os.open": ArgumentSpec(1, "flags"),
    }
)

#: ``os.O_*`` names that make an ``os.open`` call a write.
OS_OPEN_WRITE_FLAGS: Final = frozenset({"O_WRONLY", "O_RDWR", "O_CREAT", "O_APPEND", "O_TRUNC"})

#: Method names (any receiver: the scanner does not infer types) that write
#: through ``pathlib``. ``replace`` is left out: ``str.replace`` is everywhere.
FS_WRITE_METHODS: Final = frozenset(
    {
        "write_text",
        "write_bytes",
        "unlink",
        "rmdir",
        "mkdir",
        "touch",
        "rename",
        "symlink_to",
        "hardlink_to",
    }
)

#: Method names that read a whole file through ``pathlib``.
FS_READ_METHODS: Final = frozenset({"read_text", "read_bytes"})

#: Absolute or home-relative path prefixes worth a second look; a literal
#: equal to a prefix without its trailing ``/`` (``"/etc"``) counts too.
SENSITIVE_PATH_PREFIXES: Final = (
    "/etc/",
    "/proc/",
    "/sys/",
    "/root/",
    "/home/",
    "/boot/",
    "/run/secrets",
    "/var/run/secrets",
    "/var/run/docker.sock",
    "~/.",
)

#: Substrings that mark credentials wherever they appear in a literal.
SENSITIVE_PATH_MARKERS: Final = (
    ".ssh/",
    ".aws/credentials",
    ".gnupg/",
    ".netrc",
    ".git-credentials",
    ".kube/config",
    ".docker/config.json",
)

#: The environment mappings; any access to them is an environment read.
ENVIRON_MAPPINGS: Final = frozenset({"os.environ", "os.environb", "posix.environ"})

#: Functions taking a variable name as first argument (``key`` by keyword).
ENV_FUNCTIONS: Final = frozenset({"os.getenv", "os.getenvb", "os.putenv", "os.unsetenv"})

#: Mapping methods of ``os.environ`` whose first argument is the variable name.
ENV_METHODS: Final = frozenset(
    {"get", "pop", "setdefault", "__getitem__", "__contains__", "__setitem__", "__delitem__"}
)

#: Attribute names that lead from ordinary objects to interpreter internals
#: (the classic ``().__class__.__base__.__subclasses__()`` escape, frame walking).
INTROSPECTION_ATTRIBUTES: Final = frozenset(
    {
        "__subclasses__",
        "__globals__",
        "__builtins__",
        "__code__",
        "__closure__",
        "f_back",
        "f_globals",
        "f_locals",
        "f_builtins",
        "gi_frame",
        "gi_code",
        "cr_frame",
        "ag_frame",
        "tb_frame",
    }
)

#: Bare names that are introspection escapes on their own.
INTROSPECTION_NAMES: Final = frozenset({"__builtins__"})

#: Interpreter-wide import state: writing to it changes every later import.
IMPORT_STATE: Final = frozenset(
    {"sys.modules", "sys.meta_path", "sys.path_hooks", "sys.path_importer_cache"}
)

#: Methods that mutate a list or dict in place.
MUTATING_METHODS: Final = frozenset(
    {
        "append",
        "insert",
        "extend",
        "remove",
        "pop",
        "popitem",
        "clear",
        "update",
        "setdefault",
        "__setitem__",
        "__delitem__",
    }
)

#: Callables that turn code points into characters (the chr()-join trick).
CHR_FUNCTIONS: Final = frozenset({"builtins.chr"})

#: An encoded blob is at least this long (whitespace between lines removed) ...
BLOB_MIN_LENGTH: Final = 200
#: ... and uses at least this many distinct characters, so that banners
#: (``"=" * 200``) and long runs of one digit are not blobs.
BLOB_MIN_DISTINCT: Final = 6

#: Lines longer than this many characters are a finding.
LONG_LINE: Final = 1000

#: Exact file names (any directory) -> rule id.
FILE_NAME_RULES: Final[Mapping[str, str]] = MappingProxyType(
    {
        "setup.py": "CPL-HOOK-001",
        "sitecustomize.py": "CPL-HOOK-003",
        "usercustomize.py": "CPL-HOOK-003",
    }
)

#: File name endings (any directory) -> rule id.
FILE_SUFFIX_RULES: Final[Mapping[str, str]] = MappingProxyType(
    {
        ".pth": "CPL-HOOK-002",
        ".so": "CPL-NAT-002",
        ".pyd": "CPL-NAT-002",
        ".dll": "CPL-NAT-002",
        ".dylib": "CPL-NAT-002",
        ".pyc": "CPL-NAT-003",
        ".pyo": "CPL-NAT-003",
    }
)
