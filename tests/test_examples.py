"""Every runnable example runs, in this run's load mode."""

from __future__ import annotations

import ast
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests._matrix import elsewhere_in_matrix

EXAMPLES = sorted((Path(__file__).parent.parent / "examples").glob("*.py"))

#: ``# needs: mpi4py from pmca[mpi]``: a module beyond pmca's own dependencies,
#: and the extra that installs it.
_NEEDS = re.compile(r"^# needs: (?P<module>[\w.]+) from (?P<extra>pmca\[\w+\])$", re.MULTILINE)

#: What pmca itself depends on at run time: an example may import these freely.
_DEPENDENCIES = {"pmca", "pluggy", "attrs", "structlog", "importlib_metadata"}


#: What an example runs with where the matrix runs it in full elsewhere: the
#: seed scenarios' races (a minute) are the same in every factor.
_ELSEWHERE_ARGS = {"seed_scenarios.py": ["--quick"]}


def declared_needs(example: Path) -> dict[str, str]:
    """The modules ``example`` says it needs, with the extra that installs each."""
    return {m["module"]: m["extra"] for m in _NEEDS.finditer(example.read_text())}


def missing_need(example: Path) -> str | None:
    """Why ``example`` cannot run here (a needed module is not installed), if so."""
    for module, extra in declared_needs(example).items():
        if importlib.util.find_spec(module.partition(".")[0]) is None:
            return f"{example.name} needs {module}: pip install '{extra}'"
    return None


def _imported_top_level(example: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(example.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name.partition(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.partition(".")[0])
    return names - {"__future__"}


@pytest.mark.parametrize("example", EXAMPLES, ids=[e.name for e in EXAMPLES])
def test_examples_declare_what_they_need(example: Path) -> None:
    """Every module beyond the standard library and pmca's dependencies is declared."""
    beyond = _imported_top_level(example) - set(sys.stdlib_module_names) - _DEPENDENCIES
    assert beyond <= declared_needs(example).keys(), (
        f"{example.name} imports {sorted(beyond)}: add '# needs: MODULE from pmca[EXTRA]'"
    )
    for extra in declared_needs(example).values():
        assert f"pip install '{extra}'" in example.read_text(), "say it in the docstring"


def test_a_missing_need_is_a_reason_naming_the_extra(tmp_path: Path) -> None:
    example = tmp_path / "needy.py"
    example.write_text("# needs: pmca_no_such_module from pmca[mpi]\n")
    assert missing_need(example) == "needy.py needs pmca_no_such_module: pip install 'pmca[mpi]'"
    example.write_text("# needs: json from pmca[mpi]\n")
    assert missing_need(example) is None


@pytest.mark.parametrize("example", EXAMPLES, ids=[e.name for e in EXAMPLES])
def test_example_runs(example: Path, pmca_env, pmca_load_mode: str) -> None:
    reason = missing_need(example)
    if reason is not None:
        pytest.skip(reason)
    args = _ELSEWHERE_ARGS.get(example.name, []) if elsewhere_in_matrix() else []
    child = subprocess.run(
        [sys.executable, "-X", "faulthandler", str(example), *args],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert child.returncode == 0, f"{example.name} failed:\n{child.stdout}\n{child.stderr}"


def test_sessions_init_twice_uses_the_load_mode(pmca_env, pmca_load_mode: str) -> None:
    example = Path(__file__).parent.parent / "examples" / "sessions_init_twice.py"
    child = subprocess.run(
        [sys.executable, str(example)], capture_output=True, text=True, timeout=300, check=False
    )
    assert child.returncode == 0, child.stderr
    rounds = [line for line in child.stdout.splitlines() if line.startswith("round")]
    assert len(rounds) == 2
    if "patcher (" in rounds[0]:
        assert all(f"overwrite ({pmca_load_mode})" in line for line in rounds)
        assert all("munmap delivered=True" in line for line in rounds)
    assert "sessions_init_twice: OK" in child.stdout
