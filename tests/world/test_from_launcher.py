"""Which world the environment offers, and clear errors when it offers none."""

from __future__ import annotations

import pytest

import pmca
from pmca.mca.params import ParamError

_LAUNCHER_VARIABLES = ("PMIX_NAMESPACE", "PMIX_RANK", "PMIX_SERVER_URI41", "PMI_FD")


@pytest.fixture
def no_launcher(monkeypatch):
    for name in _LAUNCHER_VARIABLES:
        monkeypatch.delenv(name, raising=False)


def test_no_launcher_gives_a_single_process_and_says_why(no_launcher, capsys):
    world = pmca.world.from_launcher(verbose=1)
    assert isinstance(world, pmca.world.SingleWorld)
    err = capsys.readouterr().err
    assert "kind='single'" in err and "neither PMIX_NAMESPACE/PMIX_RANK nor PMI_FD" in err, err


def test_silent_at_verbosity_zero(no_launcher, capsys):
    pmca.world.from_launcher()
    assert "world" not in capsys.readouterr().err


def test_session_asked_for_pmix_without_a_server(no_launcher):
    with pytest.raises(pmca.world.LauncherError, match="PMIx: no PMIx server in this environment"):
        pmca.Session(world="pmix", frameworks=["btl"]).init()


def test_session_asked_for_pmi_without_a_launcher(no_launcher):
    with pytest.raises(pmca.world.LauncherError, match="PMI: PMI_FD is not set"):
        pmca.Session(mca={"pmca_base_world": "pmi"}, frameworks=["btl"]).init()


def test_unknown_world_kind_is_refused(no_launcher):
    with pytest.raises(ParamError, match="pmca_base_world"):
        pmca.Session(mca={"pmca_base_world": "slurm"}, frameworks=["btl"]).init()
    with pytest.raises(pmca.world.LauncherError, match="'slurm': expected one of single"):
        pmca.Session(world="slurm", frameworks=["btl"]).init()
