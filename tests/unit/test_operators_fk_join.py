"""The foreign-key join, in-process: the job's task in the TaskHarness (real stores), with
the intermediate records fed back by hand, in the orders the test chooses."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from samzapy.config import load_config
from samzapy.jobs.order_customer_join import OrderCustomerJoinTask
from samzapy.operators.fk_join import ForeignKeyLeft, ForeignKeyRight, Response, Subscription
from samzapy.stores.memory import InMemoryStore
from samzapy.testing import TaskHarness

CONFIG = Path(__file__).parents[2] / "config" / "order-customer-join.properties"
ORDERS, CUSTOMERS = "kafka.orders", "kafka.customers"
SUBS, RESPONSES = "kafka.order-customer-subscriptions", "kafka.order-customer-responses"
OUT = "orders-with-customer"

ANN = {"customer_id": "c1", "name": "Ann"}
BOB = {"customer_id": "c2", "name": "Bob"}


def order(customer: str | None, amount: int = 10) -> dict[str, Any]:
    return {"order_id": "o1", "customer_id": customer, "amount": amount}


class Loop:
    """The task and its intermediate topics: what it sent, not yet delivered back."""

    def __init__(self, *overrides: str) -> None:
        self.h = TaskHarness(OrderCustomerJoinTask, load_config(CONFIG, list(overrides)))
        self.seen = 0

    def send(self, stream: str, key: str, message: Any) -> None:
        self.h.send(stream, key, message)

    def take(self, stream: str) -> list[Any]:
        """The new records sent to ``stream`` (system-less name) since the last take."""
        new = self.h.outputs[self.seen :]
        self.seen = len(self.h.outputs)
        return [o for o in new if o.system_stream.stream == stream]

    def new(self) -> list[Any]:
        new = self.h.outputs[self.seen :]
        self.seen = len(self.h.outputs)
        return new

    def deliver(self, records: list[Any]) -> list[Any]:
        """Feed intermediate records back to the task; return everything it sent meanwhile."""
        self.seen = len(self.h.outputs)
        for record in records:
            self.h.send(f"kafka.{record.system_stream.stream}", record.key, record.message)
        return self.new()

    def settle(self, records: list[Any]) -> list[Any]:
        """Deliver until no intermediate record is left; return the outputs, in order."""
        out = []
        pending = list(records)
        while pending:
            sent = self.deliver(pending)
            out += [o for o in sent if o.system_stream.stream == OUT]
            pending = [o for o in sent if o.system_stream.stream != OUT]
        return out


def joined(customer: dict | None, amount: int = 10, cid: str | None = "c1") -> dict | None:
    if customer is None:
        return None
    return {"order_id": "o1", "order": order(cid, amount), "customer": customer}


def values(outputs: list[Any]) -> list[tuple[str, Any]]:
    return [(o.key, o.message) for o in outputs]


def test_insert_joins_through_a_subscription_and_a_response():
    loop = Loop()
    loop.send(CUSTOMERS, "c1", ANN)
    assert loop.new() == []  # no subscriber yet
    loop.send(ORDERS, "o1", order("c1"))
    [sub] = loop.new()
    assert (sub.system_stream.stream, sub.key, sub.message) == (SUBS[6:], "c1", {"key": "o1", "version": 0})
    [response] = loop.deliver([sub])
    assert (response.system_stream.stream, response.key) == (RESPONSES[6:], "o1")
    assert response.message == {"version": 0, "value": ANN, "right_version": 0}
    assert response.id == "fkr:order-customer-subscriptions:0:0:6f31:0:0"
    [out] = loop.deliver([response])
    assert values([out]) == [("o1", joined(ANN))]
    assert out.id == "Partition 0:order-customer-responses:0:0"
    assert loop.h.stores["joined"].get("o1") == joined(ANN)


def test_an_order_whose_customer_is_missing_is_a_tombstone_until_the_customer_arrives():
    loop = Loop()
    loop.send(ORDERS, "o1", order("c1"))
    assert values(loop.settle(loop.new())) == [("o1", None)]
    loop.send(CUSTOMERS, "c1", ANN)
    assert values(loop.settle(loop.new())) == [("o1", joined(ANN))]


def test_left_join_sends_the_order_without_customer():
    loop = Loop("join.kind=left")
    loop.send(ORDERS, "o1", order("c1"))
    assert values(loop.settle(loop.new())) == [
        ("o1", {"order_id": "o1", "order": order("c1"), "customer": None})
    ]


def test_a_foreign_key_change_unsubscribes_the_old_key_and_the_new_one_answers():
    loop = Loop()
    loop.send(CUSTOMERS, "c1", ANN)
    loop.send(CUSTOMERS, "c2", BOB)
    loop.send(ORDERS, "o1", order("c1"))
    assert values(loop.settle(loop.new())) == [("o1", joined(ANN))]

    loop.send(ORDERS, "o1", order("c2"))
    unsub, sub = loop.new()
    assert (unsub.key, unsub.message) == ("c1", {"key": "o1", "version": None})
    assert (sub.key, sub.message) == ("c2", {"key": "o1", "version": 1})
    assert values(loop.settle([unsub, sub])) == [("o1", joined(BOB, cid="c2"))]
    # the old customer no longer answers for o1
    loop.send(CUSTOMERS, "c1", {**ANN, "name": "Ann B."})
    assert loop.new() == []


def test_a_foreign_key_change_to_a_missing_customer_retracts_the_old_result():
    loop = Loop()
    loop.send(CUSTOMERS, "c1", ANN)
    loop.send(ORDERS, "o1", order("c1"))
    loop.settle(loop.new())
    loop.send(ORDERS, "o1", order("c9"))
    assert values(loop.settle(loop.new())) == [("o1", None)]
    assert loop.h.stores["joined"].get("o1") is None


def test_deleting_the_order_retracts_at_once_and_unsubscribes():
    loop = Loop()
    loop.send(CUSTOMERS, "c1", ANN)
    loop.send(ORDERS, "o1", order("c1"))
    loop.settle(loop.new())
    loop.send(ORDERS, "o1", None)
    out, unsub = sorted(loop.new(), key=lambda o: o.system_stream.stream != OUT)
    assert values([out]) == [("o1", None)]
    assert (unsub.key, unsub.message) == ("c1", {"key": "o1", "version": None})
    assert loop.settle([unsub]) == []
    loop.send(CUSTOMERS, "c1", {**ANN, "name": "Ann B."})
    assert loop.new() == []


def test_deleting_the_customer_retracts_every_order_and_an_update_fans_out():
    loop = Loop()
    loop.send(CUSTOMERS, "c1", ANN)
    for order_id in ("o1", "o2", "o3"):
        loop.send(ORDERS, order_id, {"order_id": order_id, "customer_id": "c1"})
    loop.settle(loop.new())

    loop.send(CUSTOMERS, "c1", {**ANN, "name": "Ann B."})
    responses = loop.new()
    assert [r.key for r in responses] == ["o1", "o2", "o3"]
    assert {r.message["right_version"] for r in responses} == {1}
    outs = loop.settle(responses)
    assert [(o.key, o.message["customer"]["name"]) for o in outs] == [
        (k, "Ann B.") for k in ("o1", "o2", "o3")
    ]

    loop.send(CUSTOMERS, "c1", None)
    assert values(loop.settle(loop.new())) == [("o1", None), ("o2", None), ("o3", None)]


def test_a_response_for_a_replaced_version_is_dropped_whatever_its_arrival_order():
    loop = Loop()
    loop.send(CUSTOMERS, "c1", ANN)
    loop.send(CUSTOMERS, "c2", BOB)
    loop.send(ORDERS, "o1", order("c1"))
    [sub_c1] = loop.new()
    loop.send(ORDERS, "o1", order("c2"))
    unsub_c1, sub_c2 = loop.new()
    # c2's task answers first, then c1's (a different task) answers the old version late
    [fresh] = loop.deliver([sub_c2])
    [stale] = loop.deliver([sub_c1])
    assert values(loop.deliver([fresh, stale])) == [("o1", joined(BOB, cid="c2"))]
    assert loop.h.metrics.counter("fk-join-stale-responses").value == 1
    assert loop.deliver([unsub_c1]) == []
    assert loop.h.stores["joined"].get("o1") == joined(BOB, cid="c2")


def test_a_re_sent_subscription_is_answered_again_with_the_same_id_and_bytes():
    loop = Loop()
    loop.send(CUSTOMERS, "c1", ANN)
    loop.send(ORDERS, "o1", order("c1"))
    [sub] = loop.new()
    [first] = loop.deliver([sub])
    [again] = loop.deliver([sub])
    assert (again.key, again.message) == (first.key, first.message)
    assert again.id.split(":")[4:] == first.id.split(":")[4:]  # same key, versions


def test_left_versions_must_grow():
    left = ForeignKeyLeft(_JsonStore(), lambda v: v["fk"], lambda a, b: (a, b))
    left.update("a", {"fk": "b"}, 5)
    with pytest.raises(ValueError, match="version 5 of left key 'a' is not above its current version 5"):
        left.update("a", {"fk": "b"}, 5)


def test_operator_halves_round_trip_their_messages():
    right = ForeignKeyRight(_JsonStore(), InMemoryStore())
    right.update("b", {"x": 1}, 3)
    response = right.subscribe(Subscription.from_message("b", Subscription("b", "a", 9).to_message()))
    assert response == Response("a", 9, {"x": 1}, 3)
    assert Response.from_message("a", response.to_message()) == response
    assert right.subscribe(Subscription("b", "a", None)) is None
    assert right.update("b", None, 4) == []


def test_unknown_kind_is_rejected():
    with pytest.raises(ValueError, match="'inner' or 'left'"):
        ForeignKeyLeft(_JsonStore(), lambda v: v, lambda a, b: a, "outer")  # type: ignore[arg-type]


class _JsonStore(InMemoryStore):
    """An in-memory store of any keys and values (the operators only need get/put/delete)."""

    def __init__(self) -> None:
        super().__init__()
        self.values: dict[Any, Any] = {}

    def get(self, key: Any) -> Any:
        return self.values.get(key)

    def put(self, key: Any, value: Any) -> None:
        if value is None:
            self.values.pop(key, None)
        else:
            self.values[key] = value

    def delete(self, key: Any) -> None:
        self.values.pop(key, None)


def test_task_inputs_must_be_the_four_join_streams():
    with pytest.raises(ValueError, match="must be exactly the left, right, subscription and response"):
        Loop("task.inputs=kafka.orders,kafka.customers,kafka.order-customer-subscriptions")
