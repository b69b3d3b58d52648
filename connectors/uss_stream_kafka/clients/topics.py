"""The topics a decision service reads and writes, and their creation.

* **input**: events (outputs mode: stage outputs; features mode: features), any number of partitions;
  one learner per partition.
* **output**: one decision per decided event, written to the partition with the input's number
  (modulo the output's partition count), so decisions keep the input partition's order.
* **dead letter**: one record per event that could not be decided.
* **state**: the learners' checkpoints, compacted, one key per input partition.
* **labels** (features mode, optional): labelled events the cascade's stages learn from; must have
  as many partitions as the input (partition ``p`` feeds the learner of input partition ``p``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["LABELS_TOPIC_CONFIGS", "STATE_TOPIC_CONFIGS", "Topics", "check_state_topic", "create_topics"]

#: The state topic keeps the last checkpoint of each key forever.
STATE_TOPIC_CONFIGS = {
    "cleanup.policy": "compact",
    "min.cleanable.dirty.ratio": "0.1",
    "segment.ms": "3600000",
}

#: The labels topic keeps every record: a restored learner re-learns it (see ``relearn``).
LABELS_TOPIC_CONFIGS = {"retention.ms": "-1"}


@dataclass(frozen=True)
class Topics:
    """Names of the service's topics.

    Examples
    --------
    >>> topics = Topics(input="events", output="decisions", dead_letter="events-dlq", state="uss-state")
    >>> topics.all()
    ('events', 'decisions', 'events-dlq', 'uss-state')
    >>> Topics(input="t", output="t", dead_letter="d", state="s")
    Traceback (most recent call last):
    ...
    ValueError: topic 't' is used for both input and output; every role needs its own topic

    """

    input: str
    output: str
    dead_letter: str
    state: str
    labels: str | None = None

    def __post_init__(self) -> None:
        seen: dict[str, str] = {}
        for role, name in self._roles():
            if not isinstance(name, str) or not name or len(name) > 249:
                raise ValueError(
                    f"{role} topic must be a non-empty name of at most 249 characters, got {name!r}"
                )
            if not all(c.isalnum() or c in "._-" for c in name):
                raise ValueError(f"{role} topic {name!r} may only contain letters, digits, '.', '_' and '-'")
            if name in seen:
                raise ValueError(
                    f"topic {name!r} is used for both {seen[name]} and {role}; every role needs its own topic"
                )
            seen[name] = role

    def _roles(self) -> list[tuple[str, str]]:
        roles = [
            ("input", self.input),
            ("output", self.output),
            ("dead_letter", self.dead_letter),
            ("state", self.state),
        ]
        if self.labels is not None:
            roles.append(("labels", self.labels))
        return roles

    def all(self) -> tuple[str, ...]:
        """Every topic name, input first."""
        return tuple(name for _, name in self._roles())


def create_topics(
    admin: Any,
    topics: Topics,
    partitions: int = 1,
    replication_factor: int = 1,
    state_partitions: int = 1,
) -> dict[str, str]:
    """Create the service's topics; existing ones are kept.

    ``admin``: the client seam's :class:`~uss_stream_kafka.clients.Admin` (either library; what
    ``uss-stream kafka create-topics --client`` uses) or a kafka-python ``KafkaAdminClient``.

    Input, output, dead-letter (and labels) topics get ``partitions`` partitions; the state topic
    gets ``state_partitions`` and ``cleanup.policy=compact``; the labels topic ``retention.ms=-1``.

    Returns
    -------
    dict
        ``{topic: "created" | "exists"}``.

    Raises
    ------
    ValueError
        If an existing state topic is not compacted, or a topic cannot be created.
    """
    for name, value in (
        ("partitions", partitions),
        ("replication_factor", replication_factor),
        ("state_partitions", state_partitions),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    specs: dict[str, dict[str, Any]] = {}
    for name in topics.all():
        if name == topics.state:
            specs[name] = {
                "num_partitions": state_partitions,
                "replication_factor": replication_factor,
                "configs": dict(STATE_TOPIC_CONFIGS),
            }
        else:
            specs[name] = {"num_partitions": partitions, "replication_factor": replication_factor}
            if name == topics.labels:
                specs[name]["configs"] = dict(LABELS_TOPIC_CONFIGS)
    outcome = _create(admin, specs)
    if outcome.get(topics.state) == "exists":
        check_state_topic(admin, topics.state)
    return outcome


def _create(admin: Any, specs: dict[str, dict[str, Any]]) -> dict[str, str]:
    """Create the topics of ``specs`` (kafka-python's form): ``{topic: "created" | "exists"}``."""
    outcome: dict[str, str] = {}
    if hasattr(admin, "topic_config"):  # the client seam's Admin
        from uss_stream_kafka.clients import TopicSpec

        result = admin.create_topics(
            {
                name: TopicSpec(spec["num_partitions"], spec["replication_factor"], spec.get("configs"))
                for name, spec in specs.items()
            }
        )
        for name in specs:
            error = result[name]
            if error is None:
                outcome[name] = "created"
            elif error.code == 36 or error.name == "TOPIC_ALREADY_EXISTS":
                outcome[name] = "exists"
            else:
                raise ValueError(f"could not create topic {name!r}: {error}")
        return outcome
    response = admin.create_topics(specs, raise_errors=False, wait_for_metadata=True)
    for entry in response["topics"]:
        name, code = entry["name"], entry["error_code"]
        if code == 0:
            outcome[name] = "created"
        elif code == 36:  # TOPIC_ALREADY_EXISTS
            outcome[name] = "exists"
        else:
            raise ValueError(
                f"could not create topic {name!r}: {entry.get('error_message') or f'error {code}'}"
            )
    return outcome


def check_state_topic(admin: Any, name: str) -> None:
    """Raise ``ValueError`` unless topic ``name`` has ``cleanup.policy`` ``compact``.

    ``admin``: the client seam's ``Admin`` (``topic_config``) or a kafka-python ``KafkaAdminClient``.
    """
    if hasattr(admin, "topic_config"):
        policy = admin.topic_config(name).get("cleanup.policy", "")
    else:
        from kafka.admin import ConfigResource, ConfigResourceType

        resource = ConfigResource(ConfigResourceType.TOPIC, name)
        described = admin.describe_configs([resource], config_filter="all")
        policy = described.get("topic", {}).get(name, {}).get("cleanup.policy", {}).get("value", "")
    if "compact" not in policy.split(","):
        raise ValueError(
            f"state topic {name!r} has cleanup.policy={policy!r}: checkpoints need a compacted topic "
            "(cleanup.policy=compact), otherwise retention deletes them"
        )
