"""``samzapy quickstart``: the page-view counter end to end on a fresh embedded broker.

Generates page views keyed by page (out of order, a few late), runs the two jobs of the
window-aggregation pattern (``config/pageview-repartition.properties`` then
``config/pageview-counter.properties``) with ``--exit-at-end``, and prints the top users of
each hour from the ``pageview-counts`` output, checked against a count made directly from
the generated data. The command line is :mod:`samzapy.cli.quickstart`; this module prints
through the ``echo`` it is given.
"""

from __future__ import annotations

import logging
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import orjson

from samzapy.errors import ConfigError
from samzapy.generate import HOUR_MS, PageViewSpec, pageviews, produce_end_of_stream, produce_json

JOBS = ("pageview-repartition", "pageview-counter")


def example_config_dir() -> Path:
    """The folder of the example job files.

    ``samzapy/example_configs`` in an installed wheel (pyproject maps config/ there), else the
    checkout's ``config/`` (source or editable).
    """
    package = Path(__file__).resolve().parent
    packaged = package / "example_configs"
    return packaged if packaged.is_dir() else package.parent / "config"


def _run_job(name: str, servers: str, state_dir: Path) -> None:
    from samzapy.config import load_config, parse_job_config
    from samzapy.container.run_loop import Container

    overrides = [
        f"systems.kafka.consumer.bootstrap.servers={servers}",
        f"systems.kafka.producer.bootstrap.servers={servers}",
        f"job.logged.store.base.dir={state_dir}",
    ]
    path = example_config_dir() / f"{name}.properties"
    if not path.exists():
        msg = f"{path} not found: this samzapy install lacks its example configs; reinstall it"
        raise ConfigError(msg)
    config = load_config(path, overrides)
    Container(parse_job_config(config, check_task_class=True), exit_at_end=True).run()


def _read_topic(servers: str, topic: str) -> list[dict[str, Any]]:
    from samzapy.kafka.admin import TopicAdmin
    from samzapy.kafka.reading import read_partition, reader_consumer
    from samzapy.records import TopicPartition

    with TopicAdmin(servers) as admin:
        partitions = admin.partition_count(topic) or 0
    consumer = reader_consumer(servers)
    try:
        return [
            orjson.loads(cast(bytes, record.value))  # the counter's outputs all have a value
            for p in range(partitions)
            for batch in read_partition(consumer, TopicPartition(topic, p), 0)
            for record in batch
        ]
    finally:
        consumer.close()


def _hour(ms: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.gmtime(ms / 1000))


@dataclass(frozen=True)
class QuickstartSpec:
    """What the quickstart generates and shows."""

    count: int = 20_000
    users: int = 50
    hours: float = 4.0
    top: int = 3
    seed: int = 42
    keep_broker: bool = False


def run_quickstart(options: QuickstartSpec, echo: Callable[[str], None] = print) -> None:
    """Generate page views, count them with both jobs, and print the top users of each hour.

    The page views go to a fresh embedded broker; both jobs run to the end of their input; the
    top users are printed through ``echo``, checked against the data.
    """
    from samzapy.kafka import broker as dev_broker

    logging.getLogger("samzapy").setLevel(logging.WARNING)
    work = Path(tempfile.mkdtemp(prefix="samzapy-quickstart-"))
    info = dev_broker.start(port=dev_broker.free_port(), state_dir=work / "broker")
    servers = info.bootstrap_servers
    try:
        spec = PageViewSpec(
            count=options.count,
            users=options.users,
            seed=options.seed,
            span_ms=int(options.hours * HOUR_MS),
            disorder_ms=5 * 60_000,
            late_fraction=0.01,
        )
        echo(
            f"1/4 generating {options.count} page views over {options.hours:g} h of event time "
            f"(out of order by up to 5 min, 1% two hours late) on {servers}"
        )
        produce_json(servers, "pageviews", 4, pageviews(spec))
        produce_end_of_stream(servers, "pageviews")
        for step, name in enumerate(JOBS, start=2):
            echo(f"{step}/4 running {name} (config/{name}.properties) to the end of its input")
            started = time.monotonic()
            _run_job(name, servers, work / "state")
            echo(f"    done in {time.monotonic() - started:.1f}s")
        echo("4/4 reading pageview-counts and pageviews-late")
        windows = _read_topic(servers, "pageview-counts")
        _show(windows, len(_read_topic(servers, "pageviews-late")), spec, options.top, echo)
    finally:
        if options.keep_broker:
            echo(f"the broker keeps running on {servers} (pid {info.pid}); stop it with: kill {info.pid}")
        else:
            dev_broker.stop(work / "broker")


def _show(
    windows: list[dict[str, Any]], late: int, spec: PageViewSpec, top: int, echo: Callable[[str], None]
) -> None:
    by_hour: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for window in windows:
        by_hour[window["window_start"]].append(window)
    echo("")
    for start in sorted(by_hour):
        ranked = sorted(by_hour[start], key=lambda w: (-w["count"], w["user_id"]))[:top]
        total = sum(w["count"] for w in by_hour[start])
        leaders = ", ".join(f"{w['user_id']} ({w['count']})" for w in ranked)
        echo(f"{_hour(start)}-{_hour(start + HOUR_MS)[-5:]} UTC  {total:>6} views  top: {leaders}")
    counted = sum(w["count"] for w in windows)
    generated = sum(1 for _ in pageviews(spec))
    verdict = "every view accounted for" if counted + late == generated else "MISMATCH"
    echo(
        f"\n{len(windows)} (user, hour) windows; {counted} views counted + {late} too late for their "
        f"hour (sent to 'pageviews-late') = {counted + late} of {generated} generated: {verdict}"
    )
