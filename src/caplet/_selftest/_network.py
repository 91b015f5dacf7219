"""Network attacks: sockets of every family, host services, DNS, and SSRF through ``ctx.http``.

Direct sockets aim only at listeners the bench owns on 127.0.0.1 (and an
abstract and a pathname unix socket), so an attack a missing layer lets
through reaches the bench, which notices. The SSRF cases go through the
broker with the default network policy plus one allowed address,
127.0.0.2, standing in for an intranet server that plugins may reach; its
server redirects to loopback spellings, and the bench's resolver answers a
"rebinding" name with both addresses. The server on 127.0.0.1 must never
see a request (:attr:`Arena.loopback_hits`).
"""

from __future__ import annotations

from caplet._errors import BlockedByPolicyError, BrokerError, InvalidUrlError
from caplet._host._host import PluginHost
from caplet._selftest._checks import escaped, refused
from caplet._selftest._model import (
    Arena,
    Args,
    Attempt,
    Check,
    Family,
    HostileCase,
    Layer,
    breach_unless,
    expect,
    fixed_args,
)

__all__ = ["CASES", "REBINDING_NAME"]

#: Resolved by the bench's resolver to 127.0.0.2 (allowed) *and* 127.0.0.1 (not).
REBINDING_NAME = "rebind.selftest.invalid"

TCP = """
import socket


def connect(port):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(2)
        sock.connect(("127.0.0.1", port))
        return "connected"


def run(port):
    return attempt(connect, port)
"""

TCP6 = """
import socket


def connect(port):
    with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as sock:
        sock.settimeout(2)
        sock.connect(("::1", port))
        return "connected"


def run(port):
    return attempt(connect, port)
"""

UDP = """
import socket


def send(port):
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        return sock.sendto(b"exfiltrated", ("127.0.0.1", port))


def run(port):
    return attempt(send, port)
"""

DNS = """
import socket
import struct


def query(port):
    # A DNS query for a TXT record whose name carries data: the classic exfiltration channel.
    header = struct.pack(">HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0)
    name = b"".join(bytes([len(label)]) + label for label in [b"c2VjcmV0", b"exfil", b"invalid"])
    packet = header + name + b"\\0" + struct.pack(">HH", 16, 1)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        return sock.sendto(packet, ("127.0.0.1", port))


def run(port):
    return attempt(query, port)
"""

FAMILY_SOCKET = """
import socket


def open_socket(family, kind, proto):
    with socket.socket(family, kind, proto) as sock:
        return sock.fileno()


def run(family, kind, proto):
    return attempt(open_socket, family, kind, proto)
"""

ABSTRACT = """
import socket


def connect(name):
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect("\\0" + name)
        return "connected"


def run(name):
    return attempt(connect, name)
"""

UNIX_PATH = """
import socket


def connect(path):
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(path)
        return "connected"


def run(path):
    return attempt(connect, path)
"""

FETCH = """
def run(ctx, url):
    try:
        response = ctx.http.get(url)
    except Exception as exc:
        return {"refused": type(exc).__name__, "message": str(exc)}
    return {"escaped": response.status}
"""

NO_HTTP = """
def run(ctx, url):
    return {"has_http": hasattr(ctx, "http")}
"""

#: AF_NETLINK, SOCK_RAW, NETLINK_ROUTE; AF_PACKET, SOCK_RAW, ETH_P_ALL; AF_INET raw ICMP.
_NETLINK = (16, 3, 0)
_PACKET = (17, 3, 0x0300)
_RAW_ICMP = (2, 3, 1)
_VSOCK = (40, 1, 0)


def _url(template: str) -> Args:
    def args(arena: Arena, _plugin: str) -> tuple[object, ...]:
        return (template.format(**arena.placeholders()),)

    return args


def brokered(
    error: type[BrokerError],
    *says: str,
    reached_intranet: bool = False,
    by_name: bool = False,
) -> Check:
    """The broker refused with ``error``; the loopback server never saw a request.

    ``by_name``: the URL names a host, so the refusal must not name the
    address it resolved to (docs/network.md: a plugin could otherwise map
    the host's network by reading its own error messages).
    """

    def check(attempt: Attempt, arena: Arena, _host: PluginHost) -> None:
        breach_unless(not escaped(attempt), f"the fetch went through: {attempt.describe()}")
        hits = arena.loopback_hits()
        breach_unless(hits == (), f"127.0.0.1 was reached: {hits}")
        expect(attempt.enabled and attempt.error is None, attempt.describe())
        value = attempt.value
        expect(
            isinstance(value, dict) and value.get("refused") == error.__name__,
            f"expected {error.__name__}",
        )
        message = str(value.get("message", "")) if isinstance(value, dict) else ""
        for text in says:
            expect(text in message, f"expected the refusal to say {text!r}")
        if by_name:
            breach_unless(
                "127.0.0." not in message, f"the refusal leaks a resolved address: {message}"
            )
        if reached_intranet:
            expect(arena.intranet_hits(), "the first hop never reached the intranet server")

    return check


def no_http_attribute(attempt: Attempt, _arena: Arena, _host: PluginHost) -> None:
    expect(attempt.enabled and attempt.error is None, attempt.describe())
    breach_unless(attempt.value == {"has_http": False}, f"ctx.http exists: {attempt.describe()}")


_LOOPBACK_GRANT = "net.http:http://127.0.0.1:{http_port}"
_INTRANET_GRANT = "net.http:http://127.0.0.2:{intranet_port}"


def _redirect(to: str) -> Args:
    return _url("http://127.0.0.2:{intranet_port}/redirect?to=" + to)


CASES: tuple[HostileCase, ...] = (
    HostileCase(
        "tcp-connect",
        Family.NETWORK,
        "connect over TCP to a listener on 127.0.0.1",
        Layer.SECCOMP,
        TCP,
        refused("EPERM"),
        args=lambda arena, _plugin: (arena.tcp_port,),
    ),
    HostileCase(
        "tcp6-connect",
        Family.NETWORK,
        "connect over TCP/IPv6 to ::1",
        Layer.SECCOMP,
        TCP6,
        refused("EPERM"),
        args=lambda arena, _plugin: (arena.tcp_port,),
    ),
    HostileCase(
        "udp-send",
        Family.NETWORK,
        "send a UDP datagram to 127.0.0.1",
        Layer.SECCOMP,
        UDP,
        refused("EPERM"),
        args=lambda arena, _plugin: (arena.udp_port,),
    ),
    HostileCase(
        "dns-exfiltration",
        Family.NETWORK,
        "send a DNS query carrying data to a resolver (the bench's, on 127.0.0.1)",
        Layer.SECCOMP,
        DNS,
        refused("EPERM"),
        args=lambda arena, _plugin: (arena.udp_port,),
    ),
    # Without seccomp this is EPERM too (no CAP_NET_RAW is left, capabilities(7)):
    # the errno cannot tell the two layers apart; the seccomp tests do.
    HostileCase(
        "raw-socket",
        Family.NETWORK,
        "open a raw ICMP socket",
        Layer.SECCOMP,
        FAMILY_SOCKET,
        refused("EPERM"),
        args=fixed_args(*_RAW_ICMP),
    ),
    HostileCase(
        "packet-socket",
        Family.NETWORK,
        "open an AF_PACKET socket (sniff every frame)",
        Layer.SECCOMP,
        FAMILY_SOCKET,
        refused("EPERM"),
        args=fixed_args(*_PACKET),
    ),
    HostileCase(
        "netlink-socket",
        Family.NETWORK,
        "open a NETLINK_ROUTE socket (read or change routes and interfaces)",
        Layer.SECCOMP,
        FAMILY_SOCKET,
        refused("EPERM"),
        args=fixed_args(*_NETLINK),
    ),
    HostileCase(
        "vsock-socket",
        Family.NETWORK,
        "open an AF_VSOCK socket (talk to a hypervisor)",
        Layer.SECCOMP,
        FAMILY_SOCKET,
        refused("EPERM"),
        args=fixed_args(*_VSOCK),
    ),
    HostileCase(
        "abstract-unix",
        Family.NETWORK,
        "connect to the host's abstract unix socket",
        # socket() itself is refused (issue 13 point 3); without seccomp the
        # jail's network namespace answers ECONNREFUSED.
        Layer.SECCOMP,
        ABSTRACT,
        refused("EPERM"),
        args=lambda arena, _plugin: (arena.abstract_name,),
    ),
    HostileCase(
        "unix-host-service",
        Family.NETWORK,
        "connect to a host service's unix socket (a stand-in for docker.sock or D-Bus)",
        # socket() itself is refused; without seccomp the path is not in the jail (ENOENT).
        Layer.SECCOMP,
        UNIX_PATH,
        refused("EPERM"),
        args=lambda arena, _plugin: (str(arena.unix_path),),
    ),
    HostileCase(
        "ssrf-loopback",
        Family.NETWORK,
        "ctx.http to http://127.0.0.1 (granted by its manifest)",
        Layer.BROKER,
        FETCH,
        brokered(BlockedByPolicyError, "blocked by policy", "loopback"),
        args=_url("http://127.0.0.1:{http_port}/"),
        capabilities=(_LOOPBACK_GRANT,),
    ),
    HostileCase(
        "ssrf-localhost-name",
        Family.NETWORK,
        "ctx.http to http://localhost (a name that resolves to loopback)",
        Layer.BROKER,
        FETCH,
        brokered(BlockedByPolicyError, "blocked by policy", "loopback", by_name=True),
        args=_url("http://localhost:{http_port}/"),
        capabilities=("net.http:http://localhost:{http_port}",),
    ),
    HostileCase(
        "ssrf-decimal-ip",
        Family.NETWORK,
        "ctx.http to http://2130706433 (127.0.0.1 as one number)",
        Layer.BROKER,
        FETCH,
        brokered(BlockedByPolicyError, "blocked by policy"),
        args=_url("http://2130706433:{http_port}/"),
        capabilities=(_LOOPBACK_GRANT,),
    ),
    HostileCase(
        "ssrf-short-ip",
        Family.NETWORK,
        "ctx.http to http://127.1 (a shortened IPv4 spelling)",
        Layer.BROKER,
        FETCH,
        brokered(BlockedByPolicyError, "blocked by policy"),
        args=_url("http://127.1:{http_port}/"),
        capabilities=(_LOOPBACK_GRANT,),
    ),
    HostileCase(
        "ssrf-ipv6-loopback",
        Family.NETWORK,
        "ctx.http to http://[::1]",
        Layer.BROKER,
        FETCH,
        brokered(BlockedByPolicyError, "blocked by policy"),
        args=_url("http://[::1]:{http_port}/"),
        capabilities=("net.http:http://[::1]:{http_port}",),
    ),
    HostileCase(
        "ssrf-mapped-ipv6",
        Family.NETWORK,
        "ctx.http to http://[::ffff:127.0.0.1] (IPv4-mapped loopback)",
        Layer.BROKER,
        FETCH,
        brokered(BlockedByPolicyError, "blocked by policy"),
        args=_url("http://[::ffff:127.0.0.1]:{http_port}/"),
        capabilities=("net.http:http://[::ffff:127.0.0.1]:{http_port}",),
    ),
    HostileCase(
        "ssrf-unspecified",
        Family.NETWORK,
        "ctx.http to http://0.0.0.0 (Linux connects it to the local host)",
        Layer.BROKER,
        FETCH,
        brokered(BlockedByPolicyError, "blocked by policy"),
        args=_url("http://0.0.0.0:{http_port}/"),
        capabilities=("net.http:http://0.0.0.0:{http_port}",),
    ),
    HostileCase(
        "ssrf-rebinding",
        Family.NETWORK,
        "ctx.http to a name answering with an allowed and a loopback address",
        Layer.BROKER,
        FETCH,
        brokered(BlockedByPolicyError, "blocked by policy", by_name=True),
        args=_url(f"http://{REBINDING_NAME}:{{intranet_port}}/"),
        capabilities=(f"net.http:http://{REBINDING_NAME}:{{intranet_port}}",),
    ),
    HostileCase(
        "ssrf-redirect-loopback",
        Family.NETWORK,
        "ctx.http to an allowed server that redirects to http://127.0.0.1",
        Layer.BROKER,
        FETCH,
        brokered(BlockedByPolicyError, "blocked by policy", reached_intranet=True),
        args=_redirect("http://127.0.0.1:{http_port}/"),
        capabilities=(_INTRANET_GRANT, _LOOPBACK_GRANT),
    ),
    HostileCase(
        "ssrf-redirect-localhost",
        Family.NETWORK,
        "ctx.http to an allowed server that redirects to http://localhost",
        Layer.BROKER,
        FETCH,
        brokered(BlockedByPolicyError, "blocked by policy", reached_intranet=True, by_name=True),
        args=_redirect("http://localhost:{http_port}/"),
        capabilities=(_INTRANET_GRANT, "net.http:http://localhost:{http_port}"),
    ),
    HostileCase(
        "ssrf-redirect-ungranted",
        Family.NETWORK,
        "ctx.http to an allowed server that redirects to an origin it was not granted",
        Layer.BROKER,
        FETCH,
        brokered(BlockedByPolicyError, reached_intranet=True),
        args=_redirect("http://127.0.0.1:{http_port}/"),
        capabilities=(_INTRANET_GRANT,),
    ),
    HostileCase(
        "ssrf-redirect-file",
        Family.NETWORK,
        "ctx.http to an allowed server that redirects to file:///etc/passwd",
        Layer.BROKER,
        FETCH,
        brokered(InvalidUrlError, "blocked by policy", reached_intranet=True),
        args=_redirect("file:///etc/passwd"),
        capabilities=(_INTRANET_GRANT,),
    ),
    # A Location httpx could not parse raised httpx.InvalidURL out of host.call and
    # host.exec (issue 13); the broker reads it by caplet's URL rules instead.
    HostileCase(
        "redirect-location-backslash",
        Family.NETWORK,
        "ctx.http to an allowed server that redirects to http:\\\\127.0.0.1 (parser differential)",
        Layer.BROKER,
        FETCH,
        brokered(InvalidUrlError, "Location", "backslash", reached_intranet=True),
        args=_redirect("http:%5C%5C127.0.0.1:{http_port}/"),
        capabilities=(_INTRANET_GRANT, _LOOPBACK_GRANT),
    ),
    HostileCase(
        "redirect-location-scheme-only",
        Family.NETWORK,
        "ctx.http to an allowed server that redirects to https:x (a scheme, no authority)",
        Layer.BROKER,
        FETCH,
        brokered(InvalidUrlError, "Location", reached_intranet=True),
        args=_redirect("https:x"),
        capabilities=(_INTRANET_GRANT,),
    ),
    HostileCase(
        "http-without-grant",
        Family.NETWORK,
        "use ctx.http without any net.http capability",
        Layer.CONTEXT,
        NO_HTTP,
        no_http_attribute,
        args=_url("http://127.0.0.1:{http_port}/"),
    ),
)
