"""PMI-1 over PMI_FD when the launcher's side misbehaves: clear errors, never a hang.

The launcher's side is a socket this test holds; the client is the real one.
"""

from __future__ import annotations

import os
import socket
import time

import pytest

import pmca


@pytest.fixture
def pmi_env(monkeypatch):
    ours, theirs = socket.socketpair()
    monkeypatch.setenv("PMI_FD", str(theirs.fileno()))
    monkeypatch.setenv("PMI_RANK", "0")
    monkeypatch.setenv("PMI_SIZE", "2")
    yield ours
    ours.close()
    theirs.close()


def test_closed_descriptor_is_named(monkeypatch):
    read_fd, write_fd = os.pipe()
    os.close(read_fd)
    os.close(write_fd)
    monkeypatch.setenv("PMI_FD", str(read_fd))
    monkeypatch.setenv("PMI_RANK", "0")
    monkeypatch.setenv("PMI_SIZE", "2")
    with pytest.raises(pmca.world.LauncherError, match=rf"PMI: PMI_FD={read_fd} is not an open"):
        pmca.world.from_pmi(timeout=5)


def test_launcher_that_hangs_up(pmi_env):
    pmi_env.shutdown(socket.SHUT_RDWR)
    with pytest.raises(pmca.world.LauncherError, match=r"PMI: .*'init'"):
        pmca.world.from_pmi(timeout=5)


def test_garbage_answer(pmi_env):
    pmi_env.sendall(b"HTTP/1.1 400 Bad Request\n")
    with pytest.raises(pmca.world.LauncherError, match=r"PMI: .*'init'.*not PMI"):
        pmca.world.from_pmi(timeout=5)


def test_silent_launcher_times_out(pmi_env):
    start = time.monotonic()
    with pytest.raises(pmca.world.WorldTimeout, match=r"PMI: no answer to 'init'.*1 s"):
        pmca.world.from_pmi(timeout=1)
    assert time.monotonic() - start < 30  # bounded, not a hang (the bound itself is 1 s)


def test_refused_command_names_rc(pmi_env):
    pmi_env.sendall(b"cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=-1 msg=refused\n")
    with pytest.raises(pmca.world.LauncherError, match="'init' failed with rc=-1 refused"):
        pmca.world.from_pmi(timeout=5)


@pytest.mark.parametrize(
    ("mapping", "size", "nodes"),
    [
        ("(vector,(0,1,4))", 4, [0, 0, 0, 0]),
        ("(vector,(0,2,2))", 4, [0, 0, 1, 1]),
        ("(vector,(0,2,1))", 5, [0, 1, 0, 1, 0]),  # cyclic: the description starts over
        ("(vector,(0,1,2),(1,1,1))", 3, [0, 0, 1]),
        ("(vector,(0,0,0))", 2, None),
        ("garbage", 2, None),
    ],
)
def test_process_mapping(mapping, size, nodes):
    from pmca.world._pmi import node_of_ranks

    assert node_of_ranks(mapping, size) == nodes
