"""SystemResolver: getaddrinfo under a deadline, failing closed.

Only numeric hosts go to the real getaddrinfo (no lookup leaves the
machine); failures and a slow resolver are a stand-in ``getaddrinfo``.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Sequence
from ipaddress import IPv4Address, IPv6Address
from typing import Any

import pytest

from caplet._broker._system_resolver import SystemResolver
from caplet._errors import DnsError


def test_numeric_host_through_the_real_getaddrinfo() -> None:
    assert SystemResolver().resolve("127.0.0.1", 443, timeout_s=5) == (IPv4Address("127.0.0.1"),)


def _answer(*hosts: str) -> list[tuple[Any, ...]]:
    entries: list[tuple[Any, ...]] = []
    for host in hosts:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sockaddr: tuple[Any, ...] = (host, 443, 0, 0) if ":" in host else (host, 443)
        entries.append((family, socket.SOCK_STREAM, 6, "", sockaddr))
    return entries


def test_answers_are_deduplicated_in_order() -> None:
    def fake(host: str, port: int, family: int, kind: int, proto: int) -> list[tuple[Any, ...]]:
        assert (family, kind, proto) == (socket.AF_UNSPEC, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        return _answer("203.0.113.7", "2001:db8::1", "203.0.113.7", "fe80::1%lo")

    assert SystemResolver(fake).resolve("h.example", 443, timeout_s=5) == (
        IPv4Address("203.0.113.7"),
        IPv6Address("2001:db8::1"),
        IPv6Address("fe80::1%lo"),
    )


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (socket.gaierror(socket.EAI_NONAME, "Name or service not known"), "no such host"),
        (socket.gaierror(socket.EAI_AGAIN, "Temporary failure"), "temporary failure; try again"),
        (socket.gaierror(socket.EAI_FAIL, "Non-recoverable"), "resolver error"),
    ],
)
def test_resolver_errors(error: socket.gaierror, expected: str) -> None:
    def fake(host: str, port: int, family: int, kind: int, proto: int) -> list[tuple[Any, ...]]:
        raise error

    with pytest.raises(DnsError) as exc:
        SystemResolver(fake).resolve("h.example", 443, timeout_s=5)
    assert str(exc.value) == f"'h.example' does not resolve ({expected})"


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ([], "'h.example' resolved to no address"),
        ([(socket.AF_UNIX, 1, 0, "", "/tmp/sock")], "resolved to an entry that is not an IP"),
        ([(socket.AF_INET, 1, 6, "")], "resolved to an entry that is not an IP"),
    ],
)
def test_odd_answers_fail_closed(answer: Sequence[tuple[Any, ...]], expected: str) -> None:
    def fake(host: str, port: int, family: int, kind: int, proto: int) -> Sequence[tuple[Any, ...]]:
        return answer

    with pytest.raises(DnsError, match=expected):
        SystemResolver(fake).resolve("h.example", 443, timeout_s=5)


def test_other_failures_fail_closed() -> None:
    def fake(host: str, port: int, family: int, kind: int, proto: int) -> list[tuple[Any, ...]]:
        raise UnicodeError("label too long")

    with pytest.raises(DnsError, match=r"looking up 'h.example' failed \(UnicodeError\)"):
        SystemResolver(fake).resolve("h.example", 443, timeout_s=5)


def test_a_slow_lookup_times_out() -> None:
    release = threading.Event()
    finished = threading.Event()

    def fake(host: str, port: int, family: int, kind: int, proto: int) -> list[tuple[Any, ...]]:
        release.wait(30)
        finished.set()
        return _answer("203.0.113.7")

    with pytest.raises(DnsError) as exc:
        SystemResolver(fake).resolve("slow.example", 443, timeout_s=0.05)
    assert str(exc.value) == "looking up 'slow.example' timed out after 0.05 s"
    release.set()
    assert finished.wait(30)
