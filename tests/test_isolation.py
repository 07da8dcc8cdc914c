"""Isolation and limits (issue 10, item 4): projects sharing one store file, the documented size caps, eight
threads sharing one ``Memory``, and memory use while recalling over a large on-disk store. (Several
processes sharing one file: test_durability.py.)
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import io
import json
import os
import threading
import tracemalloc

import pytest

import kumiho_memory as km


@pytest.fixture
def two_projects(tmp_path):
    path = str(tmp_path / "shared.db")
    alpha = km.Memory(path, project="Alpha", ids=km.SequentialIds())
    beta = km.Memory(path, project="Beta", ids=km.SequentialIds())
    krefs = {}
    for memory in (alpha, beta):
        name = memory.project
        first = memory.remember(f"{name} plans the zebra migration for March.", space="plans", tags=["published"])
        second = memory.remember(f"{name} keeps the zebra budget at ten.", space="plans", key="budget")
        memory.link(second, first, "SUPPORTS")
        krefs[name] = (first, second)
    yield path, alpha, beta, krefs
    alpha.close()
    beta.close()


def test_projects_in_one_store_never_see_each_other_through_recall_items_edges_or_stats(two_projects):
    path, alpha, beta, krefs = two_projects
    for memory, other in ((alpha, "Beta"), (beta, "Alpha")):
        own = memory.project
        for options in ({}, {"include_superseded": True}, {"space": "plans"}, {"as_of": "2030-01-01T00:00:00Z"},
                        {"where": {"evidence_level": {"$exists": False}}}):
            hits = memory.recall("zebra migration budget", limit=50, **options)
            assert hits and all(hit["kref"].startswith(f"kref://{own}/") for hit in hits), options
            assert all(other not in hit["content"] for hit in hits)
        assert {item["item_kref"].split("/")[2] for item in memory.items(include_deprecated=True)} == {own}
        for kref in krefs[own]:
            assert all(own in edge["source_kref"] and own in edge["target_kref"] for edge in memory.edges(kref))
        assert memory.stats()["items"] == 2 and memory.stats()["edges"] == 1          # its own SUPPORTS edge
        engaged = memory.engage("zebra", limit=10)
        assert other not in engaged["context"]


def test_projects_are_kept_apart_on_the_command_line(two_projects):
    path, alpha, beta, krefs = two_projects
    for project, other in (("Alpha", "Beta"), ("Beta", "Alpha")):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert km.main(["--db", path, "--project", project, "recall", "zebra", "--json", "--limit", "50"]) == 0
        hits = json.loads(out.getvalue())
        assert hits and all(hit["kref"].startswith(f"kref://{project}/") for hit in hits)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert km.main(["--db", path, "--project", project, "stats", "--json"]) == 0
        assert json.loads(out.getvalue())["items"] == 2


@pytest.mark.parametrize("operation", ["get", "history", "edges", "forget", "link", "tag", "deprecate"])
def test_a_project_cannot_reach_another_projects_memory_by_kref(operation, two_projects):
    path, alpha, beta, krefs = two_projects
    foreign_first, foreign_second = krefs["Beta"]
    own_first, _ = krefs["Alpha"]
    before = io.StringIO()
    beta.export_jsonl(before)
    calls = {"get": lambda: alpha.get(foreign_first), "history": lambda: alpha.history(foreign_first),
             "edges": lambda: alpha.edges(foreign_second), "forget": lambda: alpha.forget(foreign_first),
             "link": lambda: alpha.link(own_first, foreign_first, "SUPPORTS"),
             "tag": lambda: alpha.tag(foreign_first, "approved"), "deprecate": lambda: alpha.deprecate(foreign_first)}
    with pytest.raises(km.NotFoundError):
        calls[operation]()
    after = io.StringIO()
    beta.export_jsonl(after)
    assert after.getvalue() == before.getvalue()


def test_an_mcp_server_for_one_project_cannot_read_another_projects_memory(two_projects):
    pytest.importorskip("mcp")
    import kumiho_memory_mcp

    path, alpha, beta, krefs = two_projects
    manager = km.UniversalMemoryManager(memory=alpha)
    server = kumiho_memory_mcp.build_server(manager)

    async def call() -> None:
        try:
            await server.call_tool("kumiho_memory_get", {"kref": krefs["Beta"][0]})
        finally:
            await manager.buffer.close()

    with pytest.raises(Exception) as caught:
        asyncio.run(call())
    assert "NotFoundError" in str(caught.value)


def test_export_is_the_whole_file_not_one_project(two_projects):
    """Documented: export is a backup of the store file, every project in it (see the Guarantees section)."""
    path, alpha, beta, krefs = two_projects
    stream = io.StringIO()
    alpha.export_jsonl(stream)
    assert "kref://Beta/" in stream.getvalue() and "kref://Alpha/" in stream.getvalue()


# -- size caps ---------------------------------------------------------------------------------------------

def _export(memory: km.Memory) -> str:
    stream = io.StringIO()
    memory.export_jsonl(stream)
    return stream.getvalue()


@pytest.mark.parametrize("field, value, words", [
    ("content", "x" * (km.MAX_CONTENT_CHARS + 1), [str(km.MAX_CONTENT_CHARS), "content"]),
    ("title", "t" * (km.MAX_TITLE_CHARS + 1), [str(km.MAX_TITLE_CHARS), "title"]),
    ("metadata", {"blob": "m" * km.MAX_METADATA_BYTES}, [str(km.MAX_METADATA_BYTES), "metadata"]),
    ("source", "s" * 2001, ["2000", "source"]),
    ("key", "k" * 513, ["512", "key"]),
])
def test_size_caps_give_a_clear_error_and_write_nothing(field, value, words):
    memory = km.Memory()
    memory.remember("a memory that was there before", space="caps")
    before = _export(memory)
    options = {"content": "fine", "space": "caps", field: value}
    content = options.pop("content")
    with pytest.raises(km.InvalidArgumentError) as caught:
        memory.remember(content, **options)
    assert all(word in str(caught.value) for word in words), str(caught.value)
    assert _export(memory) == before
    memory.close()


def test_the_caps_themselves_are_accepted():
    memory = km.Memory()
    kref = memory.remember("x" * km.MAX_CONTENT_CHARS, title="t" * km.MAX_TITLE_CHARS, space="caps",
                           metadata={"blob": "m" * (km.MAX_METADATA_BYTES - 20)})
    assert len(memory.get(kref)["content"]) == km.MAX_CONTENT_CHARS
    memory.close()


def test_a_message_over_the_cap_is_refused_and_nothing_is_buffered():
    async def scenario() -> None:
        manager = km.UniversalMemoryManager(memory=km.Memory())
        try:
            await manager.ingest_message(user_id="ann", message="a first message", session_id="s")
            for too_big in ("x" * (km.MAX_MESSAGE_BYTES + 1), "é" * (km.MAX_MESSAGE_BYTES // 2 + 1)):
                with pytest.raises(km.MessageTooLargeError) as caught:
                    await manager.ingest_message(user_id="ann", message=too_big, session_id="s")
                assert isinstance(caught.value, km.InvalidArgumentError)
                assert str(km.MAX_MESSAGE_BYTES) in str(caught.value) or "64 KiB" in str(caught.value)
            window = await manager.buffer.get_messages(project=manager.project, session_id="s")
            assert [m["content"] for m in window["messages"]] == ["a first message"]
        finally:
            await manager.close()
            manager.memory.close()

    asyncio.run(scenario())


# -- eight threads, one Memory -------------------------------------------------------------------------------

def test_eight_threads_sharing_one_memory_lose_nothing(tmp_path):
    memory = km.Memory(str(tmp_path / "threads.db"))
    written: dict[int, list[str]] = {}
    keyed: dict[int, list[str]] = {}
    errors: list[BaseException] = []
    start = threading.Barrier(8)

    def worker(number: int) -> None:
        try:
            start.wait()
            mine, revisions = [], []
            for step in range(40):
                mine.append(memory.remember(f"thread {number} note {step} about the zebra", space=f"t/{number}"))
                revisions.append(memory.remember(f"thread {number} counter is {step}", space="shared",
                                                 key=f"counter-{number}"))
                if step % 10 == 0:
                    memory.recall("zebra", limit=5)
                    memory.tag(mine[-1], "seen")
            written[number], keyed[number] = mine, revisions
        except BaseException as exc:  # reported below, with the thread's own traceback
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(number,)) for number in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not errors, errors
    assert sum(len(krefs) for krefs in written.values()) == 320
    for number in range(8):
        assert [memory.get(kref)["content"] for kref in written[number]] == \
            [f"thread {number} note {step} about the zebra" for step in range(40)]
        assert [int(kref.rsplit("=", 1)[1]) for kref in keyed[number]] == list(range(1, 41))
        history = memory.history(keyed[number][0].split("?")[0])
        assert [r["content"] for r in history] == [f"thread {number} counter is {step}" for step in range(40)]
    assert memory.stats()["items"] == 320 + 8
    assert len(memory.recall("zebra", limit=1000)) == 320
    memory.close()


# -- memory use while recalling over a large store ---------------------------------------------------------------

def _large_export(count: int) -> list[str]:
    lines = [json.dumps({"record": "header", "format": "kumiho-memory-export", "format_version": 1}),
             json.dumps({"record": "space", "project": "Big", "path": "", "created_at": "2026-01-01T00:00:00.000000Z"}),
             json.dumps({"record": "space", "project": "Big", "path": "bulk",
                         "created_at": "2026-01-01T00:00:00.000000Z"})]
    vocabulary = [f"w{index}" for index in range(3000)]
    for index in range(count):
        kref = f"kref://Big/bulk/memory-{index:06d}.memory"
        stamp = f"2026-01-01T{index // 3600 % 24:02d}:{index // 60 % 60:02d}:{index % 60:02d}.000000Z"
        words = " ".join(vocabulary[(index * step) % len(vocabulary)] for step in (1, 7, 31, 97, 331, 977))
        lines.append(json.dumps({"record": "item", "item_kref": kref, "key": None, "metadata": {},
                                 "created_at": stamp, "deprecated": False, "last_number": 1}))
        lines.append(json.dumps({"record": "revision", "kref": kref + "?r=1", "title": f"note {index}",
                                 "content": f"note {index}: {words}", "metadata": {}, "created_at": stamp,
                                 "deprecated": False}))
    return lines


def test_memory_stays_bounded_while_recalling_over_a_large_store(tmp_path):
    path = str(tmp_path / "big.db")
    with km.Memory(path, project="Big") as memory:
        assert memory.import_jsonl(_large_export(20_000))["added"] == 2 * 20_000 + 2
    queries = [f"w{(index * 13) % 3000} w{(index * 29) % 3000}" for index in range(300)]
    with km.Memory(path, project="Big") as memory:
        memory.recall("w1 w2", limit=10)                       # builds the index
        for query in queries:                                 # warm every cache the queries fill (the cache of
            memory.recall(query, limit=10)                    # fetched rows grows with new terms, bounded)
        gc.collect()
        tracemalloc.start()
        try:
            baseline, _ = tracemalloc.get_traced_memory()
            for query in queries * 2:
                hits = memory.recall(query, limit=10)
                assert len(hits) <= 10
            gc.collect()
            after, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    # 600 recalls over 20,000 memories: no growth that scales with the calls, and no call that
    # materializes the store (a copy of 20,000 records would be tens of MB).
    assert after - baseline < 1_000_000, f"recall leaked {after - baseline} bytes over 600 calls"
    assert peak - baseline < 8_000_000, f"one recall allocated {peak - baseline} bytes over its baseline"


def test_update_metadata_respects_the_metadata_cap_on_the_merged_result():
    memory = km.Memory()
    kref = memory.remember("Big metadata", space="caps")
    half = "x" * (km.MAX_METADATA_BYTES // 2 + 10)
    memory.update_metadata(kref, {"a": half})
    with pytest.raises(km.InvalidArgumentError):
        memory.update_metadata(kref, {"b": half})                  # each fits, together they do not
    assert set(memory.get(kref)["metadata"]) == {"a"}
    with pytest.raises(km.InvalidArgumentError):
        memory.update_metadata(kref, {1: None})
    memory.close()
