"""The simulated cluster itself, and host identity across its hosts."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from pmca.btl import FRAMEWORK
from pmca.testing import Testbed, testbed_requirements
from pmca.testing._agent import split

from ._killed_run import killed_run

pytestmark = pytest.mark.cluster

_PAIR = str(Path(__file__).with_name("_pair.py"))
_HAS_SM = any(ref.name == "sm" for ref in FRAMEWORK.static_components)


@pytest.mark.parametrize(
    ("argv", "host", "command"),
    [
        (["h1", "prted", "--x"], "h1", ["prted", "--x"]),
        (["-x", "-p", "22", "-oBatchMode=yes", "user@h2", "echo", "hi"], "h2", ["echo", "hi"]),
        (["-T", "-i", "key", "-p22", "--", "h3", "true"], "h3", ["true"]),
    ],
)
def test_the_ssh_stand_in_reads_ssh_command_lines(
    argv: list[str], host: str, command: list[str]
) -> None:
    assert split(argv) == (host, command)


def test_hosts_have_their_own_names_networks_and_links(
    pmca_testbed: Callable[..., Testbed],
) -> None:
    testbed = pmca_testbed(2, networks=2, ipv6=True)
    seen = set()
    for host in testbed.hosts:
        probe = (
            "import os, socket; print(socket.gethostname(), os.stat('/proc/self/ns/net').st_ino)"
        )
        done = subprocess.run(
            [str(testbed.agent), "-x", host.name, sys.executable, "-c", f'"{probe}"'],
            capture_output=True, text=True, check=True, timeout=30,
        )  # fmt: skip
        name, netns = done.stdout.split()
        assert name == host.hostname
        seen.add(netns)
        shown = subprocess.run(
            [*testbed.enter_command(host), "ip", "-o", "addr"],
            capture_output=True, text=True, check=True, timeout=30,
        ).stdout  # fmt: skip
        for address in host.addresses + host.addresses6:
            assert address in shown, shown
    assert len(seen) == 2 and str(os.stat("/proc/self/ns/net").st_ino) not in seen
    unknown = subprocess.run(
        [str(testbed.agent), "nowhere", "true"], capture_output=True, text=True, timeout=30
    )
    assert unknown.returncode == 255 and "nowhere" in unknown.stderr


def test_a_killed_run_is_cleaned_up_by_the_next(tmp_path: Path) -> None:
    why = testbed_requirements()
    if why is not None:
        pytest.skip(why)
    build = "from pmca.testing import Testbed\ntestbed = Testbed(2).start()\n"
    tag = killed_run(tmp_path, build)
    assert any(p.name.startswith(tag) for p in Path("/run/netns").iterdir())
    with Testbed(1) as testbed:
        assert testbed.tag != tag
        assert not any(p.name.startswith(tag + "-") for p in Path("/run/netns").iterdir())
        assert not (Path("/run/pmca-testbed") / tag).exists()


def _pair(testbed: Testbed, mca: dict[str, object]) -> list[dict[str, object]]:
    ends = socket.socketpair()
    children = []
    for rank, (host, end) in enumerate(zip(testbed.hosts, ends, strict=True)):
        argv = [sys.executable, _PAIR, str(end.fileno()), str(rank), json.dumps(mca)]
        children.append(
            host.popen(argv, pass_fds=[end.fileno()], stdout=subprocess.PIPE, text=True)
        )
    for end in ends:
        end.close()
    results = []
    for child in children:
        stdout, _ = child.communicate(timeout=300)
        assert child.returncode == 0, stdout
        results.append(json.loads(stdout.strip().splitlines()[-1]))
    return results


@pytest.mark.skipif(not _HAS_SM, reason="the sm btl is not built")
def test_two_hosts_with_one_hostname_never_share_memory(
    pmca_env, pmca_testbed: Callable[..., Testbed]
) -> None:
    testbed = pmca_testbed(2, hostnames=["twin", "twin"])
    results = _pair(testbed, {"btl": "self,sm,tcp"})
    assert [r["hostname"] for r in results] == ["twin", "twin"]
    assert results[0]["netns"] != results[1]["netns"]
    for result in results:
        assert result["reach"] == ["tcp"], result
        assert result["intact"], result


def test_tcp_runs_over_ipv6_alone(pmca_env, pmca_testbed: Callable[..., Testbed]) -> None:
    testbed = pmca_testbed(2, ipv6=True)
    results = _pair(testbed, {"btl": "self,tcp", "btl_tcp_if_include": "fd70:6d63:6100::/48"})
    for result in results:
        assert result["reach"] == ["tcp"] and result["intact"], result


def test_container_bridges_are_left_out_unless_named(
    pmca_env, pmca_testbed: Callable[..., Testbed]
) -> None:
    testbed = pmca_testbed(1)
    (host,) = testbed.hosts
    inside = testbed.enter_command(host)
    subprocess.run([*inside, "ip", "link", "add", "docker0", "type", "bridge"], check=True)
    subprocess.run([*inside, "ip", "addr", "add", "198.18.200.1/24", "dev", "docker0"], check=True)
    probe = (
        "import sys, pmca; mca = {'btl': 'tcp', **dict([sys.argv[1:]] if sys.argv[1:] else [])}\n"
        "with pmca.Session(mca=mca, frameworks=['btl']) as s:\n"
        "    print(sorted({i.name for i in s.modules('btl')[0].settings.interfaces}))"
    )
    default = subprocess.run(
        [*inside, sys.executable, "-c", probe], capture_output=True, text=True, timeout=60
    )
    assert default.stdout.strip() == "['lo', 'net0']", default.stdout + default.stderr
    named = subprocess.run(
        [*inside, sys.executable, "-c", probe, "btl_tcp_if_include", "docker0"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert named.stdout.strip() == "['docker0']", named.stdout + named.stderr
    info = subprocess.run(
        [*inside, sys.executable, "-m", "pmca.cli", "info", "--tcp-interfaces"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert (
        "docker0 198.18.200.1/24: left out: a container/VM bridge (name it in "
        "btl_tcp_if_include)" in info.stdout
    ), info.stdout + info.stderr
    assert "net0 " in info.stdout and "chosen: default" in info.stdout, info.stdout
