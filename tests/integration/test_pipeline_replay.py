"""A pipeline replayed in Spark (``samzapy replay --config-path app.py``) gives the windows its
streaming run gave: same ids, keys and value bytes.

The app re-keys page views by user (an intermediate topic) and counts them per hour. The
replay reads the same history as the streaming run: the source topic and the intermediate
topic the run wrote (the downstream half of the job reads it), with file output, so nothing
is written to Kafka. As in tests/spark/test_replay_patterns.py, the re-keying half's own
outputs (its watermark control records, sent from window() by wall-clock in streaming and by
record time in the replay) are not compared; the window results downstream are.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from jobs_support import dedup_by_id  # noqa: E402
from support import consume_all, run_job  # noqa: E402

from samzapy.generate import PageViewSpec, pageviews, produce_end_of_stream, produce_json  # noqa: E402

pytestmark = [pytest.mark.spark, pytest.mark.integration]

APP = """\
import samzapy

app = samzapy.App("{name}")
views = app.stream("{name}-views", timestamp="ts")
(views.key_by(lambda v: v["user_id"])
      .window(samzapy.tumbling(hours=1), samzapy.count(), grace=samzapy.minutes(10), name="hourly")
      .to("{name}-counts"))
"""


def test_a_pipeline_replayed_in_spark_gives_the_streaming_runs_windows(
    tmp_path: Path, broker: str, topic_name: str
) -> None:
    pytest.importorskip("pyspark")
    from samzapy.pipeline.loader import pipeline_replay_config
    from samzapy.spark.replay.driver import replay
    from samzapy.spark.replay.sinks import read_outputs

    name = topic_name[:36].rstrip("-") + "-rp"
    views = list(pageviews(PageViewSpec(count=800, users=10, pages=6, disorder_ms=300_000)))
    produce_json(broker, f"{name}-views", 2, views)
    produce_end_of_stream(broker, f"{name}-views")
    app_file = tmp_path / "replayed_app.py"
    app_file.write_text(APP.format(name=name))
    overrides = [
        f"systems.kafka.consumer.bootstrap.servers={broker}",
        f"job.logged.store.base.dir={tmp_path / 'state'}",
    ]
    result = run_job(app_file, "--exit-at-end", *(f"--config={o}" for o in overrides))
    assert result.returncode == 0, result.stderr[-3000:]
    streamed = {i: (r.key, r.value) for i, r in dedup_by_id(consume_all(broker, f"{name}-counts")).items()}

    out = tmp_path / "replay"
    replay(
        pipeline_replay_config(
            str(app_file), [*overrides[:1], f"job.logged.store.base.dir={tmp_path / 'rstate'}"]
        ),
        output=str(out),
        write_checkpoint=False,
        master="local[2]",
    )
    replayed = {
        row["id"]: (row["key"], row["value"]) for row in read_outputs(out / "outputs", f"{name}-counts")
    }
    assert len(streamed) > 10
    assert replayed == streamed


ADS = """\
import samzapy
from samzapy.jobs.ad_click_join import joined_record

app = samzapy.App("{name}")
clicks = app.stream("{name}-clicks", timestamp="ts")
impressions = app.stream("{name}-impressions", timestamp="ts")
decided = clicks.join(impressions, joined_record, within=(samzapy.seconds(120), samzapy.seconds(5)),
                      kind="left", grace=samzapy.seconds(10), once=True, name="ad-click-join",
                      ids=(lambda c: c["click_id"], lambda i: i["impression_id"]))
joined, unjoined = decided.branch(lambda r: "impression_ts" in r, lambda r: True)
joined.to("{name}-joined")
unjoined.to("{name}-unjoined")
"""


def test_the_ad_click_join_pipeline_replayed_in_spark_gives_the_streaming_runs_outputs(
    tmp_path: Path, broker: str, topic_name: str
) -> None:
    """jobs/ad_click_join_pipeline.py's join (topics renamed for the shared broker): both
    inputs are read in timestamp order in streaming and in the replay, so the joined and
    unjoined clicks are the same, ids and bytes."""
    pytest.importorskip("pyspark")
    from samzapy.generate import AdSpec, ads
    from samzapy.pipeline.loader import pipeline_replay_config
    from samzapy.spark.replay.driver import replay
    from samzapy.spark.replay.sinks import read_outputs

    name = topic_name[:36].rstrip("-") + "-ad"
    impressions, clicks = ads(AdSpec(impressions=600, orphan_clicks=20))
    produce_json(broker, f"{name}-impressions", 2, impressions)
    produce_json(broker, f"{name}-clicks", 2, clicks)
    produce_end_of_stream(broker, f"{name}-impressions")
    produce_end_of_stream(broker, f"{name}-clicks")
    app_file = tmp_path / "ads_app.py"
    app_file.write_text(ADS.format(name=name))
    overrides = [
        f"systems.kafka.consumer.bootstrap.servers={broker}",
        f"job.logged.store.base.dir={tmp_path / 'state'}",
    ]
    result = run_job(app_file, "--exit-at-end", *(f"--config={o}" for o in overrides))
    assert result.returncode == 0, result.stderr[-3000:]
    out = tmp_path / "replay"
    replay(
        pipeline_replay_config(str(app_file), overrides[:1]),
        output=str(out),
        write_checkpoint=False,
        master="local[2]",
    )
    for topic in (f"{name}-joined", f"{name}-unjoined"):
        streamed = {i: (r.key, r.value) for i, r in dedup_by_id(consume_all(broker, topic)).items()}
        replayed = {row["id"]: (row["key"], row["value"]) for row in read_outputs(out / "outputs", topic)}
        assert streamed, topic
        assert replayed == streamed, topic


TABLES = """\
import samzapy

app = samzapy.App("{name}")
profiles = app.table("{name}-profiles")
settings = app.table("{name}-settings")
(profiles.join(settings, lambda p, s: [p, s], kind="outer", name="profile-settings")
         .to_stream()
         .map(lambda user, j: None if j is None else {{"user_id": user, "profile": j[0], "settings": j[1]}},
              with_key=True)
         .to("{name}-joined"))
"""


def test_the_table_table_pipeline_over_interleaved_histories_replays_to_the_streaming_runs_changes(
    tmp_path: Path, broker: str, topic_name: str
) -> None:
    """Profiles and settings produced interleaved (their record timestamps interleave): the
    streaming run over the backlog and its Spark replay take the two tables' updates in the
    same timestamp order (task.input.order=timestamp), so every joined change is the same."""
    pytest.importorskip("pyspark")
    from samzapy.generate import profiles, settings
    from samzapy.pipeline.loader import pipeline_replay_config
    from samzapy.spark.replay.driver import replay
    from samzapy.spark.replay.sinks import read_outputs

    name = topic_name[:36].rstrip("-") + "-tt"
    left = list(profiles(400, 40, delete_fraction=0.05))
    right = list(settings(400, 40, delete_fraction=0.05))
    for start in range(0, 400, 50):  # interleaved: 50 profiles, 50 settings, ...
        produce_json(broker, f"{name}-profiles", 2, left[start : start + 50])
        produce_json(broker, f"{name}-settings", 2, right[start : start + 50])
    app_file = tmp_path / "tables_app.py"
    app_file.write_text(TABLES.format(name=name))
    overrides = [
        f"systems.kafka.consumer.bootstrap.servers={broker}",
        f"job.logged.store.base.dir={tmp_path / 'state'}",
    ]
    result = run_job(app_file, "--exit-at-end", *(f"--config={o}" for o in overrides))
    assert result.returncode == 0, result.stderr[-3000:]
    out = tmp_path / "replay"
    replay(
        pipeline_replay_config(str(app_file), overrides[:1]),
        output=str(out),
        write_checkpoint=False,
        master="local[2]",
    )
    streamed = {i: (r.key, r.value) for i, r in dedup_by_id(consume_all(broker, f"{name}-joined")).items()}
    replayed = {
        row["id"]: (row["key"], row["value"]) for row in read_outputs(out / "outputs", f"{name}-joined")
    }
    assert len(streamed) > 300
    assert replayed == streamed


ENRICH_AND_FK = """\
import samzapy

app = samzapy.App("{name}")
profiles = app.table("{name}-profiles")
views = app.stream("{name}-views")
views.join(profiles, lambda v, p: {{**v, "zip": p["zip"]}}, name="enrich").to("{name}-enriched")
orders = app.table("{name}-orders")
customers = app.table("{name}-customers")
(orders.join(customers, lambda o, c: {{**o, "customer": c["name"]}}, foreign_key=lambda o: o["customer_id"],
             name="order-customer")
       .to("{name}-orders-with-customer"))
"""


def test_the_enrichment_and_foreign_key_pipelines_replay_to_the_streaming_runs_outputs(
    tmp_path: Path, broker: str, topic_name: str
) -> None:
    """A stream-table join (views enriched from interleaved profile updates) and a foreign-key
    join (orders with their customer, through the job's two intermediate topics), streamed over
    a backlog and replayed in Spark: the same outputs, ids and bytes."""
    pytest.importorskip("pyspark")
    import random

    from samzapy.generate import profiles
    from samzapy.pipeline.loader import pipeline_replay_config
    from samzapy.spark.replay.driver import replay
    from samzapy.spark.replay.sinks import read_outputs

    name = topic_name[:32].rstrip("-") + "-ef"
    rng = random.Random(21)
    updates = list(profiles(200, 30))
    for start in range(0, 200, 40):  # interleaved: profile updates, then views of those users, ...
        produce_json(broker, f"{name}-profiles", 2, updates[start : start + 40])
        views = [(k, {"page": f"/p{rng.randrange(9)}"}) for k, _ in updates[start : start + 40]]
        produce_json(broker, f"{name}-views", 2, views)
        customers = [(f"c{rng.randrange(8)}".encode(), {"name": f"n{start}-{i}"}) for i in range(10)]
        produce_json(broker, f"{name}-customers", 2, customers)
        orders = [
            (f"o{rng.randrange(30)}".encode(), {"customer_id": f"c{rng.randrange(8)}"}) for _ in range(20)
        ]
        produce_json(broker, f"{name}-orders", 2, orders)
    app_file = tmp_path / "enrich_fk_app.py"
    app_file.write_text(ENRICH_AND_FK.format(name=name))
    overrides = [
        f"systems.kafka.consumer.bootstrap.servers={broker}",
        f"job.logged.store.base.dir={tmp_path / 'state'}",
    ]
    result = run_job(app_file, "--exit-at-end", *(f"--config={o}" for o in overrides))
    assert result.returncode == 0, result.stderr[-3000:]
    out = tmp_path / "replay"
    replay(
        pipeline_replay_config(str(app_file), overrides[:1]),
        output=str(out),
        write_checkpoint=False,
        master="local[2]",
    )
    for topic in (f"{name}-enriched", f"{name}-orders-with-customer"):
        streamed = {i: (r.key, r.value) for i, r in dedup_by_id(consume_all(broker, topic)).items()}
        replayed = {row["id"]: (row["key"], row["value"]) for row in read_outputs(out / "outputs", topic)}
        assert len(streamed) > 20, topic
        assert replayed == streamed, topic
