"""btl/sm's switch points, between two real processes: the largest eager message and
the first rendezvous, and the largest rendezvous a blocking ``send`` sends through
its lane (the header and the FIN wait natively) before the general way takes over.

Every buffer kind a blocking ``recv`` takes, from every kind of source buffer,
lands byte for byte at each of those sizes. A rendezvous whose FIN the sender's
lane took is counted in the sender's ``btl_sm_lane_messages_received``; the
general way's FIN is not (its header goes out by the lane's native call either way).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pmca.btl.sm import DEFAULTS
from pmca.p2p import _protocol as proto
from pmca.p2p._blocking import _LANE_RENDEZVOUS_MAX

from ._pairs import HAS_SM, pair
from .test_tcp_bulk_native import _KINDS

pytestmark = pytest.mark.skipif(not HAS_SM, reason="btl/sm is not built here")

_EAGER_MOST = DEFAULTS.eager_limit - proto.MATCH.size
#: size -> whether a blocking send of it waits for its FIN through the lane (None: not
#: judged; the first rendezvous' lane waits one spin only, which a loaded machine misses).
_SIZES: dict[int, bool | None] = {
    _EAGER_MOST: False,  # the largest eager message: no FIN
    _EAGER_MOST + 1: None,  # the first rendezvous
    1 << 20: True,
    _LANE_RENDEZVOUS_MAX - 1: True,  # the largest rendezvous through the lane
    _LANE_RENDEZVOUS_MAX: False,  # the general way from here on
}

_BODY = (
    _KINDS
    + """
MCA["btl_sm_single_copy_mechanism"] = "cma"
ATTEMPTS = 20  # a loaded machine may make a FIN miss the lane's patience: try again
with pmca.Session(mca=MCA, world=WORLD) as s:
    p, peer = s.p2p, 1 - RANK
    # what is judged is which way a FIN comes, not how soon: a loaded machine gets
    # the lane's patience (one lane spin per 64 KiB) stretched to 50 ms a spin
    p._set_lane_spin(0.05)
    lane_received = s.pvar_session().handle("btl_sm_lane_messages_received", obj=peer)
    cases = [(size, kind, SOURCES[n % len(SOURCES)])
             for n, (size, kind) in enumerate((s, k) for s in SIZES for k in RECEIVERS)]
    wrong, through_lane = [], {}
    for n, (size, kind, sent_as) in enumerate(cases):
        data = pattern(size, n)
        again = True
        while again:
            if RANK == 0:
                sent = source(sent_as, data)
                p.recv(1, n, bytearray(2), timeout=60)  # the receiver is about to wait
                before = lane_received.read()
                p.send(1, n, sent, timeout=60)
                fins = through_lane.setdefault(str(size), [])
                fins.append(lane_received.read() - before)
                again = fins[-1] == 0 and len(fins) < ATTEMPTS
                p.send(1, n, bytes([again]), timeout=60)
                continue
            into = receiver(kind, size)
            p.send(0, n, b"go", timeout=60)
            got = p.recv(0, n, into, timeout=60)
            if got != size or bytes(into) != data:
                wrong.append([size, kind, sent_as, got])
            flag = bytearray(1)
            p.recv(0, n, flag, timeout=60)
            again = flag[0] == 1
    out(wrong=wrong, cases=len(cases), through_lane=through_lane)
"""
)


def test_sizes_around_sm_switch_points_land_and_take_the_expected_path(tmp_path: Path) -> None:
    sizes = ",".join(str(size) for size in _SIZES)
    results = pair(tmp_path, _BODY, "self,sm", sizes, "0")
    for result in results:
        assert result["returncode"] == 0, result["stderr"]
    sender, receiver = results
    assert receiver["cases"] >= 3 * len(_SIZES)
    assert receiver["wrong"] == []
    for size, lane in _SIZES.items():
        fins = sender["through_lane"][str(size)]
        if lane is None:
            continue
        # a FIN slower than the lane's patience (a loaded machine) is a request's: one of
        # the attempts of a size through the lane shows that it went there
        assert (max(fins) == 1) if lane else (set(fins) == {0}), (size, sender["through_lane"])
