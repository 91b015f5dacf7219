"""The prefilter's solo patterns: any one of them in a file's text sends it to the AST pass.

Split out of :mod:`caplet._scan._prefilter_patterns` (which re-exports them beside the
conjunctions that need every side) when that grew past 600 lines (blind18, recall18); the
module docstring of ``_prefilter`` explains the design.
"""

from __future__ import annotations

from typing import Final

from caplet._scan._agent_configs import AGENT_CONFIG_TOKENS
from caplet._scan._config_hijacks import CONFIG_TOKENS, RUNNER_ENV_TOKENS
from caplet._scan._indicators import INDICATORS, IndicatorKind
from caplet._scan._serialized_calls import DOCUMENT_TOKENS

__all__ = ["PREFILTER_PATTERNS"]

#: Indicator kinds that are no threat alone (see PREFILTER_PATTERNS).
_PAIRED_INDICATORS = frozenset({IndicatorKind.CLIPBOARD, IndicatorKind.DOWNLOAD_EXEC})
#: Patterns any one of which sends a file to the AST pass.
PREFILTER_PATTERNS: Final[tuple[str, ...]] = (
    r"\b(?:urlretrieve|SetValueEx|startfile|memfd_create)\b",
    # a string spelled in escapes ("\x77\x67\x65\x74") hides its text from
    # every pattern here, so it needs the AST pass (which sees the value)
    r"(?:\\x[0-9a-fA-F]{2}){8}",
    # exec imported under another name: the call site does not say exec
    r"\bimport\b[^\n]*\b(?:exec|eval|compile)\b",
    # browser and wallet folders spelled as path pieces
    r"['\"](?:Google|Chrome|User Data|Login Data|Local State|BraveSoftware|Exodus|Electrum)['\"]",
    # ... and pieces of token and wallet stores joined by pathlib's "/", or LevelDB
    # tables globbed (mend19: the indicators read the joined path and pattern)
    r"['\"](?:Local Storage|leveldb|exodus\.wallet)['\"]|['\"](?:\*\*/)?\*\.ldb['\"]",
    # credential folders spelled as path pieces: os.path.join(home, ".aws", ...)
    r"['\"]\.(?:aws|ssh|kube|docker|gnupg)['\"]",
    # executable memory (shellcode loaders), pip run from code
    r"\b(?:PROT_EXEC|VirtualAlloc(?:Ex)?|VirtualProtect(?:Ex)?|PAGE_EXECUTE_READWRITE|mprotect)\b",
    # a PowerShell command hidden in base64 (decoded and read by the command rules)
    r"(?i)['\"]-(?:EncodedCommand|enc|ec)['\"\s]",
    r"\bpip\s*\.\s*main\b|\bpip\._internal\b[^\n]*\bmain\b|\bfrom\s+pip\s+import\b[^\n]*\bmain\b",
    # an API named in a string for pkgutil to resolve ("os:system", CPL-THR-003)
    r"\bresolve_name\b|\bpydoc\s*\.\s*locate\b|\bfrom\s+pydoc\s+import\b[^\n]*\blocate\b",
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
    # -- recall5 (issue 16, computed names): getattr under another name --------------------
    # g = functools.partial(getattr, os); g("sys" + "tem"): the lookup's call site says g
    # (_lookup_forms.partial_lookup); rare in real code
    r"\bpartial\(\s*(?:builtins\s*\.\s*)?getattr\b",
    # import pip as 包; 包.main(["install", X]): pip under another name (pip.main above)
    r"(?m)^[ \t]*import[ \t]+pip(?:\._internal[\w.]*)?[ \t]+as\b",
    # sys.modules["builtins"]: builtins' namespace by its module's name
    r"\bmodules\s*(?:\[|\.\s*get\s*\()\s*[rbuRBU]?['\"]_{0,2}builtins?_{0,2}['\"]",
    # -- attack6: a lookup imported or bound under another name ---------------------------
    # ``from importlib import import_module as im``, ``from builtins import getattr as ga``,
    # ``ag = operator.attrgetter``: the lookup's call site says ``im``/``ga``/``ag``, which
    # no lookup pattern names, so a name built anywhere reached it unparsed. Alone: the
    # name may be built by any piece (a pair with them located every ``.join(`` of a large
    # file); rare in real code (17 files of the benign corpus and the stdlib)
    r"\b(?:getattr|__import__|import_module|attrgetter|methodcaller|__getattribute__)"
    r"(?:\s|\\)+as\b|(?m:=[ \t]*(?:[\w.]+[ \t]*\.[ \t]*)?"
    r"(?:import_module|attrgetter|methodcaller)[ \t]*(?:[#;]|$))",
    # -- blind13, blind15: autostart folders, start-up files, git hooks as path pieces -----
    # (Path.home() / ".config" / "systemd" / "user", os.path.join(home, ".ipython", ...)):
    # the indicators see them only joined
    r"['\"](?:systemd|autostart|LaunchAgents|LaunchDaemons|\.ipython|\.jupyter)['\"]|"
    # blind18: an editor's extensions folder, joined (".vscode", "extensions"), and an
    # Electron app's bundle ("resources", "app.asar": a wallet app replaced)
    r"['\"]\.(?:vscode(?:-insiders|-server|-oss)?|cursor|windsurf|vscodium)['\"]|['\"]app\.asar['\"]|"
    r"\b(?:(?:site|user)customize|(?:ipython|jupyter_\w+)_config)\.py\b|(?:pre|post)-[a-z-]+['\"]",
    # PyArmor's runtime given a module's encrypted bytecode (CPL-THR-027)
    r"\b__pyarmor__\s*\(",
    # blind16: a YAML or jsonpickle document's tag that calls what it names; ssh's and
    # pip's directives that run a command or pick an index
    DOCUMENT_TOKENS,
    CONFIG_TOKENS,
    # blind32: the CI runner's environment file a later step reads
    RUNNER_ENV_TOKENS,
    # blind17: an MCP client's configuration (a server entry the agent starts)
    AGENT_CONFIG_TOKENS,
    # blind16: getattr by another name (inspect's, which runs no descriptor)
    r"\bgetattr_static\b",
)
