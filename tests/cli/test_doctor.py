"""``pmca doctor``: the report a new user runs first."""

from __future__ import annotations

import json
import re
from collections.abc import Callable

import pytest

from pmca.cli import _doctor
from tests.cli.conftest import Result

SECTIONS = [
    "== Environment ==",
    "== Frameworks and components ==",
    "== Native hook coverage ==",
    "== Native hook coverage with UCX loaded (inside an MPI job) ==",
    "== Patches restored byte-exact ==",
    "== Seed scenarios ==",
    "== Byte transfer layer ==",
]


def native_or_skip() -> None:
    import pmca

    reason = pmca.native.unavailable_reason()
    if reason is not None:
        pytest.skip(f"native hook backend unavailable: {reason}")


def test_quick_report_has_every_section_and_holds(run_pmca: Callable[..., Result]) -> None:
    native_or_skip()
    result = run_pmca("doctor", "--quick")
    assert result.code == 0, result.out + result.err
    positions = [result.out.index(title) for title in SECTIONS]
    assert positions == sorted(positions), "sections out of order"
    assert result.lines[-1].startswith("verdict: OK")
    # What each section is there to show.
    assert re.search(r"ok\s+default session\s+selects .*memory=patcher", result.out)
    assert re.search(r"ok\s+release paths\s+\d+ of \d+ caught", result.out)
    assert re.search(r"documented misses\s+.*dlclose", result.out)
    assert re.search(r"(ok|warn)\s+event delivery\s+ring of \d+ events: \d+ published", result.out)
    assert re.search(r"ok\s+prologues\s+6 functions x 4 sessions", result.out)
    for scenario, variant, outcome in [
        (
            "madvise-deadlock",
            "model of Open MPI 5 hooks + libfabric 2.5.1 MR cache, mimalloc",
            "skipped",
        ),  # --quick
        ("madvise-deadlock", "the same model cache, pmca's hooks as its monitor", "prevented"),
        ("activation", "leave_pinned x pipeline", "prevented"),
        ("activation", "release-path self-test", "prevented"),
        ("stale-registration", "memory=none, leave_pinned, io_uring", "reproduced"),
        ("stale-registration", "pmca hooks, grdma + io_uring", "prevented"),
        ("ompi-13021", "all variants", "skipped"),  # --quick
    ]:
        assert re.search(rf"{scenario}\s+{re.escape(variant)}.*\s{outcome}\s", result.out), (
            scenario,
            variant,
        )


def test_json_report(run_pmca: Callable[..., Result]) -> None:
    native_or_skip()
    result = run_pmca("doctor", "--quick", "--json")
    assert result.code == 0, result.err
    report = json.loads(result.out)
    assert report["ok"] is True
    assert report["verdict"].startswith("verdict: OK")
    titles = [section["title"] for section in report["sections"]]
    # Third-party components installed here get a section of their own, after these.
    judged = [f"== {s['title']} ==" for s in report["sections"] if s["judged"]]
    assert judged == SECTIONS, titles
    assert titles[: len(SECTIONS)] == [title.strip("= ") for title in SECTIONS]
    coverage = next(s for s in report["sections"] if s["title"] == "Native hook coverage")
    assert coverage["data"]["paths"]["munmap"]["caught"] is True
    scenarios = next(s for s in report["sections"] if s["title"] == "Seed scenarios")
    outcomes = {(r["scenario"], r["outcome"]) for r in scenarios["data"]["results"]}
    assert ("stale-registration", "reproduced") in outcomes
    assert ("stale-registration", "prevented") in outcomes


def test_user_settings_reach_the_session_but_not_the_scenarios(
    run_pmca: Callable[..., Result],
) -> None:
    native_or_skip()
    result = run_pmca("doctor", "--quick", env={"PMCA_MCA_memory_patcher_disable": "1"})
    assert result.code == 0, result.out + result.err
    assert re.search(r"default session\s+selects .*memory=none", result.out)
    assert re.search(r"stale-registration\s+pmca hooks.*\sprevented\s", result.out)


def test_a_broken_configuration_is_a_failing_check(pmca_env: dict[str, str]) -> None:
    pmca_env["PMCA_MCA_memory"] = "nosuchcomponent"
    section = _doctor.components_section()
    failing = [check for check in section.checks if check.status == "fail"]
    assert [check.name for check in failing] == ["discovery", "default session"]
    assert all("nosuchcomponent" in check.detail for check in failing)
    ok, verdict = _doctor._verdict([section])
    assert not ok
    assert verdict.startswith("verdict: PROBLEMS - 2 failing check(s)")
    assert "Frameworks and components: default session" in verdict


THIRD_PARTY_MEMORY = """
import pmca
from pmca.memory.none import NoHooks

class GreedyMemory(pmca.Component):
    framework = "memory"
    name = "greedy"
    version = "9.9.9"
    api_version = "1.0.0"

    @pmca.hookimpl
    def query(self, ctx):
        return pmca.Query(priority=1000, module=NoHooks())  # wins, and catches nothing
"""


def test_a_third_party_memory_component_is_reported_not_failed(
    run_pmca: Callable[..., Result], tmp_path
) -> None:
    """Doctor judges pmca: its checks select pmca's own components explicitly."""
    from pmca.testing._distributions import make_distribution

    native_or_skip()
    site = tmp_path / "site"
    make_distribution(
        site,
        "pmca-greedy-memory",
        entry_points={"pmca.memory": {"greedy": "greedy_memory:GreedyMemory"}},
        modules={"greedy_memory": THIRD_PARTY_MEMORY},
    )
    result = run_pmca("doctor", "--quick", path=(site,))
    assert result.code == 0, result.out + result.err
    assert result.lines[-1].startswith("verdict: OK")
    assert re.search(r"ok\s+default session\s+selects .*memory=greedy", result.out)
    assert re.search(
        r"memory \(third party\)\s+a default session selects greedy from entry point "
        r"pmca.memory:greedy = greedy_memory:GreedyMemory "
        r"\(distribution pmca-greedy-memory 0.1.0\)",
        result.out,
    )
    assert re.search(r"ok\s+prologues\s+6 functions x 4 sessions", result.out)
    assert re.search(r"stale-registration\s+pmca hooks.*\sprevented\s", result.out)


THIRD_PARTY_BTL = """
import pmca
from pmca.btl.self import DEFAULTS
from pmca.btl.self._module import SelfModule


class MyselfModule(SelfModule):
    \"\"\"btl/self under another name, broken: it reaches no process, not even its own.\"\"\"

    def __init__(self, limits, log):
        super().__init__(limits, log)
        self.name = "myself"

    def add_procs(self, procs):
        super().add_procs(procs)
        return [None for _ in procs]


class MyselfComponent(pmca.Component):
    framework = "btl"
    name = "myself"
    version = "2.3.4"
    api_version = "1.0.0"

    @pmca.hookimpl
    def query(self, ctx):
        return pmca.Query(priority=100, module=MyselfModule(DEFAULTS, ctx.log))
"""


def test_a_third_party_btl_that_reaches_nobody_is_reported_not_failed(
    run_pmca: Callable[..., Result], tmp_path
) -> None:
    """Its two-process check fails; doctor names it with its distribution and why,
    in a section of its own, and the verdict stays OK (exit 0)."""
    from pmca.testing import make_distribution

    native_or_skip()
    site = tmp_path / "site"
    make_distribution(
        site,
        "pmca-myself",
        version="2.3.4",
        entry_points={"pmca.btl": {"myself": "pmca_myself:MyselfComponent"}},
        modules={"pmca_myself": THIRD_PARTY_BTL},
    )
    result = run_pmca("doctor", "--quick", path=(site,))
    assert result.code == 0, result.out + result.err
    assert result.lines[-1].startswith("verdict: OK"), result.lines[-1]
    assert "btl myself" in result.lines[-1]  # named in the verdict, which it does not change
    third = result.out.split("== Third-party components (reported, not judged) ==")[1]
    assert re.search(
        r"WARN\s+btl myself\s+distribution pmca-myself 2\.3\.4: the two-process check failed: "
        r"its modules do not reach the peer process \(rank 0 reaches it through",
        third,
    ), third
    assert "Traceback" not in result.out
    assert "AssertionError" not in result.out
    assert 'File "' not in result.out
    assert re.search(r"ok\s+btl self\s", result.out)
    assert re.search(r"ok\s+btl tcp\s", result.out)
