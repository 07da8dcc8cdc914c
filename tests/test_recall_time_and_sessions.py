"""Recall reads time the way a conversation tells it, and covers the occasions a question asks about (issue
18, third round): holidays and date ranges as time words, "before/after <event>" with the event's own date
as the edge, order and duration questions that keep both events they compare, and questions about several
occasions spread over threads, led by each thread's opening message. The texts here were written for these
tests, not taken from the benchmarks the mechanisms were tuned on."""

from __future__ import annotations

import datetime as dt

import pytest

import kumiho_memory as km

NOW = km.parse_instant("2024-05-10T12:00:00Z")


def _days(window):
    return None if window is None else tuple(dt.datetime.fromtimestamp(edge, dt.timezone.utc).date().isoformat()
                                             for edge in window)


# -- holidays and ranges -------------------------------------------------------------------------------------

@pytest.mark.parametrize("query, day", [
    ("What did we cook last Christmas?", "2023-12-25"),
    ("what did I get for christmas", "2023-12-25"),
    ("plans for this Christmas", "2024-12-25"),
    ("the party on Christmas Eve", "2023-12-24"),
    ("fireworks on New Year's Eve", "2023-12-31"),
    ("a walk on New Year’s Day", "2024-01-01"),
    ("the egg hunt at Easter", "2024-03-31"),
    ("what did the kids wear for Halloween?", "2023-10-31"),
    ("dinner on Valentine's Day", "2024-02-14"),
    ("the barbecue on the 4th of July", "2023-07-04"),
    ("parade on Independence Day", "2023-07-04"),
    ("the pie at Thanksgiving", "2023-11-23"),
])
def test_holidays_are_read_against_the_anchor_year(query, day):
    assert _days(km.parse_time_window(query, NOW)) == (day, day)


def test_a_holiday_with_a_year_needs_no_anchor_and_last_means_before_the_anchor_day():
    assert _days(km.parse_time_window("Christmas 2021")) == ("2021-12-25", "2021-12-25")
    assert _days(km.parse_time_window("Easter 2025")) == ("2025-04-20", "2025-04-20")
    assert _days(km.parse_time_window("Thanksgiving 2024")) == ("2024-11-28", "2024-11-28")
    christmas_day = km.parse_instant("2023-12-25T18:00:00Z")
    assert _days(km.parse_time_window("on Christmas", christmas_day)) == ("2023-12-25", "2023-12-25")
    assert _days(km.parse_time_window("last Christmas", christmas_day)) == ("2022-12-25", "2022-12-25")


def test_a_holiday_outside_the_calendar_is_no_window():
    assert km.parse_time_window("Christmas 0000") is None
    assert km.parse_time_window("last Easter", dt.datetime(1, 2, 1, tzinfo=dt.timezone.utc)) is None


def test_a_range_of_dates_is_one_window():
    assert _days(km.parse_time_window("Where was Ivo between August 11 and August 15 2023?")) == \
        ("2023-08-11", "2023-08-15")
    assert _days(km.parse_time_window("from May 3 to May 9, 2023")) == ("2023-05-03", "2023-05-09")


def test_last_christmas_is_the_conversations_own_last_christmas(memory):
    for text, date in (("Mira: We baked ginger biscuits together.", "2022-12-25T10:00:00Z"),
                       ("Mira: We baked ginger biscuits for the neighbours.", "2023-12-25T10:00:00Z"),
                       ("Mira: Spring cleaning done at last.", "2024-04-02T10:00:00Z")):
        memory.remember(text, space="c", metadata={"speaker": "Mira", "event_date": date})
    hits = memory.recall("What did Mira bake last Christmas?", space="c", limit=2)
    assert hits[0]["metadata"]["event_date"].startswith("2023-12-25")


# -- before / after another memory's event -------------------------------------------------------------------

def test_event_edge():
    assert km.event_edge("Where did Ivo go hiking after the kayak trip?") == ("after", "the kayak trip")
    assert km.event_edge("What did Ivo sell before moving to Ghent?") == ("before", "moving to Ghent")
    assert km.event_edge("What happened after that?") is None
    assert km.event_edge("What did Ivo do before May 2023?") is None          # a time, read as one
    assert km.event_edge("Where does Ivo live?") is None


def _hikes(memory):
    # the hike after the trip is written first: with equal words, the newer memory would win a tie
    for text, date in (("Ivo: Went hiking near the lake, lovely views.", "2023-03-14T10:00:00Z"),
                       ("Ivo: Went hiking near the quarry, lovely views.", "2023-03-05T10:00:00Z"),
                       ("Ivo: Back from the kayak trip down the Lesse.", "2023-03-10T10:00:00Z"),
                       ("Ivo: Nothing much, reading at home.", "2023-05-01T10:00:00Z")):
        memory.remember(text, space="c", metadata={"speaker": "Ivo", "event_date": date})


def test_after_an_event_prefers_what_came_after_its_date(memory):
    _hikes(memory)
    after = memory.recall("Where did Ivo go hiking after the kayak trip?", space="c", limit=3)
    before = memory.recall("Where did Ivo go hiking before the kayak trip?", space="c", limit=3)
    hikes_after = [hit["content"] for hit in after if "hiking" in hit["content"]]
    hikes_before = [hit["content"] for hit in before if "hiking" in hit["content"]]
    assert "lake" in hikes_after[0] and "quarry" in hikes_before[0]
    assert any("kayak" in hit["content"] for hit in after)          # the event itself stays in view


# -- order and duration questions keep both events -----------------------------------------------------------

@pytest.mark.parametrize("query, events", [
    ("Which came first, the move to Porto or the wedding?", ("the move to Porto", "the wedding")),
    ("Which did Lea finish first: the quilt or the scarf?", ("the quilt", "the scarf")),
    ("How many days passed between the day I bought the kayak and the day I sold my bike?",
     ("the day I bought the kayak", "the day I sold my bike")),
    ("How long had I been knitting when I joined the craft club?", ("I been knitting", "I joined the craft club")),
    ("How many weeks after I adopted the cat did I get the dog?", ("I adopted the cat", "I get the dog")),
])
def test_compared_events(query, events):
    assert km.compared_events(query) == events


def test_compared_events_is_empty_for_other_questions():
    assert km.compared_events("What did Lea knit first?") == ()
    assert km.compared_events("Where does Lea live, Porto or Lisbon?") == ()


def test_an_order_question_keeps_both_events_in_the_top(memory):
    memory.remember("Lea: Our wedding was on the beach, simple and warm.", space="c", metadata={"speaker": "Lea"})
    for text in ("Lea: The move to Porto came first on our list this year.",
                 "Lea: First week after the move to Porto, boxes everywhere.",
                 "Lea: The move to Porto: which van first? So many choices.",
                 "Lea: Porto again! The move came with a first flat viewing.",
                 "Lea: A wedding guest asked about the move to Porto first thing."):
        memory.remember(text, space="c", metadata={"speaker": "Lea"})
    hits = memory.recall("Which came first, the move to Porto or the wedding?", space="c", limit=2)
    assert any("wedding" in hit["content"] and "Porto" not in hit["content"] for hit in hits)
    assert any("Porto" in hit["content"] for hit in hits)


# -- several occasions: spread over threads, led by their opening messages -----------------------------------

@pytest.mark.parametrize("query", [
    "How many times did I go climbing?", "How much did I spend on plants in total?",
    "How many plants have I bought?", "Which cafes did I try this spring?", "List all the books I lent out.",
])
def test_asks_about_occasions(query):
    assert km.asks_about_occasions(query)


@pytest.mark.parametrize("query", [
    "How many days ago did I buy the fern?", "Where do I live?", "How long had I been knitting?",
    "How many days passed between the move and the wedding?", "Which came first, the fern or the cactus?",
    "How many plants do I keep on the balcony?",
])
def test_single_occasion_questions_are_not_about_occasions(query):
    assert not km.asks_about_occasions(query)


def _plant_sessions(memory):
    """Three chats, each opened by the user saying what they bought, then plant-care talk that uses the
    question's words far more often than the openings do."""
    openings = ("user: Hi! I bought a fern at the market this morning, where should it go?",
                "user: Hello again. I bought a small cactus today for my desk.",
                "user: Good evening. I bought an orchid for my mother's birthday.")
    for number, opening in enumerate(openings):
        session = f"s{number}"
        memory.remember(opening, space="chat", metadata={"speaker": "user", "session": session})
        for turn in range(3):
            memory.remember("assistant: Plants you bought need light. Bought plants settle in a week; water plants "
                            f"you bought when the soil is dry (note {number}.{turn}).", space="chat",
                            metadata={"speaker": "assistant", "session": session})
            memory.remember(f"user: Thanks, I will water the plants I bought (reply {number}.{turn}).",
                            space="chat", metadata={"speaker": "user", "session": session})


def test_a_question_about_several_occasions_finds_each_threads_opening(memory):
    _plant_sessions(memory)
    hits = memory.recall("How many plants have I bought in total?", space="chat", limit=4)
    openings = [hit for hit in hits if hit["content"].startswith("user: H") or hit["content"].startswith("user: G")]
    assert len(openings) == 3
    assert len({hit["metadata"]["session"] for hit in hits}) == 3


def test_a_single_occasion_question_is_not_spread(memory):
    _plant_sessions(memory)
    hits = memory.recall("Where should the plants I bought go?", space="chat", limit=4)
    assert all("thread_opening" not in hit["signals"] for hit in hits)
