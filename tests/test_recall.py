"""The recall engine: issue 3, items 1-5 and 8 (plus parse_time_window and the RecallIndex property).

Store-backed tests use the ``memory`` fixture, so each runs on every backend in ``conftest.BACKENDS``.
"""

from __future__ import annotations

import collections
import copy
import dataclasses
import datetime as dt
import io
import math
import os
import random
import subprocess
import sys
import textwrap

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kumiho_memory as km

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
UTC = dt.timezone.utc


# -- helpers ---------------------------------------------------------------------------------------------

def item_of(kref: str) -> str:
    """The bare item kref of a revision kref."""
    return str(km.Kref.parse(kref).item_kref())


def krefs(results: list[dict]) -> list[str]:
    return [result["kref"] for result in results]


def contents(results: list[dict]) -> list[str]:
    return [result["content"] for result in results]


def rank(results: list[dict], kref: str) -> int:
    """Position of ``kref`` in the results (a large number when absent)."""
    found = krefs(results)
    return found.index(kref) if kref in found else 10_000


def export_text(memory: km.Memory) -> str:
    buffer = io.StringIO()
    memory.export_jsonl(buffer)
    return buffer.getvalue()


def as_form(moment: dt.datetime, form: str):
    """``moment`` as an ISO string, a datetime or epoch seconds."""
    return {"iso": moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ"), "datetime": moment,
            "epoch": moment.timestamp()}[form]


# ==========================================================================================================
# 1. Current state, history and time travel
# ==========================================================================================================

def test_keyed_item_with_three_revisions_appears_once_as_its_latest(memory):
    r1 = memory.remember("The editor colour theme is dark", key="ui.theme")
    r2 = memory.remember("The editor colour theme is light", key="ui.theme")
    r3 = memory.remember("The editor colour theme is solarized", key="ui.theme")
    other = memory.remember("The terminal font is monospace")
    assert item_of(r1) == item_of(r2) == item_of(r3)

    results = memory.recall("editor colour theme", limit=10)

    assert krefs(results) == [r3]
    assert results[0]["revision"] == 3
    assert results[0]["content"] == "The editor colour theme is solarized"
    assert results[0]["item_kref"] == item_of(r3)
    assert other not in krefs(results)


def test_deprecated_revision_falls_back_to_the_previous_live_revision(memory):
    r1 = memory.remember("Garden tomatoes were planted in spring", key="garden")
    r2 = memory.remember("Garden tomatoes were planted in summer", key="garden")
    assert krefs(memory.recall("garden tomatoes planted")) == [r2]

    memory.deprecate(r2)
    assert krefs(memory.recall("garden tomatoes planted")) == [r1]

    memory.deprecate(r1)
    assert memory.recall("garden tomatoes planted") == []

    memory.deprecate(r2, False)
    assert krefs(memory.recall("garden tomatoes planted")) == [r2]


def test_deprecated_item_is_absent_and_comes_back_when_restored(memory):
    kept = memory.remember("The boiler pressure should read 1.5 bar")
    retired = memory.remember("The boiler pressure should read 2.5 bar")
    assert set(krefs(memory.recall("boiler pressure", limit=10))) == {kept, retired}

    memory.deprecate(item_of(retired))
    assert krefs(memory.recall("boiler pressure", limit=10)) == [kept]

    memory.deprecate(item_of(retired), False)
    assert set(krefs(memory.recall("boiler pressure", limit=10))) == {kept, retired}


def test_revision_superseded_by_another_item_is_absent_but_kept_in_history(memory):
    old = memory.remember("The office wifi password is hunter2")
    new = memory.remember("The office wifi password is swordfish")
    assert set(krefs(memory.recall("office wifi password", limit=10))) == {old, new}

    memory.link(new, old, "SUPERSEDES")

    assert krefs(memory.recall("office wifi password", limit=10)) == [new]
    assert set(krefs(memory.recall("office wifi password", limit=10, include_superseded=True))) == {old, new}


def test_revised_published_belief_stays_published_and_recall_shows_the_revision(memory):
    r1 = memory.remember("Staff get twenty vacation days", key="policy.vacation")
    memory.tag(r1, "published")
    r2 = memory.remember("Staff get twenty five vacation days", key="policy.vacation")

    assert "published" in memory.get(r2)["tags"]
    assert "published" not in memory.get(r1)["tags"]
    results = memory.recall("vacation days staff", limit=10)
    assert krefs(results) == [r2]
    assert "published" in results[0]["tags"]


def test_published_revision_is_shown_instead_of_a_newer_unpublished_one(memory):
    r1 = memory.remember("The cafe opens at nine", key="cafe.hours")
    r2 = memory.remember("The cafe opens at ten", key="cafe.hours")
    assert krefs(memory.recall("cafe opens")) == [r2]

    memory.tag(r1, "published")
    assert krefs(memory.recall("cafe opens")) == [r1]

    memory.untag(r1, "published")
    assert krefs(memory.recall("cafe opens")) == [r2]

    memory.tag(r1, "published")
    memory.deprecate(r1)                      # a deprecated published revision gives way to the newest live one
    assert krefs(memory.recall("cafe opens")) == [r2]


def test_include_superseded_returns_every_live_revision(memory):
    r1 = memory.remember("Backups run nightly at one", key="backups")
    r2 = memory.remember("Backups run nightly at two", key="backups")
    r3 = memory.remember("Backups run nightly at three", key="backups")

    assert krefs(memory.recall("backups nightly", limit=10)) == [r3]
    history = memory.recall("backups nightly", limit=10, include_superseded=True)
    assert sorted(krefs(history)) == sorted([r1, r2, r3])
    assert sorted(result["revision"] for result in history) == [1, 2, 3]


@pytest.mark.parametrize("form", ["iso", "datetime", "epoch"])
def test_as_of_recalls_what_was_current_then(memory, clock, form):
    a = memory.remember("The project codename is Falcon", key="codename")
    after_a = clock.now()
    clock.advance(100)
    b = memory.remember("The project codename is Eagle", key="codename")
    after_b = clock.now()
    clock.advance(100)
    memory.deprecate(item_of(a))
    after_deprecation = clock.now()
    before_creation = dt.datetime(2025, 12, 31, tzinfo=UTC)

    def at(moment):
        return contents(memory.recall("project codename", limit=10, as_of=as_form(moment, form)))

    assert at(before_creation) == []
    assert at(after_a) == ["The project codename is Falcon"]
    assert at(after_b) == ["The project codename is Eagle"]
    assert at(after_deprecation) == []
    assert krefs(memory.recall("project codename", as_of=as_form(after_a, form))) == [a]
    assert krefs(memory.recall("project codename", as_of=as_form(after_b, form))) == [b]
    assert memory.recall("project codename") == []          # and now


def test_as_of_respects_published_and_supersession_history(memory, clock):
    r1 = memory.remember("Release train leaves on Monday", key="release")
    r2 = memory.remember("Release train leaves on Tuesday", key="release")
    before_tag = clock.now()
    clock.advance(10)
    memory.tag(r1, "published")
    after_tag = clock.now()
    clock.advance(10)
    replacement = memory.remember("Release train leaves on Friday now")
    memory.link(replacement, r1, "SUPERSEDES")
    after_link = clock.now()

    assert krefs(memory.recall("release train leaves", limit=10, as_of=before_tag)) == [r2]
    assert krefs(memory.recall("release train leaves", limit=10, as_of=after_tag)) == [r1]
    assert krefs(memory.recall("release train leaves", limit=10, as_of=after_link)) == [replacement]


def test_deprecating_twice_keeps_the_original_deprecation_time(memory, clock):
    a = memory.remember("The spare key is under the mat")
    memory.deprecate(a)
    clock.advance(60)
    deprecated_then = clock.now()
    clock.advance(60)
    assert memory.recall("spare key", as_of=deprecated_then) == []

    memory.deprecate(a)            # already deprecated: nothing about the past may change

    assert memory.recall("spare key", as_of=deprecated_then) == []


# ==========================================================================================================
# 2. The index follows every write (no rebuild), here and across processes
# ==========================================================================================================

def test_every_write_is_reflected_in_the_next_recall_without_a_rebuild(memory, monkeypatch):
    loads = []
    original_load = km._RecallState.load

    def counting_load(self, conn):
        loads.append(1)
        return original_load(self, conn)

    monkeypatch.setattr(km._RecallState, "load", counting_load)

    first = memory.remember("Quarterly revenue grew by twelve percent")
    assert krefs(memory.recall("quarterly revenue")) == [first]
    assert len(loads) == 1

    # remember more
    second = memory.remember("Lighthouse keepers log the tides")
    assert krefs(memory.recall("lighthouse tides")) == [second]

    # revise (keyed): the new words are found, the old ones no longer
    v1 = memory.remember("The meeting room is Orchid", key="room")
    assert krefs(memory.recall("meeting room orchid")) == [v1]
    v2 = memory.remember("The meeting room is Tulip", key="room")
    assert krefs(memory.recall("tulip")) == [v2]
    assert memory.recall("orchid") == []
    assert krefs(memory.recall("orchid", include_superseded=True)) == [v1]

    # tag published on the older revision: it becomes the one shown
    memory.tag(v1, "published")
    assert krefs(memory.recall("meeting room")) == [v1]

    # deprecate
    memory.deprecate(item_of(second))
    assert memory.recall("lighthouse tides") == []

    # link: a SUPPORTS neighbour of the top hit is pulled in
    support = memory.remember("Analysts credit subscription sales")
    assert krefs(memory.recall("quarterly revenue")) == [first]
    memory.link(support, first, "SUPPORTS")
    linked = memory.recall("quarterly revenue")
    assert krefs(linked) == [first, support]

    # forget
    memory.forget(item_of(first))
    assert memory.recall("quarterly revenue") == []

    assert len(loads) == 1, "the recall index was rebuilt instead of updated"


def test_recall_sees_another_process_writes_and_forgets(tmp_path, clock, ids):
    path = str(tmp_path / "shared.db")
    with km.Memory(path, clock=clock, ids=ids) as memory:
        kept = memory.remember("Penguins huddle together in the antarctic winter")
        doomed = memory.remember("Penguins dive for krill in the antarctic summer")
        assert set(krefs(memory.recall("antarctic penguins", limit=10))) == {kept, doomed}

        child = textwrap.dedent(f"""
            import kumiho_memory as km
            with km.Memory({path!r}, clock=km.ManualClock("2026-02-01T00:00:00Z", tick=1.0),
                           ids=km.SequentialIds(start=1000)) as other:
                print(other.remember("Emperor penguins breed on antarctic sea ice"))
                other.forget({item_of(doomed)!r})
        """)
        env = {**os.environ, "PYTHONPATH": ROOT}
        done = subprocess.run([sys.executable, "-c", child], env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        added = done.stdout.strip()

        after = krefs(memory.recall("antarctic penguins", limit=10))
        assert added in after
        assert kept in after
        assert doomed not in after
        assert len(after) == 2


def _fresh(memory: km.Memory, query: str, **options) -> list[dict]:
    """``memory.recall`` with the embedded engine's kept records and postings dropped first: what the tables
    hold now, to hold a recall served from them against."""
    state = memory.backend._recall
    if state is not None:
        state.records.clear()
        state.within.clear()
    return memory.recall(query, **options)


def _warm(memory: km.Memory, query: str, **options) -> list[dict]:
    """Recall twice, so the kept records and (from a scope's second search on) its postings are in use."""
    memory.recall(query, **options)
    return memory.recall(query, **options)


def test_recall_serves_nothing_stale_after_this_process_writes(tmp_path, clock, ids):
    # recall keeps the records it returned and each searched scope's postings (issue 18 item 7): every
    # write must drop what it changes, and a caller editing a result must not edit what is kept
    with km.Memory(str(tmp_path / "kept.db"), clock=clock, ids=ids) as memory:
        for number in range(4):             # postings are kept for a scope that holds at most half the index
            memory.remember(f"River otters elsewhere, note {number}", space="elsewhere")
        otter = memory.remember("Otters hold hands while they sleep in the river", space="zoo")
        memory.remember("Otters crack shellfish open with river stones", space="zoo",
                        metadata={"keeper": "Ann"})
        options = {"space": "zoo", "limit": 10}
        first = _warm(memory, "otters river", **options)
        first[0]["metadata"]["keeper"] = "edited by the caller"
        first[0]["tags"].append("edited")
        assert memory.recall("otters river", **options) == _fresh(memory, "otters river", **options)

        writes = [lambda: memory.tag(otter, "published"),
                  lambda: memory.update_metadata(otter, {"keeper": "Bo"}),
                  lambda: memory.remember("Sea otters float on their backs near the river mouth", space="zoo"),
                  lambda: memory.deprecate(item_of(otter)),
                  lambda: memory.deprecate(item_of(otter), False),
                  lambda: memory.forget(item_of(otter))]
        for write in writes:
            before = _warm(memory, "otters river", **options)
            write()
            served = memory.recall("otters river", **options)
            assert served == _fresh(memory, "otters river", **options)
            assert served != before                      # each write changes what this query returns
        assert otter not in krefs(served) and len(served) == 2


def test_recall_serves_nothing_stale_after_another_process_writes(tmp_path, clock, ids):
    path = str(tmp_path / "shared-kept.db")
    with km.Memory(path, clock=clock, ids=ids) as memory:
        for number in range(4):
            memory.remember(f"Herons of another marsh, note {number}", space="elsewhere")
        tagged = memory.remember("Herons stand still in the shallow marsh water", space="birds")
        doomed = memory.remember("Herons nest high in the marsh reeds", space="birds")
        options = {"space": "birds", "limit": 10}
        before = _warm(memory, "herons marsh", **options)
        assert set(krefs(before)) == {tagged, doomed}

        child = textwrap.dedent(f"""
            import kumiho_memory as km
            with km.Memory({path!r}, clock=km.ManualClock("2026-02-01T00:00:00Z", tick=1.0),
                           ids=km.SequentialIds(start=1000)) as other:
                print(other.remember("Grey herons hunt fish in the marsh at dawn", space="birds"))
                other.tag({tagged!r}, "published")
                other.update_metadata({tagged!r}, {{"seen": "dawn"}})
                other.forget({item_of(doomed)!r})
        """)
        env = {**os.environ, "PYTHONPATH": ROOT}
        done = subprocess.run([sys.executable, "-c", child], env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        added = done.stdout.strip()

        served = memory.recall("herons marsh", **options)
        assert served == _fresh(memory, "herons marsh", **options)
        assert set(krefs(served)) == {tagged, added}
        kept = next(result for result in served if result["kref"] == tagged)
        assert "published" in kept["tags"] and kept["metadata"]["seen"] == "dawn"


def test_recall_index_search_within_a_scope_matches_a_full_read():
    """``within`` keeps each term's postings within ``eligible``: the searches that read them give, to the
    last bit, what a search without them gives, on the fast path and on the pruning one alike."""
    rnd = random.Random(18)
    index = km.RecallIndex()
    for doc_id in range(3000):
        words = rnd.choices(VOCABULARY[:6] + ["rare"] * (doc_id % 97 == 0), k=rnd.randint(1, 6))
        index.add(doc_id, {word: float(words.count(word)) for word in words}, len(words), short=doc_id % 3 == 0)
    eligible = {doc for doc in range(3000) if doc % 7 < 2}
    within: dict = {}
    for query in (["rare"], ["rare", VOCABULARY[5]], VOCABULARY[:3], ["rare"], ["rare", VOCABULARY[5]]):
        weights = index.term_weights(query)
        for k in (1, 5, 50):
            assert index.search(weights, k, eligible, within) == index.search(weights, k, eligible)
    assert within, "no query took the path that keeps postings"
    assert all(index.slot_doc[slot] in eligible for slots, _ in within.values() for slot in slots)


# ==========================================================================================================
# 3. Signals: who, neighbours, when, typed edges
# ==========================================================================================================

def test_who_a_query_naming_a_speaker_ranks_their_memory_first(memory):
    caroline = memory.remember("I went hiking in the mountains last weekend", space="chat-a",
                               metadata={"speaker": "Caroline"})
    melanie = memory.remember("I went hiking up in the mountains last weekend", space="chat-b",
                              metadata={"speaker": "Melanie"})
    # Without a name the words alone put Melanie's (newer) memory first ...
    plain = memory.recall("hiking in the mountains", limit=10)
    assert krefs(plain)[0] == melanie

    # ... naming Caroline lifts hers.
    results = memory.recall("Where did Caroline go hiking in the mountains?", limit=10)
    assert krefs(results) == [caroline, melanie]
    assert "who" in results[0]["signals"]
    assert "who" not in results[1]["signals"]
    assert results[0]["score"] > results[1]["score"]


def _message(memory, speaker, text, *, session="s1", space="chat"):
    return memory.remember(f"{speaker}: {text}", space=space, metadata={"speaker": speaker, "session": session})


def test_messages_in_order_are_linked_newer_to_older_within_one_session(memory):
    m1 = _message(memory, "Caroline", "Good morning!")
    m2 = _message(memory, "Melanie", "Morning, how was the trip?")
    other_session = _message(memory, "Caroline", "Reminder about tomorrow", session="s2")
    other_space = _message(memory, "Melanie", "A note in another chat", space="chat-2")
    m3 = _message(memory, "Caroline", "The trip was wonderful.")
    note = memory.remember("Not a message at all", space="chat")

    def follows(kref):
        return sorted((edge["source_kref"], edge["target_kref"]) for edge in memory.edges(kref, edge_type="FOLLOWS"))

    assert follows(m1) == [(m2, m1)]
    assert follows(m2) == sorted([(m2, m1), (m3, m2)])
    assert follows(m3) == [(m3, m2)]
    assert follows(other_session) == []                  # first of its session: nothing before it
    assert follows(other_space) == []
    assert follows(note) == []


def test_neighbour_question_finds_the_answer_message(memory):
    _message(memory, "Caroline", "Good morning, did you sleep well?")
    question = _message(memory, "Melanie", "Which instrument do you practise on weekends?")
    other_session = _message(memory, "Melanie", "The bus was late again today.", session="s2")
    answer = _message(memory, "Caroline", "Mostly the violin, sometimes the cello.")
    _message(memory, "Melanie", "Lovely. My garden needs weeding.")
    lawn = _message(memory, "Caroline", "I should mow the lawn.")
    resting = _message(memory, "Melanie", "Weekends are for resting, honestly.")
    query = "What instrument is practised at weekends?"
    assert not set(km.tokenize(memory.get(answer)["content"])) & set(km.tokenize(query))

    results = memory.recall(query, limit=10, space="chat")

    assert krefs(results)[0] == question
    assert answer in krefs(results)
    assert rank(results, answer) < rank(results, lawn)
    assert rank(results, answer) < rank(results, resting)
    assert other_session not in krefs(results)           # remembered right after the question, other session


def test_forgetting_the_last_message_does_not_link_the_next_one_to_an_unrelated_memory(memory):
    first = _message(memory, "Ann", "hello there")
    last = _message(memory, "Ann", "are you around")
    memory.forget(item_of(last))
    unrelated = memory.remember("Quarterly tax filing deadline", space="finance")
    following = _message(memory, "Ann", "see you tomorrow")

    targets = [edge["target_kref"] for edge in memory.edges(following, direction="outgoing", edge_type="FOLLOWS")]

    assert unrelated not in targets and following not in targets
    assert set(targets) <= {first}


def test_when_a_named_month_ranks_the_matching_event_date_first(memory):
    may = memory.remember("We adopted a puppy from the shelter", metadata={"event_date": "2023-05-08"})
    older = memory.remember("We adopted a puppy from the shelter", metadata={"event_date": "2022-01-10"})
    assert krefs(memory.recall("adopted puppy shelter", limit=10))[0] == older   # newer doc wins ties

    results = memory.recall("When did we adopt a puppy in May 2023?", limit=10)
    assert krefs(results) == [may, older]
    assert "when" in results[0]["signals"]
    assert "when" not in results[1]["signals"]
    assert results[0]["score"] > results[1]["score"]

    results = memory.recall("Did we adopt a puppy in 2022?", limit=10)
    assert krefs(results) == [older, may]
    assert "when" in results[0]["signals"]


def test_typed_edges_pull_in_one_hop_neighbours_of_a_top_hit(memory):
    hit = memory.remember("Quarterly revenue grew by twelve percent")
    supporter = memory.remember("Analysts attribute it to strong subscription sales")
    source = memory.remember("Board deck slide seven")
    mentioned = memory.remember("Cafeteria menu includes lasagna on Fridays")
    memory.link(supporter, hit, "SUPPORTS")
    memory.link(hit, source, "DERIVED_FROM")
    memory.link(mentioned, hit, "MENTIONS")
    assert "MENTIONS" not in km.RecallSignals().edge_types
    assert {"SUPPORTS", "DERIVED_FROM"} <= set(km.RecallSignals().edge_types)

    results = memory.recall("quarterly revenue growth", limit=10)
    by_kref = {result["kref"]: result for result in results}

    assert krefs(results)[0] == hit
    assert "graph_augmented" not in by_kref[hit]
    for pulled in (supporter, source):
        assert by_kref[pulled]["graph_augmented"] is True
        assert by_kref[pulled]["hop"] == 1
        assert by_kref[pulled]["score"] < by_kref[hit]["score"]
    assert mentioned not in by_kref
    assert set(by_kref) == {hit, supporter, source}


def test_typed_edges_do_not_pull_in_deprecated_or_filtered_out_memories(memory):
    hit = memory.remember("Quarterly revenue grew by twelve percent", space="finance")
    retired = memory.remember("An old analyst note", space="finance")
    elsewhere = memory.remember("A note in another space", space="misc")
    memory.link(retired, hit, "SUPPORTS")
    memory.link(elsewhere, hit, "SUPPORTS")
    memory.deprecate(item_of(retired))

    assert krefs(memory.recall("quarterly revenue", limit=10, space="finance")) == [hit]
    assert set(krefs(memory.recall("quarterly revenue", limit=10))) == {hit, elsewhere}


# ==========================================================================================================
# 4. Filters: where, prefer, spaces, memory types, min_score, limit
# ==========================================================================================================

@pytest.fixture
def budgets(memory):
    """Four memories with the same words and different metadata; returns {name: kref}."""
    rows = {
        "alpha": {"team": "red", "priority": 1, "due": "2024-01-05", "labels": ["x", "y"]},
        "beta": {"team": "blue", "priority": 2, "due": "2024-02-05", "labels": ["y"]},
        "gamma": {"team": "green", "priority": 3, "due": "2024-03-05"},
        "delta": {"team": "red", "priority": 5, "owner": "Ann Smith"},
    }
    return {name: memory.remember(f"{name} note about budgets", metadata=metadata) for name, metadata in rows.items()}


@pytest.mark.parametrize("where, expected", [
    ({"team": "red"}, {"alpha", "delta"}),
    ({"team": {"$eq": "blue"}}, {"beta"}),
    ({"team": ["red", "blue"]}, {"alpha", "beta", "delta"}),
    ({"team": {"$in": ["green", "blue"]}}, {"beta", "gamma"}),
    ({"team": {"$nin": ["red"]}}, {"beta", "gamma"}),
    ({"team": {"$ne": "red"}}, {"beta", "gamma"}),
    ({"priority": {"$gte": 2}}, {"beta", "gamma", "delta"}),
    ({"priority": {"$gt": 2}}, {"gamma", "delta"}),
    ({"priority": {"$lte": 2}}, {"alpha", "beta"}),
    ({"priority": {"$lt": 2}}, {"alpha"}),
    ({"priority": {"$gte": 2, "$lt": 5}}, {"beta", "gamma"}),
    ({"due": {"$gt": "2024-01-31"}}, {"beta", "gamma"}),
    ({"due": {"$lte": "2024-02-05"}}, {"alpha", "beta"}),
    ({"labels": {"$contains": "x"}}, {"alpha"}),
    ({"labels": {"$in": ["y"]}}, {"alpha", "beta"}),
    ({"owner": {"$contains": "smith"}}, {"delta"}),
    ({"owner": {"$exists": True}}, {"delta"}),
    ({"owner": {"$exists": False}}, {"alpha", "beta", "gamma"}),
    ({"team": "red", "priority": {"$gt": 1}}, {"delta"}),
    ({"team": "purple"}, set()),
])
def test_where_is_a_hard_metadata_filter(memory, budgets, where, expected):
    results = memory.recall("budgets note", limit=10, where=where)
    names = {name for name, kref in budgets.items() if kref in krefs(results)}
    assert names == expected
    assert len(results) == len(expected)


@pytest.mark.parametrize("where", [{"team": {"$regex": "r"}}, {"team": {"$in": "red"}}, {"team": {"gt": 1}}])
def test_where_with_a_bad_operator_is_rejected(memory, budgets, where):
    with pytest.raises(km.InvalidArgumentError) as caught:
        memory.recall("budgets note", where=where)
    assert isinstance(caught.value, ValueError)


def test_matches_where_unit():
    metadata = {"n": 3, "tags": ["a", "b"], "name": "Ann Smith", "flag": True}
    assert km.matches_where(metadata, {"n": 3, "tags": {"$contains": "a"}})
    assert km.matches_where(metadata, {"n": {"$gte": 3, "$lte": 3}})
    assert not km.matches_where(metadata, {"n": {"$gt": 3}})
    assert not km.matches_where(metadata, {"n": {"$gt": "2"}})        # mismatched types never compare
    assert not km.matches_where(metadata, {"flag": {"$gt": 0}})        # booleans are not numbers here
    assert km.matches_where(metadata, {"name": {"$contains": "SMITH"}})
    assert km.matches_where(metadata, {"missing": {"$exists": False}})
    assert not km.matches_where(metadata, {"missing": {"$exists": True}})
    assert km.validate_where({"n": 1}) == {"n": 1}
    with pytest.raises(km.InvalidArgumentError):
        km.validate_where(["n", 1])


def test_where_finds_a_match_far_down_the_lexical_ranking(memory):
    for number in range(150):
        memory.remember(f"maple syrup pancakes breakfast recipe number {number}", metadata={"n": number})
    rare = memory.remember("a passing remark that mentions maple once among many other words here and there",
                           metadata={"n": 999, "rare": True})
    plain = memory.recall("maple syrup pancakes", limit=20)
    assert rare not in krefs(plain)

    results = memory.recall("maple syrup pancakes", limit=3, where={"rare": True})

    assert krefs(results) == [rare]


def test_filters_go_down_with_the_request_and_fill_the_limit_from_far_down(memory):
    # issue 21 item 4: where, memory types and earned trust are checked by the backend while it gathers, so
    # a filtered recall gets `limit` matches when that many exist, however far down the words rank them
    for number in range(150):
        memory.remember(f"harbour ferry timetable summer sailing number {number}", metadata={"n": number})
    deep = [memory.remember(f"one long aside that names the harbour once among other unrelated words {n}",
                            metadata={"team": "deep", "memory_type": "note", "evidence_level": "official"})
            for n in range(4)]
    assert not set(deep) & set(krefs(memory.recall("harbour ferry timetable", limit=20)))

    by_where = memory.recall("harbour ferry timetable", limit=3, where={"team": "deep"})
    by_type = memory.recall("harbour ferry timetable", limit=4, memory_types=["note"])
    trusted = memory.recall("harbour ferry timetable", limit=10, influence_only=True)

    assert len(by_where) == 3 and set(krefs(by_where)) < set(deep)
    assert sorted(krefs(by_type)) == sorted(deep)
    assert sorted(krefs(trusted)) == sorted(deep)


class _CountingGraph(km.SQLiteGraph):
    """The embedded engine, counting its searches (and, with ``blind``, ignoring the pushed-down filter the
    way a backend written before it would)."""

    def __init__(self, *args, blind: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        self.searches, self.blind = 0, blind

    def search(self, query):
        self.searches += 1
        return super().search(dataclasses.replace(query, admit=None) if self.blind else query)


@pytest.mark.parametrize("blind", [False, True], ids=["filtering-backend", "backend-without-admit"])
def test_a_filtered_recall_asks_the_backend_once(blind, clock, ids):
    graph = _CountingGraph(None, clock=clock, blind=blind)
    memory = km.Memory(backend=graph, clock=clock, ids=ids)
    for number in range(120):
        memory.remember(f"glacier hiking permit rules number {number}", metadata={"n": number})
    wanted = memory.remember("a note that mentions a glacier once, for the other team", metadata={"team": "b"})
    graph.searches = 0

    results = memory.recall("glacier hiking permit", limit=5, where={"team": "b"})

    assert graph.searches == 1
    # a backend that does not know `admit` may miss a deep match, but never serves one the filter refuses
    assert all(result["metadata"].get("team") == "b" for result in results)
    assert krefs(results) == ([] if blind else [wanted])


def test_backend_search_with_admit_returns_only_admitted_up_to_keep(memory):
    for number in range(60):
        memory.remember(f"orchard pruning calendar entry {number}", metadata={"n": number, "even": number % 2 == 0})
    backend = memory.backend
    query = km.RecallQuery(project=memory.project, terms=tuple(km.tokenize("orchard pruning")), pool=12,
                           admit=lambda record: record.metadata.get("even") is True)

    hits = backend.search(query)

    assert len(hits) == 12
    assert all(hit.record.metadata["even"] for hit in hits)
    scores = [hit.score for hit in hits]
    assert scores == sorted(scores, reverse=True)


def test_prefer_lifts_a_matching_memory_above_a_slightly_better_lexical_match(memory):
    runbook = memory.remember("deploy checklist notes for the payment service and its rollback steps",
                              metadata={"source_kind": "runbook", "team": "ops"})
    chat = memory.remember("deploy checklist payment service", metadata={"source_kind": "chat"})
    query = "payment service deploy checklist"

    plain = memory.recall(query, limit=10)
    assert krefs(plain) == [chat, runbook]
    base = {result["kref"]: result["score"] for result in plain}
    assert base[chat] == 1.0 and 0.4 < base[runbook] < 1.0

    preferred = memory.recall(query, limit=10, prefer=[{"where": {"source_kind": "runbook"}, "trust": 0.8}])
    assert krefs(preferred) == [runbook, chat]
    scores = {result["kref"]: result["score"] for result in preferred}
    assert scores[chat] == pytest.approx(1.0)
    assert scores[runbook] == pytest.approx(base[runbook] * 1.5, abs=1e-5)     # capped at 1 + 0.5

    both = [{"where": {"source_kind": "runbook"}, "trust": 0.2}, {"where": {"team": "ops"}, "trust": 0.1}]
    composed = {r["kref"]: r["score"] for r in memory.recall(query, limit=10, prefer=both, prefer_max_boost=5.0)}
    assert composed[runbook] == pytest.approx(base[runbook] * 1.2 * 1.1, abs=1e-5)
    assert composed[chat] == pytest.approx(1.0)

    strong = [{"where": {"source_kind": "runbook"}, "trust": 0.8}, {"where": {"team": "ops"}, "trust": 0.5}]
    uncapped = {r["kref"]: r["score"] for r in memory.recall(query, limit=10, prefer=strong, prefer_max_boost=5.0)}
    assert uncapped[runbook] == pytest.approx(base[runbook] * 1.8 * 1.5, abs=1e-5)
    capped = {r["kref"]: r["score"] for r in memory.recall(query, limit=10, prefer=strong, prefer_max_boost=0.25)}
    assert capped[runbook] == pytest.approx(base[runbook] * 1.25, abs=1e-5)
    off = memory.recall(query, limit=10, prefer=strong, prefer_max_boost=0.0)
    assert krefs(off) == [chat, runbook]
    assert off[1]["score"] == pytest.approx(base[runbook], abs=1e-6)


def test_space_and_space_paths_include_sub_spaces_but_not_prefix_siblings(memory):
    in_a = memory.remember("river boat trip", space="a")
    in_ab_sub = memory.remember("river boat trip below", space="a/b")
    in_ab = memory.remember("river boat trip sibling", space="ab")
    in_z = memory.remember("river boat trip zed", space="z")

    assert set(krefs(memory.recall("river boat", limit=10, space="a"))) == {in_a, in_ab_sub}
    assert set(krefs(memory.recall("river boat", limit=10, space="a/b"))) == {in_ab_sub}
    assert set(krefs(memory.recall("river boat", limit=10, space="ab"))) == {in_ab}
    assert set(krefs(memory.recall("river boat", limit=10, space_paths=["a", "z"]))) == {in_a, in_ab_sub, in_z}
    assert set(krefs(memory.recall("river boat", limit=10, space_paths=["nowhere"]))) == set()
    assert len(memory.recall("river boat", limit=10)) == 4


def test_memory_types_filter_by_metadata_type_or_kind(memory):
    plain = memory.remember("river boat trip plain")
    fact = memory.remember("river boat trip fact", kind="fact")
    decision = memory.remember("river boat trip decision", metadata={"memory_type": "decision"})
    typed = memory.remember("river boat trip typed", metadata={"type": "summary"})

    assert krefs(memory.recall("river boat", limit=10, memory_types=["fact"])) == [fact]
    assert set(krefs(memory.recall("river boat", limit=10, memory_types=["decision", "fact"]))) == {fact, decision}
    assert krefs(memory.recall("river boat", limit=10, memory_types=["summary"])) == [typed]
    assert krefs(memory.recall("river boat", limit=10, memory_types=["memory"])) == [plain]


def test_min_score_and_limit(memory):
    strong = memory.remember("zeppelin hangar maintenance schedule")
    for number in range(8):
        memory.remember(f"hangar door number {number} with extra words to lower its score")

    everything = memory.recall("zeppelin hangar", limit=20)
    assert len(everything) == 9 and krefs(everything)[0] == strong
    assert all(result["score"] < 0.5 for result in everything[1:])

    assert krefs(memory.recall("zeppelin hangar", limit=20, min_score=0.5)) == [strong]
    for limit in (1, 3, 5):
        assert len(memory.recall("zeppelin hangar", limit=limit)) == limit
    assert [r["score"] for r in memory.recall("zeppelin hangar", limit=3)] == \
        [r["score"] for r in everything[:3]]


# ==========================================================================================================
# 5. Evidence, recency, MMR
# ==========================================================================================================

EVIDENCE_WEIGHTS = {"official": 0.15, "corroborated": 0.08, "single_source": 0.0, "unverified": -0.10}


def _graded(memory):
    """Five memories: an unverified exact match, three graded near matches, an ungraded weaker one."""
    return {
        "unverified": memory.remember("solar panel output report", evidence_level="unverified"),
        "official": memory.remember("solar panel output report two", evidence_level="official"),
        "corroborated": memory.remember("solar panel output report three", evidence_level="corroborated"),
        "single_source": memory.remember("solar panel output report four", evidence_level="single_source"),
        None: memory.remember("solar panel output"),
    }


def test_evidence_grades_are_added_to_normalized_scores(memory):
    graded = _graded(memory)
    results = memory.recall("solar panel output report", limit=10)
    by_kref = {result["kref"]: result for result in results}

    assert max(result["base_score"] for result in results) == 1.0
    assert by_kref[graded["unverified"]]["base_score"] == 1.0            # the best lexical match
    for level, kref in graded.items():
        result = by_kref[kref]
        weight = EVIDENCE_WEIGHTS.get(level, 0.0)
        assert result["score"] == pytest.approx(result["base_score"] + weight, abs=1e-6)
        assert result.get("evidence_level") == level
    assert krefs(results)[:2] == [graded["official"], graded["corroborated"]]
    assert [result["score"] for result in results] == sorted((result["score"] for result in results), reverse=True)


def test_evidence_from_a_tag_counts_too(memory):
    tagged = memory.remember("wind turbine output report extra")
    plain = memory.remember("wind turbine output report")
    memory.tag(tagged, "evidence:official")
    results = memory.recall("wind turbine output report", limit=10)
    assert krefs(results) == [tagged, plain]
    assert results[0]["evidence_level"] == "official"
    assert results[0]["score"] == pytest.approx(results[0]["base_score"] + 0.15, abs=1e-6)


def test_evidence_is_a_strict_no_op_when_nothing_is_graded(memory):
    memory.remember("tidal power output report")
    memory.remember("tidal power output report two words")
    memory.remember("tidal power output")
    on = memory.recall("tidal power output report", limit=10)
    off = memory.recall("tidal power output report", limit=10, evidence_rank=km.EvidenceRankConfig(enabled=False))

    assert [(r["kref"], r["score"]) for r in on] == [(r["kref"], r["score"]) for r in off]
    assert all(result["score"] == result["base_score"] for result in on)
    assert all("evidence_level" not in result for result in on)
    assert on[0]["score"] == 1.0


def test_evidence_rank_disabled_per_call(memory):
    graded = _graded(memory)
    results = memory.recall("solar panel output report", limit=10, evidence_rank=km.EvidenceRankConfig(enabled=False))
    assert krefs(results)[0] == graded["unverified"]
    assert all(result["score"] == result["base_score"] for result in results)
    assert all("evidence_level" not in result for result in results)


def test_evidence_rerank_env_zero_turns_it_off():
    config = km.MemoryConfig.from_env({"KUMIHO_EVIDENCE_RERANK": "0"}, durable=False)
    assert config.evidence_rerank is False and config.path is None
    with km.Memory.from_config(config, clock=km.ManualClock("2026-01-01T00:00:00Z", tick=1.0),
                               ids=km.SequentialIds()) as memory:
        graded = _graded(memory)
        results = memory.recall("solar panel output report", limit=10)
        assert krefs(results)[0] == graded["unverified"]
        assert all(result["score"] == result["base_score"] for result in results)


def test_memory_level_evidence_rank_config_is_used_by_recall(make_memory):
    memory = make_memory(evidence_rank=km.EvidenceRankConfig(enabled=False))
    graded = _graded(memory)
    results = memory.recall("solar panel output report", limit=10)
    assert krefs(results)[0] == graded["unverified"]


def test_apply_evidence_weights_unit():
    memories = [
        {"kref": "none", "score": None, "metadata": {"evidence_level": "official"}},
        {"kref": "u", "score": 0.5, "metadata": {"evidence_level": "unverified"}},
        {"kref": "o", "score": 0.3, "metadata": {}, "tags": ["evidence:official"]},
        {"kref": "plain", "score": 0.42, "metadata": {}},
        {"kref": "missing", "metadata": {}},
        {"kref": "low", "score": 0.04, "metadata": {"evidence_level": "unverified"}},
    ]
    result = km.apply_evidence_weights(memories)
    assert result is memories
    assert [m["kref"] for m in memories] == ["o", "plain", "u", "low", "none", "missing"]
    by_kref = {m["kref"]: m for m in memories}
    assert by_kref["o"]["score"] == pytest.approx(0.45) and by_kref["o"]["base_score"] == 0.3
    assert by_kref["u"]["score"] == pytest.approx(0.4) and by_kref["u"]["base_score"] == 0.5
    assert by_kref["plain"]["score"] == 0.42 and by_kref["plain"]["base_score"] == 0.42
    assert by_kref["low"]["score"] == pytest.approx(-0.06)         # below zero, still above the score-less
    assert by_kref["none"]["score"] is None and "base_score" not in by_kref["none"]
    assert by_kref["o"]["evidence_level"] == "official" and "evidence_level" not in by_kref["plain"]

    # The raw score stays the base: weighting again does not add the weight twice.
    km.apply_evidence_weights(memories)
    assert by_kref["o"]["score"] == pytest.approx(0.45) and by_kref["o"]["base_score"] == 0.3
    assert by_kref["u"]["score"] == pytest.approx(0.4) and by_kref["u"]["base_score"] == 0.5


def test_apply_evidence_weights_is_a_strict_no_op_without_grades_or_when_disabled():
    ungraded = [{"kref": "b", "score": 0.2, "metadata": {}}, {"kref": "a", "score": 0.9, "metadata": {}}]
    before = copy.deepcopy(ungraded)
    assert km.apply_evidence_weights(ungraded) == before                      # not even re-sorted
    graded = [{"kref": "b", "score": 0.2, "metadata": {"evidence_level": "official"}},
              {"kref": "a", "score": 0.9, "metadata": {}}]
    before = copy.deepcopy(graded)
    assert km.apply_evidence_weights(graded, km.EvidenceRankConfig(enabled=False)) == before


def test_evidence_badge_and_config_from_env():
    assert km.evidence_badge("official") == "[official] "
    assert km.evidence_badge("corroborated") == "[corroborated] "
    assert km.evidence_badge("unverified") == "[unverified] "
    assert km.evidence_badge("single_source") == ""
    assert km.evidence_badge(None) == ""
    assert km.EvidenceRankConfig().weights == EVIDENCE_WEIGHTS
    assert km.EvidenceRankConfig.from_env({"KUMIHO_EVIDENCE_RERANK": "0"}).enabled is False
    assert km.EvidenceRankConfig.from_env({}).enabled is True


def test_recency_favours_the_newer_of_two_equal_memories(memory):
    newer = memory.remember("the boiler was serviced", metadata={"event_date": "2025-12-20"})
    older = memory.remember("the boiler was serviced", metadata={"event_date": "2025-06-01"})
    plain = memory.recall("boiler serviced", limit=10)
    assert krefs(plain) == [older, newer]                      # equal words: the newer document id first
    assert plain[0]["score"] == plain[1]["score"]

    results = memory.recall("boiler serviced", limit=10, recency_half_life_days=30)
    assert krefs(results) == [newer, older]
    assert results[0]["score"] > results[1]["score"] > 1.0
    assert results[0]["base_score"] == results[1]["base_score"] == 1.0


def test_mmr_demotes_a_near_duplicate(memory):
    first = memory.remember("kubernetes cluster upgrade plan for march rollout")
    duplicate = memory.remember("kubernetes cluster upgrade plan for the march rollout!")
    different = memory.remember("kubernetes cluster upgrade notes about node pools")
    plain = memory.recall("kubernetes cluster upgrade plan", limit=2)
    assert set(krefs(plain)) == {first, duplicate}

    diverse = memory.recall("kubernetes cluster upgrade plan", limit=2, mmr_lambda=0.3)
    assert len(diverse) == 2
    assert krefs(diverse)[1] == different
    assert krefs(diverse)[0] in (first, duplicate)


# ==========================================================================================================
# 6. parse_time_window
# ==========================================================================================================

def _window(start: dt.datetime, end: dt.datetime) -> tuple[float, float]:
    return start.timestamp(), end.timestamp() - 1e-6


NOW = dt.datetime(2026, 3, 11, 15, 30, tzinfo=UTC)      # a Wednesday


@pytest.mark.parametrize("query, expected", [
    ("what happened on 8 May 2023", _window(dt.datetime(2023, 5, 8, tzinfo=UTC), dt.datetime(2023, 5, 9, tzinfo=UTC))),
    ("the 8th of May, 2023", _window(dt.datetime(2023, 5, 8, tzinfo=UTC), dt.datetime(2023, 5, 9, tzinfo=UTC))),
    ("on May 8, 2023 we met", _window(dt.datetime(2023, 5, 8, tzinfo=UTC), dt.datetime(2023, 5, 9, tzinfo=UTC))),
    ("2023-05-08 standup", _window(dt.datetime(2023, 5, 8, tzinfo=UTC), dt.datetime(2023, 5, 9, tzinfo=UTC))),
    ("trip in May 2023", _window(dt.datetime(2023, 5, 1, tzinfo=UTC), dt.datetime(2023, 6, 1, tzinfo=UTC))),
    ("December 2023 party", _window(dt.datetime(2023, 12, 1, tzinfo=UTC), dt.datetime(2024, 1, 1, tzinfo=UTC))),
    ("report for 2023-05", _window(dt.datetime(2023, 5, 1, tzinfo=UTC), dt.datetime(2023, 6, 1, tzinfo=UTC))),
    ("what did we do in 2023", _window(dt.datetime(2023, 1, 1, tzinfo=UTC), dt.datetime(2024, 1, 1, tzinfo=UTC))),
    ("yesterday's meeting", _window(dt.datetime(2026, 3, 10, tzinfo=UTC), dt.datetime(2026, 3, 11, tzinfo=UTC))),
    ("last week", _window(dt.datetime(2026, 3, 2, tzinfo=UTC), dt.datetime(2026, 3, 9, tzinfo=UTC))),
    ("last month", _window(dt.datetime(2026, 2, 1, tzinfo=UTC), dt.datetime(2026, 3, 1, tzinfo=UTC))),
    ("last year", _window(dt.datetime(2025, 1, 1, tzinfo=UTC), dt.datetime(2026, 1, 1, tzinfo=UTC))),
    ("3 days ago", _window(dt.datetime(2026, 3, 8, tzinfo=UTC), dt.datetime(2026, 3, 9, tzinfo=UTC))),
    ("two weeks ago", _window(dt.datetime(2026, 2, 23, tzinfo=UTC), dt.datetime(2026, 3, 2, tzinfo=UTC))),
])
def test_parse_time_window(query, expected):
    window = km.parse_time_window(query, NOW)
    assert window is not None
    assert window[0] == pytest.approx(expected[0], abs=1e-3)
    assert window[1] == pytest.approx(expected[1], abs=1e-3)


def test_parse_time_window_relative_phrases_cross_year_boundaries():
    january = dt.datetime(2026, 1, 15, 9, 0, tzinfo=UTC)
    window = km.parse_time_window("last month", january)
    expected = _window(dt.datetime(2025, 12, 1, tzinfo=UTC), dt.datetime(2026, 1, 1, tzinfo=UTC))
    assert window == pytest.approx(expected, abs=1e-3)


@pytest.mark.parametrize("query", ["31 February 2023", "February 31, 2023", "2023-02-31", "2023-13-01",
                                   "what is my favourite colour", "", "in 12 rooms"])
def test_parse_time_window_none(query):
    assert km.parse_time_window(query, NOW) is None


def test_parse_time_window_relative_words_need_a_now():
    assert km.parse_time_window("yesterday", None) is None
    assert km.parse_time_window("in May 2023", None) is not None


# ==========================================================================================================
# 7. RecallIndex: top-k search equals brute force
# ==========================================================================================================

VOCABULARY = ["apple", "berry", "cocoa", "date", "elder", "fig", "grape", "honey"]


def _brute_pairs(index: km.RecallIndex, weights, k: int, eligible) -> list[tuple[int, float]]:
    """Brute force as ``search`` answers: ``(doc, score)`` best first, ties the later slot first."""
    plan = {term: weight for _, weight, _, term in index._plan(weights)}
    found = sorted(((index._exact(slot, plan), slot, doc) for doc, slot in list(index.doc_slot.items())
                    if doc in eligible), reverse=True)
    return [(doc, score) for score, _, doc in found if score > 0][:k]


def _brute_top(index: km.RecallIndex, weights, k: int, eligible) -> list[float]:
    return [round(score, 9) for _, score in _brute_pairs(index, weights, k, eligible)]


def _check_search(index: km.RecallIndex, weights, k: int, eligible) -> None:
    got = index.search(weights, k, eligible)
    assert len({doc for doc, _ in got}) == len(got)
    for doc, score in got:
        assert doc in eligible and doc in index
        assert round(score, 9) == round(index.exact_score(doc, weights), 9)
    assert [round(score, 9) for _, score in got] == _brute_top(index, weights, k, eligible)


documents = st.lists(st.sampled_from(VOCABULARY), min_size=1, max_size=8)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(corpus=st.lists(st.tuples(documents, st.booleans()), min_size=1, max_size=40),
       churn=st.lists(st.tuples(st.integers(0, 39), st.one_of(st.none(), documents)), max_size=15),
       query=st.lists(st.sampled_from(VOCABULARY + ["absent"]), min_size=1, max_size=5),
       query_weights=st.lists(st.sampled_from([0.15, 0.5, 1.0, 2.0]), min_size=6, max_size=6),
       k=st.integers(1, 10), eligible_mask=st.lists(st.booleans(), min_size=40, max_size=40),
       compact=st.booleans())
def test_recall_index_search_matches_brute_force_on_small_corpora(corpus, churn, query, query_weights, k,
                                                                   eligible_mask, compact):
    index = km.RecallIndex()

    def add(doc_id, words, short):
        frequencies: dict[str, float] = {}
        for word in words:
            frequencies[word] = frequencies.get(word, 0.0) + 1.0
        index.add(doc_id, frequencies, len(words), short=short)

    for doc_id, (words, short) in enumerate(corpus):
        add(doc_id, words, short)
    for doc_id, words in churn:                   # remove, and sometimes add back with new words
        index.remove(doc_id)
        if words is not None:
            add(doc_id, words, doc_id % 2 == 0)
    if compact:
        index.compact()
    weights = index.term_weights(query, dict(zip(query, query_weights)))
    everything = set(range(40))
    some = {doc for doc in range(40) if eligible_mask[doc]}
    _check_search(index, weights, k, everything)
    _check_search(index, weights, k, some)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), size=st.integers(200, 2500), vocabulary=st.integers(2, 8),
       zipf=st.booleans(), compact=st.booleans(), k=st.integers(1, 10),
       fraction=st.sampled_from([0.01, 0.03, 0.1, 0.5, 1.0]),
       eligible_cost=st.sampled_from([0.0, 1.0, km.RecallIndex.ELIGIBLE_COST, math.inf]))
def test_recall_index_search_matches_brute_force_when_pruning(seed, size, vocabulary, zipf, compact, k, fraction,
                                                              eligible_cost):
    """Long postings and sparse eligible sets: the early-termination paths are taken here (with an infinite
    ``ELIGIBLE_COST`` a sparse eligible set is never scored document by document instead; with a small one,
    pruning often gives way to it part way)."""
    rnd = random.Random(seed)
    words = VOCABULARY[:vocabulary]
    bias = [1.0 / (position + 1) for position in range(vocabulary)] if zipf else None
    index = km.RecallIndex()

    def document():
        length = rnd.randint(1, 12)
        frequencies: dict[str, float] = {}
        for word in rnd.choices(words, weights=bias, k=length):
            frequencies[word] = frequencies.get(word, 0.0) + rnd.choice([1.0, 1.0, 0.15])
        return frequencies, length

    for doc_id in range(size):
        frequencies, length = document()
        index.add(doc_id, frequencies, length, short=rnd.random() < 0.3)
    for doc_id in rnd.sample(range(size), size // 5):
        index.remove(doc_id)
        if rnd.random() < 0.5:
            frequencies, length = document()
            index.add(doc_id, frequencies, length, short=rnd.random() < 0.3)
    if compact:
        index.compact()
    eligible = {doc for doc in index.doc_slot if rnd.random() < fraction}
    query = rnd.sample(VOCABULARY, rnd.randint(1, 4))
    weights = index.term_weights(query, {term: rnd.choice([0.15, 0.5, 1.0, 2.0]) for term in query})
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(km.RecallIndex, "ELIGIBLE_COST", eligible_cost)
        _check_search(index, weights, k, eligible)


@pytest.mark.parametrize("seed", range(3))
def test_recall_index_finishing_reads_truncated_terms_on_and_still_equals_brute_force(seed, monkeypatch):
    """Finishing exactly after truncated reads: with reading on made cheap, the truncated terms are read on in
    small steps (candidates gain their share, the rest drop out) before any candidate is scored in full; the
    top k must still be brute force's, and reading on must have happened."""
    monkeypatch.setattr(km.RecallIndex, "FINISH_CHUNK", 4)
    monkeypatch.setattr(km.RecallIndex, "EXACT_COST", 10_000)
    monkeypatch.setattr(km.RecallIndex, "UPDATE_ONLY_MAX", 0)      # every term cut short is left truncated
    read_on = km.RecallIndex._read_on
    steps = []
    monkeypatch.setattr(km.RecallIndex, "_read_on", staticmethod(lambda *args: steps.append(1) or read_on(*args)))
    rnd = random.Random(seed)
    words = VOCABULARY[:6]
    index = km.RecallIndex()
    for doc_id in range(3000):
        length = rnd.randint(2, 14)
        frequencies: dict[str, float] = {}
        for word in rnd.choices(words, weights=[1.0 / (rank + 1) for rank in range(len(words))], k=length):
            frequencies[word] = frequencies.get(word, 0.0) + 1.0
        index.add(doc_id, frequencies, length, short=rnd.random() < 0.3)
    index.compact()
    for _ in range(24):
        query = rnd.sample(words, rnd.randint(2, 5))
        weights = index.term_weights(query, {term: rnd.choice([0.15, 0.5, 1.0, 2.0]) for term in query})
        eligible = {doc for doc in index.doc_slot if rnd.random() < rnd.choice([0.2, 1.0])}
        _check_search(index, weights, rnd.randint(1, 10), eligible)
    assert steps, "no query read a truncated term on: the test no longer covers it"


@pytest.mark.parametrize("seed", range(6))
def test_recall_index_merges_postings_best_impact_first_then_latest_slot(seed):
    """Each term's merged postings are its live ones by (impact, slot), best first, whether its tail is merged
    alone (a bulk load's: a stable sort of the reversed tail) or into postings merged before; many impacts tie
    (same tf, same length), removed and re-added documents leave dead slots behind."""
    rnd = random.Random(seed)
    index = km.RecallIndex()
    words = [f"w{number}" for number in range(12)]

    def expected() -> dict[int, list[tuple[float, int]]]:
        found: dict[int, list[tuple[float, int]]] = collections.defaultdict(list)
        for term_id, postings in enumerate(index.terms):
            for slot, impact in zip([*postings.slots, *postings.tail_slots],
                                    [*postings.impacts, *postings.tail_impacts]):
                if index.slot_doc[slot] >= 0:
                    found[term_id].append((impact, slot))
        return {term_id: sorted(pairs, reverse=True) for term_id, pairs in found.items()}

    for _round in range(3):
        for _ in range(rnd.randint(50, 300)):
            doc = rnd.randrange(400)
            if rnd.random() < 0.15:
                index.remove(doc)
            else:
                index.add(doc, {word: rnd.choice((1, 1, 2)) for word in rnd.sample(words, rnd.randint(1, 4))},
                          rnd.choice((4, 4, 8)), short=rnd.choice((0.0, 1.0)))
        want = expected()
        index.compact()
        for term_id, postings in enumerate(index.terms):
            assert not postings.tail_slots
            assert list(zip(postings.impacts, postings.slots)) == want.get(term_id, [])
            assert postings.max_impact == (postings.impacts[0] if postings.impacts else 0.0)


def _zipf_index(rnd: random.Random, size: int, words: list[str]) -> km.RecallIndex:
    index = km.RecallIndex()
    for doc_id in range(size):
        length = rnd.randint(2, 14)
        frequencies: dict[str, float] = {}
        for word in rnd.choices(words, weights=[1.0 / (rank + 1) for rank in range(len(words))], k=length):
            frequencies[word] = frequencies.get(word, 0.0) + rnd.choice([1.0, 1.0, 0.15])
        index.add(doc_id, frequencies, length, short=rnd.random() < 0.3)
    index.compact()
    return index


@pytest.mark.parametrize("seed", range(3))
def test_recall_index_scores_are_the_same_float_whichever_way_the_query_went(seed, monkeypatch):
    """A score summed from the postings and one scored in full from the forward index are one float: the same
    query answered with every term read through, and with truncated terms finished exactly (reading on, or
    scoring candidates in full), gives identical results, each score equal (==) to ``exact_score``."""
    rnd = random.Random(seed)
    words = VOCABULARY[:6]
    index = _zipf_index(rnd, 3000, words)
    never = {"ELIGIBLE_COST": math.inf}          # (each way below is the one named, not the eligible-first one)
    ways = {"read through": {"READ_ALL_MAX": 0, "UPDATE_ONLY_MAX": 10**9, **never},
            "finished in full": {"READ_ALL_MAX": 0, "UPDATE_ONLY_MAX": 0, **never},
            "read on": {"READ_ALL_MAX": 0, "UPDATE_ONLY_MAX": 0, "FINISH_CHUNK": 4, "EXACT_COST": 10_000, **never},
            "every posting read": {"READ_ALL_MAX": 10**9, **never},
            "eligible scored in full": {"READ_ALL_MAX": 0, "ELIGIBLE_COST": 0.0}}
    for _ in range(24):
        query = rnd.sample(words, rnd.randint(2, 5))
        weights = index.term_weights(query, {term: rnd.choice([0.15, 0.5, 1.0, 2.0]) for term in query})
        eligible = {doc for doc in index.doc_slot if rnd.random() < rnd.choice([0.2, 1.0])}
        k = rnd.randint(1, 10)
        answers = {}
        for way, settings_ in ways.items():
            with monkeypatch.context() as patch:
                for name, value in settings_.items():
                    patch.setattr(km.RecallIndex, name, value)
                answers[way] = index.search(weights, k, eligible)
        first = answers["read through"]
        assert all(answer == first for answer in answers.values()), answers
        assert all(score == index.exact_score(doc, weights) for doc, score in first)
        assert [round(score, 9) for _, score in first] == _brute_top(index, weights, k, eligible)


@pytest.mark.parametrize("seed", range(3))
def test_recall_index_pruning_that_reads_too_much_gives_way_to_scoring_the_eligible(seed, monkeypatch):
    """When pruning has read as many postings as scoring every eligible document would cost, the search scores
    those instead, from scratch: the answer is the one pruning alone gives, float for float."""
    rnd = random.Random(seed)
    index = _zipf_index(rnd, 3000, VOCABULARY[:6])
    scored = km.RecallIndex._search_eligible
    switched = []
    monkeypatch.setattr(km.RecallIndex, "_search_eligible",
                        lambda self, *args: switched.append(1) or scored(self, *args))
    monkeypatch.setattr(km.RecallIndex, "READ_ALL_MAX", 0)
    for _ in range(24):
        query = rnd.sample(VOCABULARY[:6], rnd.randint(1, 4))
        weights = index.term_weights(query, {term: rnd.choice([0.15, 0.5, 1.0, 2.0]) for term in query})
        eligible = {doc for doc in index.doc_slot if rnd.random() < rnd.choice([0.05, 0.3])}
        postings = sum(len(index.terms[term].slots) + len(index.terms[term].tail_slots) for term in weights)
        k = rnd.randint(1, 12)
        with monkeypatch.context() as patch:
            patch.setattr(km.RecallIndex, "ELIGIBLE_COST", math.inf)
            pruned = index.search(weights, k, eligible)
        # a budget just above a quarter of the postings: not scored at once, but after reading that many
        with monkeypatch.context() as patch:
            patch.setattr(km.RecallIndex, "ELIGIBLE_COST", 1.001 * postings / (4 * max(1, len(eligible))))
            assert index.search(weights, k, eligible) == pruned
            _check_search(index, weights, k, eligible)
    assert switched, "pruning never gave way part way: the test no longer covers it"


def test_recall_index_a_merge_does_not_change_the_float_a_repeated_search_returns():
    """Found by a hostile review: a term's best impact, which a removal never lowers, was read before the merge
    that refreshes it, so the first search after the merge added the terms up in another order than every later
    search (and ``exact_score``): the same query twice in a row gave scores a last bit apart."""
    differed = []
    for seed in range(12):
        rnd = random.Random(seed)
        index = km.RecallIndex()
        index.add(0, {"apple": 20.0}, 2)                # the best "apple" posting, removed below
        for doc in range(1, 400):
            index.add(doc, {"apple": 1.0, "berry": float(rnd.randint(1, 4)), "cocoa": float(rnd.randint(1, 4))},
                      rnd.randint(4, 12))
        index.compact()
        index.remove(0)
        for doc in range(400, 480):                     # a tail long enough to be merged by the next search
            index.add(doc, {"apple": 1.0, "berry": float(rnd.randint(1, 4)), "cocoa": float(rnd.randint(1, 4))},
                      rnd.randint(4, 12))
        weights = index.term_weights(["apple", "berry", "cocoa"],
                                     {"apple": 1.0, "berry": 1.0, "cocoa": rnd.uniform(0.8, 1.0)})
        everything = set(range(480))
        first, second = index.search(weights, 10, everything), index.search(weights, 10, everything)
        differed.append(first != second)
        assert all(score == index.exact_score(doc, weights) for doc, score in second)
    assert not any(differed), differed


def test_recall_index_leaders_found_ineligible_leave_room_for_the_next_best(monkeypatch):
    """Found by a hostile review: when most of the index is eligible, partial scores are not checked as they are
    read, and leaders found ineligible are banned; the slots below them must be looked at again, or the
    threshold drops to whatever few leaders are left and the finish scores many more candidates in full."""
    index = km.RecallIndex()
    rnd = random.Random(1)
    for doc in range(20):                        # the strongest documents; the first ten are left out below
        index.add(doc, {"apple": 3.0, "berry": 1.0 if doc % 2 else 0.0}, 3)
    for doc in range(20, 6020):
        index.add(doc, {"berry": float(rnd.randint(1, 3)), "cocoa": 1.0}, rnd.randint(2, 30))
    index.compact()
    weights = index.term_weights(["apple", "berry"], {"apple": 1.0, "berry": 2.0})
    eligible = km._DocFlags(range(10, 6020))
    scored = []
    exact_many = km.RecallIndex._exact_many
    monkeypatch.setattr(km.RecallIndex, "_exact_many",
                        lambda self, slots, weights: scored.extend(slots) or exact_many(self, slots, weights))
    found = index.search(weights, 10, eligible)
    assert len(scored) <= 30, len(scored)      # (63 when the banned leaders' places stayed empty)
    assert found == _brute_pairs(index, weights, 10, eligible)


def test_recall_index_pruning_keeps_the_candidates_that_set_its_threshold():
    """Found by a hostile review: ``threshold - missed`` could round just above the partial score of the very
    candidates that set the threshold, so they dropped out of the finish and the search returned nothing."""
    index = km.RecallIndex()
    for doc in range(6000):
        index.add(doc, {"apple": 1.0, "berry": 1.0} if doc < 100 else {"berry": 1.0, "cocoa": 1.0}, 2.0)
    index.compact()
    weights = {index.term_ids["apple"]: 0.7281382516787788, index.term_ids["berry"]: 0.42789540982689017}
    everything = set(range(6000))
    assert index.search(weights, 5, everything) == _brute_pairs(index, weights, 5, everything) != []


def test_recall_index_ties_rank_the_same_whichever_way_the_search_goes(monkeypatch):
    """Found by a hostile review: with slots out of document order (documents re-added, or messages indexed
    after the other memories of a bulk load), pruning kept the tied documents it met first while the other
    ways kept the highest document ids, so the path (which the eligible set's size picks) changed the answer.
    Every way now keeps the later slot of a tie."""
    index = km.RecallIndex()
    for doc in range(9999, -1, -1):          # slot order opposite to document order
        index.add(doc, {"apple": 1.0} if doc % 3 else {"berry": 1.0}, 1.0)
    index.compact()
    weights = index.term_weights(["apple"])
    ways = {"eligible scored": {"ELIGIBLE_COST": 0.0}, "pruning": {"ELIGIBLE_COST": math.inf},
            "read all": {"ELIGIBLE_COST": math.inf, "READ_ALL_MAX": 10**9}}
    for eligible in (set(range(0, 30)) | set(range(9970, 10000)), set(range(0, 10000, 7)), set(range(10000))):
        answers = {}
        for way, settings_ in ways.items():
            with monkeypatch.context() as patch:
                for name, value in settings_.items():
                    patch.setattr(km.RecallIndex, name, value)
                answers[way] = index.search(weights, 3, eligible)
        assert answers["eligible scored"] == answers["pruning"] == answers["read all"] \
            == _brute_pairs(index, weights, 3, eligible), answers


@pytest.mark.parametrize("seed", range(3))
def test_recall_index_best_documents_outside_eligible_never_place(seed, monkeypatch):
    """Most documents eligible (slots enter the partial scores unchecked): the best-matching documents are the
    ineligible ones, and none of them may be returned, as a leader, a finished candidate or a result."""
    monkeypatch.setattr(km.RecallIndex, "READ_ALL_MAX", 0)          # the pruning search, not the read-all one
    rnd = random.Random(seed)
    words = VOCABULARY[:6]
    index = _zipf_index(rnd, 2000, words)
    for _ in range(20):
        query = rnd.sample(words, rnd.randint(1, 4))
        weights = index.term_weights(query, {term: rnd.choice([0.15, 0.5, 1.0, 2.0]) for term in query})
        ranked = sorted(index.doc_slot, key=lambda doc: -index.exact_score(doc, weights))
        outside = set(ranked[:rnd.randint(1, 200)]) | {doc for doc in ranked if rnd.random() < 0.1}
        eligible = set(index.doc_slot) - outside
        assert 2 * len(eligible) >= len(index)
        k = rnd.randint(1, 15)
        got = index.search(weights, k, eligible)
        assert not {doc for doc, _ in got} & outside
        _check_search(index, weights, k, eligible)


def test_recall_index_basics():
    index = km.RecallIndex()
    index.add(1, {"apple": 2.0, "fig": 1.0}, 3)
    index.add(2, {"fig": 1.0}, 1)
    assert len(index) == 2 and 1 in index and 3 not in index
    weights = index.term_weights(["apple"])
    assert [doc for doc, _ in index.search(weights, 5, {1, 2})] == [1]
    assert index.search(weights, 5, {2}) == []
    assert index.search(weights, 0, {1, 2}) == []
    assert index.search({}, 5, {1, 2}) == []
    index.remove(1)
    assert 1 not in index and index.exact_score(1, weights) == 0.0
    assert index.term_weights(["apple"]) == {}
    index.add(2, {"apple": 1.0}, 1)                     # re-adding replaces
    assert index.term_frequencies(2) == {"apple": 1.0}
    assert [doc for doc, _ in index.search(index.term_weights(["apple"]), 5, {2})] == [2]


# ==========================================================================================================
# 8. Sibling revisions, context, engage
# ==========================================================================================================

def test_siblings_keep_only_a_strongly_matching_older_revision(memory):
    r1 = memory.remember("Our office moved to Berlin in the spring", key="office")
    memory.remember("Team lunch is on Thursdays", key="office")
    r3 = memory.remember("Office lease signed for five years", key="office")

    results = memory.recall("office Berlin", siblings=True)

    assert krefs(results) == [r3]
    siblings = results[0]["sibling_revisions"]
    assert [sibling["kref"] for sibling in siblings] == [r1]
    assert siblings[0]["_score"] >= km.SIBLING_STRONG_SCORE
    assert "sibling_revisions" not in memory.recall("office Berlin")[0]


def test_siblings_without_a_strong_match_are_all_kept_oldest_first(memory):
    r1 = memory.remember("Our office moved to Berlin in the spring", key="office")
    r2 = memory.remember("Team lunch is on Thursdays", key="office")
    r3 = memory.remember("Office lease signed for five years", key="office")

    results = memory.recall("office lease", siblings=True)

    assert krefs(results) == [r3]
    siblings = results[0]["sibling_revisions"]
    assert [sibling["kref"] for sibling in siblings] == [r1, r2]
    assert all(sibling["_score"] < km.SIBLING_STRONG_SCORE for sibling in siblings)


def test_siblings_fit_the_character_budget(memory):
    filler = " ".join(["lorem"] * 1800)                         # about 10,800 characters
    r1 = memory.remember("draft one " + filler, key="doc")
    memory.remember("draft two " + filler, key="doc")
    memory.remember("draft three " + filler, key="doc")
    r4 = memory.remember("final contract text", key="doc")

    results = memory.recall("final contract", siblings=True)

    assert krefs(results) == [r4]
    siblings = results[0]["sibling_revisions"]
    assert [sibling["kref"] for sibling in siblings] == [r1]        # the second would pass 20,000 characters
    assert sum(len(sibling["content"]) for sibling in siblings) <= km.SIBLING_CHAR_BUDGET


def test_select_siblings_unit():
    siblings = [{"revision": 2, "title": "", "content": "x" * 30}, {"revision": 1, "title": "", "content": "y" * 30}]
    assert [s["revision"] for s in km.select_siblings("nothing matches", siblings, char_budget=100)] == [1, 2]
    assert [s["revision"] for s in km.select_siblings("nothing matches", siblings, char_budget=50)] == [1]
    assert km.select_siblings("anything", []) == []
    assert km.bm25_light("office berlin", "office office berlin") > km.bm25_light("office berlin", "office")
    assert km.bm25_light("", "office") == 0.0


def test_build_recalled_context_renders_badges_dates_and_siblings():
    memories = [
        {"title": "A", "content": "alpha content",
         "metadata": {"evidence_level": "official", "event_date": "2023-05-08"}},
        {"title": "B", "content": "beta content", "metadata": {}, "tags": ["evidence:unverified"]},
        {"title": "C", "content": "gamma content", "metadata": {"evidence_level": "single_source"}},
        {"title": "D", "content": "delta content", "metadata": {}, "evidence_level": "corroborated",
         "sibling_revisions": [{"revision": 1, "content": "older delta"}]},
        {"title": "Same", "content": "Same", "metadata": {}},
    ]
    context = km.build_recalled_context(memories, "q")
    assert context.split("\n\n") == [
        "[official] [2023-05-08] A: alpha content",
        "[unverified] B: beta content",
        "C: gamma content",
        "[corroborated] D: delta content\n  (earlier, r1) older delta",
        "Same",
    ]
    plain = km.build_recalled_context(memories, "q", badges=False)
    assert "[official]" not in plain and "[unverified]" not in plain
    assert plain.startswith("[2023-05-08] A: alpha content")
    assert km.build_recalled_context([], "q") == ""


def test_build_recalled_context_respects_the_character_budget():
    memories = [{"title": "First", "content": "one " * 10, "metadata": {}},
                {"title": "Second", "content": "two " * 200, "metadata": {}}]
    full = km.build_recalled_context(memories)
    assert len(full) > 200 and "…[truncated]" not in full

    context = km.build_recalled_context(memories, char_budget=120)
    assert len(context) <= 120
    assert context.startswith("First: one one")
    assert context.endswith("…[truncated]")
    assert "Second: two" in context

    for budget in range(0, 300, 7):
        cut = km.build_recalled_context(memories, char_budget=budget)
        assert len(cut) <= budget
        assert full.startswith(cut.replace("…[truncated]", "")) or cut == ""


def test_engage_returns_context_and_results_consistently(memory):
    official = memory.remember("The fire exit is on the north side", evidence_level="official",
                               metadata={"event_date": "2025-03-01"})
    doubtful = memory.remember("The fire exit might be on the south side of the fire escape",
                               evidence_level="unverified")
    memory.remember("Unrelated note about lunch")

    engaged = memory.engage("where is the fire exit", limit=5)

    assert set(engaged) >= {"context", "results", "source_krefs", "count", "approx_tokens"}
    recalled = memory.recall("where is the fire exit", limit=5)
    assert [(r["kref"], r["score"]) for r in engaged["results"]] == [(r["kref"], r["score"]) for r in recalled]
    assert engaged["source_krefs"] == krefs(engaged["results"]) == [official, doubtful]
    assert engaged["count"] == 2
    assert engaged["context"] == km.build_recalled_context(engaged["results"], "where is the fire exit")
    assert engaged["approx_tokens"] == len(engaged["context"]) // 4
    assert engaged["context"].startswith("[official] [2025-03-01] The fire exit is on the north side")
    assert "[unverified] The fire exit might be" in engaged["context"]

    small = memory.engage("where is the fire exit", char_budget=40, where={"evidence_level": "official"})
    assert small["source_krefs"] == [official]
    assert len(small["context"]) <= 40 and small["context"].endswith("…[truncated]")
    assert memory.engage("zzzz qqqq") == {"context": "", "results": [], "source_krefs": [], "count": 0,
                                          "approx_tokens": 0, "context_was_prefetched": False, "state": None,
                                          "predictions": []}


# ==========================================================================================================
# 9. Bad input raises InvalidArgumentError and changes nothing
# ==========================================================================================================

@pytest.mark.parametrize("options", [
    {"limit": 0},
    {"limit": -1},
    {"limit": 1001},
    {"limit": True},
    {"limit": 2.0},
    {"where": "team=red"},
    {"where": [("team", "red")]},
    {"prefer": [{"where": {"team": "red"}, "trust": 2}]},
    {"prefer": [{"where": {"team": "red"}, "trust": -0.1}]},
    {"prefer": [{"where": {"team": {"$bad": 1}}, "trust": 0.5}]},
    {"prefer_max_boost": -1},
    {"semantic_weight": 1.5},
    {"semantic_weight": -0.1},
    {"as_of": "not a date"},
    {"query_time": "not a date"},
    {"min_score": float("nan")},
    {"space": "bad space!"},
    {"space_paths": "notes"},
    {"memory_types": "fact"},
])
def test_bad_recall_arguments_raise_and_change_nothing(memory, options):
    kref = memory.remember("The red team owns the budget", metadata={"team": "red"})
    memory.recall("budget")
    before = (memory.stats(), export_text(memory))

    with pytest.raises(km.InvalidArgumentError):
        memory.recall("budget", **options)

    assert (memory.stats(), export_text(memory)) == before
    assert krefs(memory.recall("budget")) == [kref]


def test_bad_engage_arguments_raise(memory):
    memory.remember("The red team owns the budget")
    with pytest.raises(km.InvalidArgumentError):
        memory.engage("budget", limit=0)
    with pytest.raises(km.InvalidArgumentError):
        memory.engage("budget", as_of="not a date")


def test_siblings_in_cosine_mode_when_the_memory_has_an_embedder():
    """With an embedder, sibling revisions are chosen by cosine with the query (and a failing embedder
    falls back to keyword mode instead of failing the recall)."""
    vocabulary = ["paris", "london", "berlin", "moved", "lives", "city"]

    def embed(texts):
        return [[1.0 + text.lower().count(word) for word in vocabulary] for text in texts]
    memory = km.Memory(embedder=embed)
    memory.remember("Ann lives in Paris", key="ann.city")
    memory.remember("Ann moved to Berlin", key="ann.city")
    latest = memory.remember("Ann lives in London now", key="ann.city")
    hits = memory.recall("Ann London Paris", siblings=True)
    assert hits[0]["kref"] == latest
    siblings = hits[0]["sibling_revisions"]
    assert siblings and all("_score" in sibling for sibling in siblings)
    assert siblings[0]["content"] == "Ann lives in Paris"          # the closest by cosine comes first

    def broken(texts):
        raise RuntimeError("embedder down")
    failing = km.Memory(embedder=broken)
    failing.remember("Bo lives in Rome", key="bo.city")
    failing.remember("Bo lives in Oslo", key="bo.city")
    result = failing.recall("Bo Rome", siblings=True)
    assert result[0]["sibling_revisions"][0]["content"] == "Bo lives in Rome"    # keyword mode still works


def test_a_reader_left_behind_a_trimmed_change_log_rebuilds_its_index(tmp_path, monkeypatch):
    """The change log is trimmed; a process whose index is older than what is kept rebuilds it and still
    sees every write (nothing stale, nothing missing)."""
    monkeypatch.setattr(km.SQLiteGraph, "CHANGE_LOG_KEEP", 20)
    path = str(tmp_path / "trim.db")
    writer, reader = km.Memory(path), km.Memory(path)
    early = writer.remember("early note about zebras")
    assert [hit["kref"] for hit in reader.recall("zebras")] == [early]       # the reader builds its index now
    marmot = writer.remember("a marmot was seen in the garden")          # its change row will be trimmed
    for number in range(10_050):
        writer.remember(f"filler note {number}")
    writer.forget(early.split("?")[0])
    late = writer.remember("late note about zebras")
    kept = writer.backend._conn.execute("SELECT count(*) FROM changes").fetchone()[0]
    assert kept < 200                                                          # trimmed
    assert [hit["kref"] for hit in reader.recall("zebras")] == [late]
    assert [hit["kref"] for hit in reader.recall("marmot")] == [marmot]
    writer.close()
    reader.close()


def test_a_conversation_continues_after_export_and_import(tmp_path):
    """Importing an export restores thread pointers: the next message of an imported conversation is linked
    to its last imported message (FOLLOWS)."""
    import io
    source = km.Memory()
    meta = {"speaker": "Ann", "session": "s1"}
    source.remember("first message about the garden", space="chat", metadata=meta)
    last = source.remember("second message about roses", space="chat", metadata=meta)
    dump = io.StringIO()
    source.export_jsonl(dump)
    copy = km.Memory(str(tmp_path / "copy.db"))
    copy.import_jsonl(dump.getvalue().splitlines())
    following = copy.remember("third message about tulips", space="chat", metadata=meta)
    assert [edge["target_kref"] for edge in copy.edges(following, edge_type="FOLLOWS")] == [last]
    copy.close()


def test_a_neighbour_lent_score_names_its_lender_by_kref(clock, ids):
    # issue 21 item 3: the query-time neighbour spread noted the lender's engine row id
    graph = km.SQLiteGraph(None, clock=clock)
    graph.signals = km.RecallSignals(neighbour_spread=0.5)
    memory = km.Memory(backend=graph, clock=clock, ids=ids)
    question = memory.remember("Ana: did you see the canary release numbers?", space="chat",
                               metadata={"speaker": "Ana", "thread_id": "s1"})
    answer = memory.remember("Ben: yes, the deployment pipeline was green all Friday", space="chat",
                             metadata={"speaker": "Ben", "thread_id": "s1"})

    found = {result["kref"]: result["signals"] for result in memory.recall("deployment pipeline green")}

    assert found[question]["neighbour_of"] == answer


def test_a_filtered_recall_keeps_a_match_only_an_edge_brings_in(memory):
    # hostile review of issue 21's filter push-down: the hit that lends over its edge fails the filter, the
    # neighbour it brings in passes it; the Kumiho backend lent only from what the filter had passed
    seed = memory.remember("I adopted a puppy named Rex", metadata={"color": "blue"})
    lent = memory.remember("my favourite food is ramen", metadata={"color": "red"})
    memory.link(lent, seed, "RELATED_TO")
    assert lent in krefs(memory.recall("puppy Rex", limit=5))

    assert krefs(memory.recall("puppy Rex", limit=5, where={"color": "red"})) == [lent]


def test_a_point_in_time_recall_is_not_crowded_out_by_newer_memories(memory, clock):
    # hostile review: the Kumiho backend stopped paging its server's search after a page of results, newer
    # ones that cannot exist at as_of included, so an as_of recall behind many newer matches came back empty
    older = [memory.remember(f"apple note {number}", metadata={"color": "blue" if number % 2 else "red"})
             for number in range(40)]
    cut = clock.now()
    clock.advance(60)
    for number in range(150):
        memory.remember(f"apple banana {number}", metadata={"color": "red"})

    everything = memory.recall("apple banana", limit=10, as_of=cut)
    blue = memory.recall("apple banana", limit=10, as_of=cut, where={"color": "blue"})

    assert len(everything) == 10 and set(krefs(everything)) <= set(older)
    assert len(blue) == 10 and all(result["metadata"]["color"] == "blue" for result in blue)
