"""Anticipatory recall (issue 9): transition arithmetic, the confidence gate, prepared results that are
served only when exact, invalidation on revise/forget/deprecate, persistence, stats and shutdown."""

from __future__ import annotations

import math
import threading

import pytest

import kumiho_memory as km

DAY = 86400.0

# Three topic spaces; each query finds its own space's memories first.
CORPUS = {
    "plan": ["Roadmap milestones for the billing migration", "Planning notes: split the billing rollout"],
    "code": ["Implementation detail: the invoice function uses decimal rounding",
             "Code convention: invoice helpers live in billing utils"],
    "review": ["Review checklist: lint, tests and changelog", "Reviewers ask for a changelog entry"],
}
QUERIES = {"plan": "billing roadmap milestones", "code": "invoice function implementation",
           "review": "review checklist changelog"}


def fill(memory: km.Memory) -> dict[str, list[str]]:
    return {space: [memory.remember(text, space=space) for text in texts] for space, texts in CORPUS.items()}


def run_session(memory: km.Memory, session: str, steps, agent: str | None = None) -> list[dict]:
    """Engage each step's query in one session, letting the background work finish between steps."""
    results = []
    for step in steps:
        results.append(memory.engage(QUERIES[step], session_id=session, agent=agent))
        memory.prefetcher.wait_idle(timeout=30)
    return results


def fresh(memory: km.Memory, step: str) -> dict:
    """What engage returns for a step with nothing prepared (no session: prefetching is not involved)."""
    return memory.engage(QUERIES[step])


RESULT_FIELDS = ("context", "results", "source_krefs", "count", "approx_tokens")


def same_result(left: dict, right: dict) -> bool:
    return all(left[name] == right[name] for name in RESULT_FIELDS)


# -- arithmetic ---------------------------------------------------------------------------------------------

def test_counts_decay_exponentially_and_fold_into_new_observations():
    table = km.TransitionTable(decay_lambda=math.log(2) / 14)       # half-life 14 days
    table.observe("a", "b", at=0.0)
    table.observe("a", "b", at=0.0)
    assert table.effective("a", "b", at=0.0) == pytest.approx(2.0)
    assert table.effective("a", "b", at=14 * DAY) == pytest.approx(1.0)          # 2 * 2**-1
    assert table.effective("a", "b", at=28 * DAY) == pytest.approx(0.5)
    # a new observation decays the old count first: 2 * 0.5 + 1, seen now
    assert table.observe("a", "b", at=14 * DAY) == pytest.approx(2.0)
    assert table.effective("a", "b", at=28 * DAY) == pytest.approx(1.0)
    assert table.effective("a", "missing", at=0.0) == 0.0


def test_probabilities_follow_the_decayed_counts():
    table = km.TransitionTable(decay_lambda=math.log(2) / 14)
    for _ in range(3):
        table.observe("plan", "code", at=0.0)
    table.observe("plan", "review", at=14 * DAY)
    # at day 14: code 3 * 0.5 = 1.5, review 1  ->  0.6 / 0.4
    assert table.probabilities("plan", at=14 * DAY) == pytest.approx({"code": 0.6, "review": 0.4})
    # no decay: 3 / 4 and 1 / 4
    flat = km.TransitionTable()
    for _ in range(3):
        flat.observe("plan", "code", at=0.0)
    flat.observe("plan", "review", at=14 * DAY)
    assert flat.probabilities("plan", at=99 * DAY) == pytest.approx({"code": 0.75, "review": 0.25})
    assert flat.probabilities("nowhere", at=0.0) == {}


def test_a_changed_workflow_overtakes_the_old_one_as_it_fades():
    table = km.TransitionTable(decay_lambda=math.log(2) / 7)
    for day in range(10):
        table.observe("plan", "code", at=day * DAY)
    old = table.effective("plan", "code", at=9 * DAY)
    for day in range(10, 30):
        table.observe("plan", "review", at=day * DAY)
    probabilities = table.probabilities("plan", at=29 * DAY)
    assert probabilities["review"] > 0.9
    assert table.effective("plan", "code", at=29 * DAY) == pytest.approx(old * 2 ** (-20 / 7))
    assert table.prune(at=400 * DAY) == 2 and len(table) == 0


def test_the_cold_start_blend_moves_from_global_to_personal_over_twenty_sessions():
    personal, shared = {"b": 1.0}, {"b": 0.2, "c": 0.8}
    assert km.blend_probabilities(personal, shared, sessions=0) == pytest.approx({"b": 0.2, "c": 0.8})
    # w = 5/20 = 0.25: b = 0.25 * 1 + 0.75 * 0.2 = 0.4, c = 0.75 * 0.8 = 0.6
    assert km.blend_probabilities(personal, shared, sessions=5) == pytest.approx({"b": 0.4, "c": 0.6})
    assert km.blend_probabilities(personal, shared, sessions=40) == pytest.approx({"b": 1.0, "c": 0.0})


def test_tables_round_trip_through_json_and_refuse_malformed_documents():
    table = km.TransitionTable(decay_lambda=0.1)
    table.observe("x", "y", at=5.0)
    table.sessions = 3
    again = km.TransitionTable.from_json(table.to_json(), decay_lambda=0.1)
    assert again.sessions == 3 and again.effective("x", "y", at=5.0) == pytest.approx(1.0)
    for bad in ({}, {"edges": {"x": {"y": [1]}}}, {"edges": {"x": {"y": [-1, 0]}}}, {"edges": {}, "sessions": -1}):
        with pytest.raises(km.InvalidArgumentError):
            km.TransitionTable.from_json(bad)


def test_config_is_validated():
    assert km.PrefetchConfig().decay_lambda == pytest.approx(math.log(2) / 14)
    assert km.PrefetchConfig(half_life_days=None).decay_lambda == 0.0
    for bad in ({"grain": "topic"}, {"top_n": 0}, {"min_probability": 1.5}, {"half_life_days": 0},
                {"cache_size": True}, {"enabled": "yes"}):
        with pytest.raises(km.InvalidArgumentError):
            km.PrefetchConfig(**bad)
    with pytest.raises(km.InvalidArgumentError):
        km.Memory(prefetch={"grain": "space"})


def test_recall_state_at_each_grain():
    hit = {"item_kref": "kref://P/people/memory-1.memory", "space": "people", "content": "Nina Tanaka moved to Oslo",
           "metadata": {}}
    assert km.recall_state([hit]) == "space:people"
    assert km.recall_state([hit], "item") == "item:kref://P/people/memory-1.memory"
    assert km.recall_state([hit], "entity") == "entity:nina tanaka"
    assert km.recall_state([{**hit, "metadata": {"speaker": "Bob"}}], "entity") == "entity:bob"
    assert km.recall_state([{**hit, "content": "it rained"}], "entity") == "space:people"
    assert km.recall_state([]) is None


# -- the gate and the engine ----------------------------------------------------------------------------------

def test_the_confidence_gate_and_top_n(make_memory):
    memory = make_memory(prefetch=km.PrefetchConfig(half_life_days=None, min_probability=0.4, top_n=3))
    fill(memory)
    for number in range(3):
        run_session(memory, f"a{number}", ["plan", "code"])
    for number in range(2):
        run_session(memory, f"b{number}", ["plan", "review"])
    assert memory.prefetcher.predict("space:plan") == [("space:code", pytest.approx(0.6)),
                                                       ("space:review", pytest.approx(0.4))]
    run_session(memory, "c", ["plan", "code"])        # code 4/6 = 0.667, review 2/6 = 0.333 < 0.4
    assert memory.prefetcher.predict("space:plan") == [("space:code", pytest.approx(4 / 6))]
    strict = make_memory(prefetch=km.PrefetchConfig(half_life_days=None, min_probability=0.4, top_n=1))
    fill(strict)
    for number in range(2):
        run_session(strict, f"a{number}", ["plan", "code"])
    for number in range(2):
        run_session(strict, f"b{number}", ["plan", "review"])
    assert strict.prefetcher.predict("space:plan") == [("space:code", pytest.approx(0.5))]   # ties by name


def test_personal_tables_blend_in_by_sessions(make_memory):
    memory = make_memory(prefetch=km.PrefetchConfig(half_life_days=None, min_probability=0.0, personal_sessions=4))
    fill(memory)
    for number in range(3):
        run_session(memory, f"g{number}", ["plan", "code"], agent="planner")
    run_session(memory, "mine", ["plan", "review"], agent="reviewer")
    # global: code 3/4, review 1/4; reviewer's own table: review 1.0 after 1 session, w = 1/4
    blended = dict(memory.prefetcher.predict("space:plan", agent="reviewer"))
    assert blended == pytest.approx({"space:review": 0.25 * 1.0 + 0.75 * 0.25, "space:code": 0.75 * 0.75})
    assert dict(memory.prefetcher.predict("space:plan")) == pytest.approx({"space:code": 0.75, "space:review": 0.25})


def test_a_correct_prediction_is_served_prepared_and_equals_fresh_recall(make_memory):
    memory = make_memory(prefetch=km.PrefetchConfig())
    fill(memory)
    run_session(memory, "train", ["plan", "code", "review"])
    first, second, third = run_session(memory, "live", ["plan", "code", "review"])
    assert not first["context_was_prefetched"]
    assert first["predictions"] == [{"state": "space:code", "p": 1.0}]
    assert second["context_was_prefetched"] and third["context_was_prefetched"]
    assert second["state"] == "space:code"
    assert same_result(second, fresh(memory, "code")) and same_result(third, fresh(memory, "review"))
    stats = memory.prefetch_stats()
    assert stats["hits"] == 2 and stats["tokens_spent"] > 0 and stats["hit_rate"] == 1.0


def test_a_served_result_is_a_copy(make_memory):
    memory = make_memory(prefetch=km.PrefetchConfig())
    fill(memory)
    run_session(memory, "train", ["plan", "code"])
    _, served = run_session(memory, "live", ["plan", "code"])
    assert served["context_was_prefetched"]
    served["results"][0]["content"] = "scribbled"
    memory.engage(QUERIES["plan"], session_id="again")
    memory.prefetcher.wait_idle(timeout=30)
    again = memory.engage(QUERIES["code"], session_id="again")
    assert again["context_was_prefetched"] and again["results"][0]["content"] != "scribbled"


def test_a_wrong_prediction_never_changes_the_result(make_memory):
    plain = make_memory()
    fill(plain)
    memory = make_memory(prefetch=km.PrefetchConfig())
    fill(memory)
    for number in range(4):
        run_session(memory, f"train{number}", ["plan", "code"])
    first, turn = run_session(memory, "live", ["plan", "review"])     # predicted code, went to review
    assert first["predictions"] == [{"state": "space:code", "p": 1.0}]
    assert not turn["context_was_prefetched"]
    expected = plain.engage(QUERIES["review"])
    assert [r["content"] for r in turn["results"]] == [r["content"] for r in expected["results"]]
    assert turn["context"] == expected["context"] and turn["count"] == expected["count"]
    assert same_result(turn, fresh(memory, "review"))
    assert memory.prefetch_stats()["misses"] == 1


def test_a_different_query_into_the_predicted_state_is_recalled_fresh(make_memory):
    memory = make_memory(prefetch=km.PrefetchConfig())
    fill(memory)
    run_session(memory, "train", ["plan", "code"])
    memory.engage(QUERIES["plan"], session_id="live")
    memory.prefetcher.wait_idle(timeout=30)
    other = memory.engage("invoice helpers billing utils", session_id="live")
    assert other["state"] == "space:code" and not other["context_was_prefetched"]
    assert same_result(other, memory.engage("invoice helpers billing utils"))


@pytest.mark.parametrize("change", ["revise", "deprecate", "forget", "tag"])
def test_changing_a_covered_memory_drops_the_prepared_result(make_memory, change):
    memory = make_memory(prefetch=km.PrefetchConfig())
    krefs = fill(memory)
    run_session(memory, "train", ["plan", "code"])
    memory.engage(QUERIES["plan"], session_id="live")
    memory.prefetcher.wait_idle(timeout=30)
    assert memory.prefetch_stats()["cache_entries"] == 1
    target = memory.get(krefs["code"][0])
    if change == "revise":
        memory.remember("Implementation detail: the invoice function uses banker's rounding",
                        item=target["item_kref"])
    elif change == "deprecate":
        memory.deprecate(target["item_kref"])
    elif change == "forget":
        memory.forget(target["item_kref"])
    else:
        memory.tag(target["kref"], "published")
    assert memory.prefetch_stats()["invalidations"] == 1
    memory.prefetcher.wait_idle(timeout=30)          # the expected call is prepared again, after the change
    served = memory.engage(QUERIES["code"], session_id="live")
    assert same_result(served, fresh(memory, "code"))
    contents = [r["content"] for r in served["results"]]
    if change == "revise":
        assert "Implementation detail: the invoice function uses banker's rounding" in contents
        assert target["content"] not in contents
    elif change in ("deprecate", "forget"):
        assert target["content"] not in contents
    else:
        assert "published" in served["results"][
            [r["item_kref"] for r in served["results"]].index(target["item_kref"])]["tags"]


def test_a_change_is_never_served_stale_even_before_it_is_prepared_again(make_memory):
    memory = make_memory(prefetch=km.PrefetchConfig())
    krefs = fill(memory)
    run_session(memory, "train", ["plan", "code"])
    memory.engage(QUERIES["plan"], session_id="live")
    memory.prefetcher.wait_idle(timeout=30)
    memory.remember("Implementation detail: the invoice function uses banker's rounding",
                    item=memory.get(krefs["code"][0])["item_kref"])
    served = memory.engage(QUERIES["code"], session_id="live")     # no waiting: prepared again or recalled
    assert "banker's rounding" in served["context"]
    assert same_result(served, fresh(memory, "code"))


def test_a_new_memory_that_outranks_the_prepared_ones_is_not_missed(make_memory):
    memory = make_memory(prefetch=km.PrefetchConfig())
    fill(memory)
    run_session(memory, "train", ["plan", "code"])
    memory.engage(QUERIES["plan"], session_id="live")
    memory.prefetcher.wait_idle(timeout=30)
    memory.remember("Invoice function implementation moved to the ledger service", space="code")
    served = memory.engage(QUERIES["code"], session_id="live")
    assert "Invoice function implementation moved to the ledger service" in served["context"]
    assert same_result(served, fresh(memory, "code"))


def test_results_that_read_the_clock_are_never_prepared(make_memory):
    memory = make_memory(prefetch=km.PrefetchConfig())
    fill(memory)
    for session in ("one", "two"):
        memory.engage(QUERIES["plan"], session_id=session)
        memory.prefetcher.wait_idle(timeout=30)
        result = memory.engage("code conventions from last week", session_id=session)
        memory.prefetcher.wait_idle(timeout=30)
    assert not result["context_was_prefetched"]
    stats = memory.prefetch_stats()
    assert stats["uncacheable"] == 2 and stats["prepared"] == 0


def test_engage_without_a_session_or_without_prefetch_reports_no_prefetch(make_memory):
    plain = make_memory()
    fill(plain)
    result = plain.engage(QUERIES["plan"], session_id="s1")
    assert result["context_was_prefetched"] is False and result["predictions"] == []
    assert plain.prefetch_stats() == {"enabled": False} and plain.prefetcher is None
    assert plain.end_session("s1")["transitions"] == 0
    off = make_memory(prefetch=km.PrefetchConfig(enabled=False))
    assert off.prefetcher is None


def test_bad_arguments_raise_and_change_nothing(make_memory):
    memory = make_memory(prefetch=km.PrefetchConfig())
    fill(memory)
    with pytest.raises(km.InvalidArgumentError):
        memory.engage(QUERIES["plan"], session_id="")
    with pytest.raises(km.InvalidArgumentError):
        memory.engage(QUERIES["plan"], session_id="s", limit=0)
    assert memory.prefetch_stats()["transitions"] == 0 and memory.prefetch_stats()["open_sessions"] == 0


def test_tables_persist_in_a_deprecated_system_item(make_memory):
    memory = make_memory(prefetch=km.PrefetchConfig(half_life_days=None))
    fill(memory)
    run_session(memory, "train", ["plan", "code"])
    summary = memory.end_session("train")
    assert summary == {"session_id": "train", "engages": 2, "transitions": 1, "hits": 0, "saved": True}
    [item] = memory.items(space="_system", include_deprecated=True)
    assert item["kind"] == "prefetch-state" and item["deprecated"]
    assert memory.items(space="_system") == []
    assert all(r["space"] != "_system" for r in memory.recall("space code plan invoice function implementation"))
    memory.close()
    reopened = make_memory(reopen=True, prefetch=km.PrefetchConfig(half_life_days=None))
    assert reopened.prefetcher.predict("space:plan") == [("space:code", 1.0)]
    reopened.engage(QUERIES["plan"], session_id="next")
    reopened.prefetcher.wait_idle(timeout=30)
    assert reopened.engage(QUERIES["code"], session_id="next")["context_was_prefetched"]


def test_tables_are_saved_every_n_transitions(make_memory):
    memory = make_memory(prefetch=km.PrefetchConfig(save_every=2))
    fill(memory)
    run_session(memory, "s", ["plan", "code", "review"])
    memory.prefetcher.close()                        # waits for the background save
    assert memory.prefetch_stats()["saves"] == 1


def test_close_stops_the_worker_and_later_engages_fail_cleanly(make_memory):
    memory = make_memory(prefetch=km.PrefetchConfig())
    fill(memory)
    run_session(memory, "train", ["plan", "code"])
    memory.engage(QUERIES["plan"], session_id="live")
    engine = memory.prefetcher
    workers = [t for t in threading.enumerate() if t.name.startswith("kumiho-prefetch")]
    assert workers
    memory.close()
    assert engine.closed and memory.prefetch_stats()["pending"] == 0
    assert not any(t.is_alive() for t in workers if t in set(engine_threads(engine)))
    with pytest.raises(km.StoreClosedError):
        memory.engage(QUERIES["plan"], session_id="live")
    memory.close()


def engine_threads(engine) -> list[threading.Thread]:
    """The threads an engine's executor started (empty once it is shut down and joined)."""
    executor = engine._executor
    return [] if executor is None else list(executor._threads)


def test_stats_count_hits_misses_waste_and_tokens(make_memory):
    memory = make_memory(prefetch=km.PrefetchConfig())
    fill(memory)
    run_session(memory, "train", ["plan", "code"])
    run_session(memory, "miss", ["plan", "review"])      # prepares the code step, then goes elsewhere
    run_session(memory, "hit", ["plan", "code"])         # code is still prepared and exact; review (0.5) is added
    stats = memory.prefetch_stats()
    assert (stats["hits"], stats["misses"], stats["cold"]) == (1, 1, 4)
    assert stats["prepared"] == 2 and stats["tokens_spent"] > stats["tokens_served"] > 0
    assert stats["hit_rate"] == 0.5 and stats["transitions"] == 3 and stats["errors"] == 0
    assert stats["wasted_prefetches"] == 0
    wasteful = make_memory(prefetch=km.PrefetchConfig())
    fill(wasteful)
    run_session(wasteful, "train", ["plan", "code"])
    run_session(wasteful, "miss", ["plan", "review"])
    wasteful.close()
    assert wasteful.prefetch_stats()["wasted_prefetches"] == 1


def test_the_first_step_of_the_next_session_is_prepared_when_a_session_ends(make_memory):
    memory = make_memory(prefetch=km.PrefetchConfig())
    fill(memory)
    run_session(memory, "s1", ["plan", "code"])
    assert memory.end_session("s1")["transitions"] == 1            # the start is not a move between states
    memory.prefetcher.wait_idle(timeout=30)
    first = memory.engage(QUERIES["plan"], session_id="s2")
    assert first["context_was_prefetched"] and same_result(first, fresh(memory, "plan"))
    memory.end_session("s2")
    memory.prefetcher.wait_idle(timeout=30)
    memory.remember("Roadmap milestones for the billing migration were moved to May", space="plan")
    after_write = memory.engage(QUERIES["plan"], session_id="s3")       # never the result from before the write
    assert same_result(after_write, fresh(memory, "plan"))
    assert memory.prefetch_stats()["transitions"] == 1


@pytest.mark.parametrize("spare", [None, 0.2])
def test_spare_probability_prepares_likely_branches_below_the_gate_without_predicting_them(make_memory, spare):
    memory = make_memory(prefetch=km.PrefetchConfig(half_life_days=None, spare_probability=spare))
    fill(memory)
    for number in range(3):
        run_session(memory, f"a{number}", ["plan", "code"])
    run_session(memory, "b", ["plan", "review"])                  # review follows plan 1 time in 4: under 0.4
    first = memory.engage(QUERIES["plan"], session_id="live")
    assert first["predictions"] == [{"state": "space:code", "p": 0.75}]     # spare states are never predicted
    memory.prefetcher.wait_idle(timeout=30)
    branch = memory.engage(QUERIES["review"], session_id="live")
    assert branch["context_was_prefetched"] is (spare is not None)
    assert same_result(branch, fresh(memory, "review"))


def test_spare_probability_is_validated():
    for bad in (0, -0.1, 0.5, True, "0.2"):
        with pytest.raises(km.InvalidArgumentError):
            km.PrefetchConfig(min_probability=0.4, spare_probability=bad)
    assert km.PrefetchConfig(spare_probability=0.4).spare_probability == 0.4


def test_unreadable_tables_are_a_lost_cache_not_a_broken_memory(make_memory):
    memory = make_memory(prefetch=km.PrefetchConfig())
    fill(memory)
    memory.remember('{"format": 1, "grains": {"space": {"global": {}, "personal": "x", "cues": {}}}}',
                    space="_system", kind="prefetch-state", key="prefetch-state")
    result = memory.engage(QUERIES["plan"], session_id="s1")
    assert result["results"] and memory.prefetch_stats()["errors"] == 1
    assert "unreadable" in memory.prefetch_stats()["last_error"]


def test_the_prefetchers_own_saves_do_not_discard_what_it_prepared(make_memory):
    memory = make_memory(prefetch=km.PrefetchConfig())
    fill(memory)
    for run in ("a", "b", "c", "d"):
        first = memory.engage(QUERIES["plan"], session_id=run)
        memory.prefetcher.wait_idle(timeout=30)
        memory.engage(QUERIES["code"], session_id=run)
        memory.end_session(run)                                   # saves the tables: a write to the store
        memory.prefetcher.wait_idle(timeout=30)
        if run in ("c", "d"):
            assert first["context_was_prefetched"], run


def test_bookkeeping_writes_never_move_a_recall_score(make_memory, clock):
    memory = make_memory(prefetch=km.PrefetchConfig())
    fill(memory)
    before = [(hit["kref"], hit["score"]) for hit in memory.recall("billing roadmap milestones invoice", limit=10)]
    token = memory.backend.change_token(memory.project)
    run_session(memory, "s1", ["plan", "code", "review"])
    memory.end_session("s1")                                       # saves the tables (their text holds the queries)
    km.SpaceProfiler(memory).run_sync()                            # stores space profiles
    clock.advance(days=30)
    km.DreamState(memory).run_sync()                               # stores its report
    after = [(hit["kref"], hit["score"]) for hit in memory.recall("billing roadmap milestones invoice", limit=10)]
    assert after == before
    assert memory.backend.change_token(memory.project) == token     # nothing a recall could see was written
