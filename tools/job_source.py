"""What ``--config-path`` of the state tools names: a ``.properties`` file or a pipeline app.

``read-rocksdb-tool`` and ``state-storage-tool`` take ``--config-path`` as ``samzapy run`` takes
its CONFIG: a job's ``.properties`` file (a path or Samza's ``file:///`` form), or a pipeline
(``app.py``, ``app.py:name``, ``package.module:app``). A pipeline is read as its compiled job
configuration (:func:`samzapy.pipeline.loader.pipeline_config`, what ``samzapy describe
--properties`` prints), so its stores are found by their names and decoded with their serdes.
Nothing connects to a broker and no plan is checked or recorded: the tools only read.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from samzapy.config import parse_job_config
from samzapy.errors import ConfigError
from samzapy.tools.common import BadInputError, JobSetup, load_job

F = TypeVar("F", bound=Callable[..., Any])

_HELP = (
    "The job's .properties file (a path or Samza's file:///... form), or a pipeline as "
    "'samzapy run' takes it: app.py, app.py:name or package.module:app."
)


def config_path_option(func: F) -> F:
    """``--config-path CONFIG`` (required): a ``.properties`` file or a pipeline app."""
    return click.option("--config-path", required=True, metavar="CONFIG", help=_HELP)(func)


def is_pipeline(config_path: str) -> bool:
    """Whether ``config_path`` names a pipeline app rather than a ``.properties`` file.

    A ``.properties`` file is answered without importing the pipeline package (and its Kafka
    client), as ``samzapy run`` does.

    >>> is_pipeline("job.properties"), is_pipeline("file:///srv/job.properties"), is_pipeline("app.py")
    (False, False, True)
    """
    if config_path.endswith(".properties") or config_path.startswith("file:"):
        return False
    from samzapy.pipeline.loader import is_app_spec

    return is_app_spec(config_path)


def load_tool_job(config_path: str) -> JobSetup:
    """The job ``config_path`` names: a ``.properties`` file or a pipeline's compiled config.

    Raises:
        BadInputError: the file is missing, the app does not load (its ``file:line``), or the
            configuration is invalid (every problem listed).
    """
    if not is_pipeline(config_path):
        return load_job(config_path)
    from samzapy.pipeline.loader import pipeline_config

    try:
        config = pipeline_config(config_path)
        return JobSetup(config, parse_job_config(config))
    except ConfigError as exc:
        raise BadInputError(str(exc)) from exc
