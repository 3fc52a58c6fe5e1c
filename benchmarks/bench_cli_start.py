"""CLI start-up benchmark: CPU seconds of a command that does (almost) nothing but start.

Three commands a person types often, each run ``--repeats`` times in a fresh process, median
CPU (user + system, from ``wait4``) reported next to a bare ``python -c pass`` (the
interpreter's own start, the raw limit): ``samzapy --help``, ``samzapy run`` of a config with
an error (exits 2 before any broker connection), and ``samzapy consume T --max 1`` of one
record on a dev broker (includes connecting and fetching; issue 31 item 5 aims at 0.3 s for
each). What a command imports is what it costs: ``python -X importtime -m samzapy ...`` shows it.

Usage: ``python -m benchmarks.bench_cli_start [--size tiny|small|full] [--repeats N]``.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks._common import Result, arguments


def cpu_s(command: list[str], env: dict[str, str], cwd: Path) -> float:
    """CPU seconds (user + system) of one run of ``command``."""
    child = subprocess.Popen(command, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, _, usage = os.wait4(child.pid, 0)
    child.returncode = 0  # reaped here: keep Popen from waiting again
    return usage.ru_utime + usage.ru_stime


def median_cpu_s(command: list[str], repeats: int, env: dict[str, str], cwd: Path) -> float:
    """The median of ``repeats`` runs (the first, with cold caches, included)."""
    return statistics.median(cpu_s(command, env, cwd) for _ in range(repeats))


def main() -> None:
    args = arguments(__doc__, repeats=(3, 5, 10))
    result = Result("cli_start")
    samzapy = [sys.executable, "-m", "samzapy"]
    with tempfile.TemporaryDirectory(prefix="bench-cli-") as scratch:
        work = Path(scratch)
        env = {**os.environ, "SAMZAPY_HOME": str(work / "home")}
        bare = median_cpu_s([sys.executable, "-c", "pass"], args.repeats, env, work)
        (work / "bad.properties").write_text("job.name=bad\ntask.comit.ms=5\n")
        commands = {
            "samzapy --help": [*samzapy, "--help"],
            "samzapy run (config error)": [*samzapy, "run", "bad.properties"],
        }
        from samzapy.kafka import broker as dev_broker

        info = dev_broker.start(port=dev_broker.free_port(), state_dir=work / "broker")
        try:
            servers = info.bootstrap_servers
            subprocess.run(
                [*samzapy, "produce", "one", "--bootstrap", servers, "--partitions", "1"],
                input='{"a": 1}\n',
                text=True,
                env=env,
                cwd=work,
                check=True,
                capture_output=True,
            )
            commands["samzapy consume --max 1"] = [
                *samzapy, "consume", "one", "--bootstrap", servers, "--from-beginning", "--max", "1",
            ]  # fmt: skip
            for what, command in commands.items():
                seconds = median_cpu_s(command, args.repeats, env, work)
                result.add(f"{what}: CPU", seconds * 1000, "ms", limit=("python -c pass", bare * 1000))
        finally:
            dev_broker.stop(work / "broker")
    result.note(f"median of {args.repeats} runs each; python -c pass: {bare * 1000:.0f} ms of CPU")
    result.write(args.result)


if __name__ == "__main__":
    main()
