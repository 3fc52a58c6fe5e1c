"""Configuration: the .properties reader, the key catalogue and the typed job view.

Typical use::

    config = load_config("config/page-views.properties", overrides=["task.commit.ms=5000"])
    job = parse_job_config(config)          # raises one ConfigError listing every problem
    task_cls = resolve_task_class(job.task_class, config.location("task.class"))
    threshold = config.get_int("app.threshold", 10)   # application keys

The reader lives in :mod:`.properties`, the catalogue of keys in :mod:`.keys`, validation in
:mod:`.job` and the resolved dataclasses in :mod:`.model`.
"""

from samzapy.config.job import parse_job_config
from samzapy.config.model import JobConfig, SerdeSpec, StoreConfig, StreamConfig
from samzapy.config.properties import Config, Property, load_config, parse_properties, read_properties
from samzapy.config.task_class import resolve_task_class
from samzapy.errors import ConfigError

__all__ = [
    "Config",
    "ConfigError",
    "JobConfig",
    "Property",
    "SerdeSpec",
    "StoreConfig",
    "StreamConfig",
    "load_config",
    "parse_job_config",
    "parse_properties",
    "read_properties",
    "resolve_task_class",
]
