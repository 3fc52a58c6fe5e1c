"""``samzapy run --container-id`` out of range is a bad argument: exit 2, before any broker."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from samzapy.cli import main


def test_a_container_id_beyond_the_container_count_exits_2_naming_both(tmp_path: Path) -> None:
    config = tmp_path / "job.properties"
    config.write_text(
        "job.name=j\ntask.class=samzapy.jobs.pageview_filter:PageViewFilterTask\ntask.inputs=kafka.in\n"
        "job.container.count=2\nsystems.kafka.consumer.bootstrap.servers=127.0.0.1:1\n"
        f"job.logged.store.base.dir={tmp_path / 'state'}\n"
    )

    result = CliRunner().invoke(main, ["run", str(config), "--container-id", "2"])

    assert result.exit_code == 2, result.output
    assert "Error: --container-id 2 is out of range: job.container.count is 2" in result.stderr
