"""The .properties reader and the raw Config mapping."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from samzapy.config import Config, ConfigError, load_config, parse_properties, read_properties


def entries(text: str) -> list[tuple[str, str, int]]:
    return [(p.key, p.value, p.line) for p in parse_properties(text, "job.properties")]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a=1", [("a", "1", 1)]),
        ("a = 1", [("a", "1", 1)]),
        ("a: 1", [("a", "1", 1)]),
        ("a:1", [("a", "1", 1)]),
        ("a 1", [("a", "1", 1)]),
        ("a\t\t1", [("a", "1", 1)]),
        ("a = = 1", [("a", "= 1", 1)]),
        ("a=", [("a", "", 1)]),
        ("   a=1", [("a", "1", 1)]),
        ("a=1  ", [("a", "1  ", 1)]),  # Java keeps trailing whitespace of values
        ("a=x=y:z", [("a", "x=y:z", 1)]),
    ],
)
def test_separators(text: str, expected: list[tuple[str, str, int]]) -> None:
    assert entries(text) == expected


def test_comments_and_blank_lines_are_skipped_and_lines_counted() -> None:
    text = "# comment\n! bang comment\n   # indented comment\n\t! indented\n\n   \nkey=value\n"
    assert entries(text) == [("key", "value", 7)]


def test_hash_inside_a_value_is_not_a_comment() -> None:
    assert entries("url=http://x/#frag") == [("url", "http://x/#frag", 1)]


def test_continuation_drops_leading_whitespace_of_next_line_and_keeps_first_line_number() -> None:
    text = "x=0\ntask.inputs=kafka.a,\\\n      kafka.b,\\\n\tkafka.c\ny=1"
    assert entries(text) == [("x", "0", 1), ("task.inputs", "kafka.a,kafka.b,kafka.c", 2), ("y", "1", 5)]


def test_continued_line_starting_with_hash_is_value_not_comment() -> None:
    assert entries("a=1\\\n  #2") == [("a", "1#2", 1)]


def test_even_number_of_backslashes_does_not_continue() -> None:
    assert entries("a=c:\\\\\nb=2") == [("a", "c:\\", 1), ("b", "2", 2)]


def test_backslash_at_end_of_file_is_dropped() -> None:
    assert entries("a=1\\") == [("a", "1", 1)]


def test_comment_line_ending_in_backslash_does_not_continue() -> None:
    assert entries("# note \\\na=1") == [("a", "1", 2)]


@pytest.mark.parametrize(
    ("text", "key", "value"),
    [
        (r"a=\t\n\r\f", "a", "\t\n\r\f"),
        (r"a=\\", "a", "\\"),
        (r"a\=b=c", "a=b", "c"),
        (r"a\:b:c", "a:b", "c"),
        (r"a\ b c", "a b", "c"),
        (r"\#a=1", "#a", "1"),
        (r"\!a=1", "!a", "1"),
        (r"a=\u00e9\u4e2d", "a", "é中"),
        (r"a=\q", "a", "q"),  # unknown escapes keep the character, as in Java
    ],
)
def test_escapes(text: str, key: str, value: str) -> None:
    assert entries(text) == [(key, value, 1)]


def test_malformed_unicode_escape_names_file_and_line() -> None:
    with pytest.raises(ConfigError, match=r"job.properties:2.*4 hex digits"):
        parse_properties("a=1\nb=\\u12G4", "job.properties")


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
def test_all_java_line_terminators(newline: str) -> None:
    assert entries(newline.join(["a=1", "b=\\", " 2", "c=3"])) == [
        ("a", "1", 1),
        ("b", "2", 2),
        ("c", "3", 4),
    ]


def test_duplicate_key_last_wins_with_warning_naming_both_places(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        assert entries("a=1\nb=2\na=3") == [("b", "2", 2), ("a", "3", 3)]
    assert "job.properties:3" in caplog.text and "job.properties:1" in caplog.text


def test_read_properties_from_path_and_file_uri(tmp_path: Path) -> None:
    file = tmp_path / "job.properties"
    file.write_text("job.name=é\n", encoding="utf-8")
    for path in (file, str(file), file.as_uri()):
        [prop] = read_properties(path)
        assert (prop.key, prop.value, prop.location) == ("job.name", "é", f"{file}:1")


def test_read_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        read_properties(tmp_path / "nope.properties")


def test_load_config_locations_and_overrides(tmp_path: Path) -> None:
    file = tmp_path / "job.properties"
    file.write_text("a=1\n\nb=2\n")
    config = load_config(file, overrides=["b=3", "c = x=y"])
    assert dict(config) == {"a": "1", "b": "3", "c": "x=y"}
    assert config.location("a") == f"{file}:1"
    assert config.location("b") == "--config"
    assert config.base_dir == tmp_path
    assert config.source == str(file)


@pytest.mark.parametrize("bad", ["novalue", "=x"])
def test_malformed_override_is_a_config_error(tmp_path: Path, bad: str) -> None:
    file = tmp_path / "job.properties"
    file.write_text("a=1\n")
    with pytest.raises(ConfigError, match=f"Invalid override '{bad}'.*key=value"):
        load_config(file, overrides=[bad])


def test_config_is_an_immutable_mapping() -> None:
    config = Config.from_dict({"a": 1})
    assert config["a"] == "1" and len(config) == 1 and list(config) == ["a"]
    assert config.location("a") == "<dict>"
    with pytest.raises(TypeError):
        config["a"] = "2"  # type: ignore[index]
    with pytest.raises(AttributeError):
        config.other = 1  # type: ignore[attr-defined]
    with pytest.raises(AttributeError):
        config.source = "elsewhere"  # type: ignore[misc]


def test_with_overrides_returns_a_new_config() -> None:
    config = Config.from_dict({"a": 1})
    changed = config.with_overrides({"a": 2})
    assert config["a"] == "1" and changed["a"] == "2"


def test_subset_strips_the_prefix() -> None:
    config = Config.from_dict({"app.x": 1, "app.y.z": 2, "apple": 3})
    assert config.subset("app.") == {"x": "1", "y.z": "2"}


def test_typed_getters() -> None:
    config = Config.from_dict({"i": " 42 ", "f": "2.5", "b": "True", "s": "text", "l": "a, b"})
    assert config.get_int("i", 0) == 42
    assert config.get_float("f", 0.0) == 2.5
    assert config.get_bool("b", False) is True
    assert config.get_str("s", "") == "text"
    assert config.get_list("l", []) == ["a", "b"]
    assert config.get_int("missing", 7) == 7
    assert config.get_str("missing", None) is None


@pytest.mark.parametrize(
    ("getter", "value", "expected"),
    [
        ("get_int", "4.5", "an integer"),
        ("get_float", "abc", "a number"),
        ("get_bool", "yes", "true or false"),
    ],
)
def test_typed_getter_error_names_key_value_location_and_expectation(
    tmp_path: Path, getter: str, value: str, expected: str
) -> None:
    file = tmp_path / "job.properties"
    file.write_text(f"# app\napp.threshold={value}\n")
    config = load_config(file)
    with pytest.raises(ConfigError) as info:
        getattr(config, getter)("app.threshold", 1)
    assert f"Invalid value '{value}' for 'app.threshold' ({file}:2): must be {expected}" in str(info.value)
    assert info.value.problems == [str(info.value).splitlines()[1].removeprefix("  - ")]


def test_typed_getter_without_default_requires_the_key() -> None:
    with pytest.raises(ConfigError, match="'app.x' is required"):
        Config.from_dict({}).get_int("app.x")


def test_a_line_without_a_separator_is_reported_with_its_place() -> None:
    """Java would read a lone word as a key with an empty value; it is always a slip here."""
    with pytest.raises(ConfigError) as info:
        parse_properties("job.name=j\ntask.commit.ms5000\nx=1\nlonely\n", "job.properties")
    assert str(info.value) == (
        "2 problems in job.properties:\n"
        "  - 'task.commit.ms5000' (job.properties:2) has no separator: write key=value (a key with an "
        "empty value: key=)\n"
        "  - 'lonely' (job.properties:4) has no separator: write key=value (a key with an empty value: key=)"
    )
