"""Hostile parameter files: FIFOs, devices, huge files.

Each gets a clear error naming the file at once, not a read that blocks
forever (a FIFO nobody writes) or fills memory (``/dev/zero``); and files
are read before the runtime lock is taken, so even the error does not wait
for another thread's transition.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pmca.mca.params import ParamFileError, parse_param_file
from pmca.mca.params._paramfile import MAX_FILE_SIZE
from pmca.testing import run_python


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "params.fifo"
    os.mkfifo(path)
    return path


def test_a_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ParamFileError, match="a directory"):
        parse_param_file(tmp_path)


def test_a_file_over_the_size_limit_is_refused(tmp_path: Path) -> None:
    big = tmp_path / "big.conf"
    big.write_bytes(b"# padding\n" * (MAX_FILE_SIZE // 10 + 1))
    with pytest.raises(ParamFileError, match=rf"big\.conf: .*larger than {MAX_FILE_SIZE} bytes"):
        parse_param_file(big)
    fits = tmp_path / "fits.conf"
    fits.write_bytes(b"a = 1\n" + b"#" * (MAX_FILE_SIZE - 7) + b"\n")
    assert [entry.key for entry in parse_param_file(fits)] == ["a"]


def test_a_symlink_to_a_regular_file_is_read(tmp_path: Path) -> None:
    target = tmp_path / "real.conf"
    target.write_text("btl = self\n")
    link = tmp_path / "link.conf"
    link.symlink_to(target)
    assert [entry.value for entry in parse_param_file(link)] == ["self"]


# In a child: before the fix a FIFO blocked forever, /dev/zero ate memory
# (bounded here by an address-space limit).
SESSION_WHILE_LOCKED = """
import resource, threading, time
resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
import pmca
from pmca.runtime import RUNTIME

held = threading.Event()
def transition_in_flight():
    with RUNTIME.lock:
        held.set()
        time.sleep(600)
threading.Thread(target=transition_in_flight, daemon=True).start()
held.wait()
start = time.monotonic()
try:
    pmca.Session(frameworks=["memory"]).init()
except pmca.ParamError as exc:
    print(f"{{time.monotonic() - start:.3f}}s: {{exc}}")
"""


@pytest.mark.parametrize("kind", ["fifo", "/dev/zero"])
def test_session_init_names_the_bad_file_even_while_another_thread_holds_the_runtime(
    kind: str, fifo: Path
) -> None:
    path = str(fifo) if kind == "fifo" else kind
    result = run_python(
        SESSION_WHILE_LOCKED.format(),
        env={"PMCA_MCA_mca_base_param_files": path},
        timeout=60,  # a hang (blocked read, or waiting for the lock) fails here
    )
    assert result.returncode == 0, result.stderr[-3000:]
    seconds, _, message = result.stdout.strip().partition("s: ")
    assert path in message and "not a regular file" in message, result.stdout
    assert "mca_base_param_files" in message  # and who named it
    print(f"{kind}: error after {seconds} s")


@pytest.mark.parametrize("kind", ["fifo", "/dev/zero"])
def test_pmca_info_reports_the_bad_file(kind: str, fifo: Path) -> None:
    path = str(fifo) if kind == "fifo" else kind
    env = dict(os.environ, PMCA_MCA_mca_base_param_files=path)
    limit = "import resource; resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30)); "
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            limit + "from pmca.cli import main; raise SystemExit(main())",
            "info",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2, result.stderr
    assert path in result.stderr and "not a regular file" in result.stderr
    assert "Traceback" not in result.stderr
