"""The stores of a job (``stores.<store>.*``): their rules across keys, and their StoreConfigs.

Single values are checked by their catalogue types (:mod:`samzapy.config.keys`); this module
checks what spans keys, so that a store that could not run is reported with the rest of the
configuration, before anything connects:

* every store has a ``factory``;
* its changelog is on the job's system and is not another store's changelog;
* ``object.cache.size`` (when the cache is on) holds at least one ``write.batch.size`` of
  dirty entries: a dirty entry is written down when it is evicted, so a batch larger than the
  cache never fills;
* a side-input store has no changelog of its own, its topics are not also task inputs, and
  its processor and scope keys are only set with ``side.inputs``; its processor is imported
  when user code is (``check_task_class``);
* a store that backs up to or restores from ``blobstore`` (its own ``backup.factories`` /
  ``restore.factories`` or the job's ``stores.backup.factories`` / ``stores.restore.factories``)
  is a RocksDB store with a changelog, and ``blob.store.uri`` is set.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from samzapy.config.keys import model_default
from samzapy.config.model import StoreConfig
from samzapy.config.types import STORE_FACTORY
from samzapy.config.user_code import resolve_processor
from samzapy.config.validation import Validation
from samzapy.errors import ConfigError
from samzapy.streams import SystemStream


def store_configs(
    check: Validation, system: str, inputs: tuple[SystemStream, ...], *, import_code: bool
) -> dict[str, StoreConfig]:
    """The :class:`StoreConfig` of every configured store; problems go to ``check``.

    Args:
        check: the validation pass (values parsed, problems collected).
        system: the job's system: changelogs and side inputs must be on it.
        inputs: the job's ``task.inputs``.
        import_code: also import each ``side.inputs.processor.factory``.
    """
    result: dict[str, StoreConfig] = {}
    owners: dict[SystemStream, str] = {}
    for name, first_key in check.names("store").items():
        prefix = f"stores.{name}."
        if prefix + "factory" not in check.config:
            check.problem(
                first_key,
                f"'{prefix}factory' is required: store '{name}' is configured at {check.at(first_key)} "
                f"without a factory ({STORE_FACTORY.description})",
            )
            continue
        fields = check.fields("store", name)
        if "changelog" in fields:
            fields["changelog"] = _changelog(check, name, system, owners)
        _check_cache_holds_batch(check, name, fields)
        _check_side_inputs(check, name, system, inputs)
        if "engine" not in fields:  # the factory's value is invalid (already reported)
            continue
        _state_backends(check, name, fields)
        store = StoreConfig(name, **fields)
        if import_code and store.side_inputs_processor:
            store = _with_processor(check, store, store.side_inputs_processor)
        result[name] = store
    return result


def _changelog(
    check: Validation, name: str, system: str, owners: dict[SystemStream, str]
) -> SystemStream | None:
    """``stores.<name>.changelog`` as a stream on ``system`` (a bare topic is taken to be on it)."""
    key = f"stores.{name}.changelog"
    raw = check.parsed[key]
    try:
        stream = SystemStream.parse(raw) if "." in raw else SystemStream(system, raw)
    except ValueError:
        check.invalid(key, "a stream name system.stream (e.g. kafka.my-store-changelog)")
        return None
    if not check_system(check, key, stream, system):
        return None
    if stream in owners:
        check.problem(
            key,
            f"Changelog '{stream}' of store '{name}' ({check.at(key)}) is also the changelog of store "
            f"'{owners[stream]}': each store needs its own",
        )
        return stream
    owners[stream] = name
    return stream


def _check_cache_holds_batch(check: Validation, name: str, fields: dict[str, Any]) -> None:
    cache_key, batch_key = f"stores.{name}.object.cache.size", f"stores.{name}.write.batch.size"
    if any(k in check.config and k not in check.parsed for k in (cache_key, batch_key)):
        return  # an invalid value is reported on its own
    cache = fields.get("object_cache_size", model_default(StoreConfig, "object_cache_size"))
    batch = fields.get("write_batch_size", model_default(StoreConfig, "write_batch_size"))
    if not 0 < cache < batch:
        return

    def said(key: str, value: int) -> str:
        where = check.at(key) if key in check.config else "the default"
        return f"'{key}' ({value}, {where})"

    check.problem(
        cache_key if cache_key in check.config else batch_key,
        f"Store '{name}': {said(cache_key, cache)} is smaller than {said(batch_key, batch)}: the cache "
        "writes its dirty entries down when it evicts them, so a batch larger than the cache never "
        f"fills; raise {cache_key} to at least {batch}, lower {batch_key}, or set {cache_key}=0 "
        "to turn the cache off",
    )


def _check_side_inputs(check: Validation, name: str, system: str, inputs: tuple[SystemStream, ...]) -> None:
    """A side-input store has no changelog of its own and reads no task input.

    Its processor and scope keys need ``side.inputs`` (docs/side-inputs.md).
    """
    prefix = f"stores.{name}."
    side = prefix + "side.inputs"
    if side not in check.config:
        for suffix in ("side.inputs.processor.factory", "side.inputs.scope"):
            if prefix + suffix in check.config:
                check.problem(
                    prefix + suffix,
                    f"'{prefix + suffix}' ({check.at(prefix + suffix)}) is set but '{side}' is not: "
                    f"set '{side}' to the topics that fill store '{name}', or remove it",
                )
        return
    if prefix + "changelog" in check.config:
        check.problem(
            prefix + "changelog",
            f"Store '{name}' has both '{side}' ({check.at(side)}) and '{prefix}changelog' "
            f"({check.at(prefix + 'changelog')}): a side-input store is restored from its side-input "
            "topics, which are its changelog; remove one of the two keys",
        )
    for stream in check.parsed.get(side, ()):
        if not check_system(check, side, stream, system):
            continue
        if stream in inputs:
            check.problem(
                side,
                f"Stream '{stream}' is a side input of store '{name}' ({check.at(side)}) and also in "
                f"'task.inputs' ({check.at('task.inputs')}): a stream is either processed by the task or "
                "fills a store; remove it from one of the two keys",
            )


def _state_backends(check: Validation, name: str, fields: dict[str, Any]) -> None:
    """Apply the job's default backup/restore factories; check what a ``blobstore`` needs."""
    for field_name, job_key in (
        ("backup_factories", "stores.backup.factories"),
        ("restore_factories", "stores.restore.factories"),
    ):
        if field_name not in fields and job_key in check.parsed:
            fields[field_name] = check.parsed[job_key]
    chosen = {
        key: fields.get(field_name) or ()
        for field_name, key in (
            ("backup_factories", f"stores.{name}.backup.factories"),
            ("restore_factories", f"stores.{name}.restore.factories"),
        )
    }
    users = [key for key, backends in chosen.items() if "blobstore" in backends]
    if not users:
        return
    key = users[0]
    where = check.at(key) if key in check.config else check.at(key.replace(f"stores.{name}.", "stores."))
    shown = key if key in check.config else key.replace(f"stores.{name}.", "stores.")
    if fields.get("engine") != "rocksdb":
        check.problem(
            shown,
            f"Store '{name}' uses blobstore in '{shown}' ({where}) but is not a RocksDB store: snapshots "
            "are copies of a RocksDB store's files; remove blobstore for it",
        )
    if "changelog" not in fields:
        check.problem(
            shown,
            f"Store '{name}' uses blobstore in '{shown}' ({where}) but has no changelog: a snapshot "
            f"matches a changelog offset and the changelog covers what came after it; set "
            f"'stores.{name}.changelog'",
        )
    if "blob.store.uri" not in check.config:
        check.problem(
            shown,
            f"Store '{name}' uses blobstore in '{shown}' ({where}) but 'blob.store.uri' is not set: set it "
            "to file:///absolute/path or s3://bucket/prefix",
        )


def _with_processor(check: Validation, store: StoreConfig, spec: str) -> StoreConfig:
    key = f"stores.{store.name}.side.inputs.processor.factory"
    try:
        processor = resolve_processor(spec, key, check.at(key))
    except ConfigError as exc:
        for message in getattr(exc, "problems", [str(exc)]):
            check.problem(key, message)
        return store
    return replace(store, imported_processor=processor)


def check_system(check: Validation, key: str, stream: SystemStream, system: str) -> bool:
    """Whether ``stream`` (named by ``key``) is on the job's ``system``; a problem if not."""
    if stream.system == system:
        return True
    check.problem(
        key,
        f"Stream '{stream}' in '{key}' ({check.at(key)}) is on system '{stream.system}', which is not "
        f"configured: must be on '{system}' (e.g. {system}.{stream.stream})",
    )
    return False
