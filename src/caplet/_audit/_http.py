"""One JSON POST to a model provider, with timeouts, bounded retries and a size cap.

Shared by the OpenAI-compatible and the Anthropic provider. Policy:

* 429 and 5xx (and Anthropic's 529 "overloaded") are retried up to
  ``max_retries`` times, waiting what ``Retry-After`` asks (seconds or an
  HTTP date, RFC 9110 section 10.2.3) or ``backoff_base_s * 2**attempt``; a
  server asking for more than ``max_backoff_s`` is not waited for.
* A failed or timed-out *connection* is retried the same way; a *read*
  timeout is not: the model was reached and is slow, and asking again would
  multiply the wait by the retry count.
* ``timeout_s`` is **one deadline for the whole answer** (issue 14):
  connecting, every read, every retry and every wait between retries come
  out of it. httpx's timeouts bound each socket operation, so a server
  trickling a byte before each read timeout could hold an audit for as long
  as it liked; a watchdog timer shuts the socket down at the deadline (which
  wakes a blocked ``recv``), and every chunk read checks the clock. Keep-alive
  is off, so every request opens its own connection and the watchdog always
  has the socket.
* 401/403 raise :class:`ProviderAuthError` naming the provider and
  ``CAPLET_LLM_API_KEY``; other 4xx and 3xx raise :class:`ProviderError`
  (redirects are not followed: a provider-specific key header would follow
  them to another host).
* At most ``max_response_bytes`` of an answer are read: the answer is
  untrusted input.

Every httpx exception is translated here; the key is never put in a message
(error bodies quoted from the server are scrubbed of it).
"""

from __future__ import annotations

import email.utils
import functools
import json
import math
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime

import httpx

from caplet._audit._provider import (
    ENV_API_KEY,
    ENV_BASE_URL,
    Answer,
    ProviderSettings,
    Sleep,
)
from caplet._errors import ProviderAuthError, ProviderError
from caplet._watchdog import SocketWatchdog

__all__ = ["RETRY_STATUSES", "Clock", "HttpProvider", "cut_off", "make_client", "post_json"]

#: Statuses worth asking again: rate limits and server-side failures.
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504, 529})

#: How much of an error body is quoted in a message.
_SNIPPET_CHARS = 300


#: The clock deadlines are measured on (tests pass one they control).
Clock = Callable[[], float]


def make_client(settings: ProviderSettings) -> httpx.Client:
    """An httpx client: the settings' timeouts, no redirects, no connection reuse.

    Without keep-alive every request connects, so the deadline's watchdog
    learns the socket from the connect event (a reused connection has none).
    """
    return httpx.Client(
        timeout=httpx.Timeout(settings.timeout_s, connect=settings.connect_timeout_s),
        follow_redirects=False,
        limits=httpx.Limits(max_keepalive_connections=0),
    )


def _expired(watchdog: SocketWatchdog, remaining: Callable[[], float]) -> bool:
    return watchdog.fired or remaining() <= 0


class _OutOfTimeError(Exception):
    """Internal: the answer's deadline passed (turned into a ProviderError by post_json)."""


def _scrub(text: str, settings: ProviderSettings) -> str:
    key = settings.api_key.get_secret_value() if settings.api_key is not None else ""
    if key:
        text = text.replace(key, "***")
    return text


def _retry_after(value: str | None) -> float | None:
    """Seconds from a ``Retry-After`` header (delta-seconds or HTTP-date), or None."""
    if value is None:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = (when - datetime.now(UTC)).total_seconds()
    if not math.isfinite(seconds):
        return None
    return max(0.0, seconds)


def _backoff(settings: ProviderSettings, attempt: int) -> float:
    return float(min(settings.max_backoff_s, settings.backoff_base_s * (2**attempt)))


def _read_capped(
    response: httpx.Response,
    limit: int,
    settings: ProviderSettings,
    expired: Callable[[], bool] = lambda: False,
) -> bytes:
    chunks: list[bytes] = []
    size = 0
    for chunk in response.iter_bytes():
        if expired():
            raise _OutOfTimeError
        size += len(chunk)
        if size > limit:
            raise ProviderError(
                f"{settings.label} sent an answer larger than {limit} bytes; refusing to read "
                "it (raise max_response_bytes if that is expected)",
                provider=settings.label,
            )
        chunks.append(chunk)
    return b"".join(chunks)


def _snippet(response: httpx.Response, settings: ProviderSettings) -> str:
    try:
        body = _read_capped(response, 64 * 1024, settings)
    except (ProviderError, httpx.HTTPError):
        return ""
    text = " ".join(body.decode("utf-8", "replace").split())
    return _scrub(text[:_SNIPPET_CHARS], settings)


def _auth_error(settings: ProviderSettings, status: int) -> ProviderAuthError:
    if settings.api_key is None:
        what = "no API key was sent"
        fix = f"set {ENV_API_KEY} to a key for this provider"
    else:
        what = "the API key was refused"
        fix = f"check {ENV_API_KEY} (expired, revoked, or for another provider?)"
    return ProviderAuthError(
        f"LLM provider {settings.label} answered HTTP {status}: {what}; {fix}, "
        f"or unset CAPLET_LLM_PROVIDER for a static-only audit",
        provider=settings.label,
        status=status,
    )


def post_json(
    client: httpx.Client,
    settings: ProviderSettings,
    path: str,
    headers: Mapping[str, str],
    body: Mapping[str, object],
    *,
    sleep: Sleep = time.sleep,
    clock: Clock = time.monotonic,
) -> dict[str, object]:
    """POST ``body`` as JSON to ``settings.url + path``; return the decoded JSON object.

    Everything, retries included, happens within ``settings.timeout_s`` of
    the call (module docstring). Raises :class:`ProviderAuthError` on
    401/403 and :class:`ProviderError` for everything else that is not a
    2xx JSON object in time.
    """
    url = settings.url + path
    label = settings.label
    attempts = settings.max_retries + 1
    deadline = clock() + settings.timeout_s

    def remaining() -> float:
        return deadline - clock()

    def out_of_time(detail: str) -> ProviderError:
        return ProviderError(
            f"LLM provider {label} did not answer within {settings.timeout_s:g} s ({detail}); "
            f"the limit covers connecting, reading and retrying; the model may be overloaded "
            f"or too slow for this plugin (raise CAPLET_LLM_TIMEOUT_S if it is expected)",
            provider=label,
        )

    for attempt in range(attempts):
        last = attempt == attempts - 1
        left = remaining()
        if left <= 0:
            raise out_of_time(f"time ran out before attempt {attempt + 1}")
        watchdog = SocketWatchdog(left)
        timeout = httpx.Timeout(left, connect=min(settings.connect_timeout_s, left))
        try:
            with client.stream(
                "POST",
                url,
                json=dict(body),
                headers=dict(headers),
                timeout=timeout,
                extensions={"trace": watchdog.trace},
            ) as response:
                status = response.status_code
                if status in (401, 403):
                    raise _auth_error(settings, status)
                if status in RETRY_STATUSES:
                    asked = _retry_after(response.headers.get("retry-after"))
                    detail = _snippet(response, settings)
                    if last:
                        raise ProviderError(
                            f"LLM provider {label} answered HTTP {status} "
                            f"{attempts} time(s) ({detail or 'no detail'}); try again later",
                            provider=label,
                        )
                    if asked is not None and asked > settings.max_backoff_s:
                        raise ProviderError(
                            f"LLM provider {label} answered HTTP {status} and asked to wait "
                            f"{asked:g} s, more than max_backoff_s {settings.max_backoff_s:g}; "
                            "try again later",
                            provider=label,
                        )
                    delay = asked if asked is not None else _backoff(settings, attempt)
                    why = f"HTTP {status}"
                elif 300 <= status < 400:
                    raise ProviderError(
                        f"LLM provider {label} redirected (HTTP {status}) to "
                        f"{response.headers.get('location', '?')}; set {ENV_BASE_URL} to the "
                        "final URL (redirects are not followed)",
                        provider=label,
                    )
                elif status >= 400 or status < 200:
                    raise ProviderError(
                        f"LLM provider {label} answered HTTP {status}: "
                        f"{_snippet(response, settings) or 'no detail'}; check {ENV_BASE_URL} "
                        "and CAPLET_LLM_MODEL",
                        provider=label,
                    )
                else:
                    raw = _read_capped(
                        response,
                        settings.max_response_bytes,
                        settings,
                        functools.partial(_expired, watchdog, remaining),
                    )
                    return _decode(raw, settings)
        except _OutOfTimeError:
            raise out_of_time("the answer was still arriving") from None
        except httpx.TimeoutException as exc:
            if watchdog.fired or remaining() <= 0 or not isinstance(exc, httpx.ConnectTimeout):
                raise out_of_time(f"{type(exc).__name__}") from exc
            if last:
                raise _unreachable(settings, exc, attempts) from exc
            delay = _backoff(settings, attempt)
            why = type(exc).__name__
        except httpx.TransportError as exc:
            if watchdog.fired:
                raise out_of_time("the connection was cut at the deadline") from exc
            if last:
                raise _unreachable(settings, exc, attempts) from exc
            delay = _backoff(settings, attempt)
            why = type(exc).__name__
        except httpx.HTTPError as exc:
            raise ProviderError(
                f"LLM provider {label} request failed ({type(exc).__name__}: "
                f"{_scrub(str(exc), settings)})",
                provider=label,
            ) from exc
        finally:
            watchdog.cancel()
        if delay >= remaining():
            raise out_of_time(f"{why}; waiting {delay:g} s to retry would pass the deadline")
        sleep(delay)
    raise AssertionError("unreachable: the last attempt returns or raises")  # pragma: no cover


def _unreachable(settings: ProviderSettings, exc: Exception, attempts: int) -> ProviderError:
    return ProviderError(
        f"cannot reach LLM provider {settings.label} ({type(exc).__name__}: "
        f"{_scrub(str(exc), settings)}) after {attempts} attempt(s); check "
        f"{ENV_BASE_URL} and that the server is running",
        provider=settings.label,
    )


def _decode(raw: bytes, settings: ProviderSettings) -> dict[str, object]:
    try:
        value: object = json.loads(raw)
    except ValueError as exc:
        # JSONDecodeError and UnicodeDecodeError, and the ValueError of an integer past
        # sys.get_int_max_str_digits() digits, which escaped as a foreign error (attack18).
        raise ProviderError(
            f"LLM provider {settings.label} answered with something that is not JSON "
            f"({_scrub(raw[:_SNIPPET_CHARS].decode('utf-8', 'replace'), settings)!r}); "
            f"check that {ENV_BASE_URL} points at the API root (ending in /v1)",
            provider=settings.label,
        ) from exc
    if not isinstance(value, dict):
        raise ProviderError(
            f"LLM provider {settings.label} answered with JSON that is not an object; "
            f"check that {ENV_BASE_URL} points at the API root (ending in /v1)",
            provider=settings.label,
        )
    return value


def cut_off(settings: ProviderSettings, said: str, why: tuple[str, str]) -> ProviderError:
    """The error for an answer the model stopped before its end (``said``: the field;
    ``why``: what stopped it and the fix).

    What was written is no verdict: a plugin asking for "a preliminary verdict, then the
    full analysis" had its preliminary LOW read as the answer when the token limit cut
    the rest (attack18). The audit falls back closed, with this reason.
    """
    what, fix = why
    return ProviderError(
        f"LLM provider {settings.label} stopped at {what} ({said}) before its answer ended, "
        f"so what it wrote is not a verdict{fix}",
        provider=settings.label,
    )


class HttpProvider:
    """What every HTTP provider shares: settings, one client, the protocol's properties.

    Subclasses (one module per wire API) implement ``complete``; ``sleep``
    waits between retries (tests pass a recorder so they never wait) and
    ``clock`` measures the answer's deadline.
    """

    def __init__(
        self,
        settings: ProviderSettings,
        *,
        sleep: Sleep = time.sleep,
        client: httpx.Client | None = None,
        clock: Clock = time.monotonic,
    ) -> None:
        self.settings = settings
        self._sleep = sleep
        self._clock = clock
        self._client = client if client is not None else make_client(settings)

    @property
    def name(self) -> str:
        return self.settings.kind.value

    @property
    def model(self) -> str:
        return self.settings.model

    @property
    def max_prompt_chars(self) -> int:
        return self.settings.max_prompt_chars

    @property
    def endpoint(self) -> str:
        """The API root this provider posts to: part of its reviews' identity (steer35)."""
        return self.settings.endpoint

    def answer_naming_model(self, system: str, user: str) -> Answer:
        """The model's answer to one prompt, with the model the server said answered;
        each wire API's module implements it."""
        raise NotImplementedError

    def complete(self, system: str, user: str) -> str:
        """The model's text for one prompt (:class:`AuditorProvider`)."""
        return self.answer_naming_model(system, user).text

    def __repr__(self) -> str:
        # the label never contains the API key (ProviderSettings masks it)
        return f"{type(self).__name__}({self.settings.label})"

    def close(self) -> None:
        self._client.close()
