"""Embeddings: ``OpenAICompatEmbeddingAdapter`` against a real loopback server speaking OpenAI's
``POST /v1/embeddings``, and ``Memory(embedder=...)`` storing vectors, fusing them into recall, surviving
a service that is down and backfilling once it is back.

The server is a ``ThreadingHTTPServer`` on 127.0.0.1 (port 0) in a thread. Its embedding is a hashed
bag of words over a tiny synonym table, so "automobile" lands on "car" and nothing else does. Each test can
script its next answers: HTTP errors, a hang, a dropped connection, garbage, the wrong number of vectors,
data out of index order.
"""

from __future__ import annotations

import hashlib
import http.server
import json
import math
import re
import socket
import threading
import time
import urllib.error
import urllib.request
from collections import deque
from typing import Any

import pytest

import kumiho_memory as km

API_KEY = "sk-test-0123456789abcdefSECRET"
MODEL = "toy-embed-1"

# -- the server's embedding: hashed bag of concepts -----------------------------------------------------------

DIM = 256
SYNONYMS = {
    "automobile": "car", "automobiles": "car", "cars": "car", "vehicle": "car", "sedan": "car", "auto": "car",
    "puppy": "dog", "dogs": "dog", "hound": "dog", "canine": "dog",
    "physician": "doctor", "doctors": "doctor", "medic": "doctor",
    "holiday": "vacation", "trip": "vacation", "journey": "vacation",
}
STOP = {"a", "an", "the", "i", "my", "to", "of", "in", "on", "at", "is", "was", "do", "did", "what", "which",
        "we", "all", "for", "every", "and"}


def toy_embedding(text: str) -> list[float]:
    """Deterministic, un-normalized: one signed hashed dimension per concept, plus a small bias."""
    vector = [0.0] * DIM
    vector[0] = 0.05                 # never all zeros, even for a text of stopwords
    for word in re.findall(r"[a-z]+", text.lower()):
        if word in STOP:
            continue
        digest = hashlib.sha256(SYNONYMS.get(word, word).encode("utf-8")).digest()
        vector[1 + int.from_bytes(digest[:4], "big") % (DIM - 1)] += 3.0 if digest[4] & 1 else -3.0
    return vector


def test_toy_embedding_puts_synonyms_together():
    assert km.cosine(toy_embedding("automobile"), toy_embedding("I drive an old red car to work.")) > 0.4
    for other in ("The weather in Lisbon was sunny all week.", "My sister adopted a puppy named Biscuit.",
                  "We booked a table at the Italian restaurant.", "The quarterly report is due on Friday."):
        assert km.cosine(toy_embedding("automobile"), toy_embedding(other)) < 0.1


# -- the server -------------------------------------------------------------------------------------------------

class EmbeddingServer:
    """A scriptable OpenAI-compatible embeddings server on loopback.

    ``script(action, times=n, **options)`` queues what the next ``n`` requests get instead of a normal
    answer: ``status`` (HTTP error ``code``), ``hang`` (sleep ``seconds``, then answer), ``garbage``
    (``body`` bytes with 200), ``json`` (``payload`` with 200), ``count`` (``delta`` vectors more or
    fewer), ``reverse`` (data in reverse index order), ``drop`` (close without answering), ``truncate``
    (promise more bytes than sent), ``echo_auth`` (500 whose body repeats the Authorization header).
    Every request is recorded in ``requests``.
    """

    def __init__(self, api_key: str | None = None) -> None:
        self.api_key = api_key
        self.requests: list[dict[str, Any]] = []
        self._script: deque[tuple[str, dict[str, Any]]] = deque()
        self._lock = threading.Lock()
        self.release = threading.Event()       # set at teardown to end any hang at once
        self.port = 0
        self._httpd: http.server.ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # lifecycle ------------------------------------------------------------------------------------------
    def start(self) -> "EmbeddingServer":
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # keep pytest output clean
                pass

            def do_POST(self) -> None:  # noqa: N802
                owner._handle(self)

            def do_GET(self) -> None:  # noqa: N802
                owner._send_json(self, 405, {"error": {"message": "use POST", "type": "invalid_request_error"}})

        httpd = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        httpd.daemon_threads = True
        httpd.block_on_close = False
        self._httpd = httpd
        self.port = httpd.server_address[1]
        self._thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop listening (connections to ``port`` are then refused); ``start()`` again reuses the port."""
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._thread.join(5)
            self._httpd = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def script(self, action: str, times: int = 1, **options: Any) -> None:
        with self._lock:
            for _ in range(times):
                self._script.append((action, options))

    @property
    def inputs(self) -> list[list[str]]:
        """The ``input`` lists of the recorded requests, in order."""
        return [request["json"]["input"] for request in self.requests if isinstance(request.get("json"), dict)]

    # answering ------------------------------------------------------------------------------------------
    @staticmethod
    def _send_json(handler: http.server.BaseHTTPRequestHandler, status: int, payload: Any) -> None:
        EmbeddingServer._send(handler, status, json.dumps(payload).encode("utf-8"), "application/json")

    @staticmethod
    def _send(handler: http.server.BaseHTTPRequestHandler, status: int, body: bytes, content_type: str) -> None:
        handler.send_response(status)
        handler.send_header("Content-Type", content_type)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    def _handle(self, handler: http.server.BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length)
        record: dict[str, Any] = {"method": "POST", "path": handler.path,
                                  "headers": {k.lower(): v for k, v in handler.headers.items()}, "raw": raw}
        try:
            record["json"] = json.loads(raw.decode("utf-8"))
        except ValueError:
            record["json"] = None
        with self._lock:
            self.requests.append(record)
            action, options = self._script.popleft() if self._script else ("ok", {})
        if handler.path.rstrip("/") != "/v1/embeddings":
            return self._send_json(handler, 404, {"error": {"message": f"no route {handler.path}",
                                                            "type": "invalid_request_error"}})
        if self.api_key is not None and handler.headers.get("Authorization") != f"Bearer {self.api_key}":
            return self._send_json(handler, 401, {"error": {"message": "Incorrect API key provided.",
                                                            "type": "invalid_request_error",
                                                            "code": "invalid_api_key"}})
        if action == "status":
            code = options["code"]
            return self._send_json(handler, code, {"error": {"message": f"scripted failure {code}",
                                                             "type": "server_error" if code >= 500 else "error"}})
        if action == "echo_auth":
            return self._send_json(handler, 500, {"error": {
                "message": f"upstream rejected {handler.headers.get('Authorization')}", "type": "server_error"}})
        if action == "drop":
            handler.close_connection = True
            handler.connection.shutdown(socket.SHUT_RDWR)
            return None
        if action == "truncate":
            handler.send_response(200)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", "5000")
            handler.end_headers()
            handler.wfile.write(b'{"object": "list", "data": [')
            handler.wfile.flush()
            handler.close_connection = True
            handler.connection.shutdown(socket.SHUT_RDWR)
            return None
        if action == "garbage":
            return self._send(handler, 200, options.get("body", b"<html>502 Bad Gateway</html>"),
                              options.get("content_type", "text/html"))
        if action == "json":
            return self._send_json(handler, 200, options["payload"])
        if action == "hang":
            self.release.wait(options.get("seconds", 5.0))
        body = record["json"]
        if not isinstance(body, dict) or not isinstance(body.get("model"), str) or "input" not in body:
            return self._send_json(handler, 400, {"error": {"message": "body must be {model, input}",
                                                            "type": "invalid_request_error"}})
        texts = [body["input"]] if isinstance(body["input"], str) else body["input"]
        if not isinstance(texts, list) or not all(isinstance(text, str) for text in texts):
            return self._send_json(handler, 400, {"error": {"message": "input must be a string or strings",
                                                            "type": "invalid_request_error"}})
        data = [{"object": "embedding", "index": index, "embedding": toy_embedding(text)}
                for index, text in enumerate(texts)]
        if action == "count":
            delta = options["delta"]
            data = data[:delta] if delta < 0 else data + data[:delta]
        if action == "reverse":
            data.reverse()
        tokens = sum(len(text.split()) for text in texts)
        self._send_json(handler, 200, {"object": "list", "data": data, "model": body["model"],
                                       "usage": {"prompt_tokens": tokens, "total_tokens": tokens}})


@pytest.fixture(autouse=True)
def _no_proxies(monkeypatch):
    """urllib honours *_proxy variables; loopback traffic must go straight to the test server."""
    for name in ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")


@pytest.fixture
def server():
    """An open server (no API key required); stopped at teardown."""
    instance = EmbeddingServer().start()
    yield instance
    instance.release.set()
    instance.stop()


@pytest.fixture
def keyed_server():
    """A server that answers 401 unless ``Authorization: Bearer API_KEY`` is sent."""
    instance = EmbeddingServer(api_key=API_KEY).start()
    yield instance
    instance.release.set()
    instance.stop()


class Sleeps(list):
    """An injected ``sleep`` that records the delays instead of waiting."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def adapter_for(server: EmbeddingServer, **options: Any) -> km.OpenAICompatEmbeddingAdapter:
    options.setdefault("model", MODEL)
    options.setdefault("sleep", Sleeps())
    options.setdefault("timeout", 5.0)
    return km.OpenAICompatEmbeddingAdapter(server.base_url, **options)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def close(left: list[float], right: list[float]) -> bool:
    return len(left) == len(right) and all(math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9)
                                           for a, b in zip(left, right))


# -- the fake server keeps to the protocol ---------------------------------------------------------------------

def _post(url: str, payload: Any, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    request = urllib.request.Request(url, data=json.dumps(payload).encode(), method="POST",
                                     headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_server_speaks_the_embeddings_protocol(keyed_server):
    url = keyed_server.base_url + "/embeddings"
    status, body = _post(url, {"model": MODEL, "input": "one text"}, {"Authorization": f"Bearer {API_KEY}"})
    assert status == 200 and body["object"] == "list" and body["model"] == MODEL
    assert body["data"] == [{"object": "embedding", "index": 0, "embedding": toy_embedding("one text")}]
    assert body["usage"] == {"prompt_tokens": 2, "total_tokens": 2}
    status, body = _post(url, {"model": MODEL, "input": ["a b", "c"]}, {"Authorization": f"Bearer {API_KEY}"})
    assert [entry["index"] for entry in body["data"]] == [0, 1]
    status, body = _post(url, {"model": MODEL, "input": ["x"]}, {"Authorization": "Bearer wrong"})
    assert status == 401 and body["error"]["code"] == "invalid_api_key"
    status, _ = _post(url, {"model": MODEL, "input": ["x"]})
    assert status == 401


# -- the adapter on the wire -----------------------------------------------------------------------------------

def test_adapter_sends_the_openai_request(keyed_server):
    adapter = adapter_for(keyed_server, api_key=API_KEY)
    vectors = adapter.embed(["first text", "second text"])
    assert [close(v, toy_embedding(t)) for v, t in zip(vectors, ["first text", "second text"])] == [True, True]
    assert all(isinstance(value, float) for vector in vectors for value in vector)
    [request] = keyed_server.requests
    assert request["method"] == "POST" and request["path"] == "/v1/embeddings"
    assert request["json"] == {"model": MODEL, "input": ["first text", "second text"]}
    assert request["headers"]["authorization"] == f"Bearer {API_KEY}"
    assert request["headers"]["content-type"] == "application/json"


def test_adapter_without_key_sends_no_authorization(server):
    adapter = km.OpenAICompatEmbeddingAdapter(server.base_url + "/", model=MODEL)   # trailing slash is fine
    assert len(adapter.embed(["hello"])) == 1
    [request] = server.requests
    assert request["path"] == "/v1/embeddings"
    assert "authorization" not in request["headers"]


def test_adapter_model_can_be_overridden_per_call(server):
    adapter_for(server).embed(["x"], model="other-model")
    assert server.requests[0]["json"]["model"] == "other-model"


def test_adapter_batches_by_batch_size(server):
    texts = [f"text number {n}" for n in range(5)]
    vectors = adapter_for(server, batch_size=2).embed(texts)
    assert server.inputs == [texts[0:2], texts[2:4], texts[4:5]]
    assert all(close(vector, toy_embedding(text)) for vector, text in zip(vectors, texts))


def test_adapter_orders_vectors_by_index(server):
    texts = ["car", "dog", "doctor", "vacation"]
    server.script("reverse")
    vectors = adapter_for(server).embed(texts)
    assert all(close(vector, toy_embedding(text)) for vector, text in zip(vectors, texts))


def test_adapter_empty_input_makes_no_request(server):
    assert adapter_for(server).embed([]) == []
    assert server.requests == []


@pytest.mark.parametrize("texts", ["a single string", ["ok", 3], [None]])
def test_adapter_rejects_texts_that_are_not_a_list_of_strings(server, texts):
    with pytest.raises(km.InvalidArgumentError):
        adapter_for(server).embed(texts)
    assert server.requests == []


@pytest.mark.parametrize("options", [{"batch_size": 0}, {"batch_size": -1}])
def test_adapter_rejects_bad_options(options):
    with pytest.raises(km.InvalidArgumentError):
        km.OpenAICompatEmbeddingAdapter("http://127.0.0.1:9/v1", **options)


def test_adapter_rejects_a_url_that_is_not_http():
    with pytest.raises(km.InvalidArgumentError):
        km.OpenAICompatEmbeddingAdapter("127.0.0.1:8080/v1")


def test_adapter_is_an_embedding_adapter(server):
    adapter = adapter_for(server)
    assert km.embed_function(adapter) == adapter.embed


# -- retries and failures --------------------------------------------------------------------------------------

@pytest.mark.parametrize("code", [429, 500, 503])
def test_adapter_retries_transient_failures_then_succeeds(server, code):
    sleeps = Sleeps()
    server.script("status", times=2, code=code)
    vectors = adapter_for(server, retries=2, sleep=sleeps).embed(["car"])
    assert close(vectors[0], toy_embedding("car"))
    assert len(server.requests) == 3
    assert len(sleeps) == 2 and all(delay > 0 for delay in sleeps) and sleeps[1] > sleeps[0]   # backoff


@pytest.mark.parametrize("code", [429, 500, 502, 503])
def test_adapter_gives_up_after_retries_with_a_transient_service_error(server, code):
    sleeps = Sleeps()
    server.script("status", times=10, code=code)
    with pytest.raises(km.ServiceError) as caught:
        adapter_for(server, retries=3, sleep=sleeps).embed(["car"])
    error = caught.value
    assert isinstance(error, ConnectionError) and isinstance(error, km.KumihoMemoryError)
    assert error.transient is True and error.status == code
    assert str(code) in str(error)
    assert len(server.requests) == 4 and len(sleeps) == 3
    assert sleeps == sorted(sleeps) and sleeps[0] < sleeps[-1]


def test_adapter_retries_a_refused_connection_then_raises():
    sleeps = Sleeps()
    adapter = km.OpenAICompatEmbeddingAdapter(f"http://127.0.0.1:{free_port()}/v1", model=MODEL, retries=2,
                                              sleep=sleeps, timeout=2.0)
    with pytest.raises(km.ServiceError) as caught:
        adapter.embed(["car"])
    assert caught.value.transient is True and caught.value.status is None
    assert len(sleeps) == 2


def test_adapter_retries_a_dropped_connection(server):
    server.script("drop")
    vectors = adapter_for(server, retries=1).embed(["dog"])
    assert close(vectors[0], toy_embedding("dog")) and len(server.requests) == 2


@pytest.mark.parametrize("code", [400, 401, 403, 404, 422])
def test_adapter_does_not_retry_client_errors(server, code):
    sleeps = Sleeps()
    server.script("status", times=5, code=code)
    with pytest.raises(km.ServiceError) as caught:
        adapter_for(server, retries=3, sleep=sleeps).embed(["car"])
    assert caught.value.transient is False and caught.value.status == code
    assert len(server.requests) == 1 and sleeps == []


def test_adapter_wrong_key_is_a_401_without_retries(keyed_server):
    sleeps = Sleeps()
    with pytest.raises(km.ServiceError) as caught:
        adapter_for(keyed_server, api_key="sk-wrong-key-XYZ", retries=3, sleep=sleeps).embed(["car"])
    assert caught.value.status == 401 and caught.value.transient is False
    assert len(keyed_server.requests) == 1 and sleeps == []
    assert "sk-wrong-key-XYZ" not in str(caught.value)


def test_adapter_hang_is_bounded_by_timeout(server):
    server.script("hang", times=5, seconds=5.0)
    started = time.monotonic()
    with pytest.raises(km.ServiceError) as caught:
        adapter_for(server, timeout=0.3, retries=1).embed(["car"])
    elapsed = time.monotonic() - started
    assert caught.value.transient is True
    assert elapsed < 2.5, elapsed               # two attempts of 0.3 s, not the server's 5 s
    assert len(server.requests) == 2


def test_adapter_recovers_after_a_hang(server):
    server.script("hang", seconds=5.0)
    vectors = adapter_for(server, timeout=0.3, retries=1).embed(["car"])
    assert close(vectors[0], toy_embedding("car"))


@pytest.mark.parametrize("body, content_type", [
    (b"<html>502 Bad Gateway</html>", "text/html"),
    (b"", "application/json"),
    (b"{\"data\": [", "application/json"),
    (b"\xff\xfe\x00garbage", "application/octet-stream"),
])
def test_adapter_garbage_is_a_permanent_service_error(server, body, content_type):
    sleeps = Sleeps()
    server.script("garbage", times=5, body=body, content_type=content_type)
    with pytest.raises(km.ServiceError) as caught:
        adapter_for(server, retries=3, sleep=sleeps).embed(["car"])
    assert caught.value.transient is False
    assert len(server.requests) == 1 and sleeps == []


@pytest.mark.parametrize("payload", [
    {"object": "list", "model": MODEL},                                     # no data
    {"error": {"message": "overloaded"}},
    {"object": "list", "data": None},
    {"object": "list", "data": {"0": [0.1]}},
    {"object": "list", "data": [{"object": "embedding", "index": 0}]},     # no embedding
    {"object": "list", "data": [{"object": "embedding", "index": 0, "embedding": ["x", "y"]}]},
    {"object": "list", "data": [{"object": "embedding", "index": 0, "embedding": None}]},
    [[0.1, 0.2]],
    "just a string",
])
def test_adapter_json_without_data_is_a_permanent_service_error(server, payload):
    server.script("json", times=5, payload=payload)
    with pytest.raises(km.ServiceError) as caught:
        adapter_for(server, retries=3).embed(["car"])
    assert caught.value.transient is False
    assert len(server.requests) == 1


@pytest.mark.parametrize("delta", [-1, 1])
def test_adapter_wrong_number_of_vectors_is_a_service_error(server, delta):
    server.script("count", delta=delta)
    with pytest.raises(km.ServiceError) as caught:
        adapter_for(server).embed(["car", "dog"])
    assert caught.value.transient is False
    assert "2 texts" in str(caught.value)


def test_adapter_truncated_response_is_a_service_error(server):
    """The server promises 5,000 bytes and hangs up after 30: that is a service failure, not an
    ``http.client`` exception escaping the adapter."""
    server.script("truncate", times=5)
    with pytest.raises(km.ServiceError):
        adapter_for(server, retries=1).embed(["car"])


# -- credentials never leak ------------------------------------------------------------------------------------

def _failures(server: EmbeddingServer) -> list[tuple[str, dict[str, Any]]]:
    return [("status", {"code": 500}), ("status", {"code": 400}), ("garbage", {}),
            ("json", {"payload": {"nothing": True}}), ("count", {"delta": 1}), ("hang", {"seconds": 5.0})]


def test_api_key_is_not_in_repr():
    adapter = km.OpenAICompatEmbeddingAdapter("http://127.0.0.1:9/v1", api_key=API_KEY, model=MODEL)
    assert API_KEY not in repr(adapter) and "SECRET" not in repr(adapter)
    assert "127.0.0.1:9" in repr(adapter) and MODEL in repr(adapter)


@pytest.mark.parametrize("scenario", range(6))
def test_api_key_is_not_in_any_error_message(keyed_server, scenario):
    action, options = _failures(keyed_server)[scenario]
    keyed_server.script(action, times=5, **options)
    with pytest.raises(km.ServiceError) as caught:
        adapter_for(keyed_server, api_key=API_KEY, retries=1, timeout=0.3).embed(["car"])
    assert API_KEY not in str(caught.value) and API_KEY not in repr(caught.value)
    assert keyed_server.requests[0]["headers"]["authorization"] == f"Bearer {API_KEY}"   # it was sent


def test_api_key_is_not_in_the_error_when_refused():
    adapter = km.OpenAICompatEmbeddingAdapter(f"http://127.0.0.1:{free_port()}/v1", api_key=API_KEY,
                                              retries=0, sleep=Sleeps())
    with pytest.raises(km.ServiceError) as caught:
        adapter.embed(["car"])
    assert API_KEY not in str(caught.value)


def test_api_key_is_not_in_the_error_when_the_server_echoes_it(keyed_server):
    keyed_server.script("echo_auth", times=5)
    with pytest.raises(km.ServiceError) as caught:
        adapter_for(keyed_server, api_key=API_KEY, retries=1).embed(["car"])
    assert API_KEY not in str(caught.value)


def test_url_credentials_are_redacted_in_repr_and_errors(server):
    url = f"http://alice:hunter2@127.0.0.1:{server.port}/v1"
    adapter = km.OpenAICompatEmbeddingAdapter(url, model=MODEL, retries=1, sleep=Sleeps(), timeout=2.0)
    assert "hunter2" not in repr(adapter)
    server.script("status", times=5, code=503)
    try:
        adapter.embed(["car"])
    except km.ServiceError as exc:
        assert "hunter2" not in str(exc) and "alice:" not in str(exc)
    refused = km.OpenAICompatEmbeddingAdapter(f"http://alice:hunter2@127.0.0.1:{free_port()}/v1",
                                              retries=0, sleep=Sleeps())
    with pytest.raises(km.ServiceError) as caught:
        refused.embed(["car"])
    assert "hunter2" not in str(caught.value)


def test_url_credentials_are_redacted_when_the_url_is_rejected():
    with pytest.raises(km.InvalidArgumentError) as caught:
        km.OpenAICompatEmbeddingAdapter("ftp://alice:hunter2@example.invalid/v1")
    assert "hunter2" not in str(caught.value)


# -- unit_vector and embed_function ----------------------------------------------------------------------------

def test_unit_vector_scales_to_length_one():
    vector = km.unit_vector([3, 4])
    assert vector == pytest.approx((0.6, 0.8)) and isinstance(vector, tuple)
    assert math.isclose(sum(v * v for v in km.unit_vector(toy_embedding("car dog"))), 1.0, rel_tol=1e-9)


@pytest.mark.parametrize("bad", [[], [0.0, 0.0], [float("nan"), 1.0], [float("inf"), 1.0], ["a", "b"], None,
                                 [None]])
def test_unit_vector_rejects_what_is_not_an_embedding(bad):
    with pytest.raises(km.InvalidArgumentError):
        km.unit_vector(bad)


def test_embed_function_accepts_an_adapter_or_a_callable():
    class WithEmbed:
        def embed(self, texts):
            return [[1.0] for _ in texts]

    def plain(texts):
        return [[2.0] for _ in texts]

    assert km.embed_function(WithEmbed())(["a"]) == [[1.0]]
    assert km.embed_function(plain) is plain
    for bad in (None, 42, "text"):
        with pytest.raises(km.InvalidArgumentError):
            km.embed_function(bad)


# -- Memory with an embedder -------------------------------------------------------------------------------------

CORPUS = [
    "I drive an old red car to work.",
    "The weather in Lisbon was sunny all week.",
    "My sister adopted a puppy named Biscuit.",
    "We booked a table at the Italian restaurant.",
    "The quarterly report is due on Friday.",
]


def remember_all(memory: km.Memory, texts: list[str] = CORPUS) -> dict[str, str]:
    return {text: memory.remember(text, space="notes") for text in texts}


def contents(results: list[dict[str, Any]]) -> list[str]:
    return [result["content"] for result in results]


def test_remember_stores_a_vector(server, make_memory):
    memory = make_memory(embedder=adapter_for(server))
    krefs = remember_all(memory)
    assert memory.backend.revisions_without_vector(memory.project, 100) == []
    assert memory.last_embedding_error is None
    # one request a memory, and the text embedded carries the content
    assert len(server.inputs) == len(CORPUS)
    assert all(text in batch[0] for text, batch in zip(CORPUS, server.inputs))
    assert memory.get(krefs[CORPUS[0]])["content"] == CORPUS[0]


def test_hybrid_recall_finds_a_synonym_that_lexical_recall_cannot(server, make_memory):
    memory = make_memory(embedder=adapter_for(server))
    remember_all(memory)
    assert CORPUS[0] not in contents(memory.recall("automobile", limit=5, semantic_weight=0))
    before = len(server.requests)
    memory.recall("automobile", limit=5, semantic_weight=0)
    assert len(server.requests) == before                  # lexical only: the service is not asked
    hybrid = memory.recall("automobile", limit=5)          # default semantic_weight
    assert contents(hybrid)[0] == CORPUS[0]
    assert server.inputs[-1] == ["automobile"]
    assert contents(memory.recall("automobile", limit=1, semantic_weight=1.0)) == [CORPUS[0]]


def test_hybrid_recall_keeps_lexical_matches(server, make_memory):
    memory = make_memory(embedder=adapter_for(server))
    remember_all(memory)
    assert contents(memory.recall("quarterly report", limit=1))[0] == CORPUS[4]
    assert contents(memory.recall("puppy Biscuit", limit=1))[0] == CORPUS[2]
    assert contents(memory.recall("my canine", limit=1))[0] == CORPUS[2]     # synonym of the puppy


def test_hybrid_recall_respects_the_space(server, make_memory):
    memory = make_memory(embedder=adapter_for(server))
    memory.remember("The car needs new tyres.", space="garage")
    memory.remember("Lunch with Dana on Monday.", space="diary")
    assert "The car needs new tyres." not in contents(memory.recall("automobile", space="diary"))
    assert contents(memory.recall("automobile", space="garage"))[0] == "The car needs new tyres."


def test_a_plain_callable_works_as_embedder(make_memory):
    calls: list[list[str]] = []

    def embed(texts: list[str]) -> list[list[float]]:
        calls.append(list(texts))
        return [toy_embedding(text) for text in texts]

    memory = make_memory(embedder=embed)
    remember_all(memory)
    assert memory.backend.revisions_without_vector(memory.project, 100) == []
    assert contents(memory.recall("automobile"))[0] == CORPUS[0]
    assert CORPUS[0] not in contents(memory.recall("automobile", semantic_weight=0))
    assert calls[-1] == ["automobile"]


def test_vectors_persist_with_the_store(server, make_memory):
    memory = make_memory(embedder=adapter_for(server))
    remember_all(memory)
    memory.close()
    reopened = make_memory(reopen=True, embedder=adapter_for(server))
    before = len(server.requests)
    assert contents(reopened.recall("automobile"))[0] == CORPUS[0]
    assert server.inputs[before:] == [["automobile"]]          # only the query was embedded


def test_server_down_loses_nothing_and_backfill_restores_semantic_recall(server, make_memory):
    sleeps = Sleeps()
    memory = make_memory(embedder=adapter_for(server, retries=1, sleep=sleeps, timeout=2.0))
    remember_all(memory, CORPUS[1:])                    # written while the service is up
    server.stop()                                        # connections are refused from now on
    car = memory.remember(CORPUS[0], space="notes")      # still stored
    assert memory.get(car)["content"] == CORPUS[0]
    error = memory.last_embedding_error
    assert isinstance(error, km.ServiceError) and error.transient is True
    pending = memory.backend.revisions_without_vector(memory.project, 100)
    assert [str(record.kref) for record in pending] == [car]
    # recall falls back to words alone: it works, and cannot see the synonym
    assert contents(memory.recall("red car", limit=1)) == [CORPUS[0]]
    assert CORPUS[0] not in contents(memory.recall("automobile"))
    assert memory.backfill_embeddings() == 0             # still down: no vectors, no exception
    server.start()                                        # back, on the same port
    assert memory.backfill_embeddings() == 1
    assert memory.backend.revisions_without_vector(memory.project, 100) == []
    assert memory.backfill_embeddings() == 0              # nothing left to do
    assert contents(memory.recall("automobile"))[0] == CORPUS[0]


def test_service_errors_never_fail_a_write(server, make_memory):
    memory = make_memory(embedder=adapter_for(server, retries=0))
    for action, options in [("status", {"code": 500}), ("status", {"code": 401}), ("garbage", {}),
                            ("count", {"delta": 1}), ("json", {"payload": {"data": [
                                {"index": 0, "embedding": [0.0, 0.0]}]}})]:
        server.script(action, **options)
        kref = memory.remember(f"note written during {action} {options}", space="notes")
        assert memory.get(kref)["content"].startswith("note written during")
        assert isinstance(memory.last_embedding_error, km.ServiceError)
    assert len(memory.backend.revisions_without_vector(memory.project, 100)) == 5
    assert memory.backfill_embeddings() == 5


def test_service_error_in_recall_falls_back_to_lexical(server, make_memory):
    memory = make_memory(embedder=adapter_for(server, retries=0))
    remember_all(memory)
    server.script("status", code=503)
    assert contents(memory.recall("quarterly report", limit=1)) == [CORPUS[4]]
    assert memory.last_embedding_error.status == 503


def test_backfill_batches_and_honours_max_revisions(server, make_memory):
    memory = make_memory(embedder=adapter_for(server))
    server.stop()
    remember_all(memory)
    assert len(memory.backend.revisions_without_vector(memory.project, 100)) == 5
    server.start()
    before = len(server.requests)
    assert memory.backfill_embeddings(batch_size=2, max_revisions=3) == 3
    assert [len(batch) for batch in server.inputs[before:]] == [2, 1]
    assert len(memory.backend.revisions_without_vector(memory.project, 100)) == 2
    before = len(server.requests)
    assert memory.backfill_embeddings(batch_size=2) == 2
    assert [len(batch) for batch in server.inputs[before:]] == [2]
    assert contents(memory.recall("automobile"))[0] == CORPUS[0]


def test_backfill_needs_an_embedder(memory):
    with pytest.raises(km.InvalidArgumentError):
        memory.backfill_embeddings()


def test_a_wrong_count_from_a_callable_is_a_service_error(make_memory):
    memory = make_memory(embedder=lambda texts: [toy_embedding("x")] * (len(texts) + 1))
    kref = memory.remember("The car needs new tyres.")
    assert memory.get(kref)["content"] == "The car needs new tyres."
    assert memory.last_embedding_error.transient is False


@pytest.mark.parametrize("behaviour", ["raises", "returns_none"])
def test_any_failing_callable_never_fails_a_write(make_memory, behaviour):
    def broken(texts):
        if behaviour == "raises":
            raise RuntimeError("model crashed")
        return None

    memory = make_memory(embedder=broken)
    kref = memory.remember("The car needs new tyres.")
    assert memory.get(kref)["content"] == "The car needs new tyres."
    assert isinstance(memory.last_embedding_error, km.ServiceError)


def test_next_recall_adds_missing_vectors(server, make_memory):
    memory = make_memory(embedder=adapter_for(server, retries=0))
    server.stop()
    remember_all(memory)
    server.start()
    memory.recall("automobile")
    assert memory.backend.revisions_without_vector(memory.project, 100) == []
