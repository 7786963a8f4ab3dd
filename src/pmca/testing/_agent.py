"""The simulated cluster's ssh stand-in: ``agent [ssh options] HOST COMMAND...``.

Called as launchers call ssh (Open MPI's PRRTE through ``plm_ssh_agent``,
MPICH's Hydra through ``-launcher-exec``): ssh's options are read and
ignored, ``HOST`` (or ``user@HOST``) is looked up in the testbed's host
table, and the command words, joined by spaces as ssh joins them, run under
``/bin/sh -c`` inside that host's network and UTS namespaces. An unknown
host fails as ssh does, with status 255.

``python -m pmca.testing._agent --exec TABLE HOST ARGV...`` runs ``ARGV``
as argument words instead (no shell), for tests that start processes in a
host themselves.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import NoReturn

#: ssh options that take a value (``ssh -p 22``, also written ``-p22``).
_WITH_VALUE = set("BbcDEeFIiJLlmOoPpQRSWw")
#: Variables a login over ssh would not inherit from the launcher's own process.
_LAUNCHER_PRIVATE = ("PMIX_", "PRTE_", "OMPI_", "PMI_", "HYDI_", "HYDRA_")


def split(argv: Sequence[str]) -> tuple[str, list[str]]:
    """(host, command words) of an ssh command line."""
    words = list(argv)
    index = 0
    while index < len(words) and words[index].startswith("-") and words[index] != "--":
        option = words[index]
        index += 1
        letters = option[1:]
        for position, letter in enumerate(letters):
            if letter in _WITH_VALUE:
                if position == len(letters) - 1:
                    index += 1  # the value is the next word
                break
    if index < len(words) and words[index] == "--":
        index += 1
    if index >= len(words):
        raise SystemExit("usage: agent [ssh options] HOST COMMAND...")
    host = words[index].rsplit("@", 1)[-1]
    return host, words[index + 1 :]


def _login_environment() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(_LAUNCHER_PRIVATE)}


def main(table_path: str, argv: Sequence[str]) -> int:  # returns only on failure
    from ._testbed import enter_host, host_table

    table = host_table(table_path)
    host, command = split(argv)
    if host not in table:
        print(
            f"ssh: Could not resolve hostname {host}: not a host of this testbed", file=sys.stderr
        )
        return 255
    enter_host(table, host)
    os.chdir(os.environ.get("HOME", "/"))
    if not command:
        print("agent: no command given (an interactive login is not simulated)", file=sys.stderr)
        return 255
    os.execve("/bin/sh", ["sh", "-c", " ".join(command)], _login_environment())


def _exec_main(argv: Sequence[str]) -> NoReturn:
    from ._testbed import enter_host, host_table

    table_path, host, *command = argv
    enter_host(host_table(table_path), host)
    os.execvp(command[0], command)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--exec"]:
        _exec_main(sys.argv[2:])
    sys.exit(main(sys.argv[1], sys.argv[2:]))

__all__ = ["main", "split"]
