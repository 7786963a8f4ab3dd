"""Progress of the ofi module: completions handled in order, once, whatever a callback does.

A receive callback may progress the module again (a send from a callback
that meets ``FI_EAGAIN`` does), and may raise. Completions already read
from the CQ must then be handled in the order read, each once, none lost.
One process, messages to its own endpoint, in a child per provider.
"""

from __future__ import annotations

import json

import pytest

from pmca.testing import run_python

from .test_mpirun import PROVIDERS

NESTED = """
import json, time
import pmca
from pmca.btl import TAG_USER

provider = {provider!r}
with pmca.Session(mca={{"btl": "self,ofi", "btl_ofi_provider_include": provider}}) as session:
    module = next(m for m in session.modules("btl") if m.name == "ofi")
    me = module.endpoint(0)
    got = []

    def on_message(endpoint, tag, data):
        got.append(bytes(data).decode())
        if got[-1] == "first":
            module.send(me, TAG_USER, [b"nested"])
            while "nested" not in got:
                module.progress()      # inside the outer progress call
        if got[-1] == "boom":
            raise RuntimeError("callback failed")

    def deliver(words):
        for word in words:
            module.send(me, TAG_USER, [word.encode()])
        deadline = time.monotonic() + 30
        raised = 0
        while not set(words) <= set(got) and time.monotonic() < deadline:
            try:
                module.progress()
            except RuntimeError:
                raised += 1
        return raised

    module.register_recv(TAG_USER, on_message)
    first = ["first"] + [f"m{{i}}" for i in range(10)]
    deliver(first)
    nested = list(got)
    del got[:]
    raised = deliver(["boom"] + [f"x{{i}}" for i in range(10)])
    module.unregister_recv(TAG_USER)
print(json.dumps({{"nested": nested, "after_raise": got, "raised": raised}}))
"""


@pytest.mark.parametrize("provider", PROVIDERS)
def test_completions_are_handled_in_order_when_a_callback_progresses_or_raises(
    libfabric: None, provider: str
) -> None:
    child = run_python(NESTED.format(provider=provider), timeout=120)
    assert child.returncode == 0, child.stderr[-3000:]
    report = json.loads(child.stdout.strip().splitlines()[-1])
    # The inner progress call goes on with what the outer one had read, in order.
    assert report["nested"] == ["first"] + [f"m{i}" for i in range(10)] + ["nested"]
    # The callback's exception reaches the caller once; nothing read with it is lost.
    assert report["raised"] == 1
    assert report["after_raise"] == ["boom"] + [f"x{i}" for i in range(10)]
