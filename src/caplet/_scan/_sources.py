"""The data-flow tables: where threatening data comes from, and where it must not go.

:mod:`caplet._scan._flow` labels every expression of a file with the
*sources* its value may carry (decoded bytes, data read from the network,
host reconnaissance, the environment, secrets, credential files);
:mod:`caplet._scan._sinks` checks the labels that reach a *sink* (code
execution, a process, an egress, a name resolution, a file that is then
run). The spellings live here, as data, like the rule tables of
:mod:`caplet._scan._rules`.
"""

from __future__ import annotations

import enum
from typing import Final

from caplet._scan._chat_bots import BOT_FRAMEWORKS
from caplet._scan._rules import MODULE_RULES

__all__ = [
    "BOT_FRAMEWORKS",
    "COOKIE_JAR_READERS",
    "COOKIE_READERS",
    "DECODERS",
    "DECODER_METHODS",
    "DECODING_CODECS",
    "DNS_ANSWERS",
    "DNS_FUNCTIONS",
    "DNS_METHODS",
    "EGRESS_VERBS",
    "ENV_FILE_READERS",
    "EXECUTORS",
    "HTTP_CLIENT_MODULES",
    "INTERPRETERS",
    "LITERAL_DECODERS",
    "NETWORK_CALLBACKS",
    "NETWORK_MODULES",
    "NETWORK_PROGRAMS",
    "NETWORK_READS",
    "NETWORK_STREAMS",
    "NON_PAYLOAD_KEYWORDS",
    "NOT_EGRESS",
    "PIP_MAINS",
    "PROCESS_OUTPUTS",
    "PUBLIC_IP_SERVICES",
    "RECON_ENV_NAMES",
    "RECON_FILES",
    "RECON_FUNCTIONS",
    "RECON_PROGRAMS",
    "REQUEST_HANDLERS",
    "RPC_PROXIES",
    "RUNS_FILE",
    "SDK_CREDENTIAL_READERS",
    "SHELLS",
    "Source",
]


class Source(enum.Enum):
    """What a value may carry, as far as the threat rules care."""

    #: base64/hex/zlib/rot13/XOR/Fernet output, text rebuilt from code points.
    DECODED = "decoded"
    #: bytes read from the network (a response body, a socket).
    DOWNLOADED = "downloaded"
    #: text a chat bot or a socket peer sent: a command from someone else.
    REMOTE = "remote"
    #: the host's identity: host name, user, uid, working directory, MAC, /etc/passwd.
    RECON = "recon"
    #: the whole environment (walked, copied or dumped), not one variable.
    ENVIRONMENT = "environment"
    #: one secret-named environment variable (the label's detail is its name).
    SECRET = "secret"  # noqa: S105 -- a label name, not a password
    #: the content of a developer credential file (the detail says which).
    CREDENTIAL = "credential"
    #: a path inside the package itself (derived from ``__file__``).
    PACKAGED = "packaged"


#: Calls whose result is decoded, decompressed or decrypted data.
DECODERS: Final = frozenset(
    {
        *(
            f"base64.{n}"
            for n in (
                "b64decode",
                "b32decode",
                # the "extended hex" alphabet (Python 3.10; blind31)
                "b32hexdecode",
                "b16decode",
                "a85decode",
                "b85decode",
                "decodebytes",
                "decodestring",
                "standard_b64decode",
                "urlsafe_b64decode",
            )
        ),
        "binascii.a2b_base64",
        "binascii.a2b_hex",
        "binascii.unhexlify",
        "zlib.decompress",
        "gzip.decompress",
        "bz2.decompress",
        "lzma.decompress",
        "marshal.loads",
        "codecs.decode",
        # backslash escapes undone (``codecs.escape_decode(b"\\x69...")[0]``: blind35)
        "codecs.escape_decode",
        "builtins.bytes.fromhex",
        "builtins.bytearray.fromhex",
        # the text codecs besides base64 undo an encoding as well (blind15): quoted-
        # printable, uuencode; HTML entities and URL escapes are LITERAL_DECODERS
        "quopri.decodestring",
        "binascii.a2b_qp",
        "binascii.a2b_uu",
    }
)
#: Decoders of text every web library decodes at run time (URLs, HTML): decoded data only
#: when what they decode is a literal of the file, a payload hidden in escapes (blind15).
LITERAL_DECODERS: Final = frozenset(
    {
        "html.unescape",
        *(f"urllib.parse.{n}" for n in ("unquote", "unquote_plus", "unquote_to_bytes")),
    }
)
#: Method names that decode whatever their receiver is (Fernet, bytes, codecs).
DECODER_METHODS: Final = frozenset(
    {
        "b64decode",
        "b32decode",
        "b32hexdecode",
        "a85decode",
        "b85decode",
        "decodebytes",
        "unhexlify",
        "a2b_base64",
        "decompress",
        "decrypt",
    }
)
#: The last name of a call that reads from the network (a response, a received message) ...
NETWORK_READS: Final = frozenset(
    {
        "get",
        "post",
        "put",
        "patch",
        "delete",
        "head",
        "request",
        "urlopen",
        "urlretrieve",
        "download",
        "recv",
        "recvfrom",
        "read",
        "readline",
        "readlines",
        "iter_content",
        "iter_bytes",
        "iter_lines",
        "getresponse",
        "stream",
        "fetch",
        "retrbinary",
        "retrlines",
        # telnetlib's readers; what a command run on another host by SSH prints
        "read_until",
        "read_all",
        "read_some",
        "read_eager",
        "read_very_eager",
        "exec_command",
        # ZeroMQ's receivers (recall10)
        "recv_string",
        "recv_json",
        "recv_pyobj",
        "recv_multipart",
    }
)
#: ... made on an object a network call returned, or a function of one of these modules.
HTTP_CLIENT_MODULES: Final = frozenset(
    {"requests", "httpx", "urllib.request", "urllib", "urllib3", "wget", "aiohttp", "http.client"}
)
# -- network input handed over otherwise than as a call's result (recall6, issue 16) -------
#: Calls whose result is a connection to a peer, outside the network modules: what is read
#: from it (``reader, writer = await asyncio.open_connection(h, p)``; ``reader.read()``)
#: is the peer's message, a command in a C2 loop. Not the Unix-socket ones: a peer of
#: this host.
NETWORK_STREAMS: Final = frozenset(
    {
        "asyncio.open_connection",
        "asyncio.streams.open_connection",
        "trio.open_tcp_stream",
        "trio.open_ssl_over_tcp_stream",
        "anyio.connect_tcp",
    }
)
#: Methods of network objects (a name the resolver gives under a network module) that hand
#: what they receive to a callback, with the callback's position and keyword: ftplib's
#: ``retrlines(cmd, callback)``, ``retrbinary(cmd, callback)``. A function of the file
#: given there is handed the server's data; ``lines.append``, ``buf.write`` fill ``lines``
#: and ``buf`` with it.
NETWORK_CALLBACKS: Final = {"retrlines": (1, "callback"), "retrbinary": (1, "callback")}
#: Objects every method of which is a call on a remote server (XML-RPC's proxy turns
#: ``proxy.get_task()`` into a request): what any of them returns is data from the network.
RPC_PROXIES: Final = frozenset(
    {
        "xmlrpc.client.ServerProxy",
        "xmlrpc.client.Server",
        "xmlrpclib.ServerProxy",
        "xmlrpclib.Server",
        "jsonrpclib.Server",
        "jsonrpclib.ServerProxy",
    }
)
#: Name resolutions whose answer may be any text a server chose (a TXT record): a command
#: published in DNS is network input like a response body. Not ``socket``'s resolvers,
#: whose answer is an address (a resolved IP in a ``ping`` command line is no payload).
DNS_ANSWERS: Final = frozenset(
    {
        "dns.resolver.resolve",
        "dns.resolver.query",
        "dns.resolver.Resolver().resolve",
        "dns.resolver.Resolver().query",
        "dns.asyncresolver.resolve",
        "dns.asyncresolver.Resolver().resolve",
        "aiodns.DNSResolver().query",
    }
)
#: Classes whose methods a server calls for each request, by base: the attributes of
#: ``self`` that are the peer's (its socket, its request line, its body), and the methods
#: whose first parameter after ``self`` is what the peer sent. A bind shell's or a web
#: shell's commands arrive there, never as a call's result.
REQUEST_HANDLERS: Final = {
    **dict.fromkeys(
        (
            "socketserver.BaseRequestHandler",
            "socketserver.StreamRequestHandler",
            "socketserver.DatagramRequestHandler",
            "http.server.BaseHTTPRequestHandler",
            "http.server.SimpleHTTPRequestHandler",
            "http.server.CGIHTTPRequestHandler",
        ),
        (
            frozenset({"request", "rfile", "path", "headers", "requestline", "raw_requestline"}),
            frozenset[str](),
        ),
    ),
    **dict.fromkeys(
        (
            "asyncio.Protocol",
            "asyncio.BaseProtocol",
            "asyncio.DatagramProtocol",
        ),
        (frozenset[str](), frozenset({"data_received", "datagram_received"})),
    ),
}
#: Codecs that turn text back into code (``s.decode("rot13")`` style).
DECODING_CODECS: Final = frozenset(
    {"rot13", "rot_13", "base64", "hex", "zlib", "bz2", "uu", "punycode"}
)

#: exec-like callables: their first argument is run as Python.
EXECUTORS: Final = frozenset(
    {"builtins.exec", "builtins.eval", "builtins.compile", "types.FunctionType"}
)

#: Network modules (a dotted prefix): a call into one reads from or sends to the network.
NETWORK_MODULES: Final = tuple(
    sorted(
        {m + "." for m, r in MODULE_RULES.items() if r == "CPL-NET-001"}
        | {"wget.", "dns.", "paramiko.", "pycurl.", "treq.", "tornado.httpclient."}
        # Python 2's XML-RPC client and a JSON-RPC one: proxies of a remote server
        # (:data:`RPC_PROXIES`); aiodns resolves names (:data:`DNS_FUNCTIONS`)
        | {"xmlrpclib.", "jsonrpclib.", "aiodns."}
        # ZeroMQ's sockets: a peer's messages (recall10: ``exec(sock.recv())``)
        | {"zmq."}
    )
)
#: Calls under network modules that neither send nor receive (they look up this host).
NOT_EGRESS: Final = frozenset(
    {
        "socket.gethostname",
        "socket.getfqdn",
        "socket.inet_aton",
        "socket.inet_ntoa",
        "socket.inet_pton",
        "socket.inet_ntop",
        "socket.htons",
        "socket.ntohs",
        "socket.htonl",
        "socket.ntohl",
        "socket.setdefaulttimeout",
        "socket.getdefaulttimeout",
        "socket.socketpair",
        "ssl.create_default_context",
        "ssl.SSLContext",
        "ssl.SSLContext()",  # a context object: its wrap_socket makes the connection
        "urllib.request.getproxies",
        "urllib.request.pathname2url",
        "urllib.request.url2pathname",
    }
)
#: The last name of a network call that sends something (a request, a datagram, a mail).
EGRESS_VERBS: Final = frozenset(
    {
        "get",
        "post",
        "put",
        "patch",
        "delete",
        "head",
        "options",
        "request",
        "urlopen",
        "Request",
        "send",
        "sendall",
        "sendto",
        "sendmail",
        "send_message",
        "connect",
        "create_connection",
        "stream",
        "fetch",
        "upload",
        "storbinary",
        "storlines",
        "putrequest",
        "putheader",
        "write",
        "urlretrieve",
        # a blockchain transaction sent to a node (web3's eth module, blind14)
        "send_raw_transaction",
        "send_transaction",
        # a message published to a broker (paho-mqtt's client), and scapy's senders of
        # the packets it builds (blind18)
        "publish",
        "sendp",
        "sr",
        "sr1",
        "srp",
        "srp1",
    }
)
#: Keyword arguments of a network call that carry no payload (how to connect, not what).
NON_PAYLOAD_KEYWORDS: Final = frozenset(
    {
        "proxies",
        "proxy",
        "verify",
        "cert",
        "timeout",
        "trust_env",
        "auth",
        "headers",
        "allow_redirects",
        "stream",
        "context",
        "ssl",
        "ssl_context",
        "source_address",
        "family",
    }
)

#: Calls that resolve a name (a DNS query carries whatever its labels hold).
DNS_FUNCTIONS: Final = frozenset(
    {
        "socket.getaddrinfo",
        "socket.gethostbyname",
        "socket.gethostbyname_ex",
        "socket.create_connection",
        "dns.resolver.resolve",
        "dns.resolver.query",
        "dns.resolver.Resolver().resolve",
        "dns.resolver.Resolver().query",
        # recall6 (issue 16): every other way Python code asks for a name. gethostbyaddr
        # resolves a host name it is given before it looks the address up; a query made
        # by dnspython's message module carries its name to whatever server it is sent;
        # asyncio's resolver and aiodns are the same query, awaited
        "socket.gethostbyaddr",
        "dns.resolver.resolve_name",
        "dns.resolver.Resolver().resolve_name",
        "dns.asyncresolver.resolve",
        "dns.asyncresolver.Resolver().resolve",
        "dns.message.make_query",
        "aiodns.DNSResolver().query",
        "aiodns.DNSResolver().gethostbyname",
    }
)
#: Method names that resolve a name whatever their receiver: an asyncio event loop's
#: ``getaddrinfo`` (``asyncio.get_running_loop()`` is no network object to the resolver).
DNS_METHODS: Final = frozenset({"getaddrinfo"})
#: Programs that reach the network with their arguments (DNS queries included).
NETWORK_PROGRAMS: Final = frozenset(
    {
        "ping",
        "ping6",
        "nslookup",
        "dig",
        "host",
        "curl",
        "wget",
        "nc",
        "ncat",
        "netcat",
        "telnet",
        "socat",
        "ssh",
        "scp",
        "ftp",
        "tftp",
        "powershell",
        "powershell.exe",
        "pwsh",
        "certutil",
        "bitsadmin",
    }
)
#: Programs that run the file or code they are given (the payload is their argument).
INTERPRETERS: Final = frozenset(
    {
        "python",
        "python3",
        "pythonw",
        "py",
        "sh",
        "bash",
        "zsh",
        "dash",
        "cmd",
        "cmd.exe",
        "powershell",
        "powershell.exe",
        "pwsh",
        "start",
        "wscript",
        "cscript",
        "mshta",
        "rundll32",
        "wine",
        "nohup",
        "open",
        "xdg-open",
        # runtimes that start a file they are given (JarkaStealer's ``java -jar``,
        # Kaspersky 2024), and Windows' installers and loaders of one
        "java",
        "javaw",
        "java.exe",
        "javaw.exe",
        "node",
        "node.exe",
        "perl",
        "ruby",
        "php",
        "osascript",
        "msiexec",
        "msiexec.exe",
        "regsvr32",
        "regsvr32.exe",
    }
)
#: Program names that are shells (a socket wired to one is a reverse shell).
SHELLS: Final = frozenset({"sh", "bash", "zsh", "dash", "ksh", "cmd", "cmd.exe", "powershell"})

#: Libraries whose every function returns another program's credentials: the cookies
#: (and with them the sessions) of the user's browsers, decrypted (recall14). What one
#: returns is a CREDENTIAL value wherever it flows.
COOKIE_READERS: Final = frozenset({"browser_cookie3", "browsercookie", "pycookiecheat", "rookiepy"})
#: Those of them that return a cookie jar: given to an HTTP client as its ``cookies``, a
#: jar sends each cookie only to the site it belongs to (their documented use).
COOKIE_JAR_READERS: Final = frozenset({"browser_cookie3", "browsercookie"})
#: Calls that return a ``.env`` file's variables, the secrets it was written to hold: the
#: whole environment as far as the rules care (a dotenv typosquat posting them: recall17).
ENV_FILE_READERS: Final = frozenset(
    {
        "dotenv.dotenv_values",
        "dotenv.main.dotenv_values",
        # the same values through the class dotenv_values wraps (recall18)
        "dotenv.main.DotEnv().dict",
    }
)
#: A cloud SDK's own credential resolver: the keys it finds (environment, credential files,
#: the instance's role), whichever store holds them. What it returns is a credential
#: (``boto3.Session().get_credentials().get_frozen_credentials()`` posted: blind31); a
#: session held in an attribute or handed in is not followed (a SigV4 signer's own).
SDK_CREDENTIAL_READERS: Final = frozenset(
    {"boto3.Session().get_credentials", "botocore.session.Session().get_credentials"}
)

#: Calls returning the host's identity.
RECON_FUNCTIONS: Final = frozenset(
    {
        "socket.gethostname",
        "socket.getfqdn",
        "getpass.getuser",
        "os.getlogin",
        "os.uname",
        "os.getuid",
        "os.geteuid",
        "os.getcwd",
        "os.getcwdb",
        "platform.node",
        "platform.uname",
        "uuid.getnode",
        "pwd.getpwall",
        "pwd.getpwuid",
        # the calling program's frames: its file names, and through them its source
        "inspect.stack",
        "inspect.getouterframes",
    }
)
#: Environment variables that name the user or the machine.
RECON_ENV_NAMES: Final = frozenset(
    {"USER", "USERNAME", "LOGNAME", "COMPUTERNAME", "HOSTNAME", "USERDOMAIN", "HOME", "USERPROFILE"}
)
#: Services that answer with the caller's public IP address (and often its place): a
#: stealer's first request, whose answer goes out with the loot (issue 16).
PUBLIC_IP_SERVICES: Final = frozenset(
    {
        "api.ipify.org",
        "api64.ipify.org",
        "ipinfo.io",
        "ifconfig.me",
        "ifconfig.co",
        "checkip.amazonaws.com",
        "icanhazip.com",
        "ipecho.net",
        "ident.me",
        "myexternalip.com",
        "ip-api.com",
        "ipapi.co",
        "wtfismyip.com",
        "checkip.dyndns.org",
    }
)
#: Files whose content is the host's identity.
RECON_FILES: Final = frozenset({"/etc/passwd", "/etc/hostname", "/etc/shadow", "/etc/group"})
#: Programs whose output is the host's identity (a stealer's "HWID": ``wmic csproduct get
#: uuid``; ``whoami``, ``systeminfo``, ``ipconfig`` in the beacons ESET and Check Point
#: describe), when a process call's output is read. Not ``id`` or ``hostname``: words too
#: common as keys for the prefilter's trigger, and the calls (``socket.gethostname``) are
#: how Python code asks.
RECON_PROGRAMS: Final = frozenset(
    {
        "whoami",
        "uname",
        "systeminfo",
        "ipconfig",
        "ifconfig",
        "wmic",
        "getmac",
        "hostnamectl",
    }
)
#: Calls that run a file they are given.
RUNS_FILE: Final = frozenset(
    {
        "os.startfile",
        # os.exec*'s first argument is the file the process becomes; fexecve's a descriptor
        # (a download written to an anonymous memfd and run from memory: blind16)
        *(f"os.exec{s}" for s in ("l", "le", "v", "ve")),
        "os.fexecve",
        "runpy.run_path",
        # a native library loaded runs its initialisers: a DLL written and loaded is run
        *(f"ctypes.{k}" for k in ("CDLL", "WinDLL", "OleDLL", "PyDLL")),
        *(f"ctypes.{k}.LoadLibrary" for k in ("cdll", "windll", "oledll", "pydll")),
        "_ctypes.dlopen",
        # an importer of the modules inside a zip archive (its load_module/exec_module
        # runs them): a zip written from a literal and imported is a stage run (blind37)
        "zipimport.zipimporter",
    }
)
#: Process calls whose result is the program's output (or holds it: ``run().stdout``).
PROCESS_OUTPUTS: Final = frozenset(
    {
        "subprocess.check_output",
        "subprocess.getoutput",
        "subprocess.getstatusoutput",
        "subprocess.run",
        "subprocess.Popen",
        "os.popen",
    }
)

#: pip's entry points: calling one installs a package behind the resolver's back.
PIP_MAINS: Final = frozenset(
    {"pip.main", "pip._internal.main", "pip._internal.cli.main.main", "pip._internal.main.main"}
)
