"""The files ``pmca new`` writes, as :class:`string.Template` texts.

Placeholders (``$name``) are filled by :mod:`pmca.cli._new`; ``$$`` is a
literal dollar sign. Each generated distribution installs, and passes its
own tests under ``tox`` in both load modes, unchanged.
"""

from __future__ import annotations

from string import Template

__all__ = [
    "COMPONENT_CLASS_HEAD",
    "COMPONENT_FILES",
    "COMPONENT_TESTS_COMMON",
    "FRAMEWORK_FILES",
    "SHARED_FILES",
    "TESTS_HEADER",
]

_PYPROJECT = """\
[build-system]
requires = ["setuptools>=68", "wheel"]
build-backend = "setuptools.build_meta"

[project]
name = "$distribution"
version = "0.1.0"
description = "$summary"
requires-python = ">=3.10"
dependencies = [$dependencies]

[project.optional-dependencies]
test = ["pytest>=8"]

$entry_points
[tool.setuptools.packages.find]
where = ["src"]

[tool.pytest.ini_options]
testpaths = ["tests"]
"""

_TOX = """\
# Both of pmca's component load modes: `static` (imported once) and `dso`
# (imported afresh at each framework open, unloaded at the last close).
# pmca comes from PMCA_SPEC when it is set: a wheel, an sdist, a checkout
# or a requirement (PMCA_SPEC=/path/to/pmca tox); otherwise from
# $pmca_from.
[tox]
requires = tox>=4.20
env_list = static, dso

[testenv]
description =
    static: the tests with every component loaded statically
    dso: the tests with components loaded and unloaded dynamically
package = wheel
deps =
    {env:PMCA_SPEC:$pmca_spec}
extras = test
pass_env = PMCA_SPEC
commands =
    static: pytest --pmca-load-mode=static {posargs}
    dso: pytest --pmca-load-mode=dso {posargs}
"""

_README = """\
# $distribution

$summary

$what

## Test

```console
tox                       # the tests in both load modes: static and dso
tox run -e dso -- -x      # one mode, options passed on to pytest
```

$pmca_readme

To test against another pmca (a checkout, a wheel you built, an sdist),
name it in `PMCA_SPEC`:

```console
PMCA_SPEC=/path/to/pmca-checkout tox
PMCA_SPEC=/path/to/pmca/dist/$wheel_name tox    # what pmca's `make wheel` builds
```

Without tox: `pip install -e '.[test]'`, then `pytest --pmca-load-mode=static`
and `pytest --pmca-load-mode=dso`.

## Parameters

$parameters

`pmca info --param $param_scope --level 9` lists them with their values and
where each value came from; set them like any MCA parameter
(`PMCA_MCA_<name>=value`, `pmca.Session(mca={...})`, a parameter file).
"""

_GITIGNORE = """\
.tox/
build/
dist/
*.egg-info/
__pycache__/
.pytest_cache/
"""

SHARED_FILES: dict[str, Template] = {
    "pyproject.toml": Template(_PYPROJECT),
    "tox.ini": Template(_TOX),
    "README.md": Template(_README),
    ".gitignore": Template(_GITIGNORE),
}

_COMPONENT = '''\
"""The $name component of pmca's $framework framework."""

from __future__ import annotations

import pmca
from pmca.mca.params import within

__all__ = ["$component_class", "$module_class"]


class $module_class:
    """What users of the $framework framework get from this component.

    Implement the $framework framework's module interface here.
    """

    def __init__(self, label: str) -> None:
        self.label = label


'''

#: A generated component's class up to its label parameter (a btl's too).
COMPONENT_CLASS_HEAD = """\
class $component_class(pmca.Component):
    framework = "$framework"
    name = "$name"
    version = "0.1.0"
    api_version = "$api_version"

    @pmca.hookimpl
    def register(self, params: pmca.ComponentParams) -> None:
        # Declare parameters only: pmca info calls this hook and no other.
        params.register(
            "label",
            type=str,
            default="$name",
            help="The label the $name module reports",
            level=1,
        )
"""

_COMPONENT_REST = """\
        params.register(
            "priority",
            type=int,
            default=5,
            help="Selection priority of the $name component",
            level=5,
            **within(0, 10000),
        )

    @pmca.hookimpl
    def open(self, ctx: pmca.ComponentContext) -> bool:
        # Return False (or raise pmca.NotAvailable("why")) when this component
        # cannot work here: it is then dropped without an error.
        return True

    @pmca.hookimpl
    def query(self, ctx: pmca.ComponentContext) -> pmca.Query | None:
        module = $module_class(ctx.params["label"])
        return pmca.Query(priority=ctx.params["priority"], module=module)

    @pmca.hookimpl
    def close(self, ctx: pmca.ComponentContext) -> None:
        # Release what open and query acquired: in dso mode this module is
        # unloaded after this hook and imported afresh at the next open.
        pass
"""

#: The start of every generated test module; ``$tested`` says what it tests.
TESTS_HEADER = '''\
"""Tests of $tested, in the load mode tox chose.

pmca's pytest plugin (installed with pmca) adds --pmca-load-mode and the
pmca_env and pmca_load_mode fixtures.
"""

from __future__ import annotations

import pmca
import pytest
'''

_COMPONENT_TESTS = """\
from pmca.mca.params import Source
from pmca.testing import run_python

FRAMEWORK = "$framework"
NAME = "$name"
MODULE_CLASS = "$module_class"
#: The selection parameter's value that uses this component.
SELECTION = "$selection"
LABEL = "${framework}_${name}_label"
PRIORITY = "${framework}_${name}_priority"
"""

#: The tests every generated component has (a btl's too), after its constants.
COMPONENT_TESTS_COMMON = '''\


def session(selection: str = SELECTION, **mca: str) -> pmca.Session:
    """A session of the framework, ``selection`` its selection parameter."""
    return pmca.Session(frameworks=[FRAMEWORK], mca={FRAMEWORK: selection, **mca})


def test_found_selected_and_loaded_in_the_mode_of_the_run(
    pmca_env: dict[str, str], pmca_load_mode: str
) -> None:
    with session() as s:
        (info,) = [c for c in s.components(FRAMEWORK) if c.name == NAME]
        assert info.selected
        assert info.distribution is not None
        assert info.distribution.startswith("$distribution ")
        assert info.load_mode == pmca_load_mode
        # In dso mode the module class is imported afresh by the session, so
        # compare by name, not with isinstance against this file's import.
        modules = [m for m in s.modules(FRAMEWORK) if type(m).__name__ == MODULE_CLASS]
        assert [getattr(m, "label", None) for m in modules] == [NAME]


def test_parameters_come_from_every_source(pmca_env: dict[str, str]) -> None:
    pmca_env[f"PMCA_MCA_{LABEL}"] = "from the environment"
    with session() as s:
        label = s.param(LABEL)
        assert label.value == "from the environment"
        assert label.origin.source is Source.ENV
    with session(**{LABEL: "from the API"}) as s:
        label = s.param(LABEL)
        assert label.value == "from the API"
        assert label.origin.source is Source.API


def test_excluded_component_is_not_used(pmca_env: dict[str, str]) -> None:
    with session(f"^{NAME}") as s:
        assert NAME not in [c.name for c in s.components(FRAMEWORK)]
'''

_COMPONENT_TESTS_OWN = '''\


def test_a_bad_priority_is_refused(pmca_env: dict[str, str]) -> None:
    with pytest.raises(pmca.ParamError, match=PRIORITY):
        session(**{PRIORITY: "-1"}).init()


def test_a_second_session_works_like_the_first() -> None:
    # A fresh process (it inherits the load mode): in dso mode the component
    # is unloaded after the first session and imported again for the second.
    done = run_python(
        f"""
        import pmca
        mca = {{{FRAMEWORK!r}: {SELECTION!r}}}
        for _ in range(2):
            with pmca.Session(frameworks=[{FRAMEWORK!r}], mca=mca) as s:
                labels = [getattr(m, "label", None) for m in s.modules({FRAMEWORK!r})]
                print("ok" if {NAME!r} in labels else labels)
        """,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["ok", "ok"]
'''

COMPONENT_FILES: dict[str, Template] = {
    "src/$package/__init__.py": Template(_COMPONENT + COMPONENT_CLASS_HEAD + _COMPONENT_REST),
    "tests/test_$package.py": Template(
        TESTS_HEADER + _COMPONENT_TESTS + COMPONENT_TESTS_COMMON + _COMPONENT_TESTS_OWN
    ),
}

_FRAMEWORK = '''\
"""The $name framework: its declaration and its own hooks."""

from __future__ import annotations

import pmca

__all__ = ["FRAMEWORK", "$spec_class"]


class $spec_class:
    """The $name framework's own hooks, implemented by its components.

    pmca calls them on the selected components only.
    """

    @pmca.hookspec
    def features(self) -> list[str]:  # type: ignore[empty-body]
        """What a component offers: one list per selected component."""

    @pmca.hookspec(firstresult=True)
    def preferred(self) -> str | None:
        """The component's preferred feature; the first answer that is not None wins."""


FRAMEWORK = pmca.Framework(
    name="$name",
    description="$summary",
    api_version="1.0.0",
    interface=$spec_class,
    policy="multi",  # keep every available component, best priority first
    base="$package._base:$base_class",  # imported at the framework's first open
)
'''

_FRAMEWORK_BASE = '''\
"""The $name framework's base logic: one instance per framework open."""

from __future__ import annotations

import pmca
from pmca.mca import FrameworkParams
from pmca.mca.params import within

__all__ = ["$base_class"]


class $base_class(pmca.FrameworkBase):
    """Logic that belongs to the framework, not to one component.

    pmca drops the instance at the last close: keep state here, never in
    module globals, so that nothing outlives the components it points at.
    """

    def register_params(self, params: FrameworkParams) -> None:
        params.register(
            "limit",
            type=int,
            default=8,
            help="How many features the $name framework reports at most",
            level=4,
            **within(1, 1024),
        )

    def opened(self) -> None:
        """After selection: the selected components are known."""

    def closing(self) -> None:
        """At the last close, before any component closes."""
'''

_FRAMEWORK_COMPONENT = '''\
"""The default component of the $name framework."""

from __future__ import annotations

import pmca
from pmca.mca.params import within

__all__ = ["$component_class"]


class $module_class:
    """What users of the $name framework get from the $component component."""

    def __init__(self, feature: str) -> None:
        self.feature = feature


class $component_class(pmca.Component):
    framework = "$name"
    name = "$component"
    version = "0.1.0"
    api_version = "1.0.0"

    def __init__(self) -> None:
        self.feature = "$component"

    @pmca.hookimpl
    def register(self, params: pmca.ComponentParams) -> None:
        params.register(
            "priority",
            type=int,
            default=10,
            help="Selection priority of the $component component",
            level=5,
            **within(0, 10000),
        )
        params.register(
            "feature", type=str, default="$component", help="The feature it offers", level=1
        )

    @pmca.hookimpl
    def query(self, ctx: pmca.ComponentContext) -> pmca.Query | None:
        self.feature = str(ctx.params["feature"])
        module = $module_class(self.feature)
        return pmca.Query(priority=ctx.params["priority"], module=module)

    @pmca.hookimpl
    def features(self) -> list[str]:
        return [self.feature]

    @pmca.hookimpl
    def preferred(self) -> str | None:
        return self.feature
'''

_FRAMEWORK_TESTS = '''\
from pmca.testing import run_python

FRAMEWORK = "$name"
COMPONENT = "$component"
FEATURE = "${name}_${component}_feature"
LIMIT = "${name}_base_limit"


def test_framework_opens_with_its_component(
    pmca_env: dict[str, str], pmca_load_mode: str
) -> None:
    with pmca.Session(frameworks=[FRAMEWORK]) as s:
        (info,) = s.components(FRAMEWORK)
        assert (info.name, info.selected) == (COMPONENT, True)
        assert info.load_mode == pmca_load_mode
        assert info.distribution is not None
        assert info.distribution.startswith("$distribution ")
        features = [getattr(m, "feature", None) for m in s.modules(FRAMEWORK)]
        assert features == [COMPONENT]


def test_its_hooks_reach_the_selected_components(pmca_env: dict[str, str]) -> None:
    with pmca.Session(frameworks=[FRAMEWORK], mca={FEATURE: "fast"}) as s:
        handle = s.framework(FRAMEWORK)
        assert handle.hook.features() == [["fast"]]
        assert handle.hook.preferred() == "fast"


def test_base_parameter_is_registered_and_checked(pmca_env: dict[str, str]) -> None:
    with pmca.Session(frameworks=[FRAMEWORK]) as s:
        assert s.param(LIMIT).value == 8
    with pytest.raises(pmca.ParamError, match=LIMIT):
        pmca.Session(frameworks=[FRAMEWORK], mca={LIMIT: "0"}).init()


def test_excluding_the_component_leaves_the_hooks_unanswered(
    pmca_env: dict[str, str],
) -> None:
    with pmca.Session(frameworks=[FRAMEWORK], mca={FRAMEWORK: f"^{COMPONENT}"}) as s:
        assert s.components(FRAMEWORK) == []
        assert s.framework(FRAMEWORK).hook.features() == []


def test_a_second_session_works_like_the_first() -> None:
    # A fresh process (it inherits the load mode): in dso mode the component
    # is unloaded after the first session and imported again for the second.
    done = run_python(
        f"""
        import pmca
        for _ in range(2):
            with pmca.Session(frameworks=[{FRAMEWORK!r}]) as s:
                print(s.framework({FRAMEWORK!r}).hook.preferred())
        """,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [COMPONENT, COMPONENT]
'''

FRAMEWORK_FILES: dict[str, Template] = {
    "src/$package/__init__.py": Template(_FRAMEWORK),
    "src/$package/_base.py": Template(_FRAMEWORK_BASE),
    "src/$package/$component.py": Template(_FRAMEWORK_COMPONENT),
    "tests/test_$package.py": Template(TESTS_HEADER + _FRAMEWORK_TESTS),
}
