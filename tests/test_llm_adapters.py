"""LLM adapters: ``OpenAICompatAdapter`` and ``AnthropicAdapter`` against real loopback servers that speak
each wire protocol (response shapes, error shapes, and the validation the real services do), plus
``parse_llm_json``.

Each server is a ``ThreadingHTTPServer`` on 127.0.0.1 (port 0) in a thread. It records every request
(path, headers, JSON body) and can be scripted to answer the next requests with an HTTP error (with
headers such as ``Retry-After``), a hang, a dropped or cut-off connection, garbage, any JSON, a redirect,
or a rendezvous that only completes when two requests are in flight at once. Sleeps between retries are
injected, so no test waits for a backoff; the recorded waits are asserted instead.
"""

from __future__ import annotations

import asyncio
import email.utils
import http.server
import json
import socket
import threading
import time
from collections import deque
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kumiho_memory as km

API_KEY = "sk-test-0123456789abcdefSECRETKEY"
ANTHROPIC_KEY = "sk-ant-api03-TESTKEY-abcdefghijklmnop"
ANTHROPIC_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                         404: "not_found_error", 429: "rate_limit_error", 500: "api_error",
                         529: "overloaded_error"}


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


class Waits(list):
    """An injected ``sleep`` that records the waits instead of waiting."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


# -- the servers -----------------------------------------------------------------------------------------------

class WireServer:
    """A scriptable loopback server; subclasses speak one protocol.

    ``script(action, times=n, **options)`` queues what the next ``n`` requests get instead of the normal
    answer: ``status`` (error ``code`` in the protocol's error shape, optional ``message`` and ``headers``),
    ``echo_key`` (error ``code`` whose message repeats the credential after ``prefix`` filler characters),
    ``hang`` (wait ``seconds``, then answer normally), ``dribble`` (send the answer one byte ``every``
    seconds), ``garbage`` (``body`` bytes with 200), ``json`` (``payload`` with 200), ``drop`` (close
    without answering), ``truncate`` (promise more bytes than sent), ``redirect`` (``code`` to
    ``location``), ``rendezvous`` (wait at ``barrier`` until the other request arrives, then ``seconds``,
    then answer). ``replies`` queues the text of the next normal answers.
    """

    route = ""

    def __init__(self, api_key: str | None = None) -> None:
        self.api_key = api_key
        self.requests: list[dict[str, Any]] = []
        self.replies: deque[Any] = deque()
        self._script: deque[tuple[str, dict[str, Any]]] = deque()
        self._lock = threading.Lock()
        self.release = threading.Event()       # set at teardown to end any hang at once
        self.barrier: threading.Barrier | None = None
        self._httpd: http.server.ThreadingHTTPServer | None = None
        self.port = 0

    def start(self) -> "WireServer":
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # keep pytest output clean
                pass

            def do_GET(self) -> None:  # noqa: N802   (a followed redirect would arrive here)
                owner.requests.append({"path": self.path, "headers": dict(self.headers.items()), "json": None})
                owner._send_error(self, 404, "use POST")

            def do_POST(self) -> None:  # noqa: N802
                try:
                    owner._handle(self)
                except (BrokenPipeError, ConnectionResetError):
                    pass        # the client gave up first (a timeout test): nothing to answer

        httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        httpd.daemon_threads = True
        httpd.block_on_close = False
        self._httpd = httpd
        self.port = httpd.server_address[1]
        threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def stop(self) -> None:
        self.release.set()
        if self.barrier is not None:
            self.barrier.abort()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def script(self, action: str, times: int = 1, **options: Any) -> None:
        with self._lock:
            for _ in range(times):
                self._script.append((action, options))

    def bodies(self) -> list[dict[str, Any]]:
        return [request["json"] for request in self.requests]

    # protocol hooks ------------------------------------------------------------------------------------
    def authorized(self, headers: dict[str, str]) -> bool:
        raise NotImplementedError

    def supplied_key(self, headers: dict[str, str]) -> str:
        raise NotImplementedError

    def error_payload(self, status: int, message: str) -> dict[str, Any]:
        raise NotImplementedError

    def reject(self, body: Any, headers: dict[str, str]) -> tuple[int, str] | None:
        """The real service's validation: ``(status, message)`` for a request it would refuse."""
        raise NotImplementedError

    def answer(self, body: dict[str, Any], reply: Any) -> dict[str, Any]:
        raise NotImplementedError

    # answering ------------------------------------------------------------------------------------------
    @staticmethod
    def _send(handler: http.server.BaseHTTPRequestHandler, status: int, body: bytes,
              content_type: str = "application/json", headers: dict[str, str] | None = None) -> None:
        handler.send_response(status)
        handler.send_header("Content-Type", content_type)
        handler.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            handler.send_header(name, value)
        handler.end_headers()
        handler.wfile.write(body)

    def _send_error(self, handler: http.server.BaseHTTPRequestHandler, status: int, message: str,
                    headers: dict[str, str] | None = None) -> None:
        self._send(handler, status, json.dumps(self.error_payload(status, message)).encode(), headers=headers)

    def _handle(self, handler: http.server.BaseHTTPRequestHandler) -> None:
        raw = handler.rfile.read(int(handler.headers.get("Content-Length") or 0))
        headers = {name.lower(): value for name, value in handler.headers.items()}
        record: dict[str, Any] = {"path": handler.path, "headers": headers}
        try:
            record["json"] = json.loads(raw.decode("utf-8"))
        except ValueError:
            record["json"] = None
        with self._lock:
            self.requests.append(record)
            action, options = self._script.popleft() if self._script else ("ok", {})
        if handler.path != self.route:
            return self._send_error(handler, 404, f"Not found: {handler.path}")
        if action == "redirect":
            return self._send(handler, options.get("code", 307), b"", headers={"Location": options["location"]})
        if self.api_key is not None and not self.authorized(headers):
            return self._send_error(handler, 401, "invalid credentials")
        if action == "status":
            code = options["code"]
            return self._send_error(handler, code, options.get("message", f"scripted failure {code}"),
                                    options.get("headers"))
        if action == "echo_key":
            filler = "x" * options.get("prefix", 0)
            return self._send_error(handler, options["code"], f"{filler}bad key {self.supplied_key(headers)} here")
        if action == "drop":
            handler.close_connection = True
            handler.connection.shutdown(socket.SHUT_RDWR)
            return None
        if action == "truncate":
            handler.send_response(200)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", "5000")
            handler.end_headers()
            handler.wfile.write(b'{"id": "x", "choices": [')
            handler.wfile.flush()
            handler.close_connection = True
            handler.connection.shutdown(socket.SHUT_RDWR)
            return None
        if action == "dribble":
            body = json.dumps(self.answer(record["json"], None)).encode()
            handler.send_response(200)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(len(body)))
            handler.end_headers()
            for index in range(len(body)):
                if self.release.wait(options["every"]):
                    return None
                handler.wfile.write(body[index:index + 1])
                handler.wfile.flush()
            return None
        if action == "garbage":
            return self._send(handler, 200, options.get("body", b"<html>502 Bad Gateway</html>"), "text/html")
        if action == "json":
            return self._send(handler, 200, json.dumps(options["payload"]).encode())
        if action == "hang":
            self.release.wait(options["seconds"])
        if action == "rendezvous":
            try:
                self.barrier.wait(timeout=3.0)
            except threading.BrokenBarrierError:
                return self._send_error(handler, 500, "requests were not concurrent")
            time.sleep(options["seconds"])
        refusal = self.reject(record["json"], headers)
        if refusal is not None:
            return self._send_error(handler, *refusal)
        with self._lock:
            reply = self.replies.popleft() if self.replies else None
        return self._send(handler, 200, json.dumps(self.answer(record["json"], reply)).encode())


def _last_user_text(body: dict[str, Any]) -> str:
    users = [message["content"] for message in body["messages"] if message["role"] == "user"]
    return users[-1] if users and isinstance(users[-1], str) else ""


class OpenAIServer(WireServer):
    """``POST /v1/chat/completions`` as OpenAI answers it, including its checks on ``response_format``
    (json_object needs the word "json" in the messages) and on ``max_tokens`` for reasoning models.
    ``unsupported`` names response_format types this server rejects with a 400."""

    route = "/v1/chat/completions"

    def __init__(self, api_key: str | None = None, unsupported: dict[str, str] | None = None) -> None:
        super().__init__(api_key)
        self.unsupported = unsupported or {}

    def authorized(self, headers: dict[str, str]) -> bool:
        return headers.get("authorization") == f"Bearer {self.api_key}"

    def supplied_key(self, headers: dict[str, str]) -> str:
        return headers.get("authorization", "").removeprefix("Bearer ")

    def error_payload(self, status: int, message: str) -> dict[str, Any]:
        kind = "server_error" if status >= 500 else "invalid_request_error"
        code = "invalid_api_key" if status == 401 else None
        return {"error": {"message": message, "type": kind, "param": None, "code": code}}

    def reject(self, body: Any, headers: dict[str, str]) -> tuple[int, str] | None:
        if not isinstance(body, dict) or not isinstance(body.get("model"), str):
            return 400, "you must provide a model parameter"
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return 400, "[] is too short - 'messages'"
        if body["model"].startswith("o3") and "max_tokens" in body:
            return 400, ("Unsupported parameter: 'max_tokens' is not supported with this model. "
                         "Use 'max_completion_tokens' instead.")
        response_format = body.get("response_format")
        if response_format is not None:
            kind = response_format.get("type")
            if kind in self.unsupported:
                return 400, self.unsupported[kind]
            if kind == "json_object" and "json" not in json.dumps(messages).lower():
                return 400, ("'messages' must contain the word 'json' in some form, to use 'response_format' "
                             "of type 'json_object'.")
            if kind == "json_schema":
                spec = response_format.get("json_schema")
                if not isinstance(spec, dict) or not isinstance(spec.get("name"), str) or "schema" not in spec:
                    return 400, "Missing required parameter: 'response_format.json_schema.name'."
        return None

    def answer(self, body: dict[str, Any], reply: Any) -> dict[str, Any]:
        text = reply if reply is not None else f"echo: {_last_user_text(body)}"
        return {"id": "chatcmpl-loopback1", "object": "chat.completion", "created": 1767225600,
                "model": body["model"],
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text, "refusal": None},
                             "logprobs": None, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17},
                "system_fingerprint": "fp_loopback"}


class AnthropicServer(WireServer):
    """``POST /v1/messages`` as Anthropic answers it: the version header and ``max_tokens`` are required,
    roles are user/assistant only, unknown top-level fields are refused."""

    route = "/v1/messages"
    FIELDS = {"model", "messages", "max_tokens", "system", "metadata", "stop_sequences", "stream",
              "temperature", "top_p", "top_k", "tools", "tool_choice", "thinking"}

    def authorized(self, headers: dict[str, str]) -> bool:
        return headers.get("x-api-key") == self.api_key

    def supplied_key(self, headers: dict[str, str]) -> str:
        return headers.get("x-api-key", "")

    def error_payload(self, status: int, message: str) -> dict[str, Any]:
        return {"type": "error", "error": {"type": ANTHROPIC_ERROR_TYPES.get(status, "api_error"),
                                           "message": message}, "request_id": "req_loopback"}

    def reject(self, body: Any, headers: dict[str, str]) -> tuple[int, str] | None:
        if headers.get("anthropic-version") != "2023-06-01":
            return 400, "anthropic-version: header is required"
        if not isinstance(body, dict):
            return 400, "There was an issue with your request body"
        for field in sorted(set(body) - self.FIELDS):
            return 400, f"{field}: Extra inputs are not permitted"
        if not isinstance(body.get("max_tokens"), int):
            return 400, "max_tokens: Field required"
        if not isinstance(body.get("model"), str):
            return 400, "model: Field required"
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return 400, "messages: at least one message is required"
        for message in messages:
            if message.get("role") not in ("user", "assistant"):
                return 400, (f"messages: Unexpected role \"{message.get('role')}\". The Messages API accepts a "
                             f"top-level `system` parameter, not \"system\" as an input message role.")
        if "system" in body and not isinstance(body["system"], (str, list)):
            return 400, "system: Input should be a valid string"
        return None

    def answer(self, body: dict[str, Any], reply: Any) -> dict[str, Any]:
        if reply is None:
            reply = [{"type": "text", "text": f"echo: {_last_user_text(body)}"}]
        elif isinstance(reply, str):
            reply = [{"type": "text", "text": reply}]
        return {"id": "msg_01Loopback", "type": "message", "role": "assistant", "content": reply,
                "model": body["model"], "stop_reason": "end_turn", "stop_sequence": None,
                "usage": {"input_tokens": 12, "output_tokens": 5}}


@pytest.fixture
def openai_server():
    server = OpenAIServer(api_key=API_KEY).start()
    yield server
    server.stop()


@pytest.fixture
def anthropic_server():
    server = AnthropicServer(api_key=ANTHROPIC_KEY).start()
    yield server
    server.stop()


def openai_adapter(server: WireServer, **options: Any) -> km.OpenAICompatAdapter:
    options.setdefault("sleep", Waits())
    return km.OpenAICompatAdapter(f"http://127.0.0.1:{server.port}/v1", API_KEY, "gpt-4o-mini", **options)


def anthropic_adapter(server: WireServer, **options: Any) -> km.AnthropicAdapter:
    options.setdefault("sleep", Waits())
    return km.AnthropicAdapter(ANTHROPIC_KEY, base_url=f"http://127.0.0.1:{server.port}", **options)


USER = [{"role": "user", "content": "What colour is the sky?"}]


def test_the_module_under_test_is_the_one_imported():
    assert hasattr(km, "OpenAICompatAdapter") and hasattr(km, "AnthropicAdapter"), km.__file__


# -- OpenAI-compatible: the request on the wire --------------------------------------------------------------

def test_openai_chat_sends_system_first_and_returns_the_content(openai_server):
    adapter = openai_adapter(openai_server)
    reply = run(adapter.chat(messages=USER, system="Be brief.", max_tokens=77))
    assert reply == "echo: What colour is the sky?"
    (request,) = openai_server.requests
    assert request["path"] == "/v1/chat/completions"
    assert request["headers"]["authorization"] == f"Bearer {API_KEY}"
    assert request["headers"]["content-type"] == "application/json"
    assert request["json"] == {"model": "gpt-4o-mini", "max_tokens": 77,
                               "messages": [{"role": "system", "content": "Be brief."}, USER[0]]}


def test_openai_chat_without_system_sends_the_messages_alone_and_honours_the_model_argument(openai_server):
    adapter = openai_adapter(openai_server)
    conversation = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"},
                    {"role": "user", "content": "bye"}]
    assert run(adapter.chat(messages=conversation, model="llama3.2")) == "echo: bye"
    body = openai_server.requests[0]["json"]
    assert body == {"model": "llama3.2", "messages": conversation, "max_tokens": 1024}


def test_openai_without_api_key_sends_no_authorization(openai_server):
    openai_server.api_key = None       # like a local Ollama
    adapter = km.OpenAICompatAdapter(f"http://127.0.0.1:{openai_server.port}/v1/", model="qwen2.5")
    assert run(adapter.chat(messages=USER)) == "echo: What colour is the sky?"
    assert "authorization" not in openai_server.requests[0]["headers"]
    assert openai_server.requests[0]["path"] == "/v1/chat/completions"      # trailing slash not doubled


def test_openai_json_object_mode_sets_response_format_and_names_json_in_the_prompt(openai_server):
    openai_server.replies.append('{"colour": "blue"}')
    adapter = openai_adapter(openai_server)
    reply = run(adapter.chat(messages=USER, system="You are terse.", json_mode=True))
    assert km.parse_llm_json(reply) == {"colour": "blue"}
    body = openai_server.requests[0]["json"]
    assert body["response_format"] == {"type": "json_object"}
    system = body["messages"][0]
    assert system["role"] == "system" and system["content"].startswith("You are terse.\n\n")
    assert "JSON object" in system["content"]


def test_openai_array_mode_unwraps_an_object_holding_one_array(openai_server):
    openai_server.replies.extend(['{"items": ["sky", "blue"]}', '["already", "an array"]',
                                  '{"a": [1], "b": [2]}'])
    adapter = openai_adapter(openai_server)
    assert json.loads(run(adapter.chat(messages=USER, json_mode="array"))) == ["sky", "blue"]
    assert json.loads(run(adapter.chat(messages=USER, json_mode="array"))) == ["already", "an array"]
    assert run(adapter.chat(messages=USER, json_mode="array")) == '{"a": [1], "b": [2]}'   # ambiguous: kept
    body = openai_server.requests[0]["json"]
    assert body["response_format"] == {"type": "json_object"}
    assert "JSON array" in body["messages"][0]["content"] and '{"items"' in body["messages"][0]["content"]


SCHEMA = {"type": "object", "properties": {"colour": {"type": "string"}}, "required": ["colour"],
          "additionalProperties": False}


def test_openai_schema_mode_sends_strict_json_schema(openai_server):
    openai_server.replies.append('{"colour": "blue"}')
    adapter = openai_adapter(openai_server)
    reply = run(adapter.chat(messages=USER, json_mode={"name": "sky_colour", "schema": SCHEMA}))
    assert json.loads(reply) == {"colour": "blue"}
    body = openai_server.requests[0]["json"]
    assert body["response_format"] == {"type": "json_schema",
                                       "json_schema": {"name": "sky_colour", "schema": SCHEMA, "strict": True}}
    assert json.dumps(SCHEMA, sort_keys=True) in body["messages"][0]["content"]


def test_openai_schema_mode_falls_back_to_the_prompt_when_the_server_rejects_response_format():
    server = OpenAIServer(API_KEY, unsupported={
        "json_schema": "Invalid parameter: 'response_format' of type 'json_schema' is not supported with "
                       "this model."}).start()
    try:
        server.replies.append('```json\n{"colour": "blue"}\n```')
        waits = Waits()
        adapter = openai_adapter(server, sleep=waits)
        reply = run(adapter.chat(messages=USER, json_mode={"name": "sky_colour", "schema": SCHEMA}))
        assert km.parse_llm_json(reply) == {"colour": "blue"}
        first, second = server.bodies()
        assert first["response_format"]["type"] == "json_schema"
        assert "response_format" not in second
        assert second["messages"] == first["messages"]       # the instruction stays in the prompt
        assert "JSON Schema" in second["messages"][0]["content"]
        assert waits == []                                   # a fallback is not a retry: no wait
    finally:
        server.stop()


def test_openai_json_object_mode_falls_back_when_the_server_only_knows_json_schema():
    server = OpenAIServer(unsupported={  # LM Studio's wording
        "json_object": "'response_format.type' must be 'json_schema' or 'text'"}).start()
    try:
        server.replies.append('{"items": ["a"]}')
        adapter = km.OpenAICompatAdapter(f"http://127.0.0.1:{server.port}/v1", model="local", sleep=Waits())
        assert json.loads(run(adapter.chat(messages=USER, json_mode="array"))) == ["a"]
        assert [("response_format" in body) for body in server.bodies()] == [True, False]
    finally:
        server.stop()


def test_openai_other_400_raises_at_once_with_the_servers_message(openai_server):
    adapter = openai_adapter(openai_server)
    openai_server.script("status", code=400, message="This model's maximum context length is 128000 tokens.")
    with pytest.raises(km.ServiceError) as caught:
        run(adapter.chat(messages=USER, json_mode=True))
    assert caught.value.status == 400 and caught.value.transient is False
    assert "HTTP 400" in str(caught.value) and "maximum context length is 128000" in str(caught.value)
    assert len(openai_server.requests) == 1


def test_openai_reasoning_model_gets_max_completion_tokens_on_the_second_try(openai_server):
    adapter = openai_adapter(openai_server, sleep=Waits())
    assert run(adapter.chat(messages=USER, model="o3-mini", max_tokens=300)) == "echo: What colour is the sky?"
    first, second = openai_server.bodies()
    assert first["max_tokens"] == 300 and "max_completion_tokens" not in first
    assert second["max_completion_tokens"] == 300 and "max_tokens" not in second


# -- OpenAI-compatible: failures ------------------------------------------------------------------------------

def test_openai_429_with_retry_after_waits_as_asked_then_succeeds(openai_server):
    waits = Waits()
    adapter = openai_adapter(openai_server, sleep=waits)
    openai_server.script("status", code=429, message="Rate limit reached", headers={"Retry-After": "2"})
    openai_server.script("status", code=429, message="Rate limit reached", headers={"retry-after-ms": "250"})
    assert run(adapter.chat(messages=USER)) == "echo: What colour is the sky?"
    assert waits == [2.0, 0.25]
    assert len(openai_server.requests) == 3


def test_retry_after_is_capped_and_read_as_an_http_date(openai_server):
    waits = Waits()
    adapter = openai_adapter(openai_server, sleep=waits)
    openai_server.script("status", code=503, headers={"Retry-After": "3600"})
    later = email.utils.formatdate(time.time() + 5, usegmt=True)
    openai_server.script("status", code=503, headers={"Retry-After": later})
    assert run(adapter.chat(messages=USER)).startswith("echo:")
    assert waits[0] == 30.0                       # an hour is cut to the cap
    assert 3.0 <= waits[1] <= 5.0                 # whole seconds in the date, minus the time it took


def test_openai_500s_raise_a_transient_error_after_backing_off(openai_server):
    waits = Waits()
    adapter = openai_adapter(openai_server, retries=3, sleep=waits)
    openai_server.script("status", code=500, times=4, message="The server had an error")
    with pytest.raises(km.ServiceError) as caught:
        run(adapter.chat(messages=USER))
    assert caught.value.transient is True and caught.value.status == 500
    assert "HTTP 500" in str(caught.value) and "after 4 attempts" in str(caught.value)
    assert waits == [0.5, 1.0, 2.0]
    assert len(openai_server.requests) == 4


def test_openai_401_raises_at_once_without_retrying(openai_server):
    waits = Waits()
    adapter = km.OpenAICompatAdapter(f"http://127.0.0.1:{openai_server.port}/v1", "sk-wrong-key-000111",
                                     sleep=waits)
    with pytest.raises(km.ServiceError) as caught:
        run(adapter.chat(messages=USER))
    assert caught.value.status == 401 and caught.value.transient is False
    assert "HTTP 401" in str(caught.value) and "invalid credentials" in str(caught.value)
    assert waits == [] and len(openai_server.requests) == 1


def test_a_hanging_server_is_bounded_by_the_timeout(openai_server):
    waits = Waits()
    adapter = openai_adapter(openai_server, timeout=0.3, retries=1, sleep=waits)
    openai_server.script("hang", times=2, seconds=10)
    started = time.monotonic()
    with pytest.raises(km.ServiceError) as caught:
        run(adapter.chat(messages=USER))
    assert time.monotonic() - started < 3.0
    assert caught.value.transient is True and caught.value.status is None
    assert "timed out" in str(caught.value)
    assert waits == [0.5] and len(openai_server.requests) == 2


def test_a_dribbling_reply_is_bounded_by_the_timeout_too(openai_server):
    adapter = openai_adapter(openai_server, timeout=0.3, retries=0)
    openai_server.script("dribble", every=0.02)          # about 300 bytes: 6 s if waited out
    started = time.monotonic()
    with pytest.raises(km.ServiceError, match="longer than 0.3 s") as caught:
        run(adapter.chat(messages=USER))
    assert caught.value.transient is True and time.monotonic() - started < 2.0


def test_an_oversized_reply_is_refused(openai_server, monkeypatch):
    monkeypatch.setattr(km, "_MAX_REPLY_BYTES", 1000)
    openai_server.replies.append("x" * 5000)
    with pytest.raises(km.ServiceError, match="larger than 1000 bytes") as caught:
        run(openai_adapter(openai_server).chat(messages=USER))
    assert caught.value.transient is False and len(openai_server.requests) == 1


@pytest.mark.parametrize("action", ["drop", "truncate"])
def test_a_dropped_or_cut_off_reply_is_retried(openai_server, action):
    waits = Waits()
    adapter = openai_adapter(openai_server, sleep=waits)
    openai_server.script(action)
    assert run(adapter.chat(messages=USER)) == "echo: What colour is the sky?"
    assert waits == [0.5] and len(openai_server.requests) == 2


def test_a_refused_connection_is_transient_after_the_retries():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]                 # closed on exit: nothing listens there
    waits = Waits()
    adapter = km.OpenAICompatAdapter(f"http://127.0.0.1:{port}/v1", API_KEY, sleep=waits)
    with pytest.raises(km.ServiceError) as caught:
        run(adapter.chat(messages=USER))
    assert caught.value.transient is True and waits == [0.5, 1.0]
    assert "unreachable" in str(caught.value)


@pytest.mark.parametrize("action, options, fragment", [
    ("garbage", {"body": b"<html>502 Bad Gateway</html>"}, "not JSON"),
    ("garbage", {"body": b"\xff\xfe\x00binary"}, "not JSON"),
    ("json", {"payload": ["a", "list"]}, "not an object"),
    ("json", {"payload": {"object": "chat.completion", "choices": []}}, "choices[0].message"),
    ("json", {"payload": {"choices": [{"message": {"role": "assistant", "content": None}}]}}, "without text"),
])
def test_openai_replies_of_the_wrong_shape_are_not_transient(openai_server, action, options, fragment):
    waits = Waits()
    adapter = openai_adapter(openai_server, sleep=waits)
    openai_server.script(action, **options)
    with pytest.raises(km.ServiceError) as caught:
        run(adapter.chat(messages=USER))
    assert caught.value.transient is False and fragment in str(caught.value)
    assert waits == [] and len(openai_server.requests) == 1


def test_openai_refusal_is_reported(openai_server):
    adapter = openai_adapter(openai_server)
    openai_server.script("json", payload={"choices": [{"index": 0, "finish_reason": "stop", "message": {
        "role": "assistant", "content": None, "refusal": "I can't help with that."}}]})
    with pytest.raises(km.ServiceError, match="declined: I can't help with that") as caught:
        run(adapter.chat(messages=USER))
    assert caught.value.transient is False


@pytest.mark.parametrize("payload, message", [
    ({"object": "error", "message": "The model `nope` does not exist.", "type": "NotFoundError", "code": 404},
     "The model `nope` does not exist."),                                     # vLLM
    ({"error": "model 'nope' not found, try pulling it first"}, "model 'nope' not found"),   # Ollama
])
def test_error_messages_of_other_servers_are_quoted(payload, message):
    class OtherServer(OpenAIServer):
        def error_payload(self, status: int, text: str) -> dict[str, Any]:
            return payload

    server = OtherServer().start()
    try:
        server.script("status", code=404)
        adapter = km.OpenAICompatAdapter(f"http://127.0.0.1:{server.port}/v1", model="nope", sleep=Waits())
        with pytest.raises(km.ServiceError) as caught:
            run(adapter.chat(messages=USER))
        assert caught.value.status == 404 and message in str(caught.value)
    finally:
        server.stop()


@pytest.mark.parametrize("code", [301, 302, 303, 307, 308])
@pytest.mark.parametrize("user_info", ["", "evil:hunter2@"])
def test_a_redirect_is_not_followed_so_the_key_stays_put(openai_server, code, user_info):
    adapter = openai_adapter(openai_server)
    openai_server.script("redirect", code=code, location=f"http://{user_info}127.0.0.1:{openai_server.port}/steal")
    with pytest.raises(km.ServiceError) as caught:
        run(adapter.chat(messages=USER))
    assert caught.value.status == code and caught.value.transient is False
    assert "redirected" in str(caught.value) and "hunter2" not in str(caught.value)
    assert [request["path"] for request in openai_server.requests] == ["/v1/chat/completions"]


# -- secrets ----------------------------------------------------------------------------------------------------

def _exception_texts(error: BaseException) -> str:
    return " ".join([str(error), repr(error), repr(error.args)])


@pytest.mark.parametrize("code", [400, 401, 500])
@pytest.mark.parametrize("prefix", [0, 470])   # 470: a cut at 500 characters would leave 22 characters of the key
def test_the_openai_key_never_appears_even_when_the_server_echoes_it(openai_server, code, prefix):
    adapter = openai_adapter(openai_server, retries=0)
    assert API_KEY not in repr(adapter)
    openai_server.script("echo_key", code=code, prefix=prefix)
    with pytest.raises(km.ServiceError) as caught:
        run(adapter.chat(messages=USER))
    text = _exception_texts(caught.value)
    assert API_KEY[:12] not in text and API_KEY[-8:] not in text
    assert "***" in text


def test_the_anthropic_key_never_appears_even_when_the_server_echoes_it(anthropic_server):
    adapter = anthropic_adapter(anthropic_server, retries=0)
    assert ANTHROPIC_KEY not in repr(adapter)
    anthropic_server.script("echo_key", code=400, prefix=470)
    with pytest.raises(km.ServiceError) as caught:
        run(adapter.chat(messages=USER))
    assert ANTHROPIC_KEY[:14] not in _exception_texts(caught.value) and "***" in str(caught.value)


def test_url_user_info_is_redacted_in_repr_and_errors():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    adapter = km.OpenAICompatAdapter(f"http://admin:hunter2@127.0.0.1:{port}/v1", sleep=Waits(), retries=0)
    assert "hunter2" not in repr(adapter)
    with pytest.raises(km.ServiceError) as caught:
        run(adapter.chat(messages=USER))
    assert "hunter2" not in _exception_texts(caught.value)


# -- Anthropic ----------------------------------------------------------------------------------------------------

def test_anthropic_chat_sends_the_messages_api_request(anthropic_server):
    adapter = anthropic_adapter(anthropic_server)
    reply = run(adapter.chat(messages=USER, system="Be brief.", max_tokens=99))
    assert reply == "echo: What colour is the sky?"
    (request,) = anthropic_server.requests
    assert request["path"] == "/v1/messages"
    assert request["headers"]["x-api-key"] == ANTHROPIC_KEY
    assert request["headers"]["anthropic-version"] == "2023-06-01"
    assert "authorization" not in request["headers"]
    assert request["json"] == {"model": "claude-haiku-4-5-20251001", "max_tokens": 99, "messages": USER,
                               "system": "Be brief."}


def test_anthropic_without_system_sends_none_and_honours_the_model_argument(anthropic_server):
    adapter = anthropic_adapter(anthropic_server)
    run(adapter.chat(messages=USER, model="claude-sonnet-4-6"))
    assert anthropic_server.requests[0]["json"] == {"model": "claude-sonnet-4-6", "max_tokens": 1024,
                                                    "messages": USER}


def test_anthropic_moves_system_messages_into_the_system_text(anthropic_server):
    adapter = anthropic_adapter(anthropic_server)
    run(adapter.chat(messages=[{"role": "system", "content": "Answer in French."}] + USER, system="Be brief."))
    body = anthropic_server.requests[0]["json"]
    assert body["messages"] == USER
    assert body["system"] == "Be brief.\n\nAnswer in French."


def test_anthropic_joins_text_blocks_and_skips_others(anthropic_server):
    anthropic_server.replies.append([{"type": "thinking", "thinking": "hmm", "signature": "abc"},
                                     {"type": "text", "text": "Blue, "},
                                     {"type": "text", "text": "mostly."}])
    assert run(anthropic_adapter(anthropic_server).chat(messages=USER)) == "Blue, mostly."


@pytest.mark.parametrize("json_mode, fragment", [
    (True, "JSON object"), ("array", "JSON array"), ({"name": "sky", "schema": SCHEMA}, "JSON Schema (sky)"),
])
def test_anthropic_json_mode_is_an_instruction_in_the_system_text(anthropic_server, json_mode, fragment):
    anthropic_server.replies.append('Here you go:\n```json\n{"colour": "blue"}\n```')
    adapter = anthropic_adapter(anthropic_server)
    reply = run(adapter.chat(messages=USER, system="Be brief.", json_mode=json_mode))
    assert km.parse_llm_json(reply) == {"colour": "blue"}
    body = anthropic_server.requests[0]["json"]
    assert set(body) == {"model", "max_tokens", "messages", "system"}     # no response_format: it would 400
    assert body["system"].startswith("Be brief.\n\n") and fragment in body["system"]
    assert '{"items"' not in body["system"]


def test_anthropic_overloaded_529_is_retried(anthropic_server):
    waits = Waits()
    adapter = anthropic_adapter(anthropic_server, sleep=waits)
    anthropic_server.script("status", code=529, message="Overloaded")
    anthropic_server.script("status", code=429, message="rate limited", headers={"retry-after": "1"})
    assert run(adapter.chat(messages=USER)).startswith("echo:")
    assert waits == [0.5, 1.0]


def test_anthropic_401_raises_at_once_with_the_servers_message(anthropic_server):
    waits = Waits()
    adapter = km.AnthropicAdapter("sk-ant-wrong", base_url=f"http://127.0.0.1:{anthropic_server.port}", sleep=waits)
    with pytest.raises(km.ServiceError) as caught:
        run(adapter.chat(messages=USER))
    assert caught.value.status == 401 and caught.value.transient is False
    assert "HTTP 401: invalid credentials" in str(caught.value)
    assert waits == [] and len(anthropic_server.requests) == 1


def test_anthropic_base_url_with_v1_is_accepted(anthropic_server):
    adapter = km.AnthropicAdapter.create(api_key=ANTHROPIC_KEY,
                                         base_url=f"http://127.0.0.1:{anthropic_server.port}/v1/")
    run(adapter.chat(messages=USER))
    assert anthropic_server.requests[0]["path"] == "/v1/messages"


@pytest.mark.parametrize("payload, fragment", [
    ({"type": "message", "role": "assistant", "content": "not a list"}, "without a content list"),
    ({"type": "message", "role": "assistant", "content": [], "stop_reason": "refusal"}, "declined"),
])
def test_anthropic_replies_of_the_wrong_shape_are_not_transient(anthropic_server, payload, fragment):
    anthropic_server.script("json", payload=payload)
    with pytest.raises(km.ServiceError) as caught:
        run(anthropic_adapter(anthropic_server).chat(messages=USER))
    assert caught.value.transient is False and fragment in str(caught.value)


def test_anthropic_garbage_is_not_transient(anthropic_server):
    anthropic_server.script("garbage")
    with pytest.raises(km.ServiceError, match="not JSON") as caught:
        run(anthropic_adapter(anthropic_server).chat(messages=USER))
    assert caught.value.transient is False


# -- the event loop is never blocked -----------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_two_chats_run_concurrently_and_the_loop_keeps_ticking(kind):
    """The server holds each request until two are in flight, then answers after DELAY: run one after the
    other, the first would be refused; run together, both finish in about one DELAY."""
    delay = 0.4
    server = (OpenAIServer(API_KEY) if kind == "openai" else AnthropicServer(ANTHROPIC_KEY)).start()
    server.barrier = threading.Barrier(2)
    try:
        server.script("rendezvous", times=2, seconds=delay)
        adapter = (openai_adapter if kind == "openai" else anthropic_adapter)(server, retries=0)
        ticks = []

        async def ticker(stop: asyncio.Event) -> None:
            while not stop.is_set():
                ticks.append(time.monotonic())
                await asyncio.sleep(0.02)

        async def both() -> list[str]:
            stop = asyncio.Event()
            ticking = asyncio.create_task(ticker(stop))
            try:
                return await asyncio.gather(
                    adapter.chat(messages=[{"role": "user", "content": "one"}]),
                    adapter.chat(messages=[{"role": "user", "content": "two"}]))
            finally:
                stop.set()
                await ticking

        started = time.monotonic()
        assert run(both()) == ["echo: one", "echo: two"]
        elapsed = time.monotonic() - started
        assert elapsed < 2 * delay, f"{elapsed:.2f} s: the chats ran one after the other"
        assert len(ticks) >= 5                          # the loop ran other work while the chats waited
    finally:
        server.stop()


# -- construction and arguments ------------------------------------------------------------------------------------

def test_create_defaults_to_openai_and_repr_hides_the_key():
    adapter = km.OpenAICompatAdapter.create(api_key=API_KEY)
    assert adapter.base_url == "https://api.openai.com/v1" and adapter.model == "gpt-4o-mini"
    assert API_KEY not in repr(adapter) and "api.openai.com" in repr(adapter)
    local = km.OpenAICompatAdapter.create(base_url="http://localhost:11434/v1", model="llama3.2", timeout=5)
    assert (local.base_url, local.model, local.timeout) == ("http://localhost:11434/v1", "llama3.2", 5.0)
    anthropic = km.AnthropicAdapter(ANTHROPIC_KEY)
    assert anthropic.base_url == "https://api.anthropic.com" and ANTHROPIC_KEY not in repr(anthropic)


@pytest.mark.parametrize("arguments", [
    {"base_url": "ftp://example.com/v1"}, {"base_url": "localhost:11434"}, {"base_url": None},
    {"base_url": "http://x/v1", "timeout": 0}, {"base_url": "http://x/v1", "timeout": float("inf")},
    {"base_url": "http://x/v1", "retries": -1}, {"base_url": "http://x/v1", "model": ""},
    {"base_url": "http://x/v1", "api_key": 12345},
])
def test_openai_constructor_rejects_bad_arguments(arguments):
    with pytest.raises(km.InvalidArgumentError):
        km.OpenAICompatAdapter(**arguments)


def test_anthropic_constructor_needs_a_key():
    for key in ("", "   ", None):
        with pytest.raises(km.InvalidArgumentError):
            km.AnthropicAdapter(key)  # type: ignore[arg-type]


@pytest.mark.parametrize("options", [
    {"messages": []}, {"messages": "hello"}, {"messages": [{"content": "no role"}]},
    {"messages": [{"role": "user", "content": None}]}, {"messages": USER, "max_tokens": 0},
    {"messages": USER, "max_tokens": True}, {"messages": USER, "json_mode": "yaml"},
    {"messages": USER, "json_mode": {"schema": SCHEMA}}, {"messages": USER, "json_mode": {"name": "a b", "schema": {}}},
    {"messages": USER, "json_mode": {"name": "ok", "schema": "not a dict"}},
    {"messages": USER, "json_mode": {"name": "ok", "schema": {}, "strictly": True}},
])
@pytest.mark.parametrize("make", [lambda: km.OpenAICompatAdapter("http://127.0.0.1:9/v1"),
                                  lambda: km.AnthropicAdapter("k", base_url="http://127.0.0.1:9")])
def test_chat_rejects_bad_arguments_before_any_request(options, make):
    with pytest.raises(km.InvalidArgumentError):
        run(make().chat(**options))


def test_anthropic_needs_a_non_system_message():
    adapter = km.AnthropicAdapter("k", base_url="http://127.0.0.1:9")
    with pytest.raises(km.InvalidArgumentError, match="user or assistant"):
        run(adapter.chat(messages=[{"role": "system", "content": "only a system"}]))


def test_schema_strict_can_be_turned_off(openai_server):
    openai_server.replies.append("{}")
    run(openai_adapter(openai_server).chat(messages=USER, json_mode={"name": "x", "schema": {}, "strict": False}))
    assert openai_server.requests[0]["json"]["response_format"]["json_schema"]["strict"] is False


def test_the_adapters_satisfy_the_protocol_shape():
    import inspect
    expected = inspect.signature(km.LLMAdapter.chat)
    for adapter_class in (km.OpenAICompatAdapter, km.AnthropicAdapter):
        signature = inspect.signature(adapter_class.chat)
        assert list(signature.parameters) == list(expected.parameters)
        assert {name: p.default for name, p in signature.parameters.items()} == \
            {name: p.default for name, p in expected.parameters.items()}
        assert inspect.iscoroutinefunction(adapter_class.chat)


# -- parse_llm_json ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("reply, expected", [
    ('{"a": 1}', {"a": 1}),
    ('  [1, 2]\n', [1, 2]),
    ('```json\n{"a": [1, 2]}\n```', {"a": [1, 2]}),
    ('```\n["x"]\n```', ["x"]),
    ('Sure! Here it is:\n```json\n{"a": 1}\n```\nAnything else?', {"a": 1}),
    ('The answer is {"a": {"b": [1]}} as requested.', {"a": {"b": [1]}}),
    ('Use {curly braces} like this: {"ok": true}', {"ok": True}),
    ('An example [1, 2] first, then the answer:\n```json\n{"real": 1}\n```', {"real": 1}),
    ('["first"] and {"second": 2}', ["first"]),
    ('```json\n"a string" then {"late": 1}\n```', {"late": 1}),
])
def test_parse_llm_json_finds_the_first_json_value(reply, expected):
    assert km.parse_llm_json(reply) == expected


@pytest.mark.parametrize("reply", ["", "no json here", "{not: json}", '```json\n{"cut": "off', "[" * 5000,
                                   "{" * 300 + '"a": 1', "42", '"yes"', "```json\ntrue\n```", "```\n```", 42, None],
                         ids=["empty", "prose", "not-json", "cut-off", "deep", "braces", "number", "string",
                              "fenced-scalar", "empty-fence", "int", "none"])
def test_parse_llm_json_raises_a_value_error_without_an_object_or_array(reply):
    with pytest.raises(km.InvalidArgumentError) as caught:
        km.parse_llm_json(reply)
    assert isinstance(caught.value, ValueError)


@pytest.mark.parametrize("reply, expect, expected", [
    ('{"angles": ["a", "b"]}', list, ["a", "b"]),                     # a forced object holding the array
    ('{"angles": ["a"], "note": "x"}', list, ["a"]),                  # else the search goes on, inside it
    ('Here: {"k": 1} and then ["z"]', list, ["z"]),
    ('```json\n{"k": 1}\n```', dict, {"k": 1}),
    ('[1, {"a": 1}]', dict, {"a": 1}),
    ('[["x"]]', list, [["x"]]),
    ('{"k": [1]}', None, {"k": [1]}),                                 # without expect: the first value
])
def test_parse_llm_json_expect_picks_the_first_value_of_that_kind(reply, expect, expected):
    assert km.parse_llm_json(reply, expect=expect) == expected


def test_parse_llm_json_expect_raises_when_nothing_fits():
    with pytest.raises(km.InvalidArgumentError, match="no JSON array"):
        km.parse_llm_json('{"a": 1, "b": 2}', expect=list)
    with pytest.raises(km.InvalidArgumentError, match="expect must be"):
        km.parse_llm_json("[]", expect=str)


# Strings without backticks: a fenced block inside a JSON string could itself parse, and a fence wins.
json_text = st.text(alphabet=st.characters(blacklist_characters="`", blacklist_categories=("Cs",)), max_size=10)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | json_text,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(json_text, children, max_size=4),
    max_leaves=12)
prose = st.text(alphabet=st.characters(blacklist_characters="[]{}`\"", blacklist_categories=("Cs",)), max_size=40)


@settings(max_examples=150, deadline=None)
@given(value=st.one_of(st.lists(json_values, max_size=4), st.dictionaries(json_text, json_values, max_size=4)),
       before=prose, after=prose, fenced=st.booleans())
def test_parse_llm_json_recovers_any_object_or_array_wrapped_in_prose(value, before, after, fenced):
    body = json.dumps(value)
    reply = f"{before}\n```json\n{body}\n```\n{after}" if fenced else f"{before} {body} {after}"
    assert km.parse_llm_json(reply) == value


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_parse_llm_json_only_ever_returns_a_value_or_raises_invalid_argument(text):
    try:
        km.parse_llm_json(text)
    except km.InvalidArgumentError:
        pass
