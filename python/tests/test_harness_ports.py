"""The harness's test ports (conftest.free_port): below the kernel's
ephemeral range, from a block no other process holds, never one that is
listened on."""

import multiprocessing as mp
import socket

import conftest
from conftest import free_port


def _block(port):
    return (port - conftest._PORT_LOW) // conftest._PORT_BLOCK


def test_ports_lie_below_the_ephemeral_range_and_differ():
    ports = [free_port() for _ in range(20)]
    assert len(set(ports)) == 20
    low = conftest._ephemeral_low()
    assert all(conftest._PORT_LOW <= p < low for p in ports), ports
    assert len({_block(p) for p in ports}) == 1, ports


def _child_port(q):
    q.put(free_port())


def test_another_process_gets_another_block():
    mine = free_port()
    q = mp.get_context("fork").Queue()
    child = mp.get_context("fork").Process(target=_child_port, args=(q,))
    child.start()
    theirs = q.get(timeout=30)
    child.join(30)
    assert _block(theirs) != _block(mine), (mine, theirs)


def test_a_port_listened_on_is_never_handed_out():
    free_port()  # this process holds its block now
    taken = conftest._ports["base"] + \
        conftest._ports["next"] % conftest._PORT_BLOCK
    with socket.socket() as s:
        # as servers do: a connection of an earlier test that used this
        # port may still rest in TIME_WAIT
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", taken))
        s.listen()
        got = [free_port() for _ in range(conftest._PORT_BLOCK)]
    assert taken not in got
    assert len(set(got)) == conftest._PORT_BLOCK - 1  # the rest, in turn
