"""Corrupt one field a peer wrote, then use the transport (run as a child with a timeout).

Two transports in this process play rank 0 (the receiver) and rank 1 (the
peer whose memory lies). Prints one line: what rank 0 saw.
"""

from __future__ import annotations

import ctypes
import random
import struct
import sys
import threading

from pmca.btl.sm._transport import (
    PeerFault,
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


if __name__ == "__main__":
    threading.Thread(target=threading.Event().wait, daemon=True).start()
    kind, seed = sys.argv[1], int(sys.argv[2])
    print(layout(seed) if kind == "layout" else runtime(seed), flush=True)
