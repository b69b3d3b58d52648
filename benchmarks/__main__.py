"""Run every benchmark that needs no broker: ``python -m benchmarks``.

The Kafka benchmark needs ``KAFKA_BOOTSTRAP_SERVERS`` and runs on its own:
``python -m benchmarks.bench_kafka``.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys

import benchmarks

NEEDS_BROKER = {"bench_kafka", "bench_orchestration"}


def main() -> None:
    names = sorted(m.name for m in pkgutil.iter_modules(benchmarks.__path__) if m.name.startswith("bench_"))
    for name in names:
        if name in NEEDS_BROKER:
            continue
        print(f"\n## {name}\n", flush=True)
        module = importlib.import_module(f"benchmarks.{name}")
        sys.argv = [name]
        module.main()


if __name__ == "__main__":
    main()
