"""Throwaway distributions with real entry points, for tests and benchmarks."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from pathlib import Path

from .._public import public


@public
def make_distribution(
    root: Path,
    name: str,
    *,
    version: str = "0.1.0",
    entry_points: Mapping[str, Mapping[str, str]],
    modules: Mapping[str, str] | None = None,
) -> Path:
    """Write an installed-looking distribution into directory ``root``.

    ``root`` is meant to go on ``sys.path``: it gets the modules (name → source)
    and a ``<name>-<version>.dist-info`` with ``METADATA`` and
    ``entry_points.txt``, exactly what an installer leaves behind, so
    ``importlib.metadata`` finds the entry points the real way.
    """
    root.mkdir(parents=True, exist_ok=True)
    for module, source in (modules or {}).items():
        path = root.joinpath(*module.split(".")).with_suffix(".py")
        path.parent.mkdir(parents=True, exist_ok=True)
        for parent in path.parents:
            if parent == root:
                break
            (parent / "__init__.py").touch(exist_ok=True)
        path.write_text(textwrap.dedent(source))
    normalized = name.replace("-", "_")
    info = root / f"{normalized}-{version}.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    lines: list[str] = []
    for group, points in entry_points.items():
        lines.append(f"[{group}]")
        lines.extend(f"{key} = {value}" for key, value in points.items())
        lines.append("")
    (info / "entry_points.txt").write_text("\n".join(lines))
    return info
