"""Real plugins built on numpy, pandas, cryptography, lxml and the standard library's
sqlite3, ssl, zlib, asyncio, threading, subprocess and fork run under the allowlist
with every layer on, get right answers, and cause no seccomp denial at all.

These are the libraries the allowlist was measured on (the module docstring of
caplet._sandbox._seccomp_policy says how); a denial here means a call they need
is missing from it. numpy, pandas and lxml come with the ``test`` extra.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from caplet import PluginHost
from tests._sandbox.seccompkit import call, sandboxed_host, seccomp_log, write_plugin

SCIENCE = """
def arrays():
    import numpy as np

    a = np.arange(250_000, dtype=np.float64).reshape(500, 500)
    product = a @ a.T  # BLAS, with its threads
    inverse = np.linalg.inv(np.eye(100) * 4.0)
    spectrum = np.fft.fft(np.ones(64))
    rng = np.random.default_rng(7)
    sample = rng.integers(0, 10, size=1000)
    return [
        float(product[2, 3]),
        float(inverse[5, 5]),
        float(spectrum[0].real),
        int(sample.min()) >= 0,
    ]


def frames(directory):
    import pandas as pd

    frame = pd.DataFrame({"k": ["a", "b", "a", "c"] * 250, "v": range(1000)})
    sums = frame.groupby("k")["v"].sum().to_dict()
    path = os.path.join(directory, "frame.csv")
    frame.to_csv(path, index=False)
    again = pd.read_csv(path)
    stamp = pd.Timestamp("2024-03-01 12:00", tz="UTC").tz_convert("Europe/Paris")
    return [sums, len(again), str(stamp)]


def crypto():
    from cryptography.fernet import Fernet
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec

    key = Fernet.generate_key()
    plain = Fernet(key).decrypt(Fernet(key).encrypt(b"secret")).decode()
    private = ec.generate_private_key(ec.SECP256R1())
    signature = private.sign(b"message", ec.ECDSA(hashes.SHA256()))
    private.public_key().verify(signature, b"message", ec.ECDSA(hashes.SHA256()))
    return [plain, len(key)]


def xml(directory):
    from lxml import etree

    root = etree.fromstring(b"<a><b n='1'>x</b><b n='2'>y</b></a>")
    path = os.path.join(directory, "doc.xml")
    etree.ElementTree(root).write(path)
    parsed = etree.parse(path).getroot()
    return [[b.get("n") for b in parsed.xpath("//b")], parsed.findtext("b")]
"""

STDLIB = """
import asyncio, concurrent.futures, hashlib, json, shutil, sqlite3, ssl, subprocess
import tempfile, threading, zlib


def database(directory):
    path = os.path.join(directory, "db.sqlite")
    with sqlite3.connect(path) as db:
        db.execute("create table t (x integer)")
        db.executemany("insert into t values (?)", [(i,) for i in range(100)])
    with sqlite3.connect(path) as db:
        db.execute("pragma journal_mode=wal")
        db.execute("insert into t values (1000)")
        total = db.execute("select sum(x) from t").fetchone()[0]
    db.close()
    return total


def compression():
    data = json.dumps(list(range(1000))).encode()
    packed = zlib.compress(data, 9)
    return [zlib.decompress(packed) == data, len(packed) < len(data)]


def tls():
    context = ssl.create_default_context()
    return [context.verify_mode == ssl.CERT_REQUIRED, ssl.OPENSSL_VERSION.split()[0]]


def event_loop():
    async def square(i):
        await asyncio.sleep(0)
        return i * i

    async def main():
        loop = asyncio.get_running_loop()
        squares = await asyncio.gather(*(square(i) for i in range(10)))
        digest = await loop.run_in_executor(None, lambda: hashlib.sha256(b"x").hexdigest())
        return [squares, digest[:8]]

    return asyncio.run(main())


def threads():
    lock = threading.Lock()
    seen = []

    def work(i):
        with lock:
            seen.append(i)
        return i * 2

    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        doubled = list(pool.map(work, range(20)))
    return [sum(doubled), len(seen)]


def processes(directory):
    pid = os.fork()
    if pid == 0:
        os._exit(7)
    _, status = os.waitpid(pid, 0)
    listing = subprocess.run(["ls", directory], capture_output=True, text=True, check=True)
    scratch = tempfile.mkdtemp()
    shutil.copy2(os.path.join(directory, "db.sqlite"), scratch)
    copied = sorted(os.listdir(scratch))
    shutil.rmtree(scratch)
    return [os.waitstatus_to_exitcode(status), sorted(listing.stdout.split()), copied]
"""


@pytest.fixture
def host(plugins_dir: Path, state_dir: Path, tmp_path: Path) -> Iterator[PluginHost]:
    write_plugin(
        plugins_dir,
        "science",
        SCIENCE,
        ("arrays", "frames", "crypto", "xml"),
        limits="timeout_ms = 120000\nmemory_mb = 1024",
    )
    write_plugin(
        plugins_dir,
        "stdlib",
        STDLIB,
        ("database", "compression", "tls", "event_loop", "threads", "processes"),
        capabilities=("proc.exec:ls",),
        limits="timeout_ms = 60000",
    )
    with sandboxed_host(plugins_dir, state_dir, "science", "stdlib") as plugin_host:
        yield plugin_host


def test_numpy_pandas_cryptography_and_lxml_run_under_the_allowlist(
    host: PluginHost,
) -> None:
    assert call(host, "science", "arrays") == [_dot(2, 3), 0.25, 64.0, True]
    sums, rows, stamp = call(host, "science", "frames", "/tmp")
    assert sums == {"a": 249_500, "b": 124_750, "c": 125_250}
    assert rows == 1000
    assert stamp == "2024-03-01 13:00:00+01:00"
    assert call(host, "science", "crypto") == ["secret", 44]
    assert call(host, "science", "xml", "/tmp") == [["1", "2"], "x"]
    assert host.disable("science")
    assert seccomp_log(host, "science") == {}


def _dot(row: int, column: int) -> float:
    """(a @ a.T)[row, column] for a = arange(250_000).reshape(500, 500)."""
    return float(sum((row * 500 + k) * (column * 500 + k) for k in range(500)))


def test_sqlite_ssl_zlib_asyncio_threads_and_processes_run_under_the_allowlist(
    host: PluginHost,
) -> None:
    assert call(host, "stdlib", "database", "/tmp") == sum(range(100)) + 1000
    assert call(host, "stdlib", "compression") == [True, True]
    verify, library = call(host, "stdlib", "tls")
    assert verify is True
    assert library == "OpenSSL"
    squares, digest = call(host, "stdlib", "event_loop")
    assert squares == [i * i for i in range(10)]
    assert digest == "2d711642"
    assert call(host, "stdlib", "threads") == [sum(2 * i for i in range(20)), 20]
    status, listing, copied = call(host, "stdlib", "processes", "/tmp")
    assert status == 7
    assert "db.sqlite" in listing
    assert copied == ["db.sqlite"]
    assert host.disable("stdlib")
    assert seccomp_log(host, "stdlib") == {}
