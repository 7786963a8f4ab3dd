"""Counters summed over producers (p2p engines, btl modules) never go down
when a producer closes or is collected: what it counted is kept."""

from __future__ import annotations

import gc
import weakref

import pmca

#: (pvar, obj) read across the sessions below; rank 0 talks to itself over btl self.
_COUNTERS = (
    ("p2p_base_unexpected_messages", None),
    ("btl_self_messages_sent", 0),
    ("btl_self_bytes_sent", 0),
    ("btl_self_messages_received", 0),
    ("btl_self_bytes_received", 0),
)


def _unexpected(p2p: pmca.P2p, count: int) -> None:
    """``count - 1`` unexpected messages: receiving the last one (messages arrive
    in order) queues those before it."""
    for tag in range(count):
        p2p.send(0, tag, b"m" * 10)
    for tag in (count - 1, *range(count - 1)):
        p2p.recv(0, tag, bytearray(10))


def test_counters_keep_what_a_finalized_session_counted(pmca_env) -> None:
    gc.collect()  # no engine or module of an earlier test is left to collect
    with pmca.Session(frameworks=["btl"]) as s:
        p2p = s.p2p  # the data path: its pvars are registered
        ps = s.pvar_session()
        handles = [ps.handle(name, obj=obj) for name, obj in _COUNTERS]
        _unexpected(p2p, 5)
        during = [h.read() for h in handles]
        producers = [weakref.ref(p2p), *(weakref.ref(m) for m in s.modules("btl"))]
    del s
    assert during[0] == 4 and all(during), during
    finalized = [h.read() for h in handles]  # the finalize's own messages may add
    assert all(a >= b for a, b in zip(finalized, during, strict=True)), (during, finalized)
    assert ps.read_all() == finalized
    del p2p

    gc.collect()
    # The engine and the modules are gone: their counts were kept when they closed.
    assert [p() for p in producers] == [None] * len(producers)
    assert [h.read() for h in handles] == finalized
    assert ps.read_all() == finalized

    with pmca.Session(frameworks=["btl"]) as s:
        _unexpected(s.p2p, 3)
        second = [h.read() for h in handles]
        assert ps.read_all() == second
    assert second[0] == finalized[0] + 2
    assert all(a > b for a, b in zip(second[1:], finalized[1:], strict=True)), second
    closed = [h.read() for h in handles]
    del s
    gc.collect()
    assert [h.read() for h in handles] == closed


def test_a_peer_handle_made_after_its_module_went_away(pmca_env) -> None:
    from pmca.mca import PVarSession
    from pmca.mca._pvars import REGISTRY

    with pmca.Session(frameworks=["btl"]) as s:
        _unexpected(s.p2p, 2)
    sent = REGISTRY.read("btl_self_messages_sent", 0)  # the process's total, not a handle's
    gc.collect()
    # The peer still has counts, kept from a finalized module: still one of the objects.
    assert 0 in REGISTRY.objects("btl_self_messages_sent")
    assert REGISTRY.read("btl_self_messages_sent", 0) == sent >= 2
    handle = PVarSession().handle("btl_self_messages_sent", obj=0)
    assert handle.read() == 0  # a handle counts from its start
