"""btl/tcp under a real launcher: large eager messages streamed into place, paced or not."""

from __future__ import annotations

import pytest

from pmca.testing import Launcher, run_mpi

from .conftest import ok_lines, program

pytestmark = pytest.mark.mpi


@pytest.mark.parametrize("chunk", [None, "0", "4093"], ids=["paced", "unpaced", "odd-chunk"])
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
