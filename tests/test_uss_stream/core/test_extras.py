"""The core install is what a River user needs: extras are imported only by the features that need them.

Each check runs in a fresh interpreter (``sys.modules`` of the test process already holds everything).
Where an extra must be *absent*, a meta-path finder refuses its modules, exactly as if the package
were not installed.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from uss_stream.core.extras import EXTRAS, missing_extra, require

ROOT = Path(__file__).resolve().parents[3]

#: Refuses every optional module, as an install without any extra would.
BLOCK_EXTRAS = textwrap.dedent(
    """
    import importlib.abc, sys
    BLOCKED = set({blocked!r})

    class NotInstalled(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
            return None

    sys.meta_path.insert(0, NotInstalled())
    """
)


def _python(code: str, *, block: bool = False) -> subprocess.CompletedProcess:
    prefix = BLOCK_EXTRAS.format(blocked=sorted(EXTRAS)) if block else ""
    done = subprocess.run(
        [sys.executable, "-c", prefix + textwrap.dedent(code)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return done


def _loaded_extras(modules: list[str]) -> set[str]:
    return {name.split(".")[0] for name in modules} & set(EXTRAS)


def test_importing_the_library_loads_no_extra() -> None:
    """What ``import uss_stream`` and ``CascadeClassifier`` add to ``sys.modules`` holds no extra.

    pandas probes for pyarrow on import whatever we do, so the modules present after
    ``import pandas`` are the baseline.
    """
    done = _python(
        """
        import json, sys
        import numpy, pandas, river
        before = set(sys.modules)
        import uss_stream
        from uss_stream import CascadeClassifier, Stage
        import uss_stream.policies, uss_stream.replay.engine, uss_stream.core.stats, uss_stream.core.instances
        print(json.dumps(sorted(set(sys.modules) - before)))
        """
    )
    assert done.returncode == 0, done.stderr
    added = json.loads(done.stdout)
    assert "uss_stream.cascade.classifier" in added  # the check sees what the import brought in
    assert _loaded_extras(added) == set()


def test_a_river_pipeline_and_a_replay_run_without_any_extra() -> None:
    done = _python(
        """
        import json, sys
        import numpy as np
        from river import linear_model, preprocessing
        from uss_stream import CascadeClassifier, Stage
        from uss_stream.datasets.bsc import generate_bsc
        from uss_stream.policies import USSUCB
        from uss_stream.replay.engine import replay

        def learner():
            return preprocessing.StandardScaler() | linear_model.LogisticRegression()

        stages = [Stage(learner(), features=("a",), cost=0.0), Stage(learner(), cost=0.3)]
        model = CascadeClassifier(stages=stages)
        rng = np.random.default_rng(0)
        for _ in range(50):
            x = {"a": float(rng.normal()), "b": float(rng.normal())}
            model.learn_one(x, x["a"] + x["b"] > 0)
        prediction = model.predict_one({"a": 1.0, "b": 1.0})
        outputs, labels = generate_bsc(200, seed=1)
        result = replay(outputs, labels, policies={"u": USSUCB([0.0, 0.15, 0.2])}, horizon=50, reps=2)
        print(json.dumps({"prediction": bool(prediction), "regret": float(result.final_regret("u")[0]),
                          "modules": sorted(sys.modules)}))
        """,
        block=True,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["prediction"] is True
    assert report["regret"] >= 0
    assert _loaded_extras(report["modules"]) == set()


@pytest.mark.parametrize(
    ("code", "extra"),
    [
        (
            "from uss_stream.replay.engine import replay\n"
            "from uss_stream.datasets.bsc import generate_bsc\n"
            "from uss_stream.policies import USSUCB\n"
            "o, y = generate_bsc(100, seed=1)\n"
            "replay(o, y, policies={'u': USSUCB([0, .1, .2])}, horizon=20, reps=1).plot()",
            "plot",
        ),
        (
            "from uss_stream.replay.engine import replay\n"
            "from uss_stream.datasets.bsc import generate_bsc\n"
            "from uss_stream.policies import USSUCB\n"
            "o, y = generate_bsc(100, seed=1)\n"
            "replay(o, y, policies={'u': USSUCB([0, .1, .2])}, horizon=20, reps=1, progress=True)",
            "plot",
        ),
        ("from uss_stream.datasets.paper import paper_case\npaper_case('pima-1').log()", "paper"),
        ("from uss_stream.datasets.paper import paper_case\npaper_case('synthetic1-1').log()", "paper"),
    ],
    ids=["plot", "progress-bar", "paper-real", "paper-synthetic"],
)
def test_a_feature_whose_extra_is_missing_names_it(code: str, extra: str) -> None:
    done = _python(code, block=True)
    assert done.returncode != 0
    assert "ModuleNotFoundError" in done.stderr
    assert f"pip install 'uss-stream[{extra}]'" in done.stderr


@pytest.mark.parametrize(
    ("argv", "extra"),
    [
        (["kafka", "run", "--bootstrap-servers", "127.0.0.1:1"], "kafka"),
        (["replay", "--case", "bsc-1", "--out", "never-written"], "plot"),
    ],
    ids=["kafka", "replay"],
)
def test_the_command_line_names_the_missing_extra(argv: list[str], extra: str, tmp_path: Path) -> None:
    """The CLI still starts (``--help`` lists every command) and a command that needs an extra says which."""
    listing = _python("from uss_stream.commands.cli import main\nmain(['--help'])", block=True)
    assert listing.returncode == 0, listing.stderr
    assert "replay" in listing.stdout and "kafka" in listing.stdout
    done = _python(
        f"import sys\nfrom uss_stream.commands.cli import main\nsys.exit(main({argv!r}))", block=True
    )
    assert done.returncode == 2, done.stderr
    assert f"uss-stream {argv[0]}: error:" in done.stderr
    assert f"pip install 'uss-stream[{extra}]'" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (ROOT / "never-written").exists()


def test_require_names_the_extra_and_passes_through_broken_installs() -> None:
    assert require("matplotlib.figure").Figure.__name__ == "Figure"
    with pytest.raises(ModuleNotFoundError, match=r"\[parquet\] extra.*uss-stream\[parquet\]") as caught:
        require("not_installed_here", extra="parquet", purpose="Parquet logs")
    assert "Parquet logs" in str(caught.value)
    with pytest.raises(ValueError, match="'numpy' is not an optional dependency"):
        require("numpy")
    # a present extra whose own dependency is missing: the original error, not a misleading hint
    broken = ModuleNotFoundError("No module named 'numpy'", name="numpy")
    assert missing_extra(broken) is None
    assert "uss-stream[kafka]" in missing_extra(ModuleNotFoundError("x", name="kafka.errors"))


def test_every_extra_in_the_map_is_declared_in_pyproject() -> None:
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    assert set(EXTRAS.values()) <= set(extras)
    assert {"kafka", "confluent", "plot", "paper", "parquet", "all", "dev"} <= set(extras)
    core = " ".join(project["dependencies"])
    for heavy in ("kafka", "prometheus", "matplotlib", "scikit-learn", "tqdm", "pyarrow"):
        assert heavy not in core


def test_the_outputs_service_imports_neither_pandas_nor_river() -> None:
    """Outputs mode decides from the events' outputs: its start-up (a restart, a take-over) does not
    pay for the data-frame and the online-learning libraries (pandas alone took 0.8 s of 1.1 s)."""
    done = _python(
        """
        import json, sys
        from uss_stream_kafka import OutputsProcessor
        for spec in ["uss-kl-ucb", "uss-ucb", "uss-ts", "alg2", "fixed:depth=2"]:
            learner = OutputsProcessor([0.0, 0.1, 0.2], policy=spec).new_learner()
            learner.process(b'{"id": 1, "outputs": [1, 0, 1]}')
        print(json.dumps(sorted(sys.modules)))
        """
    )
    assert done.returncode == 0, done.stderr
    loaded = {name.split(".")[0] for name in json.loads(done.stdout)}
    assert "uss_stream_kafka" in loaded  # the check sees what the import brought in
    assert loaded.isdisjoint({"pandas", "river"})
