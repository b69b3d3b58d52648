"""Fuzzing the library's state loaders: arbitrary JSON, near-valid documents, and the loader's contract.

The state fuzz tests (``core/test_state_fuzz.py``, ``policies/test_sequential_fuzz.py``) feed two
kinds of documents to a ``load_state_dict``: arbitrary JSON values (:data:`json_values`), and a
valid document with one part replaced by an arbitrary value or removed (:func:`documents_near`:
these get past the first checks and exercise the deeper ones). Whatever the document, the loader
keeps one contract, checked by :func:`loads_or_refuses`: it raises ``ValueError`` and changes
nothing, or it loads a state that saves as strict JSON (no NaN/inf) and loads back the same;
a ``from_json`` of arbitrary text keeps the same contract
(:func:`assert_from_json_refuses_or_round_trips`).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Hashable, Iterator
from typing import Any, Protocol

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

#: JSON scalars, with the integers at the loaders' edges: the small counts, 16 (SequentialKLUCB's
#: first regroup), the exact-integer bound of JSON readers (2**53) and past it, past int64, huge.
scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.sampled_from([-1, 0, 1, 2, 3, 16, 2**53, 2**53 + 1, 2**63, 10**400])
    | st.floats()
    | st.text(max_size=8)
)
#: Arbitrary JSON values: scalars, lists and objects nested, twelve leaves at most.
json_values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)


class Stateful(Protocol):
    """What has a JSON state: a policy, a book of pending decisions."""

    def state_dict(self) -> Any: ...

    def load_state_dict(self, state: Any) -> None: ...


def paths(value: Any, prefix: tuple[Hashable, ...] = ()) -> Iterator[tuple[Hashable, ...]]:
    """Every path into a JSON document (the document itself too: the empty path).

    Examples
    --------
    >>> list(paths({"a": [1, 2]}))
    [(), ('a',), ('a', 0), ('a', 1)]
    """
    yield prefix
    if isinstance(value, dict):
        for key, child in value.items():
            yield from paths(child, (*prefix, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield from paths(child, (*prefix, index))


def mutated(document: Any, path: tuple[Hashable, ...], replacement: Any, delete: bool) -> Any:
    """A copy of ``document`` whose part at ``path`` is ``replacement`` (or, with ``delete``, removed).

    Examples
    --------
    >>> document = {"a": [1, 2]}
    >>> mutated(document, ("a", 0), "x", delete=False), mutated(document, ("a", 0), "x", delete=True)
    ({'a': ['x', 2]}, {'a': [2]})
    >>> mutated(document, (), None, delete=False), document
    (None, {'a': [1, 2]})
    """
    if not path:
        return replacement
    document = copy.deepcopy(document)
    parent = document
    for key in path[:-1]:
        parent = parent[key]
    if delete:
        del parent[path[-1]]
    else:
        parent[path[-1]] = replacement
    return document


@st.composite
def documents_near(draw: st.DrawFn, document: Any) -> Any:
    """``document`` with one part replaced by an arbitrary JSON value (or removed)."""
    path = draw(st.sampled_from(list(paths(document))))
    delete = bool(path) and draw(st.booleans())
    return mutated(document, path, draw(json_values), delete)


def assert_strict_round_trip(live: Stateful, fresh: Stateful) -> None:
    """``live``'s state saves as strict JSON (no NaN/inf) that ``fresh`` loads and saves again unchanged.

    Examples
    --------
    >>> from uss_stream.policies import USSUCB
    >>> live = USSUCB([0.0, 0.1])
    >>> live.update([1] * live.select())
    >>> assert_strict_round_trip(live, USSUCB([0.0, 0.1]))
    """
    text = json.dumps(live.state_dict(), allow_nan=False)
    fresh.load_state_dict(json.loads(text))
    assert json.loads(json.dumps(fresh.state_dict(), allow_nan=False)) == json.loads(text)


def loads_or_refuses(target: Stateful, document: Any, fresh: Stateful) -> bool:
    """Load ``document`` into ``target``: whether it loaded, the loader's contract checked either way.

    Refused: ``ValueError``, and ``target``'s state is what it was (returns False). Loaded: the
    state round-trips strictly through ``fresh`` (:func:`assert_strict_round_trip`; returns True),
    and the caller goes on to use ``target``.

    Examples
    --------
    >>> from uss_stream.policies import USSUCB
    >>> policy = USSUCB([0.0, 0.1])
    >>> loads_or_refuses(policy, {"format": "nonsense"}, USSUCB([0.0, 0.1]))
    False
    >>> loads_or_refuses(policy, USSUCB([0.0, 0.1]).state_dict(), USSUCB([0.0, 0.1]))
    True
    """
    before = target.state_dict()
    try:
        target.load_state_dict(document)
    except ValueError:
        assert target.state_dict() == before
        return False
    assert_strict_round_trip(target, fresh)
    return True


def assert_from_json_refuses_or_round_trips(from_json: Callable[[Any], Any], text: str | bytes) -> None:
    """``from_json(text)`` raises ``ValueError``, or what it loads saves (``to_json``) and reloads equal.

    Examples
    --------
    >>> from uss_stream.core.stats import DisagreementStats
    >>> assert_from_json_refuses_or_round_trips(DisagreementStats.from_json, "not JSON")
    >>> assert_from_json_refuses_or_round_trips(DisagreementStats.from_json, DisagreementStats(2).to_json())
    """
    try:
        loaded = from_json(text)
    except ValueError:
        return
    assert from_json(loaded.to_json()) == loaded  # what loads, saves and reloads
