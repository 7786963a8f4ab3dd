"""Sessions: lifecycle, sharing, re-init, threads, misuse."""

from __future__ import annotations

import importlib
import threading

import pytest

import pmca
from pmca.runtime import RUNTIME
from tests.conftest import component_source


@pytest.fixture
def fw(install_framework, unique) -> str:
    name = unique("sess")
    install_framework(name, {"a": component_source(name, "a", events_module=f"{name}_decl")})
    return name


def events(fw: str) -> list[tuple[str, str]]:
    return importlib.import_module(f"{fw}_decl").EVENTS


def test_context_manager_and_explicit_calls(fw: str) -> None:
    with pmca.Session(frameworks=[fw]) as session:
        assert session.active
        assert [i.name for i in session.components(fw)] == ["a"]
    assert not session.active
    session = pmca.Session(frameworks=[fw])
    assert session.init() is session
    session.finalize()
    assert events(fw).count(("opened", fw)) == 2 and events(fw).count(("closing", fw)) == 2


def test_first_init_opens_last_finalize_closes(fw: str) -> None:
    first = pmca.Session(frameworks=[fw]).init()
    second = pmca.Session(frameworks=[fw]).init()
    assert events(fw).count(("opened", fw)) == 1
    assert RUNTIME.frameworks[fw].refcount == 2
    first.finalize()
    assert events(fw).count(("closing", fw)) == 0
    assert second.components(fw)
    second.finalize()
    assert events(fw).count(("closing", fw)) == 1
    assert RUNTIME.sessions == 0 and not RUNTIME.frameworks


def test_reinit_after_last_finalize_is_a_full_reinit(fw: str) -> None:
    for _ in range(3):
        with pmca.Session(mca={f"{fw}_a_priority": 7}, frameworks=[fw]) as session:
            param = session.param(f"{fw}_a_priority")
            assert param.value == 7 and str(param.origin) == "command line"
    # The parameter space was torn down: the next session starts from defaults.
    with pmca.Session(frameworks=[fw]) as session:
        assert session.param(f"{fw}_a_priority").value == 10
    assert events(fw).count(("opened", fw)) == 4


def test_finalize_twice_and_use_after_finalize_are_errors(fw: str) -> None:
    session = pmca.Session(frameworks=[fw]).init()
    session.finalize()
    with pytest.raises(pmca.SessionError, match="already finalized"):
        session.finalize()
    with pytest.raises(pmca.SessionError, match=r"finalized; it cannot be used"):
        session.modules(fw)
    with pytest.raises(pmca.SessionError, match=r"create a new pmca\.Session"):
        session.init()
    with pytest.raises(pmca.SessionError, match="never initialized"):
        pmca.Session(frameworks=[fw]).finalize()


def test_double_init_of_one_handle_is_an_error(fw: str) -> None:
    with (
        pmca.Session(frameworks=[fw]) as session,
        pytest.raises(pmca.SessionError, match="already initialized"),
    ):
        session.init()


def test_failed_init_leaves_nothing_open(fw: str) -> None:
    with pytest.raises(pmca.SelectionError):
        pmca.Session(mca={fw: "missing"}, frameworks=[fw]).init()
    assert RUNTIME.sessions == 0 and not RUNTIME.frameworks


def test_thread_safe_init_and_finalize(fw: str) -> None:
    errors: list[BaseException] = []
    barrier = threading.Barrier(8)

    def worker() -> None:
        try:
            barrier.wait()
            for _ in range(20):
                with pmca.Session(frameworks=[fw]) as session:
                    assert session.module(fw) is not None
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors, errors
    assert RUNTIME.sessions == 0 and not RUNTIME.frameworks
    assert events(fw).count(("opened", fw)) == events(fw).count(("closing", fw)) >= 1


def test_session_param_and_runtime_set(fw: str) -> None:
    with pmca.Session(frameworks=[fw]) as session:
        verbose = session.param(f"{fw}_base_verbose")
        assert str(verbose.origin) == "default"
        # Verbosity stays settable while open, and takes effect at once...
        session.set_param(f"{fw}_base_verbose", "info")
        assert session.param(f"{fw}_base_verbose").value == 40
        assert str(session.param(f"{fw}_base_verbose").origin) == "set"
        # ...but, as in Open MPI, what was latched at open is locked.
        with pytest.raises(pmca.ParamError, match=f"framework '{fw}' is open"):
            session.set_param(fw, "a")
        with pytest.raises(pmca.ParamError, match="read-only"):
            session.set_param(f"{fw}_a_priority", 3)
        with pytest.raises(pmca.ParamError, match="loud"):
            session.set_param(f"{fw}_base_verbose", "loud")
        RUNTIME.params.register("tst", None, "knob", type=int, default=1, settable=True)
        assert session.set_param("tst_knob", "5").value == 5
        assert str(session.param("tst_knob").origin) == "set"


def test_later_session_cannot_silently_change_shared_parameters(fw: str) -> None:
    with pmca.Session(mca={fw: "a"}, frameworks=[fw]):
        with pmca.Session(mca={fw: "a"}, frameworks=[fw]) as same:
            assert same.components(fw)
        with pytest.raises(pmca.PmcaError, match=fw):
            pmca.Session(mca={fw: "^a"}, frameworks=[fw]).init()
    assert RUNTIME.sessions == 0


def test_cleanup_domain_runs_lifo(fw: str) -> None:
    order: list[int] = []
    session = pmca.Session(frameworks=[fw]).init()
    for i in range(4):
        session.domain.append(lambda i=i: order.append(i))
    session.finalize()
    assert order == [3, 2, 1, 0]
