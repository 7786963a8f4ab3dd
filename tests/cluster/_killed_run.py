"""A run killed by SIGKILL once it built something: what the next run must clean up."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path


def killed_run(tmp_path: Path, build: str) -> str:
    """Run ``build`` (code making ``testbed``) in a child, SIGKILL it once built; its tag."""
    ready = tmp_path / "ready"
    script = textwrap.dedent(build) + textwrap.dedent(
        f"""
        import time
        open({str(ready)!r}, "w").write(testbed.tag)
        time.sleep(600)
        """
    )
    child = subprocess.Popen([sys.executable, "-c", script])
    try:
        deadline = time.monotonic() + 60
        while not ready.exists() or not ready.read_text():
            assert time.monotonic() < deadline and child.poll() is None, "the run never built"
            time.sleep(0.05)
        return ready.read_text()
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
