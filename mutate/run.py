"""``make mutate``: cosmic-ray over the modules listed in mutate/modules.toml.

Each mutant is written over the source file (cosmic-ray's local runner) and
then copied over pmca's installed copy in .venv, because the tests import the
installed pmca and many start fresh interpreters (mpirun, ``python -c``) that
must import the mutant too. The installed copy is put back when a module is
done, whatever happened.

    python mutate/run.py [MODULE...]      run, then print the summary
    python mutate/run.py --report         print the summary of the last runs
    python mutate/run.py --survivors [MODULE...]  run only the last survivors again
    python mutate/run.py test PATH -- ARGS  (cosmic-ray's test command)

A survivor is either a missing test or listed in mutate/equivalent.md with why
it is equivalent; the exit status is 1 while any survivor is neither.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import shlex
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "mutate" / "modules.toml"
EQUIVALENTS = ROOT / "mutate" / "equivalent.md"
RESULTS = ROOT / ".mutate"


def _toml(path: Path) -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib

        return tomllib.loads(path.read_text())
    import toml  # cosmic-ray's own dependency

    return dict(toml.loads(path.read_text()))


def installed_copy(source: Path) -> Path:
    """Where the installed pmca keeps ``source`` (src/pmca/...)."""
    spec = importlib.util.find_spec("pmca")  # finds it without importing it
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("mutate: pmca is not installed in this interpreter (run `make install`)")
    package = Path(next(iter(spec.submodule_search_locations)))
    return package / source.resolve().relative_to(ROOT / "src" / "pmca")


def _put(source: Path, target: Path) -> None:
    shutil.copyfile(source, target)
    _forget_bytecode(target)


def _forget_bytecode(target: Path) -> None:
    # A stale .pyc of the same size and second would be taken for the new text.
    for cached in (target.parent / "__pycache__").glob(f"{target.stem}.*.pyc"):
        cached.unlink()


def run_test(argv: list[str]) -> int:
    """Cosmic-ray's test command: install the (mutated) file, then run pytest."""
    source, _, pytest_args = argv[0], argv[1], argv[2:]
    _put(ROOT / source, installed_copy(ROOT / source))
    return subprocess.call([sys.executable, "-m", "pytest", *pytest_args], cwd=ROOT)


class DropOperand:
    """Each operand of an ``or`` becomes ``False``, of an ``and`` ``True``: a guard removed.

    cosmic-ray has no operator that removes one condition of several (``x or
    (wild and waiting())`` -> ``x or False``), the commonest way a guard goes
    missing.
    """

    def mutation_positions(self, node: Any) -> Iterator[tuple[Any, Any]]:
        if getattr(node, "type", None) in ("or_test", "and_test"):
            for operand in node.children[::2]:
                yield operand.start_pos, operand.end_pos

    def mutate(self, node: Any, index: int) -> Any:
        from parso.python.tree import Keyword

        operand = node.children[2 * index]
        value = "False" if node.type == "or_test" else "True"
        prefix = operand.get_first_leaf().prefix
        node.children[2 * index] = Keyword(value, operand.start_pos, prefix=prefix)
        return node

    @classmethod
    def arguments(cls) -> tuple[()]:
        return ()

    @classmethod
    def examples(cls) -> tuple[()]:
        return ()


class _Provider:
    def __iter__(self) -> Iterator[str]:
        return iter(["DropOperand"])

    def __getitem__(self, name: str) -> type:
        if name != "DropOperand":
            raise KeyError(name)
        return DropOperand


def _functions(path: Path, names: list[str]) -> list[tuple[int, int]]:
    """The line ranges of the named functions (``Class.method`` or ``function``)."""
    found: dict[str, tuple[int, int]] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = prefix + child.name
                if not isinstance(child, ast.ClassDef):
                    found[name] = (child.lineno, child.end_lineno or child.lineno)
                visit(child, name + ".")

    visit(ast.parse(path.read_text()), "")
    missing = [name for name in names if name not in found]
    if missing:
        raise SystemExit(
            f"mutate: {path.relative_to(ROOT)} has no function {', '.join(missing)} (modules.toml)"
        )
    return [found[name] for name in names]


Position = tuple[int, int]


def _annotations(path: Path) -> list[tuple[Position, Position]]:
    """Where the type annotations are: never evaluated here (``from __future__
    import annotations``), so a mutant in one (``int | None`` to ``int & None``)
    is not run at all."""
    spans = []
    for node in ast.walk(ast.parse(path.read_text())):
        found: list[ast.expr | None] = []
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found.append(node.returns)
        elif isinstance(node, (ast.arg, ast.AnnAssign)):
            found.append(node.annotation)
        for annotation in found:
            if annotation is not None and annotation.end_lineno is not None:
                end = (annotation.end_lineno, annotation.end_col_offset or 0)
                spans.append(((annotation.lineno, annotation.col_offset), end))
    return spans


def _annotated(spans: list[tuple[Position, Position]], position: Position) -> bool:
    return any(start <= tuple(position) < end for start, end in spans)


def _changed_line(diff: str | None, mark: str) -> str | None:
    """The first line the mutant changed, as it read before (``-``) or after (``+``)."""
    for line in (diff or "").splitlines():
        if line.startswith(mark) and not line.startswith(mark * 3):
            return line[1:].strip()
    return None


def _equivalents() -> dict[tuple[str, str, str, str | None], str]:
    """(module, operator, mutated line, original line or None) -> why, from the
    table in equivalent.md. A row names the original line too (`` `before` ->
    `after` ``) when the mutated line alone is not unique (``or False``)."""
    table: dict[tuple[str, str, str, str | None], str] = {}
    for line in EQUIVALENTS.read_text().splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[2].startswith("`"):
            before, arrow, after = cells[2].partition("` -> `")
            mutated, original = (after, before.strip("`")) if arrow else (before, None)
            table[(cells[0], cells[1], mutated.strip("`"), original)] = cells[3]
    return table


def run_module(
    name: str, module: dict[str, Any], settings: dict[str, Any], *, again: bool = False
) -> None:
    """Mutate one module and record every outcome in .mutate/NAME.sqlite.

    ``again``: only the survivors of the last run are run again (after a test
    was added for them); the other outcomes are kept.
    """
    import cosmic_ray.plugins
    from cosmic_ray.commands import execute, init
    from cosmic_ray.config import ConfigDict
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import WorkerOutcome, WorkResult

    cosmic_ray.plugins.OPERATOR_PROVIDERS["pmca"] = _Provider()
    source = ROOT / module["path"]
    target = installed_copy(source)
    pristine = target.read_bytes()
    command = [sys.executable, str(Path(__file__).resolve()), "test", module["path"], "--"]
    command += [*settings["pytest"], *module["tests"]]
    started = time.monotonic()
    print(f"mutate: {name}: unmutated run of {' '.join(module['tests'])}", flush=True)
    if run_test(command[3:]) != 0:
        target.write_bytes(pristine)
        _forget_bytecode(target)
        raise SystemExit(f"mutate: {name}: the tests fail without any mutant; fix them first")
    timeout = max(float(module.get("timeout", 30)), 4 * (time.monotonic() - started))
    if "timeout_max" in module:  # a module whose tests wait out bounds of their own
        timeout = min(timeout, float(module["timeout_max"]))
    RESULTS.mkdir(exist_ok=True)
    database = RESULTS / f"{name}.sqlite"
    if again:
        if not database.exists():
            raise SystemExit(f"mutate: {name}: no earlier run to take the survivors of")
        with sqlite3.connect(database) as survivors:
            survivors.execute("DELETE FROM work_results WHERE test_outcome = 'SURVIVED'")
    else:
        database.unlink(missing_ok=True)
    wanted = set(settings["operators"])
    config = ConfigDict(
        {
            "module-path": module["path"],
            "timeout": timeout,
            "test-command": shlex.join(command),
            "distributor": ConfigDict({"name": "local"}),
        }
    )
    ranges = _functions(source, module["functions"]) if "functions" in module else None
    annotations = _annotations(source)
    os.chdir(ROOT)
    with use_db(str(database), WorkDB.Mode.create) as db:
        if not again:
            init([Path(module["path"])], db, {})
        skipped = WorkResult(worker_outcome=WorkerOutcome.SKIPPED)
        for item in [] if again else list(db.work_items):
            spec = item.mutations[0]
            inside = ranges is None or any(lo <= spec.start_pos[0] <= hi for lo, hi in ranges)
            annotated = _annotated(annotations, spec.start_pos)
            if spec.operator_name not in wanted or not inside or annotated:
                db.set_result(item.job_id, skipped)
        pending = db.num_work_items - db.num_results
        print(f"mutate: {name}: {pending} mutants, timeout {timeout:.0f}s each", flush=True)
        try:
            execute(db, config)
        finally:
            target.write_bytes(pristine)
            _forget_bytecode(target)
    if not again:  # the time of a whole run
        minutes = (time.monotonic() - started) / 60
        (RESULTS / f"{name}.minutes").write_text(f"{minutes:.1f}\n")


def report(names: list[str], modules: dict[str, Any]) -> int:
    """Print each module's score and its survivors; 1 if a survivor is unexplained."""
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import TestOutcome, WorkerOutcome

    equivalents = _equivalents()
    lines, unexplained = [], 0
    for name in names:
        database = RESULTS / f"{name}.sqlite"
        if not database.exists():
            lines.append(f"{name}: not run")
            continue
        path = ROOT / modules[name]["path"]
        source, annotations = path.read_text().splitlines(), _annotations(path)
        with use_db(str(database), WorkDB.Mode.open) as db:
            results = dict(db.results)
            counted = [
                item
                for item in db.work_items
                if not _annotated(annotations, item.mutations[0].start_pos)
                and (
                    item.job_id not in results
                    or results[item.job_id].worker_outcome != WorkerOutcome.SKIPPED
                )
            ]
        done = [(item, results[item.job_id]) for item in counted if item.job_id in results]
        total = len(counted)
        killed = [r for _, r in done if r.test_outcome == TestOutcome.KILLED]
        timeouts = [
            item
            for item, r in done
            if r.test_outcome == TestOutcome.KILLED and r.output == "timeout"
        ]
        survivors = [(item, r) for item, r in done if r.test_outcome != TestOutcome.KILLED]
        minutes = (
            (RESULTS / f"{name}.minutes").read_text().strip()
            if (RESULTS / f"{name}.minutes").exists()
            else "?"
        )
        score = 100 * len(killed) / len(done) if done else 0.0
        lines.append(
            f"{name}: {len(killed)}/{len(done)} killed ({score:.0f}%),"
            f" {total - len(done)} not run, {minutes} min"
        )
        for item in timeouts:
            spec = item.mutations[0]
            lines.append(
                f"  timeout (counted killed): {spec.operator_name} line {spec.start_pos[0]}"
            )
        for item, result in survivors:
            spec = item.mutations[0]
            text = _changed_line(result.diff, "-") or source[spec.start_pos[0] - 1].strip()
            mutated = _changed_line(result.diff, "+") or ""
            why = equivalents.get(
                (name, spec.operator_name, mutated, _changed_line(result.diff, "-"))
            ) or equivalents.get((name, spec.operator_name, mutated, None))
            state = (
                f"equivalent: {why}"
                if why
                else "SURVIVED (needs a test or an entry in mutate/equivalent.md)"
            )
            if result.test_outcome == TestOutcome.INCOMPETENT:
                state = "INCOMPETENT (the test command could not run)"
            unexplained += why is None
            lines.append(f"  {spec.operator_name} line {spec.start_pos[0]} `{text}`: {state}")
            if why is None and result.diff:
                lines.extend("    " + diff_line for diff_line in result.diff.splitlines()[2:])
    summary = "\n".join(lines) + "\n"
    print(summary, end="")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "summary.txt").write_text(summary)
    return 1 if unexplained else 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["test"]:
        return run_test(argv[1:])
    config = _toml(CONFIG)
    modules: dict[str, Any] = config["modules"]
    only_report, again = "--report" in argv, "--survivors" in argv
    names = [arg for arg in argv if arg not in ("--report", "--survivors")] or list(modules)
    unknown = [name for name in names if name not in modules]
    if unknown:
        raise SystemExit(
            f"mutate: no module {', '.join(unknown)} in {CONFIG.relative_to(ROOT)}"
            f" (known: {', '.join(modules)})"
        )
    if not only_report:
        # Stopped with SIGTERM (or Ctrl-C), the mutated source file and the
        # installed copy are put back on the way out, like at the end.
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
        for name in names:
            run_module(name, modules[name], config["settings"], again=again)
    return report(names, modules)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
