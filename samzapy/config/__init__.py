"""Configuration: the .properties reader, the key catalogue and the typed job view.

Typical use::

    config = load_config("config/page-views.properties", overrides=["task.commit.ms=5000"])
    job = parse_job_config(config, check_task_class=True)  # one ConfigError listing every problem
    task_cls = job.task_type                                # task.class, imported once, by the parse
    threshold = job.app_config.get_int("app.threshold", 10)  # application keys (a task's context.config)

The reader lives in :mod:`.properties`, the catalogue of keys (each key's type, field and
meaning) in :mod:`.keys`, the resolved dataclasses and their defaults in :mod:`.model`, and
validation in :mod:`.job` (with :mod:`.stores` and :mod:`.reporters` for the rules across
those keys, and :mod:`.user_code` for importing ``task.class`` and side-input processors).
:mod:`.app` is the read-only view of the application keys that tasks get.
"""

from samzapy.config.app import AppConfig
from samzapy.config.job import parse_job_config
from samzapy.config.model import JobConfig, ReporterSpec, SerdeSpec, StoreConfig, StreamConfig
from samzapy.config.properties import Config, Property, load_config, parse_properties, read_properties
from samzapy.config.user_code import resolve_task_class
from samzapy.errors import ConfigError

__all__ = [
    "AppConfig",
    "Config",
    "ConfigError",
    "JobConfig",
    "Property",
    "ReporterSpec",
    "SerdeSpec",
    "StoreConfig",
    "StreamConfig",
    "load_config",
    "parse_job_config",
    "parse_properties",
    "read_properties",
    "resolve_task_class",
]
