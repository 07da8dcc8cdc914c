"""Dream State: ``DreamState``, ``MemoryAssessment``, ``DreamStateStats``, ``kumiho-memory dream`` and the MCP tool.

Spec (issue 7, item 1; reference section 8): a run walks what was written since its cursor (kept in the graph),
assesses by heuristics (duplicates, superseded leftovers, stale chat) or by an LLM (structured JSON), and
applies within hard guardrails: never official, never published unless allow_published_deprecation, a minimum
age, a stated reason for a corroborated memory, nothing another memory got an edge to this run, at most
max(1, int(n * ratio)) deprecations a run (0.1 <= ratio <= 0.9). Enrichment never touches evidence carriers.
dry_run changes nothing. A failing batch is retried next run; an item failing alone in max_failures runs is
parked. Every run writes a Markdown report as a revision of the ``_dream_state`` item.

The LLM path runs against a real loopback HTTP server speaking the OpenAI chat-completions wire format
(``OpenAIServer`` from test_llm_adapters) through ``km.OpenAICompatAdapter``.
"""

from __future__ import annotations

import io
import json
import os
from typing import Any, Callable

import pytest

import kumiho_memory as km
from test_llm_adapters import API_KEY, OpenAIServer, Waits, _last_user_text

DAY = 86400


# -- helpers ---------------------------------------------------------------------------------------------------

def dream(memory: km.Memory, **options: Any) -> dict[str, Any]:
    return km.DreamState(memory, **options).run_sync()


def deprecated(memory: km.Memory, kref: str) -> bool:
    return memory.get(kref)["deprecated"]


def snapshot(memory: km.Memory) -> str:
    stream = io.StringIO()
    memory.export_jsonl(stream)
    return stream.getvalue()


def acted(result: dict[str, Any], action: str) -> dict[str, dict[str, Any]]:
    """The result's actions of one kind by kref."""
    return {entry["kref"]: entry for entry in result["actions"] if entry["action"] == action}


class DreamServer(OpenAIServer):
    """An OpenAI-compatible loopback server that assesses Dream State batches.

    ``decide(entry, entries)`` returns the assessment fields for one memory of the batch (the request's
    ``{"memories": [...]}`` entries); a batch holding a memory whose summary contains ``poison`` gets a reply
    that is not JSON. ``batches`` records the krefs of every batch asked about.
    """

    def __init__(self) -> None:
        super().__init__(api_key=API_KEY)
        self.decide: Callable[[dict[str, Any], list[dict[str, Any]]], dict[str, Any]] = lambda entry, entries: {}
        self.poison = "POISON"
        self.batches: list[list[str]] = []

    def answer(self, body: dict[str, Any], reply: Any) -> dict[str, Any]:
        if reply is None:
            entries = json.loads(_last_user_text(body))["memories"]
            self.batches.append([entry["kref"] for entry in entries])
            if any(self.poison in entry["summary"] for entry in entries):
                reply = "Sorry, I can't assess these memories."
            else:
                reply = json.dumps({"assessments": [{"index": entry["index"], **self.decide(entry, entries)}
                                                    for entry in entries]})
        return super().answer(body, reply)

    def system_prompts(self) -> list[str]:
        return [message["content"] for body in self.bodies() if body
                for message in body["messages"] if message["role"] == "system"]


@pytest.fixture
def llm():
    server = DreamServer().start()
    yield server
    server.stop()


def adapter(server: DreamServer) -> km.OpenAICompatAdapter:
    return km.OpenAICompatAdapter(f"http://127.0.0.1:{server.port}/v1", API_KEY, "gpt-4o-mini",
                                  retries=0, timeout=10.0, sleep=Waits())


def test_the_public_names_exist_and_are_documented():
    for name in ("DreamState", "MemoryAssessment", "DreamStateStats"):
        assert getattr(km, name).__doc__, name
    stats = km.DreamStateStats()
    assert (stats.deprecated, stats.events_processed, stats.errors) == (0, 0, [])
    assert km.MemoryAssessment(revision_kref="kref://p/s/x.memory?r=1").should_deprecate is False


# -- heuristics ------------------------------------------------------------------------------------------------

def test_duplicates_lose_the_weaker_copy_and_keep_the_published_graded_or_older_one(memory, clock):
    exact_old = memory.remember("Alice lives in Paris near the canal", space="people")
    exact_new = memory.remember("Alice lives in Paris near the canal", space="people")
    variant_old = memory.remember("The build server runs on port 8080", space="ops")
    variant_new = memory.remember("  the BUILD server runs   on port 8080!!", space="ops")
    plain_old = memory.remember("The team lunch is on Thursdays", space="team")
    published_new = memory.remember("The team lunch is on Thursdays.", space="team", tags=["published"])
    ungraded_old = memory.remember("Carol prefers tea over coffee", space="people")
    graded_new = memory.remember("carol prefers tea over coffee", space="people", evidence_level="single_source")
    lyon = memory.remember("Alice lives in Lyon near the canal", space="people")
    other_space = memory.remember("The build server runs on port 8080", space="elsewhere")
    clock.advance(days=30)

    result = dream(memory, max_deprecation_ratio=0.9)

    gone = acted(result, "deprecate")
    assert set(gone) == {exact_new, variant_new, plain_old, ungraded_old}
    assert all(gone[kref]["category"] == "duplicate" for kref in gone)
    assert gone[exact_new]["reason"] == f"duplicate of {exact_old}"
    assert gone[plain_old]["reason"] == f"duplicate of {published_new}"
    assert gone[ungraded_old]["reason"] == f"duplicate of {graded_new}"
    for kref in (exact_new, variant_new, plain_old, ungraded_old):
        assert deprecated(memory, kref)
    for kref in (exact_old, variant_old, published_new, graded_new, lyon, other_space):
        assert not deprecated(memory, kref)
    assert result["deprecated"] == result["deprecations_proposed"] == 4
    assert result["success"] is True and result["errors"] == []


def test_a_superseded_leftover_in_another_item_is_deprecated_but_a_revised_item_is_not(memory, clock):
    old_plan = memory.remember("Release plan: ship version two in March", space="plans")
    new_plan = memory.remember("Release plan: ship version two in April after the audit", space="plans")
    memory.link(new_plan, old_plan, "SUPERSEDES")
    revised = memory.remember("Standup at 9:00", space="team", key="standup")
    memory.remember("Standup at 9:30", space="team", key="standup")          # same item: SUPERSEDES inside it
    ignored_old = memory.remember("Office closes at 18:00 on Fridays", space="office")
    withdrawn = memory.remember("Office closes at 16:00 on Fridays from May", space="office")
    memory.link(withdrawn, ignored_old, "SUPERSEDES")
    memory.deprecate(withdrawn.split("?")[0])                                 # its superseder is gone: keep it
    clock.advance(days=30)

    result = dream(memory, max_deprecation_ratio=0.9)

    gone = acted(result, "deprecate")
    assert set(gone) == {old_plan}
    assert gone[old_plan]["category"] == "superseded" and new_plan in gone[old_plan]["reason"]
    assert deprecated(memory, old_plan) and not deprecated(memory, new_plan)
    assert not deprecated(memory, revised.split("?")[0]) and not deprecated(memory, ignored_old)


def test_stale_acknowledgement_chat_is_deprecated_but_substantive_young_or_non_chat_text_stays(memory, clock):
    ack = memory.remember("ok thanks!", space="chat", metadata={"speaker": "user"})
    ack_role = memory.remember("Sure, sounds great", space="chat", metadata={"role": "assistant"})
    substantive = memory.remember("I moved to Berlin last month for a new job at the observatory",
                                  space="chat", metadata={"speaker": "user"})
    not_chat = memory.remember("ok thanks", space="notes")
    clock.advance(days=100)
    young_ack = memory.remember("okay cool", space="chat", metadata={"role": "user"})
    clock.advance(days=10)

    result = dream(memory, max_deprecation_ratio=0.9)

    gone = acted(result, "deprecate")
    assert set(gone) == {ack, ack_role}
    assert all(entry["category"] == "stale" and "90 days" in entry["reason"] for entry in gone.values())
    for kref in (substantive, not_chat, young_ack):
        assert not deprecated(memory, kref)


def test_a_one_word_fact_in_chat_is_not_acknowledgement(memory, clock):
    fact = memory.remember("I am vegan", space="chat", metadata={"speaker": "user"})
    clock.advance(days=100)
    dream(memory, max_deprecation_ratio=0.9)
    assert not deprecated(memory, fact)


def test_look_alikes_that_differ_in_negation_or_order_are_not_duplicates(memory, clock):
    memory.remember("Alice likes cats", space="facts")
    negated = memory.remember("Alice does not like cats", space="facts")
    memory.remember("Bob owes Alice 50 dollars", space="facts")
    reversed_debt = memory.remember("Alice owes Bob 50 dollars", space="facts")
    clock.advance(days=30)
    result = dream(memory, max_deprecation_ratio=0.9)
    assert acted(result, "deprecate") == {}
    assert not deprecated(memory, negated) and not deprecated(memory, reversed_debt)


def test_three_copies_leave_only_the_keeper(memory, clock):
    keeper = memory.remember("Grace Byrne drives an orange Mazda", space="facts")
    middle = memory.remember("  Grace   Byrne   drives   an   orange   Mazda ", space="facts")
    newest = memory.remember("Grace Byrne drives an orange Mazda!", space="facts")
    clock.advance(days=30)
    for _ in range(3):
        dream(memory, max_deprecation_ratio=0.9)
    assert not deprecated(memory, keeper)
    assert deprecated(memory, newest) and deprecated(memory, middle)


def test_a_phrase_written_many_times_keeps_the_best_copy_and_names_it_in_every_reason(memory, clock):
    """Copies of one phrase are ranked once per group (a phrase said a thousand times asks the same question a
    thousand times): the keeper is still the best by the spec's order, whatever order the copies come in."""
    plain = [memory.remember(f"Dana parks in bay seven{'!' * number}", space="ops") for number in range(3)]
    graded = memory.remember("dana parks in bay seven.", space="ops", evidence_level="corroborated")
    plain += [memory.remember(f"DANA parks in bay seven{'?' * number}", space="ops") for number in range(1, 4)]
    other_kind = memory.remember("Dana parks in bay seven", space="ops", kind="note")
    clock.advance(days=30)

    proposed = acted(dream(memory, dry_run=True, max_deprecation_ratio=0.9), "deprecate")

    assert set(proposed) == set(plain)
    assert {entry["reason"] for entry in proposed.values()} == {f"duplicate of {graded}"}
    assert graded not in proposed and other_kind not in proposed


def test_the_kept_copy_of_a_repeated_acknowledgement_is_still_stale_chat(memory, clock):
    first = memory.remember("ok thanks!", space="chat", metadata={"speaker": "user"})
    second = memory.remember("ok thanks!", space="chat", metadata={"speaker": "user"})
    clock.advance(days=100)
    for _ in range(3):
        dream(memory, max_deprecation_ratio=0.9)
    assert deprecated(memory, second) and deprecated(memory, first)


# -- guardrails ------------------------------------------------------------------------------------------------

def test_official_is_never_deprecated_even_when_published_deprecation_is_allowed(memory, clock):
    first = memory.remember("The VPN gateway is vpn.example.org", space="it", evidence_level="official")
    second = memory.remember("The VPN gateway is vpn.example.org!", space="it", evidence_level="official")
    clock.advance(days=30)

    result = dream(memory, max_deprecation_ratio=0.9, allow_published_deprecation=True)

    kept = acted(result, "kept")
    assert kept[second]["guard"] == "official" and result["guarded_skips"] == {"official": 1}
    assert result["deprecated"] == 0 and result["deprecations_proposed"] == 1
    assert not deprecated(memory, first) and not deprecated(memory, second)


def test_published_is_kept_unless_published_deprecation_is_allowed(memory, clock):
    first = memory.remember("Our SLA is 99.9 percent monthly uptime", space="legal", tags=["published"])
    second = memory.remember("Our SLA is 99.9 percent monthly uptime.", space="legal", tags=["published"])
    clock.advance(days=30)

    guarded = dream(memory, max_deprecation_ratio=0.9, dry_run=True)
    assert acted(guarded, "kept")[second]["guard"] == "published"
    assert guarded["deprecated"] == 0 and guarded["guarded_skips"] == {"published": 1}
    assert "WARNING" not in guarded["report"]

    allowed = dream(memory, max_deprecation_ratio=0.9, allow_published_deprecation=True)
    assert set(acted(allowed, "deprecate")) == {second} and deprecated(memory, second)
    assert not deprecated(memory, first)
    assert "WARNING" in allowed["report"] and "allow_published_deprecation" in allowed["report"]


def test_minimum_age_from_the_environment_and_from_the_argument(memory, clock):
    memory.remember("The printer on floor two needs a PIN", space="office")
    copy = memory.remember("the printer on floor two needs a pin", space="office")
    clock.advance(days=30)

    from_env = km.DreamState.from_env(memory, environ={"KUMIHO_DREAM_MIN_AGE_DAYS": "60"}, dry_run=True)
    assert from_env.min_age_days == 60.0
    assert acted(from_env.run_sync(), "kept")[copy]["guard"] == "min_age"
    explicit = km.DreamState.from_env(memory, environ={"KUMIHO_DREAM_MIN_AGE_DAYS": "60"}, min_age_days=10,
                                      dry_run=True)
    assert explicit.min_age_days == 10 and copy in acted(explicit.run_sync(), "deprecate")
    assert km.DreamState.from_env(memory, environ={}).min_age_days == 7
    assert dream(memory, min_age_days=45, dry_run=True)["guarded_skips"] == {"min_age": 1}
    with pytest.raises(km.InvalidArgumentError):
        km.DreamState.from_env(memory, environ={"KUMIHO_DREAM_MIN_AGE_DAYS": "a week"})
    with pytest.raises(km.InvalidArgumentError):
        km.DreamState(memory, min_age_days=-1)


def test_a_duplicate_too_young_tonight_is_deprecated_once_it_is_old_enough(memory, clock):
    memory.remember("The wifi password hint is the cat's name", space="home")
    copy = memory.remember("the wifi password hint is the cat's name", space="home")
    clock.advance(days=1)
    assert dream(memory)["guarded_skips"] == {"min_age": 1}
    clock.advance(days=10)
    dream(memory)
    assert deprecated(memory, copy)


@pytest.mark.parametrize("ratio", [0.0, 0.05, 0.95, 1.0, 2, -0.5, float("nan"), True, "0.5", None])
def test_max_deprecation_ratio_outside_the_range_is_refused(memory, ratio):
    with pytest.raises(km.InvalidArgumentError) as caught:
        km.DreamState(memory, max_deprecation_ratio=ratio)
    assert isinstance(caught.value, ValueError) and "max_deprecation_ratio" in str(caught.value)


def test_the_ratio_cap_limits_a_run_and_the_deferred_are_picked_up_next_run(memory, clock):
    for number in range(4):
        memory.remember(f"Fact number {number} about the warehouse layout", space="ops")
    copies = [memory.remember(f"fact number {number} about the warehouse layout!", space="ops")
              for number in range(4)]
    for number in range(4):
        memory.remember(f"Unrelated distinct note {number} on parking spaces {number * 7}", space="ops")
    clock.advance(days=30)
    assert km.DreamState(memory, max_deprecation_ratio=0.1).max_deprecation_ratio == 0.1
    assert km.DreamState(memory, max_deprecation_ratio=0.9).max_deprecation_ratio == 0.9

    first = dream(memory, max_deprecation_ratio=0.1)        # 12 assessed -> max(1, int(1.2)) = 1
    assert first["events_processed"] == 12 and first["deprecated"] == 1
    assert first["guarded_skips"] == {"ratio_cap": 3}
    assert sum(deprecated(memory, kref) for kref in copies) == 1
    runs, processed = 1, []
    while sum(deprecated(memory, kref) for kref in copies) < 4 and runs < 6:
        result = dream(memory, max_deprecation_ratio=0.1)
        processed.append(result["events_processed"])
        assert result["deprecated"] <= max(1, int(result["events_processed"] * 0.1))
        runs += 1
    assert all(deprecated(memory, kref) for kref in copies)
    assert processed[0] > 0                                 # the cursor was held back for the deferred ones
    assert dream(memory, max_deprecation_ratio=0.1)["events_processed"] == 0


def test_the_ratio_cap_is_a_share_of_everything_assessed_not_only_of_the_proposals(memory, clock):
    for number in range(20):
        memory.remember(f"Distinct note {number} on parking bay {number * 7} for the van fleet", space="ops")
    copies = []
    for number in range(4):
        memory.remember(f"Loading dock {number} opens at six", space="ops")
        copies.append(memory.remember(f"loading dock {number} opens at six!", space="ops"))
    clock.advance(days=30)

    first = dream(memory, max_deprecation_ratio=0.1)        # 28 assessed, 4 proposed -> max(1, int(2.8)) = 2

    assert first["revisions_assessed"] == 28 and first["deprecations_proposed"] == 4
    assert first["deprecated"] == 2 and first["guarded_skips"] == {"ratio_cap": 2}
    assert sum(deprecated(memory, kref) for kref in copies) == 2


def test_dry_run_changes_nothing_and_reports_what_a_run_does(memory, clock):
    memory.remember("The staging database is db-stg-2", space="ops")
    memory.remember("the staging database is db-stg-2.", space="ops")
    old = memory.remember("Move the offsite to June", space="plans")
    memory.link(memory.remember("Move the offsite to July instead of June", space="plans"), old, "SUPERSEDES")
    memory.remember("thanks!", space="chat", metadata={"speaker": "user"})
    clock.advance(days=100)
    before = snapshot(memory)

    trial = dream(memory, dry_run=True, max_deprecation_ratio=0.9)
    assert snapshot(memory) == before
    assert trial["dry_run"] is True and trial["report_kref"] is None and "Dry run" in trial["report"]
    assert trial["deprecated"] == 3
    assert memory.items(space="_dream_state", kind="dream-state") == []
    assert dream(memory, dry_run=True, max_deprecation_ratio=0.9)["events_processed"] == trial["events_processed"]

    real = dream(memory, max_deprecation_ratio=0.9)
    assert [(a["action"], a["kref"], a.get("reason")) for a in real["actions"]] == \
        [(a["action"], a["kref"], a.get("reason")) for a in trial["actions"]]
    assert real["events_processed"] == trial["events_processed"]
    assert snapshot(memory) != before


# -- the cursor and the report -------------------------------------------------------------------------------------

def test_the_cursor_lives_in_the_graph_and_runs_resume_where_they_stopped(make_memory, clock):
    memory = make_memory()
    memory.remember("Dana's desk is in room 214", space="office")
    memory.remember("dana's desk is in room 214", space="office")
    clock.advance(days=30)
    first = dream(memory)
    assert first["events_processed"] == 2 and first["deprecated"] == 1 and first["last_cursor"]
    assert dream(memory)["events_processed"] == 0

    fresh = memory.remember("Evan's desk is in room 301", space="office")
    fresh_copy = memory.remember("Evan's desk is in room 301.", space="office")
    clock.advance(days=30)
    second = dream(memory)
    assert second["events_processed"] == 2 and set(acted(second, "deprecate")) == {fresh_copy}
    assert second["last_cursor"] > first["last_cursor"] and not deprecated(memory, fresh)


def test_the_cursor_survives_reopening_a_file_store(make_memory, clock):
    memory = make_memory()
    memory.remember("Fiona's desk is in room 118", space="office")
    clock.advance(days=30)
    cursor = dream(memory)["last_cursor"]
    memory.close()
    reopened = make_memory(reopen=True)
    again = dream(reopened)
    assert again["events_processed"] == 0 and again["last_cursor"] == cursor


def test_the_report_is_markdown_on_the_dream_state_item_with_actions_policy_and_cursor(memory, clock, tmp_path):
    original = memory.remember("Gina's phone extension is 4410", space="people")
    copy = memory.remember("gina's phone extension is 4410", space="people")
    clock.advance(days=30)
    policy = "Never deprecate anything about legal holds."
    result = dream(memory, extra_instructions=policy, report_dir=str(tmp_path / "reports"))

    report = result["report"]
    assert report.startswith("# Dream State report, ") and "## Actions" in report
    assert f"- **deprecate** `{copy}`: duplicate of {original}" in report
    assert policy in report and "## Policy" in report
    assert "## Cursor" in report and result["last_cursor"] in report
    stored = memory.get(result["report_kref"])
    assert stored["content"] == report and stored["kind"] == "dream-state" and stored["space"] == "_dream_state"
    assert stored["metadata"]["policy"] == policy
    with open(result["report_path"], encoding="utf-8") as stream:
        assert stream.read() == report
    assert os.path.dirname(result["report_path"]) == str(tmp_path / "reports")

    later = dream(memory)
    assert later["report_kref"].split("?")[0] == result["report_kref"].split("?")[0]
    assert len(memory.history(result["report_kref"].split("?")[0])) == 2
    assert "No deployment policy" in later["report"] and "None." in later["report"]


def test_system_kinds_never_appear_in_default_recall(memory, clock):
    memory.remember("Hank's parking spot is P12", space="people")
    memory.remember("hank's parking spot is P12", space="people")
    clock.advance(days=30)
    dream(memory, extra_instructions="dream state report policy cursor")
    for query in ("Dream State report", "dream state report policy cursor", "deprecate duplicate parking"):
        assert all(hit["kind"] not in km.SYSTEM_KINDS and hit["space"] != "_dream_state"
                   for hit in memory.recall(query, limit=20))
    assert memory.recall("Hank parking spot")                  # ordinary recall still works


def test_update_metadata_refuses_evidence_carriers(memory):
    kref = memory.remember("Ivy manages the Oslo office", space="people", source="hr-sheet")
    before = memory.get(kref)["metadata"]
    for key in ("evidence_level", "source", "sources", "confidence"):
        with pytest.raises(km.InvalidArgumentError) as caught:
            memory.update_metadata(kref, {key: "official", "topic": "offices"})
        assert isinstance(caught.value, ValueError) and key in str(caught.value)
    assert memory.get(kref)["metadata"] == before
    assert memory.update_metadata(kref, {"topic": "offices"})["metadata"]["topic"] == "offices"


# -- the LLM path (a real loopback OpenAI-compatible server) ---------------------------------------------------------

def test_llm_enrichment_never_touches_evidence_carriers_and_links_related_memories(memory, clock, llm):
    trip = memory.remember("Trip to Kyoto booked for April", space="travel", source="email", tags=["published"])
    hotel = memory.remember("Hotel near Kyoto station confirmed", space="travel", evidence_level="single_source")
    boss = memory.remember("The CEO is Jun Park", space="company", evidence_level="official")
    clock.advance(days=30)

    def decide(entry, entries):
        if entry["kref"] == trip:
            return {"suggested_tags": ["travel", "evidence:official", "published", "latest", "bad tag!"],
                    "metadata_updates": [{"key": "topic", "value": "kyoto"},
                                         {"key": "evidence_level", "value": "official"},
                                         {"key": "source", "value": "made-up"}, {"key": "sources", "value": []},
                                         {"key": "confidence", "value": 1.0}],
                    "related_indices": [1], "relationship_type": "depends_on",
                    "should_deprecate": True, "deprecation_reason": "the booking is covered elsewhere"}
        if entry["kref"] == boss:
            return {"should_deprecate": True, "deprecation_reason": "looks outdated to the model",
                    "metadata_updates": {"evidence_level": "unverified", "role": "ceo"}}
        return {"suggested_tags": ["hotel"], "relevance_score": 0.9}
    llm.decide = decide
    before = {kref: memory.get(kref) for kref in (trip, hotel, boss)}

    result = dream(memory, llm_adapter=adapter(llm), model="gpt-4o-mini", max_deprecation_ratio=0.9)

    assert result["errors"] == [] and result["revisions_assessed"] == 3
    after = {kref: memory.get(kref) for kref in (trip, hotel, boss)}
    assert "travel" in after[trip]["tags"] and "hotel" in after[hotel]["tags"]
    for kref in (trip, hotel, boss):
        evidence_tags = lambda record: sorted(t for t in record["tags"] if t.startswith("evidence:"))
        assert evidence_tags(after[kref]) == evidence_tags(before[kref])
        for key in km.EVIDENCE_METADATA_KEYS:
            assert after[kref]["metadata"].get(key) == before[kref]["metadata"].get(key)
    assert after[trip]["metadata"]["topic"] == "kyoto" and after[boss]["metadata"]["role"] == "ceo"
    assert "evidence:official" not in after[trip]["tags"] and "published" not in after[hotel]["tags"]
    assert [(edge["target_kref"], edge["edge_type"]) for edge in
            memory.edges(trip, direction="outgoing", edge_type="DEPENDS_ON")] == [(hotel, "DEPENDS_ON")]
    assert result["edges_created"] == 1 and result["metadata_updated"] == 2
    kept = acted(result, "kept")
    assert kept[trip]["guard"] == "published" and kept[boss]["guard"] == "official"
    assert not any(after[kref]["deprecated"] for kref in (trip, hotel, boss))
    assert all(entry["category"] == "llm" for entry in kept.values())


def test_llm_corroborated_needs_a_stated_reason_and_a_referenced_memory_is_kept(memory, clock, llm):
    terse = memory.remember("Kai joined the platform team", space="people", evidence_level="corroborated")
    explained = memory.remember("Lea joined the data team", space="people", evidence_level="corroborated")
    target = memory.remember("Mo leads the data team", space="people")
    linker = memory.remember("Lea reports to Mo", space="people")
    clock.advance(days=30)
    reasons = {terse: "dup", explained: "restates a newer, fuller record of the same move",
               target: "superseded by the org chart"}
    llm.decide = lambda entry, entries: (
        {"should_deprecate": True, "deprecation_reason": reasons[entry["kref"]]} if entry["kref"] in reasons else
        {"related_indices": [index for index, other in enumerate(entries) if other["kref"] == target],
         "relationship_type": "REFERENCED"})

    result = dream(memory, llm_adapter=adapter(llm), max_deprecation_ratio=0.9)

    kept = acted(result, "kept")
    assert kept[terse]["guard"] == "corroborated_without_reason" and not deprecated(memory, terse)
    assert kept[target]["guard"] == "referenced" and not deprecated(memory, target)
    assert set(acted(result, "deprecate")) == {explained} and deprecated(memory, explained)
    assert memory.edges(linker, direction="outgoing", edge_type="REFERENCED")[0]["target_kref"] == target


def test_policy_reaches_the_system_prompt_from_the_argument_and_the_environment(memory, clock, llm):
    memory.remember("Nora's badge number is 5521", space="people")
    clock.advance(days=30)
    policy = "Keep every memory that mentions badge numbers."
    dream(memory, llm_adapter=adapter(llm), extra_instructions=policy, dry_run=True)
    assert len(llm.system_prompts()) == 1 and policy in llm.system_prompts()[0]
    assert llm.system_prompts()[0].startswith(km.DREAM_SYSTEM_PROMPT)

    env_policy = "Environment policy: be extra careful with HR records."
    from_env = km.DreamState.from_env(memory, environ={"KUMIHO_DREAM_EXTRA_INSTRUCTIONS": env_policy},
                                      llm_adapter=adapter(llm), dry_run=True)
    assert from_env.extra_instructions == env_policy
    result = from_env.run_sync()
    assert env_policy in llm.system_prompts()[1] and env_policy in result["report"]
    assert result["extra_instructions"] == env_policy
    explicit = km.DreamState.from_env(memory, environ={"KUMIHO_DREAM_EXTRA_INSTRUCTIONS": env_policy},
                                      extra_instructions=policy)
    assert explicit.extra_instructions == policy
    assert km.DreamState.from_env(memory, environ={}).extra_instructions == ""


def test_a_poison_item_is_retried_then_parked_while_the_rest_go_on(memory, clock, llm):
    good_first = memory.remember("Omar's office is on floor three", space="people")
    poison = memory.remember("POISON: a memory the model cannot assess", space="people")
    good_last = memory.remember("Pia's office is on floor five", space="people")
    clock.advance(days=30)
    llm.decide = lambda entry, entries: {"suggested_tags": ["office"]}
    llm.script("garbage", body=b"<html>502 Bad Gateway</html>")       # a proxy error page first
    run = lambda: dream(memory, llm_adapter=adapter(llm))

    first = run()
    assert first["parked"] == 0 and first["revisions_assessed"] == 2 and first["errors"]
    assert "office" in memory.get(good_first)["tags"] and "office" in memory.get(good_last)["tags"]
    second = run()                                    # the cursor stopped before the poison item
    assert second["events_processed"] == 2 and second["parked"] == 1
    parks = acted(second, "park")
    assert set(parks) == {poison} and "2 runs" in parks[poison]["reason"]
    assert f"**park** `{poison}`" in second["report"] and "## Errors" in second["report"]
    third = run()
    assert third["events_processed"] == 0 and third["errors"] == []
    assert not deprecated(memory, poison)


def test_a_lone_poison_item_left_behind_the_cursor_is_parked_eventually(memory, clock, llm):
    memory.remember("Quinn's office is on floor two", space="people")
    poison = memory.remember("POISON: a memory the model cannot assess", space="people")
    clock.advance(days=30)
    results = [dream(memory, llm_adapter=adapter(llm)) for _ in range(4)]
    assert sum(result["parked"] for result in results) == 1
    assert poison in acted(results[-1], "park") or results[-1]["events_processed"] == 0


def test_a_service_outage_parks_nothing_and_does_not_move_the_cursor(memory, clock, llm):
    first = memory.remember("Rosa's locker is 17", space="people")
    memory.remember("Sam's locker is 18", space="people")
    clock.advance(days=30)
    llm.script("status", times=6, code=500, message="upstream overloaded")

    down = dream(memory, llm_adapter=adapter(llm))
    assert down["parked"] == 0 and down["revisions_assessed"] == 0 and down["last_cursor"] is None
    assert any("overloaded" in error or "500" in error for error in down["errors"])
    # still down (3 calls a run: the batch, then each alone)
    assert dream(memory, llm_adapter=adapter(llm))["last_cursor"] is None

    llm.decide = lambda entry, entries: {"suggested_tags": ["lockers"]}
    recovered = dream(memory, llm_adapter=adapter(llm))
    assert recovered["events_processed"] == 2 and recovered["errors"] == [] and recovered["parked"] == 0
    assert "lockers" in memory.get(first)["tags"] and recovered["last_cursor"]


# -- CLI ----------------------------------------------------------------------------------------------------------

def _prepared_store(path: str, project: str = km.DEFAULT_PROJECT) -> tuple[str, str]:
    """A store file whose memories date from 2026-01-01, long before the wall clock."""
    with km.Memory(path, project=project, clock=km.ManualClock("2026-01-01T00:00:00Z", tick=1)) as memory:
        original = memory.remember("Tara's desk is next to the east window", space="office")
        copy = memory.remember("tara's desk is next to the east window!", space="office")
        memory.remember("Uma's desk is next to the west window", space="office")
    return original, copy


def test_cli_dream_dry_run_then_a_real_run(tmp_path, capsys):
    path = str(tmp_path / "cli.db")
    original, copy = _prepared_store(path)
    assert km.main(["--db", path, "dream", "--dry-run", "--json"]) == 0
    trial = json.loads(capsys.readouterr().out)
    assert trial["dry_run"] is True and trial["deprecated"] == 1 and trial["report_kref"] is None
    assert [(a["action"], a["kref"]) for a in trial["actions"]] == [("deprecate", copy)]

    assert km.main(["--db", path, "dream", "--json", "--policy", "keep window facts", "--report-dir",
                    str(tmp_path / "reports")]) == 0
    real = json.loads(capsys.readouterr().out)
    assert real["dry_run"] is False and real["deprecated"] == 1 and real["report_kref"].startswith("kref://")
    assert real["extra_instructions"] == "keep window facts" and os.path.exists(real["report_path"])
    assert {"events_processed", "revisions_assessed", "guarded_skips", "last_cursor", "errors"} <= set(real)
    with km.Memory(path) as memory:
        assert deprecated(memory, copy) and not deprecated(memory, original)

    assert km.main(["--db", path, "dream"]) == 0
    assert capsys.readouterr().out.startswith("# Dream State report")


def test_cli_dream_refuses_a_ratio_out_of_range(tmp_path, capsys):
    path = str(tmp_path / "cli.db")
    _prepared_store(path)
    before = open(path, "rb").read()
    code = km.main(["--db", path, "dream", "--max-deprecation-ratio", "2"])
    assert code in (1, 2)
    err = capsys.readouterr().err
    assert "max_deprecation_ratio" in err and "0.1" in err and "0.9" in err
    with km.Memory(path) as memory:
        assert memory.items(space="_dream_state", kind="dream-state") == []
        assert not any(item["deprecated"] for item in memory.items(include_deprecated=True))
    del before


# -- MCP ----------------------------------------------------------------------------------------------------------

def test_mcp_dream_state_and_space_profile_through_the_client(tmp_path):
    test_mcp = pytest.importorskip("test_mcp")
    if test_mcp.mcp is None:
        pytest.skip("the 'mcp' package is not installed")
    home = tmp_path / "home"
    home.mkdir()
    path = str(tmp_path / "memory.db")
    original, copy = _prepared_store(path, project="McpTest")

    async def scenario() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        async with test_mcp._session(path, str(home)) as session:
            trial = test_mcp._structured(await session.call_tool("kumiho_memory_dream_state", {"dry_run": True}))
            real = test_mcp._structured(await session.call_tool(
                "kumiho_memory_dream_state", {"max_deprecation_ratio": 0.9, "extra_instructions": "via mcp"}))
            profile = test_mcp._structured(await session.call_tool("kumiho_memory_space_profile", {}))
            refused = await session.call_tool("kumiho_memory_dream_state", {"max_deprecation_ratio": 2})
            assert test_mcp._is_error(refused) and "max_deprecation_ratio" in test_mcp._text(refused)
            return trial, real, profile

    trial, real, profile = test_mcp._run(scenario())
    assert trial["dry_run"] is True and trial["report_kref"] is None and trial["deprecated"] == 1
    assert [(a["action"], a["kref"]) for a in trial["actions"]] == [("deprecate", copy)]
    assert real["success"] is True and real["dry_run"] is False and real["deprecated"] == 1
    assert real["report_kref"].startswith("kref://McpTest/_dream_state/") and "via mcp" in real["report"]
    assert real["last_cursor"] and real["guarded_skips"] == {}
    assert profile["success"] is True and profile["spaces_profiled"] >= 1 and "office" in profile["profiles"]
    assert "_dream_state" not in profile["profiles"]      # a job's bookkeeping space is not knowledge
    with km.Memory(path, project="McpTest") as memory:
        assert deprecated(memory, copy) and not deprecated(memory, original)


class VerifierServer(OpenAIServer):
    """A loopback OpenAI-compatible verifier: ``verdict(proposal)`` gives each proposal's ``refute`` value
    (``None`` leaves the verdict out)."""

    def __init__(self) -> None:
        super().__init__(api_key=API_KEY)
        self.verdict: Callable[[dict[str, Any]], Any] = lambda proposal: False

    def answer(self, body: dict[str, Any], reply: Any) -> dict[str, Any]:
        if reply is None:
            proposals = json.loads(_last_user_text(body))["proposals"]
            verdicts = [{"index": p["index"], "refute": self.verdict(p), "why": "checked"}
                        for p in proposals if self.verdict(p) is not None]
            reply = json.dumps({"verdicts": verdicts})
        return super().answer(body, reply)


@pytest.mark.parametrize("answer", ["confirms", "refutes", "silent", "down"])
def test_a_verifier_must_explicitly_not_refute_a_deprecation(memory, clock, answer):
    keep = memory.remember("Vera's badge number is 4471", space="people")
    copy = memory.remember("vera's badge number is 4471!", space="people")
    clock.advance(days=30)
    server = VerifierServer().start()
    try:
        server.verdict = {"confirms": lambda p: False, "refutes": lambda p: True, "silent": lambda p: None,
                          "down": lambda p: False}[answer]
        if answer == "down":
            server.script("status", times=5, code=500, message="verifier overloaded")
        result = dream(memory, verifier=adapter(server), verifier_model="checker")
    finally:
        server.stop()
    assert result["deprecations_proposed"] == 1
    if answer == "confirms":
        assert result["deprecated"] == 1 and result["refuted_skips"] == 0 and deprecated(memory, copy)
    else:
        assert result["deprecated"] == 0 and result["refuted_skips"] == 1 and not deprecated(memory, copy)
        assert acted(result, "kept")[copy]["guard"] == "verifier"
    assert not deprecated(memory, keep)
    if answer == "down":
        assert any(error.startswith("verifier:") for error in result["errors"])


def test_reference_arguments_project_cursor_and_artifact_root(memory, clock, tmp_path):
    memory.remember("Wes parks in bay 9", space="people")
    memory.remember("wes parks in bay 9.", space="people")
    clock.advance(days=30)
    with pytest.raises(km.InvalidArgumentError):
        km.DreamState(memory, project="SomeOtherProject")
    with pytest.raises(km.InvalidArgumentError):
        km.DreamState(memory, cursor_item_name="no/slashes")
    result = km.DreamState(memory=memory, project=memory.project, cursor_item_name="_tidy",
                           artifact_root=str(tmp_path)).run_sync()
    assert result["report_kref"].startswith(f"kref://{memory.project}/_tidy/")
    assert result["report_path"].startswith(str(tmp_path / memory.project / "_tidy" / "reports"))
    assert km.DreamState(memory, cursor_item_name="_tidy").run_sync()["events_processed"] == 0


# -- regressions from review ----------------------------------------------------------------------------------------

def test_a_suggested_supersedes_link_never_hides_a_protected_memory(memory, clock, llm):
    official = memory.remember("The CEO is Jun Park", space="company", evidence_level="official", tags=["published"])
    other = memory.remember("Jun Park chairs the Monday meeting", space="company")
    clock.advance(days=30)
    llm.decide = lambda entry, entries: ({"related_indices": [0], "relationship_type": "SUPERSEDES"}
                                         if entry["kref"] == other else {})
    result = dream(memory, llm_adapter=adapter(llm))
    assert not memory.edges(official, direction="incoming", edge_type="SUPERSEDES")
    assert [edge["edge_type"] for edge in memory.edges(other, direction="outgoing")] == ["REFERENCED"]
    assert official in [hit["kref"] for hit in memory.recall("Who is the CEO?")]
    assert result["errors"] == []


def test_enrichment_only_adds_and_a_bad_suggestion_does_not_stop_the_run(memory, clock, llm):
    kept = memory.remember("Alice met Bob at the fair", space="chat",
                           metadata={"event_date": "2025-03-01", "speaker": "alice"})
    bad = memory.remember("Carol booked the venue", space="chat")
    clock.advance(days=30)

    def decide(entry, entries):
        if entry["kref"] == kept:
            return {"metadata_updates": [{"key": "event_date", "value": None}, {"key": "speaker", "value": "mallory"},
                                         {"key": "topic", "value": "fair"}]}
        return {"metadata_updates": [{"key": "event_date", "value": "last tuesday"}], "suggested_tags": ["venue"]}
    llm.decide = decide
    result = dream(memory, llm_adapter=adapter(llm))
    assert memory.get(kept)["metadata"] == {"event_date": "2025-03-01", "speaker": "alice", "topic": "fair"}
    assert "event_date" not in memory.get(bad)["metadata"] and "venue" in memory.get(bad)["tags"]
    assert any("enrichment refused" in error for error in result["errors"])
    assert result["report_kref"] and result["last_cursor"]          # the run finished and saved its cursor


def test_damaged_dream_state_bookkeeping_starts_over_instead_of_failing(memory, clock):
    memory.remember("Dana's desk is 12", space="people")
    clock.advance(days=30)
    memory.remember("not a report", space="_dream_state", kind="dream-state", key="cursor",
                    metadata={"dream_state": {"cursor": {"no": 1}, "failures": [1, 2], "parked": "x", "runs": "many"}})
    result = dream(memory)
    assert result["success"] is True and result["events_processed"] >= 1
