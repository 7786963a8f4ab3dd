"""Running Python code in a child process, for behaviour that may crash or hang."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Mapping

from .._public import public

#: Prepended to child code: a thread that has existed makes glibc take its
#: arena locks, which is where allocator/hook deadlocks hide.
FORCE_THREADED = (
    "import threading as _t\n_t_t = _t.Thread(target=lambda: None)\n_t_t.start()\n_t_t.join()\n"
)


@public
def run_python(
    code: str,
    *,
    timeout: float = 60.0,
    env: Mapping[str, str] | None = None,
    threaded: bool = True,
    faulthandler: bool = True,
) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter and return what happened.

    The child inherits this environment (so the load mode follows), plus
    ``env``. ``subprocess.TimeoutExpired`` propagates: a hang is a failure.
    """
    source = textwrap.dedent(code)
    if threaded:
        source = FORCE_THREADED + source
    child_env = dict(os.environ)
    child_env.update(env or {})
    args = [sys.executable]
    if faulthandler:
        args += ["-X", "faulthandler"]
    return subprocess.run(
        [*args, "-c", source],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=child_env,
        check=False,
    )
