"""The stateful patterns as pipelines (jobs/*_pipeline.py) against their task versions, on the
same input, in-process (the task versions under TaskHarness, the pipelines under
PipelineHarness, each over its own in-memory broker)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import orjson
import pytest

from samzapy.config import load_config, parse_job_config
from samzapy.jobs.pageview_counter import PageViewCounterTask
from samzapy.jobs.pageview_repartition import PageViewRepartitionTask
from samzapy.kafka.partitioner import partition_for_key
from samzapy.operators.event_time import CONTROL_HEADER, END_OF_STREAM
from samzapy.operators.state_layout import layout_for
from samzapy.operators.versioned_layout import VersionedLayout
from samzapy.output_ids import id_from_headers
from samzapy.pipeline.compiler import APP_KEY
from samzapy.pipeline.join_stages import join_state_layouts
from samzapy.pipeline.testing import PipelineHarness
from samzapy.testing import MemoryBroker, TaskHarness, distinct_by_id

CONFIG = Path(__file__).parents[2] / "config"
HOUR = 3_600_000
PARTITIONS = 2


def _views(n: int, seed: int = 7) -> list[tuple[str, dict[str, Any]]]:
    """Views keyed by page, roughly in time order with some disorder (some beyond the
    ten-minute lateness: late views)."""
    rng = random.Random(seed)
    views = []
    for i in range(n):
        t = i * 40_000 + rng.randrange(-900_000, 60_000)
        page = f"/p{rng.randrange(5)}"
        views.append((page, {"view_id": f"v{i}", "user_id": f"u{rng.randrange(6)}", "page": page, "ts": t}))
    return views


def _task_version(views: list[tuple[str, dict[str, Any]]]) -> tuple[dict, dict, list]:
    """The two task jobs over one broker: outputs by id (bytes), the window stores, late views."""
    broker = MemoryBroker(default_partitions=PARTITIONS)
    over = {
        "systems.kafka.streams.pageviews-by-user.partitions": PARTITIONS,
        "watermark.upstream.tasks": PARTITIONS,
    }
    repartition_config = load_config(CONFIG / "pageview-repartition.properties").with_overrides(over)
    counter_config = load_config(CONFIG / "pageview-counter.properties").with_overrides(over)
    stage1 = [
        TaskHarness(PageViewRepartitionTask, repartition_config, partition=p, broker=broker, loopback=True)
        for p in range(PARTITIONS)
    ]
    stage2 = [
        TaskHarness(PageViewCounterTask, counter_config, partition=p, broker=broker, loopback=True)
        for p in range(PARTITIONS)
    ]
    for page, view in views:
        p = partition_for_key(page.encode(), PARTITIONS)
        broker.append("pageviews", p, page.encode(), orjson.dumps(view))
    _settle(stage1 + stage2)
    for h in stage1:
        h.window()
    _settle(stage1 + stage2)
    for p in range(PARTITIONS):
        broker.append(
            "pageviews", p, None, b'{"control":"end-of-stream"}', headers=[(CONTROL_HEADER, END_OF_STREAM)]
        )
    _settle(stage1 + stage2)
    outputs = {i: (r.key, r.value) for i, r in distinct_by_id(broker.records("pageview-counts")).items()}
    stores = [dict(h.stores["pageview-counts"].all()) for h in stage2]
    late = sorted(
        orjson.loads(r.value)["view_id"] for r in distinct_by_id(broker.records("pageviews-late")).values()
    )
    for h in stage1 + stage2:
        h.close()
    return outputs, stores, late


def _settle(harnesses: list[TaskHarness]) -> None:
    while sum(h.process_available() for h in harnesses):
        pass


def _pipeline_version(
    views: list[tuple[str, dict[str, Any]]], *, crashes: int = 0
) -> tuple[dict, dict, list]:
    from samzapy.jobs.pageview_counter_pipeline import app

    with PipelineHarness(app, partitions=PARTITIONS) as h:
        step = len(views) // (crashes + 1)
        for i in range(crashes):  # commit, go on, kill -9 every task, restart from the commit
            h.send_all("pageviews", views[i * step : i * step + step // 2])
            h.window()
            h.commit()
            h.send_all("pageviews", views[i * step + step // 2 : (i + 1) * step])
            h.crash()
            h.restart()
        h.send_all("pageviews", views[crashes * step :])
        h.window()
        h.end_of_stream()
        outputs = {i: (r.key, r.value) for i, r in distinct_by_id(h.records("pageview-counts")).items()}
        stores = [dict(t.stores["pageview-counts"].all()) for t in h.tasks]
        late = sorted(
            orjson.loads(r.value)["view_id"] for r in distinct_by_id(h.records("pageviews-late")).values()
        )
    return outputs, stores, late


def _without_sequences(store: dict[bytes, bytes]) -> dict[bytes, bytes]:
    """The store without the upstream sequences (``sq``): the pipeline keeps those in its
    key_by stage's store, the task version in the window store."""
    return {k: v for k, v in store.items() if not k.startswith(b"sq\x00")}


def test_the_pageview_counter_pipeline_gives_the_task_versions_outputs_ids_bytes_and_stores() -> None:
    views = _views(400)
    task_out, task_stores, task_late = _task_version(views)
    pipe_out, pipe_stores, pipe_late = _pipeline_version(views)
    assert len(task_out) > 20 and task_late  # windows closed, and some views were late
    assert pipe_out == task_out  # same ids, same key and value bytes
    assert pipe_late == task_late
    assert [_without_sequences(s) for s in pipe_stores] == [_without_sequences(s) for s in task_stores]


def test_the_pageview_counter_pipeline_gives_the_same_after_kill_9_rounds() -> None:
    views = _views(400, seed=11)
    task_out, task_stores, task_late = _task_version(views)
    pipe_out, pipe_stores, pipe_late = _pipeline_version(views, crashes=3)
    assert pipe_out == task_out
    assert pipe_late == task_late
    assert [_without_sequences(s) for s in pipe_stores] == [_without_sequences(s) for s in task_stores]


# ---------------------------------------------------------------- the join patterns


def _run_tasks(
    task: type, config_file: str, records: list[tuple[str, str, Any]], over: dict | None = None
) -> Any:
    """A task job over one broker: records (topic, key, value) in order, then end-of-stream."""
    broker = MemoryBroker(default_partitions=PARTITIONS)
    config = load_config(CONFIG / config_file).with_overrides(over or {})
    tasks = [TaskHarness(task, config, partition=p, broker=broker, loopback=True) for p in range(PARTITIONS)]
    for topic, key, value in records:
        p = partition_for_key(key.encode(), PARTITIONS)
        broker.append(topic, p, key.encode(), None if value is None else orjson.dumps(value))
        _settle(tasks)
    return broker, tasks


def _end(broker: MemoryBroker, topics: list[str], harnesses: list[Any]) -> None:
    for topic in topics:
        for p in range(PARTITIONS):
            broker.append(
                topic, p, None, b'{"control":"end-of-stream"}', headers=[(CONTROL_HEADER, END_OF_STREAM)]
            )
    _settle(harnesses)


def _by_id(records: list[Any]) -> dict[str, tuple[bytes, bytes]]:
    return {i: (r.key, r.value) for i, r in distinct_by_id(records).items()}


def _ad_events(n: int, seed: int = 3) -> list[tuple[str, str, Any]]:
    """Impressions and clicks in time order with disorder; some clicks without impression,
    some duplicated."""
    rng = random.Random(seed)
    events = []
    for i in range(n):
        t = i * 1_000
        imp = f"imp{i}"
        if rng.random() < 0.8:
            events.append(
                (
                    t + rng.randrange(-3_000, 3_000),
                    "impressions",
                    imp,
                    {"impression_id": imp, "ad": f"ad{i % 7}"},
                )
            )
        if rng.random() < 0.6:
            click = {"click_id": f"c{i}", "impression_id": imp}
            delay = rng.choice([2_000, 30_000, 200_000])
            events.append((t + delay, "clicks", imp, click))
            if rng.random() < 0.1:
                events.append((t + delay + 1_000, "clicks", imp, click))
    events.sort(key=lambda e: e[0])
    return [(topic, key, {**value, "ts": ts}) for ts, topic, key, value in events]


def _feed_with_crashes(h: PipelineHarness, records: list[tuple[str, str, Any]], *, crashes: int) -> None:
    """Send ``records`` one by one; ``crashes`` times on the way: commit, send a few more,
    kill -9 every task (unacknowledged writes lost), restart from the commit."""
    step = len(records) // (crashes + 1)
    for i, (topic, key, value) in enumerate(records):
        h.send(topic, key, value)
        if i % step == step // 2 and i // step < crashes:
            h.commit()
        elif i % step == step - 1 and i // step < crashes:
            h.crash()
            h.restart()


def test_the_ad_click_join_pipeline_gives_the_task_versions_outputs_ids_bytes_and_stores_after_kill_9() -> (
    None
):
    from samzapy.jobs.ad_click_join import AdClickJoinTask
    from samzapy.jobs.ad_click_join_pipeline import app

    events = _ad_events(300)
    # store layout 1 on both sides (a registry by click id: these copies differ in time); layout
    # 2 decides a copy by (key, time, id): tests/unit/test_pipeline_stream_join_layout.py
    over = {"join.state.layout": "1"}
    broker, tasks = _run_tasks(AdClickJoinTask, "ad-click-join.properties", events, over)
    for h in tasks:
        h.window()
    _end(broker, ["impressions", "clicks"], tasks)
    task_joined, task_unjoined = (
        _by_id(broker.records("ad-clicks-joined")),
        _by_id(broker.records("unjoined-clicks")),
    )
    names = ["click-buffer", "impression-buffer", "join-expiry", "join-state"]
    task_stores = [[dict(h.stores[n].all()) for n in names] for h in tasks]
    for h in tasks:
        h.close()
    with PipelineHarness(app, partitions=PARTITIONS, config={"pipeline.join.state.layout": "1"}) as h:
        _feed_with_crashes(h, events, crashes=2)
        h.window()
        h.end_of_stream()
        assert _by_id(h.records("ad-clicks-joined")) == task_joined
        assert _by_id(h.records("unjoined-clicks")) == task_unjoined
        parts = ["left", "right", "expiry", "time"]
        assert [[dict(t.stores[f"ad-click-join-{p}"].all()) for p in parts] for t in h.tasks] == task_stores
    assert len(task_joined) > 50 and len(task_unjoined) > 20


# ---------------------------------------------------- the table joins, with crash rounds


def _feed(
    records: list[tuple[str, str, Any]], send: Any, commit: Any, crash_and_restart: Any, *, crashes: int
) -> None:
    """Send ``records`` one by one (record i at timestamp (i + 1) s); ``crashes`` times on the way:
    commit, send a few more, kill -9 every task (unacknowledged writes lost), restart from the
    commit (the records since are processed again, as a backlog)."""
    step = len(records) // (crashes + 1)
    for i, (topic, key, value) in enumerate(records):
        send(topic, key, value, (i + 1) * 1_000)
        if i // step < crashes and i % step == step // 2:
            commit()
        elif i // step < crashes and i % step == step - 1:
            crash_and_restart()


def _task_job(
    task: type, config_file: str, records: list[tuple[str, str, Any]], *, crashes: int
) -> tuple[MemoryBroker, list[TaskHarness]]:
    """The task version over one broker (see :func:`_feed`); its harnesses are left open."""
    broker = MemoryBroker(default_partitions=PARTITIONS)
    config = load_config(CONFIG / config_file)
    tasks = [TaskHarness(task, config, partition=p, broker=broker, loopback=True) for p in range(PARTITIONS)]

    def send(topic: str, key: str, value: Any, ts: int) -> None:
        p = partition_for_key(key.encode(), PARTITIONS)
        raw = None if value is None else orjson.dumps(value)
        broker.append(topic, p, key.encode(), raw, timestamp=ts)
        _settle(tasks)

    def crash_and_restart() -> None:
        for h in tasks:
            h.crash()
        for h in tasks:
            h.restart()
        _settle(tasks)

    _feed(records, send, lambda: [h.commit() for h in tasks], crash_and_restart, crashes=crashes)
    return broker, tasks


def _pipeline_job(app: Any, records: list[tuple[str, str, Any]], *, crashes: int) -> PipelineHarness:
    """The pipeline on the same input, the same crashes (see :func:`_feed`); left open."""
    h = PipelineHarness(app, partitions=PARTITIONS)

    def crash_and_restart() -> None:
        h.crash()
        h.restart()

    _feed(
        records,
        lambda t, k, v, ts: h.send(t, k, v, timestamp=ts),
        h.commit,
        crash_and_restart,
        crashes=crashes,
    )
    return h


def _records(records: list[Any]) -> list[tuple[str | None, bytes | None, bytes | None]]:
    """Every record sent (re-sent copies too), with its id, in the broker's order."""
    return [(id_from_headers(r.headers), r.key, r.value) for r in records]


def _stores(harnesses: list[TaskHarness], names: list[str]) -> list[list[dict[Any, Any]]]:
    """Each task's stores, read back decoded with the stores' serdes."""
    found = []
    for h in harnesses:
        task_stores = []
        for name in names:
            with h.stores[name].all() as entries:
                task_stores.append({k: v for k, v in entries})
        found.append(task_stores)
    return found


def _rows(
    config: Any, store: str, harnesses: list[TaskHarness], layout: Any = None
) -> list[list[dict[str, Any]]]:
    """Each task's entries of ``store`` as read_state shows them (the job's layout of the store,
    unless ``layout`` is given)."""
    if layout is None:
        job = parse_job_config(config)
        layout = layout_for(config, job, job.stores[store])
    rows = []
    for h in harnesses:
        h.stores[store].flush()  # the cache's dirty entries into the bytes underneath
        with h.stores[store].raw.all() as entries:
            rows.append([layout.decode(k, v) for k, v in entries])
    return rows


def _compare(
    task: type,
    config_file: str,
    app: Any,
    records: list[tuple[str, str, Any]],
    outputs: list[str],
    stores: tuple[list[str], list[str]],
    *,
    crashes: int,
    app_spec: str | None = None,
) -> dict[str, list[Any]]:
    """Run the task version and the pipeline on ``records`` with ``crashes`` crash rounds, assert
    that they send the same records (ids, keys, values, in the same order, re-sent copies too) to
    ``outputs`` and end with the same stores (``stores``: the task's names, the pipeline's), also
    read as data through their layouts (read_state's rows; the pipeline's config loads its app
    from ``app_spec``), and return the task version's outputs."""
    broker, tasks = _task_job(task, config_file, records, crashes=crashes)
    h = _pipeline_job(app, records, crashes=crashes)
    try:
        sent = {topic: _records(broker.records(topic)) for topic in outputs}
        for topic in outputs:
            assert _records(h.records(topic)) == sent[topic], topic
        assert _stores(h.tasks, stores[1]) == _stores(tasks, stores[0])
        if app_spec is not None:
            pipe_config = h.config.with_overrides({APP_KEY: app_spec})
            task_config = load_config(CONFIG / config_file)
            for task_store, pipe_store in zip(*stores, strict=True):
                assert _rows(pipe_config, pipe_store, h.tasks) == _rows(task_config, task_store, tasks)
        return sent
    finally:
        h.close()
        for t in tasks:
            t.close()


def _enrich_input(n: int, seed: int = 5) -> list[tuple[str, str, Any]]:
    rng = random.Random(seed)
    records: list[tuple[str, str, Any]] = []
    for i in range(n):
        user = f"u{rng.randrange(8)}"
        if rng.random() < 0.2:
            profile = (
                None if rng.random() < 0.1 else {"user_id": user, "zip": f"{rng.randrange(10_000, 99_999)}"}
            )
            records.append(("profiles", user, profile))
        else:
            records.append(("pageviews-by-user", user, {"view_id": f"v{i}", "user_id": user, "ts": i}))
    return records


@pytest.mark.parametrize("crashes", [0, 3])
def test_the_enrich_pipeline_gives_the_task_versions_outputs_ids_bytes_and_store(crashes: int) -> None:
    from samzapy.jobs.pageview_enrich import PageViewEnrichTask
    from samzapy.jobs.pageview_enrich_pipeline import app

    sent = _compare(
        PageViewEnrichTask,
        "pageview-enrich.properties",
        app,
        _enrich_input(300, seed=5 + crashes),
        ["pageviews-enriched"],
        (["zip-codes"], ["zip-codes"]),
        crashes=crashes,
        app_spec="samzapy.jobs.pageview_enrich_pipeline:app",
    )
    ids = [i for i, _, _ in sent["pageviews-enriched"]]
    assert len(set(ids)) > 150 and all(i.startswith("enrich:Partition ") for i in ids)


def _event_time_enrich_input(n: int, seed: int) -> list[tuple[str, str, Any]]:
    """Profiles with ``updated_at`` and views with ``ts`` near their place in the input (some
    disorder, beyond the join's minute of grace too); some profiles deleted."""
    rng = random.Random(seed)
    records: list[tuple[str, str, Any]] = []
    for i in range(n):
        user, at = f"u{rng.randrange(8)}", (i + 1) * 1_000 + rng.randrange(-90_000, 5_000)
        if rng.random() < 0.25:
            profile = None if rng.random() < 0.15 else {"zip": f"z{i}", "updated_at": at}
            records.append(("profiles", user, profile))
        else:
            records.append(("pageviews-by-user", user, {"view_id": f"v{i}", "ts": at}))
    return records


def _sorted_rows(stores: list[list[list[dict[str, Any]]]]) -> list[list[str]]:
    """Per task, the rows of all ``stores`` (each a list of per-task rows) as sorted JSON texts."""
    return [sorted(orjson.dumps(r).decode() for rows in stores for r in rows[p]) for p in range(PARTITIONS)]


def _event_time_enrich_app() -> Any:
    """config/pageview-enrich-event-time.properties as a pipeline: the same stage name, history
    and grace (the task version's zip-versions store holds the versions and the waiting views;
    the pipeline keeps them in the table's store and the join's)."""
    import samzapy

    app = samzapy.App("pageview-enrich-event-time-pipeline")
    profiles = app.table(
        "profiles",
        name="zip-versions",
        timestamp="updated_at",
        versioned=86_400_000,
        map_values=lambda profile: profile["zip"],
    )
    views = app.stream("pageviews-by-user", timestamp="ts")
    views.join(profiles, lambda view, zip_code: {**view, "zip": zip_code}, grace=60_000, name="enrich").to(
        "pageviews-enriched"
    )
    return app


@pytest.mark.parametrize("crashes", [0, 3])
def test_the_event_time_enrich_pipeline_gives_the_task_versions_outputs_and_state(crashes: int) -> None:
    """join.time=event: the same records (ids, bytes, order, re-sent copies) and, at the end of
    the profiles, the same versions and waiting views read as data (one store in the task, two in
    the pipeline)."""
    from samzapy.jobs.pageview_enrich import PageViewEnrichTask

    app = _event_time_enrich_app()
    records = _event_time_enrich_input(300, seed=17 + crashes)
    config_file = "pageview-enrich-event-time.properties"
    broker, tasks = _task_job(PageViewEnrichTask, config_file, records, crashes=crashes)
    h = _pipeline_job(app, records, crashes=crashes)
    try:
        task_config = load_config(CONFIG / config_file)
        # the app is not importable (pipeline.app): its layouts as PipelineTask.state_layouts and
        # layout_for give them (a versioned table by its config)
        pipe_layouts = {"zip-versions": VersionedLayout(), **join_state_layouts(app.plan())}

        def task_state() -> list[list[str]]:
            return _sorted_rows([_rows(task_config, "zip-versions", tasks)])

        def pipe_state() -> list[list[str]]:
            return _sorted_rows([_rows(None, s, h.tasks, layout) for s, layout in pipe_layouts.items()])

        waiting = task_state()
        assert any('"buffered"' in row for rows in waiting for row in rows)  # views wait for the table
        assert pipe_state() == waiting
        _end(broker, ["profiles"], tasks)
        h.end_of_stream("profiles")
        sent = _records(broker.records("pageviews-enriched"))
        assert _records(h.records("pageviews-enriched")) == sent
        assert pipe_state() == task_state()
        assert len({i for i, _, _ in sent}) > 100
    finally:
        h.close()
        for t in tasks:
            t.close()


def _table_input(n: int, seed: int = 9) -> list[tuple[str, str, Any]]:
    rng = random.Random(seed)
    records: list[tuple[str, str, Any]] = []
    for i in range(n):
        user = f"u{rng.randrange(10)}"
        topic = rng.choice(["profiles", "settings"])
        records.append((topic, user, None if rng.random() < 0.1 else {"v": i}))
    return records


@pytest.mark.parametrize("crashes", [0, 3])
def test_the_profile_settings_pipeline_gives_the_task_versions_changes_ids_bytes_and_stores(
    crashes: int,
) -> None:
    from samzapy.jobs.profile_settings_join import ProfileSettingsJoinTask
    from samzapy.jobs.profile_settings_join_pipeline import app

    sent = _compare(
        ProfileSettingsJoinTask,
        "profile-settings-join.properties",
        app,
        _table_input(300, seed=9 + crashes),
        ["user-profile-settings"],
        (["profiles", "settings", "joined"], ["profiles", "settings", "tt-joined"]),
        crashes=crashes,
        app_spec="samzapy.jobs.profile_settings_join_pipeline:app",
    )
    changes = sent["user-profile-settings"]
    assert sum(v is not None for _, _, v in changes) > 100 and sum(v is None for _, _, v in changes) > 10


def _order_input(n: int, seed: int = 13) -> list[tuple[str, str, Any]]:
    rng = random.Random(seed)
    records: list[tuple[str, str, Any]] = []
    for i in range(n):
        if rng.random() < 0.3:
            customer = f"c{rng.randrange(6)}"
            records.append(("customers", customer, None if rng.random() < 0.1 else {"name": f"n{i}"}))
        else:
            order = f"o{rng.randrange(25)}"
            value = None if rng.random() < 0.1 else {"customer_id": f"c{rng.randrange(6)}", "amount": i}
            records.append(("orders", order, value))
    return records


@pytest.mark.parametrize("crashes", [0, 3])
def test_the_order_customer_pipeline_gives_the_task_versions_outputs_ids_bytes_and_stores(
    crashes: int,
) -> None:
    from samzapy.jobs.order_customer_join import OrderCustomerJoinTask
    from samzapy.jobs.order_customer_join_pipeline import app

    task_stores = ["fk-left", "fk-right", "fk-subscriptions", "joined"]
    pipe_stores = [f"order-customer-{s}" for s in ("left", "right", "subscriptions", "joined")]
    sent = _compare(
        OrderCustomerJoinTask,
        "order-customer-join.properties",
        app,
        _order_input(300, seed=13 + crashes),
        ["orders-with-customer"],
        (task_stores, pipe_stores),
        crashes=crashes,
        app_spec="samzapy.jobs.order_customer_join_pipeline:app",
    )
    assert sum(v is not None for _, _, v in sent["orders-with-customer"]) > 50
