"""memfd29: native code the plugin wrote, run by the worker's own layers alone.

The audit hook (``_code_origin``) sees ``ctypes.dlopen`` and extension imports, but not
cffi (``FFI().dlopen``, ``ffi.cast`` of a buffer to a function pointer) nor libc's own
``dlopen`` called through ctypes (one ``ctypes.call_function`` event, whose pointer is
any function's). So what stops a plugin from running machine code it shipped as data is
the worker's kernel layers: the mounts (``/tmp``, grants and snapshot are ``noexec``, and
mmap(2) refuses ``PROT_EXEC`` there), Landlock, and seccomp. Each route below runs in a
real worker of the red-team host (static gate off, tests/_sandbox/conftest.py), as root
and as an unprivileged user, and answers ``repr`` of what the machine code returned
(4242 from the shipped library, 42 from the bytes ``mov eax, 42; ret``) or the error.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from caplet import PluginHost
from tests.conftest import PluginFactory

ROUTES = """\
import ctypes
import mmap
import os
import platform
from pathlib import Path

HERE = Path(__file__).parent
#: mov eax, 42; ret (x86_64) and mov w0, #42; ret (arm64)
CODE = {"x86_64": bytes.fromhex("b82a000000c3"), "aarch64": bytes.fromhex("40058052c0035fd6")}[
    platform.machine()
]
PROT_R, PROT_RW, PROT_RX, PROT_RWX = 1, 3, 5, 7
ANONYMOUS = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS
LIBC = ctypes.CDLL(None, use_errno=True)
LIBC.mmap.restype = ctypes.c_void_p
LIBC.mmap.argtypes = [
    ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long
]
LIBC.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
LIBC.mremap.restype = ctypes.c_void_p
LIBC.mremap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_int]
LIBC.syscall.restype = ctypes.c_long
LIBC.dlopen.restype = ctypes.c_void_p
LIBC.dlopen.argtypes = [ctypes.c_char_p, ctypes.c_int]
LIBC.dlsym.restype = ctypes.c_void_p
LIBC.dlsym.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
LIBC.dlerror.restype = ctypes.c_char_p
MAP_FAILED = ctypes.c_void_p(-1).value
#: pkey_mprotect(2) and remap_file_pages(2)
NUMBERS = {"x86_64": (329, 216), "aarch64": (288, 234)}[platform.machine()]


def library():
    return bytes.fromhex((HERE / "blob.hex").read_text())


def call(address):
    return ctypes.CFUNCTYPE(ctypes.c_int)(address)()


def check(failed, what):
    if failed:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def anonymous(prot):
    address = LIBC.mmap(None, 4096, prot, ANONYMOUS, -1, 0)
    check(address == MAP_FAILED, "mmap")
    return address


def in_memfd():
    fd = os.memfd_create("n")
    os.write(fd, library())
    return f"/proc/self/fd/{fd}"


def cffi_dlopen(path):
    import cffi

    ffi = cffi.FFI()
    ffi.cdef("int caplet_probe(void);")
    return ffi.dlopen(path).caplet_probe()


def libc_dlopen(path):
    handle = LIBC.dlopen(path.encode(), 2)
    if not handle:
        raise OSError(LIBC.dlerror().decode())
    return call(LIBC.dlsym(handle, b"caplet_probe"))


def written(directory):
    path = f"{directory}/lib{os.getpid()}.so"
    with open(path, "wb") as file:
        file.write(library())
    return path


def twice(fd):
    # One writable and one executable view of the same file (W^X by mapping twice).
    os.ftruncate(fd, 4096)
    writable = mmap.mmap(fd, 4096, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    address = LIBC.mmap(None, 4096, PROT_RX, mmap.MAP_SHARED, fd, 0)
    check(address == MAP_FAILED, "mmap")
    writable.write(CODE)
    return call(address)


def anonymous_rwx_cffi():
    import cffi

    ffi = cffi.FFI()
    page = mmap.mmap(-1, 4096, prot=PROT_RWX)
    page.write(CODE)
    return ffi.cast("int(*)(void)", ffi.from_buffer(page))()


def anonymous_rwx_ctypes():
    address = anonymous(PROT_RWX)
    ctypes.memmove(address, CODE, len(CODE))
    return call(address)


def mprotect_later():
    address = anonymous(PROT_RW)
    ctypes.memmove(address, CODE, len(CODE))
    check(LIBC.mprotect(address, 4096, PROT_RX) != 0, "mprotect")
    return call(address)


def pkey_mprotect_later():
    address = anonymous(PROT_RW)
    ctypes.memmove(address, CODE, len(CODE))
    failed = LIBC.syscall(
        ctypes.c_long(NUMBERS[0]), ctypes.c_void_p(address), ctypes.c_size_t(4096), PROT_RX, -1
    )
    check(failed != 0, "pkey_mprotect")
    return call(address)


def private_file_rwx():
    # A copy-on-write mapping of a runtime file (on an exec mount), writable and executable.
    fd = os.open(ctypes.__file__, os.O_RDONLY)
    address = LIBC.mmap(None, 4096, PROT_RWX, mmap.MAP_PRIVATE, fd, 0)
    check(address == MAP_FAILED, "mmap")
    ctypes.memmove(address, CODE, len(CODE))
    return call(address)


def mremap_alias():
    # A second view of shared anonymous memory (mremap(2) with old_size 0), made executable.
    address = LIBC.mmap(None, 4096, PROT_RW, mmap.MAP_SHARED | mmap.MAP_ANONYMOUS, -1, 0)
    alias = LIBC.mremap(address, 0, 4096, 1)  # MREMAP_MAYMOVE
    check(alias == MAP_FAILED, "mremap")
    check(LIBC.mprotect(alias, 4096, PROT_RX) != 0, "mprotect")
    ctypes.memmove(address, CODE, len(CODE))
    return call(alias)


def libc_text_address():
    return ctypes.cast(LIBC.labs, ctypes.c_void_p).value


def proc_self_mem():
    # /proc/PID/mem writes through page protections (FOLL_FORCE): libc's own text.
    fd = os.open("/proc/self/mem", os.O_RDWR)
    os.pwrite(fd, CODE, libc_text_address())
    return LIBC.labs(1)


def process_vm_writev():
    class Iovec(ctypes.Structure):
        _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]

    buffer = ctypes.create_string_buffer(CODE)
    local = Iovec(ctypes.cast(buffer, ctypes.c_void_p), len(CODE))
    remote = Iovec(libc_text_address(), len(CODE))
    moved = LIBC.process_vm_writev(os.getpid(), ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
    check(moved < 0, "process_vm_writev")
    return LIBC.labs(1)


def read_implies_exec():
    # personality(READ_IMPLIES_EXEC): every later PROT_READ mapping is executable too.
    check(LIBC.personality(0x0400000) < 0, "personality")
    address = anonymous(PROT_RW)
    ctypes.memmove(address, CODE, len(CODE))
    return call(address)


def remap_file_pages():
    address = LIBC.mmap(None, 8192, PROT_RW, mmap.MAP_SHARED | mmap.MAP_ANONYMOUS, -1, 0)
    failed = LIBC.syscall(
        ctypes.c_long(NUMBERS[1]), ctypes.c_void_p(address), ctypes.c_size_t(4096), 0,
        ctypes.c_size_t(1), 0
    )
    check(failed != 0, "remap_file_pages")
    return "remapped"


def callbacks():
    # Honest: a ctypes and a cffi callback (libffi closures), qsort calling them.
    import cffi

    compare = ctypes.CFUNCTYPE(
        ctypes.c_int, ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int)
    )(lambda a, b: a[0] - b[0])
    numbers = (ctypes.c_int * 5)(5, 1, 4, 2, 3)
    LIBC.qsort(numbers, 5, 4, compare)
    ffi = cffi.FFI()
    ffi.cdef("void qsort(void*, size_t, size_t, int(*)(const void*, const void*));")
    by_value = ffi.callback(
        "int(const void*, const void*)",
        lambda a, b: ffi.cast("int*", a)[0] - ffi.cast("int*", b)[0],
    )
    others = ffi.new("int[]", [3, 1, 2])
    ffi.dlopen(None).qsort(others, 3, 4, by_value)
    return [list(numbers), list(others)]


def libraries():
    # Honest: extension modules imported during a call, cryptography, msgpack.
    import lzma
    import msgpack
    from cryptography.fernet import Fernet

    box = Fernet(Fernet.generate_key())
    packed = msgpack.unpackb(msgpack.packb({"a": [1, 2]}))
    text = lzma.decompress(lzma.compress(b"x" * 100))
    return [box.decrypt(box.encrypt(b"ok")).decode(), packed, len(text)]


ROUTES = {
    "memfd-cffi-dlopen": lambda: cffi_dlopen(in_memfd()),
    "memfd-libc-dlopen": lambda: libc_dlopen(in_memfd()),
    "memfd-mapped-twice": lambda: twice(os.memfd_create("d")),
    "tmp-cffi-dlopen": lambda: cffi_dlopen(written("/tmp")),
    "tmp-mapped-twice": lambda: twice(os.open("/tmp/twice", os.O_RDWR | os.O_CREAT, 0o600)),
    "dev-shm-dlopen": lambda: libc_dlopen(written("/dev/shm")),
    "snapshot-dlopen": lambda: cffi_dlopen(str(HERE / "probe.so")),
    "anonymous-rwx-cffi": anonymous_rwx_cffi,
    "anonymous-rwx-ctypes": anonymous_rwx_ctypes,
    "mprotect-later": mprotect_later,
    "pkey-mprotect-later": pkey_mprotect_later,
    "private-file-rwx": private_file_rwx,
    "mremap-alias": mremap_alias,
    "proc-self-mem": proc_self_mem,
    "process-vm-writev": process_vm_writev,
    "read-implies-exec": read_implies_exec,
    "remap-file-pages": remap_file_pages,
    "callbacks": callbacks,
    "libraries": libraries,
}


def create_functions(config):
    def run(route):
        try:
            return repr(ROUTES[route]())
        except Exception as exc:
            return f"{type(exc).__name__}: {exc}"

    return {"main": {"run": run}}
"""

#: A shared object with a constructor and one function answering 4242.
LIBRARY_C = """\
int caplet_probe(void) { return 4242; }
__attribute__((constructor)) static void loaded(void) {}
"""

_EPERM = "PermissionError: [Errno 1] Operation not permitted"


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """The library the plugin ships as hex text, built here with the system's gcc."""
    gcc = shutil.which("gcc")
    assert gcc is not None, "these tests build their shared object with gcc"
    folder = tmp_path_factory.mktemp("memfd29-lib")
    (folder / "probe.c").write_text(LIBRARY_C, encoding="utf-8")
    subprocess.run(
        [gcc, "-shared", "-fPIC", "-O2", "-o", str(folder / "probe.so"), str(folder / "probe.c")],
        check=True,
        capture_output=True,
        timeout=120,
    )
    return (folder / "probe.so").read_bytes()


@pytest.fixture
def run(make_plugin: PluginFactory, red_team_host: PluginHost, library: bytes) -> PluginHost:
    folder = Path(str(make_plugin("native", source=ROUTES)))
    (folder / "blob.hex").write_text(library.hex(), encoding="ascii")
    (folder / "probe.so").write_bytes(library)  # shipped as it is, too
    red_team_host.discover()
    assert red_team_host.enable("native", consent=True)
    return red_team_host


def _route(host: PluginHost, route: str) -> str:
    answer = host.call("native", "main.run", route)
    assert isinstance(answer, str)
    return answer


@pytest.mark.security
@pytest.mark.parametrize("route", ["memfd-cffi-dlopen", "memfd-libc-dlopen", "memfd-mapped-twice"])
def test_no_code_the_plugin_wrote_runs_from_a_memfd(run: PluginHost, route: str) -> None:
    """On f0500b3c, as root, each answered 4242 (the library) or 42 (the bytes): a worker
    that cannot exec got memfds wherever a memory cgroup bounded them, and an anonymous
    file lies on no noexec mount. seccomp refuses memfd_create to every worker now."""
    assert _route(run, route) == _EPERM


@pytest.mark.security
@pytest.mark.parametrize(
    ("route", "refused"),
    [
        # mmap(2): EPERM for PROT_EXEC on a noexec mount; glibc's loader says so.
        ("tmp-cffi-dlopen", "failed to map segment from shared object"),
        ("tmp-mapped-twice", "PermissionError: [Errno 1] mmap: Operation not permitted"),
        ("dev-shm-dlopen", "FileNotFoundError: [Errno 2] No such file or directory"),
        ("snapshot-dlopen", "failed to map segment from shared object"),
        # Landlock: /proc is never writable to a worker.
        ("proc-self-mem", "PermissionError: [Errno 13] Permission denied: '/proc/self/mem'"),
        # seccomp: never allowed, or allowed only as a query.
        ("process-vm-writev", "process_vm_writev: Operation not permitted"),
        ("read-implies-exec", "personality: Operation not permitted"),
        ("remap-file-pages", "remap_file_pages: Operation not permitted"),
    ],
)
def test_no_file_of_the_plugins_and_no_other_process_view_maps_its_bytes_executable(
    run: PluginHost, route: str, refused: str
) -> None:
    """Held on f0500b3c too: every file a worker can write, and its snapshot, is on a
    noexec mount (no /dev/shm in the jail), /proc/self/mem is read-only to it, and seccomp refuses
    process_vm_writev, personality changes and remap_file_pages."""
    assert refused in _route(run, route)


@pytest.mark.security
@pytest.mark.parametrize(
    "route",
    [
        "anonymous-rwx-cffi",
        "anonymous-rwx-ctypes",
        "mprotect-later",
        "pkey-mprotect-later",
        "private-file-rwx",
        "mremap-alias",
    ],
)
@pytest.mark.xfail(
    strict=True,
    reason="memfd29, open: machine code the plugin wrote into anonymous or copy-on-write "
    "memory it maps (or later mprotects) PROT_EXEC runs; ctypes' and cffi's callbacks need "
    "anonymous PROT_READ|PROT_WRITE|PROT_EXEC pages (this libffi has no static "
    "trampolines), so seccomp cannot refuse it without breaking them",
)
def test_no_bytes_the_plugin_wrote_run_from_memory_it_maps(run: PluginHost, route: str) -> None:
    """Each answers 42 (the plugin's bytes ran) as root and as an unprivileged user."""
    assert _route(run, route).startswith("PermissionError")


def test_callbacks_extension_modules_and_native_libraries_still_work(run: PluginHost) -> None:
    """The near misses: libffi closures (ctypes' and cffi's, called by qsort), extension
    modules imported during a call, cryptography and msgpack."""
    assert _route(run, "callbacks") == "[[1, 2, 3, 4, 5], [1, 2, 3]]"
    assert _route(run, "libraries") == "['ok', {'a': [1, 2]}, 100]"
