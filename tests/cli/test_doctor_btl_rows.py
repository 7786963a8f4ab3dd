"""``pmca doctor``'s btl table and ``pmca info`` give one eager limit per btl."""

from __future__ import annotations

import re

import pmca
from pmca.cli._doctor_btl import module_rows
from tests.cli.conftest import RunCli


def test_doctor_rows_show_the_eager_limit_pmca_info_shows(cli: RunCli) -> None:
    listing = cli("info", "--param", "btl", "all", "--level", "9", "--parsable").out
    shown = dict(
        re.findall(r"^mca:btl:\w+:param:btl_(\w+)_eager_limit:value:(\d+)$", listing, re.M)
    )
    with pmca.Session(frameworks=["btl"]) as s:
        modules = s.modules("btl")
        rows = module_rows(s, modules)
        tcp = next((m for m in modules if m.name == "tcp"), None)
        rails = [] if tcp is None else [tcp, *tcp.rails]
        networks = [r for r in rails if not r.interface.loopback]
        rndv = int(s.param("btl_tcp_rndv_eager_limit").value) if tcp else 0
    table = {row.split()[0]: row for row in rows if not row.startswith(" ")}
    assert sorted(table) == sorted(m.name for m in modules)
    for name, row in table.items():
        assert f" eager {shown[name]:<7} " in row, (name, row)
    notes = [row.strip() for row in rows if row.startswith(" ")]
    # Rails on two or more links (an interface's IPv4 and IPv6 are one): tcp's are lowered.
    if len({r.interface.name for r in networks}) > 1:
        where = ", ".join(f"{r.interface.name} {r.interface.address}" for r in networks)
        assert notes == [
            f"eager {rndv} on {where}: btl_tcp_rndv_eager_limit, as there are rails on two "
            "or more network links, so that a larger message is striped over them"
        ]
    else:
        assert notes == []
