"""The message layer's queue pvars, in a world of one rank (messages to itself)."""

from __future__ import annotations

import pmca


def test_unexpected_watermark_and_posted_receives(pmca_env) -> None:
    with pmca.Session(frameworks=["btl"]) as s:
        p2p = s.p2p
        p2p.send(0, 9, b"early")  # before the pvar session: one unexpected message
        p2p.recv(0, 9, bytearray(5))
        ps = s.pvar_session()
        high = ps.handle("p2p_base_unexpected_queue")
        total = ps.handle("p2p_base_unexpected_messages")
        posted = ps.handle("p2p_base_posted_receives")
        high.start()
        for tag in (1, 2, 3, 4):
            p2p.send(0, tag, b"x" * tag)
        # Receiving the last one (in order) queues the three before it as unexpected.
        p2p.recv(0, 4, bytearray(4))
        assert total.read() == 3
        assert high.read() == 3
        pending = p2p.irecv(0, 7, bytearray(1))
        assert posted.read() == 1
        for tag in (1, 2, 3):
            p2p.recv(0, tag, bytearray(tag))
        assert high.read() == 3  # the peak stays until reset
        high.reset()
        assert high.read() == 0
        p2p.send(0, 7, b"y")
        pending.wait(timeout=30)
        assert posted.read() == 0
        assert total.readreset() == 3


def test_a_peer_handle_before_any_traffic(pmca_env) -> None:
    with pmca.Session() as s:
        s.modules("btl")  # the data path: self reaches rank 0
        sent = s.pvar_session().handle("btl_self_bytes_sent", obj=0)
        assert sent.read() == 0
        s.p2p.send(0, 1, b"x" * 100)
        s.p2p.recv(0, 1, bytearray(100))
        grown = sent.read()
        assert grown > 100  # the payload and the message layer's header
        assert sent.readreset() == grown
        assert sent.read() == 0
