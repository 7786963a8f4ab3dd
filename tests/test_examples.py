"""Every runnable example runs, in this run's load mode."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = sorted((Path(__file__).parent.parent / "examples").glob("*.py"))


@pytest.mark.parametrize("example", EXAMPLES, ids=[e.name for e in EXAMPLES])
def test_example_runs(example: Path, pmca_env, pmca_load_mode: str) -> None:
    child = subprocess.run(
        [sys.executable, "-X", "faulthandler", str(example)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert child.returncode == 0, f"{example.name} failed:\n{child.stdout}\n{child.stderr}"


def test_sessions_init_twice_uses_the_load_mode(pmca_env, pmca_load_mode: str) -> None:
    example = Path(__file__).parent.parent / "examples" / "sessions_init_twice.py"
    child = subprocess.run(
        [sys.executable, str(example)], capture_output=True, text=True, timeout=300, check=False
    )
    assert child.returncode == 0, child.stderr
    rounds = [line for line in child.stdout.splitlines() if line.startswith("round")]
    assert len(rounds) == 2
    if "patcher (" in rounds[0]:
        assert all(f"overwrite ({pmca_load_mode})" in line for line in rounds)
        assert all("munmap delivered=True" in line for line in rounds)
    assert "sessions_init_twice: OK" in child.stdout
