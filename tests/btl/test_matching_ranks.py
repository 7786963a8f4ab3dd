"""MPI matching with three real sender processes, over sm and over tcp.

Four processes join a test socket world and open sessions; hypothesis draws
rounds (each sender's sends, the receiver's mix of specific and wildcard
receives and probes, see ``_matching_rules``), every rank runs each round,
and the receiver checks what it got against MPI's rules. The same rules
run under a real launcher in tests/mpi (programs/matching.py).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import random
import re
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pmca.btl import FRAMEWORK

from ._matching_rules import Round, draw

RANK = Path(__file__).with_name("_matching_rank.py")
SIZE = 4  # the receiver and three senders
SENDERS = list(range(1, SIZE))
_HAS_SM = any(ref.name == "sm" for ref in FRAMEWORK.static_components)
#: The btl each world's ranks must reach each other with, and its parameters.
#: tcp's eager limit comes down so that the larger sizes take its rendezvous.
WORLDS = {
    "sm": {"btl": "self,sm"},
    "tcp": {"btl": "self,tcp", "btl_tcp_if_include": "127.0.0.1/8", "btl_tcp_eager_limit": "32k"},
}


class Ranks:
    """The processes of one world, each running the rounds it is sent."""

    def __init__(self, directory: Path, btl: str, broken: str | None = None) -> None:
        extra = [broken] if broken else []
        self.errors = [open(directory / f"rank{r}.err", "w+") for r in range(SIZE)]  # noqa: SIM115
        self.processes = [
            subprocess.Popen(
                [
                    sys.executable,
                    str(RANK),
                    str(rank),
                    str(SIZE),
                    str(directory / "world.sock"),
                    json.dumps(WORLDS[btl]),
                    *extra,
                ],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self.errors[rank],
                bufsize=0,
            )
            for rank in range(SIZE)
        ]
        self._buffers = [b""] * SIZE
        self.rounds = itertools.count(1)
        self.broken: str | None = None  # the first round's failure: later rounds mean nothing
        try:
            ready = [self._answer(rank) for rank in range(SIZE)]
        except BaseException as exc:
            self.broken = f"the world did not start: {exc}"
            self.close()
            raise
        for rank, answer in enumerate(ready):
            for peer, names in answer["reach"].items():
                assert names == [btl], (rank, peer, names)

    def run(self, round_: Round) -> list[dict[str, Any]]:
        if self.broken:
            pytest.fail(f"the world broke in an earlier round:\n{self.broken}")
        line = (json.dumps(round_.to_json()) + "\n").encode()
        for process in self.processes:
            assert process.stdin is not None
            process.stdin.write(line)
        try:
            answers = [self._answer(rank) for rank in range(SIZE)]
        except AssertionError as exc:
            self.broken = str(exc)
            raise
        errors = [f"rank {r}: {a['error']}" for r, a in enumerate(answers) if "error" in a]
        if errors:
            self.broken = "\n".join(errors)
            pytest.fail(self.broken)
        return answers

    def _answer(self, rank: int, timeout: float = 300.0) -> dict[str, Any]:
        """The next ``RESULT`` line of ``rank`` (other output, such as log lines, skipped)."""
        process = self.processes[rank]
        assert process.stdout is not None
        fd = process.stdout.fileno()
        deadline = time.monotonic() + timeout
        while True:
            line, newline, rest = self._buffers[rank].partition(b"\n")
            if newline:
                self._buffers[rank] = rest
                if line.startswith(b"RESULT "):
                    return json.loads(line[len(b"RESULT ") :])  # type: ignore[no-any-return]
                continue
            remaining = deadline - time.monotonic()
            readable, _, _ = select.select([fd], [], [], max(0.0, remaining))
            chunk = os.read(fd, 1 << 16) if readable else b""
            if not chunk:
                raise AssertionError(
                    f"rank {rank} {'exited' if readable else 'did not answer'}:\n"
                    + self._stderr(rank)
                )
            self._buffers[rank] += chunk

    def _stderr(self, rank: int) -> str:
        stream = self.errors[rank]
        stream.flush()
        stream.seek(0)
        return stream.read()[-4000:]

    def close(self) -> None:
        for process in self.processes:
            if self.broken:  # a rank may be stuck in the round that broke
                process.kill()
            if process.stdin is not None:
                with contextlib.suppress(BrokenPipeError):
                    process.stdin.close()
        failed = []
        for rank, process in enumerate(self.processes):
            try:
                process.wait(timeout=120)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            if process.returncode != 0 and not self.broken:
                failed.append(
                    f"rank {rank} exited with {process.returncode}:\n{self._stderr(rank)}"
                )
            if process.stdout is not None:
                process.stdout.close()
        for stream in self.errors:
            stream.close()
        assert not failed, "\n".join(failed)


def _btls() -> list[Any]:
    skip_sm = pytest.mark.skipif(not _HAS_SM, reason="btl/sm is not built here")
    return [pytest.param("sm", marks=skip_sm), "tcp"]


@pytest.fixture(scope="module", params=_btls())
def ranks(request, tmp_path_factory) -> Iterator[Ranks]:
    world = Ranks(tmp_path_factory.mktemp(f"matching-{request.param}"), request.param)
    try:
        yield world
    finally:
        world.close()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.randoms(use_true_random=False))
def test_three_senders_match_by_mpi_rules(ranks: Ranks, rng: random.Random) -> None:
    round_ = draw(rng, next(ranks.rounds), SENDERS)
    answers = ranks.run(round_)
    assert [a["sent"] for a in answers[1:]] == [len(round_.sends[r]) for r in SENDERS]
    assert answers[0]["violations"] == [], round_


def _violations_until(directory: Path, btl: str, broken: str, rounds: int, rule: str) -> list[str]:
    """Every violation the rounds report, up to the first round with one matching
    ``rule`` (a round whose arrival order hides the rule may be caught by another)."""
    world = Ranks(directory, btl, broken)
    seen: list[str] = []
    try:
        for number in range(1, rounds + 1):
            round_ = draw(random.Random(number), number, SENDERS, most=12)
            violations = world.run(round_)[0]["violations"]
            seen += violations
            if any(re.search(rule, v) for v in violations):
                break
        return seen
    finally:
        world.close()


@pytest.mark.parametrize(
    ("broken", "rule"),
    [
        ("newest-unexpected", "overtook"),
        ("specific-first", "overtook|stayed unmatched"),
    ],
)
def test_the_rules_catch_a_broken_matcher(tmp_path, pmca_load_mode, broken, rule) -> None:
    """The receiver's matching broken on purpose: the same rounds must report it."""
    btl = "sm" if _HAS_SM else "tcp"
    violations = _violations_until(tmp_path, btl, broken, 200, rule)
    assert violations, f"{broken} matching went unnoticed for 200 rounds"
    assert any(re.search(rule, v) for v in violations), violations
