"""The foreign-key join (orders -> customers) on the real dev broker: the exact joined table
for a seeded script of inserts, foreign-key changes and deletes on both sides, then the
same across kill -9."""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

sys.path.insert(0, str(Path(__file__).parent))  # jobs_support, next to this file

from jobs_support import (  # noqa: E402
    Feeder,
    checkpoint_history,
    dedup_by_id,
    job_config,
    outputs,
    run_to_end,
)
from support import create_topic, kill9, run_job, start_job  # noqa: E402

from samzapy.generate import produce_json  # noqa: E402

pytestmark = pytest.mark.integration

PARTITIONS = 4
ORDERS, CUSTOMERS, MISSING = 300, 40, 5  # customer ids c40..c44 never exist


def script(seed: int, steps: int = 2_400) -> list[tuple[str, bytes, dict | None]]:
    """(table, key, value) updates in order: orders inserted, re-pointed to another customer,
    amended (same customer) and deleted; customers inserted, updated and deleted."""
    rng = random.Random(seed)
    customer_of: dict[str, str] = {}
    records: list[tuple[str, bytes, dict | None]] = []
    for _ in range(steps):
        if rng.random() < 0.75:
            order_id = f"o{rng.randrange(ORDERS)}"
            if order_id in customer_of and rng.random() < 0.08:
                del customer_of[order_id]
                records.append(("orders", order_id.encode(), None))
                continue
            if order_id not in customer_of or rng.random() < 0.6:
                customer_of[order_id] = f"c{rng.randrange(CUSTOMERS + MISSING)}"
            value = {
                "order_id": order_id,
                "customer_id": customer_of[order_id],
                "amount": rng.randrange(1000),
            }
            records.append(("orders", order_id.encode(), value))
        else:
            customer_id = f"c{rng.randrange(CUSTOMERS)}"
            value = (
                None
                if rng.random() < 0.12
                else {"customer_id": customer_id, "name": f"n{rng.randrange(10**6)}"}
            )
            records.append(("customers", customer_id.encode(), value))
    return records


def expected_table(records: list[tuple[str, bytes, dict | None]]) -> dict[str, dict | None]:
    """The inner join of the last order and the last customer: every order ever seen, with
    ``None`` for a deleted order or one whose customer does not exist."""
    latest: dict[str, dict[str, Any]] = {"orders": {}, "customers": {}}
    for table, key, value in records:
        latest[table][key.decode()] = value
    table: dict[str, dict | None] = {}
    for order_id, order in latest["orders"].items():
        customer = None if order is None else latest["customers"].get(order["customer_id"])
        table[order_id] = (
            None if customer is None else {"order_id": order_id, "order": order, "customer": customer}
        )
    return table


def setup(tmp_path: Path, broker: str, tag: str) -> tuple[Path, dict[str, str]]:
    names = ("orders", "customers", "subscriptions", "responses", "joined", "table")
    topics = {name: f"fk-{name}-{tag}" for name in names}
    for name in ("orders", "customers"):  # the intermediate topics are created by the job
        create_topic(broker, topics[name], PARTITIONS)
    config = job_config(
        tmp_path,
        broker,
        "order-customer-join.properties",
        tag,
        {
            "task.inputs": ",".join(
                f"kafka.{topics[n]}" for n in ("orders", "customers", "subscriptions", "responses")
            ),
            "join.left.stream": topics["orders"],
            "join.right.stream": topics["customers"],
            "join.subscription.stream": topics["subscriptions"],
            "join.response.stream": topics["responses"],
            "join.output.stream": f"kafka.{topics['joined']}",
            "stores.joined.changelog": f"kafka.{topics['table']}",
            **{
                f"systems.kafka.streams.{topics[n]}.samza.intermediate": "true"
                for n in ("subscriptions", "responses")
            },
        },
    )
    return config, topics


def produce_script(broker: str, topics: dict[str, str], records: list) -> None:
    """Produce ``records`` in order, each table to its topic."""
    for table in ("orders", "customers"):
        rows = [(key, value) for t, key, value in records if t == table]
        if rows:
            produce_json(broker, topics[table], PARTITIONS, rows)


def run_until_settled(config: Path, broker: str, topics: dict[str, str]) -> int:
    """Run the job with ``--exit-at-end`` until a run sends no intermediate record.

    ``--exit-at-end`` stops at the ends the inputs had at start, and the job feeds two of
    its own inputs; a run that sent nothing to them had processed everything in them.
    Returns the number of runs."""
    sizes = None
    for runs in range(1, 9):
        run_to_end(config)
        now = (len(outputs(broker, topics["subscriptions"])), len(outputs(broker, topics["responses"])))
        if now == sizes:
            return runs
        sizes = now
    raise AssertionError(f"the job still sent intermediate records after {runs} runs: {sizes}")


def committed_inputs(broker: str, config: Path) -> int:
    """How many input records the job's latest checkpoints say were processed, all tasks."""
    latest = {c.task_name: c for c in checkpoint_history(broker, config)}
    return sum(sum(c.input_offsets.values()) for c in latest.values())


def crash_after_commits(config: Path, broker: str, rounds: int, rng: random.Random, log: Path) -> list[float]:
    """``rounds`` times: start the job, let it commit the processing of 150 more input
    records (so that the next start restores committed state, not an empty one; at most
    6 s when it has nothing left to do), then SIGKILL it after a further random delay of
    up to a second."""
    delays = []
    for _ in range(rounds):
        wanted = committed_inputs(broker, config) + 150
        job = start_job(config, log=log)
        deadline = time.monotonic() + 6
        while committed_inputs(broker, config) < wanted and time.monotonic() < deadline:
            time.sleep(0.1)
        delays.append(round(rng.uniform(0.0, 1.0), 2))
        time.sleep(delays[-1])
        kill9(job)
    return delays


def check(broker: str, topics: dict[str, str], records: list) -> None:
    want = expected_table(records)
    changes = outputs(broker, topics["joined"])
    versions: dict[str, set[bytes]] = {"orders": set(), "customers": set()}
    for table, _key, value in records:
        versions[table].add(orjson.dumps(value))
    for record in dedup_by_id(changes).values():  # duplicates are byte-identical
        if record.value is not None:  # and every joined record joins real versions
            value = orjson.loads(record.value)
            assert orjson.dumps(value["order"]) in versions["orders"], value
            assert orjson.dumps(value["customer"]) in versions["customers"], value
            assert value["order"]["customer_id"] == value["customer"]["customer_id"], value
    last = {r.key.decode(): (None if r.value is None else orjson.loads(r.value)) for r in changes}
    assert last == want  # the last change of each order is its joined record
    table: dict[str, Any] = {}
    for r in outputs(broker, topics["table"]):
        table[r.key.decode()] = r.value
    got = {k: orjson.loads(v) for k, v in table.items() if v is not None}
    assert got == {k: v for k, v in want.items() if v is not None}  # and so is the changelog
    assert 0 < len(got) < len(want)  # some orders joined, some deleted or without customer


def test_foreign_key_join_table_is_exact(tmp_path, broker):
    records = script(seed=11)
    config, topics = setup(tmp_path, broker, "clean")
    produce_script(broker, topics, records)

    runs = run_until_settled(config, broker, topics)

    check(broker, topics, records)
    assert runs <= 4


@pytest.mark.crash
def test_foreign_key_join_survives_kill9(tmp_path, broker):
    seed = random.randrange(1 << 30)
    records = script(seed)
    config, topics = setup(tmp_path, broker, "crash")
    feeder = Feeder(
        lambda chunk: produce_script(broker, topics, chunk),
        records,
        chunks=10,
        pause_s=0.6,
        finish=lambda: None,
    )
    feeder.start()

    delays = crash_after_commits(config, broker, 3, random.Random(seed), tmp_path / "job.log")
    feeder.join_checked()
    run_until_settled(config, broker, topics)

    try:
        check(broker, topics, records)
    except AssertionError as error:
        raise AssertionError(f"seed {seed}, kill delays {delays}: {error}") from error


def test_an_intermediate_topic_with_another_partition_count_stops_the_job(tmp_path, broker):
    config, topics = setup(tmp_path, broker, "fk-parts")
    create_topic(broker, topics["responses"], PARTITIONS + 1)
    result = run_job(config, "--exit-at-end")
    assert result.returncode != 0
    assert (
        f"intermediate stream 'kafka.{topics['responses']}' has {PARTITIONS + 1} partitions but the job "
        f"has {PARTITIONS} tasks"
    ) in result.stderr, result.stderr[-3000:]
