"""Two "hosts" on one machine for multi-host tests: network namespaces
joined by a veth pair (10.200.x.1 and 10.200.x.2, a /30 of their own).
Tests skip with the reason where `ip netns` is missing or not allowed."""

import contextlib
import ctypes
import os
import subprocess
import sys
import uuid

import pytest

CLONE_NEWNET = 0x40000000


def _ip(*args, ns=None, check=True):
    cmd = (["ip", "netns", "exec", ns] if ns else []) + ["ip", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=20,
                          check=check)


def _reach(ns, addr):
    """Does namespace `ns` reach `addr` (a TCP connect: a refusal proves
    the route, a timeout does not)? The error text when it does not."""
    reach = subprocess.run(
        ["ip", "netns", "exec", ns, sys.executable, "-c",
         "import socket,sys\ns=socket.socket();s.settimeout(3)\n"
         f"try: s.connect(('{addr}', 9))\n"
         "except ConnectionRefusedError: sys.exit(0)\n"
         "except OSError as e: sys.exit(str(e))"],
        capture_output=True, text=True, timeout=30)
    return None if reach.returncode == 0 else reach.stdout + reach.stderr


@contextlib.contextmanager
def two_hosts():
    """Yields ([namespace a, namespace b], [address in a, address in b]);
    removes both namespaces afterwards."""
    tag = uuid.uuid4().hex[:6]
    ns = [f"ccol-a-{tag}", f"ccol-b-{tag}"]
    veth = [f"cca{tag}", f"ccb{tag}"]
    octet = 1 + int(tag[:2], 16) % 250
    addrs = [f"10.200.{octet}.1", f"10.200.{octet}.2"]
    try:
        probe = subprocess.run(["ip", "netns", "add", ns[0]],
                               capture_output=True, text=True, timeout=20)
    except FileNotFoundError:
        pytest.skip("no `ip` command: cannot make network namespaces")
    if probe.returncode != 0:
        pytest.skip("`ip netns add` is not permitted here: "
                    + probe.stderr.strip())
    try:
        _ip("netns", "add", ns[1])
        _ip("link", "add", veth[0], "type", "veth", "peer", "name", veth[1])
        for i in range(2):
            _ip("link", "set", veth[i], "netns", ns[i])
            _ip("addr", "add", f"{addrs[i]}/30", "dev", veth[i], ns=ns[i])
            _ip("link", "set", veth[i], "up", ns=ns[i])
            _ip("link", "set", "lo", "up", ns=ns[i])
        why = _reach(ns[1], addrs[0])
        if why is not None:
            pytest.fail("the namespaces do not reach each other: " + why)
        yield ns, addrs
    finally:
        for n in ns:
            subprocess.run(["ip", "netns", "del", n], capture_output=True,
                           timeout=20)


def enter(ns):
    """Moves the calling thread into network namespace `ns` (setns(2));
    sockets it opens afterwards live there."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(f"/var/run/netns/{ns}", os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"setns into {ns}: {os.strerror(err)}")
    finally:
        os.close(fd)
