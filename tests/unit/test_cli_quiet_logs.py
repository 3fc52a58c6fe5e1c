"""A healthy run's console is quiet: kafka-python's healthy-path noise goes to DEBUG, a real
connection failure stays loud (issue 31 item 2, issue 28 item 4)."""

from __future__ import annotations

import logging
from contextlib import contextmanager

from samzapy.cli.logs import KafkaRepeats, setup_logging


class Cancelled(Exception):
    """Stands for kafka.errors.Cancelled (matched by name: samzapy.cli may not import kafka)."""


class KafkaConnectionError(Exception):
    """Stands for kafka.errors.KafkaConnectionError."""


@contextmanager
def console(capsys, verbose: bool = False):
    root = logging.getLogger()
    saved = root.handlers[:], root.level, logging.getLogger("kafka").level
    root.handlers = []
    try:
        setup_logging(verbose)
        yield
    finally:
        setup_logging()
        root.handlers, root.level = saved[0], saved[1]
        logging.getLogger("kafka").setLevel(saved[2])


def _healthy_noise() -> None:
    logging.getLogger("kafka.cluster").error("Metadata refresh: failed %s", Cancelled())
    try:
        raise ConnectionResetError(104, "Connection reset by peer")
    except ConnectionResetError:
        logging.getLogger("kafka.net.transport").exception(
            "%s: Error receiving network data closing socket", "<conn node=1>"
        )
    for took in (0.612, 0.734):
        logging.getLogger("kafka.net.selector").warning(
            f"Task <Task 0x7f{int(took * 1000)}> ran for {took:.3f}s (>0.500s threshold). It is blocking "
            "the event loop -- likely a tight sync loop inside a coroutine."
        )


def test_kafka_pythons_healthy_path_noise_does_not_reach_the_console(capsys) -> None:
    with console(capsys):
        _healthy_noise()
    assert capsys.readouterr().err == ""


def test_with_v_the_noise_shows_at_debug(capsys) -> None:
    with console(capsys, verbose=True):
        _healthy_noise()
    lines = capsys.readouterr().err.splitlines()
    assert any("DEBUG   kafka.cluster: Metadata refresh: failed" in line for line in lines)
    assert any("DEBUG   kafka.net.selector: Task <Task" in line for line in lines)
    assert not any(" ERROR " in line or " WARNING " in line for line in lines)


def test_a_refresh_that_really_failed_stays_an_error(capsys) -> None:
    with console(capsys):
        logging.getLogger("kafka.cluster").error(
            "Metadata refresh: failed %s", KafkaConnectionError("refused")
        )
    assert "ERROR   kafka.cluster: Metadata refresh: failed refused" in capsys.readouterr().err


def test_preformatted_kafka_warnings_that_differ_only_in_numbers_are_one_problem() -> None:
    repeats = KafkaRepeats(window_s=60)

    def record(text: str) -> logging.LogRecord:
        return logging.LogRecord("kafka.conn", logging.WARNING, __file__, 1, text, None, None)

    passed = [repeats.filter(record(f"<Conn 0x7f{n:04x}> slow for {n / 7:.3f}s")) for n in range(20)]
    assert passed == [True] + [False] * 19
