"""Working memory (issue 4, items 1 and 8): one contract suite over every buffer, then each buffer's own cases.

The contract suite runs on the in-process buffer in memory, the in-process buffer in a store file (opened after
``Memory(path)``, as an application does), and ``RedisMemoryBuffer`` against a real ``redis-server`` that a
fixture starts on a free loopback port, through an asyncio client built from a URL and through a caller's sync
client. Without the ``redis-server`` binary (or redis-py) the Redis cases skip with the reason; with ``CI`` set
they fail instead. Expiry is tested with a ``ManualClock`` in process and with 1-second TTLs on Redis.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import shutil
import socket
import sqlite3
import ssl
import subprocess
import sys
import textwrap
import threading
import time

import pytest

import kumiho_memory as km

PROJECT = "CognitiveMemory"
START = "2026-03-14T09:30:00Z"
DAY = "20260314"
BUFFERS = ["in-process-memory", "in-process-file", "redis", "redis-sync-client"]


class LoopRunner:
    """One event loop per test, so an asyncio Redis client's connections are closed on the loop that made them."""

    loop: asyncio.AbstractEventLoop | None = None

    def __call__(self, coroutine):
        return self.loop.run_until_complete(coroutine)


run = LoopRunner()


@pytest.fixture(autouse=True)
def test_loop():
    run.loop = asyncio.new_event_loop()
    yield run.loop
    run.loop.run_until_complete(run.loop.shutdown_default_executor())
    run.loop.close()
    run.loop = None


def read_bytes(path: str) -> bytes:
    with open(path, "rb") as handle:
        return handle.read()


def user_hash(user_id: str) -> str:
    return "user-" + hashlib.sha256(user_id.encode("utf-8")).hexdigest()[:10]


# -- real redis-server processes ----------------------------------------------------------------------------

def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def unavailable(reason: str) -> None:
    """Skip locally with the reason; in CI a missing dependency is a failure, never a skip."""
    if in_ci():
        pytest.fail(f"{reason}; CI must install it (apt-get install redis-server openssl; pip install 'redis>=5')")
    pytest.skip(reason)


def redis_py():
    try:
        import redis
    except ImportError:
        unavailable("redis-py is not installed (pip install 'redis>=5'); Redis working-memory tests skipped")
    return redis


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class RedisServer:
    """A throwaway ``redis-server`` on a loopback port: no persistence unless asked, stopped at teardown."""

    def __init__(self, workdir, *options: str, tls: tuple[str, str] | None = None) -> None:
        self.binary = shutil.which("redis-server")
        if self.binary is None:
            unavailable("redis-server is not installed (apt-get install redis-server); Redis tests skipped")
        self.workdir = str(workdir)
        self.options = list(options)
        self.tls = tls
        self.port = 0
        self.process: subprocess.Popen | None = None
        os.makedirs(self.workdir, exist_ok=True)

    def url(self, password: str | None = None, scheme: str = "redis") -> str:
        auth = f":{password}@" if password is not None else ""
        return f"{scheme}://{auth}127.0.0.1:{self.port}/0"

    def _arguments(self) -> list[str]:
        base = [self.binary, "--bind", "127.0.0.1", "--save", "", "--dir", self.workdir]
        if self.tls:
            cert, key = self.tls
            base += ["--port", "0", "--tls-port", str(self.port), "--tls-cert-file", cert, "--tls-key-file", key,
                     "--tls-ca-cert-file", cert, "--tls-auth-clients", "no"]
        else:
            base += ["--port", str(self.port)]
        if "--appendonly" not in self.options:
            base += ["--appendonly", "no"]
        return base + self.options

    def ping(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as raw:
                if self.tls:
                    context = ssl.create_default_context(cafile=self.tls[0])
                    with context.wrap_socket(raw, server_hostname="127.0.0.1") as channel:
                        return self._ping_on(channel)
                return self._ping_on(raw)
        except OSError:
            return False

    @staticmethod
    def _ping_on(channel: socket.socket) -> bool:
        channel.sendall(b"PING\r\n")
        return channel.recv(64).startswith((b"+PONG", b"-NOAUTH"))

    def start(self) -> "RedisServer":
        keep_port = bool(self.port)
        for _attempt in range(3):
            if not keep_port:
                self.port = free_port()
            log = open(os.path.join(self.workdir, "redis.log"), "ab")
            self.process = subprocess.Popen(self._arguments(), stdout=log, stderr=subprocess.STDOUT,
                                            cwd=self.workdir)
            log.close()
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and self.process.poll() is None:
                if self.ping():
                    return self
                time.sleep(0.02)
            self.stop()
            if keep_port:
                break
        with open(os.path.join(self.workdir, "redis.log"), encoding="utf-8", errors="replace") as log_file:
            pytest.fail(f"redis-server did not answer PING on port {self.port}:\n{log_file.read()[-2000:]}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        self.process = None


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory):
    """One plain redis-server for the contract suite (each test starts from an empty database)."""
    redis_py()
    server = RedisServer(tmp_path_factory.mktemp("redis")).start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def auth_server(tmp_path_factory):
    """A redis-server that requires a password."""
    redis_py()
    server = RedisServer(tmp_path_factory.mktemp("redis-auth"), "--requirepass", "s3cret-Pa55word").start()
    yield server
    server.stop()


@pytest.fixture
def wm_clock() -> km.ManualClock:
    """A clock that moves only when a test advances it."""
    return km.ManualClock(START)


# -- the contract suite's harness ---------------------------------------------------------------------------

class Harness:
    """Builds buffers of one kind, all on one backing store, and moves time for them."""

    def __init__(self, name: str, clock: km.ManualClock, tmp_path, redis_server: RedisServer | None) -> None:
        self.name = name
        self.clock = clock
        self.path = str(tmp_path / "store.db")
        self.server = redis_server
        self.is_redis = name.startswith("redis")
        self.shared = name != "in-process-memory"        # do two buffers made here see the same data?
        self.short_ttl = 1 if self.is_redis else 3600      # Redis keeps real time: TTL tests stay short there
        self.opened: list = []
        self.clients: list = []
        self.memory = None
        if name == "in-process-file":
            self.memory = km.Memory(self.path, clock=clock)  # the graph store owns the file; the buffer joins it
        if self.is_redis:
            redis = redis_py()
            with redis.Redis.from_url(redis_server.url()) as admin:
                admin.flushall()

    def make(self, *, tenant: str | None = None, default_ttl: int | None = None) -> km.WorkingMemoryBuffer:
        ttl = km.WORKING_MEMORY_TTL if default_ttl is None else default_ttl
        if self.name == "in-process-memory":
            buffer = km.InProcessBuffer(clock=self.clock, default_ttl=ttl, tenant=tenant)
        elif self.name == "in-process-file":
            buffer = km.InProcessBuffer(self.path, clock=self.clock, default_ttl=ttl, tenant=tenant)
        elif self.name == "redis":
            buffer = km.RedisMemoryBuffer(self.server.url(), clock=self.clock, default_ttl=ttl, tenant_id=tenant)
        else:
            client = redis_py().Redis.from_url(self.server.url())      # sync client, bytes replies
            self.clients.append(client)
            buffer = km.RedisMemoryBuffer(client=client, clock=self.clock, default_ttl=ttl, tenant_id=tenant)
        self.opened.append(buffer)
        return buffer

    def wait(self, seconds: float) -> None:
        if self.is_redis:
            time.sleep(seconds)
        else:
            self.clock.advance(seconds)

    def close(self) -> None:
        for buffer in self.opened:
            run(buffer.close())
        for client in self.clients:
            client.close()
        if self.memory is not None:
            self.memory.close()


@pytest.fixture(params=BUFFERS)
def harness(request, wm_clock, tmp_path):
    server = request.getfixturevalue("redis_server") if request.param.startswith("redis") else None
    bench = Harness(request.param, wm_clock, tmp_path, server)
    yield bench
    bench.close()


@pytest.fixture
def buffer(harness) -> km.WorkingMemoryBuffer:
    return harness.make()


async def add(buffer, session_id: str, *contents: str, role: str = "user", project: str = PROJECT) -> list[dict]:
    return [await buffer.add_message(project=project, session_id=session_id, role=role, content=content)
            for content in contents]


async def contents(buffer, session_id: str, project: str = PROJECT, **window) -> list[str]:
    page = await buffer.get_messages(project=project, session_id=session_id, **window)
    return [message["content"] for message in page["messages"]]


class RacingBuffer:
    """Holds every caller's first pointer check until all ``parties`` have made theirs, so they all find no
    pointer, all mint an id, and all race to claim it: the NX claim alone must pick one winner."""

    def __init__(self, inner, parties: int) -> None:
        self._inner = inner
        self._parties = parties
        self._arrived = 0
        self._all_arrived = asyncio.Event()

    def __getattr__(self, name):
        return getattr(self._inner, name)

    async def get_active_session(self, **options):
        pointer = await self._inner.get_active_session(**options)
        if self._arrived < self._parties:
            self._arrived += 1
            if self._arrived == self._parties:
                self._all_arrived.set()
            await self._all_arrived.wait()
        return pointer


# -- contract: messages ---------------------------------------------------------------------------------------

def test_add_and_get_messages_round_trip(harness, buffer):
    async def scenario():
        first = await buffer.add_message(project=PROJECT, session_id="s-1", role="user", content="Hello",
                                         metadata={"channel": "cli", "n": [1, 2]})
        harness.clock.advance(5)
        second = await buffer.add_message(project=PROJECT, session_id="s-1", role="assistant", content="Hi there")
        third = await buffer.add_message(project=PROJECT, session_id="s-1", role="tool", content="{\"ok\": true}")
        fourth = await buffer.add_message(project=PROJECT, session_id="s-1", role="system", content="Be brief")
        page = await buffer.get_messages(project=PROJECT, session_id="s-1")
        return [first, second, third, fourth], page

    acks, page = run(scenario())
    assert acks[0] == {"message_id": "s-1:1", "message_count": 1, "created_bucket": True}
    assert acks[1] == {"message_id": "s-1:2", "message_count": 2, "created_bucket": False}
    assert [ack["message_id"] for ack in acks[2:]] == ["s-1:3", "s-1:4"]
    assert page["message_count"] == 4
    assert page["ttl_remaining"] == km.WORKING_MEMORY_TTL
    assert page["messages"][0] == {"role": "user", "content": "Hello", "timestamp": "2026-03-14T09:30:00.000000Z",
                                   "metadata": {"channel": "cli", "n": [1, 2]}}
    assert [message["role"] for message in page["messages"]] == ["user", "assistant", "tool", "system"]
    assert page["messages"][1]["timestamp"] == "2026-03-14T09:30:05.000000Z"
    assert page["messages"][1]["metadata"] == {}


def test_get_messages_window_follows_lrange(buffer):
    """The last ``limit`` messages before the newest ``offset``, oldest first (LRANGE -limit-offset .. -1-offset)."""
    written = [f"m{index}" for index in range(10)]
    cases = [(10, 0), (3, 0), (3, 2), (4, 8), (5, 9), (5, 10), (2, 50), (50, 0), (50, 3), (1, 0), (0, 0), (0, 4)]

    async def scenario():
        await add(buffer, "window", *written)
        return {case: await contents(buffer, "window", limit=case[0], offset=case[1]) for case in cases}

    pages = run(scenario())
    for (limit, offset), got in pages.items():
        end = len(written) - offset
        expected = written[max(0, end - limit):max(0, end)] if limit else []
        assert got == expected, (limit, offset)
    assert pages[(3, 2)] == ["m5", "m6", "m7"]


def test_unknown_session_reads_empty(buffer):
    page = run(buffer.get_messages(project=PROJECT, session_id="never"))
    assert page == {"messages": [], "message_count": 0, "ttl_remaining": None}


def test_unicode_content_round_trips_and_the_size_limit_counts_utf8_bytes(buffer):
    text = "é" * (km.MAX_MESSAGE_BYTES // 2)                        # 2 bytes each: exactly 64 KiB
    emoji = "memory 🦊 ünïcödé\n\ttabs \"quotes\" \\ backslash"

    async def scenario():
        await add(buffer, "big", text, emoji)
        with pytest.raises(km.MessageTooLargeError) as too_large:
            await add(buffer, "big", text + "e")
        with pytest.raises(km.MessageTooLargeError) as metadata_too_large:
            await buffer.add_message(project=PROJECT, session_id="big", role="user", content="small",
                                     metadata={"blob": "x" * km.MAX_MESSAGE_BYTES})
        return too_large.value, metadata_too_large.value, await contents(buffer, "big")

    error, metadata_error, stored = run(scenario())
    assert stored == [text, emoji]                                   # the rejected messages stored nothing
    assert isinstance(error, ValueError) and isinstance(error, km.KumihoMemoryError)
    assert error.size == km.MAX_MESSAGE_BYTES + 1 and error.limit == 65536
    assert "65537 bytes" in str(error) and "65536-byte limit" in str(error)
    assert "metadata" in str(metadata_error)


@pytest.mark.parametrize("change", [
    {"role": "robot"}, {"role": "User"}, {"content": b"bytes"}, {"content": None}, {"metadata": ["list"]},
    {"metadata": {"when": object()}}, {"project": "Cognitive:Memory"}, {"project": "sessions"},
    {"project": ""}, {"session_id": "has space"}, {"session_id": ""}, {"session_id": "x" * 257},
    {"content": "lone \ud800 surrogate"},
])
def test_malformed_messages_are_refused_and_store_nothing(buffer, change):
    arguments = {"project": PROJECT, "session_id": "s", "role": "user", "content": "fine", **change}

    async def scenario():
        with pytest.raises(km.InvalidArgumentError):
            await buffer.add_message(**arguments)
        return await buffer.get_messages(project=PROJECT, session_id="s")

    assert run(scenario())["message_count"] == 0


@pytest.mark.parametrize("window", [{"limit": -1}, {"offset": -1}, {"limit": 1.5}, {"limit": True}])
def test_bad_windows_are_refused(buffer, window):
    with pytest.raises(km.InvalidArgumentError):
        run(buffer.get_messages(project=PROJECT, session_id="s", **window))


# -- contract: metadata, clearing, listing ------------------------------------------------------------------

def test_session_metadata_merges_like_hset(buffer):
    async def scenario():
        empty = await buffer.get_session_metadata(project=PROJECT, session_id="meta")
        await buffer.set_session_metadata(project=PROJECT, session_id="meta",
                                          metadata={"user_id": "ann", "context": "personal"})
        await buffer.set_session_metadata(project=PROJECT, session_id="meta",
                                          metadata={"context": "work", "evidence_level": "official"})
        with pytest.raises(km.InvalidArgumentError):
            await buffer.set_session_metadata(project=PROJECT, session_id="meta", metadata={"count": 3})
        with pytest.raises(km.InvalidArgumentError):
            await buffer.set_session_metadata(project=PROJECT, session_id="meta", metadata=["user_id"])
        other = await buffer.get_session_metadata(project=PROJECT, session_id="other")
        return empty, await buffer.get_session_metadata(project=PROJECT, session_id="meta"), other

    empty, merged, other = run(scenario())
    assert empty == {} and other == {}
    assert merged == {"user_id": "ann", "context": "work", "evidence_level": "official"}


def test_clear_session_removes_messages_and_metadata_only_of_that_session(buffer):
    async def scenario():
        await add(buffer, "gone", "a", "b", "c")
        await add(buffer, "kept", "x")
        await buffer.set_session_metadata(project=PROJECT, session_id="gone", metadata={"user_id": "ann"})
        removed = await buffer.clear_session(project=PROJECT, session_id="gone")
        again = await buffer.clear_session(project=PROJECT, session_id="gone")
        after = await buffer.get_messages(project=PROJECT, session_id="gone")
        metadata = await buffer.get_session_metadata(project=PROJECT, session_id="gone")
        restarted = await add(buffer, "gone", "fresh")
        return removed, again, after, metadata, await contents(buffer, "kept"), restarted

    removed, again, after, metadata, kept, restarted = run(scenario())
    assert (removed, again) == (3, 0)
    assert after["message_count"] == 0 and metadata == {}
    assert kept == ["x"]
    assert restarted[0] == {"message_id": "gone:1", "message_count": 1, "created_bucket": True}


def test_list_sessions_lists_sessions_with_messages_in_order(buffer):
    sessions = ["mcp:user-0123456789:20260314:002", "b", "a", "mcp:user-0123456789:20260314:001"]

    async def scenario():
        for session_id in sessions:
            await add(buffer, session_id, "hello")
        await add(buffer, "elsewhere", "hello", project="OtherProject")
        await buffer.set_session_metadata(project=PROJECT, session_id="metadata-only", metadata={"a": "b"})
        await add(buffer, "cleared", "bye")
        await buffer.clear_session(project=PROJECT, session_id="cleared")
        return (await buffer.list_sessions(PROJECT), await buffer.list_sessions(PROJECT, limit=2),
                await buffer.list_sessions("OtherProject"), await buffer.list_sessions("Empty"))

    listed, first_two, other, empty = run(scenario())
    assert listed == sorted(sessions)
    assert first_two == ["a", "b"]
    assert other == ["elsewhere"] and empty == []


# -- contract: sequences, generations, pointers -------------------------------------------------------------

def test_session_sequences_count_per_user_and_day(buffer):
    async def scenario():
        first = [await buffer.next_session_sequence(user_canonical_id="user-aaa", date_str=DAY) for _ in range(3)]
        other_day = await buffer.next_session_sequence(user_canonical_id="user-aaa", date_str="20260315")
        other_user = await buffer.next_session_sequence(user_canonical_id="user-bbb", date_str=DAY)
        with pytest.raises(km.InvalidArgumentError):
            await buffer.next_session_sequence(user_canonical_id="user-aaa", date_str="2026-03-14")
        return first, other_day, other_user

    assert run(scenario()) == ([1, 2, 3], 1, 1)


def test_session_generations_bump(buffer):
    async def scenario():
        before = await buffer.get_session_generation("host-session")
        bumps = [await buffer.bump_session_generation("host-session") for _ in range(2)]
        return before, bumps, await buffer.get_session_generation("host-session"), \
            await buffer.get_session_generation("another")

    assert run(scenario()) == (0, [1, 2], 2, 0)


def test_active_pointers_claim_with_nx_and_clear_only_if(buffer):
    pointer = {"context": "mcp", "user_id": "ann@example.com"}

    async def scenario():
        steps = [await buffer.get_active_session(**pointer),
                 await buffer.set_active_session(**pointer, session_id="s-1", nx=True),
                 await buffer.set_active_session(**pointer, session_id="s-2", nx=True),
                 await buffer.get_active_session(**pointer),
                 await buffer.get_active_session(context="personal", user_id="ann@example.com"),
                 await buffer.clear_active_session(**pointer, only_if="s-2"),
                 await buffer.get_active_session(**pointer),
                 await buffer.set_active_session(**pointer, session_id="s-3"),
                 await buffer.get_active_session(**pointer),
                 await buffer.clear_active_session(**pointer, only_if="s-3"),
                 await buffer.clear_active_session(**pointer, only_if="s-3"),
                 await buffer.set_active_session(**pointer, session_id="s-4"),
                 await buffer.clear_active_session(**pointer),
                 await buffer.get_active_session(**pointer)]
        with pytest.raises(km.InvalidArgumentError):
            await buffer.get_active_session(context="has:colon", user_id="ann")
        return steps

    assert run(scenario()) == [None, True, False, "s-1", None, False, "s-1", True, "s-3", True, False, True, True,
                               None]


# -- contract: expiry -----------------------------------------------------------------------------------------

def test_sliding_ttl_keeps_a_used_session_and_expires_an_idle_one(harness):
    # On Redis the two 0.6-ttl sleeps must each stay under the ttl: 2 s leaves 0.8 s for a slow machine.
    ttl = 2 * harness.short_ttl if harness.is_redis else harness.short_ttl
    buffer = harness.make(default_ttl=ttl)
    pointer = {"context": "mcp", "user_id": "ann"}

    async def scenario():
        await add(buffer, "slide", "one")
        await buffer.set_session_metadata(project=PROJECT, session_id="slide", metadata={"user_id": "ann"})
        await buffer.set_active_session(**pointer, session_id="slide", ttl_seconds=ttl)
        await buffer.next_session_sequence(user_canonical_id="user-ann", date_str=DAY, ttl_seconds=ttl)
        harness.wait(0.6 * ttl)
        refreshed = await buffer.get_messages(project=PROJECT, session_id="slide")    # slides the expiry
        harness.wait(0.6 * ttl)                                                         # 1.2 ttl after the add
        alive = await buffer.get_messages(project=PROJECT, session_id="slide")
        alive_metadata = await buffer.get_session_metadata(project=PROJECT, session_id="slide")
        harness.wait(1.2 * ttl)                                                         # idle past the ttl
        gone = await buffer.get_messages(project=PROJECT, session_id="slide")
        return (refreshed, alive, alive_metadata, gone,
                await buffer.get_session_metadata(project=PROJECT, session_id="slide"),
                await buffer.list_sessions(PROJECT), await buffer.get_active_session(**pointer),
                await buffer.next_session_sequence(user_canonical_id="user-ann", date_str=DAY))

    refreshed, alive, alive_metadata, gone, metadata, listed, active, sequence = run(scenario())
    assert refreshed["ttl_remaining"] == ttl and [m["content"] for m in alive["messages"]] == ["one"]
    assert alive_metadata == {"user_id": "ann"}
    assert gone == {"messages": [], "message_count": 0, "ttl_remaining": None}
    assert metadata == {} and listed == [] and active is None and sequence == 1


def test_adding_after_expiry_starts_a_new_bucket(harness):
    ttl = harness.short_ttl
    buffer = harness.make(default_ttl=ttl)

    async def scenario():
        await add(buffer, "again", "old")
        harness.wait(1.2 * ttl)
        ack = (await add(buffer, "again", "new"))[0]
        return ack, await contents(buffer, "again")

    ack, stored = run(scenario())
    assert ack == {"message_id": "again:1", "message_count": 1, "created_bucket": True}
    assert stored == ["new"]


# -- contract: tenants ------------------------------------------------------------------------------------------

def test_tenants_never_see_each_other(harness):
    if not harness.shared:
        pytest.skip("separate in-memory buffers share no storage; isolation is checked on shared backends")
    acme, globex, untenanted = harness.make(tenant="acme"), harness.make(tenant="globex"), harness.make()
    pointer = {"context": "mcp", "user_id": "ann"}

    async def scenario():
        for name, buffer in (("acme", acme), ("globex", globex), ("none", untenanted)):
            await add(buffer, "shared-id", f"{name} secret")
            await buffer.set_session_metadata(project=PROJECT, session_id="shared-id", metadata={"owner": name})
            await buffer.set_active_session(**pointer, session_id=f"{name}-session")
        await acme.bump_session_generation("host")
        sequences = [await buffer.next_session_sequence(user_canonical_id="user-ann", date_str=DAY)
                     for buffer in (acme, globex, untenanted)]
        cleared = await globex.clear_session(project=PROJECT, session_id="shared-id")
        views = {}
        for name, buffer in (("acme", acme), ("globex", globex), ("none", untenanted)):
            views[name] = (await contents(buffer, "shared-id"),
                           await buffer.get_session_metadata(project=PROJECT, session_id="shared-id"),
                           await buffer.get_active_session(**pointer),
                           await buffer.get_session_generation("host"),
                           await buffer.list_sessions(PROJECT))
        return sequences, cleared, views

    sequences, cleared, views = run(scenario())
    assert sequences == [1, 1, 1] and cleared == 1
    assert views["acme"] == (["acme secret"], {"owner": "acme"}, "acme-session", 1, ["shared-id"])
    assert views["globex"] == ([], {}, "globex-session", 0, [])
    assert views["none"] == (["none secret"], {"owner": "none"}, "none-session", 0, ["shared-id"])


def test_reserved_names_cannot_be_tenants_or_projects():
    for name in ("sessions", "session_seq", "session_gen", "active_session"):
        with pytest.raises(km.InvalidArgumentError):
            km.InProcessBuffer(tenant=name)
    with pytest.raises(km.InvalidArgumentError):
        km.InProcessBuffer(tenant="a:b")


# -- contract: session ids ----------------------------------------------------------------------------------

def test_resolve_session_id_follows_the_reference_order(harness, buffer):
    async def scenario():
        results = {"request": await km.resolve_session_id(buffer, user_id="ann", session_id="req-7", environ={})}
        environ = {"KUMIHO_SESSION_ID": "host-abc"}
        results["host"] = await km.resolve_session_id(buffer, environ=environ)
        await buffer.bump_session_generation("host-abc")
        results["host-after-consolidation"] = await km.resolve_session_id(buffer, environ=environ)
        results["minted"] = await km.resolve_session_id(buffer, user_id="ann", environ=environ, project=PROJECT)
        results["pointer"] = await km.resolve_session_id(buffer, user_id="ann", context="mcp", environ={})
        results["personal"] = await km.resolve_session_id(buffer, user_id="ann", context="personal", environ={})
        results["stamp"] = await buffer.get_session_metadata(project=PROJECT, session_id=results["minted"][0])
        await buffer.clear_active_session(context="mcp", user_id="ann", only_if=results["minted"][0])
        results["after-clear"] = await km.resolve_session_id(buffer, user_id="ann", environ={})
        harness.clock.advance(days=1)
        await buffer.clear_active_session(context="mcp", user_id="ann")
        results["next-day"] = await km.resolve_session_id(buffer, user_id="ann", environ={})
        with pytest.raises(km.InvalidArgumentError):
            await km.resolve_session_id(buffer, environ={})
        with pytest.raises(km.InvalidArgumentError):
            await km.resolve_session_id(buffer, user_id="ann", context="bad context", environ={})
        return results

    results = run(scenario())
    ann = user_hash("ann")
    assert results["request"] == ("req-7", "request")
    assert results["host"] == ("host-abc", "host-env")
    assert results["host-after-consolidation"] == ("host-abc:c1", "host-env")
    assert results["minted"] == (f"mcp:{ann}:{DAY}:001", "generated")
    assert results["pointer"] == (f"mcp:{ann}:{DAY}:001", "active-pointer")
    assert results["personal"] == (f"personal:{ann}:{DAY}:002", "generated")
    assert results["stamp"] == {"user_id": "ann", "context": "mcp"}
    assert results["after-clear"] == (f"mcp:{ann}:{DAY}:003", "generated")
    assert results["next-day"] == (f"mcp:{ann}:20260315:001", "generated")
    assert {results[name][1] for name in results if name != "stamp"} == set(km.SESSION_SOURCES)


def test_racing_callers_adopt_one_session(harness, buffer):
    parties = 2
    racing = RacingBuffer(buffer, parties)

    async def scenario():
        results = await asyncio.gather(*[km.resolve_session_id(racing, user_id="bob", environ={})
                                         for _ in range(parties)])
        spent = await buffer.next_session_sequence(user_canonical_id=user_hash("bob"), date_str=DAY)
        return results, spent, await buffer.get_active_session(context="mcp", user_id="bob")

    results, next_sequence, pointer = run(scenario())
    assert len({session_id for session_id, _ in results}) == 1, results
    assert all(source == "generated" for _, source in results)
    assert pointer == results[0][0]
    assert next_sequence == parties + 1          # every caller minted a candidate: the NX claim chose one


def test_many_unsynchronized_callers_and_buffers_agree(harness):
    buffers = [harness.make() for _ in range(2 if harness.shared else 1)]

    async def scenario():
        calls = [km.resolve_session_id(buffers[index % len(buffers)], user_id="carol", environ={})
                 for index in range(8)]
        return await asyncio.gather(*calls)

    results = run(scenario())
    assert len({session_id for session_id, _ in results}) == 1, results


# -- contract: lifecycle ------------------------------------------------------------------------------------

def test_async_with_closes_and_a_closed_buffer_refuses_work(harness):
    buffer = harness.make()

    async def scenario():
        async with buffer as opened:
            assert opened is buffer
            await add(buffer, "life", "hello")
        await buffer.close()                                    # closing twice is harmless
        with pytest.raises(km.StoreClosedError):
            await buffer.get_messages(project=PROJECT, session_id="life")

    run(scenario())


def test_a_buffer_works_across_event_loops(buffer):
    """A Redis client is bound to its event loop; the buffer rebuilds its own client when the loop changes."""
    asyncio.run(add(buffer, "loops", "first loop"))
    asyncio.run(add(buffer, "loops", "second loop"))
    assert run(contents(buffer, "loops")) == ["first loop", "second loop"]


# -- the in-process buffer ------------------------------------------------------------------------------------

def test_in_process_ttl_uses_the_injected_clock(wm_clock):
    buffer = km.InProcessBuffer(clock=wm_clock, default_ttl=100)

    async def scenario():
        await add(buffer, "clocked", "hello")
        wm_clock.advance(99)
        still = await contents(buffer, "clocked")            # slides to 100 s from now
        wm_clock.advance(99)
        later = await contents(buffer, "clocked")
        wm_clock.advance(100)
        await buffer.bump_session_generation("g")
        wm_clock.advance(km.SESSION_GENERATION_TTL - 1)
        generation = await buffer.get_session_generation("g")
        wm_clock.advance(1)
        return still, later, await contents(buffer, "clocked"), generation, await buffer.get_session_generation("g")

    assert run(scenario()) == (["hello"], ["hello"], [], 1, 0)
    run(buffer.close())


def test_in_process_buffer_is_thread_safe(tmp_path, wm_clock):
    path = str(tmp_path / "threads.db")
    km.Memory(path).close()
    shared = km.InProcessBuffer(path, clock=wm_clock)
    second_connection = km.InProcessBuffer(path, clock=wm_clock)
    acks: list[str] = []
    lock = threading.Lock()

    def worker(buffer):
        results = asyncio.run(add(buffer, "busy", *[f"m{index}" for index in range(25)]))
        with lock:
            acks.extend(result["message_id"] for result in results)

    threads = [threading.Thread(target=worker, args=(shared if index % 2 else second_connection,))
               for index in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(acks, key=lambda ack: int(ack.split(":")[1])) == [f"busy:{n}" for n in range(1, 201)]
    assert run(shared.get_messages(project=PROJECT, session_id="busy"))["message_count"] == 200
    run(shared.close())
    run(second_connection.close())


def test_file_buffer_keeps_everything_across_a_restart(tmp_path, wm_clock):
    path = str(tmp_path / "agent.db")
    memory = km.Memory(path, clock=wm_clock)
    memory.remember("The user prefers dark mode", space="prefs")

    async def write():
        async with km.InProcessBuffer(path, clock=wm_clock) as buffer:
            await add(buffer, "s", "before restart", "second")
            await buffer.set_session_metadata(project=PROJECT, session_id="s", metadata={"user_id": "ann"})
            await buffer.set_active_session(context="mcp", user_id="ann", session_id="s")
            await buffer.next_session_sequence(user_canonical_id="user-ann", date_str=DAY)
            await buffer.bump_session_generation("host")

    async def read():
        async with km.InProcessBuffer(path, clock=wm_clock) as buffer:
            return (await contents(buffer, "s"),
                    await buffer.get_session_metadata(project=PROJECT, session_id="s"),
                    await buffer.get_active_session(context="mcp", user_id="ann"),
                    await buffer.next_session_sequence(user_canonical_id="user-ann", date_str=DAY),
                    await buffer.get_session_generation("host"),
                    await buffer.list_sessions(PROJECT))

    run(write())
    memory.close()
    assert run(read()) == (["before restart", "second"], {"user_id": "ann"}, "s", 2, 1, ["s"])
    with km.Memory(path, clock=wm_clock) as reopened:            # the graph store still opens and recalls
        assert reopened.recall("dark mode")[0]["content"] == "The user prefers dark mode"
    wm_clock.advance(km.WORKING_MEMORY_TTL + 1)                   # expiry survives the restart too
    assert run(read())[0] == []


def test_acknowledged_messages_survive_a_killed_process(tmp_path):
    path = str(tmp_path / "crash.db")
    km.Memory(path).close()
    child = textwrap.dedent(f"""
        import asyncio, os, signal, sys
        sys.path.insert(0, {os.path.dirname(km.__file__)!r})
        import kumiho_memory as km
        buffer = km.InProcessBuffer({path!r})
        async def main():
            for index in range(5):
                await buffer.add_message(project="CognitiveMemory", session_id="crash", role="user",
                                         content=f"acknowledged {{index}}")
        asyncio.run(main())
        print("acknowledged", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    done = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "acknowledged", done.stderr
    buffer = km.InProcessBuffer(path)
    assert run(contents(buffer, "crash")) == [f"acknowledged {index}" for index in range(5)]
    run(buffer.close())


def test_buffer_may_open_a_new_file_before_memory(tmp_path):
    path = str(tmp_path / "fresh.db")
    buffer = km.InProcessBuffer(path)
    run(add(buffer, "s", "hello"))
    with km.Memory(path) as memory:                             # the file is a kumiho_memory store already
        memory.remember("works", space="x")
        assert memory.stats()["items"] == 1
    assert run(contents(buffer, "s")) == ["hello"]
    run(buffer.close())


def test_a_foreign_sqlite_file_is_refused_untouched(tmp_path):
    path = str(tmp_path / "foreign.db")
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE notes (body TEXT)")
    before = read_bytes(path)
    with pytest.raises(km.CorruptStoreError):
        km.InProcessBuffer(path)
    assert read_bytes(path) == before


def test_a_cleared_session_leaves_no_bytes_in_the_store_files(tmp_path):
    path = str(tmp_path / "scrub.db")
    memory = km.Memory(path)
    secret = "AKIAZZZZ-working-memory-secret-7f3e"
    buffer = km.InProcessBuffer(path)

    def stored_bytes() -> bytes:
        return b"".join(read_bytes(name) for name in (path, path + "-wal") if os.path.exists(name))

    run(add(buffer, "typed", f"my key is {secret}", "other words"))
    assert secret.encode() in stored_bytes()                    # it is there until the session is cleared
    assert run(buffer.clear_session(project=PROJECT, session_id="typed")) == 2
    assert secret.encode() not in stored_bytes()
    run(buffer.close())
    memory.close()
    assert secret.encode() not in stored_bytes()


def test_in_process_repr_and_arguments():
    buffer = km.InProcessBuffer(default_ttl=60, tenant="acme")
    assert repr(buffer) == "InProcessBuffer(':memory:', tenant='acme', default_ttl=60)"
    for bad in (0, -5, 1.5, True, "60"):
        with pytest.raises(km.InvalidArgumentError):
            km.InProcessBuffer(default_ttl=bad)
    with pytest.raises(km.InvalidArgumentError):
        run(buffer.set_active_session(context="mcp", user_id="ann", session_id="s", ttl_seconds=0))
    run(buffer.close())


def test_message_too_large_error_is_a_value_error():
    assert issubclass(km.MessageTooLargeError, km.InvalidArgumentError)
    assert issubclass(km.MessageTooLargeError, ValueError)
    assert issubclass(km.MessageTooLargeError, km.KumihoMemoryError)


# -- configuration ------------------------------------------------------------------------------------------

def test_config_reads_the_environment_only_when_asked(tmp_path):
    assert km.WorkingMemoryConfig.from_env({}) == km.WorkingMemoryConfig()
    config = km.WorkingMemoryConfig.from_env({"KUMIHO_WORKING_MEMORY_TTL": "90"})
    assert config.ttl == 90 and config.redis_url is None
    for bad in ("soon", "0", "-3", "1.5"):
        with pytest.raises(km.InvalidArgumentError, match="KUMIHO_WORKING_MEMORY_TTL"):
            km.WorkingMemoryConfig.from_env({"KUMIHO_WORKING_MEMORY_TTL": bad})
    buffer = config.open_buffer()
    assert isinstance(buffer, km.InProcessBuffer) and buffer.default_ttl == 90
    run(buffer.close())
    preferred = km.WorkingMemoryConfig.from_env({"KUMIHO_REDIS_URL": "redis://:pw1@a:1/0", "REDIS_URL": "redis://b"})
    assert preferred.redis_url == "redis://:pw1@a:1/0"
    assert km.WorkingMemoryConfig.from_env({"REDIS_URL": "redis://b:2/0"}).redis_url == "redis://b:2/0"
    assert "pw1" not in repr(preferred)


# -- the Redis buffer ------------------------------------------------------------------------------------------

def test_missing_redis_py_names_the_pip_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "redis", None)
    with pytest.raises(km.BackendUnavailableError,
                       match=r"pip install 'redis' \(in a checkout of kumiho_memory: pip install -e '\.\[redis\]'\)"):
        km.RedisMemoryBuffer("redis://127.0.0.1:1/0")


def test_redis_url_comes_from_the_argument_then_the_environment(redis_server):
    url = redis_server.url()
    unreachable = "redis://127.0.0.1:1/0"

    async def roundtrip(buffer):
        async with buffer:
            await add(buffer, "env", "hello")
            return await contents(buffer, "env")

    assert run(roundtrip(km.RedisMemoryBuffer(environ={"KUMIHO_REDIS_URL": url, "REDIS_URL": unreachable}))) == \
        ["hello"]
    assert run(roundtrip(km.RedisMemoryBuffer(environ={"REDIS_URL": url}))) == ["hello", "hello"]
    assert run(roundtrip(km.RedisMemoryBuffer(url, environ={"KUMIHO_REDIS_URL": unreachable}))) == \
        ["hello", "hello", "hello"]
    with_ttl = km.RedisMemoryBuffer.from_env({"KUMIHO_REDIS_URL": url, "KUMIHO_WORKING_MEMORY_TTL": "120"})
    assert with_ttl.default_ttl == 120
    run(with_ttl.close())
    unconfigured = km.RedisMemoryBuffer(environ={})       # upstream builds lazily: the first call says why
    with pytest.raises(km.InvalidArgumentError, match="KUMIHO_REDIS_URL"):
        run(add(unconfigured, "env", "hello"))
    with pytest.raises(km.InvalidArgumentError, match="not a Redis URL"):
        km.RedisMemoryBuffer("http://:hunter2-pass@127.0.0.1:1/")


def test_redis_keys_follow_the_reference_schema(redis_server, wm_clock):
    redis = redis_py()
    admin = redis.Redis.from_url(redis_server.url(), decode_responses=True)
    admin.flushall()
    buffer = km.RedisMemoryBuffer(redis_server.url(), clock=wm_clock, tenant_hint="hint", tenant_id="acme")

    async def scenario():
        async with buffer:
            await add(buffer, "s1", "hello")
            await buffer.set_session_metadata(project=PROJECT, session_id="s1", metadata={"user_id": "ann"})
            await km.resolve_session_id(buffer, user_id="ann", environ={})
            await buffer.bump_session_generation("host")

    run(scenario())
    root = "kumiho:memory:acme"
    ann = user_hash("ann")
    expected = {f"{root}:{PROJECT}:sessions:s1:messages": ("list", km.WORKING_MEMORY_TTL),
                f"{root}:{PROJECT}:sessions:s1:metadata": ("hash", km.WORKING_MEMORY_TTL),
                f"{root}:session_seq:{ann}:{DAY}": ("string", km.SESSION_SEQUENCE_TTL),
                f"{root}:active_session:mcp:ann": ("string", km.ACTIVE_SESSION_TTL),
                f"{root}:session_gen:host": ("string", km.SESSION_GENERATION_TTL)}
    assert set(admin.keys("*")) == set(expected)
    for key, (kind, ttl) in expected.items():
        assert admin.type(key) == kind
        assert ttl - 2 <= admin.ttl(key) <= ttl, key
    assert json.loads(admin.lindex(f"{root}:{PROJECT}:sessions:s1:messages", 0)) == {
        "role": "user", "content": "hello", "timestamp": "2026-03-14T09:30:00.000000Z", "metadata": {}}
    assert admin.get(f"{root}:active_session:mcp:ann") == f"mcp:{ann}:{DAY}:001"
    admin.close()


def test_redis_reads_messages_the_reference_wrote(redis_server):
    redis = redis_py()
    admin = redis.Redis.from_url(redis_server.url(), decode_responses=True)
    admin.flushall()
    key = f"kumiho:memory:{PROJECT}:sessions:ref:messages"
    admin.rpush(key, json.dumps({"role": "user", "content": "from the reference",
                                 "timestamp": "2026-01-01T00:00:00+00:00", "metadata": {"channel": "slack"}}))
    buffer = km.RedisMemoryBuffer(redis_server.url())
    page = run(buffer.get_messages(project=PROJECT, session_id="ref"))
    assert page["messages"] == [{"role": "user", "content": "from the reference",
                                 "timestamp": "2026-01-01T00:00:00+00:00", "metadata": {"channel": "slack"}}]
    assert page["ttl_remaining"] == km.WORKING_MEMORY_TTL                  # a non-empty read set the expiry
    admin.rpush(key, "not json")
    with pytest.raises(km.StoreError, match="not JSON"):
        run(buffer.get_messages(project=PROJECT, session_id="ref"))
    run(buffer.close())
    admin.close()


def all_text(error: BaseException) -> str:
    """The error, its repr and every chained cause, as one string."""
    parts = []
    while error is not None:
        parts += [str(error), repr(error)]
        error = error.__cause__ or error.__context__
    return "\n".join(parts)


def test_redis_auth_with_the_right_and_wrong_password(auth_server, caplog):
    password = "s3cret-Pa55word"
    caplog.set_level("DEBUG")
    good = km.RedisMemoryBuffer(auth_server.url(password))
    assert password not in repr(good) and "***" in repr(good)
    assert run(add(good, "auth", "let me in"))[0]["message_count"] >= 1
    run(good.close())

    for wrong_url in (auth_server.url("wrong-guess-Pa55"), auth_server.url(None)):
        buffer = km.RedisMemoryBuffer(wrong_url)
        with pytest.raises(km.ServiceError) as refused:
            run(add(buffer, "auth", "let me in"))
        assert refused.value.transient is False
        assert "refused the credentials" in str(refused.value)
        assert f"127.0.0.1:{auth_server.port}" in str(refused.value)
        for secret in (password, "wrong-guess-Pa55"):
            assert secret not in all_text(refused.value)
            assert secret not in repr(buffer)
        run(buffer.close())
    assert password not in caplog.text and "wrong-guess-Pa55" not in caplog.text


def test_redis_over_tls(tmp_path):
    redis_py()
    openssl = shutil.which("openssl")
    if openssl is None:
        unavailable("openssl is not installed (apt-get install openssl); the TLS test needs it to make a cert")
    cert, key = str(tmp_path / "cert.pem"), str(tmp_path / "key.pem")
    made = subprocess.run([openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                           "-nodes", "-keyout", key, "-out", cert, "-days", "1", "-subj", "/CN=127.0.0.1",
                           "-addext", "subjectAltName=IP:127.0.0.1"], capture_output=True, text=True, timeout=60)
    assert made.returncode == 0, made.stderr
    server = RedisServer(tmp_path / "tls", "--requirepass", "tls-Pa55word", tls=(cert, key)).start()
    try:
        url = server.url("tls-Pa55word", scheme="rediss")
        buffer = km.RedisMemoryBuffer(url, connection_options={"ssl_ca_certs": cert})
        assert run(add(buffer, "tls", "encrypted"))[0]["message_count"] == 1
        assert run(contents(buffer, "tls")) == ["encrypted"]
        run(buffer.close())
        untrusted = km.RedisMemoryBuffer(url)                       # the self-signed cert is not trusted
        with pytest.raises(km.ServiceError) as refused:
            run(add(untrusted, "tls", "leak?"))
        assert "tls-Pa55word" not in all_text(refused.value)
        plain = km.RedisMemoryBuffer(server.url("tls-Pa55word"))   # plain text to a TLS port fails
        with pytest.raises(km.ServiceError):
            run(add(plain, "tls", "plain"))
    finally:
        server.stop()


def test_redis_stopped_mid_session_raises_transient_errors_and_loses_nothing_acknowledged(tmp_path, wm_clock):
    redis_py()
    server = RedisServer(tmp_path / "aof", "--appendonly", "yes", "--appendfsync", "always").start()
    try:
        buffer = km.RedisMemoryBuffer(server.url(), clock=wm_clock)
        acknowledged = run(add(buffer, "mid", "one", "two", "three"))
        assert acknowledged[-1]["message_count"] == 3
        server.stop()

        async def while_down():
            with pytest.raises(km.ServiceError) as down:
                await add(buffer, "mid", "four")
            with pytest.raises(km.ServiceError):
                await buffer.get_messages(project=PROJECT, session_id="mid")
            return down.value

        error = run(while_down())
        assert error.transient is True
        assert "unreachable" in str(error) and f"127.0.0.1:{server.port}" in str(error)

        server.start()                                          # same port, same data directory
        assert run(contents(buffer, "mid")) == ["one", "two", "three"]
        assert run(add(buffer, "mid", "four"))[0]["message_count"] == 4
        run(buffer.close())
    finally:
        server.stop()


def test_a_callers_sync_client_is_left_open(redis_server):
    redis = redis_py()
    client = redis.Redis.from_url(redis_server.url())
    buffer = km.RedisMemoryBuffer(client=client)
    assert re.fullmatch(r"RedisMemoryBuffer\('redis://127\.0\.0\.1:\d+/0', tenant=None, default_ttl=3600\)",
                        repr(buffer))
    run(add(buffer, "sync", "hello"))
    run(buffer.close())
    assert client.ping() is True
    client.close()


def scripted_client(redis, url: str, failures: list[Exception], **options):
    """A real sync client whose single commands first raise the given errors, counting every attempt."""

    class ScriptedClient(redis.Redis):
        attempts = 0

        def execute_command(self, *args, **options):
            type(self).attempts += 1
            if failures:
                raise failures.pop(0)
            return super().execute_command(*args, **options)

    return ScriptedClient.from_url(url, **options)


def test_a_lost_connection_is_retried_once(redis_server):
    redis = redis_py()
    errors = redis.exceptions
    once = scripted_client(redis, redis_server.url(), [errors.ConnectionError("reset by peer")])
    assert run(km.RedisMemoryBuffer(client=once).get_active_session(context="mcp", user_id="ann")) is None
    assert type(once).attempts == 2                            # failed, waited 50 ms, succeeded

    twice = scripted_client(redis, redis_server.url(), [errors.TimeoutError("slow"), errors.TimeoutError("slow")])
    with pytest.raises(km.ServiceError) as down:
        run(km.RedisMemoryBuffer(client=twice).get_active_session(context="mcp", user_id="ann"))
    assert down.value.transient is True and type(twice).attempts == 2

    refused = scripted_client(redis, redis_server.url(), [errors.AuthenticationError("WRONGPASS")])
    with pytest.raises(km.ServiceError) as denied:
        run(km.RedisMemoryBuffer(client=refused).get_active_session(context="mcp", user_id="ann"))
    assert denied.value.transient is False and type(refused).attempts == 1     # credentials are not retried
    for client in (once, twice, refused):
        client.close()


def test_a_password_inside_a_redis_error_is_scrubbed(redis_server):
    redis = redis_py()
    leak = redis.exceptions.ConnectionError("handshake with password=client-Pa55word failed")
    client = scripted_client(redis, redis_server.url(), [leak, leak], password="client-Pa55word")
    buffer = km.RedisMemoryBuffer(client=client)
    with pytest.raises(km.ServiceError) as failed:
        run(buffer.get_session_generation("base"))
    assert "client-Pa55word" not in str(failed.value) and "password=***" in str(failed.value)
    assert "client-Pa55word" not in repr(buffer)
    client.close()


# -- consolidation across processes: consume only what was stored, one consolidation at a time --------------

def test_consume_removes_only_the_oldest_messages(harness, buffer):
    async def scenario():
        await buffer.set_session_metadata(project=PROJECT, session_id="s1", metadata={"user_id": "u1"})
        await add(buffer, "s1", "one", "two", "three")
        remaining = await buffer.consume_messages(project=PROJECT, session_id="s1", count=2)
        after = await contents(buffer, "s1")
        await add(buffer, "s1", "four")
        grown = await contents(buffer, "s1")
        meta = await buffer.get_session_metadata(project=PROJECT, session_id="s1")
        emptied = await buffer.consume_messages(project=PROJECT, session_id="s1", count=2)
        gone = await buffer.get_session_metadata(project=PROJECT, session_id="s1")
        return remaining, after, grown, meta, emptied, gone, await contents(buffer, "s1")

    remaining, after, grown, meta, emptied, gone, last = run(scenario())
    assert (remaining, after, grown) == (1, ["three"], ["three", "four"])
    assert meta == {"user_id": "u1"} and emptied == 0 and gone == {} and last == []


def test_a_session_lease_has_one_holder_and_is_released_only_by_it(harness):
    first, second = (harness.make(), harness.make()) if harness.shared else (harness.make(),) * 2

    async def scenario():
        claim = dict(project=PROJECT, session_id="s1")
        got = await first.acquire_session_lease(**claim, owner="a", ttl_seconds=60)
        refused = await second.acquire_session_lease(**claim, owner="b", ttl_seconds=60)
        holder = await second.session_lease_owner(**claim)
        wrong = await second.release_session_lease(**claim, owner="b")
        right = await first.release_session_lease(**claim, owner="a")
        again = await second.acquire_session_lease(**claim, owner="b", ttl_seconds=60)
        return got, refused, holder, wrong, right, again

    assert run(scenario()) == (True, False, "a", False, True, True)


def test_messages_that_arrive_during_a_consolidation_stay_for_the_next(harness, wm_clock):
    if harness.name == "in-process-memory":
        pytest.skip("one process: the in-process lock already orders ingest and consolidation")
    memory = km.Memory(clock=wm_clock)
    consolidating, ingesting = harness.make(), harness.make()

    class SlowSummarizer(km.ExtractiveSummarizer):
        async def summarize_conversation(self, messages, *, context=None, strict=False):
            await add(ingesting, "s1", "late message from another process")     # arrives mid-consolidation
            return self.summarize(messages)

        async def generate_implications(self, messages):
            return []

    manager = km.UniversalMemoryManager(memory=memory, redis_buffer=consolidating, summarizer=SlowSummarizer())

    async def scenario():
        await add(consolidating, "s1", "we picked Postgres", "and Redis for caching")
        result = await manager.consolidate_session(session_id="s1", space_path="decisions")
        return result, await contents(ingesting, "s1")

    result, left = run(scenario())
    assert result["success"] is True and left == ["late message from another process"]
    memory.close()


def test_a_consolidation_waits_for_another_processes_lease_and_takes_over_a_dead_ones(harness, wm_clock):
    if not harness.shared:
        pytest.skip("separate in-memory buffers share no storage")
    memory = km.Memory(clock=wm_clock)
    buffer = harness.make()
    manager = km.UniversalMemoryManager(memory=memory, redis_buffer=buffer)
    host = km._process_place()

    async def scenario():
        await add(buffer, "s1", "we picked Postgres")
        other = harness.make()
        await other.acquire_session_lease(project=manager.project, session_id="s1", owner=f"{host}:999999:dead",
                                          ttl_seconds=600)                      # a process that was killed
        taken = await manager.consolidate_session(session_id="s1", space_path="decisions")
        await add(buffer, "s1", "another decision")
        await other.acquire_session_lease(project=manager.project, session_id="s1",
                                          owner=f"{host}:{os.getppid()}:alive", ttl_seconds=600)   # a live one
        start = time.monotonic()
        released = asyncio.get_running_loop().call_later(
            0.3, lambda: asyncio.ensure_future(other.release_session_lease(
                project=manager.project, session_id="s1", owner=f"{host}:{os.getppid()}:alive")))
        waited = await manager.consolidate_session(session_id="s1", space_path="decisions")
        return taken, waited, time.monotonic() - start, released

    taken, waited, elapsed, _ = run(scenario())
    assert taken["success"] is True and waited["success"] is True
    assert elapsed >= 0.25                                   # it waited for the live holder to finish
    memory.close()


def _late_summarizer(action):
    class Late(km.ExtractiveSummarizer):
        async def summarize_conversation(self, messages, *, context=None, strict=False):
            await action()
            return self.summarize(messages)

        async def generate_implications(self, messages):
            return []
    return Late()


def test_a_consolidation_keeps_the_session_and_pointer_when_messages_remain(harness, wm_clock):
    if harness.name == "in-process-memory":
        pytest.skip("one process: the in-process lock already orders ingest and consolidation")
    memory = km.Memory(clock=wm_clock)
    buffer, other = harness.make(), harness.make()

    async def late():
        await add(other, session, "one more thing")
    manager = km.UniversalMemoryManager(memory=memory, redis_buffer=buffer, summarizer=_late_summarizer(late))

    async def scenario():
        nonlocal session
        turn = await manager.ingest_message(user_id="u1", message="we picked Postgres", context="work")
        session = turn["session_id"]
        await manager.consolidate_session(session_id=session, space_path="decisions")
        pointer = await buffer.get_active_session(context="work", user_id="u1")
        return pointer, await contents(buffer, session)
    session = None
    pointer, left = run(scenario())
    assert pointer == session and left == ["one more thing"]
    memory.close()


@pytest.mark.parametrize("interference", ["cleared-and-refilled", "lease-lost"])
def test_a_consolidation_consumes_nothing_it_no_longer_owns(harness, wm_clock, interference):
    if not harness.shared:
        pytest.skip("separate in-memory buffers share no storage")
    memory = km.Memory(clock=wm_clock)
    buffer, other = harness.make(), harness.make()
    project = km.DEFAULT_PROJECT

    async def interfere():
        if interference == "cleared-and-refilled":
            await other.clear_session(project=project, session_id="s1")
            await add(other, "s1", "a new conversation", "that must stay", project=project)
        else:
            owner = await other.session_lease_owner(project=project, session_id="s1")
            await other.release_session_lease(project=project, session_id="s1", owner=owner)
            await other.acquire_session_lease(project=project, session_id="s1", owner="x/1:1:other", ttl_seconds=60)
    manager = km.UniversalMemoryManager(memory=memory, redis_buffer=buffer, summarizer=_late_summarizer(interfere))

    async def scenario():
        await add(buffer, "s1", "old one", "old two", project=project)
        result = await manager.consolidate_session(session_id="s1", space_path="decisions")
        return result, await contents(buffer, "s1", project=project)

    result, left = run(scenario())
    assert result["success"] is True
    assert left == (["a new conversation", "that must stay"] if interference == "cleared-and-refilled"
                    else ["old one", "old two"])
    memory.close()
