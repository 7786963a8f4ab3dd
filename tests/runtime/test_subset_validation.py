"""A session of some frameworks validates every parameter it is given, as a default one does."""

from __future__ import annotations

import warnings

import pytest

import pmca
from pmca.mca.params import ParamValueError

BAD = {"mpi_leave_pinned": "maybe", "BTL": "self"}


@pytest.mark.parametrize("frameworks", [None, ["btl"], ["patcher"]])
def test_a_bad_value_of_an_unopened_framework_is_an_error(pmca_env, frameworks) -> None:
    """``mpi_leave_pinned`` belongs to the memory base, which a btl session does not open."""
    with pytest.raises(ParamValueError, match="'maybe' for MCA parameter 'mpi_leave_pinned'"):
        pmca.Session(frameworks=frameworks, mca=BAD).init()
    assert pmca.runtime.RUNTIME.sessions == 0


@pytest.mark.parametrize(
    ("frameworks", "given", "message"),
    [
        (None, {"BTL": "self"}, "unknown MCA parameter 'BTL'"),
        (["btl"], {"BTL": "self"}, "unknown MCA parameter 'BTL'"),
        (["btl"], {"memory_patcher_priorty": "3"}, "did you mean 'memory_patcher_priority'"),
        (["memory"], {"btl_tcp_sndbuf": "5"}, "component btl/tcp has no such parameter"),
    ],
)
def test_an_unknown_name_warns_in_every_session(pmca_env, frameworks, given, message) -> None:
    with (
        pytest.warns(pmca.ParamWarning, match=message),
        pmca.Session(frameworks=frameworks, mca=given),
    ):
        pass


def test_good_values_of_unopened_frameworks_pass_silently(pmca_env) -> None:
    given = {"mpi_leave_pinned": "1", "btl_tcp_exclusivity": "100", "memory": "^ucm"}
    pmca_env["PMCA_MCA_rcache_base_verbose"] = "0"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pmca.Session(frameworks=["patcher"], mca=given):
            opened = set(pmca.runtime.RUNTIME.frameworks)
    assert "btl" not in opened and "memory" not in opened  # checked, not opened
