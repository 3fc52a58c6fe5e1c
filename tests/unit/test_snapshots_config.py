"""The snapshot keys: Samza's factory names and aliases, the job-wide defaults, and one error
per problem with its file and line, before anything connects."""

from __future__ import annotations

from pathlib import Path

import pytest

from samzapy.config import load_config, parse_job_config
from samzapy.errors import ConfigError

BASE = "job.name=j\ntask.class=samzapy.task:StreamTask\ntask.inputs=kafka.in\n"
STORE = "stores.s.factory=rocksdb\nstores.s.changelog=kafka.s-log\n"


def parse(tmp_path: Path, text: str):
    path = tmp_path / "job.properties"
    path.write_text(BASE + text)
    return parse_job_config(load_config(str(path))), path


def test_samza_class_names_and_the_job_wide_default_apply_to_each_store(tmp_path: Path) -> None:
    job, _ = parse(
        tmp_path,
        STORE
        + "stores.t.factory=rocksdb\nstores.t.changelog=kafka.t-log\nstores.t.backup.factories=kafka\n"
        + "stores.backup.factories=org.apache.samza.storage.KafkaChangelogStateBackendFactory,"
        + "org.apache.samza.storage.blobstore.BlobStoreStateBackendFactory\n"
        + "blob.store.uri=s3://bucket-1/prefix\nblob.store.s3.endpoint=http://minio:9000\n"
        + "blob.store.retention.snapshots=5\n",
    )
    assert job.stores["s"].backup_factories == ("kafka", "blobstore")
    assert job.stores["s"].backs_up_snapshots and job.stores["s"].restores_from_snapshots
    assert job.stores["t"].backup_factories == ("kafka",) and not job.stores["t"].restores_from_snapshots
    assert (job.blob_store_uri, job.blob_store_s3_endpoint, job.snapshot_retention) == (
        "s3://bucket-1/prefix",
        "http://minio:9000",
        5,
    )


def test_restore_factories_alone_choose_where_a_restore_may_start(tmp_path: Path) -> None:
    job, _ = parse(
        tmp_path,
        STORE + "stores.s.backup.factories=kafka,blobstore\nstores.s.restore.factories=kafka\n"
        "blob.store.uri=file:///snapshots\n",
    )
    assert job.stores["s"].backs_up_snapshots and not job.stores["s"].restores_from_snapshots


def test_every_blobstore_problem_is_reported_with_its_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        parse(
            tmp_path,
            "stores.m.factory=inmemory\n"  # line 4
            "stores.m.backup.factories=blobstore\n"  # line 5
            "stores.n.factory=rocksdb\n"
            "stores.n.restore.factories=blobstore,nfs\n"  # line 7: not a backend
            "blob.store.uri=http://x\n",  # line 8: not file:// or s3://
        )
    text = str(caught.value)
    path = tmp_path / "job.properties"
    assert f"'stores.m.backup.factories' ({path}:5) but is not a RocksDB store" in text
    assert f"'stores.m.backup.factories' ({path}:5) but has no changelog" in text
    assert f"Invalid value 'blobstore,nfs' for 'stores.n.restore.factories' ({path}:7)" in text
    assert f"Invalid value 'http://x' for 'blob.store.uri' ({path}:8): must be file:///absolute/path" in text


def test_a_blobstore_without_a_uri_is_refused_naming_the_job_wide_key(tmp_path: Path) -> None:
    with pytest.raises(
        ConfigError, match=r"'stores.backup.factories' \(.*:6\) but 'blob.store.uri' is not set"
    ):
        parse(tmp_path, STORE + "stores.backup.factories=blobstore\n")


def test_a_misspelt_blob_store_key_is_caught(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="did you mean 'blob.store.uri'"):
        parse(tmp_path, STORE + "blob.store.url=file:///x\n")


def test_credentials_in_the_job_file_are_refused_with_where_they_belong(tmp_path: Path) -> None:
    with pytest.raises(
        ConfigError, match=r"blob.store.s3.secret.access.key' \(.*:4\): blob store credentials are never"
    ):
        parse(tmp_path, "blob.store.s3.secret.access.key=abc\n")
