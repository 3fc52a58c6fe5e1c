"""Finding a pipeline app and turning it into a validated job.

What ``samzapy run app.py``, ``samzapy run package.module:app`` and ``samzapy describe`` call.

An app spec is a Python file (``app.py``, optionally ``app.py:name``) or an importable
``module:attribute`` (``module`` alone when it defines exactly one :class:`App`). A file is
imported as the module of its stem with its directory first on ``sys.path`` (so its sibling
modules import), once per process: the task instances of a container find the same app.
"""

from __future__ import annotations

import importlib.util
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from samzapy.config.properties import Config, parse_overrides, read_properties
from samzapy.errors import ConfigError
from samzapy.pipeline.api import App, PipelineError
from samzapy.pipeline.compiler import TASKS_KEY
from samzapy.pipeline.graph import merge_on_path, source_roots
from samzapy.pipeline.plan_check import ACCEPT_KEY, KafkaPlanRecord, check_and_record, plan_topic
from samzapy.pipeline.serde_check import check_serde_names

log = logging.getLogger(__name__)

_loaded: dict[str, App] = {}


def is_app_spec(target: str) -> bool:
    """Whether a ``samzapy run`` target names an app (not a ``.properties`` file).

    >>> is_app_spec("app.py"), is_app_spec("jobs.counts:app"), is_app_spec("job.properties")
    (True, True, False)
    """
    path = target.partition(":")[0] if not Path(target).exists() else target
    if path.endswith(".py"):
        return True
    return ":" in target and not target.startswith("file:") and not path.endswith(".properties")


def _split_file(spec: str) -> tuple[Path, str | None]:
    if Path(spec).is_file():
        return Path(spec), None
    head, colon, attr = spec.rpartition(":")
    if not colon:  # a missing app.py, named as typed (not as the empty head '.')
        return Path(spec), None
    return Path(head), attr or None


def load_app(spec: str, location: str = "command line") -> App:
    """The :class:`App` named by ``spec`` (see the module); imported once per process.

    Raises:
        ConfigError: the file or module is missing, raised while importing (with its line),
            or defines no app (or several, without naming one).
    """
    found = _loaded.get(spec)
    if found is not None:
        return found
    if spec.partition(":")[0].endswith(".py") or Path(spec).suffix == ".py":
        module, attr = _import_file(spec, location)
    else:
        from samzapy.config.user_code import import_object

        module_name, _, attr_name = spec.partition(":")
        if attr_name:
            obj = import_object(spec, APP_SPEC_KEY, location, "App")
            return _remember(spec, _as_app(obj, spec))
        import_object(f"{module_name}:__name__", APP_SPEC_KEY, location)  # its errors, located
        module, attr = sys.modules[module_name], None
    return _remember(spec, _find_app(module, attr, spec))


APP_SPEC_KEY = "pipeline.app"


def _remember(spec: str, app: App) -> App:
    _loaded[spec] = app
    return app


def _import_file(spec: str, location: str) -> tuple[Any, str | None]:
    path, attr = _split_file(spec)
    if not path.is_file():
        msg = f"no app file '{path}' ({location}): give a Python file (app.py) or module:attribute"
        raise ConfigError(msg)
    path = path.resolve()
    name = path.stem
    existing = sys.modules.get(name)
    if existing is not None and Path(getattr(existing, "__file__", "") or "").resolve() == path:
        return existing, attr
    folder = str(path.parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    module_spec = importlib.util.spec_from_file_location(name, path)
    assert module_spec is not None and module_spec.loader is not None
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[name] = module
    try:
        module_spec.loader.exec_module(module)
    except PipelineError:
        del sys.modules[name]
        raise
    except Exception as exc:
        del sys.modules[name]
        from samzapy.user_code import user_line

        # a SyntaxError's text already names the file and line (its traceback is importlib's)
        where = "" if isinstance(exc, SyntaxError) else f" (at {user_line(exc)})"
        msg = f"importing the app {path.name} raised {type(exc).__name__}: {exc}{where}"
        raise ConfigError(msg) from exc
    return module, attr


def _as_app(obj: object, spec: str) -> App:
    if not isinstance(obj, App):
        msg = f"'{spec}' is a {type(obj).__name__}, not a samzapy.App"
        raise ConfigError(msg)
    return obj


def _find_app(module: Any, attr: str | None, spec: str) -> App:
    if attr is not None:
        if not hasattr(module, attr):
            msg = f"'{spec}': the module has no attribute '{attr}'"
            raise ConfigError(msg)
        return _as_app(getattr(module, attr), spec)
    apps = {name: obj for name, obj in vars(module).items() if isinstance(obj, App)}
    if len(apps) == 1:
        return next(iter(apps.values()))
    if not apps:
        msg = f"'{spec}' defines no samzapy.App: write app = samzapy.App('my-job') in it"
        raise ConfigError(msg)
    msg = f"'{spec}' defines several apps ({', '.join(sorted(apps))}): name one, as {spec}:{sorted(apps)[0]}"
    raise ConfigError(msg)


def app_spec_for_tasks(spec: str) -> str:
    """``spec`` as the tasks (and Spark workers) load it: files by absolute path."""
    path, attr = _split_file(spec)
    if path.suffix == ".py" and path.is_file():
        resolved = str(path.resolve())
        return f"{resolved}:{attr}" if attr else resolved
    return spec


def pipeline_config(spec: str, overrides: Sequence[str] = (), properties: str | None = None) -> Config:
    """The raw job configuration of the app ``spec``.

    The plan's keys (located at the user's lines), then an optional ``.properties`` file, then
    ``--config`` overrides.
    """
    app = load_app(spec)
    plan = app.plan()
    path, _ = _split_file(spec)
    source = str(path) if path.suffix == ".py" else spec
    entries = plan.properties(source, app_spec_for_tasks(spec))
    extra = read_properties(properties) if properties is not None else []
    parsed = parse_overrides(overrides)
    _refuse_plan_keys(extra, parsed, source)
    base = Path(source).resolve().parent if path.suffix == ".py" else None
    config = Config([*entries, *extra], source=source, base_dir=base)
    config = config.with_overrides(parsed) if parsed else config
    check_serde_names(config)  # each bad name once, at its stage: not again at every inheritor
    return config


#: Keys the plan alone sets: from a .properties file or --config they would cut the job from its
#: pipeline (other inputs, another task class) while the plan check and the stages assume it.
PLAN_KEYS = ("task.class", "task.inputs", "pipeline.app")


def _refuse_plan_keys(extra: Sequence[Any], overrides: dict[str, str], source: str) -> None:
    problems = [
        f"'{p.key}' ({p.location}) is set by the pipeline ({source}): remove it"
        for p in extra
        if p.key in PLAN_KEYS
    ]
    problems += [
        f"'{k}' (--config) is set by the pipeline ({source}): remove it" for k in overrides if k in PLAN_KEYS
    ]
    if problems:
        from samzapy.config.properties import config_error

        raise config_error(source, problems)


def pipeline_job(spec: str, overrides: Sequence[str] = (), properties: str | None = None) -> Any:
    """The validated :class:`~samzapy.config.JobConfig` of the app.

    The partition count of its intermediate topics is learnt from its inputs (as Samza's planner
    does), and its plan checked against the recorded one (:mod:`samzapy.pipeline.plan_check`).
    """
    from samzapy.config import parse_job_config

    config = pipeline_config(spec, overrides, properties)
    job = parse_job_config(config, check_task_class=True)  # every problem, before any connection
    plan = load_app(spec).plan()
    from samzapy.kafka.broker import resolve_bootstrap_servers

    servers = resolve_bootstrap_servers(job.producer_bootstrap_servers)
    counts = _partition_counts(servers, plan)
    check_copartitioning(plan, counts)
    if plan.intermediate_topics and TASKS_KEY not in config:
        count = max([c for c in counts.values() if c] or [1])
        if not any(counts.values()):
            log.warning("none of the app's input topics exists yet: intermediate topics get 1 partition")
        extra = {f"systems.kafka.streams.{t}.partitions": count for t in plan.intermediate_topics}
        config = config.with_overrides({**extra, TASKS_KEY: count})
        job = parse_job_config(config, check_task_class=True)
    record = KafkaPlanRecord(servers, plan_topic(job.job_name, job.job_id))
    check_and_record(record, plan.signature(), accept=job.app_config.get_bool(ACCEPT_KEY, False))
    return job


def pipeline_replay_config(spec: str, overrides: Sequence[str] = (), properties: str | None = None) -> Config:
    """The raw configuration a Spark replay of the app runs with (``samzapy replay app.py``).

    ``properties`` is an optional ``.properties`` file for the rest. It is
    :func:`pipeline_config` with its intermediate topics' partition counts asked from the broker
    (they exist: a replay reads the history a run wrote). The recorded plan is neither checked
    nor written: a replay writes no state the next run restores.
    """
    from samzapy.config import parse_job_config
    from samzapy.kafka.broker import resolve_bootstrap_servers

    config = pipeline_config(spec, overrides, properties)
    job = parse_job_config(config, check_task_class=True)
    plan = load_app(spec).plan()
    if not plan.intermediate_topics or TASKS_KEY in config:
        return config
    counts = _partition_counts(resolve_bootstrap_servers(job.producer_bootstrap_servers), plan)
    count = max([c for c in counts.values() if c] or [1])
    extra = {f"systems.kafka.streams.{t}.partitions": count for t in plan.intermediate_topics}
    return config.with_overrides({**extra, TASKS_KEY: count})


def _partition_counts(servers: str, plan: Any) -> dict[str, int | None]:
    """The partition count of each source topic (``None``: it does not exist yet)."""
    from samzapy.kafka.admin import TopicAdmin

    with TopicAdmin(servers) as admin:
        return {topic: admin.partition_count(topic) for topic in plan.sources}


def check_copartitioning(plan: Any, counts: dict[str, int | None]) -> None:
    """Refuse, at the user's line, a keyed stage whose sources have different partition counts.

    That is a join, or a stage keeping state per key after a merge, whose records come from
    topics with different partition counts (task N reads partition N of each: a key would be in
    different tasks). Sources are followed through merges and joins, not beyond a ``key_by``.
    """
    for node in plan.app.nodes:
        if not _needs_copartitioning(node):
            continue
        sides: dict[str, int] = {}
        for parent in node.parents:
            for root in source_roots(parent):
                count = counts.get(root.args["topic"])
                if count:
                    sides[root.args["topic"]] = count
        if len(set(sides.values())) > 1:
            said = ", ".join(f"'{t}' has {n}" for t, n in sides.items())
            merge = next((m for m in map(merge_on_path, node.parents) if m is not None), None)
            through = f" (merged at {merge.where})" if merge is not None else ""
            msg = (
                f"{node.where}: {node.kind.replace('_', '-')} of topics with different partition "
                f"counts{through} ({said}): task N reads partition N of each, so a key would be in "
                "different tasks; give the topics the same partition count, or key_by the stream "
                "(it then moves to an intermediate topic with the job's partition count)"
            )
            raise PipelineError(msg)


def _needs_copartitioning(node: Any) -> bool:
    """Whether a stage needs all of a key's records in one task.

    Joins, windows, dedup, a ``process`` with stores do.
    """
    if node.kind in ("stream_table_join", "stream_stream_join", "table_table_join", "window", "dedup"):
        return True
    return node.kind == "process" and bool(node.args.get("stores"))
