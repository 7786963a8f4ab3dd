"""The data path under a real mpirun/mpiexec: every size, random traffic, failures."""

from __future__ import annotations

from pathlib import Path

import pytest

from pmca.testing import Launcher, run_mpi

from .conftest import BTL_SETS, ok_lines, program

pytestmark = pytest.mark.mpi


def _check(child, ranks: int) -> list[str]:
    output = f"--- stdout\n{child.stdout}\n--- stderr\n{child.stderr}"
    assert child.returncode == 0, output
    lines = ok_lines(child.stdout)
    assert len(lines) == ranks, output
    return lines


@pytest.mark.parametrize(("btl", "first"), BTL_SETS, ids=[b for b, _ in BTL_SETS])
def test_every_size_two_ranks(launcher: Launcher, pmca_env, btl: str, first: str) -> None:
    child = run_mpi(launcher, 2, [program("exchange.py"), "--btl", btl, "--expect", first])
    _check(child, 2)


def test_every_size_four_ranks(launcher: Launcher, pmca_env) -> None:
    btl, first = BTL_SETS[-1]
    child = run_mpi(
        launcher, 4, [program("exchange.py"), "--btl", btl, "--expect", first], timeout=300
    )
    _check(child, 4)


@pytest.mark.parametrize(("btl", "first"), BTL_SETS, ids=[b for b, _ in BTL_SETS])
def test_random_sizes_and_tags(launcher: Launcher, pmca_env, btl: str, first: str) -> None:
    child = run_mpi(launcher, 3, [program("random_traffic.py"), "--btl", btl, "--examples", "20"])
    _check(child, 3)


@pytest.mark.parametrize(("btl", "first"), BTL_SETS, ids=[b for b, _ in BTL_SETS])
def test_killed_peer_is_named_not_a_hang(
    launcher: Launcher, pmca_env, tmp_path, btl: str, first: str
) -> None:
    result = tmp_path / "result"
    # hydra SIGKILLs every rank when one dies of a signal: there the peer
    # dies by _exit instead, just as abruptly as far as its peers can tell.
    death = "kill" if launcher.survives_signal_deaths else "exit"
    child = run_mpi(
        launcher,
        2,
        [
            program("failures.py"),
            "--btl",
            btl,
            "--case",
            "killed-peer",
            "--timeout",
            "10",
            "--death",
            death,
            "--result",
            str(result),
        ],
        launcher_args=launcher.keep_going_args(),
        timeout=90,
    )
    reported = result.read_text() if result.exists() else ""
    lines = ok_lines(reported)
    assert lines and lines[0].startswith("OK rank 0 peer error"), (
        reported + child.stdout + child.stderr
    )
    assert "rank 1" in lines[0]


def test_a_bystanders_death_fails_no_transfer_between_others(
    launcher: Launcher, pmca_env, tmp_path
) -> None:
    """Rank 2 dies while rank 0 reads a 16 MiB message from rank 1 over tcp:
    that read completes intact (losing a connection failed every tcp get and
    put in flight, whichever peer it was with)."""
    result = tmp_path / "result"
    death = "kill" if launcher.survives_signal_deaths else "exit"
    argv = [program("failures.py"), "--btl", "self,tcp", "--case", "bystander-lost"]
    child = run_mpi(
        launcher,
        3,
        [*argv, "--timeout", "30", "--death", death, "--result", str(result)],
        launcher_args=launcher.keep_going_args(),
        timeout=120,
    )
    reported = result.read_text() if result.exists() else ""
    lines = sorted(ok_lines(reported))
    assert len(lines) == 2, reported + child.stdout + child.stderr
    assert lines[0].startswith("OK rank 0 rank 1's 16 MiB arrived intact"), lines
    assert lines[1].startswith("OK rank 1 the 16 MiB send completed"), lines


def test_silent_peer_fails_the_modex_naming_it(launcher: Launcher, pmca_env, tmp_path) -> None:
    result = tmp_path / "result"
    child = run_mpi(
        launcher,
        2,
        [
            program("failures.py"),
            "--btl",
            "self,tcp",
            "--case",
            "silent-peer",
            "--timeout",
            "3",
            "--result",
            str(result),
        ],
        launcher_args=launcher.keep_going_args(),
        timeout=90,
    )
    lines = ok_lines(result.read_text() if result.exists() else "")
    assert lines and "never heard from rank(s) 1" in lines[0], child.stdout + child.stderr


@pytest.mark.parametrize(("btl", "first"), BTL_SETS, ids=[b for b, _ in BTL_SETS])
def test_finalize_with_traffic_in_flight(
    launcher: Launcher, pmca_env, btl: str, first: str
) -> None:
    child = run_mpi(
        launcher, 2, [program("failures.py"), "--btl", btl, "--case", "finalize-in-flight"]
    )
    _check(child, 2)


def test_pingpong_example(launcher: Launcher, pmca_env) -> None:
    example = Path(__file__).parent.parent.parent / "examples" / "pingpong.py"
    child = run_mpi(launcher, 2, [str(example)], timeout=300)
    assert child.returncode == 0, child.stdout + child.stderr
    lines = [line for line in child.stdout.splitlines() if " latency " in line]
    expected = ["sm", "tcp"] if any(first == "sm" for _, first in BTL_SETS) else ["tcp"]
    assert [line.split()[0] for line in lines] == expected, child.stdout
    assert all("MB/s" in line for line in lines)


@pytest.mark.parametrize("ranks", [2, 4])
@pytest.mark.parametrize(("btl", "first"), BTL_SETS, ids=[b for b, _ in BTL_SETS])
def test_a_server_receives_from_any_source_and_tag(
    launcher: Launcher, pmca_env, btl: str, first: str, ranks: int
) -> None:
    child = run_mpi(
        launcher, ranks, [program("wildcards.py"), "--btl", btl, "--count", "45"], timeout=300
    )
    _check(child, ranks)


@pytest.mark.parametrize(("btl", "first"), BTL_SETS, ids=[b for b, _ in BTL_SETS])
def test_three_senders_match_by_mpi_rules(
    launcher: Launcher, pmca_env, btl: str, first: str
) -> None:
    """Seeded rounds of sends from three ranks and a receiver's mix of specific and
    wildcard receives and probes, checked against MPI's matching rules."""
    child = run_mpi(
        launcher, 4, [program("matching.py"), "--btl", btl, "--rounds", "25"], timeout=400
    )
    _check(child, 4)
