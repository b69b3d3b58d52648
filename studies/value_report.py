"""The value report's page and CSV, from the cached documents of :mod:`studies.value`.

:func:`value_table` turns the documents into one row per cascade and policy (the CSV);
:func:`recommend` chooses the recommended label-free policy on the development group only;
:func:`write_report` writes ``value.md`` (headline block first, between the markers
:data:`HEADLINE_START` and :data:`HEADLINE_END`) and ``value.csv``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from studies.markdown import table
from studies.value import LABEL_ASKING, LIBRARY_LABEL_FREE, PROXIES, REFERENCES
from studies.value_cascades import PRACTITIONER_RULES

__all__ = [
    "HEADLINE_END",
    "HEADLINE_START",
    "TARGET_RATIO",
    "better_choice",
    "kind_of",
    "recommend",
    "spec_of_name",
    "value_table",
    "write_report",
]

#: The markers around the page's headline block (the README quotes what is between them).
HEADLINE_START = "<!-- value-headline:start -->"
HEADLINE_END = "<!-- value-headline:end -->"
#: The target: the recommended policy's loss at most this many times the best practitioners' rule's.
TARGET_RATIO = 1.05
HELD_OUT = ("held-out real", "Turney", "River online")
#: The disagreement-based label-free policies of the library (the threshold rules aside).
DISAGREEMENT = LIBRARY_LABEL_FREE


def kind_of(policy: str) -> str:
    """``"library"``, ``"label-asking"``, ``"practitioners"`` or ``"reference"``.

    >>> kind_of("USS-KL-UCB"), kind_of("top-probability 0.9"), kind_of("always deepest")
    ('library', 'practitioners', 'reference')
    """
    if policy in LIBRARY_LABEL_FREE:
        return "library"
    if policy in LABEL_ASKING:
        return "label-asking"
    if policy in PRACTITIONER_RULES:
        return "practitioners"
    if policy in REFERENCES:
        return "reference"
    raise ValueError(f"unknown policy {policy!r}")


def spec_of_name(policy: str) -> str:
    """The library spec that implements a report policy (``--policy`` text).

    >>> spec_of_name("top-probability 0.9"), spec_of_name("SequentialKLUCB")
    ('confidence-threshold:threshold=0.9', 'sequential-kl-ucb')
    """
    if policy in PRACTITIONER_RULES:
        family, params = PRACTITIONER_RULES[policy]
        given = ",".join(f"{key}={value}" for key, value in params.items())
        return family + (f":{given}" if given else "")
    specs = {
        "USS-KL-UCB": "uss-kl-ucb",
        "USS-UCB": "uss-ucb:alpha=0.51",
        "SequentialKLUCB": "sequential-kl-ucb",
        "UEE-UCB": "uee-ucb",
        "AuditedUSS": "audited",
    }
    return specs[policy]


def value_table(documents: Sequence[dict[str, Any]]) -> pd.DataFrame:
    """One row per cascade and policy: the report's figures (the CSV's columns).

    ``saved`` is ``1 - cost / C_K``; ``accuracy_vs_deepest`` and ``accuracy_vs_best_fixed`` are the
    accuracy changes in points against always the deepest stage and against the best fixed depth
    (in hindsight); ``ratio_to_best_rule`` is the loss over the least loss of the practitioners'
    rules on the cascade.
    """
    rows = []
    for document in documents:
        policies = document["policies"]
        full_cost = float(np.sum(document["stage_costs"]))
        deepest = policies["always deepest"]["error"]
        fixed = policies["best fixed depth (hindsight)"]["error"]
        best_rule = min(policies[name]["loss"] for name in PRACTITIONER_RULES)
        for name, figures in policies.items():
            rows.append(
                {
                    "group": document["group"],
                    "cascade": document["name"],
                    "unit": document["unit"],
                    "price_of_error": document["price_of_error"],
                    "full_cost": full_cost,
                    "wd": document["wd"],
                    "best_fixed_depth": document["best_fixed_depth"],
                    "horizon": document["horizon"],
                    "reps": document["reps"],
                    "policy": name,
                    "kind": kind_of(name),
                    "cost": figures["cost"],
                    "saved": 1.0 - figures["cost"] / full_cost,
                    "accuracy": 1.0 - figures["error"],
                    "accuracy_vs_deepest": 100.0 * (deepest - figures["error"]),
                    "accuracy_vs_best_fixed": 100.0 * (fixed - figures["error"]),
                    "labels": figures["labels"],
                    "regret": figures["regret"],
                    "loss": figures["loss"],
                    "ratio_to_best_rule": figures["loss"] / best_rule,
                    "depth_mix": " ".join(str(n) for n in figures["depth_mix"]),
                }
            )
    return pd.DataFrame(rows)


def recommend(frame: pd.DataFrame) -> tuple[str, pd.DataFrame]:
    """The recommended label-free policy, chosen on the development group only, and the scores.

    Every label-free policy of the library (the disagreement-based ones and the threshold rules)
    is scored by the share of development cascades on which its loss is within
    :data:`TARGET_RATIO` of the best practitioners' rule's (ties: the smaller median ratio).
    """
    development = frame[(frame["group"] == "development") & frame["kind"].isin(["library", "practitioners"])]
    if development.empty:
        raise ValueError("no development cascade in the cache: the recommendation is made there only")
    scores = (
        development.assign(meets=development["ratio_to_best_rule"] <= TARGET_RATIO)
        .groupby("policy")
        .agg(share=("meets", "mean"), median_ratio=("ratio_to_best_rule", "median"))
        .sort_values(["share", "median_ratio"], ascending=[False, True])
    )
    return str(scores.index[0]), scores


def _named(policy: str) -> str:
    return f"`{spec_of_name(policy)}` ({policy})"


def _pct(value: float) -> str:
    return f"{100 * value:.1f}%"


def _points(value: float) -> str:
    return f"{value:+.2f}"


def _ratio(value: float) -> str:
    return f"{value:.3f}" + ("" if value <= TARGET_RATIO else " ✗")


def _held_out(frame: pd.DataFrame) -> pd.DataFrame:
    return frame[frame["group"].isin(HELD_OUT)]


def _best_rule(frame: pd.DataFrame) -> pd.DataFrame:
    """Per cascade, the practitioners' rule with the least loss (one row per cascade)."""
    rules = frame[frame["kind"] == "practitioners"]
    return rules.loc[rules.groupby("cascade")["loss"].idxmin()].set_index("cascade")


def better_choice(frame: pd.DataFrame) -> pd.Series:
    """Per cascade, which kind of label-free policy is the better choice there.

    ``"threshold rule"`` where the best practitioners' rule's loss is below the loss of every
    disagreement-based policy of the library (:data:`DISAGREEMENT`) by more than the target's
    margin, ``"disagreement-based"`` where the best of those is below the best rule's by as much,
    ``"either"`` otherwise.
    """
    rules = _best_rule(frame)["loss"]
    ours = frame[frame["policy"].isin(DISAGREEMENT)].groupby("cascade")["loss"].min()
    choice = pd.Series("either", index=rules.index)
    choice[rules * TARGET_RATIO < ours.loc[rules.index]] = "threshold rule"
    choice[ours.loc[rules.index] * TARGET_RATIO < rules] = "disagreement-based"
    return choice


def _headline(frame: pd.DataFrame, chosen: str) -> list[str]:
    held = _held_out(frame)
    mine = held[held["policy"] == chosen].set_index("cascade")
    n_tables = {group: held[held["group"] == group]["cascade"].nunique() for group in HELD_OUT}
    n_dev = frame[frame["group"] == "development"]["cascade"].nunique()
    meets = mine["ratio_to_best_rule"] <= TARGET_RATIO
    audited = held[held["policy"] == "AuditedUSS"].set_index("cascade")
    default = held[held["policy"] == "USS-KL-UCB"].set_index("cascade")
    fails = audited.index[~audited["wd"]]
    gain = 1.0 - audited.loc[fails, "loss"] / default.loc[fails, "loss"]
    label_share = audited.loc[fails, "labels"] / (audited.loc[fails, "horizon"])
    best = _best_rule(held)
    choice = better_choice(held)
    wins = choice.index[choice == "threshold rule"]
    winners = best.loc[wins, "policy"].value_counts()
    named = ", ".join(f"`{spec_of_name(p)}` ({n})" for p, n in winners.items()) or "none"
    ours = int((choice == "disagreement-based").sum())
    total = len(mine)
    lines = [
        HEADLINE_START,
        f"- **Cascades tried**: {total} held-out ({n_tables['held-out real']} real tables at two cost "
        f"scales, {n_tables['Turney']} PIMA/Heart with Turney's dollar costs, "
        f"{n_tables['River online']} River cascades learned online), and {n_dev} development "
        "cascades on which the recommendation was made.",
        f"- **At zero labels**, the recommended label-free policy `{spec_of_name(chosen)}` ({chosen}) "
        f"saves a median {_pct(mine['saved'].median())} of the cost of always querying the deepest "
        f"stage, with a median accuracy change of {_points(mine['accuracy_vs_deepest'].median())} "
        f"points against it ({_points(mine['accuracy_vs_best_fixed'].median())} against the best "
        f"fixed depth in hindsight). The cascade's default, `uss-kl-ucb`, saves a median "
        f"{_pct(default['saved'].median())} with a median change of "
        f"{_points(default['accuracy_vs_deepest'].median())} points.",
        _audited_line(fails, gain, label_share, total),
        f"- **A threshold rule is the better choice** on {len(wins)} of {total} cascades (the best "
        f"one's loss is more than {TARGET_RATIO - 1:.0%} below every disagreement-based policy's), "
        f"with the best rule there: {named}; each is a library policy (sequential: "
        f"`CascadeClassifier(policy=...)`, `replay_sequential`). A disagreement-based policy is the "
        f"better choice on {ours}; on the other {total - len(wins) - ours} either does.",
        f"- **Target** (loss at most {TARGET_RATIO}x the best practitioners' label-free rule's, on "
        f">= 80% of the real cascades): {int(meets.sum())} of {total} ({_pct(meets.mean())}): "
        f"{'met' if meets.mean() >= 0.8 else 'not met'}.",
        HEADLINE_END,
    ]
    return lines


def _audited_line(fails: pd.Index, gain: pd.Series, label_share: pd.Series, total: int) -> str:
    if len(fails) == 0:
        return f"- **Weak dominance holds** on all {total} cascades: AuditedUSS has nothing to correct."
    return (
        f"- **Where weak dominance fails** ({len(fails)} of {total} cascades), AuditedUSS's loss is a "
        f"median {_pct(gain.median())} below USS-KL-UCB's (mean {_pct(gain.mean())}), for a median "
        f"{_pct(label_share.median())} of the events' labels."
    )


def _group_table(frame: pd.DataFrame) -> str:
    """Per policy, the medians over the held-out cascades."""
    held = _held_out(frame)
    header = [
        "policy",
        "kind",
        "cost saved",
        "Δ accuracy vs deepest (pts)",
        "Δ accuracy vs best fixed (pts)",
        "labels",
        "loss / best rule's",
        f"within {TARGET_RATIO}x",
    ]
    rows = []
    for name, part in held.groupby("policy", sort=False):
        rows.append(
            [
                name,
                part["kind"].iloc[0],
                _pct(part["saved"].median()),
                _points(part["accuracy_vs_deepest"].median()),
                _points(part["accuracy_vs_best_fixed"].median()),
                f"{part['labels'].median():.0f}",
                f"{part['ratio_to_best_rule'].median():.3f}",
                _pct((part["ratio_to_best_rule"] <= TARGET_RATIO).mean()),
            ]
        )
    return table(header, rows)


def _cascade_table(frame: pd.DataFrame, chosen: str, groups: Sequence[str]) -> str:
    part = frame[frame["group"].isin(groups)]
    mine = part[part["policy"] == chosen].set_index("cascade")
    best = _best_rule(part)
    choice = better_choice(part)
    fixed = part[part["policy"] == "best fixed depth (hindsight)"].set_index("cascade")
    header = [
        "cascade",
        "unit",
        "price",
        "WD",
        "i*",
        "saved",
        "Δ acc (pts)",
        "loss",
        "best rule",
        "its loss",
        "ratio",
        "better choice",
    ]
    rows = []
    for name, row in mine.iterrows():
        rows.append(
            [
                name,
                row["unit"],
                f"{row['price_of_error']:g}",
                "holds" if row["wd"] else "fails",
                str(int(fixed.loc[name, "best_fixed_depth"])),
                _pct(row["saved"]),
                _points(row["accuracy_vs_deepest"]),
                f"{row['loss']:.4g}",
                f"`{spec_of_name(best.loc[name, 'policy'])}`",
                f"{best.loc[name, 'loss']:.4g}",
                _ratio(row["ratio_to_best_rule"]),
                choice.loc[name],
            ]
        )
    return table(header, rows)


def _reach(frame: pd.DataFrame, documents: Sequence[dict[str, Any]]) -> list[str]:
    """Reach scan: how close each kind of label-free choice comes to the best practitioners' rule."""
    held = _held_out(frame)
    shares = (
        held[held["kind"].isin(["library", "practitioners"])]
        .assign(meets=lambda f: f["ratio_to_best_rule"] <= TARGET_RATIO)
        .groupby("policy")["meets"]
        .mean()
        .sort_values(ascending=False)
    )
    ratio = held.set_index(["cascade", "policy"])["ratio_to_best_rule"]
    disagreement = held[held["policy"].isin(DISAGREEMENT)].groupby("cascade")["ratio_to_best_rule"].min()
    selectors = {proxy: [] for proxy in PROXIES}
    for document in documents:
        if document["group"] in HELD_OUT:
            for proxy, rule in document["reach"].items():
                selectors[proxy].append(ratio[document["name"], rule])
    best_single, best_share = shares.index[0], shares.iloc[0]
    reach = max(best_share, *(np.mean(np.asarray(r) <= TARGET_RATIO) for r in selectors.values()))
    verdict = (
        f"- **No label-free policy or selector measured here reaches 80%** (the most is {_pct(reach)}): "
        "on these cascades the target is out of reach of a label-free choice."
        if reach < 0.8
        else f"- A label-free choice can reach the target here: the most measured is {_pct(reach)}."
    )
    rows = [[_named(p), "one policy on every cascade", _pct(s)] for p, s in shares.items()]
    rows.append(
        [
            "the best disagreement-based policy",
            "chosen per cascade with the labels",
            _pct((disagreement <= TARGET_RATIO).mean()),
        ]
    )
    for proxy, ratios in selectors.items():
        within = np.mean(np.asarray(ratios) <= TARGET_RATIO)
        rows.append([f"the fixed rule a proxy picks: {proxy}", "label-free, full information", _pct(within)])
    return [
        verdict,
        f"- The best single label-free policy on the held-out cascades is {_named(best_single)}: within "
        f"{TARGET_RATIO}x of the best practitioners' rule on {_pct(best_share)} of them. No other label-free "
        f"policy of the library does better on these cascades.",
        "- *A proxy picks*: a selector that sees every stage's answer on every event of the log (as if "
        "each event were explored for free) but no label, and picks the fixed threshold rule with the "
        "least mean cost plus a label-free stand-in for the error (disagreement with the deepest stage, "
        "with the stages' majority, with the stages' averaged probabilities, or one minus the answering "
        "stage's confidence, CeeBERT's proxy). It bounds what a label-free learner over these rules can "
        "reach with that stand-in: exploring costs, and it has none of that cost here.",
        "- The best practitioners' rule is itself chosen per cascade, with the labels, among "
        f"{len(PRACTITIONER_RULES)} rules: a comparator no single label-free rule is bound to reach.",
        "",
        table(["policy or selector", "how it is chosen", f"held-out cascades within {TARGET_RATIO}x"], rows),
    ]


def write_report(documents: Sequence[dict[str, Any]], out: Path, settings: dict[str, Any]) -> list[Path]:
    """Write ``value.md`` and ``value.csv`` under ``out``; returns their paths."""
    frame = value_table(documents)
    chosen, scores = recommend(frame)
    out.mkdir(parents=True, exist_ok=True)
    csv_path, md_path = out / "value.csv", out / "value.md"
    frame.to_csv(csv_path, index=False, float_format="%.6g")
    sections = {
        "cpu": sum(document["cpu_seconds"] for document in documents),
        "count": len(documents),
        "headline": _headline(frame, chosen),
        "groups": _group_table(frame),
        "reach": _reach(frame, documents),
        "scores": table(
            ["policy", f"development cascades within {TARGET_RATIO}x", "median ratio"],
            [
                [f"`{spec_of_name(p)}` ({p})", _pct(r.share), f"{r.median_ratio:.3f}"]
                for p, r in scores.iterrows()
            ],
        ),
        "cascades": {group: _cascade_table(frame, chosen, [group]) for group in (*HELD_OUT, "development")},
    }
    md_path.write_text(page(chosen, sections, settings))
    return [md_path, csv_path]


PROTOCOL = """## Protocol

**Cascades.** The list, the price of one error of each cascade and the practitioners' rules were
fixed in `studies/value_cascades.py` and committed before any replay; none is dropped. Held-out:
the 64 real cascades of the held-out evaluation (32 bundled tables, four decision trees of depths
2 to 8 on growing feature sets, cost scales λ = 0.02 and 0.1, costs in units of one error); PIMA
and Heart with the paper's three logistic-regression stages, cross-fitted (5 folds), and Turney's
test costs in Canadian dollars (PIMA 6.00, 17.61, 20.68; Heart 29.87, 191.20, 102.90 per stage)
at 1 000 and 10 000 CAD per error (Turney evaluated these costs with error costs from 10 to
10 000 dollars; below about 1 000 no deeper Heart stage can pay for its tests); the five real
streams of the adaptive-depth study learned online with River under progressive validation
(Phishing, Bananas, ImageSegments, PIMA, Heart; 50 warm-up events left out) at λ = 0.02 and 0.1.
Development (the recommendation is chosen there and nowhere else): the 14 balanced keel tables
under 500 rows, built as the held-out real cascades, at both scales.

**Loss, in the user's units.** `loss = mean cost per event + price_of_error × error rate`. The
policies take the costs divided by the price (units of one error); every figure is converted back.

**Replay.** Resampled cascades: {horizon} rounds drawn with replacement from the log, {reps}
repetitions (seed {seed}); the cascades learned online: one pass in stream order. Label-asking
AuditedUSS gets its labels {label_delay} rounds late. The fixed threshold rules decide from the
event alone, so each runs once over the log and is read at the drawn rows; the bandit and
SequentialKLUCB learn along the drawn rows. Regret is against the best fixed depth, summed over
the rounds, in the cascade's unit.

**Policies.** Library, label-free: USS-KL-UCB (the cascade's default), USS-UCB (α = 0.51),
SequentialKLUCB, UEE-UCB; label-asking: AuditedUSS. Practitioners' label-free rules, each a library
policy: `confidence-threshold` at τ = 0.6, 0.7, 0.8, 0.9 (the common default), 0.95, 0.99
(stop at the first stage whose top probability reaches τ), `entropy-threshold` at S = 0.05 to 0.6
nats (DeeBERT's rule, on each stage's full probabilities) and `threshold-bandit` (CeeBERT's
label-free threshold learning: UCB1 over τ in 0.6 ... 1.0, reward = the answering stage's
confidence minus the cost asked). References chosen with every label in hindsight: the best fixed
depth, the best per-stage thresholds (20-quantile grid per stage) and the per-event oracle (the
cheapest right answer of each event). The *best practitioners' rule* of a cascade is the
practitioners' rule with the least loss there: itself a choice made with the labels.

**Recommendation.** Every label-free policy of the library (the four above and every threshold
rule) is scored on the development cascades by the share within {ratio}x of the best
practitioners' rule; the best share wins (ties: the smaller median ratio). The held-out figures
are reported for that policy.
"""


def page(chosen: str, sections: dict[str, Any], settings: dict[str, Any]) -> str:
    """The Markdown page from the computed sections."""
    lines = [
        "# What it saves: cost and accuracy on real cascades",
        "",
        "Generated by `python -m studies.value` (`make value`); every figure below, per cascade and "
        f"policy, is in [value.csv](value.csv). The replays took {sections['cpu']:.0f} CPU seconds "
        f"for {sections['count']} cascades (with the cascades' construction, a few minutes on two cores).",
        "",
        *sections["headline"],
        "",
        "## Every policy on the held-out cascades (medians over cascades)",
        "",
        "*cost saved*: against always querying the deepest stage; *loss / best rule's*: the loss over "
        "the best practitioners' rule's on the same cascade.",
        "",
        sections["groups"],
        "",
        "## Reach: how close a single label-free policy can come",
        "",
        *sections["reach"],
        "",
        f"## The recommendation, chosen on the development cascades: `{spec_of_name(chosen)}`",
        "",
        sections["scores"],
        "",
    ]
    titles = {
        "held-out real": "The 64 held-out real cascades (unit: one error)",
        "Turney": "PIMA and Heart with Turney's costs (unit: CAD)",
        "River online": "River cascades learned online (unit: one error)",
        "development": "Development cascades (not part of any held-out figure)",
    }
    for group, text in sections["cascades"].items():
        lines += [
            f"## {titles[group]}",
            "",
            f"The recommended policy ({chosen}) against the best practitioners' rule; ✗: ratio above "
            f"{TARGET_RATIO}. *i\\**: best fixed depth in hindsight; *Δ acc*: accuracy change against "
            "the deepest stage, in points.",
            "",
            text,
            "",
        ]
    lines.append(PROTOCOL.format(ratio=TARGET_RATIO, **settings))
    return "\n".join(lines)
