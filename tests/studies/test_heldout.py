"""The held-out runner and report, as a smoke test: a few rounds of one instance per split."""

from __future__ import annotations

import json

from studies.heldout import audited_name, main
from studies.heldout_report import targets


def test_a_run_caches_each_policy_and_the_report_counts_what_was_replayed(tmp_path):
    cache, out = tmp_path / "cache", tmp_path / "docs"
    common = ["--horizon", "300", "--reps", "2", "--cache", str(cache)]
    assert main(["--split", "development", "--only", "seed-0", *common]) == 0
    assert main(["--split", "heldout", "--only", "seed-10001", *common]) == 0
    files = sorted(p.name for p in cache.iterdir())
    assert len(files) == 6 and "seed-10001__AuditedUSS.json" in files
    run = json.loads((cache / "seed-10001__AuditedUSS.json").read_text())
    assert len(run["regret"]) == 2 and run["settings"]["horizon"] == 300
    assert main(["--report", "--out", str(out), *common]) == 0
    page = (out / "results_heldout.md").read_text()
    assert "1 of\n60 development, 1 of 240\nheld-out" in page


def test_variants_are_for_development_seeds_only(tmp_path, capsys):
    try:
        main(["--split", "heldout", "--audited", "label_budget=2", "--cache", str(tmp_path)])
    except SystemExit as stop:
        assert stop.code == 2
    assert "development seeds only" in capsys.readouterr().err
    assert audited_name({"label_budget": 2.0}) == "AuditedUSS[label_budget=2.0]"


def test_targets_at_their_thresholds():
    holds = {"wd": True, "audited R_T": 125.0, "USS-KL-UCB R_T": 100.0, "labels share": 0.01}
    assert targets(holds) == {"vs USS-KL-UCB": True, "labels": True, "all": True}
    assert targets({**holds, "audited R_T": 125.1})["vs USS-KL-UCB"] is False
    assert targets({**holds, "labels share": 0.0101})["labels"] is False
    fails = {
        "wd": False,
        "audited R_T": 25.0,
        "audited R_T/2": 25.0 / 1.6,
        "USS-KL-UCB R_T": 100.0,
        "Supervised UCB R_T": 20.0,
        "labels share": 0.02,
    }
    assert targets(fails)["all"] is True
    assert targets({**fails, "audited R_T/2": 15.6})["growth"] is False
    assert targets({**fails, "Supervised UCB R_T": 19.9})["vs Supervised UCB"] is False
