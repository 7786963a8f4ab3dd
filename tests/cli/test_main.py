"""The ``pmca`` entry point: subcommands, doctor wiring, layout, pipes."""

from __future__ import annotations

import argparse
import subprocess
import sys
import types
from pathlib import Path

import pytest

import pmca
import pmca.cli
from pmca.cli import main
from pmca.cli._text import Readable


def test_version(capsys) -> None:
    from pmca._build import build_info

    assert main(["--version"]) == 0
    out = capsys.readouterr().out.strip()
    assert out == f"pmca v{pmca.__version__} ({build_info().summary()})"


def test_a_command_is_required(capsys) -> None:
    assert main([]) == 2
    assert "COMMAND" in capsys.readouterr().err


def test_info_help_names_the_ompi_info_options(capsys) -> None:
    assert main(["info", "--help"]) == 0
    out = capsys.readouterr().out
    for option in ("--param", "--params", "--level", "--all", "--parsable", "--parseable",
                   "--json", "--mca", "--show-failed", "--selected-only"):  # fmt: skip
        assert option in out


def test_doctor_not_in_this_build(capsys, monkeypatch) -> None:
    monkeypatch.setattr(pmca.cli, "_doctor_module", lambda: None)
    assert main(["doctor"]) == 1
    assert capsys.readouterr().err.strip() == "pmca doctor: not available in this build"


def test_doctor_runs_the_doctor_module(capsys, monkeypatch) -> None:
    fake = types.ModuleType("pmca.cli._doctor")
    seen: list[argparse.Namespace] = []

    def add_arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--quick", action="store_true")

    def run(args: argparse.Namespace) -> int:
        seen.append(args)
        return 3

    fake.add_arguments = add_arguments  # type: ignore[attr-defined]
    fake.run = run  # type: ignore[attr-defined]
    monkeypatch.setattr(pmca.cli, "_doctor_module", lambda: fake)
    assert main(["doctor", "--quick"]) == 3
    assert seen[0].quick is True


def test_labels_align_to_the_widest_and_values_wrap_on_a_terminal() -> None:
    readable = Readable()
    readable.rows.extend(
        [
            ("MCA memory", "none (MCA v1)"),
            ("MCA (-) averyveryverylongframework component", "x"),
            ("", "word " * 30),
        ]
    )
    lines = readable.lines()
    assert lines[0].index(": ") == lines[1].index(": ") == 44
    assert lines[2] == " " * 46 + ("word " * 30).rstrip()
    wrapped = readable.lines(width=80)
    assert all(len(line) <= 80 for line in wrapped)
    assert all(line.startswith(" " * 46 + "word") for line in wrapped[2:])
    short = Readable()
    short.rows.append(("MCA memory", "none"))
    assert short.lines() == [" " * 14 + "MCA memory: none"], "ompi_info's 24-column labels"


def test_a_closed_pipe_is_not_an_error(pmca_env) -> None:
    child = subprocess.Popen(
        [sys.executable, "-m", "pmca.cli", "info", "--all", "--parsable"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert child.stdout is not None and child.stderr is not None
    child.stdout.readline()
    child.stdout.close()  # like `| head -1`
    err = child.stderr.read().decode()
    child.wait(timeout=120)
    assert "Traceback" not in err and "BrokenPipe" not in err


@pytest.mark.parametrize("argv", [["info", "--level"], ["info", "--param", "memory"]])
def test_usage_errors_exit_2(capsys, argv: list[str]) -> None:
    assert main(argv) == 2
    assert "usage: pmca info" in capsys.readouterr().err


def test_python_dash_m_pmca_is_the_pmca_command(pmca_env) -> None:
    """``python -m pmca`` runs what the ``pmca`` console script runs."""
    import shutil

    module = subprocess.run(
        [
            sys.executable,
            "-m",
            "pmca",
            "info",
            "--parsable",
            "--param",
            "btl",
            "self",
            "--level",
            "9",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert module.returncode == 0, module.stderr
    assert "mca:btl:self:param:btl_self_exclusivity:value:" in module.stdout
    version = subprocess.run(
        [sys.executable, "-m", "pmca", "--version"], capture_output=True, text=True, timeout=60
    )
    assert version.stdout.startswith(f"pmca v{pmca.__version__}")
    script = shutil.which("pmca", path=str(Path(sys.executable).parent))
    if script is not None:  # the console script installed next to this interpreter
        command = subprocess.run(
            [script, "info", "--parsable", "--param", "btl", "self", "--level", "9"],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert command.stdout == module.stdout
