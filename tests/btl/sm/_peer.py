"""A child process that drives one sm transport on command (tests only).

Commands arrive as pickled tuples on stdin; each answer is pickled to
stdout.  The parent test holds the other end of every conversation.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import pickle
import random
import sys
import threading
from typing import Any

from pmca.btl.sm._transport import Transport, TransportConfig, buffer_address, library_path


def main() -> None:
    # Native code under test runs multi-threaded, as it will in real use.
    threading.Thread(target=threading.Event().wait, daemon=True).start()
    lib = ctypes.CDLL(str(library_path()))
    commands, answers = sys.stdin.buffer, sys.stdout.buffer
    transport: Transport | None = None
    buffer = bytearray()
    while True:
        command, *args = pickle.load(commands)
        result: Any = None
        if command == "create":
            transport = Transport(lib, TransportConfig(**args[0]))
            result = transport.address
        elif command == "bind":
            assert transport is not None
            transport.bind(*args)
        elif command == "attach":
            assert transport is not None
            result = transport.attach(args[0], args[1], allow_getfd=args[2])
        elif command == "echo":
            assert transport is not None
            for _ in range(args[0]):
                source, tag, data = receive(transport)
                payload = bytes(data)
                while not transport.send(source, tag, b"", payload):
                    os.sched_yield()
            transport.release()
        elif command == "send":
            assert transport is not None
            destination, messages = args
            for tag, payload in messages:
                while not transport.send(destination, tag, b"", payload):
                    os.sched_yield()
        elif command == "buffer":
            size, seed = args
            buffer = bytearray(random.Random(seed).randbytes(size))
            address, _, _ = buffer_address(buffer)
            result = (address, hashlib.sha256(buffer).hexdigest())
        elif command == "claim_and_die":
            assert transport is not None
            transport.claim_only(args[0])
            os.kill(os.getpid(), 9)
        elif command == "digest":
            result = hashlib.sha256(buffer).hexdigest()
        elif command == "exit":
            if transport is not None:
                transport.close()
            return
        pickle.dump(result, answers)
        answers.flush()


def receive(transport: Transport) -> tuple[int, int, memoryview]:
    while True:
        message = transport.poll()
        if message is not None:
            return message
        transport.wait(10.0)


if __name__ == "__main__":
    main()
