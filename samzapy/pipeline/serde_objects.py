"""Serdes given to a pipeline as objects: ``value=MySerde`` (a class) or ``value=MySerde(...)``.

A job's configuration names its serdes (``systems.kafka.streams.<t>.samza.msg.serde=NAME``,
``serializers.registry.NAME.class=module:Class``), so each serde a pipeline is given as an
object gets a name here (:func:`serde_ref`), and the compiler writes its registry entry
(:func:`registry_entries`):

* a class defined at a module's top level is registered by its import path
  (``serializers.registry.CsvSerde.class=app:CsvSerde``), called without arguments as any
  registered serde class: every process that runs the job (group members, Spark executors)
  imports it, as it imports ``task.class``;
* a serde *object* (an instance, or a class defined inside a function) is kept in this
  process's registry, and its entry names it there
  (``serializers.registry.AvroSerde_object.class=samzapy.pipeline.serde_objects:registered.AvroSerde_object``).
  It is found in every process that built the app before reading the configuration:
  ``samzapy run``/``describe`` (group members run ``samzapy run app.py`` too) and the test
  harness. A Spark replay's executors do not build the app first: give such a job a serde class.

The names are stable from run to run of the same app (the plan check compares serdes by
name): a class's ``__qualname__`` (with its module when two classes share it), an object's
class name and ``_object`` (``_2``, ``_3``... for further objects of that class).

>>> class Upper:
...     def to_bytes(self, obj): return obj.upper().encode()
...     def from_bytes(self, data): return data.decode()
>>> serde_ref(Upper(), "value")
'Upper_object'
>>> registered.__getattr__("Upper_object")().from_bytes(b"x")
'x'
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from samzapy.errors import SerdeError
from samzapy.serdes import BUILTIN_SERDES

#: The registry key's value for a serde kept in this process's registry.
_REGISTERED_SPEC = "samzapy.pipeline.serde_objects:registered.{name}"

#: name -> the ``serializers.registry.<name>.class`` value.
_SPECS: dict[str, str] = {}
#: name -> the object a registered name stands for (an instance, or a class to call).
_OBJECTS: dict[str, Any] = {}
_BUILTIN_NAMES = {factory: name for name, factory in BUILTIN_SERDES.items()}


def is_serde(value: Any) -> bool:
    """Whether ``value`` is a serde object or class (``to_bytes`` and ``from_bytes``).

    Not a built-in type such as ``int``, which has methods of those names.
    """
    cls = value if isinstance(value, type) else type(value)
    if cls.__module__ == "builtins":
        return False
    return callable(getattr(value, "to_bytes", None)) and callable(getattr(value, "from_bytes", None))


def serde_ref(value: Any, what: str) -> str:
    """The serde name standing for the serde object or class ``value`` (registered here).

    Raises:
        TypeError: ``value`` has no ``to_bytes`` and ``from_bytes``.
    """
    if not is_serde(value):
        msg = (
            f"{what} must be a serde: a name (samzapy.json, 'string', 'my.module:Serde'), a serde "
            f"class or object (with to_bytes and from_bytes), got {value!r}"
        )
        raise TypeError(msg)
    if isinstance(value, type):
        builtin = _BUILTIN_NAMES.get(value)
        if builtin is not None:
            return builtin
        if _importable(value):
            spec = f"{value.__module__}:{value.__qualname__}"
            return _claim(_name_of_class(value), spec, None)
    base = f"{(value if isinstance(value, type) else type(value)).__qualname__.rpartition('.')[2]}_object"
    for name, held in _OBJECTS.items():
        if held is value:
            return name
    return _claim(base, None, value)


def _importable(cls: type) -> bool:
    """Whether ``cls`` can be imported by its module and name (not made inside a function)."""
    return "<locals>" not in cls.__qualname__ and cls.__module__ not in ("__main__", "builtins")


def _name_of_class(cls: type) -> str:
    """The class's name, with its module when another class of that name is registered."""
    spec = f"{cls.__module__}:{cls.__qualname__}"
    name = cls.__qualname__.replace(".", "_")
    if _SPECS.get(name, spec) == spec:
        return name
    return f"{cls.__module__}_{name}".replace(".", "_")


def _claim(base: str, spec: str | None, obj: Any) -> str:
    """Register ``spec`` (a class) or ``obj`` under ``base`` or the first free ``base_N``.

    Names are identifiers: the registry entry's value names them as attributes.
    """
    name, n = base, 1
    while name in _SPECS and (spec is None or _SPECS[name] != spec):
        n += 1
        name = f"{base}_{n}"
    if spec is None:
        _OBJECTS[name] = obj
        spec = _REGISTERED_SPEC.format(name=name)
    _SPECS[name] = spec
    return name


def registry_entries(names: set[str]) -> list[tuple[str, str]]:
    """The ``serializers.registry.<name>.class`` entries of the serde objects and classes in ``names``.

    Only the names among ``names`` that stand for serde objects or classes, sorted.
    """
    return [(f"serializers.registry.{n}.class", _SPECS[n]) for n in sorted(names) if n in _SPECS]


class _Registered:
    """``registered.<name>``: a factory of the object registered as ``name`` in this process.

    It is called without arguments, as a serde class is.
    """

    def __getattr__(self, name: str) -> Callable[[], Any]:
        if name.startswith("__"):
            raise AttributeError(name)

        def factory() -> Any:
            obj = _OBJECTS.get(name)
            if obj is None:
                msg = (
                    f"the serde object '{name}' is not in this process: a pipeline's serde objects "
                    "live in the process that built the app (samzapy run, describe, the test "
                    "harness); where the app is not built first (a Spark replay's executors), "
                    "give the stage a serde class defined at the top level of a module instead"
                )
                raise SerdeError(msg)
            return obj() if isinstance(obj, type) else obj

        return factory


#: The registry the configuration's entries name (see the module docstring).
registered = _Registered()
