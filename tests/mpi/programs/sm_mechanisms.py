"""btl/sm with one single-copy mechanism: large messages around a ring, checksummed."""

from _common import arguments, digest, payload, report, session

SIZES = [0, 1, 4096, 4097, 32769, 1 << 20, (16 << 20) + 5]

args = arguments([("--mechanism", {"required": True})])
with session(args.btl, btl_sm_single_copy_mechanism=args.mechanism) as s:
    p = s.p2p
    me, size = p.rank, p.size
    right, left = (me + 1) % size, (me - 1) % size
    sm = next(module for module in s.modules("btl") if module.name == "sm")
    assert sm.mechanism == args.mechanism, (sm.mechanism, args.mechanism)
    assert s.reach(right)[0] == "sm", s.reach(right)
    for index, n in enumerate(SIZES):
        out = bytearray(n)
        request = p.irecv(left, index, out)
        p.send(right, index, payload(me, n, size=n))
        assert request.wait(timeout=120) == n
        assert digest(out) == digest(payload(left, n, size=n)), f"{n} bytes corrupted"
report(True, f"sm {args.mechanism} sizes 0..16MiB")
