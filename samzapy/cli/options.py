"""Options every command line shares, spelled once: the job's config, overrides, logging."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])

#: The built-in serdes ``--serde``/``--key-serde`` take (samzapy.serdes.BUILTIN_SERDES, spelled
#: here so that building the command lines imports no serde; a unit test keeps them equal).
SERDE_NAMES = ("string", "json", "integer", "long", "bytes")

_CONFIG_PATH_HELP = "The job's .properties file (a path or Samza's file:///... form)."


def config_path_option(required: bool = True) -> Callable[[F], F]:
    """``--config-path PATH``: the job's ``.properties`` file, as Samza's scripts take it."""
    return click.option("--config-path", required=required, metavar="PATH", help=_CONFIG_PATH_HELP)


def overrides_option(func: F) -> F:
    """``--config KEY=VALUE`` (repeatable): override a key of the job's config."""
    return click.option(
        "--config",
        "overrides",
        multiple=True,
        metavar="KEY=VALUE",
        help="Override a config key (repeatable).",
    )(func)


def logging_options(func: F) -> F:
    """Add the logging options of a command.

    ``-v/--verbose``, ``--log-file PATH``, ``--log-format text|json`` and ``--log-config
    FILE`` (see :func:`samzapy.cli.logs.setup_logging`).
    """
    func = click.option(
        "--log-config",
        type=click.Path(exists=True, dir_okay=False, path_type=Path),
        help="A Python logging configuration (INI as for logging.config.fileConfig, or dictConfig "
        "as .json) that replaces the console and --log-file set-up.",
    )(func)
    func = click.option(
        "--log-format",
        type=click.Choice(["text", "json"]),
        default="text",
        show_default=True,
        help="json: one JSON object per line (time, level, logger, thread, message, exception), "
        "for log shippers.",
    )(func)
    func = click.option(
        "--log-file",
        type=click.Path(dir_okay=False, path_type=Path),
        help="Also append the log, with tracebacks, to this file.",
    )(func)
    return click.option(
        "-v", "--verbose", is_flag=True, help="Log at DEBUG level and show tracebacks on errors."
    )(func)


def one_config_path(positional: str | None, option: str | None) -> str:
    """The job's config from ``CONFIG`` or ``--config-path`` (exactly one, or both the same).

    Raises:
        click.UsageError: neither or two different ones were given (exit 2).
    """
    if positional and option and positional != option:
        msg = f"two configs given: '{positional}' and --config-path '{option}'; give one"
        raise click.UsageError(msg)
    chosen = positional or option
    if not chosen:
        msg = "give the job's config: CONFIG or --config-path CONFIG"
        raise click.UsageError(msg)
    return chosen


def bootstrap_options(func: F) -> F:
    """Add the options that choose the broker: ``--bootstrap`` or ``--config-path``.

    ``--bootstrap SERVERS`` or ``--config-path PATH`` (also ``--config``: the job's brokers,
    and with ``--stream`` its serdes); neither means the embedded dev broker (see
    :func:`broker_address`).
    """
    func = click.option(
        "--config-path",
        "--config",
        "config_path",
        metavar="PATH",
        help="The job's .properties file: its brokers (and with --stream, its serdes).",
    )(func)
    return click.option(
        "--bootstrap",
        metavar="HOST:PORT",
        help="Broker address ('embedded' for the dev broker, the default without --config-path).",
    )(func)


def broker_address(bootstrap: str | None, config_path: str | None, role: str) -> str:
    """The broker to talk to.

    ``--bootstrap``, else the job's ``systems.kafka.<role>.bootstrap.servers`` from
    ``--config-path``, else ``embedded``; ``embedded`` resolves to the dev broker (started when
    none runs, on ``$SAMZAPY_BROKER_PORT``).

    Raises:
        click.UsageError: both ``--bootstrap`` and ``--config-path`` were given.
    """
    from samzapy.config import load_config
    from samzapy.kafka.broker import resolve_bootstrap_servers

    if bootstrap and config_path:
        msg = "give --bootstrap or --config-path, not both"
        raise click.UsageError(msg)
    value = bootstrap or "embedded"
    if config_path:
        config = load_config(config_path)
        value = config.get(f"systems.kafka.{role}.bootstrap.servers") or config.get(
            "systems.kafka.consumer.bootstrap.servers", "localhost:9092"
        )
    return resolve_bootstrap_servers(value)


def topic_and_codecs(
    topic: str | None,
    stream: str | None,
    config_path: str | None,
    serde: str,
    key_serde: str,
    explicit: set[str],
) -> tuple[str, Any, Any]:
    """The topic and the (key, value) :class:`~samzapy.kafka.topic_io.Codec` of a produce or consume.

    The job's serdes of ``--stream`` (from ``--config``), else ``--key-serde`` and ``--serde``;
    ``explicit`` names the serde options given on the command line.

    Raises:
        click.UsageError: ``--stream`` without ``--config``, with ``--serde``/``--key-serde``,
            or neither TOPIC nor ``--stream``.
    """
    from samzapy.kafka.topic_io import builtin_codec, stream_codecs

    if stream is None:
        if topic is None:
            msg = "give the TOPIC (or --config job.properties --stream S)"
            raise click.UsageError(msg)
        return topic, builtin_codec(key_serde, "--key-serde"), builtin_codec(serde, "--serde")
    if config_path is None:
        msg = "--stream S takes the serdes of the job's stream S: give the job with --config job.properties"
        raise click.UsageError(msg)
    if explicit:
        given = " and ".join(f"--{name.replace('_', '-')}" for name in sorted(explicit))
        msg = f"--stream uses the job's serdes: leave out {given}"
        raise click.UsageError(msg)
    codecs = stream_codecs(config_path, stream)
    return topic or codecs.topic, codecs.key, codecs.value
