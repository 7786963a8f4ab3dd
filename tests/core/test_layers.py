"""Dependencies point one way: every package imports only the layers below it.

The order, bottom first (the same as in ``pmca``'s package docstring and in
docs/install.md's "Layout" section). Packages in one layer are peers: they import
neither each other nor anything above.

    _version _records _lazy _interrupts _forksafe _public _sockets _job   private helpers
    _libc                                           libc, made fork- and interrupt-safe
    mca native                                      the component machinery; the native hooks
    runtime                                         the shared runtime every framework uses
    world                                           the processes a session talks to
    patcher < memory < rcache < btl                 the frameworks, each above the ones it uses
    p2p                                             messages, over the btls (through the bml)
    session                                         Session: composes the frameworks
    pmca (the root package)                         the lazy facade users import
    testing < scenarios < cli                       helpers and tools built on sessions
    __main__                                        python -m pmca: the pmca command

Every import statement of ``src/pmca`` counts, wherever it is (module level,
inside a function, under ``TYPE_CHECKING``), relative or absolute, and so does
every module a ``pmca._lazy`` table names. The root package is the facade:
it names every public package lazily, so it sits above them all, and nothing
below it may import names from it (they import them from their home).
"""

from __future__ import annotations

import ast
import shutil
from collections.abc import Iterable, Iterator
from pathlib import Path

#: The source tree (the test reads source; it imports nothing of it).
SOURCE = Path(__file__).resolve().parents[2] / "src"

#: Bottom first; each entry a layer of peers.
LAYERS: tuple[tuple[str, ...], ...] = (
    (
        "_version",
        "_build",
        "_records",
        "_lazy",
        "_interrupts",
        "_forksafe",
        "_public",
        "_sockets",
        "_job",
    ),
    ("_libc",),
    ("mca", "native"),
    ("runtime",),
    ("world",),
    ("patcher",),
    ("memory",),
    ("rcache",),
    ("btl",),
    ("p2p",),
    ("session",),
    ("",),  # the root package: the facade
    ("testing",),
    ("scenarios",),
    ("cli",),
    ("__main__",),  # python -m pmca: the command line
)

#: Module cycles inside one package that stay, each (importer, imported) edge
#: with why. Everything else inside a package points one way too.
ALLOWED_CYCLE_EDGES: dict[tuple[str, str], str] = {
    ("pmca.mca._framework", "pmca.mca._open"): (
        "a Framework declaration defaults to FrameworkBase, and a FrameworkBase is "
        "handed the OpenFramework it serves: the two name each other in type "
        "annotations only (TYPE_CHECKING); at run time _framework imports nothing of _open"
    ),
    ("pmca.btl.tcp._bulk", "pmca.btl.tcp._connection"): (
        "BulkReceiver is the bulk-body half of Connection, which its owner's callbacks "
        "are typed to receive: _bulk names Connection and ConnectionOwner in type "
        "annotations only (TYPE_CHECKING); at run time it imports nothing of _connection"
    ),
}


def module_name(path: Path, root: Path = SOURCE) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _absolute(module: str | None, level: int, importer: str, is_package: bool) -> str:
    if level == 0:
        return module or ""
    base = importer.split(".") if is_package else importer.split(".")[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join([*base, *([module] if module else [])])


def _lazy_target(value: ast.expr) -> str:
    """The module part of a lazy table's value: ``".module:name"``, or an
    f-string whose literal start names the module (``f"._module:{name}"``)."""
    if isinstance(value, ast.Constant) and isinstance(value.value, str):
        return value.value.partition(":")[0]
    if isinstance(value, ast.JoinedStr) and value.values:
        head = value.values[0]
        if isinstance(head, ast.Constant) and ":" in str(head.value):
            return str(head.value).partition(":")[0]
    raise AssertionError(f"line {value.lineno}: a lazy table must name its modules literally")


def _lazy_tables(tree: ast.Module) -> Iterator[tuple[int, str]]:
    """``(line, target)`` of every ``lazy_attributes(name, table)`` entry."""
    tables = {
        target.id: node.value
        for node in tree.body
        if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(target, ast.Name)
    }
    for node in ast.walk(tree):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "lazy_attributes"
            and len(node.args) == 2
        ):
            continue
        table = node.args[1]
        if isinstance(table, ast.Name):
            table = tables[table.id]
        if isinstance(table, ast.Dict):
            for value in table.values:
                yield node.lineno, _lazy_target(value)
        elif isinstance(table, ast.DictComp):
            yield from ((node.lineno, target) for target in _comprehension_targets(table, tables))
        else:
            raise AssertionError(f"line {node.lineno}: a lazy table must be a dict literal")


def _comprehension_targets(table: ast.DictComp, tables: dict[str, ast.expr]) -> list[str]:
    """A table built by a comprehension: ``{n: f"._m:{n}" for n in ...}``, or
    ``{n: f"{m}:{n}" for m, names in MODULES.items() ...}`` with ``MODULES`` a
    literal dict keyed by module."""
    source = table.generators[0].iter
    if (
        isinstance(source, ast.Call)
        and isinstance(source.func, ast.Attribute)
        and source.func.attr == "items"
        and isinstance(source.func.value, ast.Name)
        and isinstance(modules := tables.get(source.func.value.id), ast.Dict)
    ):
        keys = [key.value for key in modules.keys if isinstance(key, ast.Constant)]
        assert len(keys) == len(modules.keys), f"line {table.lineno}: modules named literally"
        return [str(key) for key in keys]
    return [_lazy_target(table.value)]


def imported_names(path: Path, root: Path = SOURCE) -> Iterator[tuple[int, str]]:
    """``(line, dotted name)`` of everything ``path`` imports, wherever it does."""
    importer = module_name(path, root)
    is_package = path.name == "__init__.py"
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node.module, node.level, importer, is_package)
            for alias in node.names:
                yield node.lineno, base if alias.name == "*" else f"{base}.{alias.name}"
    for line, target in _lazy_tables(tree):
        level = len(target) - len(target.lstrip("."))
        yield line, _absolute(target.lstrip(".") or None, level, importer, True)


def import_graph(root: Path = SOURCE) -> dict[str, dict[str, int]]:
    """Module -> {imported pmca module: first line}, for every module under ``root/pmca``."""
    paths = {module_name(path, root): path for path in sorted((root / "pmca").rglob("*.py"))}
    graph: dict[str, dict[str, int]] = {}
    for importer, path in paths.items():
        edges = graph.setdefault(importer, {})
        for line, name in imported_names(path, root):
            parts = name.split(".")
            while parts and ".".join(parts) not in paths:
                parts.pop()  # a name imported from a module: the module
            target = ".".join(parts)
            if target and target != importer:
                edges.setdefault(target, line)
    return graph


def package_of(module: str) -> str:
    """The layer unit: ``pmca.<package>``'s second part, or ``""`` for the root."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def layer_of(package: str) -> int:
    for index, layer in enumerate(LAYERS):
        if package in layer:
            return index
    raise AssertionError(f"pmca.{package} is in no layer of LAYERS: place it in the order")


def cycles(graph: dict[str, Iterable[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            for succ in successors:
                if succ not in index:
                    index[succ] = low[succ] = len(index)
                    stack.append(succ)
                    on_stack.add(succ)
                    work.append((succ, iter(sorted(graph.get(succ, ())))))
                    break
                if succ in on_stack:
                    low[node] = min(low[node], index[succ])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def layer_violations(graph: dict[str, dict[str, int]]) -> list[str]:
    """Every import of a package in the same layer or above, with where it is."""
    found = []
    for importer, edges in sorted(graph.items()):
        source = package_of(importer)
        for target, line in sorted(edges.items()):
            imported = package_of(target)
            if imported == source:
                continue
            if layer_of(imported) >= layer_of(source):
                found.append(
                    f"{importer}:{line} imports {target}: pmca.{imported or '(root facade)'} "
                    f"is not below pmca.{source or '(root facade)'}"
                )
    return found


def package_cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    packages: dict[str, set[str]] = {}
    for importer, edges in graph.items():
        targets = packages.setdefault(package_of(importer), set())
        targets.update(package_of(t) for t in edges if package_of(t) != package_of(importer))
    return cycles({package: sorted(targets) for package, targets in packages.items()})


def module_cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """Cycles between modules of one package, the allowed edges left out."""
    within = {
        importer: [
            target
            for target in edges
            if package_of(target) == package_of(importer)
            and (importer, target) not in ALLOWED_CYCLE_EDGES
        ]
        for importer, edges in graph.items()
    }
    return cycles(within)


def test_every_package_imports_only_packages_below_it() -> None:
    assert layer_violations(import_graph()) == []


def test_no_cycle_between_packages() -> None:
    assert package_cycles(import_graph()) == []


def test_no_cycle_between_modules_of_a_package_but_the_listed_ones() -> None:
    graph = import_graph()
    assert module_cycles(graph) == []
    every_cycle = cycles({module: list(edges) for module, edges in graph.items()})
    for importer, target in ALLOWED_CYCLE_EDGES:
        # An allowance whose edge is gone, or that closes no cycle any more, goes too.
        assert target in graph[importer], f"{importer} no longer imports {target}: drop it"
        assert any(importer in c and target in c for c in every_cycle), (
            f"{importer} -> {target} closes no cycle any more: drop its allowance"
        )


def test_every_package_is_placed_in_the_order() -> None:
    packages = {package_of(module) for module in import_graph()}
    assert packages == {package for layer in LAYERS for package in layer}


def test_the_package_docstring_gives_the_same_order() -> None:
    tree = ast.parse((SOURCE / "pmca" / "__init__.py").read_text())
    documented = ast.get_docstring(tree) or ""
    positions = [
        [
            documented.find(package if package.startswith("_") else f"pmca.{package}")
            for package in layer
            if package
        ]
        for layer in LAYERS
    ]
    assert all(p >= 0 for layer in positions for p in layer), documented
    firsts = [min(layer) for layer in positions if layer]
    assert firsts == sorted(firsts), "pmca's docstring lists the layers in another order"


def _copy_with(tmp_path: Path, module: str, line: str) -> Path:
    """A copy of the source tree with ``line`` appended to ``module``'s file."""
    root = tmp_path / "src"
    shutil.copytree(SOURCE / "pmca", root / "pmca", ignore=shutil.ignore_patterns("*.c", "*.h"))
    path = root / (module.replace(".", "/") + ".py")
    if not path.exists():
        path = root / module.replace(".", "/") / "__init__.py"
    path.write_text(path.read_text() + line)
    return root


def test_an_upward_import_even_inside_a_function_is_caught(tmp_path: Path) -> None:
    line = "\n\ndef _late() -> None:\n    from ..session import Session  # noqa\n"
    graph = import_graph(_copy_with(tmp_path, "pmca.memory._base", line))
    violations = layer_violations(graph)
    assert len(violations) == 1
    assert violations[0].startswith("pmca.memory._base:")
    assert "imports pmca.session: pmca.session is not below pmca.memory" in violations[0]
    # memory -> session -> btl -> rcache -> memory: one circle of five packages.
    assert package_cycles(graph) == [["btl", "memory", "p2p", "rcache", "session"]]


def test_an_import_of_the_root_facade_from_below_is_caught(tmp_path: Path) -> None:
    line = "\nTYPE_CHECKING = False\nif TYPE_CHECKING:\n    from .. import Session  # noqa\n"
    violations = layer_violations(import_graph(_copy_with(tmp_path, "pmca.btl._interface", line)))
    assert len(violations) == 1
    assert violations[0].endswith("imports pmca: pmca.(root facade) is not below pmca.btl")


def test_a_lazy_table_naming_a_module_above_is_caught(tmp_path: Path) -> None:
    line = '\n__getattr__, __dir__ = lazy_attributes(__name__, {"X": "..p2p:P2p"})\n'
    violations = layer_violations(import_graph(_copy_with(tmp_path, "pmca.rcache", line)))
    assert [v for v in violations if "imports pmca.p2p" in v], violations


def test_a_new_cycle_inside_a_package_is_caught(tmp_path: Path) -> None:
    line = "\nTYPE_CHECKING = False\nif TYPE_CHECKING:\n    from ._engine import P2p  # noqa\n"
    graph = import_graph(_copy_with(tmp_path, "pmca.p2p._requests", line))
    assert any("pmca.p2p._requests" in c and "pmca.p2p._engine" in c for c in module_cycles(graph))
