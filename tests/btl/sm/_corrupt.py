"""Corrupt one field a peer wrote, then use the transport (run as a child with a timeout).

Two transports in this process play rank 0 (the receiver) and rank 1 (the
peer whose memory lies). Prints one line: what rank 0 saw.
"""

from __future__ import annotations

import ctypes
import os
import random
import struct
import sys
import threading

from pmca.btl.sm._transport import (
    PeerFault,
    SegmentAddress,
    Transport,
    TransportConfig,
    TransportError,
    library_path,
)

#: struct sm_header: offsets of the layout fields a peer declares.
FIELDS = {
    "fifo_capacity": (28, "<I"),
    "fifo_offset": (32, "<Q"),
    "pool0_offset": (40, "<Q"),
    "pool0_stride": (48, "<I"),
    "pool0_count": (52, "<I"),
    "pool1_offset": (56, "<Q"),
    "pool1_stride": (64, "<I"),
    "pool1_count": (68, "<I"),
}
#: Values no sound segment of this size holds in these fields.
BAD = [0, 1, 3, 63, (1 << 32) - 1, (1 << 63) + 4096, (1 << 64) - 64]
FIFO = 4096  # where rank 0's FIFO starts (its own layout)
ENQUEUE = 128  # struct sm_header's enqueue_position (producers' position)


def _pair() -> tuple[Transport, Transport]:
    lib = ctypes.CDLL(str(library_path()))
    config = TransportConfig(fifo_capacity=64, eager_count=8, max_count=2)
    here, peer = Transport(lib, config), Transport(lib, config)
    here.bind(0, 2)
    peer.bind(1, 2)
    return here, peer


def layout(seed: int) -> str:
    """A layout field of rank 1 corrupted before rank 0 attaches."""
    rng = random.Random(seed)
    here, peer = _pair()
    name = rng.choice(sorted(FIELDS))
    offset, form = FIELDS[name]
    bits = struct.calcsize(form) * 8
    value = rng.choice([v for v in BAD if v < 1 << bits])
    if name.endswith("_count") and value == 1:
        value = (1 << 32) - 1
    view = peer.segment(1)
    assert view is not None
    struct.pack_into(form, view, offset, value)
    try:
        here.attach(1, peer.address)
    except TransportError as exc:
        return f"refused {name}={value}: {exc}"
    return f"accepted {name}={value}"


def runtime(seed: int) -> str:
    """A fragment or FIFO entry of rank 1 corrupted after attach; then a sound message."""
    rng = random.Random(seed)
    here, peer = _pair()
    here.attach(1, peer.address)
    peer.attach(0, here.address)
    what = rng.choice(["length", "tag", "entry"])
    assert peer.send(0, 5, b"", b"spoiled")
    frag = struct.unpack_from("<Q", peer.segment(1), 40)[0]  # rank 1's first eager fragment
    mine = here.segment(0)
    assert mine is not None
    if what == "length":
        struct.pack_into("<Q", peer.segment(1), frag + 16, rng.choice([1 << 20, (1 << 64) - 1]))
    elif what == "tag":
        struct.pack_into("<I", peer.segment(1), frag + 8, rng.choice([0x200, (1 << 32) - 1]))
    else:  # rank 1's entry in our FIFO names an offset that is no fragment of it
        struct.pack_into("<Q", mine, FIFO + 8, (2 << 40) | (frag + rng.randrange(1, 64)))
    seen = []
    try:
        here.poll()
    except PeerFault as exc:
        seen.append(f"fault of peer {exc.peer}: {exc}")
    assert peer.send(0, 6, b"", b"sound")
    message = here.poll()
    assert message is not None
    seen.append(f"then {message[0]} {message[1]} {bytes(message[2])!r}")
    return f"{what}: " + "; ".join(seen)


def claim(seed: int) -> str:
    """Rank 0's FIFO overwritten while nobody reads it; then rank 1 sends to it."""
    rng = random.Random(seed)
    here, peer = _pair()
    here.attach(1, peer.address)
    peer.attach(0, here.address)
    for _ in range(3):  # positions away from 0
        assert peer.send(0, 5, b"", b"sound")
        assert here.poll() is not None
    here.release()
    mine = here.segment(0)
    assert mine is not None
    what = rng.choice(["every cell ahead", "position behind", "position ahead"])
    position = struct.unpack_from("<Q", mine, ENQUEUE)[0]
    if what == "every cell ahead":
        for cell in range(64):
            at = FIFO + 16 * cell
            struct.pack_into("<Q", mine, at, struct.unpack_from("<Q", mine, at)[0] + (1 << 40))
    else:
        moved = -rng.randint(1, 3) if what == "position behind" else rng.randint(100, 1 << 40)
        struct.pack_into("<Q", mine, ENQUEUE, position + moved)
    try:
        sent = peer.send(0, 6, b"", b"into a broken FIFO")
    except PeerFault as exc:
        return f"{what}: fault of peer {exc.peer}: {exc}"
    return f"{what}: sent={sent}"


def unsealed(seed: int) -> str:
    """Rank 1's segment copied into a memfd that may shrink, published as rank 1's."""
    here, peer = _pair()
    view = peer.segment(1)
    assert view is not None
    copy = os.memfd_create("not-sealed")
    os.write(copy, bytes(view))
    real = peer.address
    try:
        here.attach(1, SegmentAddress(real.pid, copy, real.wake_fd, real.size, real.base))
    except TransportError as exc:
        return f"refused: {exc}"
    return "accepted"


KINDS = {"layout": layout, "runtime": runtime, "claim": claim, "unsealed": unsealed}

if __name__ == "__main__":
    threading.Thread(target=threading.Event().wait, daemon=True).start()
    kind, seed = sys.argv[1], int(sys.argv[2])
    print(KINDS[kind](seed), flush=True)
