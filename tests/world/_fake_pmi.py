"""A small PMI-1/PMI-2 server on socket pairs, written from the wire format, for tests.

It serves a job of ``size`` processes, one socket pair each, as Hydra does:
each message's framing says its version (``cmd=`` lines are PMI-1,
a 6-character length leads PMI-2). ``versions`` says which ``init`` accepts;
``answers`` replaces the answer to a command with raw bytes (``None``: stay
silent, ``b""``: hang up). The fence answers every rank once all entered.
:meth:`stop_reading` makes it a launcher that reads nothing more (stalled).
``header`` aligns PMI-2's length ``"right"`` as MPICH's Hydra does, or
``"left"`` as Slurm's ``--mpi=pmi2`` does (``b'114   cmd=...'``).
"""

from __future__ import annotations

import selectors
import socket
import threading


class FakePmiServer:
    def __init__(
        self, size: int, *, versions=(1, 2), answers=None, lazy_fence=False, header="right"
    ) -> None:
        self.size = size
        self.header = {"right": ">", "left": "<"}[header]
        # As Hydra's PMI-2: kvs-fence answered at once, kvs-get waits for its key.
        self.lazy_fence = lazy_fence
        self._waiting: list[tuple[socket.socket, str]] = []
        self.versions = versions
        self.answers = dict(answers or {})
        self.pairs = [socket.socketpair() for _ in range(size)]
        self.log: list[tuple[int, int, str, dict[str, str]]] = []  # rank, version, cmd, fields
        self.kvs: dict[str, str] = {}
        self._fenced: list[tuple[socket.socket, int]] = []
        self._stop = threading.Event()
        self._deaf = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def client_fd(self, rank: int) -> int:
        return self.pairs[rank][1].fileno()

    def stop_reading(self) -> None:
        """From now on read nothing from any rank (what they send stays queued)."""
        self._deaf.set()

    def commands(self, rank: int | None = None) -> list[str]:
        return [cmd for r, _, cmd, _ in self.log if rank is None or r == rank]

    def close(self) -> None:
        self._stop.set()
        self._thread.join(10)
        for ours, theirs in self.pairs:
            ours.close()
            theirs.close()

    # -- the loop -----------------------------------------------------------

    def _serve(self) -> None:
        selector = selectors.DefaultSelector()
        pending = {}
        for rank, (ours, _) in enumerate(self.pairs):
            selector.register(ours, selectors.EVENT_READ, rank)
            pending[rank] = b""
        while not self._stop.is_set():
            if self._deaf.is_set():
                self._stop.wait(0.05)
                continue
            for key, _ in selector.select(0.05):
                sock, rank = key.fileobj, key.data
                try:
                    chunk = sock.recv(65536)
                except OSError:
                    chunk = b""
                if not chunk:
                    selector.unregister(sock)
                    continue
                pending[rank] += chunk
                while True:
                    message, pending[rank] = self._split(pending[rank])
                    if message is None:
                        break
                    self._handle(sock, rank, *message)
        selector.close()

    @staticmethod
    def _split(buffer: bytes):
        if buffer.startswith(b"cmd="):
            line, sep, rest = buffer.partition(b"\n")
            if not sep:
                return None, buffer
            fields = dict(token.split("=", 1) for token in line.decode().split())
            return (1, fields), rest
        if len(buffer) < 6 or len(buffer) < 6 + int(buffer[:6]):
            return None, buffer
        end = 6 + int(buffer[:6])
        tokens = [t for t in buffer[6:end].decode().split(";") if t]
        return (2, dict(token.split("=", 1) for token in tokens)), buffer[end:]

    def _send(self, sock: socket.socket, version: int, cmd: str, fields: dict[str, str]) -> None:
        if version == 1:
            text = " ".join([f"cmd={cmd}", *(f"{k}={v}" for k, v in fields.items())])
            sock.sendall(text.encode() + b"\n")
        else:
            body = f"cmd={cmd};" + "".join(f"{k}={v};" for k, v in fields.items())
            sock.sendall(f"{len(body):{self.header}6d}{body}".encode())

    def _handle(self, sock, rank: int, version: int, fields: dict[str, str]) -> None:
        cmd = fields.pop("cmd")
        self.log.append((rank, version, cmd, fields))
        if cmd in self.answers:
            answer = self.answers[cmd]
            if answer == b"":
                sock.shutdown(socket.SHUT_RDWR)
            elif answer is not None:
                sock.sendall(answer)
            return
        reply = (self._v1 if version == 1 else self._v2)(sock, rank, cmd, fields)
        if reply is not None:
            self._send(sock, version, *reply)

    def _fence(self, sock, version: int, answer: str):
        self._fenced.append((sock, version))
        if len(self._fenced) == self.size:
            fenced, self._fenced = self._fenced, []
            for each, each_version in fenced:
                self._send(each, each_version, answer, {"rc": "0"})

    def _v1(self, sock, rank, cmd, fields):
        if cmd == "init":
            wanted = int(fields["pmi_version"])
            if wanted in self.versions:
                return "response_to_init", {**fields, "rc": "0"}
            return "response_to_init", {"pmi_version": "1", "pmi_subversion": "1", "rc": "-1"}
        if cmd == "get_maxes":
            return "maxes", {"kvsname_max": "256", "keylen_max": "64", "vallen_max": "1024"}
        if cmd == "get_appnum":
            return "appnum", {"appnum": "0"}
        if cmd == "get_my_kvsname":
            return "my_kvsname", {"kvsname": "kvs_7"}
        if cmd == "put":
            self.kvs[fields["key"]] = fields["value"]
            return "put_result", {"rc": "0"}
        if cmd == "barrier_in":
            self._fence(sock, 1, "barrier_out")
            return None
        if cmd == "get":
            if fields["key"] in self.kvs:
                return "get_result", {"rc": "0", "value": self.kvs[fields["key"]]}
            return "get_result", {"rc": "-1", "msg": "key_not_found"}
        if cmd == "finalize":
            return "finalize_ack", {}
        return "error", {"rc": "-1", "msg": f"unknown_{cmd}"}

    def _v2(self, sock, rank, cmd, fields):
        if cmd == "fullinit":
            mine = {"rank": fields["pmirank"], "size": str(self.size), "appnum": "0"}
            return "fullinit-response", {**mine, "pmiverbose": "0", "rc": "0"}
        if cmd == "job-getid":
            return "job-getid-response", {"jobid": "job_7", "rc": "0"}
        if cmd == "kvs-put":
            self.kvs[fields["key"]] = fields["value"]
            waiting, self._waiting = self._waiting, []
            for each, key in waiting:
                if key in self.kvs:
                    self._send(
                        each, 2, "kvs-get-response", {"found": "TRUE", "value": self.kvs[key]}
                    )
                else:
                    self._waiting.append((each, key))
            return "kvs-put-response", {"rc": "0"}
        if cmd == "kvs-fence":
            if self.lazy_fence:
                return "kvs-fence-response", {"rc": "0"}
            self._fence(sock, 2, "kvs-fence-response")
            return None
        if cmd == "kvs-get":
            if self.lazy_fence and fields["key"] not in self.kvs:
                self._waiting.append((sock, fields["key"]))
                return None
            found = fields["key"] in self.kvs
            value = self.kvs.get(fields["key"], "")
            return "kvs-get-response", {"found": "TRUE" if found else "FALSE", "value": value}
        if cmd == "info-getjobattr":
            attributes = {
                "PMI_process_mapping": f"(vector,(0,1,{self.size}))",
                "universeSize": str(self.size),
            }
            value = attributes.get(fields["key"])
            if value is None:
                return "info-getjobattr-response", {"found": "FALSE", "rc": "0"}
            return "info-getjobattr-response", {"found": "TRUE", "value": value, "rc": "0"}
        if cmd == "finalize":
            return "finalize-response", {"rc": "0"}
        return f"{cmd}-response", {"rc": "-1", "errmsg": f"unknown {cmd}"}
