"""``pmca doctor``'s byte-transfer-layer sections: a two-process check of every usable btl.

pmca's own btls are judged: a failed check fails the verdict. A third
party's btl is checked the same way and reported in a section of its own,
named with its distribution and version and the reason in words; it never
changes the verdict (doctor judges pmca, not the plugins installed with it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs

from ._section import Section

if TYPE_CHECKING:
    from ..mca._component_info import ComponentInfo
    from ..session import Session

#: The title of the section with third-party components, reported but not judged.
THIRD_PARTY_TITLE = "Third-party components (reported, not judged)"


def _origin(info: ComponentInfo) -> str:
    """``distribution pmca-foo 1.2.0`` (or where a component without one came from)."""
    return f"distribution {info.distribution}" if info.distribution else info.location


def module_rows(session: Session, modules: list[Any]) -> list[str]:
    """One row of limits per btl module, the eager limit as ``pmca info`` shows it.

    btl/tcp is a module per interface address (rails); with rails on two or
    more network links, their eager limit drops to ``btl_tcp_rndv_eager_limit`` so that a
    larger message is striped. The row gives the parameter's value, and a
    line under it the rails whose limit differs, and why.
    """
    rows: list[str] = []
    for module in modules:
        limits, name = module.limits, module.name
        eager = _eager_param(session, name, limits.eager_limit)
        rows.append(
            f"{name:<6} exclusivity {limits.exclusivity:<6} latency {limits.latency:<4} "
            f"bandwidth {limits.bandwidth:<7} eager {eager:<7} "
            f"max send {limits.max_send_size:<8} flags {limits.flags!r}"
        )
        rails = [module, *getattr(module, "rails", ())]
        lowered = [r for r in rails if r.limits.eager_limit != eager]
        for limit in sorted({r.limits.eager_limit for r in lowered}):
            where = ", ".join(
                f"{r.interface.name} {r.interface.address}"
                for r in lowered
                if r.limits.eager_limit == limit
            )
            why = (
                f": btl_{name}_rndv_eager_limit, as there are rails on two or more network links, "
                "so that a larger message is striped over them"
                if name == "tcp"
                else ""
            )
            rows.append(f"{'':<6} eager {limit} on {where}{why}")
    return rows


def _eager_param(session: Session, name: str, fallback: int) -> int:
    """``btl_<name>_eager_limit``, as ``pmca info`` shows it (a third party may not have it)."""
    from ..mca.params import ParamError

    try:
        return int(str(session.param(f"btl_{name}_eager_limit").value))
    except ParamError:
        return fallback


def btl_sections() -> list[Section]:
    """The judged btl section and the third-party section (empty ones are left out)."""
    from ..session import Session
    from ._btl_loopback import check, check_self

    section = Section("Byte transfer layer")
    third = Section(THIRD_PARTY_TITLE, judged=False)
    with Session(frameworks=["btl"]) as session:
        modules = session.modules("btl")
        failures = session.failures("btl")
        infos = {info.name: info for info in session.components("btl")}
        section.lines.extend(module_rows(session, modules))
        names = [module.name for module in modules]  # type: ignore[attr-defined]
    for failure in failures:
        if failure.location.startswith("built-in"):
            section.add(
                "warn",
                f"btl {failure.component}",
                f"failed in {failure.hook}: {failure.error_type}: {failure.message}",
            )
        else:
            origin = (
                f"distribution {failure.distribution}" if failure.distribution else failure.location
            )
            third.add(
                "warn",
                f"btl {failure.component}",
                f"{origin}: skipped, its {failure.hook} hook failed: {failure.message}",
            )
    results: list[dict[str, Any]] = []
    for name in names:
        result = check_self() if name == "self" else check(name)
        info = infos.get(name)
        own = info is None or info.location.startswith("built-in")
        if not own and not result.reached_peer:
            # A third party's loopback (pmca new's btl as generated) is checked like self.
            alone = check_self(name)
            if alone.ok:
                result = attrs.evolve(alone, detail=f"reaches only its own process: {alone.detail}")
        results.append({"btl": name, "ok": result.ok, "detail": result.detail, "own": own})
        if info is None or own:
            section.add("ok" if result.ok else "fail", f"btl {name}", result.detail)
        elif result.ok:
            third.add("ok", f"btl {name}", f"{_origin(info)}: {result.detail}")
        else:
            why = f"the two-process check failed: {result.reason}"
            third.add("warn", f"btl {name}", f"{_origin(info)}: {why}")
    if not names:
        section.add("warn", "btl", "no btl component is usable here")
    section.data = {"btls": [r for r in results if r["own"]]}
    third.data = {"btls": [r for r in results if not r["own"]]}
    return [section, third] if third.checks else [section]
