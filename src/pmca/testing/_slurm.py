"""A Slurm cluster over a :class:`~pmca.testing.Testbed`'s hosts, for tests under ``srun``.

The first host is the head node: it runs ``munged`` (MUNGE, Slurm's
authentication; its socket is a file every host reaches), ``slurmctld``
(``SlurmctldHost`` is that host's own hostname, which slurmctld insists on)
and, like every host, one ``slurmd``. Every daemon runs inside its host's
network and UTS namespaces (entered with ``setns``, as the testbed's ssh
stand-in does; ``ip netns exec`` would remount ``/sys`` and slurmd then fails
on ``/sys/fs/cgroup``), so it names itself and listens as that host, and the
testbed kills it with the host. Every file (configuration, MUNGE key and
socket, state, one spool and one ``TmpFS`` per node: Slurm's PMIx plugin
makes its directories there and two nodes sharing one collide) lives in the
testbed's state directory: what a killed run left behind goes with the
testbed's own stale state.

The configuration is the smallest that runs both PMI plugins: process
tracking by ``/proc`` (``proctrack/linuxproc``), no task plugin, cores as
the consumable (``select/cons_tres`` with ``CR_Core``), oversubscription
allowed (more tasks than CPUs need ``srun -O``), no accounting.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .._public import public
from . import _slurm_install as install
from ._namespaces import TestbedUnavailable
from ._testbed import Host, Testbed

#: ``srun --mpi=`` values Slurm 22.05 offers with Debian's packages.
MPI_PLUGINS = ("pmi2", "pmix", "none")
_PARTITION = "pmca"
#: What the daemons start beside the job's tasks (killed with them).
_HELPERS = frozenset({"slurmscriptd", "slurmstepd"})
_CONTROLLER_PORT = 6817  # slurmctld's default (SlurmctldPort)


@public
def slurm_requirements(*, install_missing: bool = True) -> str | None:
    """Why a Slurm cluster cannot run here, or ``None``; installs Slurm when missing.

    Root is needed (the testbed's namespaces; ``apt-get``). Debian's
    ``slurm-wlm``, ``munge`` and ``libpmix-dev`` are installed at the first
    call that finds them missing, once per machine.
    """
    from ._namespaces import requirements

    why = requirements()
    if why is not None:
        return why
    return install.ensure(install=install_missing)


@public
class SlurmCluster:
    """Slurm over every host of ``testbed``; a context manager, up when entered.

    :meth:`srun` runs a job step from the head node; ``env`` is what a
    Slurm command needs (``SLURM_CONF``). ``cpus`` is what each node tells
    Slurm it has.
    """

    __test__ = False  # not a pytest test class

    def __init__(self, testbed: Testbed, *, cpus: int = 2, timeout: float = 30.0) -> None:
        if not testbed.hosts:
            raise ValueError("the testbed has no hosts (start it first)")
        self.testbed = testbed
        self.cpus = cpus
        self.timeout = timeout
        self.root = testbed.state / "slurm"
        self.conf = self.root / "slurm.conf"
        self.munge_socket = self.root / "munge" / "munge.socket"
        self.env = {"SLURM_CONF": str(self.conf)}
        self._daemons: list[tuple[str, subprocess.Popen[bytes]]] = []

    @property
    def head(self) -> Host:
        """The host running munged and slurmctld (and where :meth:`srun` starts)."""
        return self.testbed.hosts[0]

    @property
    def nodes(self) -> list[str]:
        """Slurm's node names, one per host (its :attr:`~Host.name`), in host order."""
        return [host.name for host in self.testbed.hosts]

    # -- bringing up and down ----------------------------------------------

    def __enter__(self) -> SlurmCluster:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def start(self) -> SlurmCluster:
        """Write the configuration, start every daemon, wait until every node is idle."""
        why = slurm_requirements()
        if why is not None:
            raise TestbedUnavailable(why)
        try:
            self._write_files()
            self._start_munge()
            controller = self._daemon("slurmctld", self.head, [install.program("slurmctld"), "-D"])
            # A Slurm command that finds no controller yet waits a whole second to retry.
            self._wait_listening(controller, "slurmctld", _CONTROLLER_PORT)
            for host in self.testbed.hosts:
                self._daemon(f"slurmd {host.name}", host, self._slurmd(host))
            self._wait_idle()
        except BaseException:
            self.close()
            raise
        return self

    def _write_files(self) -> None:
        for sub in ("munge", "ctld", "spool", "tmp", "log"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        for host in self.testbed.hosts:
            (self.root / "spool" / host.name).mkdir(exist_ok=True)
            (self.root / "tmp" / host.name).mkdir(exist_ok=True)
        key = self.root / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        (self.root / "munge").chmod(0o755)  # munge's clients must reach the socket
        self.conf.write_text(self.configuration())

    def configuration(self) -> str:
        """The ``slurm.conf`` of this cluster."""
        head = self.head
        root = self.root
        lines = [
            "ClusterName=pmca",
            f"SlurmctldHost={head.hostname}({head.addresses[0]})",
            "SlurmUser=root",
            "SlurmdUser=root",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"AuthInfo=socket={self.munge_socket}",
            f"StateSaveLocation={root / 'ctld'}",
            f"SlurmdSpoolDir={root / 'spool' / '%n'}",
            f"TmpFS={root / 'tmp' / '%n'}",
            f"SlurmctldPidFile={root / 'slurmctld.pid'}",
            f"SlurmdPidFile={root / 'spool' / '%n' / 'slurmd.pid'}",
            f"SlurmctldLogFile={root / 'log' / 'slurmctld.log'}",
            f"SlurmdLogFile={root / 'log' / 'slurmd.%n.log'}",
            "SlurmctldDebug=info",
            "SlurmdDebug=info",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core",
            "SchedulerType=sched/builtin",
            "ReturnToService=2",
            "MpiDefault=none",
            "AccountingStorageType=accounting_storage/none",
            "JobAcctGatherType=jobacct_gather/none",
            "JobCompType=jobcomp/none",
            "KillWait=2",
            "InactiveLimit=0",
            "MinJobAge=5",
        ]
        for host in self.testbed.hosts:
            lines.append(
                f"NodeName={host.name} NodeAddr={host.addresses[0]} "
                f"NodeHostname={host.hostname} CPUs={self.cpus} State=UNKNOWN"
            )
        lines.append(
            f"PartitionName={_PARTITION} Nodes=ALL Default=YES MaxTime=INFINITE "
            "State=UP OverSubscribe=YES"
        )
        return "\n".join(lines) + "\n"

    def _start_munge(self) -> None:
        munge = self.root / "munge"
        argv = [
            install.program("munged"),
            "--foreground",
            "--force",
            f"--key-file={self.root / 'munge.key'}",
            f"--socket={self.munge_socket}",
            f"--pid-file={munge / 'munged.pid'}",
            f"--log-file={self.root / 'log' / 'munged.log'}",
            f"--seed-file={munge / 'munged.seed'}",
        ]
        self._daemon("munged", self.head, argv)
        self._wait(lambda: "munged made no socket", self.munge_socket.exists, 0.01)

    def _slurmd(self, host: Host) -> list[str]:
        return [install.program("slurmd"), "-D", "-N", host.name]

    def _daemon(self, label: str, host: Host, argv: Sequence[str]) -> subprocess.Popen[bytes]:
        log = (self.root / "log" / f"{label.replace(' ', '.')}.out").open("wb")
        with log:
            child = subprocess.Popen(
                self.inside(host, argv),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, **self.env},
            )
        self._daemons.append((label, child))
        return child

    def _wait_listening(self, child: subprocess.Popen[bytes], label: str, port: int) -> None:
        # nsenter execs the daemon: its /proc/PID/net is the host's network namespace.
        wanted = f":{port:04X} 00000000:0000 0A"

        def listening() -> bool:
            with contextlib.suppress(OSError):
                return wanted in Path(f"/proc/{child.pid}/net/tcp").read_text()
            return False

        self._wait(lambda: f"{label} did not listen on port {port}", listening, 0.005)

    def _wait(self, failed: Callable[[], str], ready: Callable[[], bool], interval: float) -> None:
        """Poll ``ready`` while the daemons live; past the timeout, say what ``failed``."""
        deadline = time.monotonic() + self.timeout
        while True:
            self._check_daemons()
            if ready():
                return
            if time.monotonic() > deadline:
                raise TestbedUnavailable(
                    f"{failed()} within {self.timeout:g} s: {self._logs_tail()}"
                )
            time.sleep(interval)

    def _check_daemons(self) -> None:
        for label, child in self._daemons:
            if child.poll() is not None:
                raise TestbedUnavailable(
                    f"{label} exited with {child.returncode} while the cluster came up: "
                    f"{self._logs_tail()}"
                )

    def _logs_tail(self) -> str:
        tails = []
        for log in sorted((self.root / "log").glob("*")):
            with contextlib.suppress(OSError):
                lines = log.read_text(errors="replace").strip().splitlines()[-3:]
                if lines:
                    tails.append(f"{log.name}: {' / '.join(lines)}")
        return "; ".join(tails) or "(no log)"

    def states(self) -> dict[str, str]:
        """Each node's state as ``sinfo`` says it (``idle``, ``alloc``, ``down*``...)."""
        done = self.command(["sinfo", "--noheader", "--Node", "--format=%N %t"], timeout=10)
        if done.returncode != 0:
            return {}
        return dict(line.split() for line in done.stdout.splitlines() if line.strip())

    def _wait_idle(self) -> None:
        states: dict[str, str] = {}

        def idle() -> bool:
            states.clear()
            states.update(self.states())
            return sorted(states) == sorted(self.nodes) and set(states.values()) == {"idle"}

        self._wait(
            lambda: f"Slurm's nodes were not idle (sinfo: {states or 'no answer'})", idle, 0.02
        )

    def close(self) -> None:
        """Kill every daemon and its helpers (the testbed removes the files with its state).

        SIGKILL, not SIGTERM: slurmctld may spend seconds saving a state that
        is about to be removed.
        """
        for _, child in self._daemons:
            with contextlib.suppress(ProcessLookupError):
                child.kill()
        for _, child in self._daemons:
            child.wait(timeout=30)
        self._daemons = []
        deadline = time.monotonic() + self.timeout
        while helpers := self._helpers():
            if time.monotonic() > deadline:
                raise TestbedUnavailable(f"Slurm's helpers {helpers} outlived SIGKILL")
            for pid in helpers:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.01)

    def _helpers(self) -> list[int]:
        found = []
        for host in self.testbed.hosts:
            for pid in host.processes():
                with contextlib.suppress(OSError):
                    if Path(f"/proc/{pid}/comm").read_text().strip() in _HELPERS:
                        found.append(pid)
        return found

    # -- using it ----------------------------------------------------------

    def inside(self, host: Host, argv: Sequence[str]) -> list[str]:
        """``argv`` run in ``host``'s network and UTS namespaces (argument words)."""
        return [
            "nsenter",
            f"--net={host.netns_path}",
            f"--uts={host.uts}",
            "--",
            *argv,
        ]

    def command(
        self, argv: Sequence[str], *, timeout: float = 60.0, host: Host | None = None
    ) -> subprocess.CompletedProcess[str]:
        """A Slurm client command (``sinfo``, ``scontrol``...) run on the head node."""
        return subprocess.run(
            self.inside(host or self.head, argv),
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, **self.env},
            check=False,
        )

    def srun_command(
        self,
        argv: Sequence[str],
        *,
        nodes: int,
        tasks: int,
        mpi: str = "pmi2",
        options: Sequence[str] = (),
    ) -> list[str]:
        """``srun`` of ``argv`` as ``tasks`` tasks on ``nodes`` nodes under ``--mpi=mpi``."""
        if mpi not in MPI_PLUGINS:
            raise ValueError(f"--mpi={mpi}: expected one of {', '.join(MPI_PLUGINS)}")
        return [
            install.program("srun"),
            f"--mpi={mpi}",
            f"--nodes={nodes}",
            f"--ntasks={tasks}",
            "--overcommit",
            *options,
            *argv,
        ]

    def start_srun(
        self, argv: Sequence[str], *, env: Mapping[str, str] | None = None, **options: Any
    ) -> subprocess.Popen[str]:
        """Start :meth:`srun_command` on the head node; output captured."""
        return subprocess.Popen(
            self.inside(self.head, self.srun_command(argv, **options)),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **(env or {}), **self.env},
        )

    def srun(
        self,
        argv: Sequence[str],
        *,
        timeout: float = 120.0,
        env: Mapping[str, str] | None = None,
        **options: Any,
    ) -> subprocess.CompletedProcess[str]:
        """:meth:`start_srun`, waited for; a hang cancels the job and raises ``TimeoutExpired``."""
        child = self.start_srun(argv, env=env, **options)
        try:
            stdout, stderr = child.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.command(["scancel", "--full", "--user=root"], timeout=10)
            child.kill()
            child.communicate(timeout=30)
            raise
        return subprocess.CompletedProcess(child.args, child.returncode, stdout, stderr)

    def __repr__(self) -> str:
        return f"<SlurmCluster {' '.join(self.nodes)} conf={shlex.quote(str(self.conf))}>"


__all__ = ["MPI_PLUGINS", "SlurmCluster", "slurm_requirements"]
