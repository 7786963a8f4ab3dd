"""pmca's pytest plugin (entry point ``pytest11``).

Nothing here is autouse: a test opts in by naming a fixture. The
``--pmca-load-mode`` option chooses static or dynamic (dso) component loading
for the whole run, including subprocesses the tests start, so one tox factor
per mode runs every test in both.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from ..runtime import RUNTIME
from ..session import Session
from ._namespaces import requirements
from ._slurm import SlurmCluster, slurm_requirements
from ._testbed import Testbed

LOAD_MODE_VARIABLE = "PMCA_MCA_mca_base_component_dso"
_MODE_KEY = pytest.StashKey[str]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("pmca")
    group.addoption(
        "--pmca-load-mode",
        choices=("static", "dso"),
        default=None,
        help="load pmca components statically (resident) or as dso "
        "(imported afresh at open, unloaded at close); default: static",
    )


def pytest_configure(config: pytest.Config) -> None:
    mode = config.getoption("--pmca-load-mode", default=None)
    if mode is None:
        return
    config.stash[_MODE_KEY] = mode
    if mode == "dso":
        os.environ[LOAD_MODE_VARIABLE] = "all"
    else:
        os.environ.pop(LOAD_MODE_VARIABLE, None)


def pytest_report_header(config: pytest.Config) -> str | None:
    mode = config.stash.get(_MODE_KEY, None)
    return f"pmca load mode: {mode}" if mode else None


@pytest.fixture
def pmca_load_mode(request: pytest.FixtureRequest) -> str:
    """``"static"`` or ``"dso"``: the load mode of this run."""
    return request.config.stash.get(_MODE_KEY, "static")


@pytest.fixture
def pmca_env(pmca_load_mode: str) -> Iterator[dict[str, str]]:
    """Isolate ``PMCA_MCA_*`` environment variables; the load mode stays."""
    saved = {k: v for k, v in os.environ.items() if k.startswith("PMCA_MCA_")}
    for key in saved:
        del os.environ[key]
    if pmca_load_mode == "dso":
        os.environ[LOAD_MODE_VARIABLE] = "all"
    try:
        yield os.environ  # type: ignore[misc]
    finally:
        for key in [k for k in os.environ if k.startswith("PMCA_MCA_")]:
            del os.environ[key]
        os.environ.update(saved)


@pytest.fixture
def pmca_session(pmca_env: dict[str, str]) -> Iterator[Session]:
    """An initialized session over every installed framework, finalized afterwards."""
    if RUNTIME.sessions:
        pytest.fail(f"{RUNTIME.sessions} pmca session(s) leaked from an earlier test")
    session = Session().init()
    try:
        yield session
    finally:
        if session.active:
            session.finalize()


@pytest.fixture
def pmca_testbed() -> Iterator[Callable[..., Testbed]]:
    """Build simulated clusters (:class:`pmca.testing.Testbed` arguments); removed afterwards.

    The test is skipped, saying why, where the testbed cannot run (not root,
    no iproute2).
    """
    why = requirements()
    if why is not None:
        pytest.skip(why)
    built: list[Testbed] = []

    def make(*args: Any, **kwargs: Any) -> Testbed:
        testbed = Testbed(*args, **kwargs).start()
        built.append(testbed)
        return testbed

    try:
        yield make
    finally:
        for testbed in built:
            testbed.close()


@pytest.fixture
def pmca_slurm(
    pmca_testbed: Callable[..., Testbed],
) -> Iterator[Callable[..., SlurmCluster]]:
    """Build Slurm clusters over new testbeds (:class:`pmca.testing.Testbed` arguments).

    The test is skipped, saying why, where no cluster can run: not root, or
    Slurm missing and not installable (Debian's ``slurm-wlm``, ``munge`` and
    ``libpmix-dev`` are installed with ``apt-get`` the first time).
    """
    why = slurm_requirements()
    if why is not None:
        pytest.skip(why)
    built: list[SlurmCluster] = []

    def make(*args: Any, **kwargs: Any) -> SlurmCluster:
        cluster = SlurmCluster(pmca_testbed(*args, **kwargs)).start()
        built.append(cluster)
        return cluster

    try:
        yield make
    finally:
        for cluster in built:
            cluster.close()
