"""What a read carries, by what it reads: an environment variable by its name, a file by
its path, a network call by its name, a URL by its host (the labels of
:class:`caplet._scan._flow.Flow`, split out of it by concern, recall6, issue 16).
"""

from __future__ import annotations

import ast
import itertools
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Final

from caplet._scan._resolve import is_network
from caplet._scan._sources import (
    DECODERS,
    HTTP_CLIENT_MODULES,
    NETWORK_READS,
    PUBLIC_IP_SERVICES,
    RECON_ENV_NAMES,
    RECON_FILES,
    RPC_PROXIES,
    Source,
)

__all__ = [
    "APPLIERS",
    "CREDENTIAL_MARKERS",
    "DATA_STORES",
    "FILE_READERS",
    "METADATA_HOSTS",
    "NONE",
    "RUNNER_CREDENTIALS",
    "SHIPPED_DATABASE",
    "Label",
    "Labels",
    "downloads",
    "env_read",
    "file_labels",
    "hands_decoder",
    "prints_download",
    "public_ip",
    "reader_labels",
    "remote_call",
    "secret_name",
    "url_labels",
]

#: One source a value may carry, with a detail (a variable's name, which credential).
Label = tuple[Source, str]
Labels = frozenset[Label]
NONE: Final[Labels] = frozenset()

#: Environment variables that hold secrets (a read is a SECRET label).
_SECRET_WORDS = ("TOKEN", "SECRET", "PASSW", "API_KEY", "APIKEY", "ACCESS_KEY", "CREDENTIAL")
#: Credential files by what a literal path holds.
CREDENTIAL_MARKERS = {
    ".ssh": "SSH key",
    ".aws": "AWS credentials",
    ".netrc": "netrc",
    ".git-credentials": "git credentials",
    ".docker": "Docker credentials",
    ".kube": "Kubernetes config",
    # a pod's service-account token (and namespace, CA), mounted in every pod: whoever
    # holds it acts as the pod on the cluster's API (blind19, b19-ot-kube-serviceaccount-token)
    "secrets/kubernetes.io/serviceaccount": "Kubernetes service-account token",
    ".pypirc": "package index token",
    ".npmrc": "package index token",
    ".gnupg": "GnuPG keys",
    # cloud CLIs' credential stores (gcloud's credentials.db and access_tokens.db, az's
    # token caches): blind15
    ".config/gcloud": "gcloud credentials",
    ".azure": "Azure credentials",
    "Library/Keychains": "macOS keychain",
    # commands typed with their passwords and tokens (SentinelSneak took them, 2022)
    ".bash_history": "shell history",
    ".zsh_history": "shell history",
}


def downloads(name: str) -> bool:
    """A call whose result is data from the network (``requests.get``, ``sock.recv``)."""
    if not is_network(name):
        return False
    owner, _, last = name.rpartition(".")
    if last in NETWORK_READS and (owner.endswith("()") or owner in HTTP_CLIENT_MODULES):
        return True
    # any method of an RPC proxy is a request, its result the server's answer
    return remote_call(name)


#: Stores of records opened from a path (a row, an entry): one the package ships holds
#: what its code reads back, as a data file does, but no reviewer reads a database.
DATA_STORES: Final = frozenset({"sqlite3.connect", "dbm.open", "shelve.open"})
#: The label's detail of what is read out of such a store the package ships (blind32).
SHIPPED_DATABASE: Final = "a database the package ships"


def remote_call(name: str) -> bool:
    """A method of an RPC proxy (``ServerProxy(url).register(host, user)``): a request
    whose arguments are sent to the server, an egress whatever the method's name (blind32)."""
    return "()." in name and name.split("().", 1)[0] in RPC_PROXIES


def secret_name(name: str) -> bool:
    """A secret-looking environment variable name (``AWS_SECRET_ACCESS_KEY``)."""
    upper = name.upper()
    return any(word in upper for word in _SECRET_WORDS)


#: Credentials a CI runner hands its own steps, never a package: GitHub Actions' runtime
#: token writes the workflow's cache and artifacts (the cache poisoning of Adnan Khan's
#: 2024 "Cacheract" and the ultralytics compromise; blind17, b17-ot-actions-cache-poison).
#: Sent anywhere, even to the runner's own service, it is a package taking over the run.
_RUNNER_TOKENS: Final = frozenset({"ACTIONS_RUNTIME_TOKEN"})
#: Their labels, which count in a request's headers too (``_sink_egress``).
RUNNER_CREDENTIALS: Final = frozenset({(Source.CREDENTIAL, "the GitHub Actions runtime token")})


def env_read(key: str) -> Labels:
    """What reading environment variable ``key`` carries: the host's identity, a secret."""
    if key.upper() in _RUNNER_TOKENS:
        return RUNNER_CREDENTIALS
    if key.upper() in RECON_ENV_NAMES:
        return frozenset({(Source.RECON, f"${key}")})
    if secret_name(key):
        return frozenset({(Source.SECRET, key)})
    return NONE


#: Calls that read the file their first argument names (``sqlite3.connect``: a cloud CLI's
#: credential database, blind15) or, without one, a credential file they find themselves.
FILE_READERS: Final = {
    "builtins.open": "",
    "io.open": "",
    "codecs.open": "",
    "sqlite3.connect": "",
    "netrc.netrc": "netrc",  # ~/.netrc (or $NETRC) when no file is given
}
#: The cloud metadata services, and the paths of theirs that answer with the instance's
#: credentials or an access token (AWS IMDS, GCP, Azure IMDS, Alibaba; blind15).
METADATA_HOSTS: Final = (
    "169.254.169.254",
    # the same address as one integer, in hex, in octal, and IMDS's IPv6 address, which
    # every HTTP client resolves alike (http://2852039166/latest/...: blind17)
    "2852039166",
    "0xa9fea9fe",
    "0xA9FEA9FE",
    "0251.0376.0251.0376",
    "fd00:ec2::254",
    "metadata.google.internal",
    "100.100.100.200",
)
_METADATA_SECRETS: Final = re.compile(
    r"security-credentials|identity-credentials|service-accounts/.*token|identity/oauth2/token"
)


def reader_labels(name: str, path: str | None) -> Labels:
    """What a call of :data:`FILE_READERS` ``name`` reading ``path`` returns."""
    found = FILE_READERS.get(name)
    if found and path is None:
        return frozenset({(Source.CREDENTIAL, found)})
    return file_labels(path)


def url_labels(value: str | None, pieces: str | None) -> Labels:
    """What a request of a URL (its value, else its literal pieces) answers with: the
    public IP address, an instance's cloud credentials."""
    out: set[Label] = set()
    if public_ip(value):
        out.add((Source.RECON, "public IP"))
    text = value or pieces or ""
    if any(h in text for h in METADATA_HOSTS):
        # the instance's credentials by their path; any other answer of the metadata
        # service describes the instance (its role names, its identity: blind17, where
        # the credentials' path was a parameter of a helper that fetched the URL)
        secret = _METADATA_SECRETS.search(text)
        out.add(
            (Source.CREDENTIAL, "cloud metadata credentials")
            if secret
            else (Source.RECON, "cloud metadata")
        )
    return frozenset(out)


def public_ip(url: str | None) -> bool:
    """``url`` asks a service for the caller's public IP address (:data:`PUBLIC_IP_SERVICES`)."""
    if not url:
        return False
    # the authority ends at the path, the query or the fragment, whichever comes first
    # ("https://api.ipify.org?format=json" has no path)
    host = re.split(r"[/?#]", url.split("://", 1)[-1], maxsplit=1)[0].split(":", 1)[0].lower()
    return host in PUBLIC_IP_SERVICES or host.removeprefix("www.") in PUBLIC_IP_SERVICES


def file_labels(path: str | None) -> Labels:
    """What a file at ``path`` (its literal pieces) holds: credentials, the host's identity."""
    if not path:
        return NONE
    out: set[Label] = set()
    for marker, what in CREDENTIAL_MARKERS.items():
        if marker in path:
            out.add((Source.CREDENTIAL, what))
    if path in RECON_FILES:
        out.add((Source.RECON, path))
    return frozenset(out)


def prints_download(words: list[str]) -> bool:
    """``words`` (a command's; an unknown word is ``""``) run curl or wget printing what it
    downloads, so the program's output is the download (``run(["wget", "-qO-", url])``
    fed to ``sh``: blind31): curl without an output file (``-o``/``-O`` in any short group,
    ``--output``, ``--remote-name``) unless that file is ``-``; wget only when its document
    is ``-`` (``-qO-``, ``-O -``, ``--output-document=-``), since by default it saves one."""
    if not words:
        return False
    program = words[0].replace("\\", "/").rsplit("/", 1)[-1].lower().removesuffix(".exe")
    if program not in {"curl", "wget"}:
        return False
    to_file = False
    for word, following in itertools.zip_longest(words[1:], words[2:], fillvalue=""):
        if word in {"--output-document=-", "--output=-"}:
            return True
        if word.startswith("--"):
            to_file = to_file or word.startswith(("--output", "--remote-name"))
            continue
        if not word.startswith("-") or len(word) < 2:
            continue
        letters = word[1:]
        if program == "wget":
            if letters.endswith("O-") or (letters.endswith("O") and following == "-"):
                return True
        elif "o" in letters or "O" in letters:
            to_file = to_file or not (letters.endswith("o") and following == "-")
    return program == "curl" and not to_file


#: Calls that apply the functions they are handed (a decoder among them decodes).
APPLIERS: Final = frozenset({"functools.reduce", "_functools.reduce", "builtins.map"})


def hands_decoder(
    args: list[ast.expr],
    assigned: Mapping[str, Sequence[ast.expr]],
    resolve: Callable[[ast.AST], tuple[str, ...]],
) -> bool:
    """One of ``args`` (or an element of a tuple or list it is, or is bound once to) is a
    decoder handed on as a function, for ``reduce``/``map`` to call on the data
    (``reduce(lambda d, f: f(d), (b64decode, zlib.decompress), blob)``: blind31)."""
    todo: list[ast.expr] = []
    for arg in args:
        bound = assigned.get(arg.id, ()) if isinstance(arg, ast.Name) else ()
        value = bound[0] if len(bound) == 1 else arg
        todo += value.elts[:16] if isinstance(value, ast.Tuple | ast.List) else [value]
    return any(not DECODERS.isdisjoint(resolve(e)) for e in todo)
