"""LangGraph's BaseStore over the memory graph, with the real ``langgraph`` package (dev extra).

Skipped (visibly) when LangGraph is missing, except under CI, where it must be installed.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys

import pytest

import kumiho_memory as km

try:
    from langgraph.graph import END, START, StateGraph
    from langgraph.store.base import BaseStore, Item, SearchItem
except ImportError:  # the optional extra is not installed
    BaseStore = None

pytestmark = pytest.mark.skipif(
    BaseStore is None and not os.environ.get("CI"),
    reason="langgraph is not installed (pip install langgraph, or pip install -e '.[langgraph]'); CI runs these")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def memory(clock, ids):
    with km.Memory(clock=clock, ids=ids) as opened:
        yield opened


@pytest.fixture
def store(memory):
    return km.langgraph_store(memory)


def test_it_is_a_base_store_and_put_get_round_trip(store, memory):
    assert isinstance(store, BaseStore)
    store.put(("users", "u1"), "prefs", {"theme": "dark", "font": {"size": 14}, "langs": ["en", "ko"]})
    item = store.get(("users", "u1"), "prefs")
    assert isinstance(item, Item)
    assert item.value == {"theme": "dark", "font": {"size": 14}, "langs": ["en", "ko"]}
    assert item.key == "prefs" and item.namespace == ("users", "u1")
    assert item.created_at.tzinfo is not None and item.updated_at >= item.created_at
    assert store.get(("users", "u1"), "missing") is None
    assert store.get(("users", "u2"), "prefs") is None
    # it is an ordinary memory in space users/u1
    [listed] = memory.items(space="users/u1")
    assert listed["space"] == "users/u1" and "dark" in memory.get(listed["item_kref"])["content"]


def test_put_with_the_same_key_revises_the_same_item_and_keeps_history(store, memory):
    store.put(("prefs",), "theme", {"mode": "dark"})
    first = store.get(("prefs",), "theme")
    store.put(("prefs",), "theme", {"mode": "light"})
    store.put(("prefs",), "theme", {"mode": "light"})          # unchanged: nothing added
    store.put(("prefs",), "theme", {"mode": "Light"})          # a case change is a change for a store
    assert store.get(("prefs",), "theme").value == {"mode": "Light"}
    [item] = memory.items(space="prefs")
    history = memory.history(item["item_kref"])
    assert [r["metadata"]["langgraph"]["value"]["mode"] for r in history] == ["dark", "light", "Light"]
    assert memory.edges(history[-1]["kref"], edge_type=km.SUPERSEDES)
    later = store.get(("prefs",), "theme")
    assert later.created_at == first.created_at and later.updated_at > first.updated_at


def test_delete_forgets_the_item(store, memory):
    store.put(("notes",), "n1", {"text": "the launch code is blue"})
    store.delete(("notes",), "n1")
    assert store.get(("notes",), "n1") is None
    assert memory.items(space="notes", include_deprecated=True) == []
    assert memory.recall("launch code") == []
    store.delete(("notes",), "never-there")        # deleting nothing is fine
    store.put(("notes",), "n1", {"text": "again"})
    assert store.get(("notes",), "n1").value == {"text": "again"}


def test_search_with_a_query_runs_recall_with_scores(store):
    store.put(("docs", "a"), "1", {"text": "Paris is the capital of France"})
    store.put(("docs", "b"), "2", {"text": "Berlin is the capital of Germany"})
    store.put(("docs", "b"), "3", {"text": "bananas are yellow"})
    store.put(("other",), "4", {"text": "the capital of Spain is Madrid"})
    hits = store.search(("docs",), query="capital of France")
    assert hits and all(isinstance(hit, SearchItem) for hit in hits)
    assert hits[0].key == "1" and hits[0].score == pytest.approx(1.0)
    assert [hit.score for hit in hits] == sorted((hit.score for hit in hits), reverse=True)
    assert {hit.namespace[0] for hit in hits} == {"docs"}              # the prefix scopes the search
    assert [hit.key for hit in store.search(("docs", "b"), query="capital")] == ["2"]
    assert store.search(("docs",), query="capital", filter={"text": "Berlin is the capital of Germany"})[0].key == "2"
    ranked = store.search(("docs",), query="capital")
    assert [hit.key for hit in store.search(("docs",), query="capital", limit=1, offset=1)] == [ranked[1].key]


def test_search_without_a_query_filters_and_pages(store):
    for number in range(5):
        store.put(("items",), f"k{number}",
                  {"n": number, "even": number % 2 == 0, "meta": {"tier": "gold" if number > 2 else "free"}})
    everything = store.search(("items",), limit=10)
    assert [hit.key for hit in everything] == ["k0", "k1", "k2", "k3", "k4"]       # insertion order
    assert all(hit.score is None for hit in everything)
    assert [hit.key for hit in store.search(("items",), limit=2, offset=1)] == ["k1", "k2"]
    assert [hit.key for hit in store.search(("items",), filter={"even": True})] == ["k0", "k2", "k4"]
    assert [hit.key for hit in store.search(("items",), filter={"n": {"$gte": 3}})] == ["k3", "k4"]
    assert [hit.key for hit in store.search(("items",), filter={"n": {"$ne": 0, "$lt": 2}})] == ["k1"]
    assert [hit.key for hit in store.search(("items",), filter={"meta": {"tier": "gold"}})] == ["k3", "k4"]
    assert store.search(("nothing",)) == []


def test_index_false_is_not_found_by_query_but_is_by_key(store):
    store.put(("secret",), "s", {"text": "zebra crossing"}, index=False)
    store.put(("secret",), "t", {"text": "zebra stripes", "other": "unrelated"}, index=["text"])
    assert [hit.key for hit in store.search(("secret",), query="zebra")] == ["t"]
    assert store.get(("secret",), "s").value == {"text": "zebra crossing"}


def test_list_namespaces_prefix_suffix_depth_and_odd_labels(store):
    store.put(("a", "b", "c"), "k", {"v": 1})
    store.put(("a", "x"), "k", {"v": 2})
    store.put(("users", "ann@example", "memories"), "k", {"v": 3})
    store.put(("users", "한국어 label"), "k", {"v": 4})
    namespaces = store.list_namespaces()
    assert ("a", "b", "c") in namespaces and ("a", "x") in namespaces
    assert ("users", "ann@example", "memories") in namespaces and ("users", "한국어 label") in namespaces
    assert store.list_namespaces(prefix=("a",)) == [("a", "b", "c"), ("a", "x")]
    assert store.list_namespaces(suffix=("memories",)) == [("users", "ann@example", "memories")]
    assert store.list_namespaces(prefix=("users", "*")) == sorted([("users", "ann@example", "memories"),
                                                                  ("users", "한국어 label")])
    assert store.list_namespaces(max_depth=1) == [("a",), ("users",)]
    assert store.list_namespaces(limit=1, offset=1) == [sorted(namespaces)[1]]
    assert store.get(("users", "ann@example", "memories"), "k").value == {"v": 3}


def test_a_root_space_keeps_the_store_apart(memory):
    store = km.langgraph_store(memory, space="agents/lg")
    store.put(("prefs",), "theme", {"mode": "dark"})
    assert memory.items(space="agents/lg/prefs")
    assert store.list_namespaces() == [("prefs",)]
    assert km.langgraph_store(memory).get(("prefs",), "theme") is None


def test_ttl_is_refused_as_langgraph_documents(store):
    assert store.supports_ttl is False
    with pytest.raises(NotImplementedError):
        store.put(("prefs",), "theme", {"mode": "dark"}, ttl=5)


def test_async_methods(store):
    async def run():
        await store.aput(("chat",), "a", {"text": "async hello world"})
        got = await store.aget(("chat",), "a")
        found = await store.asearch(("chat",), query="hello")
        spaces = await store.alist_namespaces()
        await store.adelete(("chat",), "a")
        return got, found, spaces, await store.aget(("chat",), "a")
    got, found, spaces, gone = asyncio.run(run())
    assert got.value == {"text": "async hello world"} and found[0].key == "a" and spaces == [("chat",)]
    assert gone is None


def test_a_reopened_file_keeps_the_store(tmp_path):
    path = str(tmp_path / "lg.db")
    with km.Memory(path) as memory:
        km.langgraph_store(memory).put(("prefs",), "theme", {"mode": "dark"})
    with km.Memory(path) as memory:
        assert km.langgraph_store(memory).get(("prefs",), "theme").value == {"mode": "dark"}


def test_a_graph_reads_and_writes_through_the_store(store, memory):
    from typing import TypedDict

    class State(TypedDict):
        user: str
        message: str
        reply: str

    def remember(state: State, *, store: BaseStore) -> dict:
        store.put(("users", state["user"], "facts"), "latest", {"text": state["message"]})
        return {}

    def answer(state: State, *, store: BaseStore) -> dict:
        hits = store.search(("users", state["user"], "facts"), query=state["message"])
        return {"reply": f"I remember: {hits[0].value['text']}" if hits else "nothing"}

    builder = StateGraph(State)
    builder.add_node("remember", remember)
    builder.add_node("answer", answer)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", "answer")
    builder.add_edge("answer", END)
    graph = builder.compile(store=store)
    result = graph.invoke({"user": "ann", "message": "I moved to Lisbon", "reply": ""})
    assert result["reply"] == "I remember: I moved to Lisbon"
    graph.invoke({"user": "ann", "message": "I moved to Porto", "reply": ""})
    [item] = memory.items(space="users/ann/facts")
    assert [r["metadata"]["langgraph"]["value"]["text"] for r in memory.history(item["item_kref"])] == \
        ["I moved to Lisbon", "I moved to Porto"]
    assert memory.recall("where did Ann move?")[0]["content"].endswith("Porto")


def test_the_default_memory_is_used_when_none_is_given(tmp_path):
    code = ("import kumiho_memory as km; s = km.langgraph_store(); s.put(('p',), 'k', {'v': 1}); "
            "print(s.get(('p',), 'k').value)")
    environment = {**os.environ, "KUMIHO_MEMORY_PATH": str(tmp_path / "default.db")}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=environment, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "{'v': 1}"
    assert (tmp_path / "default.db").exists()


def test_importing_the_module_imports_no_framework_and_a_missing_one_names_the_install_line():
    code = ("import sys, kumiho_memory as km\n"
            "assert 'langgraph' not in sys.modules and 'agents' not in sys.modules\n"
            "sys.modules['langgraph'] = None; sys.modules['langgraph.store'] = None; "
            "sys.modules['langgraph.store.base'] = None\n"
            "try:\n    km.langgraph_store(km.Memory())\nexcept km.BackendUnavailableError as exc:\n    print(exc)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)})
    assert done.returncode == 0, done.stderr
    assert "pip install" in done.stdout and "langgraph" in done.stdout
