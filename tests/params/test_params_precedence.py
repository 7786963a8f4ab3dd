"""The full source precedence matrix, every pair of sources, over real files."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path

import pytest

from pmca.mca.params import ParamPermissionError, ParamSpace, Source

SpaceFactory = Callable[..., ParamSpace]
# The override-versus-explicit-value warning has its own tests.
pytestmark = pytest.mark.filterwarnings("ignore::pmca.mca.params.ParamWarning")


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


NAME = "test_comp_knob"
# Each source gives its own value, so the winner is visible in the value too.
VALUES = {
    Source.DEFAULT: 0,
    Source.FILE: 1,
    Source.ENV: 2,
    Source.API: 3,
    Source.SET: 4,
    Source.OVERRIDE: 5,
}


def build(
    tmp_path: Path, sources: set[Source], make_space: SpaceFactory
) -> tuple[ParamSpace, dict[Source, str]]:
    """A space where exactly ``sources`` give a value for NAME; returns it and expected origins."""
    environ: dict[str, str] = {}
    api: dict[str, object] = {}
    files: list[Path] = []
    override: Path | str = "none"
    origins = {Source.DEFAULT: "default", Source.API: "command line", Source.SET: "set"}
    if Source.FILE in sources:
        conf = write(tmp_path / "a.conf", f"# header\n{NAME} = {VALUES[Source.FILE]}\n")
        files.append(conf)
        origins[Source.FILE] = f"file ({conf}:2)"
    if Source.ENV in sources:
        environ[f"PMCA_MCA_{NAME}"] = str(VALUES[Source.ENV])
        origins[Source.ENV] = f"environment (PMCA_MCA_{NAME})"
    if Source.API in sources:
        api[NAME] = str(VALUES[Source.API])
    if Source.OVERRIDE in sources:
        override = write(tmp_path / "override.conf", f"\n\n{NAME} = {VALUES[Source.OVERRIDE]}\n")
        origins[Source.OVERRIDE] = f"override ({override}:3)"
    space = make_space(environ=environ, api=api, param_files=files, override_file=override)
    space.register("test", "comp", "knob", type=int, default=VALUES[Source.DEFAULT], settable=True)
    return space, origins


PAIRS = list(itertools.combinations(sorted(Source), 2))


def test_every_pair_is_covered() -> None:
    assert len(PAIRS) == 15
    assert all(low < high for low, high in PAIRS)


@pytest.mark.parametrize(("low", "high"), PAIRS, ids=[f"{h.name}>{lo.name}" for lo, h in PAIRS])
def test_higher_source_wins(
    tmp_path: Path, make_space: SpaceFactory, low: Source, high: Source
) -> None:
    space, origins = build(tmp_path, {low, high}, make_space)
    if Source.SET in (low, high):
        if high is Source.OVERRIDE:
            # set() must never beat the override file, and says why.
            with pytest.raises(ParamPermissionError) as info:
                space.set(NAME, VALUES[Source.SET])
            message = str(info.value)
            assert NAME in message
            assert f"locked by override file {tmp_path / 'override.conf'}:3" in message
        else:
            space.set(NAME, str(VALUES[Source.SET]))
    param = space.get(NAME)
    assert param.value == VALUES[high]
    assert param.origin.source is high
    assert str(param.origin) == origins[high]


@pytest.mark.parametrize("only", sorted(Source), ids=lambda s: s.name)
def test_each_source_alone(tmp_path: Path, make_space: SpaceFactory, only: Source) -> None:
    space, origins = build(tmp_path, {only}, make_space)
    if only is Source.SET:
        space.set(NAME, VALUES[Source.SET])
    assert space.value(NAME) == VALUES[only]
    assert str(space.origin(NAME)) == origins[only]


def test_all_sources_at_once_override_wins_and_locks(
    tmp_path: Path, make_space: SpaceFactory
) -> None:
    space, origins = build(tmp_path, set(Source) - {Source.SET}, make_space)
    with pytest.warns(UserWarning, match="override file"):
        # Re-registering re-resolves and warns again about the ignored values.
        space.deregister(NAME)
        space.register("test", "comp", "knob", type=int, default=0, settable=True)
    param = space.get(NAME)
    assert param.value == VALUES[Source.OVERRIDE]
    assert str(param.origin) == origins[Source.OVERRIDE]
    assert not param.settable
    assert param.declared_settable
    with pytest.raises(ParamPermissionError, match=r"override\.conf:3"):
        space.set(NAME, 7)
    assert param.value == VALUES[Source.OVERRIDE]


def test_leftmost_file_wins(tmp_path: Path, make_space: SpaceFactory) -> None:
    left = write(tmp_path / "left.conf", "test_comp_knob = 10\n")
    right = write(tmp_path / "right.conf", "test_comp_knob = 20\ntest_comp_other = 30\n")
    space = make_space(param_files=[left, right])
    knob = space.register("test", "comp", "knob", type=int, default=0)
    other = space.register("test", "comp", "other", type=int, default=0)
    assert knob.value == 10
    assert str(knob.origin) == f"file ({left}:1)"
    # A name only the right file gives still comes from it.
    assert other.value == 30
    assert str(other.origin) == f"file ({right}:2)"
    assert space.param_files == (str(left), str(right))


def test_leftmost_file_wins_through_mca_base_param_files(
    tmp_path: Path, make_space: SpaceFactory
) -> None:
    left = write(tmp_path / "left.conf", "test_comp_knob = 10\n")
    right = write(tmp_path / "right.conf", "test_comp_knob = 20\n")
    space = make_space(
        environ={"PMCA_MCA_mca_base_param_files": f"{left} , {right}"}, param_files=None
    )
    assert space.value("mca_base_param_files") == f"{left} , {right}"
    assert space.register("test", "comp", "knob", type=int, default=0).value == 10


def test_last_line_wins_within_one_file(tmp_path: Path, make_space: SpaceFactory) -> None:
    conf = write(tmp_path / "a.conf", "test_comp_knob = 1\ntest_comp_knob = 2\n")
    space = make_space(param_files=[conf])
    param = space.register("test", "comp", "knob", type=int, default=0)
    assert param.value == 2
    assert str(param.origin) == f"file ({conf}:2)"


def test_api_beats_env_for_typed_python_values(make_space: SpaceFactory) -> None:
    space = make_space(environ={"PMCA_MCA_test_comp_flag": "false"}, api={"test_comp_flag": True})
    param = space.register("test", "comp", "flag", type=bool, default=False)
    assert param.value is True
    assert str(param.origin) == "command line"


def test_set_after_set_and_origin(make_space: SpaceFactory) -> None:
    space = make_space(api={NAME: 3})
    space.register("test", "comp", "knob", type=int, default=0, settable=True)
    space.set(NAME, 8)
    space.set(NAME, "9")
    assert space.value(NAME) == 9
    assert str(space.origin(NAME)) == "set"
