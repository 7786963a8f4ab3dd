"""The tutorial's two-rank job, run as the tutorial says, under this environment's launcher."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pmca.testing import Launcher, run_mpi

pytestmark = pytest.mark.mpi

TUTORIAL = Path(__file__).resolve().parents[2] / "docs" / "tutorial.md"


@pytest.mark.skipif(not TUTORIAL.is_file(), reason="needs the source checkout (docs/)")
def test_tutorial_two_rank_job(launcher: Launcher, pmca_env, tmp_path: Path) -> None:
    (block,) = [
        b
        for b in re.findall(
            r"^```python\n(.*?)^```$", TUTORIAL.read_text(), flags=re.MULTILINE | re.DOTALL
        )
        if "mpi4py" in b
    ]
    script = tmp_path / "pingpong_tutorial.py"
    script.write_text(block)
    done = run_mpi(launcher, 2, [str(script)], timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"routes to rank 1: \['sm', 'tcp'\]|routes to rank 1: \['tcp'\]", done.stdout)
    assert "b'pong!!!!'" in done.stdout
