"""A world over Unix sockets for tests that run without a launcher.

Rank 0 listens on ``path``; the other ranks connect to it.  allgather sends
each rank's bytes to rank 0, which answers everyone with the whole list.
Tests only: pmca itself never launches or wires processes.
"""

from __future__ import annotations

import socket
import struct
import time

from pmca._sockets import recv_exactly

_LENGTH = struct.Struct("<Q")


def _send(sock: socket.socket, data: bytes) -> None:
    sock.sendall(_LENGTH.pack(len(data)) + data)


def _receive(sock: socket.socket) -> bytes:
    (length,) = _LENGTH.unpack(recv_exactly(sock, _LENGTH.size, "a test world's length"))
    return recv_exactly(sock, length, "a test world's message")


class SocketWorld:
    def __init__(self, rank: int, size: int, path: str, timeout: float = 60.0) -> None:
        self.rank = rank
        self.size = size
        self.description = f"test socket world {rank}/{size}"
        self._peers: list[socket.socket] = []
        if rank == 0:
            listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            listener.bind(path)
            listener.listen(size)
            listener.settimeout(timeout)
            by_rank: dict[int, socket.socket] = {}
            while len(by_rank) < size - 1:
                conn, _ = listener.accept()
                conn.settimeout(None)
                by_rank[int(_receive(conn))] = conn
            listener.close()
            self._peers = [by_rank[r] for r in sorted(by_rank)]
        else:
            deadline = time.monotonic() + timeout
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            while True:
                try:
                    sock.connect(path)
                    break
                except (FileNotFoundError, ConnectionRefusedError):
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.01)
            _send(sock, str(rank).encode())
            self._peers = [sock]

    def allgather(self, data: bytes, *, timeout: float | None = None) -> list[bytes]:
        if self.rank == 0:
            gathered = [data] + [_receive(peer) for peer in self._peers]
            packed = b"".join(_LENGTH.pack(len(item)) + item for item in gathered)
            for peer in self._peers:
                _send(peer, packed)
            return gathered
        _send(self._peers[0], data)
        packed = _receive(self._peers[0])
        items, offset = [], 0
        while offset < len(packed):
            (length,) = _LENGTH.unpack_from(packed, offset)
            offset += _LENGTH.size
            items.append(packed[offset : offset + length])
            offset += length
        return items

    def barrier(self, *, timeout: float | None = None) -> None:
        self.allgather(b"", timeout=timeout)

    def close(self) -> None:
        for peer in self._peers:
            peer.close()
