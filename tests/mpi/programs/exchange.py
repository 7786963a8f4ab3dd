"""Every size from 0 B to 64 MiB around a ring, as bytes, bytearray, memoryview and numpy."""

import numpy as np
from _common import arguments, digest, payload, report, session

SIZES = [0, 1, 7, 8, 4095, 4096, 65_000, 65_512, 65_536, 65_537, 1 << 20, (4 << 20) + 3, 64 << 20]

args = arguments([("--expect", {"required": True})])
with session(args.btl) as s:
    p = s.p2p
    me, size = p.rank, p.size
    right, left = (me + 1) % size, (me - 1) % size
    expected = args.expect.split(",")
    assert s.reach(me)[0] == "self", s.reach(me)
    if size > 1:
        assert s.reach(right)[0] == expected[0], (s.reach(right), expected)
        assert all(name in expected for name in s.reach(right)), s.reach(right)
    for index, n in enumerate(SIZES):
        data = payload(me, n, size=n)
        out = bytearray(n)
        request = p.irecv(left, index, out)
        p.send(right, index, data)
        assert request.wait(timeout=120) == n
        assert digest(out) == digest(payload(left, n, size=n)), (
            f"{n} bytes from rank {left} corrupted"
        )
    # numpy arrays of several dtypes, both directions of the ring
    for dtype in ("float64", "int32", "complex128", "uint8"):
        array = np.arange(300_000, dtype=dtype) * (me + 1)
        out = np.empty_like(array)
        request = p.irecv(left, 99, out)
        p.send(right, 99, array)
        request.wait(timeout=60)
        assert np.array_equal(out, np.arange(300_000, dtype=dtype) * (left + 1)), dtype
    # memoryview slices and bytearrays as sources
    source = bytearray(payload("mv", me, size=200_000))
    out = bytearray(100_000)
    request = p.irecv(left, 5, memoryview(out))
    p.send(right, 5, memoryview(source)[50_000:150_000])
    request.wait(timeout=60)
    assert out == payload("mv", left, size=200_000)[50_000:150_000]
    # messages to oneself
    out = bytearray(100_000)
    request = p.irecv(me, 6, out)
    p.send(me, 6, source[:100_000])
    request.wait(timeout=60)
    assert out == source[:100_000]
report(True, f"{args.btl} sizes 0..64MiB")
