"""Orders joined with their customer (a foreign-key table-table join).

Inputs ``orders`` (JSON keyed by order_id, with a ``customer_id`` field) and ``customers``
(JSON keyed by customer_id), read as tables: a null value deletes. Output: the joined
table keyed by order_id, ``{"order_id", "order": {...}, "customer": {...}}``, or a
tombstone when the order has no joined record (``join.kind``: ``inner`` needs the
customer, ``left`` sends ``"customer": null``), as

* the change stream ``orders-with-customer``: the order's whole joined record after each
  change (the last record per order_id is the table);
* the ``joined`` store, whose changelog ``orders-with-customer-table`` (compacted) is the
  joined table exactly, also after crashes.

The job is one task class in two roles that talk through two intermediate topics of the
same partition count as the inputs (see :mod:`samzapy.operators.fk_join`): task N owns
partition N of ``orders`` and of ``order-customer-responses`` (both keyed by order_id),
and partition N of ``customers`` and of ``order-customer-subscriptions`` (both keyed by
customer_id). Output ids: subscriptions and joined records take the container's ids (task,
input stream, offset, sequence: processing an input always gives the same records, thanks
to the versions); responses name the versions they carry (``fkr:...``).

Config: ``config/order-customer-join.properties``; semantics in
``docs/patterns/foreign-key-join.md``.
"""

from __future__ import annotations

from typing import Any, Literal, cast

from samzapy import (
    IncomingMessageEnvelope,
    InitableTask,
    MessageCollector,
    OutgoingMessageEnvelope,
    StreamTask,
    SystemStream,
    TaskContext,
    TaskCoordinator,
)
from samzapy.config import Config
from samzapy.operators import TableChange
from samzapy.operators.fk_join import ForeignKeyLeft, ForeignKeyRight, Response, Subscription
from samzapy.operators.fk_join import state_layouts as fk_layouts

#: Why ``state-storage-tool reshard`` refuses this job (:meth:`ForeignKeyJoinTask.state_layouts`).
RESHARD_REFUSAL = (
    "the foreign-key join's versions are its left input's offsets (ForeignKeyJoinTask): under a "
    "new partition count a left key's next update arrives at an offset of another partition, "
    "which can be below its stored version, and the join refuses it. Start the job afresh on the "
    "new partition count instead (new changelogs and checkpoints; its inputs read from the start)"
)


class ForeignKeyJoinTask(StreamTask, InitableTask):
    """A foreign-key join of two JSON tables with string keys; see the module docstring.

    Config (``join.*``, defaults from the class attributes): ``left.stream``,
    ``right.stream``, ``subscription.stream``, ``response.stream`` (the four inputs, stream
    names), ``output.stream`` (``system.stream``), ``foreign.key`` (the left value's field
    naming the right key), ``kind`` (``inner`` or ``left``). Stores: ``fk-left``,
    ``fk-right`` (string keys, JSON values), ``fk-subscriptions`` (bytes), ``joined``.
    """

    @classmethod
    def state_layouts(cls, config: Config) -> dict[str, Any]:
        """How the stores read as data (:mod:`samzapy.operators.state_layout`).

        The subscriptions by customer, order and version; ``fk-left``, ``fk-right`` and
        ``joined`` are key-value. A reshard refuses the job (:data:`RESHARD_REFUSAL`).
        """
        return fk_layouts("fk-subscriptions", reshard_refusal=RESHARD_REFUSAL)

    left_stream = "orders"
    right_stream = "customers"
    subscription_stream = "order-customer-subscriptions"
    response_stream = "order-customer-responses"
    output_stream = "kafka.orders-with-customer"
    foreign_key_field = "customer_id"
    #: The names of the left key, left value and right value in the joined record.
    record_fields = ("order_id", "order", "customer")

    def init(self, context: TaskContext) -> None:
        """Read the config; build both halves of the join over the restored stores."""
        config = context.config
        self.left_stream = config.get_str("join.left.stream", self.left_stream)
        self.right_stream = config.get_str("join.right.stream", self.right_stream)
        self.subscription_stream = config.get_str("join.subscription.stream", self.subscription_stream)
        self.response_stream = config.get_str("join.response.stream", self.response_stream)
        inputs = {s.stream: s for s in context.inputs}
        self._check_inputs(list(inputs))
        # the task sends to two of its own inputs: the intermediate topics
        self.subscriptions = inputs[self.subscription_stream]
        self.responses = inputs[self.response_stream]
        self.output = SystemStream.parse(config.get_str("join.output.stream", self.output_stream))
        field = config.get_str("join.foreign.key", self.foreign_key_field)
        self.left = ForeignKeyLeft(
            context.get_store("fk-left"),
            lambda value: value.get(field),
            lambda left, right: (left, right),
            # checked by ForeignKeyLeft (inner or left)
            cast("Literal['inner', 'left']", config.get_str("join.kind", "inner")),
            metrics=context.metrics,
        )
        self.right = ForeignKeyRight(context.get_store("fk-right"), context.get_store("fk-subscriptions"))
        self.joined = context.get_store("joined")

    def _check_inputs(self, inputs: list[str]) -> None:
        wanted = [self.left_stream, self.right_stream, self.subscription_stream, self.response_stream]
        if sorted(inputs) != sorted(wanted):
            msg = (
                f"task.inputs ({', '.join(inputs)}) must be exactly the left, right, subscription "
                f"and response streams {', '.join(wanted)} (join.left.stream, join.right.stream, "
                "join.subscription.stream, join.response.stream), all with the same partition count"
            )
            raise ValueError(msg)

    def process(
        self, envelope: IncomingMessageEnvelope, collector: MessageCollector, coordinator: TaskCoordinator
    ) -> None:
        """Route one input to its half of the join and send what it asks for."""
        stream, key, message = envelope.stream, envelope.key, envelope.message
        if stream == self.left_stream:
            update = self.left.update(key, message, envelope.offset)
            for subscription in update.subscriptions:
                collector.send(
                    OutgoingMessageEnvelope(
                        self.subscriptions, key=subscription.foreign_key, message=subscription.to_message()
                    )
                )
            self._emit(update.change, collector)
        elif stream == self.response_stream:
            self._emit(self.left.resolve(Response.from_message(key, message)), collector)
        elif stream == self.subscription_stream:
            response = self.right.subscribe(Subscription.from_message(key, message))
            self._respond([] if response is None else [response], envelope, collector)
        elif stream == self.right_stream:
            self._respond(self.right.update(key, message, envelope.offset), envelope, collector)
        else:
            msg = f"unexpected input stream '{stream}'"
            raise ValueError(msg)

    def record(self, key: Any, left: Any, right: Any) -> dict[str, Any]:
        """The joined record of left key ``key`` (``right`` is ``None`` in a left join)."""
        key_field, left_field, right_field = self.record_fields
        return {key_field: key, left_field: left, right_field: right}

    def _emit(self, change: TableChange | None, collector: MessageCollector) -> None:
        if change is None:
            return
        record = None if change.value is None else self.record(change.key, *change.value)
        self.joined.put(change.key, record)
        collector.send(OutgoingMessageEnvelope(self.output, key=change.key, message=record))

    def _respond(
        self, responses: list[Response], envelope: IncomingMessageEnvelope, collector: MessageCollector
    ) -> None:
        origin = f"{envelope.stream}:{envelope.partition}:{envelope.offset}"
        for response in responses:
            collector.send(
                OutgoingMessageEnvelope(
                    self.responses,
                    key=response.key,
                    message=response.to_message(),
                    id=self.right.response_id(origin, response),
                )
            )


class OrderCustomerJoinTask(ForeignKeyJoinTask):
    """Orders (by order_id) joined with customers (by the order's ``customer_id``)."""
