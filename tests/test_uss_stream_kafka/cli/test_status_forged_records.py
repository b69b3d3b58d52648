"""``kafka status`` on forged state records, without a broker: a record is data, never code.

Anyone who can write to the state topic can write a record naming any "cascade factory", any
number of stages and any bytes in its topic name; ``status`` must not import or call what it
names, must not rebuild a learner of unbounded size, and must not print control characters.
"""

from __future__ import annotations

import sys

from uss_stream_kafka.cli import status
from uss_stream_kafka.cli.status import MAX_STAGES, format_table, partition_status
from uss_stream_kafka.runtime.checkpoint import Checkpoint


def counts(n_stages: int, decisions: int = 10) -> dict:
    """A policy state of ``decisions`` rounds that all stopped at depth 1 (written by hand)."""
    queried = [decisions] + [0] * (n_stages - 1)
    disagreements = [[0] * n_stages for _ in range(n_stages)]
    stats = {"format": "uss-stream/disagreement-stats/v1", "n_stages": n_stages, "decisions": decisions,
             "queried": queried, "disagreements": disagreements}  # fmt: skip
    return {"policy": "USSUCB", "stats": stats}


def checkpoint(processor: dict, state: dict, topic: str = "events") -> Checkpoint:
    return Checkpoint(topic=topic, partition=0, offset=10, state=state, group_id="g",
                      processor=processor, written_at=100.0)  # fmt: skip


def test_a_features_record_naming_a_factory_is_never_imported(tmp_path, monkeypatch):
    flag = tmp_path / "imported"
    (tmp_path / "trap_factory.py").write_text(
        f"open({str(flag)!r}, 'w').close()\ndef factory():\n    open({str(flag)!r}, 'a').write('called')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("trap_factory:factory", "os:abort", "builtins:input"):
        record = checkpoint({"mode": "features", "factory": name, "stage_costs": [0.0, 0.5]}, counts(2))
        row = partition_status(record, now=102.0)
        assert row["note"].startswith("features mode: status does not import the cascade factory")
        assert row["policy_round"] == 10 and row["depth_mix"] == [10, 0]  # what the counts say
        assert "chosen_depth" not in row
    assert not flag.exists() and "trap_factory" not in sys.modules


def test_learners_are_rebuilt_up_to_max_stages_and_not_past_it(monkeypatch):
    monkeypatch.setattr(status, "MAX_STAGES", 4)  # the bound's logic, on cheap learners
    at = checkpoint({"mode": "outputs", "stage_costs": [0.0, 0.1, 0.2, 0.3], "policy": "uss-ucb"}, counts(4))
    row = partition_status(at, now=100.0)
    assert "note" not in row and "chosen_depth" in row
    over = checkpoint({"mode": "outputs", "stage_costs": [0.0] * 5, "policy": "uss-ucb"}, counts(5))
    row = partition_status(over, now=100.0)
    assert row["note"] == "5 stage costs: status rebuilds learners of at most 4 stages"
    assert row["policy_round"] == 10 and "chosen_depth" not in row


def test_a_150000_stage_record_is_reported_without_building_its_learner():
    forged = checkpoint(
        {"mode": "outputs", "stage_costs": [0] * 150_000, "policy": "uss-ucb:alpha=0.51"}, counts(3)
    )
    row = partition_status(forged, now=100.0)  # a learner of 150 000 stages would take gigabytes
    assert row["note"] == f"150000 stage costs: status rebuilds learners of at most {MAX_STAGES} stages"


def test_control_characters_of_a_record_are_printed_escaped():
    forged = checkpoint({"mode": "outputs", "stage_costs": [0.0, 0.5], "policy": "uss-ucb"}, counts(2),
                        topic="ev\x1b[2J\x1b[31mFAKE\nline\r\x07")  # fmt: skip
    table = format_table([partition_status(forged, now=100.0)])
    assert all(char.isprintable() for line in table.splitlines() for char in line)
    assert len(table.split("\n")) == 2  # the heading and the partition's line: the forged newline is not one
    assert "ev\\x1b[2J\\x1b[31mFAKE\\nline\\r\\x07/0" in table
