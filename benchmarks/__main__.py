"""Run every benchmark that needs no broker: ``python -m benchmarks``.

The broker benchmarks need ``KAFKA_BOOTSTRAP_SERVERS`` and run on their own:
``python -m benchmarks.bench_kafka`` (service against a passthrough, one partition),
``python -m benchmarks.bench_orchestration`` (orchestration mode),
``python -m benchmarks.bench_scaleout`` (2 worker processes against 1, four partitions) and
``python -m benchmarks.bench_status`` (``kafka status`` for 16 partitions).
"""

from __future__ import annotations

import importlib
import pkgutil
import sys

import benchmarks

NEEDS_BROKER = {
    "bench_features_durable",
    "bench_formats",
    "bench_kafka",
    "bench_orchestration",
    "bench_scaleout",
    "bench_service_split",
    "bench_status",
}


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
