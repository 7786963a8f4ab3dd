"""When a session's btl data path is built: at init, or at first use in a world of one rank.

A world of several ranks exchanges addresses at init (one allgather; every
rank waits for the others there). A world of one rank exchanges nothing
with anybody, so its modex, bml and p2p are built only when the session
first needs them (``s.p2p``, ``s.reach()``): a session that never sends a
message never imports the message layer. The active-message tag is taken at
init either way, so sessions take tags in creation order whatever each one
does afterwards (a later session with a real world gets the same tag on
every rank).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..btl import TAG_P2P_FIRST, TAG_P2P_LAST, BtlError

if TYPE_CHECKING:
    from ..mca._open import OpenFramework
    from ..p2p._attach import DataPath
    from ..world import World

__all__ = ["DataPathSlot"]

_tags_in_use: set[int] = set()


def _take_tag() -> int:
    for tag in range(TAG_P2P_FIRST, TAG_P2P_LAST + 1):
        if tag not in _tags_in_use:
            _tags_in_use.add(tag)
            return tag
    raise BtlError(
        f"more than {TAG_P2P_LAST - TAG_P2P_FIRST + 1} sessions with a world are alive at once"
    )


class DataPathSlot:
    """One session's data path: its tag from init on, the path itself when built.

    :meth:`get` builds it on first call (the caller holds the runtime lock);
    a build that fails raises, and every later :meth:`get` raises that same
    error again (the session stays usable for everything else, and its
    finalize closes the modules the failed build touched). An interrupt
    during the build is not remembered: the next call tries again.
    :meth:`close` releases whatever was built, and the tag.
    """

    def __init__(self, btl: OpenFramework, world: World, timeout: float) -> None:
        self._btl = btl
        self.world = world
        self._timeout = timeout
        self.tag = _take_tag()
        self._path: DataPath | None = None
        self._failure: BaseException | None = None

    @property
    def built(self) -> DataPath | None:
        """The data path if it is built (no lock, no build)."""
        return self._path

    def get(self) -> DataPath:
        if self._path is None:
            if self._failure is not None:
                raise self._failure
            from ..p2p._attach import attach

            try:
                self._btl.settle()
                self._path = attach(self._btl, self.world, self._timeout, self.tag)
            except Exception as exc:
                self._failure = exc
                raise
        return self._path

    def close(
        self, timeout: float, *, after_error: bool = False, finalize_timeout: float | None = None
    ) -> None:
        path, self._path = self._path, None
        self._failure = BtlError("this session's data path is closed")
        try:
            if path is not None:
                path.close(timeout, after_error=after_error, finalize_timeout=finalize_timeout)
        finally:
            _tags_in_use.discard(self.tag)
