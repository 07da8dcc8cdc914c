"""Implied words (issue 18, item 4): a short memory is also indexed under the few words a question about it
would use and it does not write ("moved to Lisbon" under live and home, a puppy under pet), at a reduced
weight and outside its length, the same way on every backend; the prospective questions an LLM writes for a
consolidated memory are read the same way, however long the summary; a store written before gets the words
from ``kumiho-memory index``. The texts here were written for these tests, not taken from the benchmarks the
table was tuned on."""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3

import pytest

import kumiho_memory as km
from test_manager import ChatServer, adapter_for, say

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
W = km.IMPLIED_WEIGHT


def implied(text: str) -> dict[str, float]:
    """What ``text`` implies, given its own terms as the engine computes them."""
    return km.implied_terms(text, dict.fromkeys(km.tokenize(text)))


@pytest.fixture
def without_implied_words(monkeypatch):
    """The module as it was before the feature: a memory is indexed under its written words only."""
    monkeypatch.setattr(km, "implied_terms", lambda text, terms: {})


# -- which words a memory implies --------------------------------------------------------------------------

def test_a_move_is_also_indexed_as_where_one_lives():
    # and it answers "where" and "when" (answer kinds: test_recall_answer_kinds.py)
    assert implied("I moved to Lisbon last month.") == {"live": W, "home": W, "where": W, "when": W}
    assert 0.0 < W < 1.0


@pytest.mark.parametrize("text, term", [
    ("We adopted a puppy from the shelter down the road.", "pet"),
    ("Kickboxing twice a week keeps me sane.", "exercis"),
    ("Last spring we spent ten days in Portugal.", "countri"),
    ("Saw the lantern festival by the river on Friday.", "event"),
    ("I finally finished that novel you lent me.", "read"),
])
def test_a_specific_word_implies_the_word_a_question_asks_by(text, term):
    assert term in implied(text)
    assert term not in km.tokenize(text)


def test_words_the_memory_writes_are_not_implied_again():
    # only the answer kind it says: it names a place (test_recall_answer_kinds.py)
    assert implied("We moved to Porto: we live there now and it feels like home.") == {"where": W}


def test_a_memory_that_names_nothing_in_the_table_implies_nothing():
    assert implied("Thanks, that was a lovely chat about tea and biscuits.") == {}


def test_a_memory_implies_at_most_a_few_words_the_first_words_first():
    text = "My puppy hates kickboxing, Spain and the festival."
    assert list(implied(text)) == ["pet", "exercis", "countri"][:km.IMPLIED_PER_TEXT]
    assert len(implied(text)) == km.IMPLIED_PER_TEXT


def test_a_long_text_is_not_read_for_implied_words():
    text = "I moved to Lisbon with my puppy. " + "Then we talked about tea and biscuits at length. " * 12
    assert len(text) > km.IMPLIED_MAX_CHARS
    assert implied(text) == {}


def test_a_long_summary_still_has_its_prospective_questions_read():
    facts = [{"claim": f"Ann and Bo compared tea number {number} with biscuits and a puppy."} for number in range(12)]
    text = km.render_summary({"summary": "A long chat about tea.", "knowledge": {"facts": facts}},
                             ["Which kickboxing gym did Ann join?"])
    assert len(text) > km.IMPLIED_MAX_CHARS and km.PROSPECTIVE_HEADING in text
    assert implied(text) == {"exercis": W}          # the questions' words; the long body's puppy implies nothing


def test_the_readme_states_the_figures_the_module_uses():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as stream:
        readme = " ".join(stream.read().split())
    assert f"a short memory (up to {km.IMPLIED_MAX_CHARS} characters)" in readme
    assert f"At most three per memory, each counted {km.IMPLIED_WEIGHT} of an occurrence" in readme
    assert km.IMPLIED_PER_TEXT == 3


# -- how the embedded engine stores them -------------------------------------------------------------------

def test_implied_words_are_stored_with_the_memory_but_not_in_its_length(tmp_path):
    path = str(tmp_path / "store.db")
    text = "Ann adopted a puppy."
    with km.Memory(path) as memory:
        memory.remember(text, space="people")
        memory.remember_many([{"content": "Bo took up kickboxing.", "space": "people"}])
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT r.content, r.token_count, d.terms FROM revisions r "
                            "JOIN doc_terms d ON d.revision_id = r.id ORDER BY r.id").fetchall()
    (first, first_length, first_terms), (_, _, second_terms) = rows
    assert first == text and json.loads(first_terms)["pet"] == W
    assert first_length == 2 * len(km.tokenize(text))      # a one-line memory is its own title: its words twice
    assert json.loads(second_terms)["exercis"] == W          # remember_many indexes the same way


# -- recall on every backend -------------------------------------------------------------------------------

def store_people(memory: km.Memory) -> dict[str, str]:
    return {"puppy": memory.remember("Ann adopted a puppy called Biscuit.", space="people"),
            "move": memory.remember("Bo moved to Lisbon in March.", space="people"),
            "tea": memory.remember("Ann likes green tea in the afternoon.", space="people"),
            "museum": memory.remember("Bo toured the city museum with Ann.", space="people")}


def test_a_question_in_the_implied_words_finds_the_memory(memory):
    krefs = store_people(memory)
    assert memory.recall("What pets does Ann have?", space="people", limit=3)[0]["kref"] == krefs["puppy"]
    assert memory.recall("Bo's home", space="people", limit=3)[0]["kref"] == krefs["move"]


def test_without_implied_words_the_question_misses(memory, without_implied_words):
    krefs = store_people(memory)
    assert [hit["kref"] for hit in memory.recall("pets", space="people")] == []
    assert krefs["puppy"] not in [hit["kref"] for hit in memory.recall("Ann's pets", space="people", limit=1)]


def test_implied_words_count_less_than_written_ones(memory):
    # three people, so no statement revises another; the server backend's search finds candidates by the
    # query's own words: each of these writes "Lisbon"
    written = memory.remember("Cy's home is a flat in Lisbon.", space="people")
    moved = memory.remember("Ann moved to Lisbon last month.", space="people")
    seen = memory.remember("Dee saw Lisbon.", space="people")     # shorter: ahead of the move on "Lisbon" alone
    hits = memory.recall("Lisbon home", space="people", limit=3)
    assert [hit["kref"] for hit in hits] == [written, moved, seen]


# -- with an LLM: the prospective questions consolidation writes -------------------------------------------

LONG_SUMMARY = {
    "type": "conversation", "title": "Weekend plans",
    "summary": "Ann talked through her weekend: errands, a long call with her sister, and what to cook.",
    "events": [{"event": "Ann called her sister", "when": "Saturday"}],
    "knowledge": {"facts": [{"claim": f"Errand number {number} is still on the list"} for number in range(10)],
                  "decisions": [], "actions": [], "open_questions": []},
    "classification": {"topics": ["weekend"], "entities": ["Ann"]},
}


def test_the_questions_an_llm_writes_imply_words_however_long_the_summary(memory):
    server = ChatServer(summary=LONG_SUMMARY, questions=["When is Ann bringing the new puppy home?"]).start()

    async def scenario() -> str:
        manager = km.UniversalMemoryManager(memory=memory, llm_adapter=adapter_for(server))
        session_id = await say(manager, "ann", "Errands, my sister, dinner. And the puppy arrives on Sunday!")
        result = await manager.consolidate_session(session_id=session_id)
        await manager.close()
        return result["store_result"]["revision_kref"]

    try:
        kref = asyncio.run(scenario())
    finally:
        server.stop()
    stored = memory.get(kref)
    assert len(stored["content"]) > km.IMPLIED_MAX_CHARS
    assert "pet" not in km.tokenize(stored["content"])
    # a short distractor of the same user (the server backend's search picks candidates by the question's own
    # words): only the implied word of the summary's question puts the long summary first
    memory.remember("Ann fixed the bike and cooked dinner.", space=stored["space"], metadata={"user_id": "ann"})
    assert memory.recall("Ann's pet", space=stored["space"], limit=2)[0]["kref"] == kref


# -- a store written before --------------------------------------------------------------------------------

def test_an_old_store_gets_the_implied_words_from_the_index_command(tmp_path, monkeypatch, capsys):
    path = str(tmp_path / "old.db")
    with monkeypatch.context() as old_version:
        old_version.setattr(km, "implied_terms", lambda text, terms: {})
        with km.Memory(path) as memory:
            krefs = store_people(memory)
    with km.Memory(path) as memory:                # an old store keeps working, without the implied words
        assert memory.recall("Biscuit", space="people")[0]["kref"] == krefs["puppy"]
        assert memory.recall("pets", space="people") == []
    assert km.main(["--db", path, "--json", "index"]) == 0
    captured = capsys.readouterr()
    assert "index: terms of 4/4 memories recomputed" in captured.err
    # the puppy, the move, and the museum (which names a place: an answer kind, test_recall_answer_kinds.py)
    assert json.loads(captured.out)["terms_refreshed"] == 3
    with km.Memory(path) as memory:
        assert [hit["kref"] for hit in memory.recall("pets", space="people")] == [krefs["puppy"]]
        assert memory.backend.refresh_terms() == 0                   # nothing left to recompute
