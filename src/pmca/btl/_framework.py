"""Declaration of the btl framework (multi, API 1.0.0).

A built-in component is one :class:`ComponentRef` line here; a third
party's is an entry point in group ``pmca.btl``.
"""

from __future__ import annotations

from ..mca._framework import Alias, ComponentRef, Framework
from ._limits import API_VERSION

FRAMEWORK = Framework(
    name="btl",
    description="byte transfer layer: moves bytes between processes",
    api_version=API_VERSION,
    policy="multi",
    static_components=[
        ComponentRef("self", "pmca.btl.self:SelfComponent"),
        ComponentRef("sm", "pmca.btl.sm:SmComponent"),
        ComponentRef("tcp", "pmca.btl.tcp:TcpComponent"),
        ComponentRef("ofi", "pmca.btl.ofi:OfiComponent"),
    ],
    aliases={"vader": Alias("sm", deprecated=True)},
    # Imported at the first open: sessions without a btl skip socket and the modex.
    base="pmca.btl.base:BtlBase",
)
