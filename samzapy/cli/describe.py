"""``samzapy describe``: print a pipeline's plan without running it (nothing connects)."""

from __future__ import annotations

import click

from samzapy.cli.boundary import Command
from samzapy.cli.options import config_path_option, overrides_option


@click.command(cls=Command)
@click.argument("app")
@config_path_option(required=False)
@overrides_option
@click.option(
    "--properties",
    "as_properties",
    is_flag=True,
    help="Print only the job configuration, as a .properties file (for the state tools' --config-path).",
)
def describe(app: str, config_path: str | None, overrides: tuple[str, ...], as_properties: bool) -> None:
    """Print the plan of the pipeline APP (app.py or package.module:app).

    Its stages, the topics it reads, writes and creates, its stores, and the equivalent job
    configuration, checked as a run checks it (a bad key or stage exits 2 naming its line).
    """
    from samzapy.config import parse_job_config
    from samzapy.pipeline.describe import describe as render
    from samzapy.pipeline.describe import properties_text
    from samzapy.pipeline.loader import load_app, pipeline_config

    config = pipeline_config(app, overrides, config_path)
    parse_job_config(config, check_task_class=True)
    if as_properties:
        click.echo(properties_text(list(config.entries())), nl=False)
        return
    click.echo(render(load_app(app).plan(), list(config.entries())), nl=False)
