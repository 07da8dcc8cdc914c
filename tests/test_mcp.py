"""The MCP server script: started for real over stdio and driven by the SDK's own client.

The tests that need the ``mcp`` package skip (visibly) when it is missing, except under ``CI`` where they
must run: the ``dev`` extra installs it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import sys
from typing import Any, AsyncIterator

import pytest

import kumiho_memory as km

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "kumiho_memory_mcp.py")

try:
    import mcp
    from mcp import ClientSession, StdioServerParameters, stdio_client
except ImportError:  # the optional extra is not installed
    mcp = None

needs_mcp = pytest.mark.skipif(
    mcp is None and not os.environ.get("CI"),
    reason="the 'mcp' package is not installed (pip install mcp); CI runs these")

EXPECTED_TOOLS = {
    # name: (readOnlyHint, destructiveHint, idempotentHint)
    "kumiho_chat_add": (False, False, False),
    "kumiho_chat_get": (True, False, True),
    "kumiho_chat_clear": (False, True, True),
    "kumiho_memory_ingest": (False, False, False),
    "kumiho_memory_add_response": (False, False, False),
    "kumiho_memory_consolidate": (False, False, False),
    "kumiho_memory_recall": (True, False, True),
    "kumiho_memory_discover_edges": (False, False, False),
    "kumiho_memory_store_execution": (False, False, False),
    "kumiho_memory_engage": (True, False, True),
    "kumiho_memory_reflect": (False, False, False),
    "kumiho_memory_get": (True, False, True),
    "kumiho_memory_history": (True, False, True),
    "kumiho_memory_tag": (False, False, True),
    "kumiho_memory_link": (False, False, True),
    "kumiho_memory_edges": (True, False, True),
    "kumiho_memory_list": (True, False, True),
    "kumiho_memory_forget": (False, True, False),
    "kumiho_memory_dream_state": (False, True, False),
    "kumiho_memory_space_profile": (False, False, False),
}


# -- helpers: SDK 2.x uses snake_case result fields, 1.x camelCase --------------------------------------------

def _field(obj: Any, snake: str, camel: str) -> Any:
    return getattr(obj, snake) if hasattr(obj, snake) else getattr(obj, camel)


def _is_error(result: Any) -> bool:
    return bool(_field(result, "is_error", "isError"))


def _structured(result: Any) -> dict[str, Any]:
    assert not _is_error(result), _text(result)
    return _field(result, "structured_content", "structuredContent")


def _text(result: Any) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)


def _resolve(schema: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    """Follow a local ``$ref`` in a JSON schema."""
    ref = node.get("$ref")
    return schema["$defs"][ref.rsplit("/", 1)[1]] if ref else node


def _environment(store_path: str, home: str) -> dict[str, str]:
    return {"KUMIHO_MEMORY_PATH": store_path, "HOME": home, "XDG_DATA_HOME": home,
            "KUMIHO_MEMORY_PROJECT": "McpTest", "PATH": os.environ.get("PATH", "")}


@contextlib.asynccontextmanager
async def _session(store_path: str, home: str, **extra_env: str) -> AsyncIterator[Any]:
    """The real script as a subprocess, with an initialized client session over its stdio."""
    params = StdioServerParameters(command=sys.executable, args=[SCRIPT],
                                   env={**_environment(store_path, home), **extra_env}, cwd=home)
    with open(os.devnull, "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                yield session


def _run(coroutine: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coroutine, timeout=60))


@pytest.fixture
def store(tmp_path) -> tuple[str, str]:
    home = tmp_path / "home"
    home.mkdir()
    return str(tmp_path / "memory.db"), str(home)


# -- without the SDK -------------------------------------------------------------------------------------------

_AUDIT_CHILD = r"""
import sys, os
sys.path.insert(0, sys.argv[1])
events = []
watching = False
def hook(event, args):
    if not watching:
        return
    if event in ("open", "os.listdir", "os.scandir", "os.mkdir", "os.remove", "os.rename", "sqlite3.connect",
                 "socket.connect", "socket.bind", "subprocess.Popen", "_thread.start_new_thread",
                 "os.putenv", "os.unsetenv"):
        path = str(args[0]) if args else ""
        if event == "open" and (path.endswith((".py", ".pyc")) or "__pycache__" in path or path.endswith(".so")
                                or "/lib/python" in path):
            return
        if event in ("os.listdir", "os.scandir") and (path in sys.path or path.startswith(sys.base_prefix)):
            return
        events.append((event, path))
sys.addaudithook(hook)
class Spy(dict):
    def __getitem__(self, key):
        events.append(("environ", key)); return super().__getitem__(key)
    def get(self, key, default=None):
        events.append(("environ", key)); return super().get(key, default)
os.environ = Spy(os.environ)
watching = True
import kumiho_memory_mcp
watching = False
events += [("imported", name) for name in ("mcp", "pydantic", "anyio") if name in sys.modules]
print(repr(events))
"""


def test_import_does_nothing_and_loads_no_sdk():
    done = subprocess.run([sys.executable, "-I", "-B", "-c", _AUDIT_CHILD, ROOT], capture_output=True, text=True,
                          timeout=60, env={"PATH": os.environ.get("PATH", "")})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", f"import had side effects: {done.stdout}"


_NO_SDK_CHILD = r"""
import sys
sys.path.insert(0, sys.argv[1])
sys.modules["mcp"] = None          # as if the extra were not installed
import kumiho_memory as km, kumiho_memory_mcp
try:
    kumiho_memory_mcp.build_server(None)
except km.BackendUnavailableError as exc:
    print("raised:", exc)
print("exit:", kumiho_memory_mcp.main([]))
"""


def test_without_the_sdk_build_server_and_main_name_the_pip_line(tmp_path):
    env = {"PATH": os.environ.get("PATH", ""), "KUMIHO_MEMORY_PATH": str(tmp_path / "never.db")}
    done = subprocess.run([sys.executable, "-c", _NO_SDK_CHILD, ROOT], capture_output=True, text=True, timeout=60,
                          env=env)
    assert done.returncode == 0, done.stderr
    assert ("raised: 'mcp' is not installed; run: pip install mcp "
            "(in a checkout of kumiho_memory: pip install -e '.[mcp]')") in done.stdout
    assert "exit: 2" in done.stdout and "pip install mcp" in done.stderr
    assert not (tmp_path / "never.db").exists()


def test_help_lists_the_environment_and_the_tools():
    done = subprocess.run([sys.executable, SCRIPT, "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "--http HOST:PORT" in done.stdout and "KUMIHO_MEMORY_PATH" in done.stdout
    assert all(name in done.stdout for name in EXPECTED_TOOLS)


def test_bad_http_address_is_a_usage_error():
    done = subprocess.run([sys.executable, SCRIPT, "--http", "nowhere"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "HOST:PORT" in done.stderr


def test_tool_error_message_names_the_field_once():
    import kumiho_memory_mcp as server_module

    error = km.InvalidArgumentError("must not be empty\n  (details)")
    assert server_module.tool_error_message(error, "message") == \
        "InvalidArgumentError: message: must not be empty (details)"
    named = km.InvalidArgumentError("user_id must not be empty")
    assert server_module.tool_error_message(named, "user_id") == "InvalidArgumentError: user_id must not be empty"
    assert server_module.tool_error_message(km.NotFoundError("no item")) == "NotFoundError: no item"
    assert set(server_module.TOOL_NAMES) == set(EXPECTED_TOOLS)


# -- over stdio, with the SDK's client -----------------------------------------------------------------------

@needs_mcp
def test_lists_exactly_the_tools_with_truthful_annotations(store):
    async def scenario() -> list[Any]:
        async with _session(*store) as session:
            return (await session.list_tools()).tools

    tools = {tool.name: tool for tool in _run(scenario())}
    assert set(tools) == set(EXPECTED_TOOLS)
    for name, (read_only, destructive, idempotent) in EXPECTED_TOOLS.items():
        hints = tools[name].annotations
        assert (_field(hints, "read_only_hint", "readOnlyHint"), _field(hints, "destructive_hint", "destructiveHint"),
                _field(hints, "idempotent_hint", "idempotentHint")) == (read_only, destructive, idempotent), name
        assert len(tools[name].description) > 60, name
        assert _field(tools[name], "output_schema", "outputSchema")["type"] == "object", name
    # typed, structured results: per-field output schemas, not a generic object
    recall_out = _field(tools["kumiho_memory_recall"], "output_schema", "outputSchema")
    assert set(recall_out["required"]) == {"results", "count", "recall_mode"}
    assert recall_out["properties"]["results"]["type"] == "array"
    item = _resolve(recall_out, recall_out["properties"]["results"]["items"])
    assert {"kref", "item_kref", "revision", "title", "content", "score", "metadata", "tags", "created_at",
            "space", "kind"} <= set(item["properties"])
    assert item["properties"]["score"]["type"] == "number" and item["additionalProperties"] is True
    for name in EXPECTED_TOOLS:
        assert _field(tools[name], "output_schema", "outputSchema").get("properties"), name
    get_out = _field(tools["kumiho_memory_get"], "output_schema", "outputSchema")
    assert {"kref", "revision", "content", "tags"} <= set(get_out["properties"])
    assert "captures_stored" in _field(tools["kumiho_memory_reflect"], "output_schema", "outputSchema")["properties"]
    ingest_schema = _field(tools["kumiho_memory_ingest"], "input_schema", "inputSchema")
    assert set(ingest_schema["required"]) == {"user_id", "message"}
    assert "unverified" in json.dumps(ingest_schema["properties"]["evidence_level"])
    reflect_schema = json.dumps(_field(tools["kumiho_memory_reflect"], "input_schema", "inputSchema"))
    assert "revises" in reflect_schema and "correction" in reflect_schema
    dream_schema = _field(tools["kumiho_memory_dream_state"], "input_schema", "inputSchema")
    assert dream_schema["properties"]["max_deprecation_ratio"]["minimum"] == 0.1
    assert dream_schema["properties"]["max_deprecation_ratio"]["maximum"] == 0.9
    engage_schema = _field(tools["kumiho_memory_engage"], "input_schema", "inputSchema")
    assert {"session_id", "agent"} <= set(engage_schema["properties"])
    assert "predictions" in _field(tools["kumiho_memory_engage"], "output_schema", "outputSchema")["properties"]
    assert not os.path.exists(store[0] + "-never")


@needs_mcp
def test_whole_round_trip_then_revisions_survive_a_restart(store):
    async def first_run() -> dict[str, Any]:
        async with _session(*store) as session:
            call = session.call_tool
            ingested = _structured(await call("kumiho_memory_ingest", {
                "user_id": "alice", "message": "For the Atlas project we decided to deploy on Fly.io in Frankfurt",
                "context": "work"}))
            session_id = ingested["session_id"]
            assert ingested["working_memory"][-1]["content"].startswith("For the Atlas project")
            answered = _structured(await call("kumiho_memory_add_response", {
                "session_id": session_id, "response": "Noted: Atlas deploys on Fly.io, region Frankfurt."}))
            assert answered["message_count"] == 2
            consolidated = _structured(await call("kumiho_memory_consolidate", {"session_id": session_id}))
            assert consolidated["success"] is True and consolidated["buffer_was_empty"] is False
            revision_kref = consolidated["store_result"]["revision_kref"]
            assert _structured(await call("kumiho_chat_get", {"session_id": session_id}))["message_count"] == 0

            recalled = _structured(await call("kumiho_memory_recall", {"query": "where does Atlas deploy?"}))
            assert recalled["count"] >= 1 and recalled["results"][0]["kref"] == revision_kref
            engaged = _structured(await call("kumiho_memory_engage", {"query": "Atlas deployment region"}))
            assert revision_kref in engaged["source_krefs"] and "Frankfurt" in engaged["context"]
            assert engaged["approx_tokens"] == len(engaged["context"]) // 4

            got = _structured(await call("kumiho_memory_get", {"kref": revision_kref.split("?")[0]}))
            assert got["kref"] == revision_kref and "Fly.io" in got["content"]

            reflected = _structured(await call("kumiho_memory_reflect", {
                "session_id": session_id, "response": "Switching Atlas to Amsterdam as requested.",
                "source_krefs": [revision_kref],
                "captures": [{"type": "decision", "title": "Atlas region",
                              "content": "Atlas deploys on Fly.io in Amsterdam, not Frankfurt.",
                              "revises": revision_kref, "event_date": "not a date"},
                             {"type": "preference", "title": "Alice likes short answers",
                              "content": "Alice prefers short, direct answers."}]}))
            assert reflected["captures_stored"] == 2 and reflected["buffered"] is True
            assert reflected["dropped_event_dates"] == [{"index": 0, "event_date": "not a date"}]
            revised_kref, preference_kref = reflected["stored_krefs"]
            assert revised_kref.split("?")[0] == revision_kref.split("?")[0] and revised_kref.endswith("?r=2")

            history = _structured(await call("kumiho_memory_history", {"item_kref": revised_kref}))
            assert [r["revision"] for r in history["revisions"]] == [1, 2]
            tagged = _structured(await call("kumiho_memory_tag", {"kref": revision_kref, "tag": "approved"}))
            assert "approved" in tagged["tags"]
            by_tag = _structured(await call("kumiho_memory_get", {"kref": revision_kref.split("?")[0] + "?t=approved"}))
            assert by_tag["revision"] == 1
            link = {"source_kref": preference_kref, "target_kref": revised_kref, "edge_type": "SUPPORTS"}
            first = _structured(await call("kumiho_memory_link", link))
            assert _structured(await call("kumiho_memory_link", link)) == first          # idempotent
            edges = _structured(await call("kumiho_memory_edges", {"kref": preference_kref, "direction": "outgoing"}))
            assert {(e["edge_type"], e["target_kref"]) for e in edges["edges"]} >= {
                ("SUPPORTS", revised_kref), ("DERIVED_FROM", revision_kref)}

            executed = _structured(await call("kumiho_memory_store_execution", {
                "task": "fly deploy atlas", "status": "failed", "exit_code": 1, "stderr": "region unavailable"}))
            assert executed["memory_type"] == "error"
            forgotten = _structured(await call("kumiho_memory_forget", {
                "kref": executed["store_result"]["item_kref"]}))
            assert forgotten["revisions"] == 1
            gone = await call("kumiho_memory_get", {"kref": executed["store_result"]["item_kref"]})
            assert _is_error(gone) and "NotFoundError" in _text(gone)
            return {"item": revision_kref.split("?")[0]}

    async def second_run(item: str) -> None:
        async with _session(*store) as session:
            recalled = _structured(await session.call_tool("kumiho_memory_recall", {"query": "Atlas Amsterdam"}))
            assert recalled["results"] and recalled["results"][0]["kref"] == item + "?r=2"

    facts = _run(first_run())
    _run(second_run(facts["item"]))


@needs_mcp
def test_chat_add_get_clear(store):
    async def scenario() -> None:
        async with _session(*store) as session:
            call = session.call_tool
            added = _structured(await call("kumiho_chat_add", {"session_id": "s-1", "message": "hello"}))
            assert added["message_count"] == 1 and added["created_bucket"] is True
            _structured(await call("kumiho_chat_add", {"session_id": "s-1", "message": "hi!", "role": "assistant"}))
            window = _structured(await call("kumiho_chat_get", {"session_id": "s-1"}))
            assert [(m["role"], m["content"]) for m in window["messages"]] == [("user", "hello"), ("assistant", "hi!")]
            assert window["session_id"] == "s-1" and window["ttl_remaining"] > 0
            assert _structured(await call("kumiho_chat_clear", {"session_id": "s-1"})) == \
                {"success": True, "cleared_count": 2}
            assert _structured(await call("kumiho_chat_get", {"session_id": "s-1"}))["messages"] == []
            bad_role = await call("kumiho_chat_add", {"session_id": "s-1", "message": "x", "role": "system"})
            assert _is_error(bad_role) and "role" in _text(bad_role)

    _run(scenario())


@needs_mcp
def test_bad_arguments_name_the_field_and_write_nothing(store):
    async def scenario() -> None:
        async with _session(*store) as session:
            call = session.call_tool
            kept = _structured(await call("kumiho_memory_store_execution", {"task": "a baseline memory"}))
            kref = kept["store_result"]["revision_kref"]
            failures = {
                "evidence_level": ("kumiho_memory_ingest",
                                   {"user_id": "bob", "message": "hi", "evidence_level": "gospel"}),
                "source_kref": ("kumiho_memory_link", {"source_kref": "kref:/broken", "target_kref": kref,
                                                       "edge_type": "SUPPORTS"}),
                "edge_type": ("kumiho_memory_link", {"source_kref": kref, "target_kref": kref,
                                                     "edge_type": "not upper"}),
                "message": ("kumiho_memory_ingest", {"user_id": "bob", "message": "   "}),
                "kref": ("kumiho_memory_get", {"kref": "kref://McpTest/executions/missing.action"}),
                "captures[1].revises": ("kumiho_memory_reflect", {
                    "session_id": "s-bad", "response": "ok",
                    "captures": [{"type": "fact", "title": "Good", "content": "This one is fine."},
                                 {"type": "fact", "title": "Bad", "content": "Revises nothing.",
                                  "revises": "kref://McpTest/nowhere/nothing.fact"}]}),
                "captures.0.type": ("kumiho_memory_reflect", {
                    "response": "ok", "captures": [{"type": "gossip", "title": "t", "content": "c"}]}),
                "tag": ("kumiho_memory_tag", {"kref": kref, "tag": "latest"}),
            }
            for field, (name, arguments) in failures.items():
                result = await call(name, arguments)
                text = _text(result)
                assert _is_error(result), (field, text)
                assert field in text, (field, text)
                assert "Traceback" not in text and 'File "' not in text, text
            assert _structured(await call("kumiho_chat_get", {"session_id": "s-bad"}))["message_count"] == 0
            assert _structured(await call("kumiho_memory_edges", {"kref": kref}))["count"] == 0
            assert _structured(await call("kumiho_memory_get", {"kref": kref}))["tags"] == \
                ["action", "done", "latest", "published"]

    _run(scenario())
    with km.Memory(store[0], project="McpTest") as memory:
        assert memory.stats()["items"] == 1          # only the baseline: no failing call wrote anything


# -- an embedding endpoint from the environment -------------------------------------------------------------

class _EmbeddingServer:
    """A loopback ``POST /v1/embeddings`` (OpenAI's shape): each word hashed into one of 64 dimensions."""

    def __init__(self) -> None:
        import http.server
        import threading

        self.requests: list[dict[str, Any]] = []
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                owner.requests.append({"path": self.path, "authorization": self.headers.get("Authorization"),
                                       **body})
                texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
                data = [{"object": "embedding", "index": i, "embedding": _bag_of_words(text)}
                        for i, text in enumerate(texts)]
                reply = json.dumps({"object": "list", "data": data, "model": body.get("model")}).encode()
                self.send_response(200 if self.path == "/v1/embeddings" else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _bag_of_words(text: str) -> list[float]:
    import hashlib

    vector = [0.0] * 64
    for word in text.lower().split():
        vector[hashlib.sha256(word.strip(".,?!").encode()).digest()[0] % 64] += 1.0
    norm = sum(value * value for value in vector) ** 0.5 or 1.0
    return [value / norm for value in vector]


@needs_mcp
def test_embedding_endpoint_from_the_environment(store):
    embeddings = _EmbeddingServer()
    try:
        async def scenario() -> None:
            async with _session(*store, KUMIHO_EMBED_BASE_URL=embeddings.url, KUMIHO_EMBED_API_KEY="sk-test",
                                KUMIHO_EMBED_MODEL="tiny-embed") as session:
                call = session.call_tool
                ingested = _structured(await call("kumiho_memory_ingest", {
                    "user_id": "carol", "message": "The Borealis telescope moves to La Palma next spring",
                    "context": "work"}))
                await call("kumiho_memory_add_response", {"session_id": ingested["session_id"],
                                                          "response": "Noted: Borealis goes to La Palma."})
                consolidated = _structured(await call("kumiho_memory_consolidate",
                                                      {"session_id": ingested["session_id"]}))
                kref = consolidated["store_result"]["revision_kref"]
                recalled = _structured(await call("kumiho_memory_recall", {"query": "Borealis telescope La Palma"}))
                assert recalled["count"] >= 1 and recalled["results"][0]["kref"] == kref

        _run(scenario())
    finally:
        embeddings.close()
    assert embeddings.requests, "the embedding endpoint was never called"
    assert {r["path"] for r in embeddings.requests} == {"/v1/embeddings"}
    assert {r["model"] for r in embeddings.requests} == {"tiny-embed"}
    assert {r["authorization"] for r in embeddings.requests} == {"Bearer sk-test"}


# -- streamable HTTP ----------------------------------------------------------------------------------------

def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _wait_for_port(port: int, process: subprocess.Popen, log: Any, timeout: float = 30.0) -> None:
    import socket
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            log.seek(0)
            raise AssertionError(f"the server exited with {process.returncode}: {log.read()}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return
        time.sleep(0.1)
    raise AssertionError(f"the server did not listen on port {port} within {timeout}s")


@needs_mcp
def test_streamable_http(store, monkeypatch):
    try:
        from mcp.client.streamable_http import streamable_http_client as http_client
    except ImportError:  # SDK 1.x
        from mcp.client.streamable_http import streamablehttp_client as http_client
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    port = _free_port()
    log = open(os.path.join(store[1], "server.log"), "w+")      # a file, not a pipe nobody drains
    process = subprocess.Popen([sys.executable, SCRIPT, "--http", f"127.0.0.1:{port}"], env=_environment(*store),
                               cwd=store[1], stdout=log, stderr=log)
    try:
        _wait_for_port(port, process, log)

        async def scenario() -> None:
            async with http_client(f"http://127.0.0.1:{port}/mcp") as streams:
                async with ClientSession(streams[0], streams[1]) as session:
                    await session.initialize()
                    tools = (await session.list_tools()).tools
                    assert {tool.name for tool in tools} == set(EXPECTED_TOOLS)
                    kept = _structured(await session.call_tool("kumiho_memory_store_execution", {
                        "task": "deploy the Orion service over http"}))
                    recalled = _structured(await session.call_tool("kumiho_memory_recall",
                                                                   {"query": "Orion service deploy"}))
                    assert recalled["recall_mode"] == "summarized"
                    assert [r["kref"] for r in recalled["results"]] == [kept["store_result"]["revision_kref"]]

        _run(scenario())
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
        log.close()


# -- a third-party client: the MCP Inspector CLI from npm ------------------------------------------------------

INSPECTOR_PREFIX = os.path.join(ROOT, ".ci", ".prefix")


def _inspector() -> list[str] | None:
    """The Inspector's launcher as ``.ci/run`` installs it (``npx --prefix`` does not find its bin)."""
    launcher = os.path.join(INSPECTOR_PREFIX, "node_modules", ".bin", "mcp-inspector")
    return [launcher, "--cli"] if shutil.which("node") and os.path.exists(launcher) else None


@pytest.mark.skipif((_inspector() is None or mcp is None) and not os.environ.get("CI"),
                    reason="MCP Inspector not installed in .ci/.prefix (see .ci/run); CI runs this")
def test_mcp_inspector_cli_lists_and_calls_tools(store):
    command = _inspector()
    assert command is not None, "CI must install @modelcontextprotocol/inspector into .ci/.prefix"
    env = {**os.environ, **_environment(*store)}
    server = [sys.executable, SCRIPT]
    listed = subprocess.run(command + server + ["--method", "tools/list"], capture_output=True, text=True,
                            timeout=120, env=env, cwd=store[1])
    assert listed.returncode == 0, listed.stderr
    assert {tool["name"] for tool in json.loads(listed.stdout)["tools"]} == set(EXPECTED_TOOLS)
    called = subprocess.run(command + server + ["--method", "tools/call", "--tool-name", "kumiho_chat_add",
                                                "--tool-arg", "session_id=inspector", "--tool-arg", "message=hello"],
                            capture_output=True, text=True, timeout=120, env=env, cwd=store[1])
    assert called.returncode == 0, called.stderr
    reply = json.loads(called.stdout)
    assert reply["isError"] is False and reply["structuredContent"]["message_count"] == 1
    refused = subprocess.run(command + server + ["--method", "tools/call", "--tool-name", "kumiho_memory_get",
                                                 "--tool-arg", "kref=nope"],
                             capture_output=True, text=True, timeout=120, env=env, cwd=store[1])
    assert "InvalidKrefError" in refused.stdout + refused.stderr and "Traceback" not in refused.stdout


@needs_mcp
def test_engage_prefetches_the_next_step_through_the_client(store):
    """With KUMIHO_MEMORY_PREFETCH=1 a session's steps learn the workflow; the next run's second step is served
    from context prepared in the background, and says so."""
    path, home = store
    with km.Memory(path, project="McpTest") as memory:
        for text in ("Billing roadmap: migrate invoices in March", "Billing roadmap: sunset the old portal"):
            memory.remember(text, space="plan")
        for text in ("Invoice rounding uses decimal half-even", "Invoice helpers live in billing utils"):
            memory.remember(text, space="code")

    async def scenario() -> list[dict]:
        async with _session(path, home, KUMIHO_MEMORY_PREFETCH="1") as session:
            seen = []
            for run in ("run-1", "run-2", "run-3"):
                for query, agent in (("billing roadmap", "planner"), ("invoice rounding helpers", "coder")):
                    seen.append(_structured(await session.call_tool(
                        "kumiho_memory_engage", {"query": query, "session_id": run, "agent": agent})))
                    await asyncio.sleep(0.5)                  # the agent's own work: time to prepare the next step
            return seen

    seen = _run(scenario())
    first, second = seen[0], seen[1]
    assert first["context_was_prefetched"] is False and first["state"] == "space:plan"
    assert second["state"] == "space:code" and second["results"][0]["space"] == "code"
    later = seen[3]                                             # run-2's second step
    assert seen[2]["predictions"] == [{"state": "space:code", "p": 1.0}]
    assert later["context_was_prefetched"] is True
    assert later["context"] == second["context"] and later["source_krefs"] == second["source_krefs"]


@needs_mcp
def test_chat_tools_stay_in_the_servers_project_and_redact_credentials(store):
    async def scenario() -> None:
        async with _session(*store) as session:
            call = session.call_tool
            added = await call("kumiho_chat_add", {"session_id": "s-9", "message": "hi", "project": "OtherProject"})
            assert _is_error(added) and "project" in _text(added)
            for name, arguments in (("kumiho_chat_get", {"session_id": "s-9", "project": "OtherProject"}),
                                    ("kumiho_chat_clear", {"session_id": "s-9", "project": "OtherProject"})):
                refused = await call(name, arguments)
                assert _is_error(refused) and "project" in _text(refused)
            secret = "my key is sk-abcdefghijklmnopqrstuvwxyz123456"
            _structured(await call("kumiho_chat_add", {"session_id": "s-9", "message": secret, "project": "McpTest"}))
            window = _structured(await call("kumiho_chat_get", {"session_id": "s-9"}))
            assert "sk-abcdefghijklmnopqrstuvwxyz123456" not in window["messages"][0]["content"]

    _run(scenario())
    with open(store[0], "rb") as stream:
        assert b"sk-abcdefghijklmnopqrstuvwxyz123456" not in stream.read()


@needs_mcp
def test_the_server_serves_the_module_tool_table(store):
    """kumiho_memory_mcp.py and km.MEMORY_TOOLS are one contract: the same tools, each with the table's
    description, the same required arguments, and every argument the table names."""
    async def scenario() -> list[Any]:
        async with _session(*store) as session:
            return (await session.list_tools()).tools

    served = {tool.name: tool for tool in _run(scenario())}
    table = {tool["name"]: tool for tool in km.MEMORY_TOOLS}
    assert set(served) == set(table)
    for name, tool in table.items():
        schema = _field(served[name], "input_schema", "inputSchema")
        assert served[name].description == tool["description"], name
        assert set(schema.get("required", [])) == set(tool["inputSchema"]["required"]), name
        assert set(tool["inputSchema"]["properties"]) == set(schema.get("properties", {})), name
