"""Graph-augmented recall, edge discovery, the async manager and the recall CLI options (issue 3, items 7-8).

Store-backed tests use the ``memory`` fixture, so each runs on every backend in ``conftest.BACKENDS``.
The LLM adapter is an external dependency: ``FakeLLM`` is a test double with the adapter's ``chat`` signature.

``Memory.recall`` has an edge signal of its own (``RecallSignals.edges``) that lends score to the neighbours
of its top hits. Tests of ``GraphAugmentedRecall``'s walk turn that signal off (``walk_only``) so that a
neighbour in the results can only have come from the walk under test; tests marked "default Memory" keep it on.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time

import pytest

import kumiho_memory as km

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "kumiho_memory.py")


# -- helpers ---------------------------------------------------------------------------------------------

def walk_only(memory: km.Memory) -> km.Memory:
    """Turn off ``Memory.recall``'s own edge signal, leaving edges to ``GraphAugmentedRecall._walk``."""
    memory.backend.signals = km.RecallSignals(edges=0.0)
    return memory


def by_kref(results: list[dict]) -> dict[str, dict]:
    return {result["kref"]: result for result in results}


def krefs(results: list[dict]) -> list[str]:
    return [result["kref"] for result in results]


def item_of(kref: str) -> str:
    return str(km.Kref.parse(kref).item_kref())


def graph_recall(memory: km.Memory, query: str, adapter=None, **config) -> tuple[list[dict], km.GraphAugmentedRecall]:
    recaller = km.GraphAugmentedRecall(adapter, model="test-model", memory=memory,
                                       config=km.GraphAugmentationConfig(**config))
    return asyncio.run(recaller.recall(query)), recaller


class FakeLLM:
    """Test double for an LLM adapter: replies with ``reply``, or raises ``error``, after ``delay`` seconds."""

    def __init__(self, reply: str = "[]", *, error: BaseException | None = None, delay: float = 0.0) -> None:
        self.reply, self.error, self.delay = reply, error, delay
        self.calls: list[dict] = []

    async def chat(self, *, messages, model, max_tokens=1024, json_mode=False):
        self.calls.append({"messages": messages, "model": model, "max_tokens": max_tokens, "json_mode": json_mode})
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.error is not None:
            raise self.error
        return self.reply


# ==========================================================================================================
# 1. GraphAugmentedRecall without an LLM
# ==========================================================================================================

@pytest.mark.parametrize("edge_type", ["DERIVED_FROM", "SUPPORTS", "DEPENDS_ON"])
@pytest.mark.parametrize("outgoing", [True, False], ids=["seed-is-source", "seed-is-target"])
def test_top_hit_pulls_in_its_edge_neighbour(memory, edge_type, outgoing):
    walk_only(memory)
    seed = memory.remember("The deployment pipeline uses blue green switching", space="ops")
    neighbour = memory.remember("Kubernetes quotas were raised in March", space="ops")
    unlinked = memory.remember("Grafana dashboards track latency", space="ops")
    if outgoing:
        memory.link(seed, neighbour, edge_type)
    else:
        memory.link(neighbour, seed, edge_type)

    results, _ = graph_recall(memory, "deployment pipeline", hop_decay=0.4)

    assert results[0]["kref"] == seed and not results[0].get("graph_augmented")
    found = by_kref(results)
    assert neighbour in found and unlinked not in found
    extra = found[neighbour]
    assert extra["graph_augmented"] is True and extra["hop"] == 1
    assert extra["via"] == {"kref": seed, "edge_type": edge_type}
    assert extra["score"] == pytest.approx(results[0]["score"] * 0.4, abs=1e-6)
    assert extra["content"] == "Kubernetes quotas were raised in March"


def test_edge_types_outside_the_config_are_not_walked(memory):
    walk_only(memory)
    seed = memory.remember("deployment pipeline notes", space="ops")
    derived = memory.remember("kubernetes quotas raised", space="ops")
    supported = memory.remember("grafana latency dashboards", space="ops")
    memory.link(seed, derived, "DERIVED_FROM")
    memory.link(seed, supported, "SUPPORTS")

    results, _ = graph_recall(memory, "deployment pipeline", edge_types=("SUPPORTS",))
    assert supported in by_kref(results) and derived not in by_kref(results)

    recaller = km.GraphAugmentedRecall(memory=memory)
    results = asyncio.run(recaller.recall("deployment pipeline", edge_types=["DERIVED_FROM"]))
    assert derived in by_kref(results) and supported not in by_kref(results)


def test_edge_types_not_in_the_default_config_are_not_walked(memory):
    walk_only(memory)
    assert "ABOUT" not in km.GraphAugmentationConfig().edge_types
    seed = memory.remember("deployment pipeline notes", space="ops")
    about = memory.remember("kubernetes quotas raised", space="ops")
    memory.link(seed, about, "ABOUT")
    results, _ = graph_recall(memory, "deployment pipeline")
    assert about not in by_kref(results)


def test_default_memory_neighbour_has_via_and_config_hop_decay(memory):
    seed = memory.remember("The deployment pipeline uses blue green switching", space="ops")
    neighbour = memory.remember("Kubernetes quotas were raised in March", space="ops")
    memory.link(seed, neighbour, "DERIVED_FROM")
    results, _ = graph_recall(memory, "deployment pipeline", hop_decay=0.25)
    extra = by_kref(results)[neighbour]
    assert extra["graph_augmented"] is True and extra["hop"] == 1
    assert extra.get("via") == {"kref": seed, "edge_type": "DERIVED_FROM"}
    assert extra["score"] == pytest.approx(results[0]["score"] * 0.25, abs=1e-6)


def test_default_memory_respects_config_edge_types(memory):
    seed = memory.remember("deployment pipeline notes", space="ops")
    derived = memory.remember("kubernetes quotas raised", space="ops")
    memory.link(seed, derived, "DERIVED_FROM")
    results, _ = graph_recall(memory, "deployment pipeline", edge_types=("SUPPORTS",))
    assert derived not in by_kref(results)


def test_max_hops_two_reaches_a_two_hop_neighbour(memory):
    walk_only(memory)
    seed = memory.remember("deployment pipeline blue green switching", space="ops")
    middle = memory.remember("kubernetes quotas raised", space="ops")
    far = memory.remember("grafana dashboards latency", space="ops")
    memory.link(seed, middle, "DERIVED_FROM")
    memory.link(middle, far, "SUPPORTS")

    one_hop, _ = graph_recall(memory, "deployment pipeline")
    assert middle in by_kref(one_hop) and far not in by_kref(one_hop)

    two_hops, _ = graph_recall(memory, "deployment pipeline", max_hops=2)
    found = by_kref(two_hops)
    assert found[middle]["hop"] == 1
    assert found[far]["graph_augmented"] is True and found[far]["hop"] == 2
    assert found[far]["via"] == {"kref": middle, "edge_type": "SUPPORTS"}
    assert found[far]["score"] < found[middle]["score"]

    recaller = km.GraphAugmentedRecall(memory=memory)      # max_hops= per call overrides the config
    assert far in by_kref(asyncio.run(recaller.recall("deployment pipeline", max_hops=2)))


def test_two_hop_score_is_seed_score_times_decay_per_hop(memory):
    walk_only(memory)
    seed = memory.remember("deployment pipeline blue green switching", space="ops")
    middle = memory.remember("kubernetes quotas raised", space="ops")
    far = memory.remember("grafana dashboards latency", space="ops")
    memory.link(seed, middle, "DERIVED_FROM")
    memory.link(middle, far, "SUPPORTS")
    results, _ = graph_recall(memory, "deployment pipeline", max_hops=2, hop_decay=0.5)
    assert by_kref(results)[far]["score"] == pytest.approx(results[0]["score"] * 0.5 ** 2, abs=1e-6)


def test_deprecated_neighbours_are_skipped(memory):
    walk_only(memory)
    seed = memory.remember("deployment pipeline notes", space="ops")
    retired = memory.remember("kubernetes quotas raised", space="ops")
    live = memory.remember("grafana latency dashboards", space="ops")
    retired_revision = memory.remember("helm chart versions pinned", space="ops")
    memory.link(seed, retired, "DEPENDS_ON")
    memory.link(seed, live, "DEPENDS_ON")
    memory.link(seed, retired_revision, "SUPPORTS")
    memory.deprecate(item_of(retired))
    memory.deprecate(retired_revision)
    results, _ = graph_recall(memory, "deployment pipeline")
    assert live in by_kref(results)
    assert retired not in by_kref(results) and retired_revision not in by_kref(results)


def test_superseded_neighbour_revisions_are_not_returned(memory):
    walk_only(memory)
    seed = memory.remember("deployment pipeline notes", space="ops")
    old = memory.remember("the cluster quota is ten nodes", space="ops", key="quota")
    memory.link(seed, old, "DEPENDS_ON")
    memory.remember("the cluster quota is twenty nodes", space="ops", key="quota")
    results, _ = graph_recall(memory, "deployment pipeline")
    assert old not in by_kref(results)


def test_contradicts_neighbours_are_listed_in_the_seeds_contested_by(memory):
    seed = memory.remember("The office opens at nine", space="facts")
    rival = memory.remember("Doors unlock at ten on weekdays", space="facts")
    support = memory.remember("Reception staff arrive early", space="facts")
    memory.link(rival, seed, "CONTRADICTS")
    memory.link(seed, support, "SUPPORTS")
    results, _ = graph_recall(memory, "office opens")
    assert results[0]["kref"] == seed
    assert results[0]["contested_by"] == [rival]
    assert "contested_by" not in by_kref(results)[support]


def test_title_fallback_adds_hop_two_extras_when_the_seeds_have_no_edges(memory):
    seed = memory.remember("alpha rollout plan review", space="plans")
    related = memory.remember("rollout plan review happens every friday", space="plans")
    unrelated = memory.remember("sigma budget approved", space="plans")
    results, _ = graph_recall(memory, "alpha", hop_decay=0.5)
    found = by_kref(results)
    assert results[0]["kref"] == seed and unrelated not in found
    extra = found[related]
    assert extra["graph_augmented"] is True and extra["hop"] == 2
    title_score = by_kref(memory.recall("alpha rollout plan review", limit=10))[related]["score"]
    assert extra["score"] == pytest.approx(title_score * 0.5 * results[0]["score"], abs=1e-6)


def test_no_title_fallback_when_the_seeds_have_edges(memory):
    walk_only(memory)
    seed = memory.remember("alpha rollout plan review", space="plans")
    related = memory.remember("rollout plan review happens every friday", space="plans")
    linked = memory.remember("sigma budget approved", space="plans")
    memory.link(seed, linked, "SUPPORTS")
    results, _ = graph_recall(memory, "alpha")
    assert by_kref(results)[linked]["hop"] == 1
    assert related not in by_kref(results)


def test_no_title_fallback_when_the_seeds_have_edges_default_memory(memory):
    seed = memory.remember("alpha rollout plan review", space="plans")
    related = memory.remember("rollout plan review happens every friday", space="plans")
    linked = memory.remember("sigma budget approved", space="plans")
    memory.link(seed, linked, "SUPPORTS")
    results, _ = graph_recall(memory, "alpha")
    assert linked in by_kref(results)
    assert related not in by_kref(results)


def test_results_are_unique_by_kref_sorted_and_capped_at_max_total(memory):
    walk_only(memory)
    hub = memory.remember("hub alpha overview", space="net")
    spokes = [memory.remember(f"spoke number {word} detail", space="net")
              for word in ("one", "two", "three", "four", "five")]
    for spoke in spokes:
        memory.link(hub, spoke, "CONTAINS")

    for limit, cap in ((1, 3), (2, 6)):                       # default cap: 3 x limit
        recaller = km.GraphAugmentedRecall(memory=memory)
        results = asyncio.run(recaller.recall("hub alpha", limit=limit))
        assert len(results) == cap
        assert len(set(krefs(results))) == len(results)
        assert [r["score"] for r in results] == sorted((r["score"] for r in results), reverse=True)

    recaller = km.GraphAugmentedRecall(memory=memory)
    assert len(asyncio.run(recaller.recall("hub alpha", limit=1, max_total=5))) == 5
    results, _ = graph_recall(memory, "hub alpha", max_total=4)
    assert len(results) == 4
    results, _ = graph_recall(memory, "hub alpha", max_total=100)
    assert sorted(krefs(results)) == sorted([hub, *spokes])


def test_a_neighbour_that_is_also_a_hit_appears_once(memory):
    walk_only(memory)
    seed = memory.remember("alpha release checklist alpha", space="rel")
    also_hit = memory.remember("alpha notes", space="rel")
    memory.link(seed, also_hit, "SUPPORTS")
    results, _ = graph_recall(memory, "alpha")
    assert krefs(results).count(also_hit) == 1


def test_lexical_angles_content_words_and_feedback():
    assert km.lexical_angles("what did the team decide about the database", [], 3) == ["team decide database"]
    assert km.lexical_angles("database migration", [], 3) == []       # already only content words
    hits = [{"title": "Canary rollout", "content": "canary rollout stages for deployments"},
            {"title": "", "content": "the canary rollout was rolled back after deployments failed"},
            {"title": "", "content": "quiet notes"},
            {"title": "", "content": "quiet notes again"}]           # beyond the first three: ignored
    assert km.lexical_angles("deployment pipeline", hits, 3) == ["deployment pipeline canary rollout"]
    both = km.lexical_angles("what is the deployment pipeline", hits, 3)
    assert both == ["deployment pipeline", "what is the deployment pipeline canary rollout"]
    assert km.lexical_angles("what is the deployment pipeline", hits, 1) == ["deployment pipeline"]
    assert km.lexical_angles("what is the deployment pipeline", hits, 0) == []


def _canary_store(memory: km.Memory) -> str:
    memory.remember("deployment pipeline uses canary rollout stages", space="ops")
    memory.remember("deployment pipeline canary rollout rollback", space="ops")
    return memory.remember("canary rollout guide for new services", space="ops")


def test_lexical_feedback_angle_finds_a_memory_without_the_query_words(memory):
    guide = _canary_store(memory)
    assert guide not in by_kref(memory.recall("deployment pipeline", limit=10))
    results, recaller = graph_recall(memory, "deployment pipeline")
    assert by_kref(results)[guide]["angle"] == "deployment pipeline canary rollout"
    assert recaller.last_error is None


def test_reformulate_queries_off_asks_only_the_query():
    asked = []

    def recall_fn(query, **options):
        asked.append((query, options))
        return [{"kref": f"k:{query}", "score": 1.0, "title": "t", "content": "shared words here"}]

    llm = FakeLLM('["one", "two"]')
    recaller = km.GraphAugmentedRecall(llm, recall_fn=recall_fn,
                                       config=km.GraphAugmentationConfig(reformulate_queries=False))
    results = asyncio.run(recaller.recall("what is the plan", limit=4, space_paths=["a"], memory_types=["fact"]))
    assert asked == [("what is the plan", {"limit": 8, "space_paths": ["a"], "memory_types": ["fact"]})]
    assert llm.calls == [] and krefs(results) == ["k:what is the plan"]


def test_graph_recall_needs_memory_or_recall_fn():
    with pytest.raises(km.InvalidArgumentError):
        km.GraphAugmentedRecall()


# ==========================================================================================================
# 2. With an LLM adapter
# ==========================================================================================================

ANGLE = "european sales figures"


@pytest.mark.parametrize("reply", [
    json.dumps([ANGLE]),
    f'```json\n["{ANGLE}"]\n```',
    f'Sure! Here are the angles:\n["{ANGLE}"]\nHope this helps.',
], ids=["bare", "fenced", "prose"])
def test_llm_angles_are_recalled_and_merged(memory, reply):
    revenue = memory.remember("quarterly revenue growth was strong in european markets", space="fin")
    sales = memory.remember("european sales figures doubled", space="fin")
    mixed = memory.remember("revenue notes mention european sales figures", space="fin")
    memory.remember("holiday rota for the support desk", space="fin")
    llm = FakeLLM(reply)
    results, recaller = graph_recall(memory, "revenue growth", llm)

    assert recaller.last_error is None
    assert len(llm.calls) == 1 and llm.calls[0]["model"] == "test-model"
    assert "revenue growth" in llm.calls[0]["messages"][-1]["content"]
    found = by_kref(results)
    assert found[sales]["angle"] == ANGLE                      # reachable only through the angle's wording
    assert found[revenue]["score"] == 1.0 and "angle" not in found[revenue]   # beats its angle score
    assert revenue in by_kref(memory.recall(ANGLE, limit=10))
    # merged by kref, keeping the best score of the query's and the angle's recall
    plain = by_kref(memory.recall("revenue growth", limit=10))
    angled = by_kref(memory.recall(ANGLE, limit=10))
    assert found[mixed]["score"] == max(plain[mixed]["score"], angled[mixed]["score"])
    assert ("angle" in found[mixed]) == (angled[mixed]["score"] > plain[mixed]["score"])
    assert len(set(krefs(results))) == len(results)


def test_llm_angles_capped_at_reformulate_max_angles():
    asked = []

    def recall_fn(query, **options):
        asked.append(query)
        return [{"kref": f"k:{query}", "score": 0.5, "title": query}]

    llm = FakeLLM(json.dumps(["a1", "a2", "a3", "a4", "a5", 7, ""]))
    recaller = km.GraphAugmentedRecall(llm, recall_fn=recall_fn,
                                       config=km.GraphAugmentationConfig(reformulate_max_angles=2))
    results = asyncio.run(recaller.recall("q", limit=3))
    assert asked == ["q", "a1", "a2"]
    assert {r["kref"]: r.get("angle") for r in results} == {"k:q": None, "k:a1": "a1", "k:a2": "a2"}


@pytest.mark.parametrize("make_llm", [
    lambda: FakeLLM(error=ConnectionError("connection refused")),
    lambda: FakeLLM(error=km.ServiceError("upstream 503")),
    lambda: FakeLLM("I am sorry, I cannot help with that."),
    lambda: FakeLLM("```\nnot json at all\n```"),
    lambda: FakeLLM("42"),
    lambda: FakeLLM(error=RuntimeError("SDK error")),
    lambda: FakeLLM("[1, 2, null]"),
], ids=["oserror", "service-error", "prose", "fenced-prose", "number", "runtime-error", "non-strings"])
def test_failing_or_garbage_adapter_falls_back_to_lexical_angles(memory, make_llm):
    llm = make_llm()
    guide = _canary_store(memory)
    results, recaller = graph_recall(memory, "deployment pipeline", llm)
    assert len(llm.calls) == 1
    assert recaller.last_error and "lexical" in recaller.last_error
    assert by_kref(results)[guide]["angle"] == "deployment pipeline canary rollout"


def test_slow_adapter_is_bounded_by_traversal_timeout(memory):
    memory.remember("deployment pipeline notes", space="ops")
    recaller = km.GraphAugmentedRecall(FakeLLM("[]", delay=10.0), memory=memory,
                                       config=km.GraphAugmentationConfig(traversal_timeout=0.2))
    started = time.monotonic()
    with pytest.raises(km.ServiceError) as caught:
        asyncio.run(recaller.recall("deployment pipeline"))
    assert time.monotonic() - started < 3.0
    assert "0.2" in str(caught.value) and caught.value.transient is True


def test_json_from_llm_reads_the_first_json_value():
    assert km._json_from_llm('["a", "b"]') == ["a", "b"]
    assert km._json_from_llm('```json\n["a"]\n```') == ["a"]
    assert km._json_from_llm('```\n["a"]\n```') == ["a"]
    assert km._json_from_llm('Here you go:\n```json\n["a", "b"]\n```\nAnything else?') == ["a", "b"]
    assert km._json_from_llm('Angles: ["x"] and that is all') == ["x"]
    assert km._json_from_llm('{"k": 1} trailing') == {"k": 1}
    for garbage in ("", "no json here", "```\n```", "42", "[unclosed"):
        with pytest.raises(ValueError):
            km._json_from_llm(garbage)


# ==========================================================================================================
# 3. discover_edges
# ==========================================================================================================

SUMMARY = "The billing service retries failed invoices nightly. Invoices then go to the finance queue."


def _billing_store(memory: km.Memory) -> dict[str, str]:
    store = {
        "retries": memory.remember("billing service retries failed invoices", space="ops"),
        "queue": memory.remember("finance queue receives invoices nightly", space="ops"),
        "colours": memory.remember("billing dashboard colours were changed by the design team", space="ops"),
        "rota": memory.remember("holiday rota for the support desk", space="ops"),
    }
    store["new"] = memory.remember(SUMMARY, space="ops")
    return store


def _share(text: str) -> float:
    words = set(km.tokenize(text))
    return round(len(words & set(km.tokenize(SUMMARY))) / len(words), 4)


def test_discover_edges_lexically_links_the_most_word_sharing_memories(memory):
    store = _billing_store(memory)
    recaller = km.GraphAugmentedRecall(memory=memory)
    edges = asyncio.run(recaller.discover_edges(store["new"], SUMMARY))

    assert [edge["target"] for edge in edges] == [store["retries"], store["queue"]]
    for edge in edges:
        assert set(edge) == {"source", "target", "edge_type", "query", "score"}
        assert edge["source"] == store["new"] and edge["edge_type"] == "REFERENCED"
        assert edge["score"] == _share(memory.get(edge["target"])["content"]) >= 0.3
        assert edge["query"] in SUMMARY
    assert _share(memory.get(store["colours"])["content"]) < 0.3
    stored = memory.edges(store["new"], direction="outgoing")
    assert [(e["target_kref"], e["edge_type"]) for e in stored] == [(e["target"], "REFERENCED") for e in edges]
    for edge, record in zip(edges, stored):
        assert record["metadata"] == {"reason": "shares words with the new memory", "score": edge["score"],
                                      "query": edge["query"]}
    assert all(item_of(e["target"]) != item_of(store["new"]) for e in edges)


def test_discover_edges_max_edges_and_min_score(memory):
    store = _billing_store(memory)
    recaller = km.GraphAugmentedRecall(memory=memory)
    one = asyncio.run(recaller.discover_edges(store["new"], SUMMARY, max_edges=1, min_score=0.0))
    assert [edge["target"] for edge in one] == [store["retries"]]
    memory.forget(store["new"])
    store["new"] = memory.remember(SUMMARY, space="ops")
    strict = asyncio.run(recaller.discover_edges(store["new"], SUMMARY, min_score=0.9))
    assert [edge["target"] for edge in strict] == [store["retries"]]
    none = asyncio.run(recaller.discover_edges(store["new"], SUMMARY, min_score=1.01))
    assert none == []
    assert len(memory.edges(store["new"], direction="outgoing")) == 1


def test_discover_edges_custom_edge_type(memory):
    store = _billing_store(memory)
    recaller = km.GraphAugmentedRecall(memory=memory)
    edges = asyncio.run(recaller.discover_edges(store["new"], SUMMARY, edge_type="BILLING_LINK"))
    assert edges and all(edge["edge_type"] == "BILLING_LINK" for edge in edges)
    stored = memory.edges(store["new"], edge_type="BILLING_LINK")
    assert sorted(e["target_kref"] for e in stored) == sorted(e["target"] for e in edges)
    assert memory.edges(store["new"], edge_type="REFERENCED") == []


@pytest.mark.parametrize("edge_type", ["not valid", "lower_case", "", 7])
def test_discover_edges_invalid_edge_type_writes_nothing(memory, edge_type):
    store = _billing_store(memory)
    before = memory.stats()["edges"]
    recaller = km.GraphAugmentedRecall(memory=memory)
    with pytest.raises(km.InvalidArgumentError):
        asyncio.run(recaller.discover_edges(store["new"], SUMMARY, edge_type=edge_type))
    assert memory.edges(store["new"]) == [] and memory.stats()["edges"] == before
    lonely = memory.remember("zebra xylophone quartet rehearsal", space="misc")   # no candidates at all
    with pytest.raises(km.InvalidArgumentError):
        asyncio.run(recaller.discover_edges(lonely, "zebra xylophone quartet rehearsal", edge_type=edge_type))


def test_discover_edges_uses_the_adapters_queries(memory):
    store = _billing_store(memory)
    llm = FakeLLM('```json\n["finance queue"]\n```')
    recaller = km.GraphAugmentedRecall(llm, model="edge-model", memory=memory)
    edges = asyncio.run(recaller.discover_edges(store["new"], SUMMARY))
    assert len(llm.calls) == 1 and SUMMARY in llm.calls[0]["messages"][-1]["content"]
    assert llm.calls[0]["model"] == "edge-model"
    assert [(edge["target"], edge["query"]) for edge in edges] == [(store["queue"], "finance queue")]
    stored = memory.edges(store["new"], direction="outgoing")
    assert [e["target_kref"] for e in stored] == [store["queue"]]
    assert stored[0]["metadata"]["reason"] == "proposed by the edge discoverer"
    assert stored[0]["metadata"]["query"] == "finance queue"


def test_discover_edges_without_memory_is_an_error():
    recaller = km.GraphAugmentedRecall(recall_fn=lambda query, **options: [])
    with pytest.raises(km.InvalidArgumentError):
        asyncio.run(recaller.discover_edges("kref://CognitiveMemory/ops/x.memory?r=1", SUMMARY))


# ==========================================================================================================
# 4. UniversalMemoryManager
# ==========================================================================================================

def test_manager_graph_augmented_recall_returns_shaped_results_with_extras(memory):
    walk_only(memory)
    seed = memory.remember("deployment pipeline blue green", space="ops", title="Pipeline",
                           metadata={"memory_type": "fact"})
    neighbour = memory.remember("rollback needs approval", space="ops", title="Rollbacks", kind="decision")
    memory.link(seed, neighbour, "DEPENDS_ON")
    manager = km.UniversalMemoryManager(memory=memory)

    plain = asyncio.run(manager.recall_memories("deployment pipeline"))
    assert krefs(plain) == [seed]
    results = asyncio.run(manager.recall_memories("deployment pipeline", graph_augmented=True))
    assert krefs(results) == [seed, neighbour]
    first, extra = results
    assert first["_item_kref"] == item_of(seed) and first["summary"] == "deployment pipeline blue green"
    assert first["type"] == "fact"
    assert extra["graph_augmented"] is True and extra["hop"] == 1
    assert extra["_item_kref"] == item_of(neighbour) and extra["summary"] == "rollback needs approval"
    assert extra["type"] == "decision"


def test_manager_recall_honours_space_paths_and_memory_types(memory):
    manager = km.UniversalMemoryManager(memory=memory)
    work = memory.remember("garden plan for spring", space="work", metadata={"type": "plan"})
    team = memory.remember("garden plan for summer", space="work/team", kind="decision")
    home = memory.remember("garden plan for autumn", space="home", metadata={"memory_type": "plan"})

    in_work = asyncio.run(manager.recall_memories("garden plan", space_paths=["work"]))
    assert sorted(krefs(in_work)) == sorted([work, team])
    plans = asyncio.run(manager.recall_memories("garden plan", memory_types=["plan"]))
    assert sorted(krefs(plans)) == sorted([work, home])
    assert all(result["type"] == "plan" for result in plans)
    both = asyncio.run(manager.recall_memories("garden plan", space_paths=["work"], memory_types=["decision"]))
    assert krefs(both) == [team]


def _standups(memory: km.Memory) -> tuple[str, str]:
    march = memory.remember("team standup notes about the release", space="work",
                            metadata={"event_date": "2025-03-09T10:00:00Z"})
    december = memory.remember("team standup notes about the budget", space="work",
                               metadata={"event_date": "2025-12-31T10:00:00Z"})
    return march, december


def test_manager_recall_resolves_relative_times_against_query_time(memory):
    march, december = _standups(memory)        # the fixture clock says 2026-01-01: yesterday is 31 December
    manager = km.UniversalMemoryManager(memory=memory)
    query = "what was in the team standup notes yesterday"
    anchored = asyncio.run(manager.recall_memories(query, query_time="2025-03-10T12:00:00Z"))
    assert krefs(anchored)[0] == march and anchored[0]["score"] > anchored[1]["score"]
    now = asyncio.run(manager.recall_memories(query))
    assert krefs(now)[0] == december


def test_manager_graph_augmented_recall_honours_query_time(memory):
    march, _ = _standups(memory)
    manager = km.UniversalMemoryManager(memory=memory)
    results = asyncio.run(manager.recall_memories("what was in the team standup notes yesterday",
                                                  query_time="2025-03-10T12:00:00Z", graph_augmented=True))
    assert krefs(results)[0] == march


def test_manager_discover_edges_post_consolidation_creates_edges(memory):
    store = _billing_store(memory)
    manager = km.UniversalMemoryManager(memory=memory)
    edges = asyncio.run(manager.discover_edges_post_consolidation(store["new"], SUMMARY, max_edges=1))
    assert [edge["target"] for edge in edges] == [store["retries"]]
    assert [e["target_kref"] for e in memory.edges(store["new"], direction="outgoing")] == [store["retries"]]


def test_manager_build_recalled_context_renders_badges(memory):
    memory.remember("The fire exit is at the back", space="site", title="Fire exit", evidence_level="official",
                    metadata={"event_date": "2025-03-09"})
    memory.remember("Someone said the fire exit moved", space="site", title="Fire exit rumour",
                    evidence_level="unverified")
    memory.remember("A visitor noted the fire exit sign", space="site", title="Fire exit sign",
                    evidence_level="single_source")
    manager = km.UniversalMemoryManager(memory=memory)
    results = asyncio.run(manager.recall_memories("fire exit"))
    context = manager.build_recalled_context(results, "fire exit")
    blocks = context.split("\n\n")
    assert blocks[0] == "[official] [2025-03-09] Fire exit: The fire exit is at the back"
    assert "[unverified] Fire exit rumour: Someone said the fire exit moved" in blocks
    assert "Fire exit sign: A visitor noted the fire exit sign" in blocks
    assert "[single_source]" not in context
    assert context == km.build_recalled_context(results, "fire exit")


def test_manager_closes_only_a_memory_it_created(memory):
    async def scenario():
        async with km.UniversalMemoryManager(memory=memory) as manager:
            await manager.recall_memories("anything")
        async with km.UniversalMemoryManager() as shared:        # the default memory: shared, left open
            shared.memory.remember("alpha")
            assert krefs(await shared.recall_memories("alpha"))
        async with km.UniversalMemoryManager(memory_store=lambda **payload: {}) as owned:   # a private one
            owned.memory.remember("beta")
        return shared, owned
    shared, owned = asyncio.run(scenario())
    memory.remember("still open")                          # the caller's memory was not closed
    assert shared.memory is km.default_memory() and shared.memory.remember("still open too")
    with pytest.raises(km.StoreClosedError):
        owned.memory.remember("closed")


# ==========================================================================================================
# 5. The recall CLI options
# ==========================================================================================================

@pytest.fixture(scope="module")
def cli_store(tmp_path_factory):
    """A store written through the API with a manual clock, and a runner for the CLI on it."""
    folder = tmp_path_factory.mktemp("cli")
    path = str(folder / "cli.db")
    clock = km.ManualClock("2026-01-01T00:00:00Z", tick=1.0)
    refs: dict[str, str] = {}
    with km.Memory(path, clock=clock) as memory:
        refs["ann"] = memory.remember("we should book the lighthouse tour", space="chat",
                                      metadata={"speaker": "Ann", "session": "s1"})
        refs["bob"] = memory.remember("the lighthouse tour is sold out", space="chat",
                                      metadata={"speaker": "Bob", "session": "s1"})
        refs["decision"] = memory.remember("budget approved for the offsite", space="work", kind="decision")
        refs["fact"] = memory.remember("the offsite budget is forty thousand", space="work", kind="fact")
        refs["note"] = memory.remember("budget spreadsheet lives in the shared drive", space="work")
        refs["pref"] = memory.remember("budget reviews preferred on mondays", space="work",
                                       metadata={"memory_type": "preference"})
        for space in ("home/alpha", "home/beta", "home/gamma", "home/alpha/sub"):
            refs[space] = memory.remember(f"garden plan for {space}", space=space)
        refs["kettle_strong"] = memory.remember("kettle descaling with vinegar, kettle descaling monthly",
                                                space="house")
        refs["kettle_weak"] = memory.remember("the kettle was bought in a sale", space="house")
        refs["passport"] = memory.remember("passport application form submitted", space="admin")
        refs["phone1"] = memory.remember("phone number is 555 0100", space="contacts", key="phone")
        refs["phone2"] = memory.remember("phone number is 555 0199", space="contacts", key="phone")
        refs["insurance"] = memory.remember("Home insurance renews in June with Acme", space="admin",
                                            title="Insurance", evidence_level="official",
                                            metadata={"event_date": "2025-06-01"})
        clock.set("2026-02-01T00:00:00Z")
        memory.deprecate(item_of(refs["passport"]))

    env = {key: value for key, value in os.environ.items() if not key.startswith("KUMIHO_")}
    env["KUMIHO_MEMORY_PATH"] = path
    env["HOME"] = str(folder / "home")

    def run(*args: str) -> tuple[int, str, str]:
        done = subprocess.run([sys.executable, SCRIPT, "recall", *args], capture_output=True, text=True,
                              env=env, timeout=60)
        return done.returncode, done.stdout, done.stderr

    def hits(*args: str) -> list[str]:
        code, out, err = run(*args, "--json")
        assert code == 0, err
        return [hit["kref"] for hit in json.loads(out)]

    run.hits = hits
    run.refs = refs
    return run


def test_cli_recall_where_filters_on_metadata(cli_store):
    refs = cli_store.refs
    assert sorted(cli_store.hits("lighthouse tour")) == sorted([refs["ann"], refs["bob"]])
    assert cli_store.hits("lighthouse tour", "--where", '{"speaker": "Ann"}') == [refs["ann"]]
    assert cli_store.hits("lighthouse tour", "--where", '{"speaker": {"$in": ["Bob", "Cy"]}}') == [refs["bob"]]


def test_cli_recall_type_is_repeatable(cli_store):
    refs = cli_store.refs
    assert cli_store.hits("budget", "--limit", "10", "--type", "decision") == [refs["decision"]]
    both = cli_store.hits("budget", "--limit", "10", "--type", "decision", "--type", "fact")
    assert sorted(both) == sorted([refs["decision"], refs["fact"]])
    assert cli_store.hits("budget", "--type", "preference") == [refs["pref"]]


def test_cli_recall_space_is_repeatable(cli_store):
    refs = cli_store.refs
    found = cli_store.hits("garden plan", "--limit", "10", "--space", "home/alpha", "--space", "home/beta")
    assert sorted(found) == sorted([refs["home/alpha"], refs["home/beta"], refs["home/alpha/sub"]])
    assert len(cli_store.hits("garden plan", "--limit", "10")) == 4


def test_cli_recall_min_score(cli_store):
    refs = cli_store.refs
    code, out, err = cli_store("kettle descaling", "--json")
    assert code == 0, err
    scores = {hit["kref"]: hit["score"] for hit in json.loads(out)}
    assert scores[refs["kettle_strong"]] == 1.0 and scores[refs["kettle_weak"]] < 0.9
    assert cli_store.hits("kettle descaling", "--min-score", "0.9") == [refs["kettle_strong"]]
    assert cli_store.hits("kettle descaling", "--min-score", "1.5") == []


def test_cli_recall_as_of_finds_a_memory_deprecated_later(cli_store):
    passport = cli_store.refs["passport"]
    assert cli_store.hits("passport application") == []
    assert cli_store.hits("passport application", "--as-of", "2026-01-15T00:00:00Z") == [passport]
    assert cli_store.hits("passport application", "--as-of", "2026-02-15T00:00:00Z") == []
    code, _, err = cli_store("passport application", "--as-of", "not a time")
    assert code == 2 and "not a time" in err


def test_cli_recall_history_shows_older_revisions(cli_store):
    refs = cli_store.refs
    assert cli_store.hits("phone number") == [refs["phone2"]]
    assert sorted(cli_store.hits("phone number", "--history")) == sorted([refs["phone1"], refs["phone2"]])


def test_cli_recall_context_prints_the_context_block(cli_store):
    code, out, err = cli_store("insurance renews", "--context")
    assert code == 0, err
    assert out.strip() == "[official] [2025-06-01] Insurance: Home insurance renews in June with Acme"
    code, out, err = cli_store("insurance renews", "--context", "--json")
    engaged = json.loads(out)
    assert code == 0 and engaged["context"].startswith("[official] ")
    assert engaged["source_krefs"] == [cli_store.refs["insurance"]]
    code, out, _ = cli_store("zebra xylophone", "--context")
    assert code == 0 and out.strip() == "(no memories match)"


@pytest.mark.parametrize("where", ["{speaker: Ann}", "[1, 2", '{"speaker": {"$bogus": 1}}'])
def test_cli_recall_bad_where_is_one_line_error(cli_store, where):
    code, out, err = cli_store("lighthouse tour", "--where", where)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    if where.startswith("{speaker") or where.startswith("["):
        assert "--where" in err
