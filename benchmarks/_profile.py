"""Where a fresh process's time goes: CPU time by phase, and own time by package.

A script is given as phases, each a name and the code it runs at the top
level of ``__main__`` (as ``python -c`` runs it).  :func:`phase_source`
joins the phases back into the script a benchmark times, so the profile
and the timed process run the same statements:

- :func:`phase_profile` runs the script in fresh processes with the CPU
  time (``time.process_time``: no time spent waiting for a core, so a
  loaded machine skews it little) read between phases; the median per
  phase;
- :func:`package_profile` runs it once more under cProfile (with the same
  CPU clock) and adds up the time spent in each function's own code by
  where the function lives: pmca's subpackages, other distributions, the
  standard library, the import system, native libraries being loaded.
  The time of a C function (``posix.stat``, ``marshal.loads``...) goes to
  the package of the Python function that called it.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence

__all__ = ["Phase", "package_profile", "phase_profile", "phase_source", "where_time_goes"]

#: A phase of a profiled script: its name, and the code it runs.
Phase = tuple[str, str]


def phase_source(phases: Sequence[Phase]) -> str:
    """The script itself: the phases' code (one line each), one statement after another."""
    if any("\n" in code for _, code in phases):
        raise ValueError("phase_source: a phase of several lines cannot join a one-line script")
    return "; ".join(code for _, code in phases)


def _timed_source(phases: Sequence[Phase]) -> str:
    """The phases' code with the CPU time read after each; the times printed as JSON."""
    lines = [
        "import time as _pmca_time",
        "_pmca_cpu = {'interpreter start': _pmca_time.process_time()}",
        "_pmca_mark = _pmca_cpu['interpreter start']",
    ]
    for name, code in phases:
        lines.append(code)
        lines.append(
            f"_pmca_now = _pmca_time.process_time(); _pmca_cpu[{name!r}] = _pmca_now - _pmca_mark;"
            " _pmca_mark = _pmca_now"
        )
    lines += [
        "import sys as _pmca_sys",
        "_pmca_cpu['modules'] = len(_pmca_sys.modules)",
        "import json as _pmca_json",
        "print(_pmca_json.dumps(_pmca_cpu))",
    ]
    return "\n".join(lines) + "\n"


#: Runs the script under cProfile and prints each place's own CPU time as JSON.
#: ``PHASES`` is replaced by the phases' code.
_PACKAGE_SOURCE = """
import _lsprof, time
_pmca_profiler = _lsprof.Profiler(time.process_time)
_pmca_profiler.enable()
PHASES
_pmca_profiler.disable()


def _pmca_profile():
    import json, os, sys, sysconfig

    stdlib = os.path.realpath(sysconfig.get_path("stdlib")) + os.sep
    pmca = sys.modules.get("pmca")
    root = os.path.dirname(os.path.realpath(pmca.__file__)) + os.sep if pmca else None
    loading = ("_imp.create_dynamic", "_ctypes.dlopen", "dlopen")

    def place(code):
        path = code.co_filename
        if path.startswith("<frozen "):
            name = path.removeprefix("<frozen ").removesuffix(">").split(".")[0]
            return "the import system" if name in ("importlib", "zipimport") else f"stdlib {name}"
        if path.startswith("<attrs generated"):
            return "attrs (generated methods)"
        if path.startswith("<"):
            return "code compiled at run time (<string>)"
        real = os.path.realpath(path)
        if root and real.startswith(root):
            return ".".join(["pmca", *real[len(root) :].split(os.sep)[:-1][:2]])
        parts = real.split(os.sep)
        for marker in ("site-packages", "dist-packages"):
            if marker in parts[:-1]:
                return parts[parts.index(marker) + 1].removesuffix(".py")
        if real.startswith(stdlib):
            name = real[len(stdlib) :].split(os.sep)[0].removesuffix(".py")
            return "the import system" if name == "importlib" else f"stdlib {name}"
        return "elsewhere"

    def c_place(name, caller):
        return "native libraries loaded (dlopen)" if any(n in name for n in loading) else caller

    totals, counted = {}, {}
    for entry in _pmca_profiler.getstats():
        if isinstance(entry.code, str):
            continue  # a C function: its time goes to its callers' places, below
        where = place(entry.code)
        totals[where] = totals.get(where, 0.0) + entry.inlinetime
        for call in entry.calls or ():
            if isinstance(call.code, str):
                key = c_place(call.code, where)
                totals[key] = totals.get(key, 0.0) + call.inlinetime
                counted[call.code] = counted.get(call.code, 0.0) + call.inlinetime
    for entry in _pmca_profiler.getstats():
        if isinstance(entry.code, str):  # what no profiled Python function called
            left = entry.inlinetime - counted.get(entry.code, 0.0)
            if left > 1e-9:
                key = c_place(entry.code, "C functions with no profiled Python caller")
                totals[key] = totals.get(key, 0.0) + left
    print(json.dumps(totals))


_pmca_profile()
"""


def _run(source: str, env: Mapping[str, str]) -> dict[str, float]:
    """The JSON the last line of ``source``'s output holds, run in a fresh interpreter."""
    done = subprocess.run(
        [sys.executable, "-c", source], env=dict(env), capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(done.stderr.strip()[-300:] or f"exit status {done.returncode}")
    found: dict[str, float] = json.loads(done.stdout.splitlines()[-1])
    return found


def phase_profile(title: str, phases: Sequence[Phase], env: Mapping[str, str], runs: int) -> str:
    """CPU time by phase, the median of ``runs`` fresh processes (the exit not included)."""
    found = [_run(_timed_source(phases), env) for _ in range(runs)]
    medians = {key: statistics.median(run[key] for run in found) for key in found[0]}
    modules = int(medians.pop("modules"))
    total = sum(medians.values())
    shown = ", ".join(
        f"{name} {seconds * 1e3:.1f} ms ({seconds / total:.0%})"
        for name, seconds in medians.items()
    )
    return (
        f"{title}, CPU time by phase (median of {runs}, exit not included): "
        f"{shown}; {total * 1e3:.1f} ms in all, {modules} modules imported"
    )


def package_profile(
    title: str, phases: Sequence[Phase], env: Mapping[str, str], top: int = 8
) -> str:
    """Own CPU time by place, one fresh process under cProfile: the ``top`` places, the rest."""
    source = _PACKAGE_SOURCE.replace("PHASES", "\n".join(code for _, code in phases))
    totals = sorted(_run(source, env).items(), key=lambda item: -item[1])
    everything = sum(seconds for _, seconds in totals) or 1.0
    shown = [
        f"{where} {seconds * 1e3:.1f} ms ({seconds / everything:.0%})"
        for where, seconds in totals[:top]
    ]
    rest = sum(seconds for _, seconds in totals[top:])
    if rest:
        shown.append(f"the rest {rest * 1e3:.1f} ms ({rest / everything:.0%})")
    return (
        f"{title}, own CPU time by package under cProfile (one run, after the interpreter's "
        f"start; the profiler's own cost inflates Python-heavy places): {', '.join(shown)}; "
        f"{everything * 1e3:.1f} ms in all"
    )


def where_time_goes(
    title: str, phases: Sequence[Phase], env: Mapping[str, str], runs: int = 5
) -> list[str]:
    """Both profiles of the script, printed and returned (a failure to profile is a line too)."""
    lines = []
    profiles: tuple[Callable[[], str], ...] = (
        lambda: phase_profile(title, phases, env, runs),
        lambda: package_profile(title, phases, env),
    )
    for profile in profiles:
        try:
            line = profile()
        except (RuntimeError, ValueError, KeyError, IndexError) as exc:
            line = f"{title}: profile failed: {exc}"
        print(f"\n  {line}")
        lines.append(line)
    return lines
