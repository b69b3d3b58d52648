"""The settings of one decision service, checked once: :class:`ServiceConfig`.

The command line maps its settings to one (:meth:`KafkaSettings.service_config
<uss_stream_kafka.cli.settings.KafkaSettings.service_config>`); Python users build one directly, or
pass its fields as keywords to :class:`~uss_stream_kafka.runtime.app.Application`. Either way the
values are checked here, and only here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from uss_stream.core.extras import require
from uss_stream_kafka import clients
from uss_stream_kafka.clients.config import check_client_options
from uss_stream_kafka.clients.topics import Topics
from uss_stream_kafka.processing.feature_guard import FeatureGuard

__all__ = ["GUARANTEES", "ServiceConfig"]

#: The delivery guarantees :class:`~uss_stream_kafka.runtime.app.Application` offers.
GUARANTEES = ("at-least-once", "exactly-once")

_SECONDS = ("commit_interval", "checkpoint_interval", "health_timeout")
_COUNTS = ("commit_every", "checkpoint_every")
_SIZES = ("max_input_bytes", "max_poll_records")
_CHOICES = {
    "auto_offset_reset": ("earliest", "latest"),
    "guarantee": GUARANTEES,
    "client_library": clients.CHOICES,
}


@dataclass(frozen=True)
class ServiceConfig:
    """Every setting of an :class:`~uss_stream_kafka.runtime.app.Application` (see its parameters),
    checked when it is built: a ``ValueError`` names the first one out of range.

    ``client_library="auto"`` is resolved here (:attr:`library`: ``confluent`` when it is installed),
    and the numbers and sequences are normalised (seconds as ``float``, headers as a tuple).

    Examples
    --------
    >>> topics = Topics(input="events", output="decisions", dead_letter="dlq", state="state")
    >>> config = ServiceConfig("uss", topics, commit_interval=2)
    >>> config.commit_interval, config.exactly_once
    (2.0, False)
    >>> ServiceConfig("uss", topics, max_poll_records=0)
    Traceback (most recent call last):
    ...
    ValueError: max_poll_records must be an integer >= 1, got 0
    >>> config.check_processor("orchestration")
    Traceback (most recent call last):
    ...
    ValueError: orchestration needs a reports topic (topics.labels)
    """

    group_id: str
    topics: Topics
    commit_interval: float = 1.0
    commit_every: int = 0
    checkpoint_interval: float = 5.0
    checkpoint_every: int = 0
    max_input_bytes: int = 256 * 1024
    max_poll_records: int = 5000
    auto_offset_reset: str = "earliest"
    group_instance_id: str | None = None
    guarantee: str = "at-least-once"
    rebuild_models: bool = True
    shared_learning: bool = False
    exit_when_idle: float | None = None
    consumer_options: Mapping[str, Any] = field(default_factory=dict)
    producer_options: Mapping[str, Any] = field(default_factory=dict)
    http_host: str = "0.0.0.0"
    http_port: int | None = 9108
    health_timeout: float = 60.0
    client_library: str = "kafka-python"
    learning_metrics: bool = True
    relearn_max_labels: int | None = None
    propagate_headers: Sequence[str] = ()
    feature_ranges: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    learned_ranges: bool = True
    #: ``client_library`` resolved (``"auto"``: ``confluent`` when it is installed).
    library: str = field(init=False, default="kafka-python")

    def __post_init__(self) -> None:
        if not isinstance(self.group_id, str) or not self.group_id:
            raise ValueError(f"group_id must be a non-empty string, got {self.group_id!r}")
        for names, lowest, what in (
            (_SECONDS, 0, "a number of seconds"),
            (_COUNTS, 0, "an integer"),
            (_SIZES, 1, "an integer"),
        ):
            for name in names:
                value = getattr(self, name)
                kinds = (int, float) if names is _SECONDS else int
                if isinstance(value, bool) or not isinstance(value, kinds) or not value >= lowest:
                    raise ValueError(f"{name} must be {what} >= {lowest}, got {value!r}")
        for name, allowed in _CHOICES.items():
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {', '.join(allowed)}, got {getattr(self, name)!r}")
        library = clients.resolve(self.client_library)
        if library == "confluent":
            require("confluent_kafka", extra="confluent", purpose="the confluent-kafka client")
        idle = self.exit_when_idle
        if idle is not None and not idle > 0:
            raise ValueError(f"exit_when_idle must be > 0 seconds or None, got {idle!r}")
        most = self.relearn_max_labels
        if most is not None and (isinstance(most, bool) or not isinstance(most, int) or most < 1):
            raise ValueError(f"relearn_max_labels must be an integer >= 1 or None, got {most!r}")
        declared = FeatureGuard(self.feature_ranges).declared  # checked there
        for kind in ("consumer", "producer"):
            name = f"{kind}_options"
            check_client_options(kind, getattr(self, name) or {}, name, library == "confluent")
        self._normalise(library=library, feature_ranges=declared)

    def _normalise(self, **resolved: Any) -> None:
        values = {
            "commit_interval": float(self.commit_interval),
            "checkpoint_interval": float(self.checkpoint_interval),
            "health_timeout": float(self.health_timeout),
            "rebuild_models": bool(self.rebuild_models),
            "shared_learning": bool(self.shared_learning),
            "learning_metrics": bool(self.learning_metrics),
            "consumer_options": dict(self.consumer_options or {}),
            "producer_options": dict(self.producer_options or {}),
            "propagate_headers": tuple(self.propagate_headers),
            "learned_ranges": bool(self.learned_ranges),
            **resolved,
        }
        for name, value in values.items():
            object.__setattr__(self, name, value)

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        """The names of the settings, in order.

        >>> ServiceConfig.field_names()[:3]
        ('group_id', 'topics', 'commit_interval')
        """
        return tuple(item.name for item in dataclasses.fields(cls) if item.init)

    @property
    def exactly_once(self) -> bool:
        """Whether the service runs transactionally (``guarantee="exactly-once"``)."""
        return self.guarantee == "exactly-once"

    def check_processor(self, mode: str) -> None:
        """Refuse a processor ``mode`` that does not fit the topics and options."""
        if self.topics.labels is not None and mode == "outputs":
            raise ValueError("a labels topic is only used in features and orchestration mode")
        if self.topics.labels is None and mode == "orchestration":
            raise ValueError("orchestration needs a reports topic (topics.labels)")
        if self.shared_learning and mode != "outputs":
            raise ValueError("shared_learning needs outputs mode: a cascade's counts are not shared")
        if self.feature_ranges and mode != "features":
            raise ValueError("feature_ranges needs features mode: the other modes have no features")

    def feature_guard(self) -> FeatureGuard:
        """The features-mode guard of :attr:`feature_ranges` and :attr:`learned_ranges`."""
        return FeatureGuard(self.feature_ranges, learned=self.learned_ranges)
