"""The auditor-provider seam: a Protocol, its settings, and reading them from the environment.

Design.md section 7: any OpenAI-compatible chat endpoint (OpenAI, Ollama,
vLLM, llama.cpp server, LM Studio) or Anthropic, chosen by settings or by
the environment; no model configured means static-only. The implementations
are :mod:`caplet._audit._openai` and :mod:`caplet._audit._anthropic`;
:func:`caplet._audit._select.provider_from_settings` picks one.

The API key is a :class:`pydantic.SecretStr` (its ``repr`` and ``str`` are
masked) in a field excluded from the dataclass ``repr``, so neither a log
line, a traceback's locals nor an error message can show it; only the HTTP
transport reads it, to build the header.
"""

from __future__ import annotations

import enum
import ipaddress
import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable
from urllib.parse import urlsplit

from pydantic import SecretStr

from caplet._errors import AuditConfigError

__all__ = [
    "DEFAULT_MAX_PROMPT_CHARS",
    "DEFAULT_TIMEOUT_S",
    "ENV_API_KEY",
    "ENV_BASE_URL",
    "ENV_MAX_PROMPT_CHARS",
    "ENV_MODEL",
    "ENV_PROVIDER",
    "ENV_TIMEOUT_S",
    "Answer",
    "AuditorProvider",
    "NamesWhoAnswered",
    "ProviderKind",
    "ProviderSettings",
    "Sleep",
    "api_root",
    "provider_endpoint",
    "settings_from_env",
]

#: How a provider waits between retries (``time.sleep``; tests pass a recorder).
Sleep = Callable[[float], None]

ENV_PROVIDER = "CAPLET_LLM_PROVIDER"
ENV_BASE_URL = "CAPLET_LLM_BASE_URL"
ENV_MODEL = "CAPLET_LLM_MODEL"
ENV_API_KEY = "CAPLET_LLM_API_KEY"
ENV_MAX_PROMPT_CHARS = "CAPLET_LLM_MAX_PROMPT_CHARS"
ENV_TIMEOUT_S = "CAPLET_LLM_TIMEOUT_S"

#: About 50k tokens of source at ~4 characters per token: fits the context
#: window of every current hosted model and of local models run with a
#: 64k context; raise it (``CAPLET_LLM_MAX_PROMPT_CHARS``) for bigger plugins.
DEFAULT_MAX_PROMPT_CHARS = 200_000

#: Seconds one answer may take in all (connect, reads, retries): a local model
#: on a CPU can need minutes for a large plugin (``CAPLET_LLM_TIMEOUT_S`` raises it).
DEFAULT_TIMEOUT_S = 120.0


class ProviderKind(enum.Enum):
    """Which wire API the provider speaks."""

    OPENAI = "openai"
    ANTHROPIC = "anthropic"

    @property
    def default_base_url(self) -> str:
        """The hosted service's API root (``/v1`` included, as for every other server)."""
        if self is ProviderKind.OPENAI:
            return "https://api.openai.com/v1"
        return "https://api.anthropic.com/v1"


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True, slots=True)
class ProviderSettings:
    """How to reach one model. Validated on construction (:class:`AuditConfigError`).

    ``base_url`` is the API root including ``/v1`` (``""``: the hosted
    service of ``kind``); the OpenAI-compatible provider posts to
    ``<base_url>/chat/completions``, Anthropic's to ``<base_url>/messages``.
    ``timeout_s`` is one deadline for the whole answer (connecting, every
    read, every retry and wait; ``connect_timeout_s`` bounds one connect
    within it), ``max_retries`` the retries
    after a 429, a 5xx or a failed connection, waiting ``backoff_base_s * 2**n``
    seconds (or what ``Retry-After`` asks, up to ``max_backoff_s``).
    ``max_prompt_chars`` is the prompt budget: a bigger plugin is refused,
    never truncated. ``max_response_bytes`` caps what is read of an answer.
    ``temperature`` 0 makes local models as repeatable as they get; ``None``
    leaves it out (OpenAI's reasoning models refuse any value but their own).
    ``max_tokens`` bounds Anthropic answers (its API requires a bound).
    """

    kind: ProviderKind
    model: str
    base_url: str = ""
    api_key: SecretStr | None = field(default=None, repr=False)
    timeout_s: float = DEFAULT_TIMEOUT_S
    connect_timeout_s: float = 10.0
    max_retries: int = 3
    backoff_base_s: float = 1.0
    max_backoff_s: float = 60.0
    max_tokens: int = 4096
    temperature: float | None = 0.0
    max_prompt_chars: int = DEFAULT_MAX_PROMPT_CHARS
    max_response_bytes: int = 2_000_000

    def __post_init__(self) -> None:
        if not self.model.strip():
            raise AuditConfigError(
                f"LLM provider {self.kind.value}: no model given; set {ENV_MODEL} "
                "(for example llama3.1:8b on Ollama, or the provider's model id)"
            )
        url = self.url
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise AuditConfigError(
                f"LLM provider {self.kind.value}: base URL {url!r} is not an http(s) URL; "
                f"set {ENV_BASE_URL} like http://localhost:11434/v1"
            )
        if "?" in url or "#" in url:
            # caplet appends the API's path to the base URL: after a '?' or '#' it would be
            # the query's or dropped, so the server is asked something else than the base
            # names, and a review could not name the server that answered (attack36).
            raise AuditConfigError(
                f"LLM provider {self.kind.value}: base URL {url!r} holds a query or fragment "
                "('?' or '#'); caplet appends /chat/completions (or /messages) to it, which "
                f"would land there; set {ENV_BASE_URL} to the API root alone, like "
                "http://localhost:11434/v1"
            )
        if self.api_key is not None and parts.scheme == "http" and not _is_loopback(parts.hostname):
            raise AuditConfigError(
                f"LLM provider {self.kind.value}: refusing to send {ENV_API_KEY} over plain "
                f"http to {parts.hostname}; use an https base URL, or unset the key for a "
                "server that needs none"
            )
        for name in ("timeout_s", "connect_timeout_s", "max_backoff_s"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise AuditConfigError(
                    f"LLM provider settings: {name} must be a positive number of seconds, "
                    f"got {value!r}"
                )
        if not (math.isfinite(self.backoff_base_s) and self.backoff_base_s >= 0):
            raise AuditConfigError(
                f"LLM provider settings: backoff_base_s must be 0 or more, "
                f"got {self.backoff_base_s!r}"
            )
        for name in ("max_tokens", "max_prompt_chars", "max_response_bytes"):
            if getattr(self, name) < 1:
                raise AuditConfigError(
                    f"LLM provider settings: {name} must be at least 1, got {getattr(self, name)}"
                )
        if self.max_retries < 0:
            raise AuditConfigError(
                f"LLM provider settings: max_retries must be 0 or more, got {self.max_retries}"
            )

    @property
    def url(self) -> str:
        """The API root actually used (without a trailing slash)."""
        return (self.base_url.strip() or self.kind.default_base_url).rstrip("/")

    @property
    def endpoint(self) -> str:
        """The API root as a review's identity (:func:`api_root`)."""
        return api_root(self.url)

    @property
    def label(self) -> str:
        """``"openai model llama3 at http://..."``: for messages; never holds the key."""
        return f"{self.kind.value} model {self.model} at {self.url}"


class AuditorProvider(Protocol):
    """One model that answers one audit prompt.

    ``name`` is the provider kind (``"openai"``, ``"anthropic"`` or a custom
    label) and ``model`` the model; together they key the audit cache.
    ``complete`` returns the model's text, raising
    :class:`~caplet._errors.ProviderError` when the provider fails (the deep
    audit then falls back to static-only) or
    :class:`~caplet._errors.ProviderAuthError` when it refuses the key.
    """

    @property
    def name(self) -> str: ...

    @property
    def model(self) -> str: ...

    @property
    def max_prompt_chars(self) -> int: ...

    def complete(self, system: str, user: str) -> str: ...

    def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class Answer:
    """A model's answer: its text, and the model the server said answered (``model``:
    the answer's own ``model`` field as it came, ``None`` when it had none)."""

    text: str
    model: object = None


@runtime_checkable
class NamesWhoAnswered(Protocol):
    """A provider whose answers say which model answered (caplet's own, steer37).

    Not part of :class:`AuditorProvider`: an application's provider keeps working with
    ``complete`` alone, and its reviews then name the model it was asked for. The method's
    name is caplet's own: a runtime protocol matches by name alone, and an application's
    provider with an ``answer`` method of its own (a chat helper's ``answer(question,
    context) -> str``) had caplet's prompt sent to it and the audit fail with an
    AttributeError (attack38)."""

    def answer_naming_model(self, system: str, user: str) -> Answer: ...


def api_root(url: str) -> str:
    """*url* as the identity of the server that answers: ``scheme://host:port/path``,
    the host lowercased (an IPv6 zone id kept as written), the port always written, no
    user.

    A review is the model's reading *at this server* (steer35): the same provider and
    model name served from another base URL (a local server whoever wrote the plugin
    runs, a changed ``CAPLET_LLM_BASE_URL``) is another reviewer. The path is kept: one
    origin may route paths to different backends (a gateway). ``""`` when *url* is no
    http(s) URL with a host, or holds a query or fragment (attack36: the API's path
    appended to it would land there, so no path names what is asked).
    """
    text = url.strip()
    if "?" in text or "#" in text:
        # A request goes to ``<base>/chat/completions``: after a '?' or '#' that suffix is
        # the query's or dropped, so what is asked is not the path written, and two bases
        # that differ only there (a gateway routing by its query) were one identity
        # (attack36). Such a base names no server caplet can tell apart.
        return ""
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:
        return ""
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return ""
    if port is None:
        port = 443 if parts.scheme == "https" else 80
    host = parts.hostname.lower()
    if ":" in host:
        # An IPv6 zone id names an interface, and interface names are case-sensitive
        # (ip-link(8): ``eth0`` and ``ETH0`` are two): only the address is lowercased
        # (attack36: two link-local servers on two interfaces were one identity).
        address = parts.netloc.rpartition("@")[2].partition("[")[2].partition("]")[0]
        if "%" in address:
            host = f"{host.partition('%')[0]}%{address.partition('%')[2]}"
        host = f"[{host}]"
    return f"{parts.scheme}://{host}:{port}{parts.path.rstrip('/')}"


def provider_endpoint(provider: object) -> str:
    """The API root *provider* sends its prompts to, or ``""`` when it names none.

    caplet's own providers name it (``endpoint``, from their settings); an application's
    provider (``PluginHost(auditor=...)``) may: the protocol does not require it, so an
    older one keeps working, but without it its reviews are of an unknown server, which
    vouches for no later content's review (:mod:`caplet._host._review_pins`).
    """
    endpoint = getattr(provider, "endpoint", "")
    return api_root(endpoint) if isinstance(endpoint, str) else ""


def _positive_number(env: Mapping[str, str], name: str, default: float, *, whole: bool) -> float:
    text = env.get(name, "").strip()
    if not text:
        return default
    try:
        value = int(text) if whole else float(text)
        float(value)  # a whole number past a float's range (attack14)
    except (ValueError, OverflowError):
        value = -1
    if not (math.isfinite(value) and value > 0):
        kind = "whole number" if whole else "number"
        raise AuditConfigError(
            f"{name}={text!r} is not a positive {kind}; unset it for the default {default:g}"
        )
    return value


def settings_from_env(environ: Mapping[str, str] | None = None) -> ProviderSettings | None:
    """Read ``CAPLET_LLM_PROVIDER``, ``_BASE_URL``, ``_MODEL``, ``_API_KEY`` and the
    optional ``_MAX_PROMPT_CHARS`` (characters) and ``_TIMEOUT_S`` (seconds per answer).

    ``None`` when none of the first three is set (static-only). A half
    configuration (a model or URL without a provider), an unknown provider or
    a bad number raises :class:`AuditConfigError` naming the variable to fix:
    silently auditing static-only when the user asked for a model would hide
    the mistake.
    """
    env = os.environ if environ is None else environ
    provider = env.get(ENV_PROVIDER, "").strip().lower()
    base_url = env.get(ENV_BASE_URL, "").strip()
    model = env.get(ENV_MODEL, "").strip()
    key = env.get(ENV_API_KEY, "")
    if not provider:
        if base_url or model:
            set_one = ENV_BASE_URL if base_url else ENV_MODEL
            raise AuditConfigError(
                f"{set_one} is set but {ENV_PROVIDER} is not; set {ENV_PROVIDER}=openai "
                "(any OpenAI-compatible server: OpenAI, Ollama, vLLM, llama.cpp, LM Studio) "
                f"or {ENV_PROVIDER}=anthropic, or unset {set_one} for a static-only audit"
            )
        return None
    try:
        kind = ProviderKind(provider)
    except ValueError:
        raise AuditConfigError(
            f"{ENV_PROVIDER}={provider!r} is not a provider; set it to openai "
            "(any OpenAI-compatible server) or anthropic"
        ) from None
    if not model:
        raise AuditConfigError(
            f"{ENV_PROVIDER}={provider} needs a model; set {ENV_MODEL} "
            "(for example llama3.1:8b on Ollama, or the provider's model id)"
        )
    budget = int(_positive_number(env, ENV_MAX_PROMPT_CHARS, DEFAULT_MAX_PROMPT_CHARS, whole=True))
    timeout = _positive_number(env, ENV_TIMEOUT_S, DEFAULT_TIMEOUT_S, whole=False)
    return ProviderSettings(
        kind=kind,
        model=model,
        base_url=base_url,
        api_key=SecretStr(key) if key else None,
        max_prompt_chars=budget,
        timeout_s=timeout,
    )
