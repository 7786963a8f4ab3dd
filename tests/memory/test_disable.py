"""``memory_patcher_disable``: no hooks at all, and a clear answer to anyone who asks for them."""

from __future__ import annotations

import pytest

import pmca
from pmca.runtime import RUNTIME
from pmca.testing import run_python
from tests.memory.conftest import hooks_gone

DISABLE = "PMCA_MCA_memory_patcher_disable"


def ignore(address: int, length: int, kind: str, from_alloc: bool) -> None:
    pass


@pytest.mark.parametrize("mode", ["none", "all"], ids=["static", "dso"])
def test_environment_disables_hooks(pmca_env: dict[str, str], mode: str) -> None:
    pmca_env[DISABLE] = "1"
    with pmca.Session(mca={"mca_base_component_dso": mode}, frameworks=["memory"]) as session:
        assert [c.name for c in session.components("memory")] == ["none"]
        assert pmca.memory.support_level() == pmca.memory.Support.NONE
        with pytest.raises(pmca.memory.MemoryHooksUnavailable, match="none") as refused:
            pmca.memory.register_release(ignore)
        assert "memory component" in str(refused.value)
        assert pmca.native.dispatcher().subscriber_count == 0
        assert hooks_gone()
        assert "patcher" not in RUNTIME.frameworks  # never even opened


def test_disabled_in_a_fresh_process() -> None:
    # The documented way: only the environment, in a process that never had hooks.
    result = run_python(
        """
        import pmca, pmca.native as native
        from pmca.memory.patcher._module import SYMBOLS
        with pmca.Session() as s:
            print("selected", s.components("memory")[0].name)
            print("support", int(pmca.memory.support_level()))
            try:
                pmca.memory.register_release(lambda *a: None)
            except pmca.memory.MemoryHooksUnavailable as exc:
                print("refused", exc)
            print("patched", any(native.backend().is_installed(x) for x in SYMBOLS))
        """,
        timeout=120,
        env={DISABLE: "1"},
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "selected none" in lines
    assert "support 0" in lines
    assert any(line.startswith("refused ") for line in lines)
    assert "patched False" in lines


def test_disabled_hooks_do_not_break_components_needing_registration(
    pmca_env: dict[str, str], registering_framework: str
) -> None:
    pmca_env[DISABLE] = "1"
    with (
        pmca.Session(frameworks=["memory"]),
        pmca.Session(frameworks=[registering_framework]) as inner,
    ):
        assert [c.name for c in inner.components(registering_framework)] == ["pinned"]
        assert pmca.memory.support_level() == pmca.memory.Support.NONE
        assert hooks_gone()


def test_refusal_names_why_the_hooks_are_missing(pmca_env: dict[str, str]) -> None:
    pmca_env[DISABLE] = "1"
    with (
        pmca.Session(frameworks=["memory"]),
        pytest.raises(pmca.memory.MemoryHooksUnavailable, match="memory_patcher_disable"),
    ):
        pmca.memory.register_release(lambda *event: None)
