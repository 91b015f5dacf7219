"""Text indicators of malicious intent, matched on a linear-time engine.

Malware is recognised as much by the *strings* it carries as by the calls it
makes: Discord webhooks and Telegram bot URLs (exfiltration), Chrome's
``Login Data`` and wallet files (credential theft), ``stratum+tcp://``
(mining), crontab and Run keys (persistence), ``/dev/tcp/`` (reverse
shells), ``curl … | sh`` (download and execute). The patterns below are
compiled once into one google-re2 ``Set`` (RE2 guarantees linear time in the
input: no backtracking, whatever a crafted file contains) and matched twice.
Patterns avoid counted repetition (``{16,56}``, ``.{0,200}``): combined in
one set, counters multiply DFA states until RE2 falls back to its NFA, which
measured 40x slower here; ``[^\n]*`` keeps the DFA small.

* over a whole file's bytes, as the prefilter that decides whether the AST
  pass is needed at all (:mod:`caplet._scan._prefilter`), and
* over each string constant the AST pass sees, so comments never trigger
  and the finding points at the literal.

Sources for the markers: GuardDog's semgrep/yara rules (DataDog), Phylum,
Socket and Checkmarx write-ups of PyPI stealers (W4SP, Creal, Hazard),
Sonatype's reports on miners and droppers, and CVE-2021-42574 (Trojan
Source) for the bidirectional controls.
"""

from __future__ import annotations

import enum
import re
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import re2

from caplet._scan._prefilter_sets import utf8

__all__ = [
    "AUDITOR_PATTERN",
    "BIDI_CONTROLS",
    "INDICATORS",
    "Indicator",
    "IndicatorKind",
    "IndicatorSet",
    "indicator_set",
]


class IndicatorKind(enum.Enum):
    """What a matched string suggests; the scanner maps kinds to rules."""

    #: Messenger webhooks, paste and tunnel services (CPL-THR-004).
    EXFIL_ENDPOINT = "exfil-endpoint"
    #: Browser, wallet and messenger credential stores (CPL-THR-005).
    CREDENTIAL_STORE = "credential-store"
    #: Developer credentials legitimate tools also read (CPL-THR-007 with context).
    CREDENTIAL_FILE = "credential-file"
    #: Mining pools and miners (CPL-THR-010).
    MINER = "miner"
    #: Autostart locations (CPL-PER-001, CPL-THR-009 when written).
    PERSISTENCE = "persistence"
    #: Shell idioms of reverse shells (CPL-THR-008).
    REVERSE_SHELL = "reverse-shell"
    #: Shell idioms that fetch and run a program (CPL-THR-015 with a process call).
    DOWNLOAD_EXEC = "download-exec"
    #: Clipboard access (CPL-THR-014 together with a wallet pattern).
    CLIPBOARD = "clipboard"
    #: Regular expressions for crypto-wallet addresses (CPL-THR-014).
    WALLET_PATTERN = "wallet-pattern"
    #: Shell commands that send data to a host: ``... | nc HOST PORT``, ``curl -d @file``.
    NETWORK_PIPE = "network-pipe"


@dataclass(frozen=True, slots=True)
class Indicator:
    """One marker: its kind, a short label for messages, and its RE2 pattern."""

    kind: IndicatorKind
    label: str
    pattern: str


_E = IndicatorKind.EXFIL_ENDPOINT
_C = IndicatorKind.CREDENTIAL_STORE
_F = IndicatorKind.CREDENTIAL_FILE
_M = IndicatorKind.MINER
_P = IndicatorKind.PERSISTENCE
_R = IndicatorKind.REVERSE_SHELL
_X = IndicatorKind.DOWNLOAD_EXEC
_CB = IndicatorKind.CLIPBOARD
_W = IndicatorKind.WALLET_PATTERN
_N = IndicatorKind.NETWORK_PIPE

#: A path separator as it appears in source text: ``/``, ``\`` or ``\\``.
_SEP = r"(?:/|\\{1,2})"

#: The data file of out-of-band, request-catcher, paste, file-drop, tunnel and
#: webhook services, with the sources of every name (read once, at import).
ENDPOINTS_FILE: Final = Path(__file__).with_name("exfil_domains.toml")


def _endpoint_indicators() -> tuple[Indicator, ...]:
    """One indicator per group of :data:`ENDPOINTS_FILE`.

    A domain matches itself and any host under it (the character before it
    is not a letter, digit or hyphen), never a longer name ending with it.
    """
    groups = tomllib.loads(ENDPOINTS_FILE.read_text(encoding="utf-8"))["group"]
    out: list[Indicator] = []
    for group in groups:
        alternatives = [re.escape(d) for d in group.get("domains", ())]
        if alternatives:
            out.append(
                Indicator(
                    _E,
                    group["label"],
                    r"(?i)(?:^|[^a-z0-9-])(?:" + "|".join(alternatives) + r")(?:[^a-z0-9-]|$)",
                )
            )
        prefixes = [re.escape(p) for p in group.get("prefixes", ())]
        if prefixes:
            out.append(Indicator(_E, group["label"], r"(?i)(?:" + "|".join(prefixes) + ")"))
    return tuple(out)


INDICATORS: Final[tuple[Indicator, ...]] = (
    # -- exfiltration endpoints: the groups of exfil_domains.toml, and onion services --
    *_endpoint_indicators(),
    Indicator(_E, "onion service", r"(?i)\.onion\b"),
    # -- credential stores of other programs ----------------------------------------------
    Indicator(_C, "browser password database", r"Login Data|logins\.json|key4\.db|signons\.sqlite"),
    Indicator(
        _C,
        "browser profile",
        r"(?i)Chrome" + _SEP + r"User Data|BraveSoftware|Opera Software|"
        r"Yandex" + _SEP + r"YandexBrowser|Mozilla" + _SEP + r"Firefox" + _SEP + r"Profiles|"
        r"Microsoft" + _SEP + r"Edge" + _SEP + r"User Data",
    ),
    Indicator(_C, "browser cookie key", r"\bos_crypt\b"),
    Indicator(
        _C,
        "Discord token store",
        r"(?i)discord(?:canary|ptb)?" + _SEP + r"Local Storage|Local Storage" + _SEP + r"leveldb",
    ),
    Indicator(_C, "Discord token pattern", r"\{24\}[^\n]*\{6\}[^\n]*\{2[57]\}|mfa\\\.\["),
    # the Discord client's core module, which the grabbers' "injection" rewrites to post
    # the token at every login (Creal, Luna and Blank Grabber, blind14)
    Indicator(_C, "Discord client injection", r"(?i)discord_desktop_core"),
    # a desktop wallet's Electron bundle, which W4SP-family stealers replace so the wallet
    # sends its seed phrase (Exodus, Atomic: blind18, b18-ot-wallet-asar-replace)
    Indicator(
        _C,
        "wallet app injection",
        r"(?i)\b(?:exodus|atomic|guarda|ledger live)"
        + _SEP
        + r"(?:[^\n'\"/\\]{1,40}"
        + _SEP
        + r"){0,3}app\.asar\b",
    ),
    Indicator(
        _C,
        "crypto wallet",
        r"(?i)wallet\.dat|Exodus" + _SEP + r"exodus\.wallet|Electrum" + _SEP + r"wallets|"
        r"Ethereum" + _SEP + r"keystore|atomic" + _SEP + r"Local Storage|"
        r"nkbihfbeogaeaoehlefnkodbefgpgknn|Coinomi" + _SEP + r"wallets",
    ),
    # every LevelDB table under a folder tree: the stores of Discord's tokens and of the
    # browsers' wallet extensions, searched for wherever they are (mend19; a glob's
    # pattern is read under the folder it searches: ``Path.home().rglob("*.ldb")``)
    Indicator(_C, "LevelDB tables searched for", r"\*\*" + _SEP + r"\*\.ldb\b"),
    Indicator(
        _C,
        "messenger or game session",
        r"(?i)Telegram Desktop" + _SEP + r"tdata|Steam" + _SEP + r"config" + _SEP + r"loginusers|"
        r"FileZilla" + _SEP + r"(?:recentservers|sitemanager)\.xml",
    ),
    # -- developer credentials (also read by legitimate tools) -----------------------------
    # one row per credential, so a file touching several can be told apart
    # from a publishing tool that reads its own (distlib reads .pypirc)
    Indicator(_F, "SSH key", r"\.ssh" + _SEP + r"id_"),
    Indicator(_F, "AWS credentials", r"\.aws" + _SEP + r"credentials"),
    Indicator(_F, "netrc", r"\.netrc\b"),
    Indicator(_F, "git credentials", r"\.git-credentials"),
    Indicator(_F, "Docker credentials", r"\.docker" + _SEP + r"config\.json"),
    Indicator(_F, "Kubernetes config", r"\.kube" + _SEP + r"config"),
    Indicator(_F, "package index token", r"\.pypirc|\.npmrc"),
    Indicator(_F, "password hashes", r"/etc/shadow"),
    # the environment of this or every process, where a CI runner's secrets are
    # (GITHUB_TOKEN, ACTIONS_RUNTIME_TOKEN: blind16, b16-re-proc-environ-telegram)
    Indicator(
        _F, "process environment", r"/proc/(?:self|\d+|\*|\[0-9\]\*|%[sd]|\{[^}/\n]*\})/environ\b"
    ),
    # -- mining ------------------------------------------------------------------------------
    Indicator(
        _M,
        "mining pool or miner",
        r"(?i)stratum\+(?:tcp|ssl|tls)://|\bxmrig\b|coinhive|cryptonight|nicehash|minexmr|"
        r"supportxmr|nanopool\.org|moneroocean|hashvault\.pro|--donate-level",
    ),
    # -- persistence ----------------------------------------------------------------------------
    Indicator(
        _P,
        "autostart location",
        r"(?i)\bcrontab\b|/etc/cron|/var/spool/cron|\.config/systemd/user|/etc/systemd/system/|"
        r"\.config/autostart|LaunchAgents|LaunchDaemons|/etc/rc\.local|/etc/init\.d/|"
        # an editor's extensions folder: VS Code and its forks load every extension there
        # at start (one activated on "*" runs at every launch: blind18)
        r"\.(?:vscode(?:-insiders|-server|-oss)?|cursor|windsurf|vscodium)[/\\]+extensions\b|"
        r"CurrentVersion\\{1,2}Run|\bschtasks\b|Start Menu\\{1,2}Programs\\{1,2}Startup|"
        r"\.bashrc|\.zshrc|\.bash_profile|Start Menu[/\\]+Programs|Quick Launch|"
        # a handler's open command Windows' auto-elevating programs run (fodhelper and
        # computerdefaults read ms-settings, eventvwr mscfile: Blank Grabber's UAC bypass),
        # a debugger run instead of a program, the programs started at logon (blind14)
        r"Classes\\{1,2}(?:ms-settings|mscfile|exefile|Folder|Launcher\.SystemSettings)"
        r"\\{1,2}shell\\{1,2}open\\{1,2}command|Image File Execution Options|"
        r"Winlogon\\{1,2}(?:Shell|Userinit)\b|UserInitMprLogonScript|"
        # a key that lets whoever holds it log in again (an SSH backdoor, blind14)
        r"\.ssh(?:/|\\{1,2})authorized_keys|"
        # Windows' Startup folder as a path's last piece, spelled as Windows spells it:
        # a lowercase "startup" directory is any program's (IPython's profile_default/startup)
        r"(?-i:(?:^|[/\\])Startup$)",
    ),
    # -- shells ------------------------------------------------------------------------------------
    Indicator(
        _R,
        "reverse shell idiom",
        # an interactive shell is a reverse shell only with its streams redirected or piped
        # (bash -i >& /dev/tcp/..., | /bin/sh -i 2>&1 | nc ...); "bash -i -c 'sleep 30'"
        # is a test's job-control child (jupyter-client's signalkernel)
        r"/dev/tcp/|\b(?:ba)?sh -i\b[^\n]*(?:[<>]&|\|)|\|\s*(?:/bin/)?(?:ba)?sh -i\b|"
        r"\bnc(?:at)? -e\b|mkfifo /tmp/|cmd\.exe /[ck] powershell",
    ),
    Indicator(
        _X,
        "download piped to a shell",
        r"(?i)(?:curl|wget)\b[^|;&\n]*\|\s*(?:sudo\s+)?(?:ba|z|da)?sh\b|"
        r"(?:curl|wget)\b[^\n]*(?:&&|;)[^\n]*chmod\s+\+?[0-7x]|"
        r"\bIEX\s*\(|\|\s*iex\b|Invoke-Expression|DownloadString\(|"
        r"certutil(?:\.exe)?\s+-urlcache|bitsadmin\s+/transfer|Start-Process\b",
    ),
    Indicator(
        _X,
        "decoded command piped to a shell",
        r"(?i)\bbase64\s+(?:-d|--decode|-D)\b[^\n]*\|\s*(?:sudo\s+)?(?:(?:ba|z|da)?sh|python3?)\b",
    ),
    Indicator(
        _X,
        "Windows program that fetches and runs remote code",
        r"(?i)\bmshta(?:\.exe)?\s+['\"]?(?:https?|vbscript|javascript):|"
        r"\bregsvr32(?:\.exe)?\s[^\n]*/i:\s*['\"]?https?://|\brundll32(?:\.exe)?\s+javascript:|"
        r"\bmsiexec(?:\.exe)?\s[^\n]*/i\s+['\"]?https?://",
    ),
    Indicator(
        _N,
        "data sent by a shell command",
        r"\|\s*(?:nc|ncat|netcat|socat|telnet)\s+(?:-[A-Za-z]+\s+)*[A-Za-z0-9][A-Za-z0-9.:-]*\s+\d|"
        r"(?i)\bcurl\b[^|;&\n]*\s(?:-d|--data|--data-binary|-F|--form|-T|--upload-file)\s+['\"]?[A-Za-z]*=?@",
    ),
    # -- clipboard hijacking ----------------------------------------------------------
    Indicator(
        _CB, "clipboard access", r"(?i)pyperclip|GetClipboardData|win32clipboard|clipboard_get"
    ),
    Indicator(
        _W,
        "wallet address pattern",
        r"bc1\|\[13\]|\(bc1\||0x\[a-fA-F0-9\]\{40\}|\[13\]\[a-km-zA-HJ-NP-Z1-9\]|4\[0-9AB\]",
    ),
)

#: Text addressed to an LLM reviewer (design.md section 2, threat 3; CPL-AUD-001): notes
#: to "AI reviewers", "ignore previous instructions", "you are an auditor", "rate this
#: LOW", "this code is safe, do not flag", "report only LOW".
_AUDITOR_WORDS: Final = (
    r"(?i)\b(?:note|notes|message|instructions?|attention|hint)\s+(?:to|for)\s+"
    r"(?:the\s+|any\s+|all\s+)?(?:ai|llm|gpt|chatgpt|claude|automated|language[- ]model)s?\b"
    r"|\bignore\s+(?:all\s+|any\s+)?(?:the\s+)?(?:previous|prior|above|preceding|earlier|system)\s+"
    r"(?:instructions|prompts?|rules|directions)"
    r"|\byou\s+are\s+(?:now\s+)?(?:an?\s+|the\s+)?(?:ai\s+|llm\s+|security\s+|code\s+|static\s+)?"
    r"(?:auditor|reviewer|security\s+analyst|code\s+analy[sz]er)\b"
    r"|\b(?:rate|mark|classify|score|label)\s+(?:this|it|the\s+(?:code|file|package|plugin|module))\s+"
    r"(?:as\s+)?(?:low|safe|benign|clean|harmless)\b"
    r"|\b(?:do\s+not|don't|never)\s+flag\b"
    r"|\b(?:this|the)\s+(?:code|file|package|plugin|module)\s+is\s+(?:safe|benign|harmless|"
    r"not\s+malicious)\b[^\n]*\b(?:do\s+not|don't|no\s+need\s+to)\b"
    r"|\breport\s+only\s+(?:low|info|informational|minor|no)\b"
    r"|\b(?:ai|llm)\s+(?:auditors?|reviewers?|security\s+scanners?)\b"
    r"|\b(?:attention|dear|hey|hello)\s*,?\s*(?:ai|llm|gpt|chatgpt|claude)\b"
)

#: A blank between the pattern's words: white space, or a line break into a comment's
#: next line (``# ignore previous`` / ``#   instructions``, which a model reads as one
#: comment; the ``#`` broke the blank, attack21's open row, mend19).
_BLANK: Final = r"(?:\s|\n[ \t]*#+)"
AUDITOR_PATTERN: Final = _AUDITOR_WORDS.replace(r"\s+", _BLANK + "+").replace(r"\s*", _BLANK + "*")

#: Bidirectional overrides and isolates (CVE-2021-42574, "Trojan Source"):
#: LRE, RLE, PDF, LRO, RLO, LRI, RLI, FSI, PDI.
BIDI_CONTROLS: Final = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


class IndicatorSet:
    """:data:`INDICATORS` compiled into one RE2 set (built once per process)."""

    def __init__(self, indicators: Sequence[Indicator]) -> None:
        self.indicators = tuple(indicators)
        options = re2.Options()
        options.max_mem = 64 << 20
        self._text: Any = re2.Set.SearchSet(options)
        for indicator in self.indicators:
            self._text.Add(indicator.pattern)
        self._text.Compile()
        # The gate: the same patterns in multi-line mode, so that ^ and $ also
        # match at the newlines that join a file's strings (see the scanner).
        self._gate: Any = re2.Set.SearchSet(options)
        for indicator in self.indicators:
            self._gate.Add("(?m)" + indicator.pattern)
        self._gate.Compile()

    def gate(self, joined: str) -> bool:
        """True when some indicator may match one of the newline-joined strings."""
        return bool(self._gate.Match(utf8(joined)))

    def kinds(self, text: str) -> frozenset[IndicatorKind]:
        """Kinds of every indicator found in ``text``."""
        return frozenset(self.indicators[i].kind for i in self._text.Match(utf8(text)) or ())

    def matches(self, text: str) -> tuple[Indicator, ...]:
        """Every indicator found in ``text``, in table order."""
        hits = self._text.Match(utf8(text)) or ()
        return tuple(self.indicators[i] for i in sorted(hits))


_CACHE: list[IndicatorSet] = []


def indicator_set() -> IndicatorSet:
    """The process-wide compiled set (compiling costs milliseconds, so once)."""
    if not _CACHE:
        _CACHE.append(IndicatorSet(INDICATORS))
    return _CACHE[0]
