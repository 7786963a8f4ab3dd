"""A simulated cluster on one Linux machine, for tests of anything that spans hosts.

Each host is a network namespace plus a UTS namespace with its own hostname.
Each network is a bridge in a namespace of its own (the switch), and each
host joins each network by a veth pair: ``net0``, ``net1``... inside the
host, addresses from ranges no real network uses (198.18.0.0/15, the
benchmarking range, and the ``fd00::/8`` unique local range). Links can be
rate limited (``tc tbf``, both directions), taken down and brought back; a
host can be frozen (every process in it stopped) and thawed, or killed.

An ssh stand-in, :attr:`Testbed.agent`, runs a command "on" a host by
entering its namespaces, so real launchers start their daemons there:
Open MPI's ``mpirun`` (:meth:`Testbed.prrte_args`) and MPICH's ``mpiexec``
(:meth:`Testbed.hydra_args`).

Everything is named ``pmca-<owner pid>-<n>-...`` and removed on exit; what a
run killed by SIGKILL left behind is removed by the next one. Needs root
(:func:`requirements` says why not, for a skip message).
"""

from __future__ import annotations

import contextlib
import ipaddress
import itertools
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from attrs import define, field

from .._public import public
from ._launch import Launcher
from ._namespaces import (
    CLONE_NEWNET,
    CLONE_NEWUTS,
    PREFIX,
    STATE_ROOT,
    TestbedUnavailable,
    enter,
    make_uts,
    members,
    remove_run,
    remove_stale,
    requirements,
    run,
    signal_all,
    start_time,
)

_sequence = itertools.count()
_IPV4_BASE = ipaddress.IPv4Network("198.18.0.0/15")
_IPV6_BASE = ipaddress.IPv6Network("fd70:6d63:6100::/48")  # "pmca" in the ULA range


@public
@define(eq=False)
class Host:
    """One simulated host: its namespaces and its address on each network."""

    testbed: Testbed = field(repr=False)
    index: int
    #: The name launchers use for it (what the ssh stand-in is given).
    name: str
    #: What ``gethostname()`` says inside it.
    hostname: str
    netns: str
    uts: Path
    #: Per network: its IPv4 address (and IPv6 address when the testbed has them).
    addresses: list[str]
    addresses6: list[str]

    @property
    def netns_path(self) -> Path:
        return Path("/run/netns") / self.netns

    def interface(self, network: int) -> str:
        """The name of this host's interface on ``network``."""
        return f"net{network}"

    def _switch_port(self, network: int) -> str:
        return f"h{self.index}n{network}"

    def command(self, argv: Sequence[str]) -> list[str]:
        """``argv`` run inside this host (through the ssh stand-in)."""
        return [str(self.testbed.agent), self.name, *argv]

    def popen(self, argv: Sequence[str], **kwargs: Any) -> subprocess.Popen[Any]:
        """Start ``argv`` inside this host (argument words, not a shell line)."""
        return subprocess.Popen([*self.testbed.enter_command(self), *argv], **kwargs)

    def processes(self) -> list[int]:
        """The processes running inside this host now."""
        return members(self.netns_path)

    def link_down(self, network: int | None = None) -> None:
        """Pull this host's cable on ``network`` (all of them by default)."""
        for index in self.testbed.network_indices(network):
            run("ip", "-n", self.testbed.switch, "link", "set", self._switch_port(index), "down")

    def link_up(self, network: int | None = None) -> None:
        """Plug it back."""
        for index in self.testbed.network_indices(network):
            run("ip", "-n", self.testbed.switch, "link", "set", self._switch_port(index), "up")

    def limit(self, rate: str, network: int | None = None, *, burst: str = "256kb") -> None:
        """Limit this host's link on ``network`` to ``rate`` (e.g. ``"500mbit"``) both ways."""
        for index in self.testbed.network_indices(network):
            for namespace, device in (
                (self.netns, self.interface(index)),
                (self.testbed.switch, self._switch_port(index)),
            ):
                run(
                    "tc", "-n", namespace, "qdisc", "replace", "dev", device, "root",
                    "tbf", "rate", rate, "burst", burst, "latency", "100ms",
                )  # fmt: skip

    def freeze(self) -> list[int]:
        """Hang this host: its links fall silent and every process in it stops.

        A hung machine's kernel answers nothing either; stopping only the
        processes would leave this host's kernel acknowledging data, which no
        peer can tell from a busy rank. Returns the stopped processes.
        """
        self.link_down()
        pids = self.processes()
        signal_all(pids, signal.SIGSTOP)
        return pids

    def thaw(self) -> None:
        """Bring a frozen host back: processes run again, links answer."""
        signal_all(self.processes(), signal.SIGCONT)
        self.link_up()

    def kill(self) -> None:
        """Kill every process in this host (the host crashed)."""
        signal_all(self.processes(), signal.SIGKILL)


@public
class Testbed:
    """``hosts`` simulated hosts on ``networks`` networks; a context manager.

    ``hostnames`` sets what each host calls itself (default ``<tag>-h<i>``;
    two hosts may share one, as two real hosts should never do but a test of
    host identity wants); launchers still tell them apart by :attr:`Host.name`.
    ``rate`` limits every link (``tc tbf``), ``ipv6`` adds an IPv6 address on
    every network.
    """

    __test__ = False  # not a pytest test class, whatever its name

    def __init__(
        self,
        hosts: int = 2,
        networks: int = 1,
        *,
        hostnames: Sequence[str] | None = None,
        rate: str | None = None,
        ipv6: bool = False,
    ) -> None:
        why = requirements()
        if why is not None:
            raise TestbedUnavailable(why)
        if not 1 <= hosts <= 200 or not 1 <= networks <= 100:
            raise ValueError(
                f"a testbed has 1-200 hosts and 1-100 networks, not {hosts}/{networks}"
            )
        if hostnames is not None and len(hostnames) != hosts:
            raise ValueError(f"{len(hostnames)} hostnames given for {hosts} hosts")
        self.tag = f"{PREFIX}{os.getpid()}-{next(_sequence)}"
        self.state = STATE_ROOT / self.tag
        self.switch = f"{self.tag}-switch"
        self.ipv6 = ipv6
        self.networks = [
            ipaddress.IPv4Network((int(_IPV4_BASE.network_address) + (k << 8), 24))
            for k in range(networks)
        ]
        self.networks6 = [
            ipaddress.IPv6Network((int(_IPV6_BASE.network_address) + (k << 80), 64))
            for k in range(networks)
        ]
        self.hosts: list[Host] = []
        self.agent = self.state / "agent"
        #: The ``TMPDIR`` of every job :meth:`start_mpi` starts, removed with the
        #: testbed: launchers and their daemons leave session files there when
        #: killed.
        self.scratch = self.state / "tmp"
        self._names = hostnames
        self._count = hosts
        self._rate = rate

    # -- building and removing ---------------------------------------------

    def __enter__(self) -> Testbed:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def start(self) -> Testbed:
        remove_stale()
        self.state.mkdir(parents=True)
        self.scratch.mkdir()
        (self.state / "owner").write_text(f"{os.getpid()} {start_time(os.getpid())}\n")
        try:
            self._build()
        except BaseException:
            self.close()
            raise
        return self

    def _build(self) -> None:
        run("ip", "netns", "add", self.switch)
        for k in range(len(self.networks)):
            run("ip", "-n", self.switch, "link", "add", f"br{k}", "type", "bridge")
            run("ip", "-n", self.switch, "link", "set", f"br{k}", "up")
        for i in range(self._count):
            self.hosts.append(self._add_host(i))
        self._write_agent()
        if self._rate is not None:
            for host in self.hosts:
                host.limit(self._rate)

    def _add_host(self, i: int) -> Host:
        name = f"{self.tag}-h{i}"
        hostname = self._names[i] if self._names is not None else name
        uts = self.state / f"h{i}.uts"
        run("ip", "netns", "add", name)
        make_uts(uts, hostname)
        host = Host(self, i, name, hostname, name, uts, [], [])
        run("ip", "-n", name, "link", "set", "lo", "up")
        for k, network in enumerate(self.networks):
            inside, port = host.interface(k), host._switch_port(k)
            run(
                "ip", "link", "add", inside, "netns", name, "type", "veth",
                "peer", "name", port, "netns", self.switch,
            )  # fmt: skip
            run("ip", "-n", self.switch, "link", "set", port, "master", f"br{k}", "up")
            address = network[i + 1]
            run("ip", "-n", name, "addr", "add", f"{address}/{network.prefixlen}", "dev", inside)
            host.addresses.append(str(address))
            if self.ipv6:
                address6 = self.networks6[k][i + 1]
                run(
                    "ip", "-n", name, "addr", "add", f"{address6}/64", "dev", inside, "nodad",
                )  # fmt: skip
                host.addresses6.append(str(address6))
            run("ip", "-n", name, "link", "set", inside, "up")
        return host

    def _write_agent(self) -> None:
        table = {h.name: {"net": str(h.netns_path), "uts": str(h.uts)} for h in self.hosts}
        (self.state / "hosts.json").write_text(json.dumps(table))
        self.agent.write_text(
            f"#!{sys.executable}\n"
            "import sys\n"
            "from pmca.testing._agent import main\n"
            f"sys.exit(main({str(self.state / 'hosts.json')!r}, sys.argv[1:]))\n"
        )
        self.agent.chmod(0o755)

    def close(self) -> None:
        """Kill what runs in the hosts and remove every namespace and file."""
        for host in self.hosts:
            with contextlib.suppress(OSError):
                host.kill()
        remove_run(self.tag)
        self.hosts = []

    # -- using it ----------------------------------------------------------

    def network_indices(self, network: int | None) -> range:
        if network is None:
            return range(len(self.networks))
        if not 0 <= network < len(self.networks):
            raise ValueError(f"network {network}: this testbed has {len(self.networks)}")
        return range(network, network + 1)

    def enter_command(self, host: Host) -> list[str]:
        """A command prefix that runs what follows inside ``host`` (argument words)."""
        return [
            sys.executable,
            "-m",
            "pmca.testing._agent",
            "--exec",
            str(self.state / "hosts.json"),
            host.name,
        ]

    def cidr(self, network: int = 0) -> str:
        """The IPv4 range of ``network`` (for ``btl_tcp_if_include``, ``oob_tcp_if_include``)."""
        return str(self.networks[network])

    def prrte_args(self, ranks_per_host: int = 1, network: int = 0) -> list[str]:
        """``mpirun`` options that start one daemon per host through the ssh stand-in."""
        hosts = ",".join(f"{h.name}:{ranks_per_host}" for h in self.hosts)
        return [
            "--host", hosts, "--map-by", "node",
            "--prtemca", "plm_ssh_agent", str(self.agent),
            "--prtemca", "plm_ssh_no_tree_spawn", "1",
            "--prtemca", "oob_tcp_if_include", self.cidr(network),
        ]  # fmt: skip

    def hydra_args(self, ranks_per_host: int = 1, network: int = 0) -> list[str]:
        """``mpiexec`` (Hydra) options: ssh launcher through the stand-in, round robin."""
        hosts = ",".join(f"{h.name}:{ranks_per_host}" for h in self.hosts)
        return [
            "-launcher", "ssh", "-launcher-exec", str(self.agent),
            "-hosts", hosts, "-iface", self.hosts[0].interface(network),
        ]  # fmt: skip

    def launcher_args(
        self, launcher: Launcher, ranks_per_host: int = 1, network: int = 0
    ) -> list[str]:
        """Options that make ``launcher`` start ranks on these hosts through the stand-in."""
        if launcher.name == "openmpi":
            return self.prrte_args(ranks_per_host, network)
        return self.hydra_args(ranks_per_host, network)

    def start_mpi(
        self,
        launcher: Launcher,
        ranks_per_host: int,
        argv: Sequence[str],
        *,
        network: int = 0,
        env: Mapping[str, str] | None = None,
        launcher_args: Sequence[str] = (),
    ) -> subprocess.Popen[str]:
        """Start ``python argv...`` with ``ranks_per_host`` ranks on every host.

        The launcher runs on the first host (the head node), as it would on a
        real cluster; the ranks inherit this environment plus ``env``, and
        :attr:`scratch` as ``TMPDIR`` unless ``env`` names one. Output is
        captured (``communicate()``).
        """
        extra = [*self.launcher_args(launcher, ranks_per_host, network), *launcher_args]
        ranks = ranks_per_host * len(self.hosts)
        command = [
            *self.enter_command(self.hosts[0]),
            *launcher.command(ranks, extra),
            sys.executable, "-X", "faulthandler", *argv,
        ]  # fmt: skip
        return subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "TMPDIR": str(self.scratch), **(env or {})},
        )

    def run_mpi(
        self,
        launcher: Launcher,
        ranks_per_host: int,
        argv: Sequence[str],
        *,
        timeout: float = 180.0,
        **options: Any,
    ) -> subprocess.CompletedProcess[str]:
        """:meth:`start_mpi`, waited for; a hang raises ``TimeoutExpired``."""
        child = self.start_mpi(launcher, ranks_per_host, argv, **options)
        try:
            stdout, stderr = child.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.stop(child)
            raise
        return subprocess.CompletedProcess(child.args, child.returncode, stdout, stderr)

    def stop(self, child: subprocess.Popen[str]) -> tuple[str, str]:
        """Kill a job :meth:`start_mpi` started, everywhere; return its output so far.

        Its daemons on other hosts hold the launcher's output pipes (as an ssh
        session would until killed), so they go too: every process of every host.
        """
        for host in self.hosts:
            host.kill()
        child.kill()
        stdout, stderr = child.communicate(timeout=30)
        return stdout or "", stderr or ""

    def wait_quiet(self, host: Host, timeout: float = 10.0) -> bool:
        """Wait until nothing runs in ``host`` (its job ended); whether it did in time."""
        deadline = time.monotonic() + timeout
        while host.processes():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True


def host_table(path: str) -> Mapping[str, Mapping[str, str]]:
    with open(path) as f:
        table: Mapping[str, Mapping[str, str]] = json.load(f)
    return table


def enter_host(table: Mapping[str, Mapping[str, str]], host: str) -> None:
    """Move this process into ``host``'s network and UTS namespaces."""
    entry = table[host]
    enter(entry["net"], CLONE_NEWNET)
    enter(entry["uts"], CLONE_NEWUTS)


__all__ = ["Host", "Testbed", "TestbedUnavailable", "enter_host", "host_table", "requirements"]
