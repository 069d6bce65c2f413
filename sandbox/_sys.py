"""Thin ctypes wrappers over the Linux calls the sandbox needs and the standard library lacks.

Covers ``unshare``, ``mount``, ``mount_setattr``, ``prctl`` (no-new-privs, child subreaper), Landlock (ruleset,
path rules, scoping) and installing a seccomp BPF allowlist built by :func:`seccomp_program`.

This module holds mechanisms only; which layers a sandboxed child gets, and in what order, is decided in
:mod:`sandbox._child`. Only x86_64 has a seccomp syscall table here: on other machines the seccomp layer reports
itself unavailable instead of guessing numbers.
"""

from __future__ import annotations

import ctypes
import os
import platform
import stat
import struct

from sandbox import _syscalls

__all__ = [
    "unshare",
    "setns",
    "mount",
    "mount_raw",
    "pivot_root",
    "umount_detached",
    "mount_setattr_recursive",
    "MOUNT_ATTR_RDONLY",
    "set_no_new_privs",
    "set_child_subreaper",
    "set_parent_death_signal",
    "landlock_abi",
    "LandlockPlan",
    "landlock_enforce",
    "SeccompFilter",
    "seccomp_supported",
    "seccomp_program",
    "seccomp_setup_program",
    "SETUP_CALLS",
    "CLONE_NEWNS",
    "CLONE_NEWNET",
    "CLONE_NEWIPC",
    "CLONE_NEWUTS",
    "CLONE_NEWUSER",
    "CLONE_NEWPID",
]

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long

CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
_NS_FLAGS = CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET

MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18

_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_CHILD_SUBREAPER = 36
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2


def _check(ret: int, what: str) -> int:
    if ret < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return ret


def unshare(flags: int) -> None:
    """``unshare(2)``: move this process into new namespaces."""
    _check(_libc.unshare(ctypes.c_int(flags)), f"unshare({flags:#x})")


def setns(fd: int, nstype: int) -> None:
    """``setns(2)``: join the namespace behind ``fd`` (for a pid namespace: the one future children get)."""
    _check(_libc.setns(ctypes.c_int(fd), ctypes.c_int(nstype)), f"setns({nstype:#x})")


def mount(source: str | None, target: str, fstype: str | None, flags: int = 0, data: str | None = None) -> None:
    """``mount(2)``."""

    def enc(s: str | None) -> bytes | None:
        return None if s is None else s.encode()

    ret = _libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data))
    _check(ret, f"mount {source} on {target}")


def pivot_root(new_root: str, put_old: str) -> None:
    """``pivot_root(2)``: make ``new_root`` this mount namespace's root; the old one moves to ``put_old``."""
    _check(_libc.syscall(155, new_root.encode(), put_old.encode()), f"pivot_root {new_root}")


def umount_detached(target: str) -> None:
    """``umount2(target, MNT_DETACH)``."""
    _check(_libc.umount2(target.encode(), ctypes.c_int(2)), f"umount {target}")


def mount_raw(source: bytes | None, target: bytes, fstype: bytes | None, flags: int, data: bytes | None) -> None:
    """``mount(2)`` with arguments already encoded (for a forked child: no work beyond the call)."""
    if _libc.mount(source, target, fstype, ctypes.c_ulong(flags), data) < 0:
        _check(-1, f"mount {target!r}")


_SYS_MOUNT_SETATTR = 442
_AT_RECURSIVE = 0x8000
MOUNT_ATTR_RDONLY = 0x1


def mount_setattr_recursive(path: str, attr_set: int, attr_clr: int = 0) -> None:
    """``mount_setattr(2)`` with ``AT_RECURSIVE``: change the flags of ``path``'s mount and every mount below it.

    Raises:
        OSError: ENOSYS before Linux 5.12, or when a mount refuses the change.
    """
    attr = struct.pack("=QQQQ", attr_set, attr_clr, 0, 0)
    ret = _libc.syscall(
        _SYS_MOUNT_SETATTR,
        ctypes.c_int(-100),
        path.encode(),
        ctypes.c_uint(_AT_RECURSIVE),
        attr,
        ctypes.c_size_t(len(attr)),
    )
    _check(ret, f"mount_setattr {path}")


def set_no_new_privs() -> None:
    """``prctl(PR_SET_NO_NEW_PRIVS)``: exec can never grant privileges again (setuid bits, file caps)."""
    _check(_libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(NO_NEW_PRIVS)")


def set_parent_death_signal(sig: int) -> None:
    """``prctl(PR_SET_PDEATHSIG)``: receive ``sig`` when the parent thread exits."""
    _check(_libc.prctl(1, sig, 0, 0, 0), "prctl(PDEATHSIG)")


def set_child_subreaper() -> None:
    """``prctl(PR_SET_CHILD_SUBREAPER)``: orphaned descendants are re-parented to this process."""
    _check(_libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), "prctl(CHILD_SUBREAPER)")


# ---------------------------------------------------------------- Landlock
_SYS_LANDLOCK_CREATE_RULESET = 444  # the same number on every architecture (generic table)
_SYS_LANDLOCK_ADD_RULE = 445
_SYS_LANDLOCK_RESTRICT_SELF = 446
_LANDLOCK_CREATE_RULESET_VERSION = 1
_LANDLOCK_RULE_PATH_BENEATH = 1

FS_EXECUTE = 1 << 0
FS_WRITE_FILE = 1 << 1
FS_READ_FILE = 1 << 2
FS_READ_DIR = 1 << 3
_FS_ALL_V1 = (1 << 13) - 1  # EXECUTE .. MAKE_SYM
_FS_REFER = 1 << 13  # ABI 2
_FS_TRUNCATE = 1 << 14  # ABI 3
_FS_IOCTL_DEV = 1 << 15  # ABI 5
_NET_BIND_TCP = 1 << 0  # ABI 4
_NET_CONNECT_TCP = 1 << 1
_SCOPE_ABSTRACT_UNIX = 1 << 0  # ABI 6
_SCOPE_SIGNAL = 1 << 1

READ_ONLY = FS_EXECUTE | FS_READ_FILE | FS_READ_DIR


def landlock_abi() -> int:
    """The Landlock ABI version the kernel offers, 0 when Landlock is absent or disabled."""
    ret = _libc.syscall(
        _SYS_LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_LANDLOCK_CREATE_RULESET_VERSION)
    )
    return int(ret) if ret > 0 else 0


def _fs_all(abi: int) -> int:
    access = _FS_ALL_V1
    if abi >= 2:
        access |= _FS_REFER
    if abi >= 3:
        access |= _FS_TRUNCATE
    if abi >= 5:
        access |= _FS_IOCTL_DEV
    return access


class LandlockPlan:
    """A Landlock ruleset prepared once in the warm server and applied in each child.

    The server opens the read-only trees (``O_PATH``) and packs their rules; a child then only creates a
    ruleset, adds these rules and its own read-write ones, and enforces it. Keeping the work out of the child
    matters: every Python step after ``fork`` copies the memory it touches.
    """

    def __init__(self, read_only: list[str], abi: int) -> None:
        self.abi = abi
        self.fs_all = _fs_all(abi)
        attr = struct.pack("=Q", self.fs_all)
        if abi >= 4:
            attr += struct.pack("=Q", _NET_BIND_TCP | _NET_CONNECT_TCP)
        if abi >= 6:
            attr += struct.pack("=Q", _SCOPE_ABSTRACT_UNIX | _SCOPE_SIGNAL)
        self._attr = ctypes.create_string_buffer(attr, len(attr))
        self._attr_len = ctypes.c_size_t(len(attr))
        self.fds: list[int] = []
        self._rules: list[ctypes.Array] = []
        for path in read_only:
            packed = self._rule(path, READ_ONLY)
            if packed is not None:
                self._rules.append(packed[0])
                self.fds.append(packed[1])

    def _rule(self, path: str, access: int) -> tuple[ctypes.Array, int] | None:
        """The packed rule for ``path`` and the ``O_PATH`` fd it names (None when the path does not exist)."""
        try:
            pfd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            return None
        if not stat.S_ISDIR(os.fstat(pfd).st_mode):
            access &= FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | _FS_TRUNCATE | _FS_IOCTL_DEV
        return ctypes.create_string_buffer(struct.pack("=Qi", access & self.fs_all, pfd), 12), pfd

    def ruleset(self, read_write: list[str]) -> int:
        """Create the ruleset with every prepared rule plus full access beneath ``read_write``; return its fd.

        Raises:
            OSError: when a Landlock call fails.
        """
        rfd = _check(
            _libc.syscall(_SYS_LANDLOCK_CREATE_RULESET, self._attr, self._attr_len, ctypes.c_uint32(0)),
            "landlock_create_ruleset",
        )
        try:
            crfd, kind, flags = ctypes.c_int(rfd), ctypes.c_int(_LANDLOCK_RULE_PATH_BENEATH), ctypes.c_uint32(0)
            for rule in self._rules:
                _check(_libc.syscall(_SYS_LANDLOCK_ADD_RULE, crfd, kind, rule, flags), "landlock_add_rule")
            for path in read_write:
                packed = self._rule(path, self.fs_all)
                if packed is None:
                    continue
                try:
                    _check(
                        _libc.syscall(_SYS_LANDLOCK_ADD_RULE, crfd, kind, packed[0], flags), f"landlock_add_rule {path}"
                    )
                finally:
                    os.close(packed[1])
        except BaseException:
            os.close(rfd)
            raise
        return rfd

    def close(self) -> None:
        for fd in self.fds:
            os.close(fd)
        self.fds.clear()


def landlock_enforce(ruleset_fd: int) -> None:
    """``landlock_restrict_self``: this process and every later child are confined to the ruleset.

    Needs no-new-privs set first (or CAP_SYS_ADMIN).
    """
    _check(
        _libc.syscall(_SYS_LANDLOCK_RESTRICT_SELF, ctypes.c_int(ruleset_fd), ctypes.c_uint32(0)),
        "landlock_restrict_self",
    )


# ---------------------------------------------------------------- seccomp
_AUDIT_ARCH_X86_64 = 0xC000003E
_SECCOMP_RET_KILL_PROCESS = 0x80000000
_SECCOMP_RET_ERRNO = 0x00050000
_SECCOMP_RET_ALLOW = 0x7FFF0000
_BPF_LD_W_ABS = 0x20
_BPF_JEQ_K = 0x15
_BPF_JSET_K = 0x45
_BPF_RET_K = 0x06
_EPERM = 1
_ENOSYS = 38
_EAFNOSUPPORT = 97
_AF_UNIX = 1

_SYS_SOCKET = 41
_SYS_SOCKETPAIR = 53
_SYS_CLONE = 56
_SYS_CLONE3 = 435
_SYS_IOCTL = 16
_TIOCSTI = 0x5412
_TIOCLINUX = 0x541C
_SIOC_FIRST, _SIOC_LAST = 0x8900, 0x89FF  # socket ioctls (interfaces, routes, a socket's namespace)
_CLONE_PIDFD = 0x1000
_SYS_SETSOCKOPT = 54
_SYS_GETSOCKOPT = 55
_SOL_SOCKET = 1
_SO_COOKIE = 57
_SO_NETNS_COOKIE = 71
_SO_PASSPIDFD = 76
_SO_PEERPIDFD = 77
_SYS_SETRLIMIT = 160
_SYS_PRLIMIT64 = 302
_RLIMIT_CORE = 4
_SYS_FCNTL = 72
_F_OFD_SETLK = 37
_F_OFD_SETLKW = 38
_BPF_JGT_K = 0x25
_BPF_JGE_K = 0x35
_SYS_PREADV2 = 327
_SYS_PWRITEV2 = 328
_RWF_NOWAIT = 0x8


def seccomp_supported() -> bool:
    """True on machines whose syscall table :func:`seccomp_program` knows (x86_64)."""
    return platform.machine() in ("x86_64", "AMD64")


def _stmt(code: int, k: int) -> bytes:
    return struct.pack("=HBBI", code, 0, 0, k & 0xFFFFFFFF)


def _jump(code: int, k: int, jt: int, jf: int) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k & 0xFFFFFFFF)


#: Calls the policy refuses that a child's own setup makes after ``fork`` (and the fork helper between forks):
#: with the policy split in two (:func:`seccomp_program` with ``for_setup``, then :func:`seccomp_setup_program`)
#: they are refused by the second filter, which each child installs last.
SETUP_CALLS = ("unshare", "setns", "mount", "landlock_create_ruleset", "landlock_add_rule", "landlock_restrict_self")


def _actions(for_setup: bool = False) -> list[tuple[int, int, int]]:
    """The allowlist as runs ``(first, last, action)`` of syscall numbers with one action, ascending; with
    ``for_setup`` the :data:`SETUP_CALLS` are allowed."""
    allow, eperm, enosys = _SECCOMP_RET_ALLOW, _SECCOMP_RET_ERRNO | _EPERM, _SECCOMP_RET_ERRNO | _ENOSYS
    allowed, denied = set(_syscalls.ALLOWED.values()), set(_syscalls.DENIED.values())
    if for_setup:
        allowed |= {_syscalls.DENIED[name] for name in SETUP_CALLS}
    runs: list[tuple[int, int, int]] = []
    for nr in range(_syscalls.KNOWN_MAX + 1):
        action = allow if nr in allowed else eperm if nr in denied else enosys
        if runs and runs[-1][2] == action:
            runs[-1] = (runs[-1][0], nr, action)
        else:
            runs.append((nr, nr, action))
    return runs


def _arch_check() -> list[bytes]:
    """Kill a foreign architecture or an x32 call; leaves the syscall number in the accumulator."""
    return [
        _stmt(_BPF_LD_W_ABS, 4),  # arch
        _jump(_BPF_JEQ_K, _AUDIT_ARCH_X86_64, 1, 0),
        _stmt(_BPF_RET_K, _SECCOMP_RET_KILL_PROCESS),
        _stmt(_BPF_LD_W_ABS, 0),
        _jump(0x35, 0x40000000, 0, 1),  # JGE: x32 ABI
        _stmt(_BPF_RET_K, _SECCOMP_RET_KILL_PROCESS),
    ]


def _core_limit_rules() -> list[bytes]:
    """The core limit stays at the 1 the child set (a pipe core_pattern ignores 0): ``setrlimit(RLIMIT_CORE, ...)``
    and ``prlimit64(_, RLIMIT_CORE, new != NULL, _)`` are refused; reading it is not. Expects the number in
    the accumulator and leaves it there for every other call."""
    allow, eperm = _stmt(_BPF_RET_K, _SECCOMP_RET_ALLOW), _stmt(_BPF_RET_K, _SECCOMP_RET_ERRNO | _EPERM)
    return [
        _jump(_BPF_JEQ_K, _SYS_SETRLIMIT, 0, 4),
        _stmt(_BPF_LD_W_ABS, 16),
        _jump(_BPF_JEQ_K, _RLIMIT_CORE, 0, 1),
        eperm,
        allow,
        _jump(_BPF_JEQ_K, _SYS_PRLIMIT64, 0, 8),
        _stmt(_BPF_LD_W_ABS, 24),
        _jump(_BPF_JEQ_K, _RLIMIT_CORE, 0, 4),
        _stmt(_BPF_LD_W_ABS, 32),
        _jump(_BPF_JEQ_K, 0, 0, 3),
        _stmt(_BPF_LD_W_ABS, 36),
        _jump(_BPF_JEQ_K, 0, 0, 1),
        allow,
        eperm,
    ]


def seccomp_setup_program() -> list[bytes]:
    """The second half of the policy split in two: refuses the :data:`SETUP_CALLS` (EPERM) and a new core limit,
    allows everything else (the first half, :func:`seccomp_program` with ``for_setup``, decides it). About 30
    instructions instead of 240: the filter each child compiles when the fork helper holds the first half."""
    prog = _arch_check()
    for name in SETUP_CALLS:
        prog += [_jump(_BPF_JEQ_K, _syscalls.DENIED[name], 0, 1), _stmt(_BPF_RET_K, _SECCOMP_RET_ERRNO | _EPERM)]
    return prog + _core_limit_rules() + [_stmt(_BPF_RET_K, _SECCOMP_RET_ALLOW)]


def seccomp_program(for_setup: bool = False) -> list[bytes]:
    """The BPF allowlist of :mod:`sandbox._syscalls` as a list of 8-byte instructions (x86_64).

    ``for_setup``: the first half of the policy split in two, installed once in the fork helper so that each
    child inherits it and compiles only :func:`seccomp_setup_program`: the :data:`SETUP_CALLS` are allowed and
    the core-limit rules left out; the second half refuses exactly those, so the two together decide every call
    as the whole program does.

    Calls with checked arguments come first: ``socket``/``socketpair`` of any family but AF_UNIX get
    EAFNOSUPPORT; ``clone`` with any namespace flag gets EPERM; ``ioctl(TIOCSTI)``, ``ioctl(TIOCLINUX)`` and
    socket ioctls (``0x89xx``) get EPERM; ``clone`` with ``CLONE_PIDFD``, ``getsockopt`` of ``SO_COOKIE``,
    ``SO_NETNS_COOKIE`` and ``SO_PEERPIDFD``, and ``setsockopt`` of ``SO_PASSPIDFD`` get EPERM;
    ``preadv2``/``pwritev2`` with ``RWF_NOWAIT`` get EPERM; ``clone3`` gets ENOSYS so libc falls back to
    ``clone``, whose flags can be checked.
    Then one run check per block of numbers with the same action: allowed, EPERM (:data:`sandbox._syscalls.DENIED`) or
    ENOSYS (unknown, and everything above the audited table). A foreign architecture or an x32 call kills the
    process. Allowed calls never read their arguments, so the kernel caches their verdict (Linux 5.11+).
    """

    def errno(e: int) -> bytes:
        return _stmt(_BPF_RET_K, _SECCOMP_RET_ERRNO | e)

    allow = _stmt(_BPF_RET_K, _SECCOMP_RET_ALLOW)
    prog = _arch_check() + [_jump(_BPF_JEQ_K, _SYS_CLONE3, 0, 1), errno(_ENOSYS)]
    # socket / socketpair: only AF_UNIX (args[0] low word at offset 16)
    for nr in (_SYS_SOCKET, _SYS_SOCKETPAIR):
        prog += [
            _jump(_BPF_JEQ_K, nr, 0, 4),
            _stmt(_BPF_LD_W_ABS, 16),
            _jump(_BPF_JEQ_K, _AF_UNIX, 0, 1),
            allow,
            errno(_EAFNOSUPPORT),
        ]
    # clone: no namespace flags, no pidfd (args[0])
    prog += [
        _jump(_BPF_JEQ_K, _SYS_CLONE, 0, 4),
        _stmt(_BPF_LD_W_ABS, 16),
        _jump(_BPF_JSET_K, _NS_FLAGS | _CLONE_PIDFD, 0, 1),
        errno(_EPERM),
        allow,
    ]
    # getsockopt / setsockopt at SOL_SOCKET (args[1] at 24, args[2] at 32): nothing that hands out a pidfd or a
    # machine-wide counter (see :mod:`sandbox._syscalls`)
    getters = (_SO_COOKIE, _SO_NETNS_COOKIE, _SO_PEERPIDFD)
    for nr, names in ((_SYS_GETSOCKOPT, getters), (_SYS_SETSOCKOPT, (_SO_PASSPIDFD,))):
        m = len(names)
        prog += [
            _jump(_BPF_JEQ_K, nr, 0, 5 + m),
            _stmt(_BPF_LD_W_ABS, 24),
            _jump(_BPF_JEQ_K, _SOL_SOCKET, 0, m + 1),
            _stmt(_BPF_LD_W_ABS, 32),
        ]
        prog += [_jump(_BPF_JEQ_K, name, m - k, 0) for k, name in enumerate(names)]
        prog += [allow, errno(_EPERM)]
    if not for_setup:
        prog += _core_limit_rules()
    # fcntl: no open-file-description locks (args[1]), which a descriptor in flight keeps after the execution
    prog += [
        _jump(_BPF_JEQ_K, _SYS_FCNTL, 0, 5),
        _stmt(_BPF_LD_W_ABS, 24),
        _jump(_BPF_JEQ_K, _F_OFD_SETLK, 1, 0),
        _jump(_BPF_JEQ_K, _F_OFD_SETLKW, 0, 1),
        errno(_EPERM),
        allow,
    ]
    # preadv2 / pwritev2: no RWF_NOWAIT (args[5] at offset 56), which tells whether the data is in the page cache
    for nr in (_SYS_PREADV2, _SYS_PWRITEV2):
        prog += [
            _jump(_BPF_JEQ_K, nr, 0, 4),
            _stmt(_BPF_LD_W_ABS, 56),
            _jump(_BPF_JSET_K, _RWF_NOWAIT, 0, 1),
            errno(_EPERM),
            allow,
        ]
    # ioctl: no TIOCSTI / TIOCLINUX, and no socket ioctl (0x89xx: SIOCSIFMTU, SIOCSIFFLAGS, SIOCGSKNS, ...; a process
    # with capabilities in its user namespace, as without root, set the MTU or flags of the slot's loopback, which
    # the slot's next execution read back) (args[1] low word at offset 24)
    prog += [
        _jump(_BPF_JEQ_K, _SYS_IOCTL, 0, 7),
        _stmt(_BPF_LD_W_ABS, 24),
        _jump(_BPF_JEQ_K, _TIOCSTI, 3, 0),
        _jump(_BPF_JEQ_K, _TIOCLINUX, 2, 0),
        _jump(_BPF_JGE_K, _SIOC_FIRST, 0, 2),
        _jump(_BPF_JGT_K, _SIOC_LAST, 1, 0),
        errno(_EPERM),
        allow,
    ]
    for _first, last, action in _actions(for_setup):  # the syscall number is in the accumulator
        prog += [_jump(_BPF_JGT_K, last, 1, 0), _stmt(_BPF_RET_K, action)]
    prog.append(errno(_ENOSYS))  # above the audited table: unknown
    return prog


class _Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


class SeccompFilter:
    """A BPF program packed once (in the warm server), ready for :meth:`install` in each child."""

    def __init__(self, program: list[bytes]) -> None:
        code = b"".join(program)
        self._buf = ctypes.create_string_buffer(code, len(code))
        self._fprog = _Fprog(len(program), ctypes.cast(self._buf, ctypes.c_void_p))

    def install(self) -> None:
        """``prctl(PR_SET_SECCOMP)``; needs no-new-privs (or CAP_SYS_ADMIN)."""
        _check(_libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(self._fprog), 0, 0), "prctl(SECCOMP)")
