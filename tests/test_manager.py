"""The async ``UniversalMemoryManager`` and consolidation (issue 4, items 2, 3, 6, 7 and the privacy part of 8).

The core loop end to end: ingest -> working memory -> consolidate -> recall, with the reference's result
shapes; offline (extractive) and LLM-backed summaries, the LLM being a loopback OpenAI-compatible server in
this file; privacy down to the bytes of the store file; nothing lost when the store fails (a real fault: the
SQLite write lock held by another connection while the ``Memory`` waits only 50 ms); tool executions;
working memory on a real ``redis-server`` (skipped with the reason when the binary or redis-py is missing,
failed instead when ``CI`` is set); and the ``chat`` / ``consolidate`` commands run as a user runs them.

Each test runs its coroutines with ``asyncio.run``; time comes from a ``ManualClock``.
"""

from __future__ import annotations

import asyncio
import http.server
import io
import json
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from typing import Any

import pytest

import kumiho_memory as km

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "kumiho_memory.py")
PROJECT = km.DEFAULT_PROJECT
START = "2026-03-14T09:30:00Z"

# Secrets a user might paste into a chat, and the distinctive pieces of each that must never be stored.
SK_KEY = "sk-proj-AbC123dEf456GhI789jKl0mNo"
AWS_KEY = "AKIA2KX7QZ4HJ5WMN3PB"
PASSWORD = "Tr0ub4dor-horse-42"
SECRET_PIECES = [SK_KEY, "AbC123dEf456GhI789jKl0mNo", AWS_KEY, "IOSFODNN7EXAMPLE", PASSWORD, "Tr0ub4dor"]
LEAKY_MESSAGE = (f"Here is my OpenAI key {SK_KEY} and the AWS key id {AWS_KEY} for the billing export; "
                 f"the database login is password={PASSWORD} so please remember the export runs nightly.")

LLM_KEY = "sk-test-LoopbackKey0123456789abcdef"


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


def manual_clock(start: str = START) -> km.ManualClock:
    return km.ManualClock(start)


def user_hash(user_id: str) -> str:
    import hashlib
    return "user-" + hashlib.sha256(user_id.encode("utf-8")).hexdigest()[:10]


def no_secret_in(text: str) -> list[str]:
    """The secret pieces found in ``text`` (case-insensitive: the index lower-cases terms)."""
    lowered = text.lower()
    return [piece for piece in SECRET_PIECES if piece.lower() in lowered]


# -- a loopback OpenAI-compatible server ---------------------------------------------------------------------

class ChatServer:
    """``POST /v1/chat/completions`` on 127.0.0.1: answers a ``json_schema`` request with ``summary`` and any
    other request with ``questions`` (a JSON array), or answers everything 500 while ``failing``. Every
    request body is recorded."""

    def __init__(self, summary: dict[str, Any] | None = None, questions: list[str] | None = None) -> None:
        self.summary = summary or {"title": "t", "summary": "s"}
        self.questions = questions or []
        self.failing = False
        self.requests: list[dict[str, Any]] = []
        self._httpd: http.server.ThreadingHTTPServer | None = None
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> "ChatServer":
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                body = json.loads(raw.decode("utf-8"))
                owner.requests.append({"path": self.path, "auth": self.headers.get("Authorization"), "json": body})
                if self.path != "/v1/chat/completions":
                    return self._send(404, {"error": {"message": "not found", "type": "invalid_request_error"}})
                if owner.failing:
                    return self._send(500, {"error": {"message": "The server had an error", "type": "server_error"}})
                kind = (body.get("response_format") or {}).get("type")
                text = json.dumps(owner.summary if kind == "json_schema" else owner.questions)
                return self._send(200, {"id": "chatcmpl-1", "object": "chat.completion", "created": 1767225600,
                                        "model": body.get("model"),
                                        "choices": [{"index": 0, "finish_reason": "stop",
                                                     "message": {"role": "assistant", "content": text}}]})

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.port = self._httpd.server_address[1]
        threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()

    def transcripts(self) -> str:
        """Everything the server was sent, as one text."""
        return json.dumps([request["json"] for request in self.requests])


@pytest.fixture
def chat_server():
    server = ChatServer().start()
    yield server
    server.stop()


def adapter_for(server: ChatServer, waits: list[float] | None = None) -> km.OpenAICompatAdapter:
    sleeps = waits if waits is not None else []
    return km.OpenAICompatAdapter(server.base_url, LLM_KEY, "gpt-4o-mini", timeout=5.0, sleep=sleeps.append)


# -- a real redis-server ---------------------------------------------------------------------------------------

def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def unavailable(reason: str) -> None:
    """Skip locally with the reason; in CI a missing dependency is a failure, never a skip."""
    if in_ci():
        pytest.fail(f"{reason}; CI must install it (apt-get install redis-server; pip install 'redis>=5')")
    pytest.skip(reason)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory):
    """A throwaway redis-server on a free loopback port (no persistence), stopped at teardown."""
    try:
        import redis
    except ImportError:
        unavailable("redis-py is not installed (pip install 'redis>=5'); the Redis manager test is skipped")
    binary = shutil.which("redis-server")
    if binary is None:
        unavailable("redis-server is not installed (apt-get install redis-server); the Redis manager test is skipped")
    workdir = str(tmp_path_factory.mktemp("redis-manager"))
    port = free_port()
    with open(os.path.join(workdir, "redis.log"), "ab") as log:
        process = subprocess.Popen([binary, "--bind", "127.0.0.1", "--port", str(port), "--save", "",
                                    "--appendonly", "no", "--dir", workdir], stdout=log, stderr=subprocess.STDOUT)
    url = f"redis://127.0.0.1:{port}/0"
    deadline = time.monotonic() + 10
    ready = False
    while time.monotonic() < deadline and process.poll() is None:
        try:
            with redis.Redis.from_url(url, socket_connect_timeout=0.5) as probe:
                ready = bool(probe.ping())
            break
        except redis.exceptions.ConnectionError:
            time.sleep(0.02)
    if not ready:
        process.terminate()
        process.wait(10)
        with open(os.path.join(workdir, "redis.log"), encoding="utf-8", errors="replace") as log_file:
            pytest.fail(f"redis-server did not answer PING on port {port}:\n{log_file.read()[-2000:]}")
    yield url
    process.terminate()
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(10)


# -- a real store fault: another connection holds SQLite's write lock ----------------------------------------

class WriteLock:
    """Holds the store file's write lock from a raw sqlite3 connection, as another process would."""

    def __init__(self, path: str) -> None:
        self.conn = sqlite3.connect(path, isolation_level=None)
        self.held = False

    def acquire(self) -> None:
        self.conn.execute("BEGIN IMMEDIATE")
        self.held = True

    def release(self) -> None:
        if self.held:
            self.conn.execute("ROLLBACK")
            self.held = False

    def close(self) -> None:
        self.release()
        self.conn.close()


@pytest.fixture
def contended(tmp_path):
    """A file-backed Memory that waits only 50 ms for the write lock, a lock holder on the same file, and a
    working-memory buffer of its own (so only the long-term store is locked)."""
    clock = manual_clock()
    path = str(tmp_path / "store.db")
    memory = km.Memory(path, clock=clock, busy_timeout=0.05)
    lock = WriteLock(path)
    buffer = km.InProcessBuffer(clock=clock)
    yield memory, lock, buffer, clock
    lock.close()
    memory.close()


async def say(manager: km.UniversalMemoryManager, user_id: str, *messages: str, **options: Any) -> str:
    """Ingest ``messages`` for ``user_id`` and return their session id."""
    session_id = None
    for message in messages:
        result = await manager.ingest_message(user_id=user_id, message=message, **options)
        session_id = result["session_id"]
    return session_id


async def buffered(manager: km.UniversalMemoryManager, session_id: str) -> list[str]:
    window = await manager.buffer.get_messages(project=manager.project, session_id=session_id, limit=100)
    return [message["content"] for message in window["messages"]]


def stored_items(memory: km.Memory) -> list[dict[str, Any]]:
    return memory.items(include_deprecated=True)


# ==========================================================================================================
# 1. The reference results
# ==========================================================================================================

def test_ingest_message_returns_the_reference_result_and_reuses_the_active_session():
    clock = manual_clock()

    async def scenario():
        async with km.UniversalMemoryManager(memory=km.Memory(clock=clock)) as manager:
            first = await manager.ingest_message(user_id="ann", message="I adopted a beagle named Biscuit.")
            second = await manager.ingest_message(user_id="ann", message="Biscuit loves the beach.")
            other = await manager.ingest_message(user_id="bob", message="I prefer tea.")
            metadata = await manager.buffer.get_session_metadata(project=PROJECT, session_id=first["session_id"])
            window = await manager.buffer.get_messages(project=PROJECT, session_id=first["session_id"])
            return first, second, other, metadata, window

    first, second, other, metadata, window = run(scenario())
    expected_id = f"personal:{user_hash('ann')}:20260314:001"
    assert first == {"success": True, "session_id": expected_id, "session_id_source": "generated",
                     "message_count": 1, "attachments": []}
    assert second == {"success": True, "session_id": expected_id, "session_id_source": "active-pointer",
                      "message_count": 2, "attachments": []}
    assert other["session_id"] == f"personal:{user_hash('bob')}:20260314:001" and other["message_count"] == 1
    assert metadata == {"user_id": "ann", "context": "personal"}
    assert [(m["role"], m["content"], m["timestamp"]) for m in window["messages"]] == [
        ("user", "I adopted a beagle named Biscuit.", "2026-03-14T09:30:00.000000Z"),
        ("user", "Biscuit loves the beach.", "2026-03-14T09:30:00.000000Z")]
    assert window["messages"][0]["metadata"] == {"channel": "unknown"}


def test_ingest_honours_an_explicit_session_and_a_context():
    async def scenario():
        async with km.UniversalMemoryManager() as manager:
            explicit = await manager.ingest_message(user_id="ann", message="hello", session_id="req-42")
            work = await manager.ingest_message(user_id="ann", message="standup notes", context="work")
            return explicit, work

    explicit, work = run(scenario())
    assert (explicit["session_id"], explicit["session_id_source"]) == ("req-42", "request")
    assert work["session_id"].startswith("work:" + user_hash("ann") + ":")
    assert work["session_id_source"] == "generated"


def test_add_assistant_response_returns_count_and_created_bucket():
    async def scenario():
        async with km.UniversalMemoryManager() as manager:
            session_id = await say(manager, "ann", "What should I name my beagle?")
            reply = await manager.add_assistant_response(session_id=session_id, response="How about Biscuit?")
            fresh = await manager.add_assistant_response(session_id="brand-new", response="Hello!")
            window = await manager.buffer.get_messages(project=PROJECT, session_id=session_id)
            return reply, fresh, window

    reply, fresh, window = run(scenario())
    assert reply == {"success": True, "message_count": 2, "created_bucket": False}
    assert fresh == {"success": True, "message_count": 1, "created_bucket": True}
    assert [(m["role"], m["content"]) for m in window["messages"]] == [
        ("user", "What should I name my beagle?"), ("assistant", "How about Biscuit?")]


def test_handle_user_message_returns_working_memory_recall_and_the_consolidation_flag():
    clock = manual_clock()
    memory = km.Memory(clock=clock)
    stored = memory.remember("Biscuit the beagle loves swimming at Ocean Beach", space="personal/ann")
    memory.remember("The quarterly budget review is on Friday", space="work")

    async def scenario():
        async with km.UniversalMemoryManager(memory=memory, consolidation_threshold=3) as manager:
            first = await manager.handle_user_message(user_id="ann", message="Good morning!")
            second = await manager.handle_user_message(user_id="ann", message="I bought a new leash today.")
            third = await manager.handle_user_message(user_id="ann", message="Does Biscuit like swimming?",
                                                      working_memory_limit=2)
            return first, second, third

    first, second, third = run(scenario())
    assert [first["should_consolidate"], second["should_consolidate"], third["should_consolidate"]] == [
        False, False, True]
    assert third["session_id"] == first["session_id"] and third["session_id_source"] == "active-pointer"
    assert [m["content"] for m in third["working_memory"]] == ["I bought a new leash today.",
                                                              "Does Biscuit like swimming?"]
    recalled = third["long_term_memory"]
    assert recalled and recalled[0]["kref"] == stored
    assert recalled[0]["summary"] == "Biscuit the beagle loves swimming at Ocean Beach"
    assert recalled[0]["_item_kref"] == stored.split("?")[0]
    assert all("budget" not in hit["content"] for hit in recalled)
    memory.close()


def test_evidence_level_on_ingest_lands_on_the_consolidated_memory_and_consolidate_overrides_it():
    clock = manual_clock()
    memory = km.Memory(clock=clock)

    async def scenario():
        async with km.UniversalMemoryManager(memory=memory) as manager:
            first = await say(manager, "ann", "The office moved to Pier 39.", evidence_level="single_source")
            metadata = await manager.buffer.get_session_metadata(project=PROJECT, session_id=first)
            kept = await manager.consolidate_session(session_id=first)
            second = await say(manager, "ann", "The office parking is on level two.", evidence_level="single_source")
            overridden = await manager.consolidate_session(session_id=second, evidence_level="corroborated")
            return metadata, kept, overridden

    metadata, kept, overridden = run(scenario())
    assert metadata["evidence_level"] == "single_source"
    kept_memory = memory.get(kept["store_result"]["revision_kref"])
    assert kept_memory["metadata"]["evidence_level"] == "single_source"
    assert "evidence:single_source" in kept_memory["tags"]
    changed = memory.get(overridden["store_result"]["revision_kref"])
    assert changed["metadata"]["evidence_level"] == "corroborated"
    assert "evidence:corroborated" in changed["tags"] and "evidence:single_source" not in changed["tags"]
    memory.close()


def test_a_bad_evidence_level_is_refused_before_anything_changes():
    async def scenario():
        async with km.UniversalMemoryManager() as manager:
            with pytest.raises(km.InvalidArgumentError, match="evidence level"):
                await manager.ingest_message(user_id="ann", message="hello", evidence_level="rumour")
            assert await manager.buffer.get_active_session(context="personal", user_id="ann") is None
            session_id = await say(manager, "ann", "The office moved to Pier 39.")
            with pytest.raises(km.InvalidArgumentError, match="evidence level"):
                await manager.consolidate_session(session_id=session_id, evidence_level="gossip")
            return await buffered(manager, session_id), stored_items(manager.memory)

    messages, items = run(scenario())
    assert messages == ["The office moved to Pier 39."] and items == []


# ==========================================================================================================
# 2. Consolidation offline (ExtractiveSummarizer)
# ==========================================================================================================

CONVERSATION = [
    "Yesterday I adopted a beagle named Biscuit from the Oakland shelter.",
    "We decided to book puppy classes on Saturdays because the trainer is free then.",
    "Biscuit prefers salmon kibble and hates thunderstorms.",
]


def test_consolidate_session_offline_stores_one_memory_with_provenance_and_clears_the_session():
    # The messages are said at 23:40 on 14 March; consolidation runs 40 minutes later, on 15 March. "Yesterday"
    # is relative to when it was said (13 March), not to when it was consolidated (14 March).
    clock = manual_clock("2026-03-14T23:40:00Z")
    memory = km.Memory(clock=clock)

    async def scenario():
        async with km.UniversalMemoryManager(memory=memory, clock=clock) as manager:
            assert isinstance(manager.summarizer, km.ExtractiveSummarizer)
            session_id = await say(manager, "ann", *CONVERSATION[:2])
            await manager.add_assistant_response(session_id=session_id, response="Congratulations on Biscuit!")
            await say(manager, "ann", CONVERSATION[2])
            clock.advance(2400)
            result = await manager.consolidate_session(session_id=session_id)
            after = await manager.buffer.get_messages(project=PROJECT, session_id=session_id)
            pointer = await manager.buffer.get_active_session(context="personal", user_id="ann")
            sessions = await manager.buffer.list_sessions(PROJECT)
            recalled = await manager.recall_memories("beagle from the shelter")
            fresh = await manager.ingest_message(user_id="ann", message="Biscuit slept well.")
            return session_id, result, after, pointer, sessions, recalled, fresh

    session_id, result, after, pointer, sessions, recalled, fresh = run(scenario())
    assert result["success"] is True and result["buffer_was_empty"] is False
    store = result["store_result"]
    assert store["space_path"] == "personal/ann"
    assert store["revision_kref"].startswith("kref://CognitiveMemory/personal/ann/")
    assert store["item_kref"] == store["revision_kref"].split("?")[0]
    assert [item["item_kref"] for item in stored_items(memory)] == [store["item_kref"]]

    stored = memory.get(store["revision_kref"])
    assert stored["kind"] == "conversation"
    assert {"summarized", "published"} <= set(stored["tags"])
    meta = stored["metadata"]
    assert meta["session_id"] == session_id
    assert meta["message_ids"] == [f"{session_id}:{n}" for n in (1, 2, 3, 4)]
    assert meta["message_count"] == 4
    assert meta["event_date"] == "2026-03-13"
    assert "biscuit" in meta["topics"]
    assert {"Biscuit", "Oakland"} <= set(meta["entities"])
    assert "Biscuit" in stored["content"] and "Key events:" in stored["content"]
    assert "[2026-03-13]" in stored["content"]
    assert result["summary"]["events"][0]["event_date"] == "2026-03-13"

    transcript = memory.get(store["revision_kref"] + "&a=transcript")["artifact"]
    assert [artifact["name"] for artifact in memory.artifacts(store["revision_kref"])] == ["transcript"]
    text = transcript["metadata"]["text"]
    for line in CONVERSATION + ["Congratulations on Biscuit!"]:
        assert line in text
    assert text.index(CONVERSATION[0]) < text.index("Congratulations") < text.index(CONVERSATION[2])

    assert after == {"messages": [], "message_count": 0, "ttl_remaining": None}
    assert pointer is None and session_id not in sessions
    assert recalled and recalled[0]["kref"] == store["revision_kref"] and recalled[0]["type"] == "conversation"
    assert fresh["session_id_source"] == "generated" and fresh["session_id"] != session_id
    assert fresh["message_count"] == 1
    memory.close()


def test_consolidate_session_into_a_named_space():
    memory = km.Memory(clock=manual_clock())

    async def scenario():
        async with km.UniversalMemoryManager(memory=memory) as manager:
            session_id = await say(manager, "ann", "Ann's sister Mia lives in Lisbon.")
            return await manager.consolidate_session(session_id=session_id, space_path="people/ann")

    result = run(scenario())
    assert result["store_result"]["space_path"] == "people/ann"
    assert memory.get(result["store_result"]["revision_kref"])["space"] == "people/ann"
    assert [item["space"] for item in stored_items(memory)] == ["people/ann"]
    memory.close()


def test_consolidating_an_empty_session_reports_no_messages_and_stores_nothing():
    memory = km.Memory(clock=manual_clock())

    async def scenario():
        async with km.UniversalMemoryManager(memory=memory) as manager:
            return await manager.consolidate_session(session_id="never-used")

    result = run(scenario())
    assert result["success"] is False and result["error"] == "No messages to consolidate"
    assert stored_items(memory) == []
    memory.close()


def test_a_caller_summary_skips_the_summarizer(chat_server):
    memory = km.Memory(clock=manual_clock())

    async def scenario():
        manager = km.UniversalMemoryManager(memory=memory, llm_adapter=adapter_for(chat_server))
        assert isinstance(manager.summarizer, km.MemorySummarizer)
        first = await say(manager, "ann", "We picked Lisbon for the offsite.")
        as_text = await manager.consolidate_session(
            session_id=first, summary="The offsite will be in Lisbon. Questions go to mia@example.com.")
        second = await say(manager, "ann", "Budget is capped at 20k.")
        as_dict = await manager.consolidate_session(session_id=second, summary={
            "title": "Offsite budget for 415-555-0199", "summary": "The offsite budget has a cap.",
            "knowledge": {"facts": [{"claim": "The cap is 20k", "certainty": "stated"}]}})
        await manager.close()
        return as_text, as_dict

    as_text, as_dict = run(scenario())
    assert chat_server.requests == []
    text_memory = memory.get(as_text["store_result"]["revision_kref"])
    assert text_memory["content"].startswith("The offsite will be in Lisbon. Questions go to [email].")
    assert "mia@example.com" not in json.dumps(text_memory)          # PII in a caller summary is rewritten too
    dict_memory = memory.get(as_dict["store_result"]["revision_kref"])
    assert dict_memory["title"] == "Offsite budget for [phone]"
    assert dict_memory["content"] == "The offsite budget has a cap.\n\nKey facts:\n- The cap is 20k"
    memory.close()


def test_consolidating_a_long_session_loses_no_message():
    memory = km.Memory(clock=manual_clock())

    async def scenario():
        async with km.UniversalMemoryManager(memory=memory) as manager:
            await manager.ingest_message(user_id="ann", message="The very first note mentions Zanzibar.",
                                         session_id="long")
            for number in range(1000):
                await manager.buffer.add_message(project=PROJECT, session_id="long", role="user",
                                                 content=f"note number {number} about the garden")
            return await manager.consolidate_session(session_id="long")

    result = run(scenario())
    stored = memory.get(result["store_result"]["revision_kref"] + "&a=transcript")
    assert stored["metadata"]["message_count"] == 1001
    assert stored["metadata"]["message_ids"][0] == "long:1"
    assert "Zanzibar" in stored["artifact"]["metadata"]["text"]
    memory.close()


# ==========================================================================================================
# 3. Consolidation with an LLM
# ==========================================================================================================

LLM_SUMMARY = {
    "type": "conversation",
    "title": "Standup moved to Thursdays",
    "summary": "The team standup now happens on Thursdays.",
    "events": [{"event": "Standup moved to Thursdays", "when": "2026-03-14", "event_date": "2026-03-14",
                "participants": ["Priya"], "consequence": "Priya can attend"}],
    "knowledge": {"facts": [{"claim": "Priya travels on Mondays", "certainty": "high"}],
                  "decisions": [{"decision": "Hold the standup on Thursdays", "reason": "Priya travels on Mondays"}],
                  "actions": [], "open_questions": []},
    "classification": {"topics": ["standup", "scheduling"], "entities": ["Priya"]},
}
QUESTION = "Which weekday is our recurring team sync meeting held?"
QUERY = "which weekday recurring sync meeting held"
LLM_CONVERSATION = ["We moved the standup to Thursdays because Priya travels on Mondays.",
                    "Priya's email is priya@example.com if anyone needs her."]


def test_llm_summary_is_structured_and_its_questions_bridge_a_vocabulary_gap(chat_server):
    chat_server.summary = LLM_SUMMARY
    chat_server.questions = [QUESTION, "Why did the standup move?"]
    memory = km.Memory(clock=manual_clock())
    waits: list[float] = []

    async def scenario():
        manager = km.UniversalMemoryManager(memory=memory, llm_adapter=adapter_for(chat_server, waits))
        session_id = await say(manager, "ann", *LLM_CONVERSATION, context="work")
        result = await manager.consolidate_session(session_id=session_id)
        recalled = await manager.recall_memories(QUERY)
        await manager.close()
        return result, recalled

    memory.remember("The garden hose needs a new washer", space="home")       # a distractor
    result, recalled = run(scenario())
    assert result["summary"] == LLM_SUMMARY
    stored = memory.get(result["store_result"]["revision_kref"])
    content = stored["content"]
    assert stored["title"] == "Standup moved to Thursdays" and stored["space"] == "work/ann"
    assert "Key events:\n- [2026-03-14] Standup moved to Thursdays -> Priya can attend" in content
    assert "Key facts:\n- Priya travels on Mondays" in content
    assert "Decisions:\n- Hold the standup on Thursdays (reason: Priya travels on Mondays)" in content
    assert "Questions this answers:\n- " + QUESTION in content
    assert stored["metadata"]["implications"] == [QUESTION, "Why did the standup move?"]
    assert stored["metadata"]["event_date"] == "2026-03-14"
    assert stored["metadata"]["topics"] == ["standup", "scheduling"] and stored["metadata"]["entities"] == ["Priya"]

    # The query shares no word with the transcript, nor with the summary above its questions ...
    query_terms = set(km.tokenize(QUERY))
    before_questions = content.split("Questions this answers:")[0]
    assert not query_terms & set(km.tokenize(" ".join(LLM_CONVERSATION)))
    assert not query_terms & set(km.tokenize(before_questions))
    # ... so only the indexed questions can find it; the same memory without them is not found.
    assert recalled and recalled[0]["kref"] == stored["kref"]
    assert all("hose" not in hit["content"] for hit in recalled)
    with km.Memory() as control:
        control.remember(before_questions, space="work/ann")
        assert control.recall(QUERY) == []

    # Two requests (summary, questions), each with the redacted transcript: PII never left the process.
    assert len(chat_server.requests) == 2 and waits == []
    assert {request["auth"] for request in chat_server.requests} == {f"Bearer {LLM_KEY}"}
    sent = chat_server.transcripts()
    assert "priya@example.com" not in sent and "[email]" in sent
    assert "We moved the standup to Thursdays" in sent
    memory.close()


def test_text_sent_to_the_llm_never_holds_a_credential(chat_server):
    chat_server.summary = LLM_SUMMARY
    memory = km.Memory(clock=manual_clock())

    async def scenario():
        async with km.UniversalMemoryManager(memory=memory, llm_adapter=adapter_for(chat_server)) as manager:
            session_id = await say(manager, "ann", LEAKY_MESSAGE)
            return await manager.consolidate_session(session_id=session_id)

    result = run(scenario())
    assert result["success"] is True and chat_server.requests
    assert no_secret_in(chat_server.transcripts()) == []
    assert "billing export" in chat_server.transcripts()
    memory.close()


def test_a_failing_llm_falls_back_to_the_extractive_summary_and_loses_nothing(chat_server):
    chat_server.failing = True
    memory = km.Memory(clock=manual_clock())
    waits: list[float] = []

    async def scenario():
        async with km.UniversalMemoryManager(memory=memory, llm_adapter=adapter_for(chat_server, waits)) as manager:
            session_id = await say(manager, "ann", *LLM_CONVERSATION)
            result = await manager.consolidate_session(session_id=session_id)
            left = await buffered(manager, session_id)
            recalled = await manager.recall_memories("standup Thursdays")
            return session_id, result, left, recalled

    session_id, result, left, recalled = run(scenario())
    assert result["success"] is True
    summary = result["summary"]
    assert "extractive" in summary["error"] and LLM_KEY not in summary["error"]
    assert summary["summary"].startswith("We moved the standup to Thursdays because Priya travels on Mondays.")
    stored = memory.get(result["store_result"]["revision_kref"])
    assert "We moved the standup to Thursdays" in stored["content"]
    assert "Questions this answers" not in stored["content"] and stored["metadata"]["implications"] == []
    assert "priya@example.com" not in stored["content"] and "[email]" in stored["content"]
    assert stored["metadata"]["message_ids"] == [f"{session_id}:1", f"{session_id}:2"]
    transcript = memory.get(result["store_result"]["revision_kref"] + "&a=transcript")["artifact"]["metadata"]["text"]
    assert LLM_CONVERSATION[0] in transcript and "[EMAIL_001]" in transcript
    assert left == []
    assert recalled and recalled[0]["kref"] == stored["kref"]
    # The adapter retried each call (summary, questions) with backoff before giving up: 2 x (1 + 2 retries).
    assert len(chat_server.requests) == 6 and len(waits) == 4
    memory.close()


# ==========================================================================================================
# 4. Privacy
# ==========================================================================================================

def test_a_secret_typed_into_a_message_never_reaches_the_store_file(tmp_path):
    clock = manual_clock()
    path = str(tmp_path / "store.db")
    memory = km.Memory(path, clock=clock)

    async def scenario():
        manager = km.UniversalMemoryManager(memory=memory)       # working memory lives in the same file
        assert isinstance(manager.buffer, km.InProcessBuffer) and manager.buffer.path == path
        session_id = await say(manager, "ann", LEAKY_MESSAGE,
                               "Reach me at ann.lee@example.com or 415-555-0134 about the export.")
        in_buffer = await buffered(manager, session_id)
        await manager.add_assistant_response(session_id=session_id, response=f"Noted. I will not repeat {AWS_KEY}.")
        result = await manager.consolidate_session(session_id=session_id)
        recalled = await manager.recall_memories("billing export nightly")
        await manager.close()
        return in_buffer, result, recalled

    in_buffer, result, recalled = run(scenario())
    assert no_secret_in(" ".join(in_buffer)) == [] and "[credential:" in in_buffer[0]
    kref = result["store_result"]["revision_kref"]
    stored = memory.get(kref + "&a=transcript")
    assert recalled and recalled[0]["kref"] == kref
    export = io.StringIO()
    memory.export_jsonl(export)
    views = {"get": json.dumps(stored), "recall": json.dumps(recalled), "export": export.getvalue(),
             "summary": json.dumps(result["summary"]), "history": json.dumps(memory.history(kref))}
    for name, text in views.items():
        assert no_secret_in(text) == [], name
    assert "billing export" in stored["content"]
    # PII is legitimate content, rewritten to placeholders in what is stored.
    assert "ann.lee@example.com" not in stored["content"] and "415-555-0134" not in stored["content"]
    assert "[email]" in stored["content"] and "[phone]" in stored["content"]
    transcript = stored["artifact"]["metadata"]["text"]
    assert "[EMAIL_001]" in transcript and "[PHONE_001]" in transcript and "ann.lee@example.com" not in transcript

    memory.close()
    files = [name for name in os.listdir(tmp_path) if name.startswith("store.db")]
    assert "store.db" in files
    for name in files:
        with open(os.path.join(tmp_path, name), "rb") as handle:
            data = handle.read().lower()
        for piece in SECRET_PIECES:
            assert piece.lower().encode() not in data, (name, piece)
    with km.Memory(path) as reopened:     # the memory itself survived the close
        assert reopened.get(kref)["content"] == stored["content"]


@pytest.mark.parametrize("summary", [
    f"Deploy with the key {AWS_KEY} tonight.",
    {"title": "Deploy plan", "summary": f"Use password={PASSWORD} for the deploy."},
    {"title": f"Key {SK_KEY}", "summary": "Deploy tonight."},
], ids=["text", "dict-summary", "dict-title"])
def test_a_caller_summary_holding_a_credential_is_refused_and_nothing_is_stored(summary):
    memory = km.Memory(clock=manual_clock())

    async def scenario():
        async with km.UniversalMemoryManager(memory=memory) as manager:
            session_id = await say(manager, "ann", "We deploy the billing service tonight.")
            with pytest.raises(km.CredentialDetectedError) as caught:
                await manager.consolidate_session(session_id=session_id, summary=summary)
            left = await buffered(manager, session_id)
            pointer = await manager.buffer.get_active_session(context="personal", user_id="ann")
            return session_id, caught.value, left, pointer

    session_id, error, left, pointer = run(scenario())
    assert isinstance(error, ValueError) and error.kinds
    assert no_secret_in(str(error)) == []
    assert stored_items(memory) == []
    assert left == ["We deploy the billing service tonight."] and pointer == session_id
    memory.close()


def test_a_credential_anywhere_in_a_caller_summary_is_refused():
    memory = km.Memory(clock=manual_clock())

    async def scenario():
        async with km.UniversalMemoryManager(memory=memory) as manager:
            session_id = await say(manager, "ann", "We chose Postgres for the ledger.")
            with pytest.raises(km.CredentialDetectedError):
                await manager.consolidate_session(session_id=session_id, summary={
                    "title": "Ledger database", "summary": "Postgres was chosen for the ledger.",
                    "classification": {"topics": ["postgres", SK_KEY], "entities": [AWS_KEY]}})
            return await buffered(manager, session_id)

    try:
        assert run(scenario()) == ["We chose Postgres for the ledger."]
        assert stored_items(memory) == []
    finally:
        memory.close()


# ==========================================================================================================
# 5. Nothing lost when the store fails
# ==========================================================================================================

def test_is_transient_tells_store_trouble_from_bad_input():
    assert km._is_transient(km.StoreBusyError("locked"))
    assert km._is_transient(km.StoreError("disk full"))
    assert km._is_transient(km.ServiceError("timeout"))
    assert not km._is_transient(km.ServiceError("bad request", transient=False))
    assert not km._is_transient(km.InvalidArgumentError("bad space"))
    assert not km._is_transient(km.CorruptStoreError("not a database"))


def test_a_busy_store_queues_the_consolidation_and_a_flush_stores_it(contended, tmp_path):
    memory, lock, buffer, clock = contended
    queue = km.RetryQueue(tmp_path / "queue", clock=clock)

    async def scenario():
        manager = km.UniversalMemoryManager(memory=memory, redis_buffer=buffer, retry_queue=queue,
                                            store_max_retries=2)
        session_id = await say(manager, "ann", "The boiler service is booked for April 3.",
                               "The plumber is called Nadia.")
        lock.acquire()
        result = await manager.consolidate_session(session_id=session_id)
        left = await buffered(manager, session_id)
        with open(queue.pending_path, encoding="utf-8") as handle:
            queued_lines = handle.read().splitlines()
        still_locked = await manager.flush_retry_queue()
        lock.release()
        flushed = await manager.flush_retry_queue()
        again = await manager.flush_retry_queue()
        recalled = await manager.recall_memories("boiler plumber")
        await manager.close()
        return session_id, result, left, queued_lines, still_locked, flushed, again, recalled

    session_id, result, left, queued_lines, still_locked, flushed, again, recalled = run(scenario())
    store = result["store_result"]
    assert result["success"] is True and store["queued"] is True and store["queue_id"]
    assert "locked" in store["error"]
    assert left == []                                   # cleared: the queue file holds it durably
    (line,) = queued_lines
    entry = json.loads(line)
    assert entry["id"] == store["queue_id"]
    assert entry["payload"]["metadata"]["session_id"] == session_id
    assert "Nadia" in entry["payload"]["content"] and "Nadia" in entry["payload"]["transcript"]

    assert still_locked == {"succeeded": 0, "failed": 1, "dropped": 0}
    assert flushed == {"succeeded": 1, "failed": 0, "dropped": 0}
    assert again == {"succeeded": 0, "failed": 0, "dropped": 0}
    assert queue.count == 0 and queue.parked() == []
    assert recalled and recalled[0]["metadata"]["session_id"] == session_id
    assert [a["name"] for a in memory.artifacts(recalled[0]["kref"])] == ["transcript"]
    assert len(stored_items(memory)) == 1


def test_a_transient_failure_left_in_the_queue_counts_its_attempts(contended, tmp_path):
    memory, lock, buffer, clock = contended
    queue = km.RetryQueue(tmp_path / "queue", clock=clock)

    async def scenario():
        manager = km.UniversalMemoryManager(memory=memory, redis_buffer=buffer, retry_queue=queue,
                                            store_max_retries=1)
        session_id = await say(manager, "ann", "The boiler service is booked for April 3.")
        lock.acquire()
        await manager.consolidate_session(session_id=session_id)
        counts = await manager.flush_retry_queue()
        lock.release()
        await manager.close()
        return counts

    assert run(scenario()) == {"succeeded": 0, "failed": 1, "dropped": 0}
    (entry,) = queue.drain()
    assert entry["attempts"] == 3 and "StoreBusyError" in entry["last_error"]
    assert stored_items(memory) == []


def test_without_a_retry_queue_the_error_is_raised_and_the_buffer_kept(contended):
    memory, lock, buffer, clock = contended

    async def scenario():
        manager = km.UniversalMemoryManager(memory=memory, redis_buffer=buffer, store_max_retries=2)
        session_id = await say(manager, "ann", "The boiler service is booked for April 3.",
                               "The plumber is called Nadia.")
        lock.acquire()
        with pytest.raises(km.StoreError) as caught:
            await manager.consolidate_session(session_id=session_id)
        kept = await buffered(manager, session_id)
        pointer = await manager.buffer.get_active_session(context="personal", user_id="ann")
        lock.release()
        retried = await manager.consolidate_session(session_id=session_id)
        await manager.close()
        return session_id, caught.value, kept, pointer, retried

    session_id, error, kept, pointer, retried = run(scenario())
    assert isinstance(error, km.StoreBusyError)
    assert kept == ["The boiler service is booked for April 3.", "The plumber is called Nadia."]
    assert pointer == session_id
    assert retried["success"] is True and "queued" not in retried["store_result"]
    assert memory.get(retried["store_result"]["revision_kref"])["metadata"]["message_count"] == 2


def test_a_permanently_failing_payload_is_parked_with_its_reason(contended, tmp_path):
    memory, lock, buffer, clock = contended
    queue = km.RetryQueue(tmp_path / "queue", clock=clock)

    async def scenario():
        manager = km.UniversalMemoryManager(memory=memory, redis_buffer=buffer, retry_queue=queue,
                                            store_max_retries=1)
        await say(manager, "ann", "The boiler service is booked for April 3.")
        lock.acquire()
        queued = await manager.consolidate_session(session_id=await _only_session(manager))
        lock.release()
        # Damage the queued payload so that no retry can ever store it.
        (entry,) = queue.drain()
        entry["payload"]["space"] = "no such space!"
        with open(queue.pending_path, "w", encoding="utf-8") as handle:
            handle.write(json.dumps(entry) + "\n")
        first = await manager.flush_retry_queue()
        second = await manager.flush_retry_queue()
        await manager.close()
        return queued, first, second

    queued, first, second = run(scenario())
    assert queued["store_result"]["queued"] is True
    assert first == {"succeeded": 0, "failed": 0, "dropped": 1}
    assert second == {"succeeded": 0, "failed": 0, "dropped": 0}
    assert queue.count == 0
    (parked,) = queue.parked()
    assert parked["id"] == queued["store_result"]["queue_id"]
    assert parked["reason"].startswith("InvalidArgumentError") and "space" in parked["reason"]
    assert parked["payload"]["metadata"]["message_count"] == 1       # kept for a human to repair
    assert stored_items(memory) == []


async def _only_session(manager: km.UniversalMemoryManager) -> str:
    (session_id,) = await manager.buffer.list_sessions(PROJECT)
    return session_id


def test_a_failure_after_the_memory_is_written_leaves_one_memory_with_its_transcript(tmp_path):
    clock = manual_clock()
    path = str(tmp_path / "store.db")
    memory = km.Memory(path, clock=clock)
    queue = km.RetryQueue(tmp_path / "queue", clock=clock)
    raw = sqlite3.connect(path, isolation_level=None)
    # A real storage error on the second write (the transcript artifact), as a full disk or I/O error would give.
    raw.execute("CREATE TRIGGER fail_artifact BEFORE INSERT ON artifacts "
                "BEGIN SELECT RAISE(ABORT, 'disk I/O error'); END")

    async def scenario():
        manager = km.UniversalMemoryManager(memory=memory, redis_buffer=km.InProcessBuffer(clock=clock),
                                            retry_queue=queue, store_max_retries=2)
        session_id = await say(manager, "ann", "The boiler service is booked for April 3.")
        queued = await manager.consolidate_session(session_id=session_id)
        raw.execute("DROP TRIGGER fail_artifact")
        flushed = await manager.flush_retry_queue()
        await manager.close()
        return queued, flushed

    try:
        queued, flushed = run(scenario())
        assert queued["store_result"]["queued"] is True and flushed["succeeded"] == 1
        items = stored_items(memory)
        assert len(items) == 1
        assert [a["name"] for a in memory.artifacts(items[0]["item_kref"])] == ["transcript"]
    finally:
        raw.close()
        memory.close()


# ==========================================================================================================
# 6. Tool executions
# ==========================================================================================================

def test_a_successful_tool_execution_is_an_action_memory():
    memory = km.Memory(clock=manual_clock())

    async def scenario():
        async with km.UniversalMemoryManager(memory=memory) as manager:
            return await manager.store_tool_execution(
                task="Run the nightly backup", status="done", exit_code=0, duration_ms=1234,
                stdout="copied 42 files to the archive\n", tools=["rsync"], topics=["backup"],
                space_hint="Ops Team")

    result = run(scenario())
    assert result["success"] is True and result["memory_type"] == "action"
    store = result["store_result"]
    assert store["space_path"] == "executions/ops-team"
    stored = memory.get(store["revision_kref"])
    assert stored["title"] == "Successfully executed: Run the nightly backup"
    assert stored["kind"] == "action" and stored["space"] == "executions/ops-team"
    assert {"action", "done", "published"} <= set(stored["tags"])
    meta = stored["metadata"]
    assert (meta["memory_type"], meta["exit_code"], meta["duration_ms"], meta["status"]) == ("action", 0, 1234, "done")
    assert meta["tools"] == ["rsync"] and meta["topics"] == ["backup"]
    assert "Task: Run the nightly backup" in stored["content"]
    assert "Duration: 1234 ms" in stored["content"]
    assert "Output:\ncopied 42 files to the archive" in stored["content"]
    assert "Errors:" not in stored["content"]
    memory.close()


@pytest.mark.parametrize("status, exit_code", [("failed", None), ("error", 2), ("done", 1), ("blocked", None)])
def test_a_failed_tool_execution_is_an_error_memory(status, exit_code):
    memory = km.Memory(clock=manual_clock())

    async def scenario():
        async with km.UniversalMemoryManager(memory=memory) as manager:
            return await manager.store_tool_execution(task="Migrate the orders table", status=status,
                                                      exit_code=exit_code, stderr="relation orders is locked")

    result = run(scenario())
    assert result["memory_type"] == "error"
    stored = memory.get(result["store_result"]["revision_kref"])
    assert stored["title"] == "Failed: Migrate the orders table"
    assert stored["kind"] == "error" and stored["metadata"]["memory_type"] == "error"
    assert "error" in stored["tags"] and "Errors:\nrelation orders is locked" in stored["content"]
    memory.close()


def test_tool_output_is_stored_with_credentials_redacted():
    memory = km.Memory(clock=manual_clock())

    async def scenario():
        async with km.UniversalMemoryManager(memory=memory) as manager:
            return await manager.store_tool_execution(
                task="Configure the billing exporter", exit_code=0,
                stdout=f"export OPENAI_API_KEY={SK_KEY}\nexporter configured for ann@example.com",
                stderr=f"warning: AWS key {AWS_KEY} is old; password={PASSWORD} rotated")

    result = run(scenario())
    stored = memory.get(result["store_result"]["revision_kref"])
    assert no_secret_in(json.dumps(stored)) == []
    assert "[credential:" in stored["content"]
    assert "exporter configured for [email]" in stored["content"]
    assert "warning: AWS key" in stored["content"] and "rotated" in stored["content"]
    memory.close()


def test_a_credential_in_the_task_is_not_stored():
    memory = km.Memory(clock=manual_clock())

    async def scenario():
        async with km.UniversalMemoryManager(memory=memory) as manager:
            return await manager.store_tool_execution(task=f"curl the API with api_key={SK_KEY}", exit_code=0)

    try:
        result = run(scenario())
        assert no_secret_in(json.dumps(memory.get(result["store_result"]["revision_kref"]))) == []
    finally:
        memory.close()


def test_derived_from_links_the_execution_to_its_sources():
    memory = km.Memory(clock=manual_clock())
    plan = memory.remember("Plan: migrate the orders table on Sunday", space="plans")
    ticket = memory.remember("Ticket 881: orders table is slow", space="tickets")
    unrelated = memory.remember("The office plants need water", space="notes")

    async def scenario():
        async with km.UniversalMemoryManager(memory=memory) as manager:
            return await manager.store_tool_execution(task="Migrate the orders table", exit_code=0,
                                                      derived_from=[plan, ticket])

    result = run(scenario())
    kref = result["store_result"]["revision_kref"]
    outgoing = memory.edges(kref, direction="outgoing", edge_type="DERIVED_FROM")
    assert sorted(edge["target_kref"] for edge in outgoing) == sorted([plan, ticket])
    assert all(edge["source_kref"] == kref for edge in outgoing)
    assert memory.edges(unrelated, direction="incoming") == []
    assert memory.get(kref)["metadata"]["derived_from"] == [plan, ticket]
    assert {hit["kref"] for hit in memory.analyze_impact(plan)} == {kref}
    memory.close()


# ==========================================================================================================
# 7. Working memory on a real Redis
# ==========================================================================================================

def test_manager_on_redis_ingests_consolidates_and_leaves_no_session_keys(redis_url):
    import redis
    admin = redis.Redis.from_url(redis_url, decode_responses=True)
    admin.flushall()
    clock = manual_clock()
    memory = km.Memory(clock=clock)

    async def scenario():
        manager = km.UniversalMemoryManager(memory=memory, redis_url=redis_url)
        assert isinstance(manager.buffer, km.RedisMemoryBuffer)
        session_id = await say(manager, "ann", "I adopted a beagle named Biscuit.", f"My key is {SK_KEY}.")
        await manager.add_assistant_response(session_id=session_id, response="Congratulations on Biscuit!")
        before = sorted(admin.scan_iter(match="*"))
        raw_messages = admin.lrange(f"kumiho:memory:{PROJECT}:sessions:{session_id}:messages", 0, -1)
        result = await manager.consolidate_session(session_id=session_id)
        after = sorted(admin.scan_iter(match="*"))
        recalled = await manager.recall_memories("beagle Biscuit")
        await manager.close()
        return session_id, before, raw_messages, result, after, recalled

    session_id, before, raw_messages, result, after, recalled = run(scenario())
    pointer_key = "kumiho:memory:active_session:personal:ann"
    session_keys = {f"kumiho:memory:{PROJECT}:sessions:{session_id}:messages",
                    f"kumiho:memory:{PROJECT}:sessions:{session_id}:metadata"}
    assert session_keys | {pointer_key} <= set(before)
    assert [json.loads(record)["role"] for record in raw_messages] == ["user", "user", "assistant"]
    assert SK_KEY not in json.dumps(raw_messages) and "[credential:" in raw_messages[1]
    assert result["success"] is True
    stored = memory.get(result["store_result"]["revision_kref"])
    assert stored["metadata"]["session_id"] == session_id and stored["metadata"]["message_count"] == 3
    assert [key for key in after if session_id in key or key == pointer_key] == []
    assert all(key.startswith("kumiho:memory:session_seq:") for key in after)
    assert recalled and recalled[0]["kref"] == stored["kref"]
    admin.close()
    memory.close()


# ==========================================================================================================
# 8. The command line
# ==========================================================================================================

@pytest.fixture
def cli(tmp_path):
    """Run ``python kumiho_memory.py ...`` against a store in tmp_path; returns (exit code, stdout, stderr)."""
    env = {key: value for key, value in os.environ.items()
           if not key.startswith("KUMIHO_") and key != "REDIS_URL"}
    env["KUMIHO_MEMORY_PATH"] = str(tmp_path / "cli.db")
    env["HOME"] = str(tmp_path / "home")

    def invoke(*args: str, stdin: str | None = None) -> tuple[int, str, str]:
        done = subprocess.run([sys.executable, SCRIPT, *args], input=stdin, capture_output=True, text=True,
                              env=env, timeout=60)
        return done.returncode, done.stdout, done.stderr
    invoke.path = env["KUMIHO_MEMORY_PATH"]
    return invoke


def test_cli_chat_add_get_consolidate_and_recall(cli):
    code, out, err = cli("chat", "add", "s1", "Ann's sister Mia moved to Lisbon last spring.")
    assert (code, err) == (0, "") and out.strip() == "s1:1 (1 in session)"
    code, out, err = cli("chat", "add", "s1", "Mia teaches violin at the conservatory.", "--json")
    assert code == 0, err
    assert json.loads(out) == {"success": True, "message_id": "s1:2", "message_count": 2, "created_bucket": False}
    code, out, err = cli("chat", "add", "s1", "Lovely, noted.", "--role", "assistant")
    assert code == 0, err

    code, out, err = cli("chat", "get", "s1", "--json")
    assert code == 0, err
    window = json.loads(out)
    assert window["session_id"] == "s1" and window["message_count"] == 3
    assert [(m["role"], m["content"]) for m in window["messages"]] == [
        ("user", "Ann's sister Mia moved to Lisbon last spring."),
        ("user", "Mia teaches violin at the conservatory."), ("assistant", "Lovely, noted.")]

    code, out, err = cli("consolidate", "s1", "--space", "people/ann", "--json")
    assert code == 0, err
    result = json.loads(out)
    kref = result["store_result"]["revision_kref"]
    assert result["success"] is True and kref.startswith("kref://CognitiveMemory/people/ann/")
    assert result["store_result"]["space_path"] == "people/ann"

    code, out, err = cli("recall", "violin conservatory", "--json")
    assert code == 0, err
    hits = json.loads(out)
    assert hits and hits[0]["kref"] == kref
    assert hits[0]["metadata"]["session_id"] == "s1" and hits[0]["metadata"]["message_count"] == 3
    code, out, _ = cli("get", kref + "&a=transcript", "--json")
    assert code == 0 and "Mia teaches violin" in json.loads(out)["artifact"]["metadata"]["text"]

    code, out, _ = cli("chat", "get", "s1", "--json")
    assert code == 0 and json.loads(out)["messages"] == []


def test_cli_chat_clear_and_consolidating_an_empty_session(cli):
    assert cli("chat", "add", "s2", "a note to drop")[0] == 0
    assert cli("chat", "add", "s2", "another note to drop")[0] == 0
    code, out, err = cli("chat", "clear", "s2", "--json")
    assert code == 0, err
    assert json.loads(out) == {"success": True, "cleared_count": 2}
    code, out, _ = cli("chat", "get", "s2")
    assert code == 0 and out.strip() == "(no messages)"

    code, out, err = cli("consolidate", "s2")
    assert code == 1 and out == ""
    assert err.splitlines() == ["kumiho-memory: error: No messages to consolidate"]
    code, out, _ = cli("stats", "--json")
    assert code == 0 and json.loads(out)["items"] == 0


def test_cli_chat_add_never_stores_a_credential(cli):
    code, _, err = cli("chat", "add", "s3", LEAKY_MESSAGE)
    assert code == 0, err
    code, out, _ = cli("chat", "get", "s3", "--json")
    assert code == 0 and "[credential:" in out and no_secret_in(out) == []
    for name in os.listdir(os.path.dirname(cli.path)):
        if name.startswith("cli.db"):
            with open(os.path.join(os.path.dirname(cli.path), name), "rb") as handle:
                data = handle.read().lower()
            assert all(piece.lower().encode() not in data for piece in SECRET_PIECES), name


def test_a_message_arriving_during_consolidation_is_kept_for_the_next_one():
    """Regression: consolidation clears only what it consumed; a message acknowledged meanwhile waits and
    stays in working memory."""
    class SlowSummarizer(km.ExtractiveSummarizer):
        async def summarize_conversation(self, messages, *, context=None, strict=False):
            await asyncio.sleep(0.2)
            return self.summarize(messages)

    async def run():
        memory = km.Memory()
        manager = km.UniversalMemoryManager(memory=memory, summarizer=SlowSummarizer())
        first = await manager.ingest_message(user_id="ann", message="I moved to Lisbon last month.")
        sid = first["session_id"]
        consolidation = asyncio.ensure_future(manager.consolidate_session(session_id=sid))
        await asyncio.sleep(0.05)
        late = await manager.ingest_message(user_id="ann", message="My sister is called Berta.", session_id=sid)
        done = await consolidation
        left = await manager.buffer.get_messages(project=manager.project, session_id=sid)
        await manager.close()
        memory.close()
        return late, done, left

    late, done, left = asyncio.run(run())
    assert late["success"] and done["success"]
    assert "Berta" not in memory_text(done) \
        and [m["content"] for m in left["messages"]] == ["My sister is called Berta."]


def memory_text(result):
    return str(result["summary"])


def test_credentials_in_channel_source_and_context_never_reach_the_store(tmp_path):
    """Regression: every field of an ingested message is screened, not only its text."""
    path = str(tmp_path / "screen.db")
    secret = "sk-proj-AbCdEf0123456789GhIjKlMnOpQrStUv"

    async def run():
        memory = km.Memory(path)
        manager = km.UniversalMemoryManager(memory=memory)
        sid = (await manager.ingest_message(user_id="ann", message="hello, I like tea", channel=secret,
                                            source="postgres://admin:Hunter2Secret@db.example.com/prod"))["session_id"]
        await manager.add_assistant_response(session_id=sid, response="tea noted", channel=secret)
        await manager.consolidate_session(session_id=sid)
        with pytest.raises(km.CredentialDetectedError):
            await manager.ingest_message(user_id=f"ann {secret}", message="hi")
        await manager.close()
        memory.close()
    asyncio.run(run())
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            data = open(path + suffix, "rb").read()
            assert b"AbCdEf0123456789" not in data and b"Hunter2Secret" not in data


def test_two_consolidations_with_different_summaries_are_both_kept():
    clock = manual_clock()
    memory = km.Memory(clock=clock)
    manager = km.UniversalMemoryManager(memory=memory, clock=clock)
    first = run(manager.consolidate_session(session_id="s1", space_path="decisions",
                                            summary={"summary": "We chose Postgres for billing."}))
    second = run(manager.consolidate_session(session_id="s1", space_path="decisions",
                                             summary={"summary": "We chose Postgres, and Redis for caching."}))
    assert not second["store_result"].get("already_stored")
    assert first["store_result"]["revision_kref"] != second["store_result"]["revision_kref"]
    again = run(manager.consolidate_session(session_id="s1", space_path="decisions",
                                            summary={"summary": "We chose Postgres, and Redis for caching."}))
    assert again["store_result"]["already_stored"] is True            # the same consolidation: stored once
    run(manager.close())
    memory.close()
