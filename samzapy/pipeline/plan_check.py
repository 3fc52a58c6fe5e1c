r"""The recorded plan: a pipeline's stateful steps as they were when it last ran.

And the check that refuses a run whose plan would orphan or misread that state.

What is compared is :meth:`samzapy.pipeline.compiler.Plan.signature`: each stateful step's kind,
name, stores, key and value serdes, window and aggregation, the topic of a ``key_by`` and a
digest of its key function's code, a table's store layout and a digest of its ``map_values``.
A run is refused, before it processes anything, when a recorded step is gone (its state would
be orphaned: renamed, or its auto name moved because steps were reordered) or changed (its
state would be misread); added steps are accepted, and so is an unchanged plan.
``--config pipeline.plan.accept=true`` takes the change as intended (the new plan is then
recorded).

Where it is recorded: a compacted topic of its own, ``__samzapy_plan_<job>_<id>``, one record
(key ``plan``). Not the checkpoint topic: its records are per task and read by the checkpoint
fold, the standbys and ``samzapy checkpoint``; a record of another kind there would be one more
case for each of them. Not local disk: another machine (a moved container, group mode) must
see the same plan. The topic is written before the tasks start, so the first run records it.

>>> old = {"job": "j", "steps": [{"kind": "window", "name": "w", "stores": ["w"], "key": "string"}]}
>>> differences(old, old)
[]
>>> new = {"job": "j", "steps": [{"kind": "window", "name": "w2", "stores": ["w2"], "key": "string"}]}
>>> print(differences(old, new)[0].replace("; ", ";\n"))
window 'w' is gone (its store w would be orphaned);
the new plan has window 'w2' in its place: if it is the same step renamed, give it name='w' to keep its state
"""

from __future__ import annotations

import logging
from typing import Any

import orjson

from samzapy.errors import ConfigError

log = logging.getLogger(__name__)

#: The key that takes a refused change as intended.
ACCEPT_KEY = "pipeline.plan.accept"
_COMPARED = ("kind", "key", "value", "window", "aggregation", "topic", "key_fn", "layout", "value_fn")


def plan_topic(job_name: str, job_id: str) -> str:
    """The compacted topic that holds a job's recorded plan."""
    return f"__samzapy_plan_{job_name}_{job_id}"


def differences(recorded: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """What in ``current`` would orphan or misread the state of ``recorded`` (empty: the run may go on).

    Added steps are not differences.
    """
    now = {s["name"]: (i, s) for i, s in enumerate(current["steps"])}
    problems = []
    for position, old in enumerate(recorded["steps"]):
        found = now.get(old["name"])
        if found is None:
            problems.append(_gone(old, position, recorded, current, now))
            continue
        new = found[1]
        changed = [f for f in _COMPARED if old.get(f) != new.get(f)]
        if changed:
            said = ", ".join(f"{f} {old.get(f)!r} -> {new.get(f)!r}" for f in changed)
            problems.append(
                f"{old['kind']} '{old['name']}' (now at {new.get('at', '?')}) changed: {said}; its "
                f"stores {', '.join(old['stores'])} would be read as the new step's: give the changed "
                f"step a new name= (it then starts empty), or accept the change"
            )
    return problems


def _gone(
    old: dict[str, Any],
    position: int,
    recorded: dict[str, Any],
    current: dict[str, Any],
    now: dict[str, tuple[int, dict[str, Any]]],
) -> str:
    stores = ", ".join(old["stores"])
    known = {s["name"] for s in recorded["steps"]}
    same_place = current["steps"][position] if position < len(current["steps"]) else None
    hint = ""
    if same_place is not None and same_place["kind"] == old["kind"] and same_place["name"] not in known:
        hint = (
            f"; the new plan has {old['kind']} '{same_place['name']}' in its place: if it is the same "
            f"step renamed, give it name='{old['name']}' to keep its state"
        )
    return f"{old['kind']} '{old['name']}' is gone (its store {stores} would be orphaned){hint}"


def refusal(job: str, problems: list[str]) -> ConfigError:
    """The error that stops a run whose plan changed."""
    lines = "\n".join(f"  - {p}" for p in problems)
    msg = (
        f"the plan of pipeline '{job}' differs from the one recorded when it last ran, in ways that "
        f"would lose or misread its state:\n{lines}\nIf this is intended (the old state may be "
        f"dropped), run again with --config {ACCEPT_KEY}=true"
    )
    return ConfigError(msg)


class KafkaPlanRecord:
    """The recorded plan in its compacted topic (see the module)."""

    def __init__(self, servers: str, topic: str) -> None:
        self.servers = servers
        self.topic = topic

    def read(self) -> dict[str, Any] | None:
        """The recorded signature, ``None`` when nothing was recorded."""
        from samzapy.kafka.admin import TopicAdmin
        from samzapy.kafka.topic_io import ReadSpec, read_records

        with TopicAdmin(self.servers) as admin:
            if admin.partition_count(self.topic) is None:
                return None
        last = None
        for record in read_records(self.servers, self.topic, ReadSpec(from_beginning=True)):
            last = record.value
        return None if last is None else orjson.loads(last)

    def write(self, signature: dict[str, Any]) -> None:
        """Record ``signature`` (acknowledged before returning)."""
        from samzapy.kafka.admin import TopicAdmin
        from samzapy.kafka.producer import Producer

        with TopicAdmin(self.servers) as admin:
            admin.ensure_topic(self.topic, 1, compact=True)
        producer = Producer(self.servers)
        try:
            producer.send(self.topic, b"plan", orjson.dumps(signature, option=orjson.OPT_SORT_KEYS))
            producer.flush()
        finally:
            producer.close()


def check_and_record(record: Any, signature: dict[str, Any], *, accept: bool) -> list[str]:
    """Compare ``signature`` with what ``record`` holds.

    Raise :func:`refusal` on differences unless ``accept``; record the new plan when it is new
    or changed. Returns the differences accepted (empty when none).
    """
    recorded = record.read()
    if recorded is None:
        record.write(signature)
        log.info(
            "recorded the plan of pipeline '%s' (%d stateful steps)",
            signature["job"],
            len(signature["steps"]),
        )
        return []
    problems = differences(recorded, signature)
    if problems and not accept:
        raise refusal(signature["job"], problems)
    if problems:
        log.warning("plan change accepted (%s=true): %s", ACCEPT_KEY, "; ".join(problems))
    if recorded != signature:
        record.write(signature)
    return problems
