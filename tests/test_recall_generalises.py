"""Recall that generalises (issue 18): length-aware BM25, the replayed history's own "now", more time words,
and questions asked in other words than the memory."""

from __future__ import annotations

import datetime as dt

import pytest

import kumiho_memory as km

UTC = dt.timezone.utc
SATURDAY = dt.datetime(2023, 5, 20, 15, 0, tzinfo=UTC)


def days(window):
    return tuple(dt.datetime.fromtimestamp(edge, UTC).date().isoformat() for edge in window)


# -- length-aware BM25 ---------------------------------------------------------------------------------------

def test_shortness_follows_the_space_mean_length():
    assert km.bm25_shortness(20) == 1.0 and km.bm25_shortness(100) == 0.0
    assert 0.0 < km.bm25_shortness(48) < 1.0
    assert km.bm25_profile(1.0) == km.BM25_PROFILES[True] and km.bm25_profile(0.0) == km.BM25_PROFILES[False]


def test_a_space_of_long_replies_is_scored_as_documents_and_chat_as_chat():
    long_reply = " ".join(f"word{i} garden tips" for i in range(60))
    with km.Memory() as memory:
        for turn in range(6):
            memory.remember(f"Ann: short turn {turn} about tea", space="chat", metadata={"speaker": "Ann"})
            memory.remember(f"assistant: {long_reply} {turn}", space="long", metadata={"speaker": "assistant"})
        memory.remember("user: I planted a lemon tree in my garden", space="long", metadata={"speaker": "user"})
        hits = memory.recall("garden", space="long", limit=3)
        state = memory._backend._recall
        by_path = {path: state.space_short[space_id] for (_, path), space_id in state.space_ids.items()
                   if space_id in state.space_short}
    assert by_path["chat"] == 1.0 and by_path["long"] == 0.0          # not by speaker: both spaces are messages
    assert hits[0]["content"].startswith("user: I planted")             # the short turn beats the long replies


def test_a_young_space_is_reindexed_when_its_mean_length_settles():
    with km.Memory() as memory:
        memory.remember("tea", space="notes")                          # one short note: chat-like
        memory.recall("tea", space="notes")
        for number in range(8):
            memory.remember(" ".join(f"term{number}x{i}" for i in range(120)) + " tea", space="notes")
        memory.recall("tea", space="notes")
        state = memory._backend._recall
        space_id = state.space_ids[(memory.project, "notes")]
        assert state.space_short[space_id] == 0.0
        index = state.index
        assert {index.slot_stats(index.doc_slot[doc])[1] for doc in state.live_by_space[space_id]} == {0.0}


# -- time words ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("query, expected", [
    ("what did I buy in December?", ("2022-12-01", "2022-12-31")),
    ("in May", ("2023-05-01", "2023-05-31")),
    ("last May", ("2022-05-01", "2022-05-31")),
    ("mid-March", ("2023-03-01", "2023-03-31")),
    ("what did I do on Saturday?", ("2023-05-13", "2023-05-13")),
    ("last Tuesday", ("2023-05-16", "2023-05-16")),
    ("the past weekend", ("2023-05-13", "2023-05-14")),
    ("3 weeks ago", ("2023-04-24", "2023-04-30")),
    ("two months ago", ("2023-03-01", "2023-03-31")),
    ("earlier this year", ("2023-01-01", "2023-05-20")),
    ("last summer", ("2022-06-01", "2022-08-31")),
    ("this spring", ("2023-03-01", "2023-05-31")),
])
def test_more_time_words(query, expected):
    assert days(km.parse_time_window(query, SATURDAY)) == expected


@pytest.mark.parametrize("query", ["you may go", "Saturdays are fun", "a march of ants"])
def test_words_that_are_not_times(query):
    assert km.parse_time_window(query, SATURDAY) is None


@pytest.mark.parametrize("year, month", [(1, 1), (9999, 12)])
def test_far_dates_never_raise(year, month):
    now = dt.datetime(year, month, 1, tzinfo=UTC)
    for query in ("in December", "last summer", "in the winter", "on Saturday", "the past weekend",
                  "earlier this year", "99999999 weeks ago"):
        km.parse_time_window(query, now)


def test_relative_times_read_against_the_newest_event_when_no_query_time():
    with km.Memory() as memory:
        memory.remember("We went hiking by the lake.", space="replay", metadata={"speaker": "Ann",
                        "event_date": "2023-05-13T10:00:00Z"})
        memory.remember("We went hiking in the hills.", space="replay", metadata={"speaker": "Ann",
                        "event_date": "2023-03-04T10:00:00Z"})
        memory.remember("Nothing much today.", space="replay", metadata={"speaker": "Ann",
                        "event_date": "2023-05-20T10:00:00Z"})
        hits = memory.recall("Where did we go hiking last Saturday?", space="replay", limit=2)
        assert "lake" in hits[0]["content"] and "when" in hits[0]["signals"]
        fixed = memory.recall("Where did we go hiking last Saturday?", space="replay", limit=2,
                              query_time="2023-03-10T00:00:00Z")
        assert "hills" in fixed[0]["content"]


# -- other words -----------------------------------------------------------------------------------------------

def test_where_does_ann_live_finds_the_move():
    with km.Memory() as memory:
        memory.remember("I moved to Lisbon last month.", metadata={"user": "Ann"})
        memory.remember("Bob bought a new bike.")
        hits = memory.recall("where does Ann live?")
    assert [hit["content"] for hit in hits] == ["I moved to Lisbon last month."]


def test_allergy_words_meet():
    assert "allerg" in km.query_expansions("any allergies?")
    with km.Memory() as memory:
        memory.remember("I am allergic to peanuts.")
        memory.remember("I like long walks.")
        assert memory.recall("does she have a food allergy?")[0]["content"] == "I am allergic to peanuts."
