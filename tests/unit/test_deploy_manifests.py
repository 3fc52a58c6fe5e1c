"""The deployment recipes in deploy/ are wired together: ports, paths, ids and group names agree.

The Kubernetes manifests are read with PyYAML, the ConfigMaps' job properties with samzapy's
own loader, the systemd unit with configparser; docs/deployment.md's YAML examples parse.
"""

from __future__ import annotations

import configparser
import os
import re
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from samzapy.config import Config, load_config, parse_job_config
from samzapy.config.keys import find_spec, is_reserved
from samzapy.config.model import ReporterSpec
from samzapy.config.types import COORDINATOR_FACTORY_ALIASES
from samzapy.streams import SystemStream

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "k8s"
STATIC = K8S / "statefulset.yaml"
GROUP = K8S / "statefulset-group.yaml"
KEDA = K8S / "keda-scaledobject.yaml"
UNIT = ROOT / "deploy" / "systemd" / "samzapy@.service"
DOC = ROOT / "docs" / "deployment.md"
EXAMPLE = ROOT / "config" / "pageview-counter.properties"
REPARTITION = ROOT / "config" / "pageview-repartition.properties"

STORE_DIR = "/var/lib/samzapy/state"
PORT = 9400
TOKEN_FILE = "/var/run/secrets/samzapy/token"
GROUP_ID = "samzapy-pageview-counter-1"
BOOTSTRAP = "kafka-bootstrap.kafka.svc.cluster.local:9092"
#: The keys each deployed ConfigMap adds to, or changes in, config/pageview-counter.properties.
DEPLOYED_KEYS = {
    "job.logged.store.base.dir": STORE_DIR,
    "systems.kafka.consumer.bootstrap.servers": BOOTSTRAP,
    "systems.kafka.producer.bootstrap.servers": BOOTSTRAP,
    "metrics.reporters": "prometheus",
    "metrics.reporter.prometheus.class": "prometheus",
    "metrics.reporter.prometheus.host": "0.0.0.0",
    "metrics.reporter.prometheus.port": str(PORT),
    "job.http.auth.token.file": TOKEN_FILE,
}
STATIC_KEYS = {"job.container.count": "2"}
GROUP_KEYS = {
    "job.coordinator.factory": "samzapy.coordinator.KafkaGroupCoordinatorFactory",
    "job.coordinator.group.id": GROUP_ID,
    "job.coordinator.session.timeout.ms": "30000",
}
MANIFESTS = [STATIC, GROUP]


def _objects(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as file:
        return [doc for doc in yaml.safe_load_all(file) if doc is not None]


def _one(path: Path, kind: str) -> dict[str, Any]:
    found = [obj for obj in _objects(path) if obj["kind"] == kind]
    assert len(found) == 1, f"{path.name}: {len(found)} {kind} objects"
    return found[0]


def _config(path: Path, tmp_path: Path) -> Config:
    """The job properties of ``path``'s ConfigMap, read by samzapy's loader from a file."""
    properties = tmp_path / "job.properties"
    properties.write_text(_one(path, "ConfigMap")["data"]["job.properties"], encoding="utf-8")
    return load_config(properties, ())


def _pod(path: Path) -> dict[str, Any]:
    return _one(path, "StatefulSet")["spec"]["template"]["spec"]


def _container(path: Path) -> dict[str, Any]:
    containers = _pod(path)["containers"]
    assert [c["name"] for c in containers] == ["samzapy"]
    return containers[0]


def _mounts(path: Path) -> dict[str, str]:
    return {mount["name"]: mount["mountPath"] for mount in _container(path)["volumeMounts"]}


def test_each_manifest_holds_the_expected_objects() -> None:
    assert [obj["kind"] for obj in _objects(STATIC)] == ["ConfigMap", "Service", "StatefulSet"]
    assert [obj["kind"] for obj in _objects(GROUP)] == ["ConfigMap", "Service", "StatefulSet"]
    assert [(obj["apiVersion"], obj["kind"]) for obj in _objects(KEDA)] == [
        ("keda.sh/v1alpha1", "ScaledObject")
    ]


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.name)
def test_every_samzapy_key_in_the_configmap_is_known(path: Path, tmp_path: Path) -> None:
    config = _config(path, tmp_path)
    unknown = [key for key in config if is_reserved(key) and find_spec(key) is None]
    assert unknown == []


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.name)
def test_the_configmap_parses_with_its_task_class(path: Path, tmp_path: Path) -> None:
    # The token file must be readable when the job starts: a stand-in for the mounted Secret.
    token = tmp_path / "token"
    token.write_text("s3cret\n", encoding="utf-8")
    config = _config(path, tmp_path).with_overrides({"job.http.auth.token.file": str(token)})
    job = parse_job_config(config, check_task_class=True)
    assert job.http_auth_token_file == token
    assert job.job_name == "pageview-counter"
    assert job.inputs == (SystemStream("kafka", "pageviews-by-user"),)
    assert job.logged_store_base_dir == Path(STORE_DIR)
    assert job.consumer_bootstrap_servers == BOOTSTRAP
    assert job.reporters == (ReporterSpec(name="prometheus", kind="prometheus", host="0.0.0.0", port=PORT),)
    if path == STATIC:
        assert (job.coordinator, job.container_count) == ("passthrough", 2)
    else:
        # parse_job_config checked what group mode refuses (it raises ConfigError otherwise)
        assert (job.coordinator, job.group_id, job.session_timeout_ms) == ("group", GROUP_ID, 30_000)


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.name)
def test_the_configmap_is_the_example_job_with_the_deployment_keys(path: Path, tmp_path: Path) -> None:
    deployed = dict(_config(path, tmp_path))
    example = dict(load_config(EXAMPLE, ()))
    extra = STATIC_KEYS if path == STATIC else GROUP_KEYS
    assert deployed == {**example, **DEPLOYED_KEYS, **extra}


def test_static_replicas_equal_the_container_count(tmp_path: Path) -> None:
    config = _config(STATIC, tmp_path)
    assert _one(STATIC, "StatefulSet")["spec"]["replicas"] == int(config["job.container.count"]) == 2


def test_group_configmap_sets_no_container_count(tmp_path: Path) -> None:
    config = _config(GROUP, tmp_path)
    assert "job.container.count" not in config
    assert COORDINATOR_FACTORY_ALIASES[config["job.coordinator.factory"]] == "group"


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.name)
def test_the_objects_refer_to_each_other(path: Path) -> None:
    config_map, service, stateful_set = (_one(path, kind) for kind in ("ConfigMap", "Service", "StatefulSet"))
    name = stateful_set["metadata"]["name"]
    labels = {"app.kubernetes.io/name": name}
    assert config_map["metadata"]["name"] == service["metadata"]["name"] == name
    assert stateful_set["spec"]["serviceName"] == name
    assert stateful_set["spec"]["selector"] == {"matchLabels": labels}
    assert labels.items() <= stateful_set["spec"]["template"]["metadata"]["labels"].items()
    assert service["spec"]["selector"] == labels
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["publishNotReadyAddresses"] is True
    assert service["spec"]["ports"] == [{"name": "http", "port": PORT, "targetPort": "http"}]
    volumes = {volume["name"]: volume for volume in _pod(path)["volumes"]}
    assert volumes["config"]["configMap"] == {"name": name}
    assert volumes["http-token"]["secret"]["secretName"] == f"{name}-http-token"
    assert list(config_map["data"]) == ["job.properties"]


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.name)
def test_the_container_port_and_scrape_port_are_the_metrics_port(path: Path, tmp_path: Path) -> None:
    config = _config(path, tmp_path)
    (reporter,) = config["metrics.reporters"].split(",")
    port = int(config[f"metrics.reporter.{reporter}.port"])
    assert port == PORT
    assert config[f"metrics.reporter.{reporter}.host"] == "0.0.0.0"
    assert _container(path)["ports"] == [{"name": "http", "containerPort": port}]
    annotations = _one(path, "StatefulSet")["spec"]["template"]["metadata"]["annotations"]
    assert annotations == {
        "prometheus.io/scrape": "true",
        "prometheus.io/port": str(port),
        "prometheus.io/path": "/metrics",
    }


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.name)
def test_the_probes_ask_health_on_the_metrics_port(path: Path, tmp_path: Path) -> None:
    port = int(_config(path, tmp_path)["metrics.reporter.prometheus.port"])
    container = _container(path)
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"] == {"path": "/health", "port": port}, probe
    # The startup probe waits out a restore of up to an hour before liveness counts.
    startup = container["startupProbe"]
    assert (startup["periodSeconds"], startup["failureThreshold"]) == (10, 360)
    liveness = container["livenessProbe"]
    assert (liveness["periodSeconds"], liveness["failureThreshold"], liveness["timeoutSeconds"]) == (
        10,
        12,
        5,
    )


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.name)
def test_the_persistent_volume_is_mounted_at_the_store_dir(path: Path, tmp_path: Path) -> None:
    config = _config(path, tmp_path)
    assert _mounts(path)["state"] == config["job.logged.store.base.dir"] == STORE_DIR
    (claim,) = _one(path, "StatefulSet")["spec"]["volumeClaimTemplates"]
    assert claim["metadata"]["name"] == "state"
    assert claim["spec"]["accessModes"] == ["ReadWriteOnce"]


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.name)
def test_the_token_file_is_in_the_secret_mount(path: Path, tmp_path: Path) -> None:
    token_file = Path(_config(path, tmp_path)["job.http.auth.token.file"])
    assert token_file == Path(TOKEN_FILE)
    assert Path(_mounts(path)["http-token"]) == token_file.parent
    assert Path(_mounts(path)["config"]) == Path("/etc/samzapy")


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.name)
def test_shutdown_has_time_for_the_final_commit(path: Path) -> None:
    assert _pod(path)["terminationGracePeriodSeconds"] == 60
    assert _one(path, "StatefulSet")["spec"]["podManagementPolicy"] == "Parallel"


@pytest.mark.parametrize(
    ("path", "hostname", "expected"),
    [
        (STATIC, "pageview-counter-1", ["--container-id", "1"]),
        (GROUP, "pageview-counter-group-3", ["--instance-id", "pageview-counter-group-3"]),
    ],
    ids=["static", "group"],
)
def test_the_command_passes_the_pod_name(
    path: Path, hostname: str, expected: list[str], tmp_path: Path
) -> None:
    """The container's command, run by /bin/sh with a stand-in samzapy that prints its arguments."""
    stand_in = tmp_path / "samzapy"
    stand_in.write_text('#!/bin/sh\nfor a in "$@"; do printf "%s\\n" "$a"; done\n', encoding="utf-8")
    stand_in.chmod(0o755)
    env = {"PATH": f"{tmp_path}{os.pathsep}/usr/bin{os.pathsep}/bin", "HOSTNAME": hostname}
    command = _container(path)["command"]
    assert command[:2] == ["/bin/sh", "-c"]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=30, check=True)
    assert result.stdout.splitlines() == ["run", "/etc/samzapy/job.properties", *expected]


def test_keda_scales_the_group_statefulset_on_its_consumer_group(tmp_path: Path) -> None:
    config = _config(GROUP, tmp_path)
    spec = _one(KEDA, "ScaledObject")["spec"]
    assert spec["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "name": _one(GROUP, "StatefulSet")["metadata"]["name"],
    }
    assert spec["scaleTargetRef"]["name"] == "pageview-counter-group"
    (trigger,) = spec["triggers"]
    assert trigger["type"] == "kafka"
    metadata = trigger["metadata"]
    assert metadata["consumerGroup"] == config["job.coordinator.group.id"] == GROUP_ID
    assert metadata["topic"] == SystemStream.parse(config["task.inputs"]).stream == "pageviews-by-user"
    assert metadata["bootstrapServers"] == config["systems.kafka.consumer.bootstrap.servers"]
    assert metadata["lagThreshold"] == "5000"
    assert metadata["offsetResetPolicy"] == "earliest"


def test_keda_max_replicas_is_the_input_partition_count() -> None:
    partitions = int(load_config(REPARTITION, ())["systems.kafka.streams.pageviews-by-user.partitions"])
    spec = _one(KEDA, "ScaledObject")["spec"]
    assert (spec["minReplicaCount"], spec["maxReplicaCount"]) == (1, partitions) == (1, 4)


def _unit() -> configparser.ConfigParser:
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # systemd keys are case-sensitive
    parser.read(UNIT, encoding="utf-8")
    return parser


def test_the_systemd_unit_runs_the_instance_as_container_id() -> None:
    service = _unit()["Service"]
    argv = shlex.split(service["ExecStart"])
    assert argv == [
        "/opt/samzapy/venv/bin/samzapy",
        "run",
        "/etc/samzapy/job.properties",
        "--container-id",
        "%i",
        "$SAMZAPY_OPTS",
    ]
    assert {
        key: service[key] for key in ("Restart", "RestartPreventExitStatus", "KillSignal", "TimeoutStopSec")
    } == {
        "Restart": "on-failure",
        "RestartPreventExitStatus": "2",
        "KillSignal": "SIGTERM",
        "TimeoutStopSec": "60",
    }


def test_the_systemd_unit_keeps_its_stores_in_its_state_directory() -> None:
    unit = _unit()
    service = unit["Service"]
    assert (service["User"], service["Group"]) == ("samzapy", "samzapy")
    assert service["StateDirectory"] == "samzapy/%i"
    assert service["WorkingDirectory"] == "/var/lib/samzapy/%i"
    assert service["EnvironmentFile"] == "-/etc/samzapy/container-%i.env"
    assert unit["Install"]["WantedBy"] == "multi-user.target"


def test_every_yaml_block_of_the_deployment_doc_parses() -> None:
    text = DOC.read_text(encoding="utf-8")
    blocks = re.findall(r"^```yaml\n(.*?)^```$", text, flags=re.MULTILINE | re.DOTALL)
    assert len(blocks) == 4
    for block in blocks:
        assert [doc for doc in yaml.safe_load_all(block) if doc is not None], block
