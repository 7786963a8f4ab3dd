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
        assert ps.read_all() == [3, 3, 1]  # one walk of the queues for both lengths
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


def _traffic(p2p, rounds: int) -> None:
    for tag in range(rounds):
        p2p.send(0, tag, b"m")  # arrives before its receive: searched in the posted queue
        p2p.recv(0, tag, bytearray(1))  # taken from the unexpected queue


def test_matching_time_is_measured_only_while_a_handle_is_started(pmca_env) -> None:
    from pmca.p2p._pvars import MATCHING_TIMER

    with pmca.Session(frameworks=["btl"]) as s:
        p2p = s.p2p
        ps = s.pvar_session()
        timer = ps.handle("p2p_base_matching_time")
        _traffic(p2p, 50)
        # Never started: the matching path did not read the clock at all.
        assert p2p.matching_ns == 0 and timer.read() == 0
        timer.start()
        assert MATCHING_TIMER.on
        _traffic(p2p, 50)
        timer.stop()
        measured = timer.read()
        assert 0 < measured < 60  # seconds: 100 searches took some time, not a minute
        assert p2p.matching_ns > 0
        engine_ns = p2p.matching_ns
        _traffic(p2p, 50)
        # Stopped: neither the handle nor the engine counts any more.
        assert timer.read() == measured and p2p.matching_ns == engine_ns
        assert not MATCHING_TIMER.on
        other = s.pvar_session()
        late = other.handle("p2p_base_matching_time")
        late.start()
        _traffic(p2p, 10)
        assert late.read() > 0 and timer.read() == measured  # sessions stay independent
        other.free()  # freeing a started handle stops the measuring
        assert not MATCHING_TIMER.on
