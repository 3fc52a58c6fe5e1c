"""The Photon-style click join, in-process with the TaskHarness."""

from __future__ import annotations

from pathlib import Path

from samzapy.config import load_config
from samzapy.jobs.ad_click_join import AdClickJoinTask
from samzapy.operators import join_id
from samzapy.operators.event_time import end_of_stream_record
from samzapy.testing import TaskHarness

CONFIG = Path(__file__).parents[2] / "config" / "ad-click-join.properties"
EOS = end_of_stream_record()


def harness(*overrides: str, base_dir: Path | None = None) -> TaskHarness:
    return TaskHarness(AdClickJoinTask, load_config(CONFIG, overrides), base_dir=base_dir)


def impression(h: TaskHarness, n: int, ts: int) -> None:
    imp = {"impression_id": f"imp-{n}", "ad_id": "ad-1", "user_id": "u1", "ts": ts}
    h.send("kafka.impressions", f"imp-{n}", imp)


def click(h: TaskHarness, n: int, ts: int, click_n: int | None = None) -> None:
    c = {"click_id": f"click-{n if click_n is None else click_n}", "impression_id": f"imp-{n}", "ts": ts}
    h.send("kafka.clicks", f"imp-{n}", c)


def end(h: TaskHarness) -> None:
    for stream in ("kafka.impressions", "kafka.clicks"):
        h.send(stream, None, {"control": "end-of-stream"}, headers=EOS[0])


def sent(h: TaskHarness, stream: str) -> list:
    return [o for o in h.outputs if o.system_stream.stream == stream]


def test_a_click_joins_its_impression_whichever_arrives_first():
    h = harness()
    impression(h, 1, 1000)
    click(h, 1, 5000)
    click(h, 2, 9000)  # before its impression
    impression(h, 2, 8000)

    joined = sent(h, "ad-clicks-joined")
    assert [o.message["click_id"] for o in joined] == ["click-1", "click-2"]
    assert joined[0].message == {
        "impression_id": "imp-1",
        "ad_id": "ad-1",
        "user_id": "u1",
        "impression_ts": 1000,
        "click_id": "click-1",
        "click_ts": 5000,
    }
    assert joined[0].key == "imp-1"
    assert joined[0].id == join_id(b"imp-1", "click-1", "imp-1")


def test_a_duplicate_click_is_joined_once_whether_it_comes_before_or_after_the_impression():
    h = harness()
    click(h, 1, 5000)
    impression(h, 1, 1000)  # joins the first copy
    click(h, 1, 5000)  # second copy: matches again, refused by the registry
    click(h, 2, 7000)
    click(h, 2, 7000)  # both copies wait: one buffered entry
    impression(h, 2, 6000)
    end(h)

    assert sorted(o.message["click_id"] for o in sent(h, "ad-clicks-joined")) == ["click-1", "click-2"]
    assert sent(h, "unjoined-clicks") == []
    assert h.metrics.counter("duplicate-clicks").value == 1


def test_a_click_without_impression_is_unjoined_only_when_its_window_has_closed():
    h = harness("join.allowed.lateness.ms=0", "join.window.after.ms=0")
    click(h, 9, 1000)
    impression(h, 1, 1000)
    h.window()
    assert sent(h, "unjoined-clicks") == []  # the window is open until the watermark passes it
    impression(h, 2, 1500)
    click(h, 2, 1500)  # both inputs are past 1000 now
    h.window()

    [unjoined] = sent(h, "unjoined-clicks")
    assert unjoined.message["click_id"] == "click-9"
    assert unjoined.id == join_id(b"imp-9", "click-9", None)


def test_one_input_racing_ahead_does_not_expire_what_the_other_still_has_to_match():
    h = harness("join.allowed.lateness.ms=0")
    for n in range(5):  # all clicks first, an hour of event time
        click(h, n, 1000 + n * 900_000)
    h.window()
    for n in range(5):
        impression(h, n, 900 + n * 900_000)
    h.window()
    assert len(sent(h, "ad-clicks-joined")) == 5
    assert sent(h, "unjoined-clicks") == []


def test_end_of_stream_on_both_inputs_sends_every_waiting_click_to_unjoined():
    h = harness()
    click(h, 1, 1000)
    click(h, 2, 2000)
    end(h)
    assert sorted(o.message["click_id"] for o in sent(h, "unjoined-clicks")) == ["click-1", "click-2"]


def test_a_click_decided_before_a_restart_is_not_joined_again(tmp_path):
    h = harness(base_dir=tmp_path)
    impression(h, 1, 1000)
    click(h, 1, 2000)
    h.commit()
    for store in h.stores.values():
        store.close()
    again = harness(base_dir=tmp_path)
    click(again, 1, 2000)  # a duplicate arriving after the restart
    assert sent(again, "ad-clicks-joined") == []
    assert again.metrics.counter("duplicate-clicks").value == 1
