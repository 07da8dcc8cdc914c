"""Space profiles: ``SpaceProfiler``, ``SpaceSignals``, ``SpaceProfile``, ``get_space_profile``, space attributes.

Spec (issue 7, item 2; reference "Other names" and "2. Numbers & env"; seed "Space profiles"): per space,
churn = min(1, .5*min(1, rev/item / 5) + .3*min(1, rate/day / 3) + .2*min(1, supersedes depth / 5));
evidence = sum(quality * count) / live revisions (official 1, corroborated .7, single .3, unverified 0);
stability = min(1, .6*published share + .4*min(1, median age / 30)); scores rounded to 4 places; canonical if
stability >= .6 and churn <= .4 and (ungraded or evidence >= .3); correspondence if churn >= .6 and
stability <= .4; else working. Profiles persist as ``space-profile`` revisions chained by SUPERSEDES; a
``space_class`` attribute pins the label and disagreement is drift; empty spaces are neither classified
nor stored. The expected numbers below are worked out by hand in the comments.
"""

from __future__ import annotations

import argparse
import asyncio
import io

import pytest

import kumiho_memory as km

START = "2026-01-01T00:00:00Z"


@pytest.fixture
def still_clock() -> km.ManualClock:
    """A clock that moves only when a test advances it, so ages and windows are exact."""
    return km.ManualClock(START)


@pytest.fixture
def memory(make_memory, still_clock) -> km.Memory:
    return make_memory(clock=still_clock)


def dump(memory: km.Memory) -> str:
    """The whole store as an export: equal dumps mean nothing was written."""
    stream = io.StringIO()
    memory.export_jsonl(stream)
    return stream.getvalue()


def canonical_space(memory: km.Memory) -> None:
    """4 single-revision published items, graded official / corroborated / single_source / none."""
    memory.remember("Water boils at 100 C at sea level", space="facts", tags=["published"], evidence_level="official")
    memory.remember("The Earth orbits the Sun", space="facts", tags=["published"], evidence_level="corroborated")
    memory.remember("Paris is the capital of France", space="facts", tags=["published"], source="atlas")
    memory.remember("A week has seven days", space="facts", tags=["published"])


def correspondence_space(memory: km.Memory) -> None:
    """One item revised 8 times (9 revisions, a SUPERSEDES chain of depth 8) and one single revision."""
    for number in range(9):
        memory.remember(f"Vendor claims delivery moves to week {number + 10}", space="news", key="delivery")
    memory.remember("Reporter says the launch slipped", space="news")


def test_canonical_space_scores_by_hand(memory, still_clock):
    canonical_space(memory)
    still_clock.advance(days=45)
    result = km.SpaceProfiler(memory).run_sync()
    profile = result["profiles"]["facts"]
    # churn: 4 revisions / 4 items = 1 -> .5*(1/5) = .1; none in the last 30 days; no SUPERSEDES -> .1
    # evidence: (1 + .7 + .3 + 0) / 4 live revisions = .5
    # stability: .6 * 4/4 published + .4 * min(1, 45/30) = 1.0
    assert profile["scores"] == {"churn": 0.1, "evidence": 0.5, "stability": 1.0}
    assert profile["label"] == profile["observed_label"] == "canonical"
    stored = km.get_space_profile(memory, "facts")
    signals = stored.signals
    assert (signals.item_count, signals.revision_count, signals.live_revision_count) == (4, 4, 4)
    assert signals.evidence_histogram == {"official": 1, "corroborated": 1, "single_source": 1, "unverified": 0,
                                          "ungraded": 1}
    assert signals.revisions_in_window == 0 and signals.revision_rate_per_day == 0.0
    assert signals.published_share == 1.0 and signals.median_revision_age_days == 45.0
    assert signals.window_end == "2026-02-15T00:00:00.000000Z"
    assert signals.window_start == "2026-01-16T00:00:00.000000Z"


def test_correspondence_space_scores_by_hand(memory, still_clock):
    still_clock.advance(days=40)
    correspondence_space(memory)
    still_clock.advance(days=5)
    result = km.SpaceProfiler(memory).run_sync()
    profile = result["profiles"]["news"]
    # churn: 10 revisions / 2 items = 5 -> .5*1 = .5; 10 in the window / 30 days = .3333 -> .3*(.3333/3) = .0333;
    #        chain depth 8 -> .2*min(1, 8/5) = .2; total .7333
    # stability: nothing published; median age 5 days -> .4*(5/30) = .0667
    assert profile["scores"] == {"churn": 0.7333, "evidence": 0.0, "stability": 0.0667}
    assert profile["label"] == "correspondence"
    signals = km.get_space_profile(memory, "news").signals
    assert signals.supersedes_edge_count == 8 and signals.supersedes_max_depth == 8
    assert signals.revisions_per_item_mean == 5.0 and signals.revision_rate_per_day == 0.3333
    assert signals.evidence_histogram["ungraded"] == 10


def test_working_space_counts_deprecations_in_churn_but_not_in_stability(memory, still_clock):
    krefs = [memory.remember(f"Draft note {name} version one", space="notes", key=name) for name in "abc"]
    still_clock.advance(days=35)
    memory.remember("Draft note a version two", space="notes", key="a", tags=["published"])
    memory.remember("Draft note b version two", space="notes", key="b")
    memory.remember("Draft note c version two", space="notes", key="c")
    memory.deprecate(krefs[2])                         # c r1: no longer live
    still_clock.advance(days=10)
    profile = km.SpaceProfiler(memory).run_sync()["profiles"]["notes"]
    # churn: 6/3 = 2 -> .2; 3 revisions in the window / 30 = .1 -> .01; depth 1 -> .04; total .25
    # stability over the 5 live revisions: 1 published -> .6*.2 = .12; ages 45, 45, 10, 10, 10 -> median 10
    #           -> .4*(10/30) = .1333; total .2533
    assert profile["scores"] == {"churn": 0.25, "evidence": 0.0, "stability": 0.2533}
    assert profile["label"] == "working"
    signals = km.get_space_profile(memory, "notes").signals
    assert (signals.revision_count, signals.live_revision_count, signals.deprecated_revision_count) == (6, 5, 1)
    assert signals.deprecation_ratio == 0.1667
    memory.deprecate(memory.get(krefs[1])["item_kref"])      # a deprecated item: its revisions are not live
    still_clock.advance(days=1)
    signals = km.SpaceProfiler(memory, dry_run=True).signals(memory.items(space="notes", include_deprecated=True),
                                                             still_clock.now())
    assert (signals.deprecated_item_count, signals.live_item_count, signals.live_revision_count) == (1, 2, 3)


@pytest.mark.parametrize(("scores", "graded", "label"), [
    ({"churn": 0.4, "evidence": 0.3, "stability": 0.6}, True, "canonical"),        # every bound inclusive
    ({"churn": 0.4001, "evidence": 0.3, "stability": 0.6}, True, "working"),
    ({"churn": 0.1, "evidence": 0.2999, "stability": 1.0}, True, "working"),       # graded but weak evidence
    ({"churn": 0.1, "evidence": 0.0, "stability": 1.0}, False, "canonical"),       # ungraded is not penalized
    ({"churn": 0.6, "evidence": 0.0, "stability": 0.4}, False, "correspondence"),
    ({"churn": 0.6, "evidence": 0.0, "stability": 0.4001}, False, "working"),
    ({"churn": 0.5999, "evidence": 0.0, "stability": 0.0}, False, "working"),
])
def test_classification_thresholds(scores, graded, label):
    assert km.classify_space(scores, graded=graded) == label


def test_weak_evidence_keeps_a_stable_graded_space_out_of_canonical(memory, still_clock):
    memory.remember("Rumour: the office moves", space="rumours", tags=["published"], evidence_level="unverified")
    memory.remember("Rumour: a new canteen", space="rumours", tags=["published"])
    still_clock.advance(days=60)
    profile = km.SpaceProfiler(memory).run_sync()["profiles"]["rumours"]
    assert profile["scores"] == {"churn": 0.1, "evidence": 0.0, "stability": 1.0}
    assert profile["label"] == "working"


def test_scores_are_rounded_to_four_places():
    signals = km.SpaceSignals(items_count=3, revisions_count=7, live_revisions_count=3,
                              revisions_per_item_mean=7 / 3, revision_rate_per_day=1 / 7,
                              evidence_histogram={"corroborated": 1, "ungraded": 2},
                              published_share=1 / 3, median_revision_age_days=10 / 3)
    # churn .5*(2.3333/5) + .3*(.142857/3) = .233333 + .014286 = .247619; evidence .7/3 = .233333;
    # stability .6/3 + .4*(3.3333/30) = .2 + .044444 = .244444
    assert km.space_scores(signals) == {"churn": 0.2476, "evidence": 0.2333, "stability": 0.2444}


def test_the_pin_holds_the_label_and_disagreement_is_drift(memory, still_clock):
    correspondence_space(memory)
    km.set_space_attribute(memory, "news", "space_class", "canonical")
    still_clock.advance(days=1)
    result = km.SpaceProfiler(memory).run_sync()
    profile = result["profiles"]["news"]
    assert (profile["label"], profile["observed_label"], profile["pinned"]) == ("canonical", "correspondence", True)
    assert result["drift"] == [{"space_path": "news", "from": "canonical", "to": "correspondence", "pinned": True}]
    assert result["labels"] == {"canonical": 1, "working": 0, "correspondence": 0}
    stored = km.get_space_profile(memory, "news")
    assert (stored.label, stored.observed_label, stored.pinned) == ("canonical", "correspondence", True)
    km.set_space_attribute(memory, "news", "space_class", None)          # unpinned: the observation rules
    still_clock.advance(days=1)
    result = km.SpaceProfiler(memory).run_sync()
    assert result["profiles"]["news"]["label"] == "correspondence"
    assert result["drift"] == [{"space_path": "news", "from": "canonical", "to": "correspondence", "pinned": False}]


def test_a_label_change_between_runs_is_drift(memory, still_clock):
    canonical_space(memory)
    still_clock.advance(days=45)
    first = km.SpaceProfiler(memory).run_sync()
    assert first["profiles"]["facts"]["label"] == "canonical" and first["drift"] == []
    for number in range(12):
        memory.remember(f"The week has {number} working days now", space="facts", key="week")
    still_clock.advance(days=1)
    second = km.SpaceProfiler(memory).run_sync()
    assert second["profiles"]["facts"]["previous_label"] == "canonical"
    assert second["profiles"]["facts"]["label"] != "canonical"
    assert second["drift"] == [{"space_path": "facts", "from": "canonical",
                                "to": second["profiles"]["facts"]["label"], "pinned": False}]


def test_a_pin_that_is_not_a_class_is_reported_and_ignored(memory, still_clock):
    canonical_space(memory)
    km.set_space_attribute(memory, "facts", "space_class", "gospel")
    still_clock.advance(days=45)
    result = km.SpaceProfiler(memory).run_sync()
    assert result["success"] is False
    assert result["errors"][0]["space_path"] == "facts" and "gospel" in result["errors"][0]["error"]
    assert result["profiles"]["facts"]["label"] == "canonical" and result["profiles"]["facts"]["pinned"] is False


def test_pin_is_case_insensitive(memory, still_clock):
    correspondence_space(memory)
    km.set_space_attribute(memory, "news", "space_class", " Working ")
    result = km.SpaceProfiler(memory).run_sync()
    assert result["profiles"]["news"]["label"] == "working" and result["profiles"]["news"]["pinned"]


def test_profiles_form_a_supersedes_chain_and_are_not_counted_as_knowledge(memory, still_clock):
    canonical_space(memory)
    still_clock.advance(days=45)
    first = km.SpaceProfiler(memory).run_sync()["profiles"]["facts"]["revision_kref"]
    still_clock.advance(days=1)
    second = km.SpaceProfiler(memory).run_sync()["profiles"]["facts"]["revision_kref"]
    assert first.endswith("?r=1") and second.endswith("?r=2")
    item = memory.get(second)["item_kref"]
    assert memory.get(item)["kind"] == "space-profile"
    assert [(e["source_kref"], e["target_kref"]) for e in memory.edges(second, direction="outgoing",
                                                                        edge_type="SUPERSEDES")] == [(second, first)]
    stored = km.get_space_profile(memory, "facts")
    assert stored.revision_kref == second and stored.previous_label == "canonical"
    assert stored.signals.item_count == 4          # the profile item itself is not counted
    assert stored.signals.median_revision_age_days == 46.0


def test_an_unchanged_profile_adds_no_revision(memory, still_clock):
    canonical_space(memory)
    still_clock.advance(days=45)
    first = km.SpaceProfiler(memory).run_sync()["profiles"]["facts"]["revision_kref"]
    again = km.SpaceProfiler(memory).run_sync()["profiles"]["facts"]["revision_kref"]
    assert again == first
    assert len(memory.history(memory.get(first)["item_kref"])) == 1


def test_dry_run_writes_nothing(memory, still_clock):
    canonical_space(memory)
    correspondence_space(memory)
    km.set_space_attribute(memory, "news", "space_class", "canonical")
    still_clock.advance(days=45)
    before = dump(memory)
    result = km.SpaceProfiler(memory, dry_run=True).run_sync()
    assert dump(memory) == before
    assert result["dry_run"] is True and result["spaces_profiled"] == 2
    assert result["profiles"]["facts"]["revision_kref"] is None
    assert result["drift"][0]["space_path"] == "news"
    assert km.get_space_profile(memory, "facts") is None


def test_empty_spaces_are_neither_classified_nor_stored(memory, still_clock):
    km.set_space_attribute(memory, "empty", "space_class", "canonical")
    kref = memory.remember("Soon gone", space="gone")
    memory.forget(memory.get(kref)["item_kref"])
    result = km.SpaceProfiler(memory).run_sync()
    assert result["profiles"] == {"empty": {"label": None, "observed_label": None, "pinned": True, "empty": True,
                                            "scores": {}, "previous_label": None, "revision_kref": None}}
    assert result["spaces_profiled"] == 0 and result["drift"] == [] and result["success"]
    assert km.get_space_profile(memory, "empty") is None


def test_get_space_profile_takes_upstream_style_paths(memory, still_clock):
    memory.remember("Cold call notes", space="work/leads")
    km.SpaceProfiler(memory).run_sync()
    by_space = km.get_space_profile(memory, "work/leads")
    assert by_space is not None and by_space.space_path == "work/leads"
    assert km.get_space_profile(memory, "/CognitiveMemory/work/leads") == by_space
    assert km.get_space_profile(memory, "work") is None
    assert by_space.to_dict()["signals"]["items_count"] == 1
    with pytest.raises(km.InvalidArgumentError):
        km.get_space_profile(memory, "bad space!")


def test_window_days_changes_the_rate(memory, still_clock):
    correspondence_space(memory)
    still_clock.advance(days=5)
    profiler = km.SpaceProfiler(memory, window_days=14, dry_run=True)
    signals = profiler.signals(memory.items(space="news"), still_clock.now())
    assert signals.revisions_in_window == 10 and signals.revision_rate_per_day == round(10 / 14, 4)
    still_clock.advance(days=10)                      # now 15 days old: outside a 14-day window
    assert profiler.signals(memory.items(space="news"), still_clock.now()).revisions_in_window == 0


def test_supersedes_depth_is_capped(memory, still_clock):
    correspondence_space(memory)
    signals = km.SpaceProfiler(memory, max_supersedes_depth=3, dry_run=True).signals(
        memory.items(space="news"), still_clock.now())
    assert signals.supersedes_max_depth == 3 and signals.supersedes_edge_count == 8


@pytest.mark.parametrize("options", [{"window_days": 0}, {"window_days": 1.5}, {"max_supersedes_depth": 0},
                                     {"dry_run": "yes"}, {"profile_kind": "bad kind"}, {"profile_item_name": ""}])
def test_bad_parameters_are_refused(memory, options):
    with pytest.raises(km.InvalidArgumentError):
        km.SpaceProfiler(memory, **options)


def test_async_run_matches_the_sync_result(memory, still_clock):
    canonical_space(memory)
    still_clock.advance(days=45)
    result = asyncio.run(km.SpaceProfiler(memory, dry_run=True).run())
    assert result["profiles"]["facts"]["scores"] == {"churn": 0.1, "evidence": 0.5, "stability": 1.0}
    assert set(result) == {"success", "spaces_profiled", "labels", "drift", "profiles", "errors", "dry_run",
                           "duration_ms"}


# -- space attributes ---------------------------------------------------------------------------------------

def test_space_attributes_set_read_change_and_remove(memory):
    assert km.space_attribute(memory, "news", "space_class") is None
    first = km.set_space_attribute(memory, "news", "space_class", "canonical")
    assert km.set_space_attribute(memory, "news", "space_class", "canonical") == first      # unchanged: no write
    second = km.set_space_attribute(memory, "news", "space_class", "Canonical")               # exact compare
    assert second != first and km.space_attribute(memory, "news", "space_class") == "Canonical"
    km.set_space_attribute(memory, "news", "owner", "desk-a")
    assert km.space_attributes(memory, "news") == {"owner": "desk-a", "space_class": "Canonical"}
    assert km.space_attributes(memory, "news/sub") == {}
    assert km.set_space_attribute(memory, "news", "owner", None) is None
    assert km.space_attribute(memory, "news", "owner") is None
    km.set_space_attribute(memory, "news", "owner", "desk-a")                                 # restored
    assert km.space_attribute(memory, "news", "owner") == "desk-a"
    owner = next(i for i in memory.items(space="news", kind="space-attribute") if i["key"].endswith(":owner"))
    assert [r["content"] for r in memory.history(owner["item_kref"])] == ["desk-a"]      # restored, not rewritten


@pytest.mark.parametrize(("name", "value"), [("bad name", "x"), ("", "x"), ("ok", ""), ("ok", 3),
                                             ("ok", "x" * 5000)],
                         ids=["space-in-name", "empty-name", "empty-value", "not-a-string", "too-long"])
def test_bad_attributes_write_nothing(memory, name, value):
    before = dump(memory)
    with pytest.raises(km.InvalidArgumentError):
        km.set_space_attribute(memory, "news", name, value)
    assert dump(memory) == before


# -- CLI ----------------------------------------------------------------------------------------------------

def test_cli_handler_profiles_and_reports(memory, still_clock):
    canonical_space(memory)
    still_clock.advance(days=45)
    result, text = km._cmd_profile(memory, argparse.Namespace(dry_run=True, window_days=14))
    assert result["dry_run"] is True and result["profiles"]["facts"]["label"] == "canonical"
    assert "canonical" in text and "facts" in text and "dry run" in text
    assert km.get_space_profile(memory, "facts") is None
    result, _ = km._cmd_profile(memory, argparse.Namespace(dry_run=False, window_days=30))
    assert km.get_space_profile(memory, "facts").revision_kref == result["profiles"]["facts"]["revision_kref"]


def _wired(command: str) -> bool:
    parser = km.build_cli_parser()
    return any(command in (getattr(action, "choices", None) or ()) for action in parser._actions)


@pytest.mark.skipif(not _wired("profile"), reason="the profile command is not wired into the CLI yet")
def test_cli_profile_command(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("KUMIHO_MEMORY_PATH", str(tmp_path / "cli.db"))
    assert km.main(["remember", "A settled fact", "--space", "facts", "--tag", "published"]) == 0
    capsys.readouterr()
    assert km.main(["profile", "--dry-run", "--window-days", "7", "--json"]) == 0
    import json
    result = json.loads(capsys.readouterr().out)
    assert result["dry_run"] is True and result["profiles"]["facts"]["empty"] is False
    assert km.main(["profile", "--window-days", "0"]) == 2


def test_a_space_attribute_reads_the_same_by_key_lookup_and_by_listing(tmp_path):
    """``Memory`` finds an attribute by its key in the backend; a holder with only the public face lists the
    space: both give the same value, set, changed and removed."""
    memory = km.Memory(str(tmp_path / "a.db"))

    class Holder:                                    # the protocol's public face, no backend
        def items(self, **options):
            return memory.items(**options)

        def get(self, kref):
            return memory.get(kref)

        def remember(self, content, **options):
            return memory.remember(content, **options)
    holder = Holder()
    memory.remember("an unrelated note", space="team")
    for value in ("ann", "bo", None, "cy"):
        km.set_space_attribute(memory, "team", "user", value)
        assert km.space_attribute(memory, "team", "user") == km.space_attribute(holder, "team", "user") == value
    assert km.space_attribute(memory, "team", "missing") is None is km.space_attribute(holder, "team", "missing")
    memory.close()
