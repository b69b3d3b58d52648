"""The front door works as written: every snippet of the README and the docs runs.

* Every ```python block of ``README.md``, ``deploy/README.md`` and ``docs/**/*.md`` runs from the
  repository root: a block with ``>>>`` prompts as a doctest (its outputs are checked), any other
  in a fresh namespace. A block preceded by ``<!-- not-run: REASON -->`` (a broker, a long run) is
  compiled and its imports run (the broker tests run the same calls).
* Every ``uss-stream ...`` line of a ```bash block parses with the command's real parser, in the
  environment the block's ``export`` lines and ``VAR=value`` prefixes give; a ``kafka`` command's
  settings are then checked together, as the command does before it connects. A ``replay`` whose
  input exists (or a bundled case) runs, on a tiny horizon.
* ``python examples/...`` and ``python -m ...`` lines name a file or module that exists.
* Every dotted name in inline code that starts with ``uss_stream`` (``uss_stream.replay.replay``)
  imports or resolves at that path.
"""

from __future__ import annotations

import ast
import doctest
import importlib
import importlib.util
import io
import os
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", ROOT / "deploy" / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
NOT_RUN = re.compile(r"<!--\s*not-run:\s*(.*?)\s*-->")
#: Blocks marked not-run, at most: a snippet that cannot run in the tests is the exception.
MAX_NOT_RUN = 4
#: Inline names that are wire-schema record names (Avro, Protobuf), not Python paths.
SCHEMA_NAMES = {"uss_stream.Decision", "uss_stream.Event"}
#: Replay options that make a documented replay tiny (the last occurrence of an option wins).
TINY_REPLAY = ["--horizon", "50", "--reps", "2", "--no-progress"]


@dataclass(frozen=True)
class Block:
    """A fenced code block: its page and fence line, its language, its text, why it is not run (if so)."""

    page: Path
    line: int
    lang: str
    text: str
    not_run: str | None

    @property
    def name(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def fenced_blocks(page: Path) -> Iterator[Block]:
    """The fenced blocks of ``page``; a ``not-run`` comment on the last non-blank line before applies."""
    lines = page.read_text().splitlines()
    previous, index = "", 0
    while index < len(lines):
        line = lines[index]
        fence = re.match(r"^(\s*)(```+)\s*([\w+-]*)", line)
        if fence is None:
            previous = line.strip() or previous
            index += 1
            continue
        indent, ticks, lang = fence.groups()
        body: list[str] = []
        index += 1
        while index < len(lines) and not lines[index].strip().startswith(ticks):
            body.append(lines[index][len(indent) :] if lines[index].startswith(indent) else lines[index])
            index += 1
        reason = NOT_RUN.search(previous)
        yield Block(page, index - len(body), lang.lower(), "\n".join(body) + "\n", reason and reason.group(1))
        previous, index = "", index + 1


BLOCKS = [block for page in PAGES for block in fenced_blocks(page)]
PYTHON = [block for block in BLOCKS if block.lang in ("python", "py", "pycon")]
SHELL = [block for block in BLOCKS if block.lang in ("bash", "sh", "shell", "console")]


def _imports_only(source: str) -> str:
    """The top-level import statements of ``source``: what a not-run block still checks."""
    tree = ast.parse(source)
    tree.body = [node for node in tree.body if isinstance(node, ast.Import | ast.ImportFrom)]
    return ast.unparse(tree)


def _run_doctest(block: Block) -> None:
    test = doctest.DocTestParser().get_doctest(block.text, {}, block.name, str(block.page), block.line)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    report = io.StringIO()
    runner.run(test, out=report.write)
    assert runner.failures == 0, report.getvalue()


RUNNABLE = [block for block in PYTHON if block.not_run is None]
MARKED_NOT_RUN = [block for block in PYTHON if block.not_run is not None]


@pytest.mark.parametrize("block", MARKED_NOT_RUN, ids=[block.name for block in MARKED_NOT_RUN])
def test_a_not_run_block_compiles_and_its_imports_run(block: Block) -> None:
    assert block.not_run, f"{block.name}: a not-run block says why"
    compile(block.text, block.name, "exec")
    exec(compile(_imports_only(block.text), block.name, "exec"), {"__name__": "__snippet__"})


@pytest.mark.parametrize("block", RUNNABLE, ids=[block.name for block in RUNNABLE])
def test_python_block_runs(block: Block, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    if re.search(r"^\s*>>> ", block.text, re.MULTILINE):
        _run_doctest(block)
    else:
        exec(compile(block.text, block.name, "exec"), {"__name__": "__snippet__"})


def test_not_run_blocks_are_few() -> None:
    marked = [f"{block.name} ({block.not_run})" for block in BLOCKS if block.not_run is not None]
    assert len(marked) <= MAX_NOT_RUN, marked


@dataclass(frozen=True)
class Command:
    """One simple command of a shell block: its words and the environment it runs in."""

    block: Block
    words: tuple[str, ...]
    env: tuple[tuple[str, str], ...]


def shell_commands(block: Block) -> Iterator[Command]:
    """The simple commands of a shell block (continuations joined; ``&&``, ``;``, ``|``, ``&`` split)."""
    exported: dict[str, str] = {}
    for line in block.text.replace("\\\n", " ").splitlines():
        lexer = shlex.shlex(line.removeprefix("$ "), posix=True, punctuation_chars=";&|")
        lexer.whitespace_split = True
        words: list[str] = []
        for token in [*lexer, ";"]:
            if token and set(token) <= set(";&|"):
                yield from _command(block, words, exported)
                words = []
            else:
                words.append(token)


def _command(block: Block, words: list[str], exported: dict[str, str]) -> Iterator[Command]:
    env = dict(exported)
    if words[:1] == ["export"]:
        exported.update(word.split("=", 1) for word in words[1:] if "=" in word)
        return
    while words and re.match(r"^[A-Z_][A-Z0-9_]*=", words[0]):
        key, value = words.pop(0).split("=", 1)
        env[key] = value
    if words:
        yield Command(block, tuple(words), tuple(sorted(env.items())))


COMMANDS = [command for block in SHELL for command in shell_commands(block)]
USS_STREAM = [command for command in COMMANDS if command.words[0] == "uss-stream"]
PYTHON_LINES = [command for command in COMMANDS if command.words[0] in ("python", "python3")]


def _command_id(command: Command) -> str:
    return f"{command.block.name}:{' '.join(command.words[:3])}"


@pytest.mark.parametrize("command", USS_STREAM, ids=[_command_id(c) for c in USS_STREAM])
def test_uss_stream_command_parses(command: Command, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from uss_stream.commands.cli import build_parser

    monkeypatch.chdir(ROOT)
    for key in [key for key in os.environ if key.startswith("USS_KAFKA_")]:
        monkeypatch.delenv(key)
    for key, value in command.env:
        monkeypatch.setenv(key, value)
    words = list(command.words[1:])
    args = build_parser().parse_args(words)
    if args.command == "kafka":
        from uss_stream_kafka.cli.settings import KafkaSettings

        KafkaSettings.from_args(args)  # every setting checked together, nothing connects
    elif args.command == "replay" and (args.input is None or Path(args.input).exists()):
        tiny = build_parser().parse_args([*words, *TINY_REPLAY, "--out", str(tmp_path / "out")])
        assert tiny.handler(tiny) == 0
        assert (tmp_path / "out" / "summary.csv").exists()


def test_the_docs_show_uss_stream_commands() -> None:
    assert {command.words[1] for command in USS_STREAM} >= {"replay", "kafka"}


@pytest.mark.parametrize("command", PYTHON_LINES, ids=[_command_id(c) for c in PYTHON_LINES])
def test_python_command_names_what_exists(command: Command) -> None:
    words = list(command.words[1:])
    if words[:1] == ["-m"]:
        assert importlib.util.find_spec(words[1]) is not None, words[1]
    else:
        assert (ROOT / words[0]).is_file(), words[0]


def _inline_names() -> list[tuple[str, str]]:
    found: dict[str, str] = {}
    for page in PAGES:
        for match in re.finditer(r"`((?:uss_stream|uss_stream_kafka)(?:\.\w+)+)", page.read_text()):
            found.setdefault(match.group(1), str(page.relative_to(ROOT)))
    return sorted((name, page) for name, page in found.items() if name not in SCHEMA_NAMES)


@pytest.mark.parametrize(("name", "page"), _inline_names())
def test_inline_name_exists(name: str, page: str) -> None:
    parts = name.split(".")
    for split in range(len(parts), 0, -1):
        try:
            target = importlib.import_module(".".join(parts[:split]))
        except ModuleNotFoundError:
            continue
        break
    for part in parts[split:]:
        assert hasattr(target, part), f"{page}: {name} does not exist ({part!r} is missing)"
        target = getattr(target, part)


def test_the_harness_reads_not_run_marks_exports_prefixes_and_chains(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "<!-- not-run: a reason -->\n\n```bash\nexport A=1\nB=2 uss-stream replay \\\n"
        "    --reps 3 && uss-stream kafka --help  # a comment\n```\n\n```python\nx = 1\n```\n"
    )
    shell, python = fenced_blocks(page)
    assert (shell.lang, shell.not_run, python.lang, python.not_run) == ("bash", "a reason", "python", None)
    assert python.text == "x = 1\n" and python.line == 9  # the fence line
    commands = list(shell_commands(shell))
    assert [c.words for c in commands] == [
        ("uss-stream", "replay", "--reps", "3"),
        ("uss-stream", "kafka", "--help"),
    ]
    assert [dict(c.env) for c in commands] == [{"A": "1", "B": "2"}, {"A": "1"}]
    assert len(PYTHON) >= 10 and len(USS_STREAM) >= 10  # the pages' snippets are found
