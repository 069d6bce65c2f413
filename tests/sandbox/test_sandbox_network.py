"""Network egress: nothing a solution sends reaches a listener on the host."""

from __future__ import annotations

import os
import secrets
import socket
import tempfile

import pytest


def test_tcp_to_host_loopback_does_not_arrive(sandbox, run, listener, clean):
    tcp = listener("tcp")
    r = run(
        f"import socket\ns = socket.create_connection(('127.0.0.1', {tcp.address[1]}), timeout=1)\nprint('connected')"
    )
    assert r.stdout == b"" and tcp.hits == 0


def test_udp_to_host_loopback_does_not_arrive(sandbox, run, listener, clean):
    udp = listener("udp")
    r = run(
        f"import socket\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\ns.sendto(b'x', ('127.0.0.1', {udp.address[1]}))\nprint('sent')"
    )
    assert r.stdout == b"" and udp.hits == 0


def test_raw_socket_syscall_is_refused(sandbox, run, clean):
    src = (
        "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        "fd = libc.socket(2, 1, 0)\nprint(fd, ctypes.get_errno())"
    )
    r = run(src)
    assert r.stdout == b"-1 97\n"  # EAFNOSUPPORT from the seccomp filter


def test_abstract_unix_socket_to_host_does_not_arrive(sandbox, run, listener, clean):
    name = "\0sbx-test-" + secrets.token_hex(6)
    ab = listener("unix", name)
    r = run(f"import socket\ns = socket.socket(socket.AF_UNIX)\ns.connect({name!r})\nprint('connected')")
    assert r.stdout == b"" and ab.hits == 0


def test_unix_socket_file_on_host_is_unreachable(sandbox, run, listener, tmp_path, clean):
    path = str(tmp_path / "host.sock")
    ux = listener("unix", path)
    r = run(f"import socket\ns = socket.socket(socket.AF_UNIX)\ns.connect({path!r})\nprint('connected')")
    assert r.stdout == b"" and ux.hits == 0


def test_dns_resolution_fails(sandbox, run, clean):
    r = run(
        "import socket\ntry:\n    print(socket.getaddrinfo('example.com', 80))\nexcept OSError as e:\n    print('failed')"
    )
    assert r.stdout == b"failed\n"


def test_ipv6_loopback_is_refused(sandbox, run, clean):
    r = run(
        "import socket\ntry:\n    socket.socket(socket.AF_INET6).connect(('::1', 22))\n    print('connected')\nexcept OSError:\n    print('refused')"
    )
    assert r.stdout == b"refused\n"


@pytest.mark.skipif(not os.access("/var/tmp", os.W_OK), reason="needs a writable directory outside /tmp")
def test_a_world_writable_unix_socket_of_the_host_is_unreachable(run, clean):
    """Fails on the code before this change: Landlock does not govern connecting to a unix socket file, and
    every host path outside /tmp and /dev/shm was reachable by name, so a solution could send to any
    world-writable socket of the host (the system D-Bus, journald, /dev/log). Children now see a root holding
    only the runtime and a few system paths."""
    d = tempfile.mkdtemp(dir="/var/tmp")
    path = os.path.join(d, "host.sock")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        srv.bind(path)
        os.chmod(d, 0o755)
        os.chmod(path, 0o666)
        srv.settimeout(0.5)
        r = run(
            f"import socket\ns = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)\ntry:\n    s.sendto(b'x', {path!r})\n"
            "    print('sent')\nexcept OSError as e:\n    print(e.errno)"
        )
        try:
            got = srv.recv(16)
        except OSError:
            got = b""
        assert (r.stdout, got) == (b"2\n", b"")  # ENOENT: the path does not exist for the solution
    finally:
        srv.close()
        os.unlink(path)
        os.rmdir(d)
