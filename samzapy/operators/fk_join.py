"""Foreign-key table-table join.

A table keyed by A joined to a table keyed by B through a field of A's value (Kafka Streams'
``KTable.join(other, foreignKeyExtractor, joiner)``, KIP-213).

The two tables are keyed differently, so they are not co-partitioned: the join runs in two
halves that talk through two intermediate topics.

* :class:`ForeignKeyLeft`, in the task that owns left key ``a``, keeps a's latest value, its
  foreign key and a *version* (a number that grows with every update of ``a``; jobs use the
  left input offset). On an update it sends a :class:`Subscription` keyed by the foreign
  key ``b`` (and an unsubscription to the old foreign key when it changed).
* :class:`ForeignKeyRight`, in the task that owns ``b``, keeps the right table and the
  subscriptions ``(b, a) -> version`` (one prefix scan finds every ``a`` of a ``b``). A
  subscription, and every update of ``b``, sends a :class:`Response` keyed by ``a``: the
  right value (or ``None``) for that version of ``a``.
* Back in a's task, :meth:`ForeignKeyLeft.resolve` emits the joined record (or a
  retraction) only if the response's version is a's *current* version. Responses for an
  older version of ``a`` (its old foreign key, a value since replaced, a deleted key) are
  dropped: they may arrive in any order relative to the current one, because they come
  from other tasks (Kafka Streams checks a hash of the left value for the same reason).

A change of a's foreign key therefore retracts the old result: the new foreign key's
response replaces it (the joined record, or ``None`` when ``b`` has no right value), and the
old foreign key no longer answers for ``a``. Every emitted change states a's whole current
joined record, never a difference, so the last change per key is the joined table.

Stores: the left and right tables take any key serde and a value serde that stores dicts
(JSON); the subscription store holds bytes (configure it without serdes).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from samzapy.metrics import MetricsGroup
from samzapy.operators.fk_layout import SUBSCRIPTION_TAG, ForeignKeySubscriptionLayout
from samzapy.operators.joins import Joiner, TableChange
from samzapy.operators.key_encoding import decode_u64, encode_u64, escape, key_prefix_end
from samzapy.serdes import Serde, StringSerde
from samzapy.stores.base import KeyValueStore


@dataclass(frozen=True, slots=True)
class Subscription:
    """Left key ``key`` (at ``version``) subscribes to ``foreign_key``; ``version=None`` unsubscribes it.

    Sent keyed by ``foreign_key`` to the right table's task.
    """

    foreign_key: Any
    key: Any
    version: int | None

    def to_message(self) -> dict[str, Any]:
        """The message value (the foreign key is the message key).

        >>> Subscription("c1", "o1", 7).to_message()
        {'key': 'o1', 'version': 7}
        """
        return {"key": self.key, "version": self.version}

    @classmethod
    def from_message(cls, foreign_key: Any, message: dict[str, Any]) -> Subscription:
        """The subscription in a message written by :meth:`to_message`."""
        return cls(foreign_key, message["key"], message["version"])


@dataclass(frozen=True, slots=True)
class Response:
    """A right side's answer to a subscription.

    The right value for ``version`` of left key ``key`` (``None``: no right value), and the
    version of that right value (``None`` when absent). Sent keyed by ``key``.
    """

    key: Any
    version: int
    value: Any
    right_version: int | None

    def to_message(self) -> dict[str, Any]:
        """The message value (the left key is the message key).

        >>> Response("o1", 7, {"name": "Ann"}, 3).to_message()
        {'version': 7, 'value': {'name': 'Ann'}, 'right_version': 3}
        """
        return {"version": self.version, "value": self.value, "right_version": self.right_version}

    @classmethod
    def from_message(cls, key: Any, message: dict[str, Any]) -> Response:
        """The response in a message written by :meth:`to_message`."""
        return cls(key, message["version"], message["value"], message["right_version"])


@dataclass(frozen=True, slots=True)
class LeftUpdate:
    """What an update of the left table asks the task to send.

    The (un)subscriptions, in order, and a change of the joined table to emit now (``None``: the
    response decides).
    """

    subscriptions: list[Subscription] = field(default_factory=list)
    change: TableChange | None = None


def state_layouts(
    subscription_store: str,
    *,
    namespace: bytes = b"",
    key_serde: Serde | None = None,
    foreign_key_serde: Serde | None = None,
    reshard_refusal: str | None = None,
) -> dict[str, Any]:
    """How the join's stores read as data, for a task's ``state_layouts``.

    The subscription store by foreign key, left key and version
    (:class:`~samzapy.operators.fk_layout.ForeignKeySubscriptionLayout`); the left and right
    tables are key-value stores of the job's serdes and need no entry. ``reshard_refusal``: why
    a reshard must not move the state (e.g. versions that are input offsets).
    """
    layout = ForeignKeySubscriptionLayout(namespace, key_serde, foreign_key_serde, reshard_refusal)
    return {subscription_store: layout}


class ForeignKeyLeft:
    """The left half of a foreign-key join, in the task that owns the left keys.

    The store maps each left key to ``{"version", "fk", "value"}``. ``foreign_key_of(value)``
    gives the foreign key of a left value (``None``: the value refers to nothing).

    Semantics (``kind``): ``inner`` emits ``joiner(left, right)`` when the foreign key has a
    right value and a retraction (``TableChange(key, None)``) otherwise; ``left`` emits
    ``joiner(left, None)`` instead of the retraction. A deleted left key is retracted at
    once. Every accepted response emits, even when the result did not change: a change
    re-sent after a crash must be able to overwrite anything a crashed run emitted later.

    Versions must grow with every update of a key (a left input offset does); they are what
    tells the current response from stale ones.
    """

    def __init__(
        self,
        store: KeyValueStore[Any, Any],
        foreign_key_of: Callable[[Any], Any],
        joiner: Joiner,
        kind: Literal["inner", "left"] = "inner",
        metrics: MetricsGroup | None = None,
    ) -> None:
        if kind not in ("inner", "left"):
            msg = f"foreign-key join kind must be 'inner' or 'left', got {kind!r}"
            raise ValueError(msg)
        self._store = store
        self._foreign_key_of = foreign_key_of
        self._joiner = joiner
        self._left_join = kind == "left"
        self._stale = metrics.counter("fk-join-stale-responses") if metrics is not None else None

    def update(self, key: Any, value: Any, version: int) -> LeftUpdate:
        """Set (``None``: delete) the left value of ``key`` at ``version``; what to send.

        Raises:
            ValueError: ``version`` is not above the key's current version.
        """
        old = self._store.get(key)
        if old is not None and version <= old["version"]:
            msg = (
                f"foreign-key join: version {version} of left key {key!r} is not above its "
                f"current version {old['version']}; versions must grow with every update "
                "(use the left input offset)"
            )
            raise ValueError(msg)
        old_fk = None if old is None else old["fk"]
        if value is None:
            self._store.delete(key)
            unsubscribe = [] if old_fk is None else [Subscription(old_fk, key, None)]
            return LeftUpdate(unsubscribe, TableChange(key, None))
        fk = self._foreign_key_of(value)
        self._store.put(key, {"version": version, "fk": fk, "value": value})
        sends = [] if old_fk is None or old_fk == fk else [Subscription(old_fk, key, None)]
        if fk is None:
            return LeftUpdate(sends, self._change(key, value, None))
        sends.append(Subscription(fk, key, version))
        return LeftUpdate(sends)

    def resolve(self, response: Response) -> TableChange | None:
        """The change to emit for ``response`` (``None``: a stale answer).

        The change to emit for ``response``, or ``None`` when it answers a version of its key
        that is no longer current (counted in ``fk-join-stale-responses``).
        """
        entry = self._store.get(response.key)
        if entry is None or entry["version"] != response.version:
            if self._stale is not None:
                self._stale.inc()
            return None
        return self._change(response.key, entry["value"], response.value)

    def _change(self, key: Any, left: Any, right: Any) -> TableChange:
        if right is None and not self._left_join:
            return TableChange(key, None)
        return TableChange(key, self._joiner(left, right))


class ForeignKeyRight:
    """The right half of a foreign-key join, in the task that owns the foreign keys.

    ``table_store`` maps each foreign key to ``{"version", "value"}`` (the right table);
    ``subscription_store`` (bytes) maps ``namespace + tag + escape(foreign key bytes) +
    left key bytes`` to the subscribed version, so that the subscribers of one foreign key
    are one range. Keys become bytes with ``key_serde`` (left keys, decoded back for the
    responses) and ``foreign_key_serde``: use the serdes of the topics.

    A subscription is a put and an unsubscription a delete: the last one received for a
    (foreign key, left key) pair wins, and a left task sends them in the order of its
    updates, so the pair ends in the state of the left key's last update.
    """

    def __init__(
        self,
        table_store: KeyValueStore[Any, Any],
        subscription_store: KeyValueStore[bytes, bytes],
        key_serde: Serde | None = None,
        foreign_key_serde: Serde | None = None,
        namespace: bytes = b"",
    ) -> None:
        self._table = table_store
        self._subscriptions = subscription_store
        self._key_serde = key_serde or StringSerde()
        self._fk_serde = foreign_key_serde or StringSerde()
        self._prefix = namespace + SUBSCRIPTION_TAG

    def subscribe(self, subscription: Subscription) -> Response | None:
        """Record (or with ``version=None`` remove) a subscription.

        The response to send (``None`` for an unsubscription: its left key has moved on and
        decides alone).
        """
        index_key = self._index_prefix(subscription.foreign_key) + self._key_serde.to_bytes(subscription.key)
        if subscription.version is None:
            self._subscriptions.delete(index_key)
            return None
        self._subscriptions.put(index_key, encode_u64(subscription.version))
        entry = self._table.get(subscription.foreign_key)
        value, version = (None, None) if entry is None else (entry["value"], entry["version"])
        return Response(subscription.key, subscription.version, value, version)

    def update(self, foreign_key: Any, value: Any, version: int) -> list[Response]:
        """Set (``None``: delete) the right value of ``foreign_key``.

        The responses to send, one per subscribed left key, in left-key byte order.
        """
        self._table.put(foreign_key, None if value is None else {"version": version, "value": value})
        prefix = self._index_prefix(foreign_key)
        with self._subscriptions.range(prefix, key_prefix_end(prefix)) as entries:
            subscribers = [(entry.key[len(prefix) :], decode_u64(entry.value)) for entry in entries]
        right_version = None if value is None else version
        return [
            Response(self._key_serde.from_bytes(key), left_version, value, right_version)
            for key, left_version in subscribers
        ]

    def response_id(self, origin: str, response: Response) -> str:
        """The output id of ``response``, stable across a crash for the same bytes.

        An output id for ``response`` sent while processing ``origin`` (e.g.
        ``stream:partition:offset``) that names everything its bytes depend on, so that a
        response re-sent after a crash has the same id only if it has the same bytes.
        """
        key = self._key_serde.to_bytes(response.key).hex()
        right = "-" if response.right_version is None else response.right_version
        return f"fkr:{origin}:{key}:{response.version}:{right}"

    def _index_prefix(self, foreign_key: Any) -> bytes:
        return self._prefix + escape(self._fk_serde.to_bytes(foreign_key))
