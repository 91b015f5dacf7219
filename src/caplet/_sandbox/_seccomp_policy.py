"""What a worker's seccomp filter lets through: the allowlist, as reviewed data.

:mod:`caplet._sandbox._seccomp` compiles this into the program every worker
installs; nothing here runs code. Every system call a worker may make is
named below in a group that says why CPython or a common extension module
needs it; a call on no list is refused (SECCOMP_RET_USER_NOTIF, answered
and counted by the zygote, or RET_ERRNO where counting is off). Adding a
call means adding it to a group with its reason, and a test.

How the list was measured (reproduce it after upgrading Python, glibc or a
library): real plugin workers, started by a :class:`caplet.PluginHost` with
every layer on, were run under ``strace -f -qq --decode-pids=pidns -o FILE``
while they imported and exercised numpy (array math, linalg, FFT, random),
pandas (groupby, CSV round trip, time zones), cryptography (Fernet, ECDSA,
RSA), lxml (parse, XPath, write), sqlite3 (rollback journal and WAL in
/tmp), ssl (default context), zlib/gzip/bz2/lzma, asyncio (gather,
run_in_executor: its socketpair self-pipe and epoll), threading and
concurrent.futures thread pools, ``os.fork``, ``os.posix_spawn`` and
``subprocess`` of an approved program (``ls -la``), shutil copies, mmap,
memfd (refused since memfd29), FIFOs, links, locale, zoneinfo, uuid, signal
timers, faulthandler, ``pathlib.Path.home()`` and a guest snippet. The syscalls each process made
after its ``seccomp(SECCOMP_SET_MODE_FILTER, ...)`` (and its descendants',
followed through ``clone``/``fork`` return values) are all on these lists;
the groups then add the calls of the same family those libraries reach on
other paths (``preadv2`` next to ``pread64``, ``ppoll`` next to ``poll``).

Argument rules use only masked equality on the bits the kernel reads: the
``int``/``unsigned int``/``umode_t`` arguments are truncated by the kernel's
syscall wrappers, so a check of the full 64-bit register would let
``ioctl(fd, 0x1_0000_5412)`` through as TIOCSTI; a mask within the low
32 bits ignores the high half exactly as the kernel does. Pointers are
compared in full.

The types and rule builders it is written with are
:mod:`caplet._sandbox._seccomp_rules`. This module runs inside workers
(through the zygote): standard library only.
"""

from __future__ import annotations

import errno

from caplet._sandbox._seccomp_rules import (
    _ALL64,
    _LOW32,
    Conditional,
    Group,
    Masked,
    Refusal,
    Rule,
    _low,
    _names,
    none_of,
)

__all__ = [
    "ALLOWED",
    "CONDITIONAL",
    "EXEC",
    "NEVER_ALLOWED",
    "QUIET_REFUSALS",
    "UNBOUNDED_MEMORY",
    "UNBOUNDED_MEMORY_REFUSALS",
    "WITHOUT_EXEC",
    "WITH_EXEC",
    "WORKER_UMASK_BITS",
    "allowlist_names",
]


# -- constants the rules refer to (include/uapi/linux/*.h) --------------------------
_SETID_BITS = 0o6000  # S_ISUID | S_ISGID
_S_IWOTH = 0o002
_S_IFMT = 0o170000
_S_IFREG = 0o100000
_S_IFIFO = 0o010000
_S_IFSOCK = 0o140000
_AF_UNIX = 1
_SOCK_TYPE_MASK = 0xF  # SOCK_NONBLOCK / SOCK_CLOEXEC live above it
_SOCK_STREAM = 1
_SOCK_SEQPACKET = 5
_RENAME_WHITEOUT = 1 << 2
_TIOCSTI = 0x5412
_F_SETLEASE = 1024  # F_LINUX_SPECIFIC_BASE + 0 (fcntl(2))
_TIOCLINUX = 0x541C
_PERSONALITY_QUERY = 0xFFFF_FFFF
#: CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET (clone(2)'s
#: 32-bit flags word; CLONE_NEWTIME exists only for clone3 and unshare).
_CLONE_NEW_FLAGS = 0x7E020000
#: prctl(2) options a worker may use: reads of its own state, naming threads
#: and memory, and settings that only restrict the caller.
_PRCTL_OPTIONS = {
    "PR_GET_PDEATHSIG": 2,
    "PR_GET_DUMPABLE": 3,
    "PR_GET_KEEPCAPS": 7,
    "PR_SET_NAME": 15,
    "PR_GET_NAME": 16,
    "PR_GET_SECCOMP": 21,
    "PR_CAPBSET_READ": 23,  # libcap users (ls -l) read the bounding set
    "PR_GET_TIMERSLACK": 30,
    "PR_SET_TIMERSLACK": 29,
    "PR_GET_CHILD_SUBREAPER": 37,
    "PR_SET_NO_NEW_PRIVS": 38,  # already set: a no-op
    "PR_GET_NO_NEW_PRIVS": 39,
    "PR_GET_TID_ADDRESS": 40,
    "PR_SET_THP_DISABLE": 41,
    "PR_GET_THP_DISABLE": 42,
    "PR_GET_SPECULATION_CTRL": 52,
    "PR_SET_SPECULATION_CTRL": 53,  # can only add mitigations to the caller
    "PR_SET_VMA": 0x53564D41,  # glibc >= 2.39 names its anonymous mappings
}

# -- the allowlist -------------------------------------------------------------------

ALLOWED: tuple[Group, ...] = (
    Group(
        "memory",
        "the allocator (brk/mmap arenas), the dynamic loader mapping extension modules "
        "(numpy, pandas, cryptography, lxml are shared objects), thread stacks, NUMA "
        "hints OpenBLAS gives its buffers (mbind), memory locked by crypto libraries "
        "within RLIMIT_MEMLOCK, and the sealing/shadow-stack calls newer glibc makes "
        "(memfd_create: refused, see WITHOUT_EXEC). mmap, mprotect and pkey_mprotect keep "
        "PROT_EXEC, anonymous and writable too: ctypes and cffi callbacks map anonymous "
        "PROT_READ|PROT_WRITE|PROT_EXEC memory for each closure (CPython's and cffi's "
        "malloc_closure; Debian's libffi 3.4.4 is built without static trampolines and "
        "does the same), so refusing it breaks them; see docs/security.md, memfd29",
        _names(
            """
            brk mmap munmap mremap mprotect madvise msync mincore mlock mlock2 munlock
            mlockall munlockall membarrier mbind get_mempolicy
            set_mempolicy pkey_alloc pkey_free pkey_mprotect mseal map_shadow_stack
            """
        ),
    ),
    Group(
        "file I/O",
        "reading modules and data, writing under granted paths and /tmp (Landlock and "
        "the mounts decide where): plain, vectored and positional reads and writes, "
        "sendfile/copy_file_range (shutil.copyfile), splice/tee, locks and syncs "
        "(SQLite: fcntl locks, fdatasync), read-ahead hints (fallocate and fcntl: see "
        "CONDITIONAL)",
        _names(
            """
            read write readv writev pread64 pwrite64 preadv pwritev preadv2 pwritev2
            lseek close close_range dup dup2 dup3 flock fsync fdatasync
            sync_file_range fadvise64 readahead ftruncate truncate sendfile
            copy_file_range splice tee pipe pipe2
            """
        ),
    ),
    Group(
        "file metadata and directories",
        "import's stat/listdir walk, os.walk/glob/pathlib, tempfile, shutil (copy2, "
        "copytree, rmtree), renames and links; xattr and file-attribute *reads* only "
        "(ls -l, shutil.copystat); the *at forms and statx/faccessat2, which glibc "
        "and CPython prefer where the kernel has them (inotify: see WITH_EXEC)",
        _names(
            """
            stat fstat lstat newfstatat statx statfs fstatfs access faccessat faccessat2
            readlink readlinkat getdents getdents64 getcwd chdir fchdir rmdir
            unlink unlinkat rename renameat link linkat symlink symlinkat utime utimes
            utimensat futimesat getxattr lgetxattr fgetxattr listxattr llistxattr
            flistxattr getxattrat listxattrat file_getattr
            """
        ),
    ),
    Group(
        "waiting and time",
        "the worker's call loop (poll on its channel), asyncio's selector (poll in a "
        "worker that cannot exec, see WITH_EXEC; its wake-up fd), selectors/select, "
        "sleeps, clocks, timers and signal.setitimer, threading's timed waits; epoll_ctl "
        "and the waits act only on an epoll instance, which only WITH_EXEC creates",
        _names(
            """
            poll ppoll select pselect6 epoll_ctl epoll_wait
            epoll_pwait epoll_pwait2 eventfd eventfd2 timerfd_create timerfd_settime
            timerfd_gettime clock_gettime clock_getres clock_nanosleep nanosleep
            gettimeofday time times alarm pause getitimer setitimer timer_create
            timer_settime timer_gettime timer_getoverrun timer_delete
            """
        ),
    ),
    Group(
        "threads and synchronisation",
        "threading, thread pools, OpenBLAS and asyncio's default executor: futexes "
        "(and the futex2 calls), the robust list, rseq and TLS set-up glibc does for "
        "every thread (arch_prctl on x86_64), thread exit",
        _names(
            """
            futex futex_waitv futex_wake futex_wait futex_requeue set_robust_list
            set_tid_address rseq gettid arch_prctl sched_yield exit exit_group
            restart_syscall
            """
        ),
    ),
    Group(
        "signals",
        "CPython's signal module and wake-up fd, faulthandler's alternate stack, "
        "subprocess and multiprocessing killing their own children (the pid namespace "
        "holds nothing else), pthread_kill",
        _names(
            """
            rt_sigaction rt_sigprocmask rt_sigreturn rt_sigpending rt_sigsuspend
            rt_sigtimedwait sigaltstack signalfd signalfd4 kill tkill tgkill pidfd_open
            pidfd_send_signal
            """
        ),
    ),
    Group(
        "processes",
        "os.fork, subprocess/posix_spawn (vfork, or clone with CLONE_VM|CLONE_VFORK), "
        "waiting for children, process groups and sessions (start_new_session), "
        "reading ids, limits and usage, scheduling hints (os.nice, affinity)",
        _names(
            """
            fork vfork wait4 waitid getpid getppid getpgid getpgrp setpgid getsid setsid
            getuid geteuid getgid getegid getresuid getresgid getgroups capget getrlimit
            setrlimit prlimit64 getrusage getpriority setpriority sched_getaffinity
            sched_setaffinity sched_getparam sched_getscheduler sched_getattr
            sched_get_priority_max sched_get_priority_min sched_rr_get_interval
            """
        ),
    ),
    Group(
        "system information",
        "os.urandom/secrets/OpenSSL seeding, platform.uname, os.sysconf page counts "
        "(sysinfo), sched_getcpu's fallback",
        ("getrandom", "uname", "sysinfo", "getcpu"),
    ),
    Group(
        "the worker's own sockets",
        "the channel to the host and the listener hand-over are connected AF_UNIX "
        "stream/seqpacket sockets, as are socketpair()s (asyncio's self-pipe): sending, "
        "receiving and inspecting them; socket(), connect(), bind(), listen() and "
        "accept() are not here, so nothing can reach an address",
        _names(
            """
            sendmsg recvmsg recvfrom getsockname getpeername getsockopt setsockopt
            shutdown
            """
        ),
    ),
)


def _modes(arg: int) -> tuple[Rule, ...]:
    """No set-user-ID or set-group-ID bit in the mode argument ``arg`` (umode_t)."""
    return ((Masked(arg, _SETID_BITS, 0),),)


def _changed_modes(arg: int) -> tuple[Rule, ...]:
    """No set-id bit and no write bit for others in the mode ``chmod`` is given.

    The write bit for others is refused in a changed mode only: it is what
    tarfile's ``data`` filter (PEP 706) drops as dangerous beside the set-id
    bits, and as an unprivileged host the worker owns the folder a ``fs.write``
    grant names, so ``chmod 0o777`` of it let every local user write into the
    user's private folder (attack31). A creating call's mode is not narrowed:
    ``open(2)`` is given 0o666 by every ``open()`` and the umask clears it, so
    the umask must keep that bit (:func:`_kept_umask`).
    """
    return ((Masked(arg, _SETID_BITS | _S_IWOTH, 0),),)


def _kept_umask() -> tuple[Rule, ...]:
    """A ``umask`` that keeps the write bit for others (umask(2): the kernel reads
    ``mask & 0777``, so the bit is read whatever the argument's upper bits).

    A created file's, folder's or FIFO's mode is the one asked for less the umask
    (open(2), mkdir(2), mknod(2)), and every honest call asks for others' write bit
    (``open()`` 0o666, ``os.mkdir`` 0o777): with ``umask(0)`` a worker made a folder
    every local user may write inside its grant, no ``chmod`` needed (attack34). The
    worker starts with the bit in its umask (:data:`WORKER_UMASK_BITS`, set by
    :func:`caplet._sandbox._seccomp.apply_seccomp` before the filter) and may not
    clear it: the system call gets EPERM, and the worker's ``os.umask`` adds the bit
    itself so the idiom that *reads* the umask (``os.umask(0)`` then back) works
    (:func:`caplet._sandbox._worker._umask_keeping_others_write`).
    """
    return ((Masked(0, _S_IWOTH, _S_IWOTH),),)


#: The bits every worker's umask holds from the filter's installation on (attack34).
WORKER_UMASK_BITS = _S_IWOTH


def _node_types(arg: int) -> tuple[Rule, ...]:
    """Regular files, FIFOs and sockets without set-id bits: no character or block device."""
    mask = _S_IFMT | _SETID_BITS
    return tuple((Masked(arg, mask, kind),) for kind in (0, _S_IFREG, _S_IFIFO, _S_IFSOCK))


_NO_SETID = "no set-user-ID/set-group-ID bit on anything a plugin creates or changes"
_NO_SETID_OR_OTHER_WRITE = (
    f"{_NO_SETID}; nothing made writable by every local user (attack31: chmod 0o777 of the "
    "granted folder an unprivileged host's worker owns)"
)

CONDITIONAL: tuple[Conditional, ...] = (
    # Creating and changing modes: issue 13, point 1 (a setuid copy of the
    # interpreter in a write grant is host root when the host runs as root).
    Conditional("open", _NO_SETID, _modes(2)),
    Conditional("openat", _NO_SETID, _modes(3)),
    Conditional("creat", _NO_SETID, _modes(1)),
    Conditional("mkdir", _NO_SETID, _modes(1)),
    Conditional("mkdirat", _NO_SETID, _modes(2)),
    Conditional("chmod", _NO_SETID_OR_OTHER_WRITE, _changed_modes(1)),
    Conditional("fchmod", _NO_SETID_OR_OTHER_WRITE, _changed_modes(1)),
    Conditional("fchmodat", _NO_SETID_OR_OTHER_WRITE, _changed_modes(2)),
    Conditional("fchmodat2", _NO_SETID_OR_OTHER_WRITE, _changed_modes(2)),
    Conditional(
        "umask",
        "a umask that keeps others' write bit (umask(0) then os.mkdir's 0o777 made a folder "
        "every local user may write: attack34)",
        _kept_umask(),
    ),
    Conditional("mknod", f"FIFOs (os.mkfifo) and sockets; {_NO_SETID}", _node_types(1)),
    Conditional("mknodat", f"FIFOs (os.mkfifo) and sockets; {_NO_SETID}", _node_types(2)),
    Conditional(
        "fallocate",
        "preallocation that grows the file (mode 0: posix_fallocate, SQLite's size hint), "
        "which RLIMIT_FSIZE bounds; FALLOC_FL_KEEP_SIZE (and the punch/zero/collapse/insert "
        "modes built on it) allocates blocks past the end of file that RLIMIT_FSIZE never "
        "sees: a plugin with no grant took 1 GiB of the host's disk through its stderr log",
        (_low(1, 0),),
    ),
    Conditional(
        "renameat2",
        "renames with RENAME_NOREPLACE/EXCHANGE; RENAME_WHITEOUT leaves a 0:0 character "
        "device behind, and no device node may be created",
        ((Masked(4, _RENAME_WHITEOUT, 0),),),
    ),
    Conditional(
        "clone",
        "threads and fork-like children; never new namespaces (the jail is already built)",
        ((Masked(0, _CLONE_NEW_FLAGS, 0),),),
    ),
    Conditional(
        "socketpair",
        "asyncio's self-pipe and subprocess/multiprocessing pairs: AF_UNIX stream or "
        "seqpacket only; a connected SOCK_DGRAM pair could still sendto() any pathname",
        tuple(
            (Masked(0, _LOW32, _AF_UNIX), Masked(1, _SOCK_TYPE_MASK, kind))
            for kind in (_SOCK_STREAM, _SOCK_SEQPACKET)
        ),
    ),
    Conditional(
        "sendto",
        "send() on the worker's connected sockets (it is sendto with no address); an "
        "address is a way to a host socket",
        ((Masked(4, _ALL64, 0),),),
    ),
    Conditional(
        "fcntl",
        "descriptor flags, POSIX and OFD locks (SQLite), pipe sizes, seals; never a lease "
        "(F_SETLEASE): a lease makes every other process's open(2) of the file, the "
        "host's, root's and other plugins' workers' included, wait for the holder up to "
        "lease-break-time (45 s) each time, and a worker may lease any file its uid owns "
        "in a grant (attack13)",
        none_of(1, (_F_SETLEASE,)),
    ),
    Conditional(
        "ioctl",
        "isatty (TCGETS), FIONBIO, FIOCLEX, terminal sizes, file-system ioctls; never "
        "TIOCSTI/TIOCLINUX (typing into a terminal)",
        none_of(1, (_TIOCSTI, _TIOCLINUX)),
    ),
    Conditional(
        "prctl",
        "naming threads, reading its own settings, and settings that only restrict it",
        tuple(_low(0, option) for option in sorted(_PRCTL_OPTIONS.values())),
    ),
    Conditional(
        "personality",
        "only the query personality(0xffffffff) glibc and Python make; setting a "
        "persona (ADDR_NO_RANDOMIZE, READ_IMPLIES_EXEC) weakens the process",
        (_low(0, _PERSONALITY_QUERY),),
    ),
)

#: Allowed only to a worker granted ``proc.exec``; Landlock's execute right
#: then limits what may be run to the approved program.
EXEC: tuple[str, ...] = ("execve", "execveat")

#: Allowed to no worker (memfd29). Kept as a group, with its reason, because the
#: allowlist used to grant it to workers that cannot exec, and reviewers look for it.
WITHOUT_EXEC = Group(
    "anonymous files",
    "anonymous memory files (memfd_create(2)): refused to every worker and counted. An "
    "anonymous file lies on no mount, so no noexec mount covers it and no Landlock rule "
    "names it: it is the one file a worker could write and then map with PROT_EXEC "
    "(mmap(2) refuses PROT_EXEC only on a noexec mount). A worker that may exec ran any "
    "program from one, sealed against execution or not, through the approved program's "
    "ELF interpreter (`ld.so /proc/self/fd/N`, round 3); any worker dlopened a library "
    "the plugin shipped as data (cffi's FFI().dlopen, or libc's dlopen called through "
    "ctypes, of /proc/self/fd/N: no audit event, attack27) and ran code it wrote through "
    "a second, executable mapping of the same memfd (memfd29). Nothing a worker runs "
    "needs one: CPython, glibc and the measured extension modules never call it, and "
    "libffi 3.4 calls it only after an anonymous PROT_EXEC mapping failed (closures.c, "
    "dlmmap), which this filter allows. The worker's log is the host's memfd, made "
    "outside the jail; the zygote's filter compilation uses one before any filter",
    ("memfd_create",),
)

#: Allowed only to a worker granted ``proc.exec`` (attack10). A watch on an
#: epoll instance is charged to ``fs.epoll.max_user_watches``, a count per
#: uid in the kernel's user_struct (fs/eventpoll.c), not per user namespace:
#: no jail limit bounds it, and every process of the worker's uid shares it
#: (a root host's workers all run as one uid, an unprivileged host's as the
#: host's own user). A watch lives as long as its file, not its descriptor,
#: so one worker held epoll instances x files x free descriptor numbers of
#: them (200,000 in a third of a second, the whole 4% of RAM within seconds),
#: and every other process of the uid got ENOSPC from epoll_ctl: no asyncio
#: event loop could start. A worker that cannot exec waits with poll(2)
#: instead (the worker switches selectors to it before any plugin code
#: runs). The programs a worker granted ``proc.exec`` runs need epoll (Go's
#: runtime aborts without it, Node's loop too), so it keeps it.
#:
#: inotify likewise (attack37): a watch is on an inode, and fires for every
#: process that opens, reads or writes it through any mount, so a watch on a
#: file every jail shows (the runtime's standard library, ``/dev/null``) heard
#: other plugins' workers open it and every process on the machine: a channel
#: between two sandboxes that share no grant (a bit an event, no
#: ``ctx.plugins.call``), and a view of the host's activity. Landlock does not
#: mediate watches. Nothing CPython, its standard library or the measured
#: extension modules run calls inotify; the approved programs that do (``tail
#: -f``, Node's ``fs.watch``) fall back to polling without it, but a worker
#: granted ``proc.exec`` keeps it as it keeps epoll.
WITH_EXEC = Group(
    "epoll instances and file watches",
    "event loops of the approved programs (Go's runtime, libuv) and their file watches "
    "(tail -f, fs.watch); refused to a worker that cannot exec: epoll watches nothing "
    "bounds per worker (the kernel counts them per uid, shared with the host's user or "
    "every other worker), and an inotify watch on a file every jail shows hears other "
    "workers and host processes open it (attack37)",
    (
        "epoll_create",
        "epoll_create1",
        "inotify_init",
        "inotify_init1",
        "inotify_add_watch",
        "inotify_rm_watch",
    ),
)

_SOL_SOCKET = 1
#: SO_SNDBUF, SO_RCVBUF, SO_SNDBUFFORCE, SO_RCVBUFFORCE (asm-generic/socket.h;
#: the same numbers on x86_64 and arm64).
_SOCKET_BUFFER_OPTIONS = (7, 8, 32, 33)

#: Where a worker has a memory limit but no memory cgroup (red-team finding
#: 9), what bounds the memory it holds outside its address space is its
#: descriptors: each pipe and socket buffer holds at most its size
#: (docs/security.md, "Memory and processes"). These calls break that bound
#: there, so they lose their unconditional place in ALLOWED and are allowed
#: only under these rules (no rule: refused and counted). With a memory
#: cgroup everything they hold is charged to the worker and they stay allowed.
UNBOUNDED_MEMORY: tuple[Conditional, ...] = (
    Conditional(
        "splice",
        "moves page references into a socket charged by the byte: one byte of each of "
        "many pages (a packet-mode pipe of one-byte writes) holds a page per byte, so a "
        "socket's 208 KiB send buffer holds megabytes (1 GiB held by one process of a "
        "128 MiB worker within its 256 descriptors)",
        (),
    ),
    Conditional(
        "setsockopt",
        "SO_SNDBUF/SO_RCVBUF (and the FORCE variants) raise a socket's buffer to twice "
        "net.core.wmem_max (8 MiB here) instead of wmem_default (208 KiB): 2 GiB in one "
        "process's 256 socket descriptors. Every other option stays allowed",
        (*none_of(1, (_SOL_SOCKET,)), *none_of(2, _SOCKET_BUFFER_OPTIONS)),
    ),
)

#: Refused quietly (EPERM, uncounted) where UNBOUNDED_MEMORY applies.
UNBOUNDED_MEMORY_REFUSALS: tuple[Refusal, ...] = (
    Refusal(
        "sendfile",
        errno.EPERM,
        "to a socket it moves page references charged by the byte, as splice does "
        "(sendfile of one byte of each page of a /tmp file, then deleted, holds the "
        "pages after tmpfs has freed them). shutil.copyfile tries it first on every "
        "copy and falls back to read/write when it fails before copying anything, so "
        "a counted refusal would log every ordinary copy",
    ),
)

QUIET_REFUSALS: tuple[Refusal, ...] = (
    Refusal(
        "clone3",
        errno.ENOSYS,
        "its flags live in a struct BPF cannot read; ENOSYS makes glibc fall back to "
        "clone, which is checked (what Docker's and containerd's profiles do)",
    ),
    Refusal(
        "openat2",
        errno.ENOSYS,
        "its mode lives in a struct BPF cannot read; ENOSYS makes callers fall back to "
        "openat, which is checked",
    ),
    Refusal(
        "socket",
        errno.EPERM,
        "glibc asks nscd over an AF_UNIX socket on every user, group or host lookup "
        "(os.path.expanduser('~') in a worker without HOME), libuuid asks uuidd, "
        "syslog(3) opens /dev/log: each treats the failure as 'not running'. Other "
        "families are refused and counted",
        (_low(0, _AF_UNIX),),
    ),
    *(
        Refusal(
            name,
            errno.EPERM,
            "never another owner; SQLite running as root inside the jail chowns every "
            "new journal to its database's owner and tarfile chowns what it extracts "
            "as root, both ignoring the failure",
        )
        for name in ("chown", "fchown", "lchown", "fchownat")
    ),
)

#: Tripwire for reviewers and tests: calls that must never be allowed.
NEVER_ALLOWED: tuple[str, ...] = (
    # other processes' memory and execution
    *_names(
        """
        ptrace process_vm_readv process_vm_writev pidfd_getfd kcmp
        """
    ),
    # mounts and namespaces (the jail is already built)
    *_names(
        """
        mount umount2 pivot_root chroot unshare setns mount_setattr move_mount
        open_tree open_tree_attr fsopen fsconfig fsmount fspick statmount
        listmount
        """
    ),
    # kernel attack surface
    *_names(
        """
        bpf perf_event_open keyctl add_key request_key userfaultfd
        io_uring_setup io_uring_enter io_uring_register open_by_handle_at
        name_to_handle_at fanotify_init lookup_dcookie
        """
    ),
    # whole-system administration
    *_names(
        """
        kexec_load kexec_file_load init_module finit_module delete_module swapon
        swapoff reboot acct quotactl quotactl_fd settimeofday clock_settime
        adjtimex clock_adjtime syslog vhangup iopl ioperm modify_ldt uselib
        """
    ),
    # identity and privilege (workers have no use for them)
    *_names(
        """
        setuid setgid setreuid setregid setresuid setresgid setfsuid setfsgid
        setgroups capset
        """
    ),
    # privileged file state: xattrs (security.capability, trusted.*) and owners
    *_names(
        """
        setxattr lsetxattr fsetxattr setxattrat removexattr lremovexattr
        fremovexattr removexattrat file_setattr chown fchown lchown fchownat
        """
    ),
    # files on no mount, which no noexec mount covers (WITHOUT_EXEC, memfd29)
    "memfd_create",
    "memfd_secret",
    # reaching host services: addresses and host-wide IPC
    *_names(
        """
        socket connect bind listen accept accept4 sendmmsg shmget semget msgget
        mq_open
        """
    ),
)


def allowlist_names(*, allow_exec: bool) -> frozenset[str]:
    """Every call the filter can let through (unconditionally or under a rule)."""
    names = {name for group in ALLOWED for name in group.syscalls}
    names |= {conditional.syscall for conditional in CONDITIONAL}
    # UNBOUNDED_MEMORY only narrows calls ALLOWED already has.
    if allow_exec:
        names |= {*EXEC, *WITH_EXEC.syscalls}
    return frozenset(names)
