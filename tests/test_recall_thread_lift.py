"""Recall over conversations (issue 18, "recall that generalises"): a thread where the query's best matches
gather lifts its weaker matches below the head (``lift_threads``), the who and time boosts are weighed over
more candidates than are kept, and a message's thread opening is worked out the same whichever walks came
first. The texts here were written for these tests, not taken from the benchmarks."""

from __future__ import annotations

import kumiho_memory as km

FILLER = ["Oh nice, how is the new flat?", "Still unpacking boxes, honestly.", "Same here, it takes forever.",
          "Did you find a good bakery nearby?", "Yes, a tiny one round the corner."]


def _conversation(memory: km.Memory) -> None:
    """Session s1 talks about a canoe outing (strong matches), then drifts, then mentions it once in passing;
    session s2 mentions the canoe once, in a short turn, among other things."""
    def say(session, speaker, text):
        memory.remember(f"{speaker}: {text}", space="chat", kind="message",
                        metadata={"speaker": speaker, "session": session})
    say("s1", "Mia", "We took the canoe down the river on Saturday, a canoe outing with the whole club.")
    say("s1", "Leo", "A canoe outing on the river sounds great! How long was the canoe trip?")
    say("s1", "Mia", "The canoe trip took four hours; the river was calm and the canoe held up fine.")
    say("s1", "Leo", "I have never paddled a canoe on a river. Was the canoe outing hard?")
    say("s1", "Mia", "Not hard: the club lends each of us a canoe for the outing on the river.")
    say("s1", "Leo", "Maybe I will join the next canoe outing on the river then.")
    for number, text in enumerate(FILLER):
        say("s1", "Mia" if number % 2 else "Leo", text)
    say("s1", "Mia", "Oh, and I still have sore arms from that canoe, believe it or not.")      # the answer
    for number, text in enumerate(FILLER):
        say("s2", "Leo" if number % 2 else "Mia", text.replace("new flat", "new job"))
    say("s2", "Leo", "My cousin sold his canoe.")                                  # a passing mention


def _rank(hits, fragment):
    return next(place for place, hit in enumerate(hits) if fragment in hit["content"])


def test_a_weak_match_in_the_thread_the_query_is_about_ranks_above_one_elsewhere():
    with km.Memory() as memory:
        _conversation(memory)
        hits = memory.recall("canoe outing on the river", limit=10, space="chat")
        assert _rank(hits, "sore arms") < _rank(hits, "cousin sold")


def test_the_lift_never_moves_the_head(monkeypatch):
    with km.Memory() as memory:
        _conversation(memory)
        lifted = memory.recall("canoe outing on the river", limit=10, space="chat")
        monkeypatch.setattr(km, "THREAD_LIFT", 0.0)
        plain = memory.recall("canoe outing on the river", limit=10, space="chat")
    head = km.THREAD_LIFT_HEAD
    assert [hit["kref"] for hit in lifted[:head]] == [hit["kref"] for hit in plain[:head]]
    assert [hit["kref"] for hit in lifted] != [hit["kref"] for hit in plain]


def test_lift_threads_on_its_own():
    scores = {1: 10.0, 2: 9.0, 3: 8.0, 4: 7.0, 5: 6.0, 6: 1.0, 7: 1.1, 8: 0.5}
    thread = {1: 1, 2: 1, 3: 1, 4: 1, 5: 1, 6: 1, 7: 70, 8: None}.get           # 8: not a message
    km.lift_threads(scores, thread)
    assert sorted(scores, key=scores.get, reverse=True)[:5] == [1, 2, 3, 4, 5]
    assert scores[6] > scores[7] and scores[8] == 0.5
    assert min(scores[d] for d in (1, 2, 3, 4, 5)) > max(scores[d] for d in (6, 7, 8))
    crowded = {1: 1.0, 2: 1.0, 3: 1.0, 4: 1.0, 5: 1.0, 6: 0.99}                   # a lift past the head
    km.lift_threads(crowded, {doc_id: 1 for doc_id in crowded}.get)
    assert min(crowded[d] for d in range(1, 6)) > crowded[6] > 0.99


def test_a_thread_opening_does_not_depend_on_which_walks_came_first():
    walk = km._RecallState.THREAD_WALK
    for order in ((walk - 50, walk + 50), (walk + 50, walk - 50)):
        state = km._RecallState(km.RecallSignals())
        state.thread_prev = {doc_id: doc_id - 1 for doc_id in range(1, walk + 100)}
        state.doc_message = set(range(walk + 100))
        found = {doc_id: state._thread_start(doc_id) for doc_id in order}
        assert found == {walk - 50: 0, walk + 50: None}
        assert state._thread_openings([walk - 49, walk + 49, walk + 200]) == {walk - 49: 0, walk + 49: None,
                                                                              walk + 200: None}


def test_thread_openings_follow_a_forgotten_message():
    with km.Memory() as memory:
        krefs = [memory.remember(f"Mia: turn {number} about the canoe", space="chat", kind="message",
                                 metadata={"speaker": "Mia", "session": "s1"}) for number in range(6)]
        assert len(memory.recall("canoe", limit=10, space="chat")) == 6
        state = memory._backend._recall
        assert len(set(state._thread_openings(sorted(state.doc_message)).values())) == 1
        memory.forget(krefs[2])
        assert len(memory.recall("canoe", limit=10, space="chat")) == 5
        state = memory._backend._recall
        docs = sorted(state.doc_message)
        fresh = km._RecallState(state.signals)             # nothing walked yet
        fresh.thread_prev, fresh.doc_message = dict(state.thread_prev), set(state.doc_message)
        assert state._thread_openings(docs) == fresh._thread_openings(docs)
        assert len(set(state._thread_openings(docs).values())) == 2      # the thread starts again after the gap
