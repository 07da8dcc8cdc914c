"""The Kumiho graph server backend (issue 8), through the real ``kumiho`` SDK over real gRPC, against the
stand-in server in ``tests/kumiho_standin.py`` on a loopback port.

The contract suite (test_graph_contract.py) also runs on this backend (``conftest.BACKENDS`` + "kumiho");
this file covers what is particular to a server: its krefs and numbering, the history kept beside its tags,
migration both ways, a stopped server (a transient error, fast; consolidation queues and replays), the token
never leaking, the bearer check, and the wiring that reads the environment.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging

import pytest

import kumiho_memory as km
from conftest import HAVE_KUMIHO, KUMIHO_TOKEN, _Peek, kumiho_standin_on, open_kumiho_memory

pytestmark = pytest.mark.skipif(not HAVE_KUMIHO,
                                reason="the kumiho SDK (extra 'kumiho') or km.KumihoBackend is missing")


def export_text(memory: km.Memory) -> str:
    buffer = io.StringIO()
    memory.export_jsonl(buffer)
    return buffer.getvalue()


def import_text(memory: km.Memory, text: str) -> dict:
    return memory.import_jsonl(io.StringIO(text))


@pytest.fixture
def server(kumiho_server):
    return kumiho_server


@pytest.fixture
def kmem(server, clock, ids):
    memory = open_kumiho_memory(clock, ids, server)
    yield memory
    memory.close()


def build_graph(memory: km.Memory, clock: km.ManualClock) -> dict[str, str]:
    """Keys, tag moves and a removal, a forgotten revision, nested spaces, edges with metadata, an artifact,
    deprecations, unicode, a conversation thread."""
    a1 = memory.remember("The user prefers dark mode", space="prefs", key="ui.theme",
                         metadata={"nested": {"list": [1, 2.5, None, "ü"]}, "flag": True})
    a2 = memory.remember("The user prefers light mode", space="prefs", key="ui.theme", tags=["published"])
    a3 = memory.remember("The user prefers solarized", space="prefs", key="ui.theme")
    memory.tag(a3, "published")
    memory.tag(a1, "staging")
    memory.untag(a1, "staging")
    b1 = memory.remember("Project kickoff on Monday", space="work/projects/alpha", kind="event",
                         metadata={"event_date": "2025-12-01"})
    b2 = memory.remember("Kickoff moved to Tuesday", item=b1.split("?")[0])
    memory.forget(b2)
    c1 = memory.remember("raw capture 日本語 🦊 with \"quotes\"", space="notes")
    memory.link(c1, a3, "ABOUT", {"weight": 0.75})
    memory.add_artifact(a3, "notes.md", "/tmp/notes.md", {"bytes": 12})
    memory.deprecate(a1)
    m1 = memory.remember("hello there", space="chat", metadata={"speaker": "ann", "thread_id": "t1"})
    m2 = memory.remember("hi ann", space="chat", metadata={"speaker": "bob", "thread_id": "t1"})
    clock.advance(3600)
    return {"a1": a1, "a2": a2, "a3": a3, "b1": b1, "b2": b2, "c1": c1, "m1": m1, "m2": m2}


# -- krefs, revisions, tags are the server's ---------------------------------------------------------------

def test_krefs_and_numbers_are_the_servers(kmem, server):
    kref = kmem.remember("The server numbers revisions", space="facts/sub", kind="fact")
    item = servicer_item(server, kref)
    assert kref == f"{item.uri}?r=1"
    second = kmem.remember("and counts on", item=kref.split("?")[0])
    assert second.endswith("?r=2") and sorted(item.revisions) == [1, 2]
    assert server.servicer.calls["CreateRevision"] == 2
    assert "/CognitiveMemory/facts/sub" in server.servicer.spaces


def servicer_item(server, kref: str):
    return server.servicer.items[kref.split("?")[0]]


def test_tags_move_on_the_server_and_time_travel_uses_its_resolution(kmem, server, clock):
    first = kmem.remember("plan one")
    item = first.split("?")[0]
    second = kmem.remember("plan two", item=item)
    clock.set("2026-02-01T00:00:00Z")
    kmem.tag(first, "published")
    clock.set("2026-03-01T00:00:00Z")
    kmem.tag(second, "published")
    assert servicer_item(server, first).tags["published"] == 2
    before = server.servicer.calls.get("ResolveKref", 0)
    assert kmem.get(f"{item}?t=published&time=2026-02-15T00:00:00Z")["kref"] == first
    assert server.servicer.calls["ResolveKref"] > before            # asked the server, not a local copy
    assert kmem.get(f"{item}?t=published&time=202603020000")["kref"] == second
    with pytest.raises(km.NotFoundError):
        kmem.get(f"{item}?t=published&time=2026-01-15T00:00:00Z")


def test_deprecation_is_the_servers_flag_and_forget_its_delete(kmem, server):
    kref = kmem.remember("soon gone")
    kmem.deprecate(kref.split("?")[0])
    assert servicer_item(server, kref).deprecated is True
    assert kmem.get(kref)["deprecated"] is True
    kmem.forget(kref.split("?")[0])
    assert kref.split("?")[0] not in server.servicer.items
    with pytest.raises(km.NotFoundError):
        kmem.get(kref)


def test_metadata_and_artifacts_round_trip_through_string_maps(kmem, server):
    metadata = {"n": 1, "f": 2.5, "b": False, "nul": None, "deep": {"x": [1, {"y": "ü"}]}, "s": "plain"}
    kref = kmem.remember("typed metadata", metadata=metadata)
    assert kmem.get(kref)["metadata"] == metadata
    stored = servicer_item(server, kref).revisions[1]["metadata"]
    assert all(isinstance(value, str) for value in stored.values())
    assert stored["title"] == "typed metadata" and stored["content"] == "typed metadata"
    kmem.add_artifact(kref, "a.md", "/files/a.md", {"size": 3})
    kmem.add_artifact(kref, "a.md", "/files/b.md", {"size": 4})       # replaces
    (artifact,) = kmem.artifacts(kref)
    assert (artifact["location"], artifact["metadata"]) == ("/files/b.md", {"size": 4})


def test_thread_messages_are_linked_by_follows(kmem):
    m1 = kmem.remember("hello there", space="chat", metadata={"speaker": "ann", "thread_id": "t1"})
    m2 = kmem.remember("hi ann", space="chat", metadata={"speaker": "bob", "thread_id": "t1"})
    edges = kmem.edges(m2, direction="outgoing")
    assert [(e["target_kref"], e["edge_type"]) for e in edges] == [(m1, "FOLLOWS")]


def test_recall_ranks_server_candidates_client_side(kmem, server):
    dark = kmem.remember("The user prefers dark mode in the editor", space="prefs")
    kmem.remember("Lunch is at noon", space="prefs")
    fact = kmem.remember("Ann Lee works on the billing service", space="people", metadata={"people": ["Ann Lee"]})
    before = server.servicer.calls.get("Search", 0)
    hits = kmem.recall("dark mode editor")
    assert server.servicer.calls["Search"] > before
    assert hits and hits[0]["kref"] == dark
    assert all("score" in hit for hit in hits)
    assert kmem.recall("billing", space="people")[0]["kref"] == fact
    assert kmem.recall("billing", space="prefs") == []
    assert kmem.recall("zebra") == []


def test_recall_skips_superseded_and_deprecated(kmem):
    old = kmem.remember("The office is in Berlin", space="facts", key="office")
    new = kmem.remember("The office is in Munich", space="facts", key="office")
    assert [hit["kref"] for hit in kmem.recall("office")] == [new]
    kmem.deprecate(new.split("?")[0])
    assert kmem.recall("office") == []
    assert old.endswith("?r=1")


@pytest.mark.parametrize("batch_reads", [True, False])
def test_recall_skips_what_another_item_supersedes_and_reads_candidates_in_batches(kmem, server, batch_reads):
    kmem.backend._batch_reads = batch_reads          # False: as against a server without batch reads
    old = kmem.remember("The staging database runs on host alpha", space="ops")
    notes = [kmem.remember(f"Runbook note {n}: the staging database is backed up nightly", space="ops")
             for n in range(12)]
    new = kmem.remember("The staging database moved to host beta", space="ops", tags=["published"])
    kmem.link(new, old, "SUPERSEDES")
    before = dict(server.servicer.calls)
    found = [hit["kref"] for hit in kmem.recall("staging database host", limit=20)]
    assert old not in found and new in found and set(notes) <= set(found)
    fetched = server.servicer.calls.get("GetRevisions", 0) - before.get("GetRevisions", 0)
    batched = server.servicer.calls.get("BatchGetRevisions", 0) - before.get("BatchGetRevisions", 0)
    if batch_reads:
        assert batched >= 1 and fetched == 0
    else:
        assert batched == 0 and fetched >= 14


def test_stats_match_the_embedded_engine_on_the_same_history(kmem, clock, ids):
    build_graph(kmem, clock)
    embedded = km.Memory(clock=km.ManualClock("2026-01-01T00:00:00Z", tick=1.0), ids=km.SequentialIds())
    build_graph(embedded, km.ManualClock())
    ours, theirs = kmem.stats(), embedded.stats()
    assert ours["backend"] == "kumiho" and ours["path"] == kmem.backend.address
    drop = ("backend", "path")
    assert {k: v for k, v in ours.items() if k not in drop} == {k: v for k, v in theirs.items() if k not in drop}
    assert (ours["items"], ours["revisions"], ours["edges"]) == (5, 7, 4)
    embedded.close()


# -- migration both ways -------------------------------------------------------------------------------------

def test_embedded_to_kumiho_to_embedded_is_identical(clock, ids, server):
    embedded = km.Memory(clock=clock, ids=ids)
    build_graph(embedded, clock)
    original = export_text(embedded)
    kmem = open_kumiho_memory(km.ManualClock("2030-06-01T00:00:00Z", tick=1.0), km.SequentialIds(900_000), server)
    counts = import_text(kmem, original)
    assert counts["added"] == counts["records"] - 1 and counts["skipped"] == 0
    via_kumiho = export_text(kmem)
    back = km.Memory(clock=km.ManualClock("2031-01-01T00:00:00Z"), ids=km.SequentialIds(5))
    import_text(back, via_kumiho)
    assert export_text(back) == original
    assert via_kumiho == original           # imported timestamps are the originals, kept beside the server's
    # The imported store works: keys, tags and time travel, the thread continues.
    a_item = next(r["item_kref"] for r in map(json.loads, original.splitlines()) if r.get("key") == "ui.theme")
    assert kmem.get(f"{a_item}?t=published")["revision"] == 3
    for second in range(0, 12):
        instant = f"2026-01-01T00:00:{second:02d}Z"
        try:
            expected = embedded.get(f"{a_item}?t=published&time={instant}")["revision"]
        except km.NotFoundError:
            with pytest.raises(km.NotFoundError):
                kmem.get(f"{a_item}?t=published&time={instant}")
        else:
            assert kmem.get(f"{a_item}?t=published&time={instant}")["revision"] == expected
    again = kmem.remember("The user prefers solarized", space="prefs", key="ui.theme")
    assert again.endswith("?r=3")            # vacuous write: same content as the latest
    m3 = kmem.remember("bye", space="chat", metadata={"speaker": "ann", "thread_id": "t1"})
    assert [e["edge_type"] for e in kmem.edges(m3, direction="outgoing")] == ["FOLLOWS"]
    assert import_text(kmem, original)["added"] == 0          # idempotent
    for memory in (embedded, back, kmem):
        memory.close()


def test_kumiho_to_embedded_to_kumiho(kmem, clock, server):
    refs = build_graph(kmem, clock)
    exported = export_text(kmem)
    embedded = km.Memory(clock=km.ManualClock("2031-01-01T00:00:00Z"))
    import_text(embedded, exported)
    assert export_text(embedded) == exported
    other = kumiho_standin_on(km.ManualClock("2032-01-01T00:00:00Z", tick=1.0))
    other.start()
    try:
        second = open_kumiho_memory(km.ManualClock("2032-01-01T00:00:00Z", tick=1.0), km.SequentialIds(7), other)
        import_text(second, export_text(embedded))
        assert export_text(second) == exported
        assert second.get(refs["b1"].split("?")[0])["revision"] == 1
        # 2 was forgotten
        assert second.remember("Kickoff on Wednesday", item=refs["b1"].split("?")[0]).endswith("?r=3")
        second.close()
    finally:
        other.stop()
    embedded.close()


def test_conflicting_import_writes_nothing(kmem, clock):
    kmem.remember("The user prefers dark mode", space="prefs", key="ui.theme")
    lines = export_text(kmem).splitlines()
    changed = [json.loads(line) for line in lines]
    for record in changed:
        if record["record"] == "revision":
            record["content"] = "something else"
    changed.append({"record": "item", "item_kref": "kref://CognitiveMemory/new/thing.memory", "key": None,
                    "metadata": {}, "created_at": "2026-01-01T00:00:00Z", "deprecated": False, "last_number": 0})
    before = export_text(kmem)
    with pytest.raises(km.ConflictError):
        import_text(kmem, "\n".join(json.dumps(r) for r in changed) + "\n")
    assert export_text(kmem) == before
    with pytest.raises(km.ImportFormatError):
        import_text(kmem, lines[1] + "\n")
    assert export_text(kmem) == before


# -- failures ------------------------------------------------------------------------------------------------

def test_stopped_server_raises_a_transient_error_quickly_and_recovers(kmem, server):
    kref = kmem.remember("before the outage")
    server.stop()
    with pytest.raises(km.GraphServiceError) as caught:
        kmem.get(kref)
    assert caught.value.transient is True and caught.value.code in ("UNAVAILABLE", "DEADLINE_EXCEEDED")
    assert isinstance(caught.value, km.ServiceError) and isinstance(caught.value, ConnectionError)
    server.restart()
    assert until_up(lambda: kmem.get(kref))["content"] == "before the outage"


def until_up(call, seconds: float = 10.0):
    """Call until the server answers again (the channel waits out its reconnect backoff); bounded."""
    import time
    deadline = time.monotonic() + seconds
    while True:
        try:
            return call()
        except km.GraphServiceError as exc:
            if not exc.transient or time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def test_errors_map_to_our_classes(kmem):
    with pytest.raises(km.NotFoundError):
        kmem.get("kref://CognitiveMemory/notes/missing.memory")
    kref = kmem.remember("a memory")
    with pytest.raises(km.NotFoundError):
        kmem.get(kref.split("?")[0] + "?r=9")
    with pytest.raises(km.InvalidArgumentError):
        kmem.remember("bundles are reserved", kind="bundle")


def test_wrong_token_is_refused_permanently(server, clock):
    backend = km.KumihoBackend(server.address, token="not-the-token", retries=2, clock=clock)
    with pytest.raises(km.GraphServiceError) as caught:
        km.Memory(backend=backend, clock=clock).remember("nope")
    assert caught.value.transient is False and caught.value.code == "UNAUTHENTICATED"
    assert "not-the-token" not in str(caught.value)
    backend.close()


def test_token_never_appears_in_errors_logs_or_repr(server, clock, caplog):
    secret = "tok-" + "9" * 24
    server.token = None
    server.restart()
    backend = km.KumihoBackend(server.address, token=secret, retries=1, clock=clock)
    memory = km.Memory(backend=backend, clock=clock)
    with caplog.at_level(logging.DEBUG):
        memory.remember("works without a token check")
        server.stop()
        with pytest.raises(km.GraphServiceError) as caught:
            memory.remember("server is down")
    texts = [repr(backend), repr(memory), str(caught.value), repr(caught.value), caplog.text,
             str(backend.stats.__doc__), json.dumps({k: str(v) for k, v in vars(caught.value).items()})]
    assert all(secret not in text for text in texts)
    server.start(server.port)
    assert secret not in json.dumps(until_up(memory.stats))
    memory.close()


def test_the_token_is_sent_as_a_bearer_and_checked(server, clock):
    backend = km.KumihoBackend(server.address, token=KUMIHO_TOKEN, retries=0, clock=clock)
    memory = km.Memory(backend=backend, clock=clock)
    memory.remember("authorized")
    anonymous = km.KumihoBackend(server.address, token="", retries=0, clock=clock, environ={})
    with pytest.raises(km.GraphServiceError):
        anonymous.items("CognitiveMemory")
    memory.close()
    anonymous.close()


def test_environment_is_read_in_the_constructor_only(server, clock):
    environ = {"KUMIHO_SERVER_ENDPOINT": server.address, "KUMIHO_AUTH_TOKEN": KUMIHO_TOKEN}
    backend = km.KumihoBackend(clock=clock, retries=0, environ=environ)
    environ.clear()
    memory = km.Memory(backend=backend, clock=clock)
    assert memory.remember("configured from the environment").endswith("?r=1")
    memory.close()
    with pytest.raises(km.StoreClosedError):
        backend.items("CognitiveMemory")


def test_bad_arguments_to_the_constructor(server):
    with pytest.raises(km.InvalidArgumentError):
        km.KumihoBackend(server.address, retries=-1)
    with pytest.raises(km.InvalidArgumentError):
        km.KumihoBackend(server.address, timeout=0)


def test_consolidation_queues_while_the_server_is_down_and_replays(server, clock, ids, tmp_path):
    """A server stopped mid-consolidation: the session is acknowledged as queued (nothing lost, the buffer
    kept until the memory is durable somewhere), then replayed once the server is back."""
    memory = open_kumiho_memory(clock, ids, server)
    queue = km.RetryQueue(str(tmp_path / "queue"))
    manager = km.UniversalMemoryManager(memory=memory, retry_queue=queue, store_max_retries=1)

    async def scenario() -> None:
        for text in ("We decided to ship on Friday", "Friday works, the release notes are ready"):
            await manager.ingest_message(user_id="u1", message=text, session_id="s-1")
        server.stop()
        result = await manager.consolidate_session(session_id="s-1", space_path="decisions")
        assert result["success"] is True and result["store_result"].get("queued") is True
        assert queue.count == 1
        server.restart()
        until_up(lambda: memory.stats())
        flushed = await manager.flush_retry_queue()
        assert flushed["succeeded"] == 1 and queue.count == 0
        await manager.close()

    asyncio.run(scenario())
    found = memory.recall("ship on friday release notes")
    assert found and found[0]["space"] == "decisions"
    assert server.servicer.calls.get("CreateRevision", 0) >= 1
    memory.close()


def _free_port_env(server) -> dict[str, str]:
    import os
    return {"KUMIHO_MEMORY_BACKEND": "kumiho", "KUMIHO_SERVER_ENDPOINT": server.address,
            "KUMIHO_AUTH_TOKEN": KUMIHO_TOKEN, "KUMIHO_MEMORY_PROJECT": "ServerSide",
            "PATH": os.environ.get("PATH", "")}


@pytest.fixture
def wall_server():
    """A stand-in on the wall clock (for the CLI and the MCP server, which run on real time)."""
    from kumiho_standin import StandIn
    server = StandIn(token=KUMIHO_TOKEN)
    server.start()
    yield server
    server.stop()


def test_cli_works_on_the_server_and_migrates_both_ways(wall_server, tmp_path, monkeypatch, capsys):
    for key, value in _free_port_env(wall_server).items():
        monkeypatch.setenv(key, value)
    assert km.main(["remember", "The deploy window is Tuesday", "--space", "ops", "--key", "deploy.window"]) == 0
    kref = capsys.readouterr().out.strip()
    assert kref.startswith("kref://ServerSide/ops/") and kref.endswith("?r=1")
    assert km.main(["recall", "deploy window", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["kref"] == kref
    exported = tmp_path / "server.jsonl"
    assert km.main(["export", "-o", str(exported)]) == 0
    local = tmp_path / "local.db"
    assert km.main(["--db", str(local), "import", str(exported)]) == 0          # --db forces the file
    capsys.readouterr()
    with km.Memory(str(local), project="ServerSide") as memory:
        assert memory.get(kref)["content"] == "The deploy window is Tuesday"
    monkeypatch.setenv("KUMIHO_MEMORY_PROJECT", "Other")
    assert km.main(["stats", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["items"] == 0                    # projects stay apart


def test_mcp_round_trip_on_the_kumiho_backend(wall_server, tmp_path):
    """The real MCP script with KUMIHO_MEMORY_BACKEND=kumiho, through the SDK's stdio client."""
    mcp = pytest.importorskip("mcp")
    import os
    import sys
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client
    script = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "kumiho_memory_mcp.py")
    home = tmp_path / "home"
    home.mkdir()
    env = {**_free_port_env(wall_server), "HOME": str(home), "XDG_DATA_HOME": str(home)}

    def structured(result):
        assert not getattr(result, "isError", getattr(result, "is_error", False)), result
        return getattr(result, "structuredContent", None) or getattr(result, "structured_content", None)

    async def scenario() -> None:
        params = StdioServerParameters(command=sys.executable, args=[script], env=env, cwd=str(home))
        with open(os.devnull, "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    reflected = structured(await session.call_tool("kumiho_memory_reflect", {
                        "response": "Noted.", "session_id": "s-1",
                        "captures": [{"type": "decision", "title": "Use Postgres",
                                      "content": "The team chose Postgres for the billing service."}]}))
                    stored = reflected["stored_krefs"][0]
                    assert stored.startswith("kref://ServerSide/")
                    recalled = structured(await session.call_tool("kumiho_memory_recall",
                                                                  {"query": "which database for billing"}))
                    assert recalled["results"][0]["kref"] == stored
                    got = structured(await session.call_tool("kumiho_memory_get", {"kref": stored}))
                    assert "Postgres" in got["content"]
                    forgotten = structured(await session.call_tool("kumiho_memory_forget",
                                                                   {"kref": stored.split("?")[0]}))
                    assert forgotten["items"] == 1 and forgotten["scrubbed"] is None

    asyncio.run(asyncio.wait_for(scenario(), timeout=90))
    assert wall_server.servicer.calls.get("CreateRevision", 0) >= 1
    assert not any(item.uri.startswith("kref://ServerSide/") and item.revisions
                   for item in wall_server.servicer.items.values() if item.kind == "decision")
    assert not list(home.rglob("*.db"))                  # nothing fell back to a local store file


def test_recall_keeps_to_its_own_project_and_spaces_whatever_the_server_search_returns(server, clock, ids):
    mine = open_kumiho_memory(clock, ids, server)
    neighbour_backend = km.KumihoBackend(server.address, token=KUMIHO_TOKEN, retries=0, timeout=5.0,
                                         clock=_Peek(clock))
    neighbour = km.Memory(backend=neighbour_backend, project=mine.project + "2", clock=clock, ids=km.SequentialIds(500))
    try:
        own = mine.remember("The quarterly report is due Friday", space="ops")
        mine.remember("The quarterly report template lives in docs", space="ops-archive")
        neighbour.remember("The quarterly report is due Monday", space="ops")
        query = km.RecallQuery(project=mine.project, terms=tuple(km.tokenize("quarterly report")), pool=20,
                               spaces=("ops",))
        # ask the backend directly, as if the server's prefix filter had let everything through
        assert not mine.backend._in_scope("kref://" + mine.project + "2/ops/x.memory", query)
        assert not mine.backend._in_scope("kref://" + mine.project + "/ops-archive/x.memory", query)
        assert [hit["kref"] for hit in mine.recall("quarterly report", space="ops")] == [own]
    finally:
        neighbour.close()
        mine.close()


def test_prefetch_on_a_shared_server_never_serves_what_another_client_changed(server, clock, ids):
    planner = open_kumiho_memory(clock, ids, server, prefetch=km.PrefetchConfig())
    other = open_kumiho_memory(clock, km.SequentialIds(700), server)
    try:
        planner.remember("Billing roadmap: migrate invoices in March", space="plan")
        planner.remember("Invoice rounding uses decimal half-even", space="code")
        for run in ("a", "b"):
            planner.engage("billing roadmap", session_id=run)
            planner.prefetcher.wait_idle(timeout=30)
            step = planner.engage("invoice rounding", session_id=run)
        assert step["context_was_prefetched"]                         # learned, and served prepared
        before = planner.backend.change_token(planner.project)
        planner.engage("billing roadmap", session_id="c")
        planner.prefetcher.wait_idle(timeout=30)
        other.remember("Invoice rounding moved to banker's rounding in April", space="code")   # another client
        assert planner.backend.change_token(planner.project) != before
        served = planner.engage("invoice rounding", session_id="c")
        fresh = planner.engage("invoice rounding")
        assert served["source_krefs"] == fresh["source_krefs"]
        assert any("banker" in hit["content"] for hit in served["results"])
    finally:
        other.close()
        planner.close()


@pytest.mark.parametrize("failing", ["TagRevision", "GetRevision"])
def test_a_revision_that_fails_part_way_leaves_the_belief_as_it_was(kmem, server, failing):
    first = kmem.remember("The office is in Berlin", space="facts", key="office", tags=["published", "approved"])
    server.servicer.fail_after[failing] = 1 if failing == "TagRevision" else 0
    with pytest.raises(km.KumihoMemoryError):
        kmem.remember("The office is in Munich", space="facts", key="office", tags=["approved"])
    server.servicer.fail_after.clear()
    item = first.split("?")[0]
    assert [revision["revision"] for revision in kmem.history(item)] == [1]
    assert kmem.get(f"{item}?t=published")["kref"] == first
    assert kmem.get(f"{item}?t=approved")["kref"] == first
    assert [hit["kref"] for hit in kmem.recall("office")] == [first]


def test_a_failed_revision_leaves_an_exportable_history_and_no_credentials_in_the_address(kmem, server, clock):
    kmem.remember("The office is in Berlin", space="facts", key="office", tags=["published"])
    server.servicer.fail_after["GetRevision"] = 0
    with pytest.raises(km.KumihoMemoryError):
        kmem.remember("The office is in Munich", space="facts", key="office", tags=["published"])
    server.servicer.fail_after.clear()
    embedded = km.Memory(clock=clock)
    try:
        assert import_text(embedded, export_text(kmem))["added"] > 0
    finally:
        embedded.close()
    backend = km.KumihoBackend("https://user:pa/ss@memory.example:443", token="t")
    assert "pa/ss" not in backend.address and "user" not in backend.address and "pa/ss" not in repr(backend)
