"""``make mutate``'s module list names code that exists: a refactor that moves or
renames a promise-carrying function must move its entry too, or the mutation run
would stop at its start (or, worse, mutate nothing of what the entry meant)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")  # Python 3.11+; the config is the same on 3.10

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "mutate" / "modules.toml"


def _defined(path: Path) -> set[str]:
    names: set[str] = set()

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = prefix + child.name
                if not isinstance(child, ast.ClassDef):
                    names.add(name)
                visit(child, name + ".")

    visit(ast.parse(path.read_text()), "")
    return names


MODULES = tomllib.loads(CONFIG.read_text())["modules"]


@pytest.mark.parametrize("name", sorted(MODULES))
def test_every_mutated_module_and_function_exists(name: str) -> None:
    module = MODULES[name]
    path = ROOT / module["path"]
    assert path.is_file(), f"mutate/modules.toml [{name}]: no file {module['path']}"
    missing = set(module.get("functions", ())) - _defined(path)
    assert not missing, f"mutate/modules.toml [{name}]: {module['path']} has no {sorted(missing)}"


@pytest.mark.parametrize("name", sorted(MODULES))
def test_every_selected_test_file_exists(name: str) -> None:
    for argument in MODULES[name]["tests"]:
        if argument.startswith("tests/"):
            test_file = argument.split("::")[0]
            assert (ROOT / test_file).is_file(), f"mutate/modules.toml [{name}]: no {test_file}"
