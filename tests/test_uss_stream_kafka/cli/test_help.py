"""``uss-stream kafka SUBCOMMAND --help`` lists the options most runs give first, and every option once.

The common options of each subcommand are written out here (the topics it reads and writes, the
group, the costs and policy, the mode and guarantee, and what ``create-topics`` and
``demo-producer`` are run for), independently of the settings table that declares them.
"""

from __future__ import annotations

import argparse
import os
import re

import pytest

from uss_stream.commands.cli import build_parser
from uss_stream_kafka.cli.settings import COMMANDS, SETTINGS

TOPICS = ["--bootstrap-servers", "--input-topic", "--output-topic", "--dlq-topic", "--state-topic"]
COMMON = {
    "run": [*TOPICS, "--group-id", "--mode", "--stage-costs", "--policy", "--guarantee"],
    "orchestrate": [*TOPICS, "--reports-topic", "--group-id", "--stage-costs", "--policy", "--guarantee"],
    "create-topics": [*TOPICS, "--partitions"],
    "demo-producer": ["--bootstrap-servers", "--input-topic", "--mode", "--events", "--rate"],
    "status": ["--bootstrap-servers", "--state-topic", "--group-id"],
}


def help_of(command: str, monkeypatch: pytest.MonkeyPatch) -> str:
    for name in [name for name in os.environ if name.startswith("USS_KAFKA_")]:
        monkeypatch.delenv(name)
    parser = build_parser()
    kafka = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices["kafka"]
    sub = next(a for a in kafka._actions if isinstance(a, argparse._SubParsersAction)).choices[command]
    return sub.format_help()


def sections(text: str) -> dict[str, list[str]]:
    """Each ``--help`` section's title and the flags it lists, in order."""
    found: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        if re.match(r"^\S.*:$", line):
            current = found.setdefault(line[:-1], [])
        elif current is not None and (option := re.match(r"^  (--[a-z0-9-]+)", line)):
            current.append(option.group(1))
    return found


@pytest.mark.parametrize("command", COMMANDS)
def test_the_common_options_come_first(command: str, monkeypatch: pytest.MonkeyPatch) -> None:
    listed = sections(help_of(command, monkeypatch))
    titles = list(listed)
    assert titles[:2] == ["options", "common options"], titles
    assert listed["common options"] == COMMON[command]


@pytest.mark.parametrize("command", COMMANDS)
def test_every_option_is_listed_once(command: str, monkeypatch: pytest.MonkeyPatch) -> None:
    listed = [flag for flags in sections(help_of(command, monkeypatch)).values() for flag in flags]
    taken = sorted("--" + item.name.replace("_", "-") for item in SETTINGS if command in item.commands)
    assert sorted(listed) == taken


@pytest.mark.parametrize("command", COMMANDS)
def test_the_usage_names_the_required_options_only(command: str, monkeypatch: pytest.MonkeyPatch) -> None:
    usage = help_of(command, monkeypatch).split("\n\n")[0]
    start = f"usage: uss-stream kafka {command} [-h] --bootstrap-servers BOOTSTRAP_SERVERS"
    assert " ".join(usage.split()).startswith(start)
    assert usage.rstrip().endswith("[OPTION ...]") and max(map(len, usage.splitlines())) <= 79
    named = re.findall(r"--[a-z-]+", usage)
    assert set(named) <= set(COMMON[command]) and "--policy" not in named
