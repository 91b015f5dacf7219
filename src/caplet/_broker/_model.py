"""The values a brokered HTTP call takes and returns, and the record of each decision."""

from __future__ import annotations

from dataclasses import dataclass

from caplet._body import body_json, body_text

__all__ = ["BrokerDecision", "HttpRequest", "HttpResponse"]


@dataclass(frozen=True, slots=True)
class HttpRequest:
    """What a plugin asks for (``ctx.http.fetch(url, method=, headers=, body=, timeout=)``).

    Fields come from the plugin, so the broker checks every one of them
    (types included) before use. ``timeout_s`` is the total time for the
    whole fetch, redirects included, capped by the network policy.
    """

    url: str
    method: str = "GET"
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes = b""
    timeout_s: float | None = None


@dataclass(frozen=True, slots=True)
class HttpResponse:
    """The final response of a fetch (after redirects).

    ``url`` is the URL that answered (normalised, query included: the
    plugin's own); ``headers`` are in received order, names as sent; the
    body is the bytes received (``Accept-Encoding: identity`` was asked for,
    so normally not compressed).
    """

    status: int
    headers: tuple[tuple[str, str], ...]
    body: bytes
    url: str

    def header(self, name: str) -> str | None:
        """The first value of header ``name`` (case-insensitive), or ``None``."""
        wanted = name.lower()
        return next((v for n, v in self.headers if n.lower() == wanted), None)

    def text(self) -> str:
        """The body decoded with the Content-Type charset (UTF-8 when absent or unknown);
        undecodable bytes become U+FFFD (:func:`caplet._body.body_text`)."""
        return body_text(self.body, self.header("content-type"))

    def json(self) -> object:
        """The body parsed as JSON; :class:`~caplet._errors.ResponseError` when it is not."""
        return body_json(self.body, self.header("content-type"), url=self.url, status=self.status)


@dataclass(frozen=True, slots=True)
class BrokerDecision:
    """One entry for the permission log (design.md layer 15): a hop allowed or refused.

    ``allowed`` says whether the policy let the request go out; ``outcome``
    is ``"status 200"`` for an answered request and the error category
    (``"blocked by policy"``, ``"timed out"`` ...) otherwise, with ``detail``
    the reason. ``url`` is redacted (no query) and no field holds a resolved
    address. ``capability`` is the grant that matched (normalised, as configured),
    ``""`` when none did; ``hop`` counts redirects (0 for the first request);
    ``sent_bytes`` and ``received_bytes`` are the hop's request and response
    body sizes (for the per-plugin metrics and budgets).
    """

    at: float
    plugin: str
    method: str
    url: str
    allowed: bool
    outcome: str
    detail: str = ""
    capability: str = ""
    hop: int = 0
    #: Body bytes of this hop's request (sent, or refused) and of its response (metrics).
    sent_bytes: int = 0
    received_bytes: int = 0
