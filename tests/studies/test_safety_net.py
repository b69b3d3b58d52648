"""The safety-net study caches each policy's summary per instance and merges them into one page."""

from __future__ import annotations

import json
import re
from pathlib import Path

from studies.safety_net import POLICIES, cache_file, instances, main, run_instance

#: Where the page goes by default (``--out``): its links are relative to this folder.
EVIDENCE = Path(__file__).resolve().parents[2] / "docs" / "evidence"


def test_policies_replayed_apart_equal_one_replay_and_the_page_merges_them(tmp_path):
    settings = {"horizon": 600, "reps": 3, "label_delay": 10, "seed": 4}
    costs = dict(instances())["bsc-5"]
    together = run_instance("bsc-5", costs, settings)
    argv = ["--horizon", "600", "--reps", "3", "--label-delay", "10", "--seed", "4", "--only", "bsc-5"]
    argv += ["--cache", str(tmp_path / "cache"), "--out", str(tmp_path / "docs")]
    main([*argv, "--policies", "USS-UCB,AuditedUSS"])
    page = (tmp_path / "docs" / "results_safety_net.md").read_text()
    assert "bsc-5" in page.split("**Not replayed")[1].split("\n")[0]  # four policies still missing
    main(argv)
    for policy in POLICIES:
        cached = json.loads(cache_file(tmp_path / "cache", "bsc-5", policy).with_suffix(".json").read_text())
        assert cached["settings"] == settings
        entry = cached["policies"][policy]
        assert entry["regret_mean"] == together["policies"][policy]["regret_mean"]
        assert entry["labels_mean"] == together["policies"][policy]["labels_mean"]
    page = (tmp_path / "docs" / "results_safety_net.md").read_text()
    assert "Not replayed" not in page and "| bsc-5 | no |" in page
    links = re.findall(r"\]\(([^)#]+\.md)", page)
    assert links and all((EVIDENCE / link).is_file() for link in links), links
