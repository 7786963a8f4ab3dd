"""``pmca info`` on a stdout that cannot encode what it prints."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def test_ascii_stdout_with_non_ascii_values_prints_escapes(tmp_path: Path) -> None:
    params = tmp_path / "params.conf"
    params.write_text("mca_base_component_path = /opt/caf\u00e9/pmca\n", encoding="utf-8")
    env = dict(
        os.environ,
        PYTHONIOENCODING="ascii",
        LC_ALL="C",
        PMCA_MCA_mca_base_param_files=str(params),
    )
    result = subprocess.run(
        [sys.executable, "-m", "pmca.cli", "info", "--param", "mca", "all", "--level", "9"],
        capture_output=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr.decode(errors="replace")
    assert b"/opt/caf\\xe9/pmca" in result.stdout
    assert b"internal error" not in result.stderr
