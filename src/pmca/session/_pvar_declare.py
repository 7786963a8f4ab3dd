"""Declare the pvars ``pmca info --pvars`` lists, for a handle asked for before their producer.

Most pvars are declared where their producer lives: the message layer's when
it is first imported, a btl's when its component registers its parameters.
A tool that asks for ``p2p_base_unexpected_queue`` before the first message,
or for ``btl_tcp_bytes_sent`` in a session without the btl framework open,
would be told that no such pvar exists while ``pmca info --pvars`` lists it.
So a name not declared yet is declared as ``pmca info`` declares it: the
message layer's module is imported, or the framework's components are
registered (and unloaded again, none opened) if the framework is not open.
"""

from __future__ import annotations

from ..runtime import RUNTIME, inventory

__all__ = ["declare_listed"]


def declare_listed(name: str) -> None:
    """Declare the pvars of ``name``'s framework that ``pmca info --pvars`` would list.

    Called with the runtime usable (a live session); does nothing for a
    framework that is open (its components are registered already) or not
    installed.
    """
    framework = name.partition("_")[0]
    if framework == "p2p":
        from ..p2p import _pvars  # noqa: F401  (declared at import)

        return
    with RUNTIME.lock:
        if framework in RUNTIME.frameworks or framework not in RUNTIME.catalog.frameworks:
            return
        with inventory([framework]):
            pass
