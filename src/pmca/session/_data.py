"""When a session's btl data path is built: at init, or at first use in a world of one rank.

A world of several ranks exchanges addresses at init (one allgather; every
rank waits for the others there). A world of one rank exchanges nothing
with anybody, so its modex and bml are built only when the session first
needs them (``s.modules("btl")``, ``s.reach()``), and p2p only at the first
``s.p2p``: a session that never sends a message never imports the message
layer. The active-message tag is taken at
init either way, so sessions take tags in creation order whatever each one
does afterwards (a later session with a real world gets the same tag on
every rank).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..btl import TAG_P2P_FIRST, TAG_P2P_LAST, BtlError

if TYPE_CHECKING:
    from ..btl.bml import Bml
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
    """One session's data path: its tag from init on, its parts when built.

    :meth:`connect` connects the btl modules to the world's ranks (the modex
    and the bml) on first call; :meth:`get` builds the message layer on
    them too. A world of several ranks does both at init; a world of one
    rank connects when the session first asks for its btl modules, and
    imports and builds the message layer only when it first asks for
    ``p2p``: nobody else can send to it, so nothing is missed meanwhile.
    The caller holds the runtime lock. A build that fails raises, and every
    later call raises that same error again (the session stays usable for
    everything else, and its finalize closes the modules the failed build
    touched). An interrupt during the build is not remembered: the next
    call tries again. :meth:`close` releases whatever was built, and the tag.
    """

    def __init__(self, btl: OpenFramework, world: World, timeout: float) -> None:
        self._btl = btl
        self.world = world
        self._timeout = timeout
        self.tag = _take_tag()
        self._bml: Bml | None = None
        self._path: DataPath | None = None
        self._failure: BaseException | None = None

    @property
    def built(self) -> DataPath | None:
        """The data path if it is built (no lock, no build)."""
        return self._path

    @property
    def connected(self) -> Bml | None:
        """The connected btl modules if they are (no lock, no build)."""
        return self._bml

    def connect(self) -> Bml:
        if self._bml is None:
            if self._failure is not None:
                raise self._failure
            from ..btl.base import BtlBase
            from ..btl.bml import connect

            try:
                self._btl.settle()
                base = self._btl.base
                modules = base.modules() if isinstance(base, BtlBase) else []
                log = self._btl.log.bind(component="bml")
                self._bml = connect(self.world, modules, log, self._timeout)
            except Exception as exc:
                self._failure = exc
                raise
        return self._bml

    def get(self) -> DataPath:
        if self._path is None:
            bml = self.connect()
            from ..p2p._attach import attach

            try:
                self._path = attach(self._btl, bml, self.tag)
            except Exception as exc:
                self._failure = exc
                raise
            finally:
                if self._path is None:  # an interrupt too: the next call connects anew
                    self._bml = None  # closed by attach
        return self._path

    def close(
        self, timeout: float, *, after_error: bool = False, finalize_timeout: float | None = None
    ) -> None:
        path, self._path = self._path, None
        bml, self._bml = self._bml, None
        self._failure = BtlError("this session's data path is closed")
        try:
            if path is not None:
                path.close(timeout, after_error=after_error, finalize_timeout=finalize_timeout)
            elif bml is not None:
                bml.close()
        finally:
            _tags_in_use.discard(self.tag)
