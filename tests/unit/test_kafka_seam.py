"""The Kafka seam: only samzapy/kafka/ (and samzapy/coordinator/, which speaks the group
protocol) import kafka-python; the library's other rooms use samzapy.records and samzapy.kafka.

ruff's banned-api (pyproject.toml) says the same at lint time; this scan also runs with the
tests, and sees imports inside functions as well as at the top of a module.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: The library's folders (tests/ and benchmarks/ are not the library: they may use kafka-python).
LIBRARY = ("samzapy", "stores", "tools", "jobs")
#: The folders that may import kafka-python.
ALLOWED = ("samzapy/kafka", "samzapy/coordinator")


def kafka_imports(source: str) -> list[int]:
    """The line numbers of every import of kafka-python (``kafka`` or ``kafka.*``) in ``source``."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names = [node.module or ""]
        else:
            continue
        if any(name == "kafka" or name.startswith("kafka.") for name in names):
            lines.append(node.lineno)
    return lines


def seam_violations(root: Path) -> list[str]:
    """``path:line`` of every kafka-python import in the library under ``root`` outside
    :data:`ALLOWED`."""
    found = []
    for folder in LIBRARY:
        for path in sorted((root / folder).rglob("*.py")):
            relative = path.relative_to(root).as_posix()
            if relative.startswith(tuple(f"{allowed}/" for allowed in ALLOWED)):
                continue
            found += [f"{relative}:{line}" for line in kafka_imports(path.read_text())]
    return found


def test_only_the_kafka_and_coordinator_packages_import_kafka_python() -> None:
    assert seam_violations(ROOT) == []


def test_the_scan_finds_an_import_planted_outside_the_kafka_package(tmp_path: Path) -> None:
    (tmp_path / "samzapy" / "kafka").mkdir(parents=True)
    (tmp_path / "samzapy" / "coordinator").mkdir()
    (tmp_path / "stores").mkdir()
    (tmp_path / "tools").mkdir()
    (tmp_path / "samzapy" / "kafka" / "client.py").write_text("from kafka import KafkaConsumer\n")
    (tmp_path / "samzapy" / "coordinator" / "group.py").write_text("import kafka.errors\n")
    (tmp_path / "samzapy" / "kafka_like.py").write_text(
        "import kafka_like\nfrom samzapy.kafka import consumer\n"
    )
    (tmp_path / "stores" / "leak.py").write_text(
        '"""A store."""\n\nfrom kafka.structs import TopicPartition\n'
    )
    (tmp_path / "tools" / "late.py").write_text("def f():\n    import kafka\n    return kafka\n")
    assert seam_violations(tmp_path) == ["stores/leak.py:3", "tools/late.py:2"]


def test_kafka_python_internals_are_read_in_the_kafka_package_alone() -> None:
    # kafka-python's private client state (its fetcher, group coordinator, record accumulator,
    # subscription) is read by samzapy.kafka's fast paths and group_state only.
    internals = re.compile(r"\._(fetcher|coordinator|accumulator|subscription|generation)\b")
    found = [
        f"{path.relative_to(ROOT)}: {match.group()}"
        for folder in LIBRARY
        for path in (ROOT / folder).rglob("*.py")
        if not path.relative_to(ROOT).as_posix().startswith("samzapy/kafka/")
        for match in internals.finditer(path.read_text())
    ]
    assert found == []
