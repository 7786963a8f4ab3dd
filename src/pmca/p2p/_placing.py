"""Large eager messages a btl receives in pieces: where each one lands.

A btl that streams a large active message (tcp) asks its tag's placer
(:data:`pmca.btl.Placer`) where the rest goes before reading it. An eager
message that is next in order from its source lands in the posted receive
it matches, or else in a buffer of its own that is matched once it is
complete and kept as the unexpected payload without another copy. Anything
else (early, malformed, truncated) is left to the usual path.
"""

from __future__ import annotations

from collections.abc import Callable

from ..btl import Endpoint, Placement
from . import _protocol as proto
from ._matching import Posted
from ._requests import Request

_MATCH_SIZE = proto.MATCH.size
_unpack_match = proto.MATCH.unpack_from
_pack_match = proto.MATCH.pack


class Placing:
    """The placer p2p registers with every btl that has ``register_placer``."""

    _tag: int
    _seq_in: list[int]
    _posted: Posted[Request]

    # P2p's, used here:
    _drain_stash: Callable[[int], None]
    _finish: Callable[..., None]
    _arrived: Callable[[Endpoint, int, memoryview], None]
    _in_order: Callable[..., None]

    def _place(
        self, endpoint: Endpoint, _tag: int, head: memoryview, length: int
    ) -> Placement | None:
        """Where a large eager message that is next from its source lands.

        The btl's stream carries nothing else from that source while a staged
        message fills, so matching it when complete keeps the order.
        """
        if head[0] != proto.EAGER or head.nbytes < _MATCH_SIZE:
            return None
        header = _unpack_match(head)
        _kind, _flags, seq, tag, size = header
        source = endpoint.rank
        if seq != self._seq_in[source] or _MATCH_SIZE + size != length:
            return None  # early or malformed: the usual path decides
        request = self._posted.first(source, tag)
        if request is None:
            staged = bytearray(size)

            def complete(error: BaseException | None) -> None:
                if error is None:
                    self._landed(endpoint, header, staged)

            return Placement(_MATCH_SIZE, memoryview(staged), complete)
        if size > request.view.nbytes:
            return None  # truncated: the usual path refuses it
        self._posted.remove(request)
        request.peer, request.tag = source, tag
        self._seq_in[source] = (seq + 1) & 0xFFFFFFFF
        self._drain_stash(source)

        def landed(error: BaseException | None) -> None:
            self._finish(request, 0 if error else size, error)

        return Placement(_MATCH_SIZE, request.view[:size], landed)

    def _landed(
        self, endpoint: Endpoint, header: tuple[int, int, int, int, int], staged: bytearray
    ) -> None:
        source = endpoint.rank
        if header[2] != self._seq_in[source]:  # not over one stream; keep the order anyway
            self._arrived(endpoint, self._tag, memoryview(_pack_match(*header) + staged))
            return
        self._in_order(source, header, memoryview(staged), staged)
        self._drain_stash(source)


__all__ = ["Placing"]
