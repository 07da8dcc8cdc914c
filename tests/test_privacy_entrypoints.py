"""Every way into the store passes the same screen: no credential reaches the store's bytes.

Each test writes realistic secrets (formats as their providers document them) through one way in and then
reads the bytes of the store's files (database, WAL, shared memory), the retry queue's file or Redis itself.
"""

from __future__ import annotations

import asyncio
import glob
import json
import os
import random
import subprocess
import sys

import pytest

import kumiho_memory as km

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "probes"))
from privacy_corpus import github_token  # noqa: E402  (a checksum-valid token, from the documented format)

GITHUB = github_token("ghp_", random.Random(31))
STRIPE = "sk_live_" + "".join(random.Random(32).choice("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
                              for _ in range(24))
PASSWORD = "Tr0ub4dor&3-horse"
SECRETS = (GITHUB, STRIPE, PASSWORD)


def store_bytes(path: str) -> bytes:
    """Everything the store keeps on disk: the database and its WAL and shared-memory files."""
    data = b""
    for name in glob.glob(path + "*"):
        with open(name, "rb") as stream:
            data += stream.read()
    return data


def assert_no_secret(data: bytes | str) -> None:
    raw = data.encode("utf-8") if isinstance(data, str) else data
    for secret in SECRETS:
        assert secret.encode("utf-8") not in raw, f"{secret[:6]}... reached the bytes"


def test_remember_screens_content_title_source_metadata_and_artifacts(tmp_path):
    path = str(tmp_path / "m.db")
    with km.Memory(path) as memory:
        kref = memory.remember(f"deploy with {GITHUB} today", title=f"key {STRIPE}", space="ops",
                               source=f"chat token={STRIPE}",
                               metadata={"notes": [f"password: {PASSWORD}"], "db": {"password": PASSWORD},
                                         f"x {GITHUB}": 1},
                               artifacts=[{"name": "log", "location": f"https://u:{PASSWORD}@logs.example.com/x"}])
        stored = memory.get(kref)
        assert "[credential:" in stored["content"] and "[credential:" in stored["title"]
        assert stored["metadata"]["db"]["password"].startswith("[credential:")
        other = memory.remember("the staging checklist", space="ops")
        memory.link(kref, other, "RELATED_TO", {"why": f"see {GITHUB}"})
        memory.update_metadata(kref, {"later": f"api_key = '{STRIPE}'"})
        memory.add_artifact(kref, "note", f"file:///tmp/x?token={GITHUB}")
    assert_no_secret(store_bytes(path))


def test_refuse_policy_raises_and_stores_nothing(tmp_path):
    path = str(tmp_path / "m.db")
    with km.Memory(path, credentials="refuse") as memory:
        for call in (lambda: memory.remember(f"use {STRIPE}"),
                     lambda: memory.remember("fine", metadata={"nested": {"secret_key": STRIPE}}),
                     lambda: memory.remember("fine", source=GITHUB)):
            with pytest.raises(km.CredentialDetectedError) as caught:
                call()
            assert STRIPE[8:20] not in str(caught.value) and GITHUB[4:16] not in str(caught.value)
        assert memory.items() == []
    assert_no_secret(store_bytes(path))


def test_names_and_addresses_holding_a_secret_are_refused_under_either_policy(tmp_path):
    with km.Memory(str(tmp_path / "m.db")) as memory:
        token = "sk_live_" + "a1b2c3d4e5f6g7h8i9j0k1l2"
        with pytest.raises(km.CredentialDetectedError):
            memory.remember("x", tags=[token])
        with pytest.raises(km.CredentialDetectedError):
            memory.remember("x", key=f"config {GITHUB}")
        assert memory.items() == []


def test_working_memory_messages_and_session_metadata_are_screened_in_the_store_file(tmp_path):
    path = str(tmp_path / "wm.db")

    async def scenario():
        buffer = km.InProcessBuffer(path)
        await buffer.add_message(project="p", session_id="s", role="user", content=f"my key {GITHUB}",
                                 metadata={"password": PASSWORD})
        await buffer.set_session_metadata("p", "s", {"note": f"token: {STRIPE}"})
        await buffer.close()
    asyncio.run(scenario())
    assert_no_secret(store_bytes(path))


def test_consolidation_leaves_no_secret_in_the_store(tmp_path):
    path = str(tmp_path / "m.db")

    async def scenario():
        with km.Memory(path) as memory:
            manager = km.UniversalMemoryManager(memory=memory)
            ingested = await manager.ingest_message(user_id="ann", message=f"the deploy key is {GITHUB}")
            await manager.add_assistant_response(session_id=ingested["session_id"],
                                                 response=f"use password={PASSWORD} for staging")
            result = await manager.consolidate_session(session_id=ingested["session_id"])
            await manager.close()
            return result
    assert asyncio.run(scenario())["success"] is True
    assert_no_secret(store_bytes(path))


def test_the_retry_queue_file_holds_no_secret(tmp_path):
    queue = km.RetryQueue(str(tmp_path / "queue"))
    queue.enqueue({"content": f"token {GITHUB}", "metadata": {"password": PASSWORD}})
    with open(queue.pending_path, encoding="utf-8") as stream:
        assert_no_secret(stream.read())


def test_import_refuses_a_file_holding_a_credential(tmp_path):
    with km.Memory(str(tmp_path / "m.db")) as memory:
        line = json.dumps({"record": "revision", "content": f"key {STRIPE}"})
        with pytest.raises(km.CredentialDetectedError):
            memory.import_jsonl([line])
        assert memory.items() == []


def test_the_cli_stores_no_secret(tmp_path):
    path = str(tmp_path / "cli.db")
    script = os.path.join(ROOT, "kumiho_memory.py")
    done = subprocess.run([sys.executable, script, "--db", path, "remember", f"ship it with {STRIPE}",
                           "--metadata", json.dumps({"password": PASSWORD})], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert_no_secret(store_bytes(path))
    assert_no_secret(done.stdout + done.stderr)


def test_the_redis_buffer_stores_no_secret(tmp_path):
    from test_working_memory import RedisServer, redis_py
    redis_py()
    server = RedisServer(tmp_path).start()
    try:
        async def scenario():
            buffer = km.RedisMemoryBuffer(server.url())
            await buffer.add_message(project="p", session_id="s", role="user", content=f"key {STRIPE}",
                                     metadata={"api_key": GITHUB})
            await buffer.set_session_metadata("p", "s", {"password": PASSWORD})
            await buffer.close()
        asyncio.run(scenario())
        import redis
        client = redis.Redis.from_url(server.url())
        dumped = b"".join(client.dump(key) or b"" for key in client.keys("*"))
        values = b"".join((client.lrange(key, 0, -1) and b"".join(client.lrange(key, 0, -1))) or b""
                          for key in client.keys("*") if client.type(key) == b"list")
        assert dumped and values
        assert_no_secret(dumped + values)
    finally:
        server.stop()


def test_mcp_tools_store_no_secret(tmp_path):
    if not os.environ.get("CI"):
        pytest.importorskip("mcp", reason="the 'mcp' package is not installed (pip install mcp); CI runs this")
    from test_mcp import _run, _session, _structured
    home = tmp_path / "home"
    home.mkdir()
    path = str(tmp_path / "mcp.db")

    async def scenario():
        async with _session(path, str(home)) as session:
            _structured(await session.call_tool("kumiho_memory_reflect", {
                "response": "noted", "captures": [{"type": "fact", "title": "Deploy key",
                                                   "content": f"The deploy key is {GITHUB}."}]}))
            _structured(await session.call_tool("kumiho_memory_store_execution", {
                "task": "deploy", "topics": [f"token {STRIPE}"], "tools": [f"password={PASSWORD}"]}))
            _structured(await session.call_tool("kumiho_chat_add", {"message": f"here {STRIPE}", "session_id": "s1"}))
    _run(scenario())
    assert_no_secret(store_bytes(path))
