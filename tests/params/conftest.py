"""Shared helpers: hermetic parameter spaces over real files in tmp_path."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import pytest

from pmca.mca.params import ParamSpace

SpaceFactory = Callable[..., ParamSpace]


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def write_file() -> Callable[[Path, str], Path]:
    """Write a real file (creating its directory) and return its path."""
    return write


@pytest.fixture
def make_space() -> SpaceFactory:
    """A ParamSpace that never looks at the real environment or the real default files."""

    def factory(
        *,
        environ: Mapping[str, str] | None = None,
        api: Mapping[str, object] | None = None,
        param_files: Sequence[str | Path] | None = (),
        override_file: str | Path | None = "none",
    ) -> ParamSpace:
        return ParamSpace(
            environ={} if environ is None else environ,
            api=api or {},
            param_files=param_files,
            override_file=override_file,
        )

    return factory
