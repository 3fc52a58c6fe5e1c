"""Standby replicas without a broker: the assignment, the configuration key, and the adoption
of standby checkpoints by the container that takes a task over (real rocksdict files)."""

from __future__ import annotations

import doctest
from collections import Counter
from pathlib import Path

import pytest

import samzapy.container.assignment
import samzapy.container.standby
from samzapy.config import ConfigError, load_config, parse_job_config
from samzapy.container.assignment import standby_tasks_of
from samzapy.container.standby import adopt_standby_checkpoints
from samzapy.container.standby_store import NoWrites, StandbyWriteError, standby_dir
from samzapy.stores.checkpoints import LocalCheckpoints
from samzapy.stores.factory import store_dir
from samzapy.stores.rocksdb import RocksDBStore

BASE = (
    "job.name=counter\ntask.class=samzapy.task:StreamTask\ntask.inputs=kafka.pageviews\n"
    "stores.counts.factory=rocksdb\nstores.counts.changelog=kafka.counts-changelog\n"
)


def test_docstring_examples() -> None:
    assert doctest.testmod(samzapy.container.standby).failed == 0
    assert doctest.testmod(samzapy.container.assignment).failed == 0


@pytest.mark.parametrize(("tasks", "containers", "factor"), [(4, 2, 2), (8, 3, 2), (8, 3, 3), (5, 4, 3)])
def test_every_task_has_factor_minus_one_standbys_on_other_containers(tasks, containers, factor) -> None:
    holders: dict[int, list[int]] = {p: [] for p in range(tasks)}
    for container in range(containers):
        for p in standby_tasks_of(container, containers, tasks, factor):
            holders[p].append(container)
    for p, standbys in holders.items():
        owner = p % containers
        assert owner not in standbys, f"task {p} stands by on its owner {owner}"
        assert len(set(standbys)) == len(standbys) == factor - 1, (p, standbys)


def test_container_i_stands_by_for_the_containers_before_it() -> None:
    # 3 containers, factor 2: 0 <- 2, 1 <- 0, 2 <- 1
    assert standby_tasks_of(0, 3, 6, 2) == [2, 5]
    assert standby_tasks_of(1, 3, 6, 2) == [0, 3]
    assert standby_tasks_of(2, 3, 6, 2) == [1, 4]
    # the load is even: each container holds as many standby tasks as it owns
    assert Counter(len(standby_tasks_of(c, 3, 6, 2)) for c in range(3)) == Counter({2: 3})


def test_no_standbys_with_one_container_or_factor_one() -> None:
    assert standby_tasks_of(0, 1, 4, 1) == []
    assert standby_tasks_of(1, 2, 4, 1) == []


def test_replication_factor_is_parsed(tmp_path: Path) -> None:
    file = tmp_path / "job.properties"
    file.write_text(BASE + "job.container.count=3\njob.standbytasks.replication.factor=2\n")
    job = parse_job_config(load_config(file))
    assert (job.container_count, job.standby_replication_factor) == (3, 2)
    file.write_text(BASE)
    assert parse_job_config(load_config(file)).standby_replication_factor == 1


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        ("job.standbytasks.replication.factor=0\n", "must be an integer >= 1"),
        ("job.standbytasks.replication.factor=two\n", "must be an integer >= 1"),
        (
            "job.container.count=2\njob.standbytasks.replication.factor=3\n",
            "must be <= job.container.count (2)",
        ),
        ("job.standbytasks.replication.factor=2\n", "must be <= job.container.count (1)"),
    ],
)
def test_a_bad_replication_factor_names_key_value_file_and_line(tmp_path: Path, lines, expected) -> None:
    file = tmp_path / "job.properties"
    file.write_text(BASE + lines)
    line = BASE.count("\n") + lines.count("\n")  # the factor is the last line
    with pytest.raises(ConfigError) as info:
        parse_job_config(load_config(file))
    [problem] = info.value.problems
    assert "'job.standbytasks.replication.factor'" in problem
    assert f"job.properties:{line}" in problem
    assert expected in problem


def test_a_standby_changelog_cannot_send() -> None:
    with pytest.raises(StandbyWriteError, match="standbys never write"):
        NoWrites().send("counts-changelog", b"k", b"v", partition=1)


def _checkpoint(checkpoints: LocalCheckpoints, path: Path, offset: int, value: bytes) -> None:
    db = RocksDBStore(path)
    try:
        db.put(b"key", value)
        checkpoints.create(db, offset)
    finally:
        db.close()


def test_adoption_moves_standby_checkpoints_next_to_the_store(tmp_path: Path) -> None:
    file = tmp_path / "job.properties"
    file.write_text(BASE + f"job.logged.store.base.dir={tmp_path / 'state'}\n")
    job = parse_job_config(load_config(file))
    base = job.logged_store_base_dir
    standby = LocalCheckpoints(standby_dir(base, "counts", 1), "counts-changelog", 1)
    own = LocalCheckpoints(store_dir(base, "counts", 1), "counts-changelog", 1)
    _checkpoint(standby, standby_dir(base, "counts", 1), 40, b"standby-40")
    _checkpoint(standby, standby_dir(base, "counts", 1), 70, b"standby-70")
    _checkpoint(own, store_dir(base, "counts", 1), 40, b"own-40")

    assert adopt_standby_checkpoints(job, [1]) == 1

    assert [c.offset for c in own.newest_first()] == [70, 40]
    assert [c.offset for c in standby.newest_first()] == [40]  # the store had 40 already: left
    db = RocksDBStore(tmp_path / "copy")
    try:
        db.reset(own.newest_first()[0].path)
        assert db.get(b"key") == b"standby-70"
    finally:
        db.close()
    assert adopt_standby_checkpoints(job, [0, 1]) == 0
