"""``pmca doctor``'s byte-transfer-layer section: a two-process check of every usable btl."""

from __future__ import annotations

from typing import Any

from ._section import Section


def btl_section() -> Any:
    from ..session import Session
    from ._btl_loopback import check, check_self

    section = Section("Byte transfer layer")
    with Session(frameworks=["btl"]) as session:
        modules = session.modules("btl")
        failures = session.failures("btl")
        for module in modules:
            limits = module.limits  # type: ignore[attr-defined]
            section.lines.append(
                f"{module.name:<6} exclusivity {limits.exclusivity:<6} latency {limits.latency:<4} "  # type: ignore[attr-defined]
                f"bandwidth {limits.bandwidth:<7} eager {limits.eager_limit:<7} "
                f"max send {limits.max_send_size:<8} flags {limits.flags!r}"
            )
        names = [module.name for module in modules]  # type: ignore[attr-defined]
    for failure in failures:
        section.add(
            "warn",
            f"btl {failure.component}",
            f"failed in {failure.hook}: {failure.error_type}: {failure.message}",
        )
    results: list[dict[str, Any]] = []
    for name in names:
        result = check_self() if name == "self" else check(name)
        results.append({"btl": name, "ok": result.ok, "detail": result.detail})
        section.add("ok" if result.ok else "fail", f"btl {name}", result.detail)
    if not names:
        section.add("warn", "btl", "no btl component is usable here")
    section.data = {"btls": results}
    return section
