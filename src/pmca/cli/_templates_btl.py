"""The files ``pmca new component btl NAME`` writes: a working loopback btl and its tests.

A btl component is a transport, so its scaffold is one that works as
written: like pmca's btl/self it reaches only its own process, subclasses
:class:`pmca.btl.base.ModuleBase` and carries messages of any size, so that
a session keeps it, ``pmca doctor`` checks it, and its tests send through
it before its author replaces the queue with a real transport.
"""

from __future__ import annotations

from string import Template

__all__ = ["btl_files", "btl_parameters"]

_BTL_COMPONENT = '''\
"""The $name component of pmca's btl framework: a loopback btl to start from.

As written it reaches only its own process, like pmca's btl/self: a send
is queued and ``progress`` hands it to the receiver. To make it a real
transport, publish where peers can reach this process in ``address``,
connect to the peers ``add_procs`` gives (answer an endpoint for each one
reached), move the bytes in ``sendi``/``send`` and deliver what arrives in
``progress``. pmca's guide "The btl module API" describes each operation.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import TYPE_CHECKING

import pmca
from pmca.btl import BtlError, Completion, Endpoint, Flags, Limits, ModexError, Proc
from pmca.btl.base import ModuleBase, read_limits, register_limits

if TYPE_CHECKING:
    from structlog.typing import FilteringBoundLogger

__all__ = ["$component_class", "$module_class"]

#: What this module publishes in the modex: its name and a format version.
ADDRESS = b"$name/1"

#: Open MPI's btl limits; each is a parameter, btl_${name}_<limit>.
DEFAULTS = Limits(
    exclusivity=1024,  # below btl/self's 65536: with self selected, self wins
    latency=10,
    bandwidth=10_000,
    eager_limit=64 * 1024,
    rndv_eager_limit=64 * 1024,
    max_send_size=256 * 1024,
    flags=Flags.SEND,  # no PUT/GET: larger messages go as several sends
    put_limit=0,
    get_limit=0,
)


class Peer:
    """The endpoint of one reachable peer: pmca reads only ``rank``."""

    def __init__(self, rank: int) -> None:
        self.rank = rank


class $module_class(ModuleBase):
    """The transport. ModuleBase keeps the receive callbacks and counts the
    messages for the btl_${name}_* performance variables."""

    def __init__(self, limits: Limits, log: FilteringBoundLogger, label: str) -> None:
        super().__init__("$name", limits, log)
        self.label = label
        self._me: Peer | None = None
        self._queue: deque[tuple[Peer, int, bytes, Completion | None]] = deque()

    def address(self) -> bytes:
        return ADDRESS

    def add_procs(self, procs: Sequence[Proc]) -> list[Endpoint | None]:
        endpoints: list[Endpoint | None] = []
        for proc in procs:
            if proc.local and proc.address not in (None, ADDRESS):
                raise ModexError(f"btl $name: rank {proc.rank} published {proc.address!r}")
            if proc.local:
                self._me = Peer(proc.rank)
            # None: another process is not reached by this loopback.
            endpoints.append(self._me if proc.local else None)
        return endpoints

    def _peer(self, endpoint: Endpoint) -> Peer:
        if self._me is None or endpoint is not self._me:
            raise BtlError(f"btl $name: {endpoint!r} is not this process")
        return self._me

    def sendi(
        self, endpoint: Endpoint, tag: int, parts: Sequence[bytes | bytearray | memoryview]
    ) -> bool:
        # The bytes are copied: once this returns True the caller may reuse its buffers.
        self._queue.append((self._peer(endpoint), tag, b"".join(parts), None))
        return True

    def send(
        self,
        endpoint: Endpoint,
        tag: int,
        parts: Sequence[bytes | bytearray | memoryview],
        callback: Completion | None = None,
    ) -> None:
        self._queue.append((self._peer(endpoint), tag, b"".join(parts), callback))

    def progress(self) -> int:
        done = 0
        while self._queue:
            peer, tag, data, callback = self._queue.popleft()
            self.deliver(peer, tag, memoryview(data))
            if callback is not None:
                callback(None)
            done += 1
        return done

    def finalize(self) -> None:
        # Release everything; what is still queued was never received.
        self._queue.clear()
        self._me = None


'''

_BTL_COMPONENT_REST = """\
        register_limits(params, DEFAULTS)

    @pmca.hookimpl
    def query(self, ctx: pmca.ComponentContext) -> pmca.Query | None:
        limits = read_limits(ctx.params, DEFAULTS)
        module = $module_class(limits, ctx.log, str(ctx.params["label"]))
        return pmca.Query(priority=limits.exclusivity, module=module)
"""

_BTL_TESTS = """\
from pmca.mca.params import Source
from pmca.testing import run_python

FRAMEWORK = "btl"
NAME = "$name"
MODULE_CLASS = "$module_class"
#: The selection parameter's value that uses this component (self reaches this process first).
SELECTION = "self,$name"
LABEL = "btl_${name}_label"
EAGER_LIMIT = "btl_${name}_eager_limit"
#: Sizes through the module: empty, small, the eager limit, several sends' worth.
SIZES = (0, 8, 64 * 1024, 3 * 1024 * 1024 + 5)
"""

_BTL_TESTS_OWN = '''\


def test_messages_to_this_process_arrive_whole(pmca_env: dict[str, str]) -> None:
    with session(NAME) as s:
        assert s.reach(0) == [NAME]
        for size in SIZES:
            data = bytes(range(256)) * (size // 256) + bytes(size % 256)
            out = bytearray(size)
            request = s.p2p.irecv(0, 5, out)
            s.p2p.send(0, 5, data)
            assert request.wait(timeout=60) == size
            assert out == data


def test_its_pvars_count_what_it_moved(pmca_env: dict[str, str]) -> None:
    with session(NAME) as s:
        s.reach(0)
        sent = s.pvar_session().handle(f"btl_{NAME}_messages_sent", obj=0)
        out = bytearray(8)
        request = s.p2p.irecv(0, 6, out)
        s.p2p.send(0, 6, b"12345678")
        request.wait(timeout=60)
        assert sent.read() >= 1


def test_an_eager_limit_above_the_max_send_size_is_refused(pmca_env: dict[str, str]) -> None:
    with pytest.raises(pmca.ParamError, match=EAGER_LIMIT):
        session(**{EAGER_LIMIT: str(1 << 30)}).init()


def test_a_second_session_works_like_the_first() -> None:
    # A fresh process (it inherits the load mode): in dso mode the component
    # is unloaded after the first session and imported again for the second.
    done = run_python(
        f"""
        import pmca
        for _ in range(2):
            with pmca.Session(frameworks=["btl"], mca={{"btl": {NAME!r}}}) as s:
                out = bytearray(4)
                request = s.p2p.irecv(0, 1, out)
                s.p2p.send(0, 1, b"ping")
                request.wait(timeout=60)
                print(s.reach(0) == [{NAME!r}] and bytes(out) == b"ping")
        """,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "True"]
'''


def btl_parameters(name: str) -> str:
    """The README's list of a generated btl's parameters."""
    return (
        f"- `btl_{name}_exclusivity` (int, 1024), `btl_{name}_latency`, `btl_{name}_bandwidth`,"
        f" `btl_{name}_eager_limit`, `btl_{name}_rndv_eager_limit`,"
        f" `btl_{name}_max_send_size`: Open MPI's btl limits, with the defaults in"
        " `DEFAULTS`; the highest exclusivity among the btls reaching a peer wins.\n"
        f"- `btl_{name}_label` (string, `{name}`): the label its module reports."
    )


def btl_files(class_head: str, tests_header: str, common_tests: str) -> dict[str, Template]:
    """The btl component's files: its module around ``class_head`` (every
    component's class up to its label parameter); its test module is
    ``tests_header``, its constants, ``common_tests`` (those of every
    component) and its own."""
    return {
        "src/$package/__init__.py": Template(_BTL_COMPONENT + class_head + _BTL_COMPONENT_REST),
        "tests/test_$package.py": Template(
            tests_header + _BTL_TESTS + common_tests + _BTL_TESTS_OWN
        ),
    }
