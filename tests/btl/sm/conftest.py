"""Fixtures for the sm transport: real child processes driving real segments."""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import pickle
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

PEER = Path(__file__).with_name("_peer.py")


class Peer:
    """A child process with its own sm transport, driven by pickled commands."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(PEER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        self.pid = self.process.pid

    def call(self, *command: Any) -> Any:
        assert self.process.stdin is not None and self.process.stdout is not None
        pickle.dump(command, self.process.stdin)
        self.process.stdin.flush()
        return pickle.load(self.process.stdout)

    def start(self, *command: Any) -> None:
        """Send a command without waiting for its answer (see :meth:`answer`)."""
        assert self.process.stdin is not None
        pickle.dump(command, self.process.stdin)
        self.process.stdin.flush()

    def answer(self) -> Any:
        assert self.process.stdout is not None
        return pickle.load(self.process.stdout)

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=30)

    def stop(self) -> None:
        if self.process.poll() is None:
            # Its answer is not awaited: a peer still busy in a command a failed test
            # started (an echo of messages that never came) would never give it.
            with contextlib.suppress(BrokenPipeError):
                self.start("exit")
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                stream.close()


def current_transport_module() -> ModuleType:
    """``pmca.btl.sm._transport`` as ``sys.modules`` holds it now.

    In dso mode every session's close removes ``pmca.btl.sm`` from
    ``sys.modules`` (its module-level state does not survive a close): a
    class imported when these files were collected is then not the one
    ``pickle`` finds by name, and the commands sent to a peer cannot be
    pickled. Looked up per test, the classes always match.
    """
    return importlib.import_module("pmca.btl.sm._transport")


@pytest.fixture(scope="session")
def sm_library() -> ctypes.CDLL:
    return ctypes.CDLL(str(current_transport_module().library_path()))


@pytest.fixture
def sm_transport() -> ModuleType:
    """The transport module the test's objects and expected errors come from."""
    return current_transport_module()


@pytest.fixture
def spawn() -> Iterator[Any]:
    peers: list[Peer] = []

    def start() -> Peer:
        peer = Peer()
        peers.append(peer)
        return peer

    yield start
    for peer in peers:
        peer.stop()


@pytest.fixture
def transport(sm_library: ctypes.CDLL, sm_transport: ModuleType) -> Iterator[Any]:
    made: list[Any] = []

    def make(ident: int | None = None, slots: int = 0, **config: Any) -> Any:
        created = sm_transport.Transport(sm_library, sm_transport.TransportConfig(**config))
        if ident is not None:
            created.bind(ident, slots)
        made.append(created)
        return created

    yield make
    for created in made:
        created.close()
