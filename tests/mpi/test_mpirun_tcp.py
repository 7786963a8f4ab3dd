"""btl/tcp under a real launcher: large eager messages streamed into place, keepalive,
strangers at the listeners."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pmca.testing import Launcher, run_mpi

from .conftest import ok_lines, program

pytestmark = pytest.mark.mpi


@pytest.mark.parametrize(
    "chunk", [None, "262144", "4093"], ids=["unpaced-default", "paced", "odd-chunk"]
)
def test_large_eager_messages(launcher: Launcher, pmca_env, chunk: str | None) -> None:
    command = [program("tcp_streams.py"), "--btl", "self,tcp"]
    if chunk is not None:
        command += ["--chunk", chunk]
    child = run_mpi(launcher, 2, command, timeout=180)
    output = f"--- stdout\n{child.stdout}\n--- stderr\n{child.stderr}"
    assert child.returncode == 0, output
    assert len(ok_lines(child.stdout)) == 2, output


def test_peer_leaving_mid_message_is_named(launcher: Launcher, pmca_env, tmp_path) -> None:
    result = tmp_path / "result"
    child = run_mpi(
        launcher,
        2,
        [program("tcp_streams.py"), "--btl", "self,tcp", "--case", "torn", "--result", str(result)],
        launcher_args=launcher.keep_going_args(),
        timeout=90,
    )
    reported = result.read_text() if result.exists() else ""
    lines = ok_lines(reported)
    assert lines and "torn message: 1 placed" in lines[0], reported + child.stdout + child.stderr


def test_keepalive_reaches_the_kernel_at_both_ends(launcher: Launcher, pmca_env) -> None:
    command = [program("tcp_streams.py"), "--btl", "self,tcp", "--case", "keepalive"]
    child = run_mpi(launcher, 2, command, timeout=120)
    output = f"--- stdout\n{child.stdout}\n--- stderr\n{child.stderr}"
    assert child.returncode == 0, output
    assert len(ok_lines(child.stdout)) == 2, output


def test_a_silent_stranger_on_every_listener_delays_no_rank(
    launcher: Launcher, pmca_env, tmp_path: Path
) -> None:
    """Each rank opens sessions in turn, undisturbed and with a stranger that connects to
    each of its listeners before the modex and sends nothing: the fastest init of each
    kind are within 1 s of each other."""
    side = Path(__file__).parents[1] / "btl" / "_tcp_listener_side.py"
    mca = {"btl": "self,tcp", "btl_tcp_if_include": "127.0.0.1/8", "pmca_base_modex_timeout": 20}
    child = run_mpi(launcher, 2, [str(side), "mpi", str(tmp_path), json.dumps(mca)], timeout=300)
    output = f"--- stdout\n{child.stdout}\n--- stderr\n{child.stderr}"
    assert child.returncode == 0, output
    for rank in (0, 1):
        times = json.loads((tmp_path / f"rank{rank}.json").read_text())
        for report in times["none"] + times["silent"]:
            assert "error" not in report and report["intact"], (rank, times)
        plain = min(report["init"] for report in times["none"])
        disturbed = min(report["init"] for report in times["silent"])
        assert disturbed <= plain + 1.0, (rank, times)
