"""The threat and signal rules: signs of malicious intent, and weak signals.

Droppers, stealers, beacons, reverse shells, persistence, miners, installs behind the
resolver, loaders: danger everywhere. Text aimed at an auditor, webhooks, encoded blobs:
warnings.
"""

from __future__ import annotations

from typing import Final

from caplet._findings import Severity
from caplet._scan._rule_model import Rule, RuleFamily, RuleKind

__all__ = ["THREAT_RULES"]

_D, _W = Severity.DANGER, Severity.WARNING

#: Threat and signal rules, in the catalogue's order.
THREAT_RULES: Final[tuple[Rule, ...]] = (
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
        rationale="base64/zlib/marshal layers reaching exec (or exec under another name: "
        "timeit, a docstring doctest runs) are the commonest PyPI dropper",
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
        rationale="second-stage payloads are fetched at run time (downloaded, a repository "
        "git-cloned) so that scanners never see them",
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
        rationale="getattr(__builtins__, 'ex'+'ec'), a name unpacked from an integer or a "
        "logging configuration's '()' factory exist only to hide eval/exec from review",
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
        rationale="dumping os.environ (or a .env file's values) next to a network call is how "
        "CI tokens and API keys leak",
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
        rationale="install-time network (a downloader run directly or by a shell), exec or "
        "credential access is the typosquat payload",
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
        rationale="pip.main(['install', URL]) at install or import time, or a build "
        "requirement given as a URL, pulls a second stage nobody reviewed",
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
        "functions (a builtin such as __import__ too, or an import hook added to "
        "sys.meta_path) so that private keys and API secrets "
        "went to the attacker with every call",
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
        "CPL-THR-028",
        RuleFamily.PROCESS,
        _D,
        None,
        None,
        "{api} creates a container that escapes to its host through the Docker daemon",
        "remove the container; a package never asks the Docker daemon for the host",
        kind=RuleKind.THREAT,
        rationale="a container created privileged, with the host's / mounted or in its process "
        "namespace through /var/run/docker.sock (or docker run's flags) is root on the host "
        "(container escape)",
    ),
    Rule(
        "CPL-THR-029",
        RuleFamily.DYNAMIC_CODE,
        _D,
        None,
        None,
        "{api} runs code read out of a database the package ships (a hidden stage)",
        "ship the code as source; a package's code must be readable",
        kind=RuleKind.THREAT,
        rationale="a SQLite file shipped as package data holds the stage in a row the code "
        "selects and runs (blind32): no source scanner or reviewer reads a database",
    ),
    Rule(
        "CPL-THR-030",
        RuleFamily.NATIVE,
        _D,
        None,
        None,
        "{api}: compiled bytecode Python imports in place of any source",
        "ship the module's .py source and remove the .pyc (pip compiles its own caches)",
        kind=RuleKind.THREAT,
        rationale="a sourceless .pyc, or a cache compiled unchecked-hash (PEP 552), runs "
        "whatever the .py beside it says, and no scanner or reviewer reads bytecode "
        "(scandos37)",
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
)
