"""One-line mutants of the reliability fixes: does the fast suite notice when a fix is undone?

Each ``tests/mutants/*.toml`` file lists mutants of one area, each a ``[[mutant]]`` table::

    [[mutant]]
    name = "decision-key-not-counted"        # unique within its file; reported as <file stem>/<name>
    file = "connectors/uss_stream_kafka/runtime/dispatch.py"
    find = 'len(value) + len(key or b"") > self.output_bytes'   # must occur exactly once in file
    replace = "len(value) > self.output_bytes"
    tests = ["tests/test_uss_stream_kafka/runtime/test_dispatch.py"]   # pytest ids that should fail
    fix = "a decision and its key together must fit the output topic"  # what the mutant undoes

The runner copies the checkout (tracked and untracked files, not ignored ones) to a temporary
directory, checks that the named tests pass there, then applies the mutants one at a time and runs
``pytest -m "not kafka" -x`` on each one's tests (``--all``: on the whole fast suite instead). A
mutant is *killed* when a test fails, *survived* when they all pass, *stale* when its ``find``
text is not in the file exactly once (the code moved: update the entry). The checkout itself is
never modified. ``make mutants`` runs every mutant; the exit code is 0 only if all were killed.

Usage: ``python -m tests.mutants.run [--all | --tests ID,...] [--list] [--jobs N] [SELECTOR ...]``
where a selector is a file stem (``deadletter``) or a full name (``deadletter/key-cut``);
``--tests a,b`` runs the given tests for every mutant (e.g. whole folders, to measure a suite).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
FIELDS = ("name", "file", "find", "replace", "tests", "fix")


@dataclass(frozen=True)
class Mutant:
    """One textual change of one file, and the tests expected to fail with it."""

    name: str
    file: str
    find: str
    replace: str
    tests: tuple[str, ...]
    fix: str


@dataclass
class Outcome:
    """What became of a mutant: ``killed``, ``survived``, ``stale`` or ``error``, and the evidence."""

    mutant: Mutant
    status: str
    detail: str = ""
    seconds: float = 0.0
    failed: list[str] = field(default_factory=list)


def load(directory: Path = HERE) -> list[Mutant]:
    """Every mutant of ``directory/*.toml``, named ``<file stem>/<name>``; ``ValueError`` on a bad entry.

    >>> mutants = load()
    >>> len({m.name for m in mutants}) == len(mutants) > 0
    True
    """
    mutants: list[Mutant] = []
    for path in sorted(directory.glob("*.toml")):
        for entry in tomllib.loads(path.read_text()).get("mutant", []):
            missing = [name for name in FIELDS if name not in entry]
            if missing or not entry["tests"] or entry["find"] == entry["replace"]:
                raise ValueError(f"{path.name}: mutant {entry.get('name')!r}: missing {missing} or no change")
            mutants.append(
                Mutant(
                    name=f"{path.stem}/{entry['name']}",
                    file=entry["file"],
                    find=entry["find"],
                    replace=entry["replace"],
                    tests=tuple(entry["tests"]),
                    fix=entry["fix"],
                )
            )
    names = [m.name for m in mutants]
    if len(set(names)) != len(names):
        raise ValueError(f"duplicate mutant names: {sorted({n for n in names if names.count(n) > 1})}")
    return mutants


def select(mutants: Sequence[Mutant], selectors: Sequence[str]) -> list[Mutant]:
    """The mutants named by ``selectors`` (file stems or full names); all without selectors."""
    if not selectors:
        return list(mutants)
    chosen = [m for m in mutants if m.name in selectors or m.name.split("/")[0] in selectors]
    unknown = [s for s in selectors if not any(s in (m.name, m.name.split("/")[0]) for m in mutants)]
    if unknown:
        raise ValueError(f"no mutant or mutant file named {', '.join(unknown)}")
    return chosen


def copy_checkout(target: Path) -> None:
    """Copy the checkout's tracked and untracked (not ignored) files to ``target``."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, capture_output=True, check=True,
    ).stdout.decode().split("\0")  # fmt: skip
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file():
            destination = target / name
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, destination)


def environment(copy: Path) -> dict[str, str]:
    """The tests' environment in ``copy``: its packages first, no bytecode written or read."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(copy), str(copy / "connectors"), env.get("PYTHONPATH", "")])
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def pytest(copy: Path, tests: Iterable[str], whole_suite: bool, jobs: int, timeout: float) -> tuple[int, str]:
    """Run the fast suite's ``tests`` (or all of it) in ``copy``: pytest's exit code and its output."""
    command = [sys.executable, "-m", "pytest", "-m", "not kafka", "-x", "-q", "-p", "no:cacheprovider",
               "--durations=0", "-o", "console_output_style=classic"]  # fmt: skip
    if jobs > 1:
        command += ["-n", str(jobs)]
    if not whole_suite:
        command += list(tests)
    try:
        done = subprocess.run(
            command, cwd=copy, env=environment(copy), capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired as expired:
        return -1, str(expired.stdout or "")[-3000:]
    return done.returncode, done.stdout + done.stderr


def failed_tests(output: str) -> list[str]:
    """The ids of the tests pytest's summary reports as failed or in error."""
    return [
        line.split(" ", 1)[1].split(" - ")[0]
        for line in output.splitlines()
        if line.startswith(("FAILED ", "ERROR "))
    ]


def apply(copy: Path, mutant: Mutant, whole_suite: bool, jobs: int, timeout: float) -> Outcome:
    """Apply ``mutant`` to ``copy``, run its tests, restore the file."""
    path = copy / mutant.file
    if not path.is_file():
        return Outcome(mutant, "stale", f"{mutant.file} does not exist")
    original = path.read_text()
    found = original.count(mutant.find)
    if found != 1:
        return Outcome(mutant, "stale", f"the text to replace occurs {found} times in {mutant.file}")
    started = time.monotonic()
    path.write_text(original.replace(mutant.find, mutant.replace))
    try:
        code, output = pytest(copy, mutant.tests, whole_suite, jobs, timeout)
    finally:
        path.write_text(original)
    seconds = time.monotonic() - started
    failed = failed_tests(output)
    if code == 1 or (code == 2 and failed):  # 2: xdist's -x interrupts the other workers
        return Outcome(mutant, "killed", failed[0] if failed else "", seconds, failed)
    if code == 0:
        return Outcome(mutant, "survived", "every named test passed", seconds)
    if code == -1:
        return Outcome(mutant, "killed", f"the tests did not end within {timeout:.0f}s", seconds)
    return Outcome(mutant, "error", f"pytest exit code {code}: {output.strip()[-600:]}", seconds)


def check_copy(copy: Path) -> None:
    """Fail unless the copy's packages are the ones its tests import (not the installed checkout)."""
    probe = (
        "import uss_stream, uss_stream_kafka; print(uss_stream.__file__); print(uss_stream_kafka.__file__)"
    )
    paths = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=copy,
        env=environment(copy),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    if not all(Path(p).resolve().is_relative_to(copy.resolve()) for p in paths):
        raise RuntimeError(f"the copy imports packages from elsewhere: {paths}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.mutants.run", description=__doc__.split("\n")[0])
    parser.add_argument("selectors", nargs="*", help="mutant files (stems) or names; default: all")
    parser.add_argument("--all", action="store_true", help="run the whole fast suite for each mutant")
    parser.add_argument("--tests", help="comma-separated tests (ids, files, folders) to run for every mutant")
    parser.add_argument("--list", action="store_true", help="list the mutants and exit")
    parser.add_argument("--jobs", type=int, default=1, help="pytest-xdist workers per run (default 1)")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per mutant (default 900)")
    args = parser.parse_args(argv)
    # SIGTERM ends the run like Ctrl-C: the running pytest is killed and the copy removed.
    signal.signal(signal.SIGTERM, lambda number, frame: sys.exit(128 + number))
    mutants = select(load(), args.selectors)
    if args.tests:
        tests = tuple(test for test in args.tests.split(",") if test)
        mutants = [replace(mutant, tests=tests) for mutant in mutants]
    if args.list:
        for mutant in mutants:
            print(f"{mutant.name}: {mutant.file}: {mutant.fix}")
        return 0
    with tempfile.TemporaryDirectory(prefix="uss-mutants-") as directory:
        copy = Path(directory)
        copy_checkout(copy)
        check_copy(copy)
        tests = sorted({test for mutant in mutants for test in mutant.tests})
        code, output = pytest(copy, tests, args.all, args.jobs, args.timeout * 2)
        if code != 0:
            print(f"the named tests fail without any mutant (exit {code}):\n{output[-3000:]}")
            return 2
        outcomes = []
        for mutant in mutants:
            outcome = apply(copy, mutant, args.all, args.jobs, args.timeout)
            outcomes.append(outcome)
            print(
                f"{outcome.status.upper():8} {mutant.name} ({outcome.seconds:.0f}s): {outcome.detail}",
                flush=True,
            )
    killed = sum(o.status == "killed" for o in outcomes)
    print(f"\n{killed} of {len(outcomes)} mutants killed")
    for status in ("survived", "stale", "error"):
        names = [o.mutant.name for o in outcomes if o.status == status]
        if names:
            print(f"{status}: {', '.join(names)}")
    return 0 if killed == len(outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
