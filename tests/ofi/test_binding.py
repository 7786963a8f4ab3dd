"""The cffi binding: finding the wheel's libfabric, providers, the memory monitor.

Everything that touches libfabric runs in a child process: its state (the
imported monitor above all) is process-wide.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import structlog

import pmca
from pmca.btl.ofi import DEFAULTS, fit_to_provider, provider_matches
from pmca.testing import run_python

EXPECTED_PROVIDERS = {"tcp;ofi_rxm", "shm", "sockets", "udp;ofi_rxd"}


def last_json(stdout: str) -> dict[str, object]:
    return json.loads(stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_library_found_in_the_wheel_and_providers_offered(libfabric: None) -> None:
    child = run_python(
        """
        import json, os
        from pmca.btl.ofi import _fabric, _select
        fi = _fabric.load()
        print(json.dumps({
            "origin": fi.origin,
            "path": str(fi.path),
            "version": list(fi.version),
            "monitor": os.environ.get("FI_MR_CACHE_MONITOR"),
            "providers": _select.offered(fi).names,
        }))
        """
    )
    assert child.returncode == 0, child.stderr
    found = last_json(child.stdout)
    assert found["origin"] in ("openmpi", "mpich")
    assert "libfabric.so" in str(found["path"])
    assert found["version"] >= [1, 18]
    assert found["monitor"] == "disabled"  # libfabric's memhooks kept off libc
    assert set(found["providers"]) >= EXPECTED_PROVIDERS  # type: ignore[arg-type]


def test_provider_names_match_whole_or_by_layer() -> None:
    assert provider_matches("tcp;ofi_rxm", ["tcp;ofi_rxm"])
    assert provider_matches("tcp;ofi_rxm", ["tcp"])
    assert provider_matches("tcp;ofi_rxm", ["ofi_rxm"])
    assert not provider_matches("tcp;ofi_rxm", ["udp"])
    assert not provider_matches("sockets", ["sock"])


def test_ofi_is_used_only_when_asked_for(libfabric: None, pmca_env: dict[str, str]) -> None:
    with pmca.Session(frameworks=["btl"]) as session:
        assert "ofi" not in [c.name for c in session.components("btl")]


def test_include_and_exclude_together_is_an_error(
    libfabric: None, pmca_env: dict[str, str]
) -> None:
    mca = {
        "btl": "self,ofi",
        "btl_ofi_provider_include": "shm",
        "btl_ofi_provider_exclude": "tcp",
    }
    with pmca.Session(mca=mca, frameworks=["btl"]) as session:
        assert [c.name for c in session.components("btl")] == ["self"]
        failures = [f for f in session.failures("btl") if f.component == "ofi"]
    assert failures and "mutually exclusive" in failures[0].message
    assert failures[0].hook == "open"


MONITOR = """
import json, mmap
import pmca
from pmca.btl.ofi import _fabric, _monitor

fi = _fabric.load()
report = {}
with pmca.Session(frameworks=["memory"]):
    first = _monitor.MemoryMonitor(fi)
    first.import_into_libfabric()
    report["accepted"] = first.imported
    second = _monitor.MemoryMonitor(fi)
    try:
        second.import_into_libfabric()
        report["second"] = "accepted"
    except _fabric.FabricError as exc:
        report["second"] = exc.code
    first.follow(pmca.memory.register_release)
    region = mmap.mmap(-1, 37 * mmap.PAGESIZE)
    region.close()
    pmca.memory.drain()
    report["notified"] = first.calls["notify"]
    first.close()
    report["closed"] = not first.imported
    second.import_into_libfabric()
    report["after_close"] = second.imported
    second.close()
print(json.dumps(report))
"""


def test_memory_monitor_import(libfabric: None) -> None:
    """Accepted; a second import refused while the first is in; release events
    notified through libfabric's import ops; closing frees the slot."""
    child = run_python(MONITOR, timeout=60)

    assert child.returncode == 0, child.stderr
    report = last_json(child.stdout)
    assert report["accepted"] is True
    assert report["second"] == -16  # -FI_EBUSY: "imported monitor already exists"
    assert isinstance(report["notified"], int) and report["notified"] >= 1
    assert report["closed"] is True
    assert report["after_close"] is True


def test_send_sizes_follow_a_provider_message_limit() -> None:
    log = structlog.get_logger()
    limited = SimpleNamespace(ep_attr=SimpleNamespace(max_msg_size=8192))
    fitted = fit_to_provider(DEFAULTS, limited, log)
    assert (fitted.max_send_size, fitted.eager_limit, fitted.rndv_eager_limit) == (8192,) * 3
    assert fitted.put_limit == DEFAULTS.put_limit
    unlimited = SimpleNamespace(ep_attr=SimpleNamespace(max_msg_size=(1 << 64) - 1))
    assert fit_to_provider(DEFAULTS, unlimited, log) is DEFAULTS
