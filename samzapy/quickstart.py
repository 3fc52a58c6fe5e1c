"""``samzapy quickstart``: the page-view counter end to end on a fresh embedded broker.

Generates page views keyed by page (out of order, a few late), runs the two jobs of the
window-aggregation pattern (``config/pageview-repartition.properties`` then
``config/pageview-counter.properties``) with ``--exit-at-end``, and prints the top users of
each hour from the ``pageview-counts`` output, checked against a count made directly from
the generated data.
"""

from __future__ import annotations

import logging
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import click
import orjson

from samzapy.generate import HOUR_MS, PageViewSpec, pageviews, produce_end_of_stream, produce_json

CONFIG_DIR = Path(__file__).resolve().parent.parent / "config"
JOBS = ("pageview-repartition", "pageview-counter")


def _run_job(name: str, servers: str, state_dir: Path) -> None:
    from samzapy.config import load_config, parse_job_config
    from samzapy.container.run_loop import Container

    overrides = [
        f"systems.kafka.consumer.bootstrap.servers={servers}",
        f"systems.kafka.producer.bootstrap.servers={servers}",
        f"job.logged.store.base.dir={state_dir}",
    ]
    path = CONFIG_DIR / f"{name}.properties"
    if not path.exists():
        msg = f"{path} not found: quickstart runs from a source checkout (pip install -e .)"
        raise click.ClickException(msg)
    config = load_config(path, overrides)
    code = Container(parse_job_config(config, check_task_class=True), exit_at_end=True).run()
    if code != 0:
        raise click.ClickException(f"job {name} failed (exit code {code}); see the log above")


def _read_topic(servers: str, topic: str) -> list[dict]:
    from kafka import TopicPartition

    from samzapy.kafka.admin import TopicAdmin
    from samzapy.kafka.reading import read_partition, reader_consumer

    with TopicAdmin(servers) as admin:
        partitions = admin.partition_count(topic) or 0
    consumer = reader_consumer(servers)
    try:
        return [
            orjson.loads(record.value)
            for p in range(partitions)
            for batch in read_partition(consumer, TopicPartition(topic, p), 0)
            for record in batch
        ]
    finally:
        consumer.close()


def _hour(ms: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.gmtime(ms / 1000))


@click.command()
@click.option("--count", default=20_000, show_default=True, type=click.IntRange(min=1), help="Page views.")
@click.option("--users", default=50, show_default=True, type=click.IntRange(min=1))
@click.option("--hours", default=4.0, show_default=True, type=click.FloatRange(min=0.01))
@click.option("--top", default=3, show_default=True, type=click.IntRange(min=1), help="Users shown per hour.")
@click.option("--seed", default=42, show_default=True)
@click.option("--keep-broker", is_flag=True, help="Leave the broker running afterwards (prints its address).")
def quickstart(count: int, users: int, hours: float, top: int, seed: int, keep_broker: bool) -> None:
    """Run the page-view counter end to end on a fresh embedded broker and show its result."""
    from samzapy.kafka import broker as dev_broker

    logging.getLogger("samzapy").setLevel(logging.WARNING)
    work = Path(tempfile.mkdtemp(prefix="samzapy-quickstart-"))
    info = dev_broker.start(port=dev_broker.free_port(), state_dir=work / "broker")
    servers = info.bootstrap_servers
    try:
        spec = PageViewSpec(
            count=count,
            users=users,
            seed=seed,
            span_ms=int(hours * HOUR_MS),
            disorder_ms=5 * 60_000,
            late_fraction=0.01,
        )
        click.echo(
            f"1/4 generating {count} page views over {hours:g} h of event time "
            f"(out of order by up to 5 min, 1% two hours late) on {servers}"
        )
        produce_json(servers, "pageviews", 4, pageviews(spec))
        produce_end_of_stream(servers, "pageviews")
        for step, name in enumerate(JOBS, start=2):
            click.echo(f"{step}/4 running {name} (config/{name}.properties) to the end of its input")
            started = time.monotonic()
            _run_job(name, servers, work / "state")
            click.echo(f"    done in {time.monotonic() - started:.1f}s")
        click.echo("4/4 reading pageview-counts and pageviews-late")
        _show(_read_topic(servers, "pageview-counts"), len(_read_topic(servers, "pageviews-late")), spec, top)
    finally:
        if keep_broker:
            click.echo(
                f"the broker keeps running on {servers} (pid {info.pid}); stop it with: kill {info.pid}"
            )
        else:
            dev_broker.stop(work / "broker")


def _show(windows: list[dict], late: int, spec: PageViewSpec, top: int) -> None:
    by_hour: dict[int, list[dict]] = defaultdict(list)
    for window in windows:
        by_hour[window["window_start"]].append(window)
    click.echo("")
    for start in sorted(by_hour):
        ranked = sorted(by_hour[start], key=lambda w: (-w["count"], w["user_id"]))[:top]
        total = sum(w["count"] for w in by_hour[start])
        leaders = ", ".join(f"{w['user_id']} ({w['count']})" for w in ranked)
        click.echo(f"{_hour(start)}-{_hour(start + HOUR_MS)[-5:]} UTC  {total:>6} views  top: {leaders}")
    counted = sum(w["count"] for w in windows)
    generated = sum(1 for _ in pageviews(spec))
    verdict = "every view accounted for" if counted + late == generated else "MISMATCH"
    click.echo(
        f"\n{len(windows)} (user, hour) windows; {counted} views counted + {late} too late for their "
        f"hour (sent to 'pageviews-late') = {counted + late} of {generated} generated: {verdict}"
    )
