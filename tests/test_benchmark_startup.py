"""bench_startup judges start-up on equal work: the runs it judges do what their peers do.

``ompi_info`` computes its answer every time, so the judged ``pmca info``
must too (no output cache read or written); MPICH's ``MPI.Session`` is
ready to communicate, so the judged session must open its btls (in a world
of one rank, selection is otherwise deferred and no transport is opened).
These tests run the commands bench_startup judges, in the environments it
gives them, and look at what they did; the rows it reports and does not
judge are the controls that show each check can tell.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
#: What the btl framework logs (at verbosity 100) once its components are
#: opened and selected, and once its modules reached every rank (add_procs).
OPENED = re.compile(r"\[pmca:btl\] info: framework opened selected=\[(.+)\]")
ROUTES = re.compile(r"\[pmca:btl/bml\] debug: routes reach=\{0: \[(.+)\]\}")


@pytest.fixture
def startup(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """``bench_startup``, imported as ``run.py`` runs it (its directory on the path)."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import bench_startup

    return bench_startup


def _stored(where: Path) -> list[Path]:
    return sorted(where.rglob("info-*.marshal"))


def test_pmca_info_is_judged_computed_afresh(startup: ModuleType, tmp_path: Path) -> None:
    """The judged ``pmca info`` stores no answer; the cached row, reported only, does."""
    base = startup.installed_env()
    base.pop("PMCA_INFO_CACHE", None)  # the test session's own setting: the bench's must decide
    subjects = startup.info_subjects(base, tmp_path / "bench-cache", [])
    assert [subject.judged for subject in subjects].count(True) == 1
    for index, subject in enumerate(subjects):
        home = tmp_path / f"home{index}"
        home.mkdir()
        # The default cache, were the environment to leave it on, lands under here too.
        env = dict(subject.env, HOME=str(home), XDG_CACHE_HOME=str(home / ".cache"))
        done = subprocess.run(subject.command, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert "MCA" in done.stdout or "pmca" in done.stdout
        stored = _stored(tmp_path)
        if subject.judged:
            assert stored == [], f"the judged pmca info ({subject.label}) used its output cache"
        else:
            assert stored, f"the cached row ({subject.label}) stored nothing: the check is blind"
        for path in stored:
            path.unlink()


def test_the_judged_session_opens_and_connects_its_btls(startup: ModuleType) -> None:
    """The judged session's btls are opened and reach rank 0; the deferred row's are not."""
    subjects = startup.session_subjects(startup.installed_env())
    judged = [subject for subject in subjects if subject.judged]
    assert len(judged) == 1
    deferred = [s for s in subjects if s.command[-1] == startup.DEFERRED_SESSION_SOURCE]
    assert len(deferred) == 1 and not deferred[0].judged
    for subject in (*judged, *deferred):
        env = dict(subject.env, PMCA_MCA_btl_base_verbose="100")
        done = subprocess.run(subject.command, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        opened, routes = OPENED.search(done.stderr), ROUTES.search(done.stderr)
        if subject.judged:
            assert opened and routes, f"the judged session opened no btl:\n{done.stderr}"
        else:
            assert not opened and not routes, f"the deferred row opened btls:\n{done.stderr}"


def test_the_session_profile_runs_the_judged_script_phase_by_phase(startup: ModuleType) -> None:
    """The profile's phases are the judged script's statements, and it sees the btls open."""
    assert "; ".join(code for _, code in startup.SESSION_PHASES) == startup.SESSION_SOURCE
    judged = next(s for s in startup.session_subjects(startup.installed_env()) if s.judged)
    assert judged.command == [sys.executable, "-c", startup.SESSION_SOURCE]
    profiles = startup.profiles
    phases = profiles.phase_profile("session", startup.SESSION_PHASES, judged.env, runs=1)
    for name, _ in startup.SESSION_PHASES:
        assert f"{name} " in phases
    # Own time by package (every place shown): pmca's btl among the places the start went.
    packages = profiles.package_profile("session", startup.SESSION_PHASES, judged.env, top=100)
    assert "pmca.btl" in packages and "the import system" in packages
    assert os.sep not in packages  # places, not file paths
