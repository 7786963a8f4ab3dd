"""pmca's own components over btl/ofi: sessions_init_twice, 100 cycles, both modes.

Every cycle is a full session lifetime in one process: libfabric's fabric,
domain, endpoint and memory-monitor import opened and closed, data moved
with fi_write/fi_read through a registration, a munmap caught by the memory
hooks the ofi selection activated.
"""

from __future__ import annotations

import pytest

from pmca.scenarios._13021_child import parse
from pmca.scenarios.ompi_13021 import Variant
from pmca.testing import run_python


@pytest.mark.parametrize("mode", ["static", "dso"])
def test_hundred_sessions_move_data_and_catch_releases(libfabric: None, mode: str) -> None:
    code = "from pmca.scenarios._13021_child import main\nmain(100, 'ofi')\n"
    child = run_python(code, timeout=300, env=Variant("patcher", mode).env)  # type: ignore[arg-type]

    assert child.returncode == 0, child.stderr[-3000:]
    records = parse(child.stdout)
    rounds = {r["round"]: r for r in records if r["event"] == "round"}
    assert sorted(rounds) == list(range(1, 101))
    for number, record in rounds.items():
        assert record["btl"] == ["self", "ofi"], number
        assert record["hooked_at_selection"], number  # activated by ofi's registration needs
        assert record["moved"], number
        assert record["delivered"], number
        assert record["patcher"] == [["overwrite", mode]], number
    assert records[-1] == {"event": "end", "prologues_restored": True, "changed": []}
