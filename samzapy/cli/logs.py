"""Logging of every command line: ``samzapy`` and the two state tools.

One :func:`setup_logging` for all of them. What a person sees on the console (stderr) is one
line per record and never a traceback, unless ``-v`` asks for them; the ``--log-file`` gets
every record with its traceback. A record marked :data:`VERBOSE_ONLY` (the error boundary's
"here is the traceback" record, see :mod:`samzapy.cli.boundary`) reaches the console only
with ``-v``: without it, the ``Error:`` line says all there is to say.
"""

from __future__ import annotations

import json
import logging
import logging.config
import re
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

from samzapy import user_code

FORMAT = "%(asctime)s %(levelname)-7s %(name)s: %(message)s"
#: ``extra={VERBOSE_ONLY: True}`` keeps a record off the console unless ``-v`` was given.
VERBOSE_ONLY = user_code.VERBOSE_ONLY
_OURS = "_samzapy_cli_handler"
#: Seconds during which the Kafka client's repeats of one problem are counted, not logged.
KAFKA_REPEAT_WINDOW_S = 60.0
LOG_FORMATS = ("text", "json")


class _Stderr(logging.StreamHandler[TextIO]):
    """Writes to whatever ``sys.stderr`` is when a record comes (click's test runner swaps it)."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, _value: object) -> None:
        pass


class ConsoleFormatter(logging.Formatter):
    """One line per record: a traceback is left out (and pointed to) unless ``verbose``."""

    def __init__(self, verbose: bool) -> None:
        super().__init__(FORMAT)
        self.verbose = verbose

    def format(self, record: logging.LogRecord) -> str:
        """The record as one line (with its traceback when verbose)."""
        if self.verbose or not (record.exc_info or record.stack_info):
            return super().format(record)
        plain = logging.makeLogRecord(record.__dict__)
        plain.exc_info, plain.exc_text, plain.stack_info = None, None, None
        return super().format(plain) + " (the traceback: run with -v, or see --log-file)"


class JsonFormatter(logging.Formatter):
    """One JSON object per line, for log shippers.

    ``time`` (ISO 8601, UTC), ``level``, ``logger``, ``thread``, ``message``, and ``exception``
    (the traceback) when there is one.
    """

    def format(self, record: logging.LogRecord) -> str:
        """The record as one line of JSON."""
        line = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "thread": record.threadName,
            "message": record.getMessage(),
        }
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            line["exception"] = record.exc_text
        return json.dumps(line, ensure_ascii=False)


class KafkaRepeats(logging.Filter):
    """Keeps the Kafka client's connection noise to one line per problem.

    A record of a ``kafka.*`` logger whose message template was logged in the last ``window_s``
    seconds is counted instead of logged; the first one after the window says how many were left
    out.
    """

    def __init__(self, window_s: float = KAFKA_REPEAT_WINDOW_S) -> None:
        super().__init__()
        self.window_s = window_s
        self._seen: dict[tuple[str, int, str], tuple[float, int]] = {}  # -> (logged at, left out)
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        """Whether ``record`` is logged (it may gain a "repeated" note)."""
        if not record.name.startswith("kafka") or record.levelno < logging.WARNING:
            return True
        # numbers and addresses out of the key: some messages come formatted already (a task's
        # repr and a duration in "blocking the event loop"), each text unique
        key = (record.name, record.levelno, _NUMBERS.sub("#", str(record.msg)))
        now = time.monotonic()
        with self._lock:
            logged_at, left_out = self._seen.get(key, (None, 0))
            if logged_at is not None and now - logged_at < self.window_s:
                self._seen[key] = (logged_at, left_out + 1)
                return False
            self._seen[key] = (now, 0)
        if left_out:
            record.msg = f"{record.msg} (and {left_out} more like it in the last {self.window_s:.0f} s)"
        return True


#: kafka-python records that healthy runs produce, by logger and a piece of the message: a
#: metadata refresh that a client's close cancelled, a read on a connection the close shut, a
#: step of its I/O loop slowed by our own work in the same process. They go to DEBUG. A broker
#: that is really gone is said by samzapy's own retry line (samzapy.kafka.outage, admin),
#: once per attempt with what to do, not by these.
KAFKA_HEALTHY_NOISE: dict[str, tuple[str, ...]] = {
    "kafka.cluster": ("Metadata refresh: failed",),
    "kafka.net.transport": ("Error receiving network data",),
    "kafka.net.selector": ("blocking the event loop",),
}
_NUMBERS = re.compile(r"0x[0-9a-fA-F]+|\d+(?:\.\d+)?")


def _is_healthy_noise(record: logging.LogRecord) -> bool:
    pieces = KAFKA_HEALTHY_NOISE.get(record.name, ())
    text = str(record.msg)
    if not any(piece in text for piece in pieces):
        return False
    if record.name == "kafka.cluster":
        # only the refresh a close cancelled; a refused or timed-out one stays an error
        args = record.args if isinstance(record.args, tuple) else ()
        return any(type(arg).__name__ == "Cancelled" for arg in args)
    return True


class KafkaHealthyNoise(logging.Filter):
    """Moves :data:`KAFKA_HEALTHY_NOISE` to DEBUG (shown with ``-v`` only).

    A filter on the loggers that create those records (a parent logger's filters do not see a
    child's records), so the level is changed before any handler compares it with its own.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        """Always keeps the record; lowers its level when it is healthy-path noise."""
        if record.levelno > logging.DEBUG and _is_healthy_noise(record):
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return True


def install_kafka_noise_filter() -> None:
    """Put :class:`KafkaHealthyNoise` on the loggers it is for (once; idempotent)."""
    for name in KAFKA_HEALTHY_NOISE:
        logger = logging.getLogger(name)
        if not any(isinstance(f, KafkaHealthyNoise) for f in logger.filters):
            logger.addFilter(KafkaHealthyNoise())


def load_log_config(path: Path) -> None:
    """Configure logging from ``path``.

    Python's ``dictConfig`` as JSON (``.json``), else the ``fileConfig`` INI format (what
    ``--log-config`` reads, as Samza reads a log4j file).

    Raises:
        click.BadParameter: the file cannot be read or is not a valid logging configuration.
    """
    import click

    try:
        if path.suffix == ".json":
            logging.config.dictConfig(json.loads(path.read_text()))
        else:
            logging.config.fileConfig(path, disable_existing_loggers=False)
    except (OSError, ValueError, KeyError, TypeError, AttributeError, ImportError) as exc:
        detail = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        msg = f"{path} is not a usable logging configuration ({detail})"
        raise click.BadParameter(msg, param_hint="--log-config") from exc


def setup_logging(
    verbose: bool = False,
    *,
    level: int = logging.INFO,
    log_file: Path | None = None,
    log_format: str = "text",
    log_config: Path | None = None,
) -> None:
    """Configure logging for a command; calling it again replaces what it set up before.

    Args:
        verbose: ``-v``: the console shows DEBUG records and tracebacks.
        level: the console's level without ``-v`` (``samzapy``: INFO; the tools, which print
            their own progress: WARNING). kafka-python logs one level quieter (INFO with ``-v``).
        log_file: also append every record from INFO (DEBUG with ``-v``) to this file, with
            tracebacks.
        log_format: ``text`` (one line per record) or ``json`` (one JSON object per line, on
            the console and in the log file).
        log_config: a Python logging configuration file (see :func:`load_log_config`) that
            replaces the console and file set-up; the Kafka repeat filter goes on its handlers.

    When something else already put handlers on the root logger (pytest, an application
    embedding the CLI), the console is left to it.
    """
    root = logging.getLogger()
    for handler in [h for h in root.handlers if getattr(h, _OURS, False)]:
        root.removeHandler(handler)
        handler.close()
    repeats = KafkaRepeats()
    install_kafka_noise_filter()
    if log_config is not None:
        load_log_config(log_config)
        for handler in root.handlers:
            handler.addFilter(repeats)
        return
    handlers: list[logging.Handler] = []
    if not root.handlers:
        console = _Stderr()
        console.setLevel(logging.DEBUG if verbose else level)
        console.setFormatter(JsonFormatter() if log_format == "json" else ConsoleFormatter(verbose))
        # JSON goes to a log shipper: the failure's record (with its traceback) is its only trace
        shown = verbose or log_format == "json"
        console.addFilter(lambda record: shown or not getattr(record, VERBOSE_ONLY, False))
        handlers.append(console)
    if log_file is not None:
        log_file.parent.mkdir(parents=True, exist_ok=True)
        file = logging.FileHandler(log_file, encoding="utf-8")
        file.setLevel(logging.DEBUG if verbose else logging.INFO)
        file.setFormatter(JsonFormatter() if log_format == "json" else logging.Formatter(FORMAT))
        handlers.append(file)
    for handler in handlers:
        handler.addFilter(repeats)
        setattr(handler, _OURS, True)
        root.addHandler(handler)
    if handlers:
        root.setLevel(min(h.level for h in handlers))
    logging.getLogger("kafka").setLevel(logging.INFO if verbose else max(logging.WARNING, level + 10))


def is_verbose() -> bool:
    """Whether the console shows tracebacks (``-v``), as :func:`setup_logging` last set it."""
    for handler in logging.getLogger().handlers:
        if getattr(handler, _OURS, False) and isinstance(handler.formatter, ConsoleFormatter):
            return handler.formatter.verbose
    return False
