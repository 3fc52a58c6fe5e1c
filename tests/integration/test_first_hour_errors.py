"""The errors a new user meets first, through the real command line and dev broker (issue 16).

Each test checks the exact ``Error:`` line and the exit code.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from support import create_topic, job_env, produce

pytestmark = pytest.mark.integration

README_TASK = """
from samzapy import StreamTask, InitableTask

class MyStatefulTask(StreamTask, InitableTask):
    def init(self, context):
        self.store = context.get_store("my-store")

    def process(self, envelope, collector, coordinator):
        self.store.put(envelope.key, envelope.message)
"""


def _samzapy(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "samzapy", *args],
        cwd=cwd,
        env=job_env(),
        capture_output=True,
        text=True,
        timeout=180,
    )


def _errors(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("Error:")]


def test_a_value_that_does_not_fit_the_store_names_store_key_serde_config_key_and_the_users_line(
    tmp_path: Path, broker: str, topic_name: str
) -> None:
    """The README's task as it once was: no serde for the input, so the message is bytes."""
    create_topic(broker, topic_name, 1)
    produce(broker, topic_name, [(b"ann", b'{"page": "/a"}')], partition=0)
    (tmp_path / "mymodule.py").write_text(README_TASK)
    (tmp_path / "my-job.properties").write_text(
        "job.name=my-job\n"
        "task.class=mymodule:MyStatefulTask\n"
        f"task.inputs=kafka.{topic_name}\n"
        f"systems.kafka.consumer.bootstrap.servers={broker}\n"
        "systems.kafka.samza.key.serde=string\n"
        "systems.kafka.samza.offset.default=oldest\n"
        "stores.my-store.factory=org.apache.samza.storage.kv.RocksDbKeyValueStorageEngineFactory\n"
        "stores.my-store.changelog=kafka.my-store-changelog\n"
        "serializers.registry.string.class=org.apache.samza.serializers.StringSerdeFactory\n"
        "stores.my-store.key.serde=string\n"
        "stores.my-store.msg.serde=string\n"
    )

    result = _samzapy(tmp_path, "run", "my-job.properties", "--exit-at-end")

    assert result.returncode == 1
    assert _errors(result.stderr) == [
        f"Error: task Partition 0: process() raised for the message at stream 'kafka.{topic_name}' "
        "partition 0 offset 0: StoreSerdeError: store 'my-store' cannot take the value "
        "b'{\"page\": \"/a\"}' (bytes) of key 'ann': StringSerde expects a str, got bytes "
        'b\'{"page": "/a"}\'. The store\'s value serde is set by stores.my-store.msg.serde: put a value '
        "it takes, or set a serde that fits there (at mymodule.py:9 in process); the job stopped after "
        "committing every message before it. Fix the task, or the store's serde setting the message names "
        "(run with -v for the traceback): the input message is fine, and skipping it would only lose its "
        "update"
    ]
    assert len(result.stderr.splitlines()) < 20  # not 187 lines of logs and tracebacks


def test_sigterm_while_start_up_retries_an_absent_broker_stops_it_with_one_line_per_attempt(
    tmp_path: Path,
) -> None:
    import signal
    import time

    from samzapy.kafka.broker import free_port

    address = f"127.0.0.1:{free_port()}"  # nothing listens there
    (tmp_path / "job.properties").write_text(
        "job.name=j\ntask.class=samzapy.task:StreamTask\ntask.inputs=kafka.in\n"
        f"systems.kafka.consumer.bootstrap.servers={address}\n"
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "samzapy", "run", "job.properties"],
        cwd=tmp_path,
        env=job_env(),
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None
    first = process.stderr.readline()  # the first attempt's line: the retries have begun
    process.send_signal(signal.SIGTERM)
    sent = time.monotonic()
    rest = process.stderr.read()
    process.wait(timeout=30)
    lines = [first, *rest.splitlines()]

    assert process.returncode == 1
    assert time.monotonic() - sent < 8  # within one connection attempt, not the 60 s deadline
    assert "unreachable while trying to connect (attempt 1: " in first
    assert all(
        "unreachable while trying to connect (attempt " in line or "SIGTERM received" in line
        for line in lines[:-1]
    ), lines  # one line per attempt, none of kafka-python's
    assert len(lines) <= 4
    assert lines[-1].startswith(f"Error: stopped while waiting for the Kafka broker at {address} to connect ")
    assert lines[-1].endswith("attempts): SIGTERM received") or lines[-1].endswith(
        "attempt): SIGTERM received"
    )


def test_a_missing_input_topic_suggests_the_topic_tools(tmp_path: Path, broker: str, topic_name: str) -> None:
    (tmp_path / "job.properties").write_text(
        "job.name=j\ntask.class=runtime_tasks:IgnoresEverything\n"
        f"task.inputs=kafka.{topic_name}\nsystems.kafka.consumer.bootstrap.servers={broker}\n"
    )
    result = _samzapy(tmp_path, "run", "job.properties", "--exit-at-end")
    assert result.returncode == 1
    assert _errors(result.stderr) == [
        f"Error: input stream 'kafka.{topic_name}' does not exist on the broker; create it and feed it "
        f"before starting the job, e.g. samzapy produce {topic_name} --partitions N --file records.jsonl "
        f"(see the records with: samzapy consume {topic_name} --from-beginning)"
    ]


def test_a_message_that_does_not_deserialise_names_its_place_and_the_two_ways_on(
    tmp_path: Path, broker: str, topic_name: str
) -> None:
    create_topic(broker, topic_name, 1)
    produce(broker, topic_name, [(b"k", b'{"ok": 1}'), (b"k", b"not json")], partition=0)
    (tmp_path / "job.properties").write_text(
        "job.name=j\ntask.class=runtime_tasks:IgnoresEverything\n"
        f"task.inputs=kafka.{topic_name}\nsystems.kafka.consumer.bootstrap.servers={broker}\n"
        "systems.kafka.samza.msg.serde=json\nsystems.kafka.samza.offset.default=oldest\n"
    )
    result = _samzapy(tmp_path, "run", "job.properties", "--exit-at-end")
    assert result.returncode == 1
    assert _errors(result.stderr) == [
        f"Error: task Partition 0: could not deserialise for the message at stream 'kafka.{topic_name}' "
        "partition 0 offset 1: SerdeError: JsonSerde expects JSON, got b'not json': invalid literal, "
        "expected 'null': line 1 column 1 (char 0); the job stopped after committing every message "
        "before it. Fix the producer or the stream's serde, or go on past such messages: "
        "task.drop.deserialization.errors=true skips them, task.dead.letter.stream=kafka.<stream> keeps "
        "them aside"
    ]
