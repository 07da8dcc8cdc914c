"""Recall over conversations (issue 18, second round): one query-time expansion, a question in the first or
second person is about the user's or the assistant's own turns, and the newest-value reordering only for the
relations a question asks about now. The texts here were written for these tests, not taken from the
benchmarks the mechanisms were tuned on."""

from __future__ import annotations

import pytest

import kumiho_memory as km


# -- one expansion -------------------------------------------------------------------------------------------

def test_one_expansion_whoever_the_question_is_about():
    mine, hers = (km.query_expansions("Where do I live these days?"),
                  km.query_expansions("Where does Ann live these days?"))
    assert mine == hers and {"move", "reloc", "resid"} <= set(mine)
    assert "live" not in mine                                # what the query writes is not an expansion


def test_an_expansion_is_never_a_written_term_and_a_plain_query_has_none():
    assert km.query_expansions("lemon tree garden") == ()
    assert "allergi" in km.query_expansions("is Theo allergic to cats?")


@pytest.mark.parametrize("text", [
    "Ann moved to Lyon in March", "My favourite dish is ramen", "She likes the colour green", "I drive a Kia",
    "Theo works as a nurse now", "We adopted a puppy", "Bo turned 30 today", "the weather was lovely",
    "Rex is recovering from surgery", "a flight to Oslo", "nothing to see here", "I wake up at 7"])
def test_the_relation_gate_keeps_every_relation(text):
    lowered = text.casefold()
    spelled = {name for name, pattern in km._COMPILED_RELATIONS.items() if pattern.search(lowered)}
    found = km.belief_relations(text)
    assert spelled <= found and {name for name in found if not name.startswith("favorite:")} == spelled


# -- the question's person names a speaker -------------------------------------------------------------------

def test_person_terms():
    assert "user" in km.person_terms("How many plants do I keep on my balcony?")
    assert "assist" in km.person_terms("Which film did you recommend last time?")
    assert km.person_terms("What did you tell me about ferns?") == ()          # both: no one in particular
    assert km.person_terms("Where does Ann live?") == ()


def _chat(memory, space="chat"):
    memory.remember("user: Quick one about balcony plants. By the way, I keep three fern pots on my balcony.",
                    space=space, metadata={"speaker": "user", "session": "s1"})
    for turn in range(4):
        memory.remember(f"assistant: Fern pots on a balcony like shade; balcony fern pots dry fast, so water fern "
                        f"pots on the balcony often (tip {turn}).", space=space,
                        metadata={"speaker": "assistant", "session": f"s{turn + 2}"})
        memory.remember(f"user: Thanks, noted number {turn}.", space=space,
                        metadata={"speaker": "user", "session": f"s{turn + 2}"})


def test_a_first_person_question_finds_the_users_own_turn_first():
    with km.Memory() as memory:
        _chat(memory)
        hits = memory.recall("How many fern pots do I keep on my balcony?", space="chat", limit=3)
        plain = memory.recall("fern pots balcony", space="chat", limit=3)
    assert hits[0]["content"].startswith("user: Quick one") and hits[0]["signals"].get("who") == ["user"]
    assert plain[0]["content"].startswith("assistant:")       # without the person, the repeated words win


def test_a_second_person_question_prefers_the_assistants_turns():
    with km.Memory() as memory:
        _chat(memory)
        hits = memory.recall("What did you say about fern pots on a balcony?", space="chat", limit=2)
    assert all(hit["content"].startswith("assistant:") for hit in hits)


def test_named_speakers_are_not_the_user():
    with km.Memory() as memory:
        memory.remember("Ann: I keep three fern pots on my balcony.", space="c", metadata={"speaker": "Ann"})
        memory.remember("Bo: fern pots, balcony fern pots, so many fern pots.", space="c", metadata={"speaker": "Bo"})
        hits = memory.recall("How many fern pots do I keep?", space="c", limit=2)
    assert all("who" not in hit["signals"] for hit in hits)


# -- newest value first, only for what is asked now ----------------------------------------------------------

def _two_residences(memory):
    old = memory.remember("Alice lives in Paris and loves the Paris cafes in Paris", space="facts")
    new = memory.remember("Alice moved to Rome", space="facts")
    return old, new


def test_a_question_about_now_ranks_the_newer_value_first():
    with km.Memory() as memory:
        old, new = _two_residences(memory)
        found = memory.recall("Where does Alice live in Paris?", space="facts")
    assert [hit["kref"] for hit in found[:2]] == [new, old]


@pytest.mark.parametrize("question", ["How long did Alice live in Paris?", "Where did Alice live in Paris in 2020?",
                                      "Where was Alice living in Paris?"])
def test_history_dated_and_other_questions_keep_their_order(question):
    with km.Memory() as memory:
        old, new = _two_residences(memory)
        found = memory.recall(question, space="facts")
    assert found[0]["kref"] == old
    assert all("superseded_by" not in hit["signals"] for hit in found)


def test_newest_first_within_relation_honours_the_asked_relations():
    older = {"kref": "a", "content": "Alice lives in Paris", "metadata": {}, "tags": [], "created_at": "2024-01-01",
             "score": 1.0, "signals": {}}
    newer = {"kref": "b", "content": "Alice moved to Rome", "metadata": {}, "tags": [], "created_at": "2024-02-01",
             "score": 0.5, "signals": {}}
    assert [r["kref"] for r in km.newest_first_within_relation([dict(older), dict(newer)])] == ["b", "a"]
    assert [r["kref"] for r in km.newest_first_within_relation([dict(older), dict(newer)], {"residence"})] == ["b", "a"]
    assert [r["kref"] for r in km.newest_first_within_relation([dict(older), dict(newer)], {"employer"})] == ["a", "b"]
    assert [r["kref"] for r in km.newest_first_within_relation([dict(older), dict(newer)], ())] == ["a", "b"]
