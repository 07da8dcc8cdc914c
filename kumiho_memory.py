"""kumiho_memory: long-term memory for AI agents in one file, standard library only.

Copy this file into an agent project and you get a versioned memory graph that works offline with
nothing installed: items with immutable revisions, movable tags with a time-travel history, typed edges
between revisions, kref addresses compatible with the Kumiho SDK, and strong recall (BM25 with the signals a
memory has: who, when, thread neighbours, typed edges, evidence grades; embeddings optional). Give it a path
and it is durable (SQLite in WAL mode); leave the path out and it lives in memory.

Quickstart::

    from kumiho_memory import Memory
    with Memory("agent.db") as memory:
        kref = memory.remember("The user prefers dark mode", space="prefs", key="ui.theme")
        memory.recall("dark mode")[0]["kref"]      # 'kref://CognitiveMemory/prefs/ui-theme-....memory?r=1'
        memory.tag(kref, "published")

Sections (each uses only those above it):

    1. header         imports, version, public names
    2. errors         one root error; leaves also subclass the matching builtin
    3. foundations    clocks, id factories, instants, canonical JSON, hashing, lazy imports
    4. configuration  frozen settings and the environment variables they read (only when asked)
    5. data model     krefs, names, evidence levels, record types
    6. text           tokenizer, Porter stemmer, BM25, the impact-ordered recall index
    7. privacy        credential and PII detection, placeholders, the one screening policy for every way
                      into the store
    8. storage        the graph-backend interface, the embedded SQLite engine, the Kumiho server backend
    9. working memory session buffers: in process (or in the store file) and on Redis, session ids
   10. recall         time words, filters, evidence weights, reranking, embeddings, LLM adapters, graph
                      augmentation, belief similarity and relation matching, prompt context, anticipatory
                      recall (prefetch)
   11. consolidation  conversation summaries, write-time assessors, the retry queue, space attributes
   12. export         Mermaid renderings of the graph
   13. facades        the sync ``Memory`` (and the default memory) and the async ``UniversalMemoryManager``
   14. built on it    space profiles, skill ingest, Dream State
   15. integrations   list and show, the memory browser (``http.server``), LangGraph's store, the Agents SDK
                      session
   16. CLI            ``main(argv=None) -> int``

Optional extras (in a checkout: ``pip install -e '.[EXTRA]'``), each imported only by the code that needs
it: ``redis`` (working memory on Redis), ``kumiho`` (the Kumiho graph server), ``mcp`` (the MCP server
script), ``langgraph`` (``langgraph_store``), ``agents`` (``agents_session``), ``embed`` (embedding
adapters). Everything else works with the standard library: the embedding and LLM adapters speak HTTP with
``urllib``, the memory browser is ``http.server``.

Design rules: nothing runs at import (no files, no environment reads, no clients, no threads); time and ids
come from injected objects so every run is reproducible; revisions are immutable once written; every write
is one transaction, acknowledged only after it is durable; errors are raised, never returned; forgetting
removes content from the store's bytes, not just from view.
"""

# ==========================================================================================================
# 1. Header
# ==========================================================================================================

from __future__ import annotations

import abc
import argparse
import array
import asyncio
import base64
import bisect
import contextlib
import concurrent.futures
import copy
import dataclasses
import datetime as _dt
import enum
import functools
import hashlib
import html
import heapq
import importlib
import ipaddress
import inspect
import itertools
import json
import math
import operator
import os
import re
import secrets
import sqlite3
import sys
import threading
import time
import types
import unicodedata
import urllib.parse
import zlib
from typing import IO, Any, Awaitable, Callable, Container, Iterable, Iterator, Mapping, Protocol, Sequence

__version__ = "0.2.0"

DISTRIBUTION_NAME = "kumiho-memory-onefile"

__all__ = [
    "DISTRIBUTION_NAME",
    # errors
    "KumihoMemoryError", "InvalidArgumentError", "InvalidKrefError", "NotFoundError", "ConflictError",
    "ImportFormatError", "StoreError", "CorruptStoreError", "SchemaVersionError", "StoreBusyError",
    "StoreClosedError", "ServiceError", "GraphServiceError", "BackendUnavailableError",
    # foundations
    "Clock", "SystemClock", "ManualClock", "IdFactory", "RandomIds", "SequentialIds",
    "parse_instant", "format_instant", "canonical_json", "content_hash",
    # configuration
    "MemoryConfig", "default_store_path",
    # data model
    "Kref", "normalize_space", "validate_tag", "validate_edge_type", "EDGE_TYPES", "SUPERSEDES", "DERIVED_FROM", "DEPENDS_ON", "REFERENCED", "CONTAINS",
    "CREATED_FROM", "SUPPORTS", "CONTRADICTS", "RELATED_TO", "ABOUT", "LATEST_TAG", "PUBLISHED_TAG",
    "OFFICIAL", "CORROBORATED", "SINGLE_SOURCE", "UNVERIFIED", "EVIDENCE_LEVELS", "DEFAULT_EVIDENCE_LEVEL",
    "evidence_tag", "parse_evidence",
    "RevisionRecord", "ItemRecord", "EdgeRecord", "ArtifactRecord",
    # text
    "tokenize", "stem", "bm25_idf", "bm25_term_score", "RecallIndex",
    # storage
    "GraphBackend", "RevisionDraft", "SQLiteGraph", "KumihoBackend", "SCHEMA_VERSION",
    # facades
    "Memory", "default_memory", "memory_or_default", "UniversalMemoryManager",
    # integrations
    "list_memories", "describe_memory", "MemoryBrowser", "BrowserServer", "langgraph_store", "agents_session",
    "MEMORY_TOOLS", "MEMORY_TOOL_HANDLERS", "MemoryToolbox", "memory_tool_handlers", "tool_definitions",
    # recall
    "RecallSignals", "RecallQuery", "ScoredRevision", "FOLLOWS", "is_message", "thread_key", "parse_time_window",
    "validate_where", "matches_where", "validate_prefer", "EvidenceRankConfig", "apply_evidence_weights",
    "evidence_badge", "memory_evidence_level", "apply_recency", "apply_mmr", "bm25_light", "select_siblings", "cosine",
    "EmbeddingAdapter", "OpenAICompatEmbeddingAdapter", "unit_vector", "embed_function",
    "GraphAugmentationConfig", "GraphAugmentedRecall", "lexical_angles", "build_recalled_context",
    "PrefetchConfig", "AnticipatoryRecall", "TransitionTable", "blend_probabilities", "recall_state", "PREFETCH_GRAINS",
    "LLMAdapter", "OpenAICompatAdapter", "AnthropicAdapter", "parse_llm_json",
    # working memory
    "WorkingMemoryBuffer", "InProcessBuffer", "RedisMemoryBuffer", "WorkingMemoryConfig", "MessageTooLargeError",
    "resolve_session_id", "WORKING_MEMORY_TTL", "MAX_MESSAGE_BYTES", "MESSAGE_ROLES", "SESSION_SEQUENCE_TTL",
    "ACTIVE_SESSION_TTL", "SESSION_GENERATION_TTL", "DEFAULT_SESSION_CONTEXT", "SESSION_SOURCES",
    # privacy, belief revision and consolidation
    "CredentialDetectedError", "PIIRedactor", "screen_for_store", "CREDENTIAL_POLICIES", "CredentialFinding",
    "scan_credentials", "redact_credential_text", "CREDENTIAL_FAMILIES", "PIIFinding", "scan_pii",
    "anonymize_pii_text", "PII_KINDS", "adapter_chat", "normalize_statement", "statement_subjects", "belief_similarity",
    "canonical_source", "statement_subject", "same_belief", "first_person", "speaker_name", "resolved_statement",
    "statement_identifiers", "belief_difference", "MULTI_VALUED_PREDICATES", "BELIEF_RELATIONS",
    "belief_relations", "RelationMatcher", "REVISION_OUTCOMES", "ExtractiveSummarizer", "MemorySummarizer", "render_summary",
    "RetryQueue", "FailureClass", "classify_failure", "retry_with_backoff", "MemoryAssessResult", "AutoAssessFn", "get_memory_space", "EvidencePolicy", "DEFAULT_STORAGE_POLICY", "heuristic_prefilter",
    "create_llm_assessor", "grade_evidence", "create_evidence_assessor",
    # space profiles, skill ingest and Dream State
    "SPACE_CLASSES", "SpaceSignals", "SpaceProfile", "SpaceProfiler", "get_space_profile", "classify_space",
    "space_scores", "set_space_attribute", "space_attribute", "space_attributes", "SYSTEM_KINDS",
    "SkillSection", "ParsedSkill", "IngestResult", "parse_skill", "scan_skill_text", "ingest_skill",
    "ingest_file", "ingest_batch", "clear_quarantine", "list_skills", "SKILL_KIND", "QUARANTINE_TAG",
    "DreamState", "DreamStateStats", "MemoryAssessment",
    # export
    "render_mermaid",
    # CLI
    "main",
]

# Upstream kumiho-memory is a package; its users write ``from kumiho_memory.evidence import parse_evidence``.
# Each of its modules is an alias here (the six.py way): a module object in ``sys.modules`` whose names are
# looked up on this module when first used, so registering them costs nothing and reads nothing.
SUBMODULES: dict[str, tuple[str, ...]] = {
    "memory_manager": ("UniversalMemoryManager", "AutoAssessFn", "MemoryAssessResult", "get_memory_space"),
    "redis_memory": ("RedisMemoryBuffer",),
    "summarization": ("MemorySummarizer", "LLMAdapter", "EmbeddingAdapter", "OpenAICompatAdapter",
                      "OpenAICompatEmbeddingAdapter", "AnthropicAdapter"),
    "privacy": ("PIIRedactor", "CredentialDetectedError"),
    "retry": ("RetryQueue", "retry_with_backoff", "classify_failure", "FailureClass"),
    "dream_state": ("DreamState", "MemoryAssessment", "DreamStateStats"),
    "graph_augmentation": ("GraphAugmentedRecall", "GraphAugmentationConfig"),
    "assessors": ("create_llm_assessor", "create_evidence_assessor", "EvidencePolicy", "grade_evidence",
                  "heuristic_prefilter", "DEFAULT_STORAGE_POLICY"),
    "evidence": ("evidence_tag", "parse_evidence", "OFFICIAL", "CORROBORATED", "SINGLE_SOURCE", "UNVERIFIED",
                 "EVIDENCE_LEVELS", "DEFAULT_EVIDENCE_LEVEL"),
    "evidence_rank": ("apply_evidence_weights", "evidence_badge", "EvidenceRankConfig"),
    "space_profiler": ("SpaceProfiler", "SpaceProfile", "SpaceSignals", "get_space_profile", "SPACE_CLASSES"),
    "skill_ingest": ("ingest_skill", "ingest_file", "ingest_batch", "parse_skill"),
    "mcp_tools": ("MEMORY_TOOLS", "MEMORY_TOOL_HANDLERS"),
}


class _Submodule(types.ModuleType):
    """``kumiho_memory.<name>``: the names of one upstream module, read from this module on first use."""

    def __getattr__(self, name: str) -> Any:
        if name in self.__all__:
            return getattr(sys.modules[self.__name__.rpartition(".")[0]], name)
        raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}")

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | set(self.__all__))


for _name, _names in SUBMODULES.items():
    _alias = _Submodule(f"{__name__}.{_name}", f"kumiho-memory's {_name} module: {', '.join(_names)}.")
    _alias.__all__ = list(_names)
    sys.modules.setdefault(f"{__name__}.{_name}", _alias)
del _name, _names, _alias


# ==========================================================================================================
# 2. Errors
# ==========================================================================================================

class KumihoMemoryError(Exception):
    """Root of every error this module raises on purpose; catch it to catch them all."""


class InvalidArgumentError(KumihoMemoryError, ValueError):
    """An argument was malformed or out of range; nothing was changed."""


class InvalidKrefError(InvalidArgumentError):
    """A kref string is malformed: bad scheme, bad segment, unknown query key, ``..`` or a control char."""


class NotFoundError(KumihoMemoryError, KeyError):
    """The kref, tag or item asked for does not exist (or no longer exists)."""

    def __str__(self) -> str:  # KeyError quotes its argument; a message reads better plain.
        return str(self.args[0]) if self.args else "not found"


class ConflictError(KumihoMemoryError, ValueError):
    """The request contradicts what the store already holds (e.g. an import record that differs)."""


class ImportFormatError(InvalidArgumentError):
    """An import stream is not a kumiho_memory export; the message names the line."""


class StoreError(KumihoMemoryError, OSError):
    """The store file cannot be used; the message names the file and what to do."""


class CorruptStoreError(StoreError):
    """The store file is not a database, or is damaged."""


class SchemaVersionError(StoreError):
    """The store was written by a newer version of this module."""


class StoreBusyError(StoreError, TimeoutError):
    """Another process held the store's write lock for longer than the configured wait."""


class StoreClosedError(KumihoMemoryError, RuntimeError):
    """The Memory (or backend) was used after ``close()``."""


class ServiceError(KumihoMemoryError, ConnectionError):
    """A model service (embeddings, LLM) failed or could not be reached; ``transient`` says whether a retry
    later may succeed. Credentials never appear in the message."""

    def __init__(self, message: str, *, transient: bool = True, status: int | None = None) -> None:
        super().__init__(message)
        self.transient = transient
        self.status = status


class GraphServiceError(ServiceError):
    """The Kumiho graph server failed or could not be reached. ``transient`` is True for UNAVAILABLE,
    DEADLINE_EXCEEDED (and the server's INTERNAL / RESOURCE_EXHAUSTED / ABORTED): a retry later may succeed,
    so consolidation queues the write in the ``RetryQueue``. ``code`` is the gRPC status name. The token
    never appears in the message."""

    def __init__(self, message: str, *, transient: bool = True, code: str | None = None) -> None:
        super().__init__(message, transient=transient)
        self.code = code


class BackendUnavailableError(KumihoMemoryError, ImportError):
    """An optional package is missing; the message carries the ``pip install`` line that fixes it."""


# ==========================================================================================================
# 3. Foundations
# ==========================================================================================================

UTC = _dt.timezone.utc


class Clock(Protocol):
    """Where time comes from. Inject a ``ManualClock`` in tests so every timestamp is reproducible."""

    def now(self) -> _dt.datetime:
        """Return the current time as an aware UTC datetime."""


class SystemClock:
    """The wall clock, in UTC."""

    def now(self) -> _dt.datetime:
        """Return ``datetime.now(UTC)``."""
        return _dt.datetime.now(UTC)


class ManualClock:
    """A clock that moves only when told to (and by ``tick`` after every reading, if given).

    Args:
        start: the first instant returned; default 2026-01-01T00:00:00Z.
        tick: how far the clock moves after each ``now()``; default zero.
    """

    def __init__(self, start: _dt.datetime | str | None = None, *, tick: _dt.timedelta | float = 0.0) -> None:
        self._now = parse_instant(start) if start is not None else _dt.datetime(2026, 1, 1, tzinfo=UTC)
        self._tick = tick if isinstance(tick, _dt.timedelta) else _dt.timedelta(seconds=tick)
        self._lock = threading.Lock()

    def now(self) -> _dt.datetime:
        """Return the current instant, then move on by ``tick``."""
        with self._lock:
            current = self._now
            self._now = current + self._tick
            return current

    def advance(self, seconds: float = 0.0, **timedelta_kwargs: float) -> _dt.datetime:
        """Move the clock forward (``advance(60)``, ``advance(days=3)``) and return the new instant."""
        with self._lock:
            self._now += _dt.timedelta(seconds=seconds, **timedelta_kwargs)
            return self._now

    def set(self, instant: _dt.datetime | str) -> None:
        """Jump to ``instant`` (any form ``parse_instant`` accepts)."""
        with self._lock:
            self._now = parse_instant(instant)


class IdFactory(Protocol):
    """Where new identifiers come from. Inject ``SequentialIds`` in tests."""

    def new_id(self) -> str:
        """Return a fresh short identifier made of ``[0-9a-z]``."""


class RandomIds:
    """Random 10-hex-digit identifiers from ``secrets`` (collisions are checked by the store)."""

    def new_id(self) -> str:
        """Return a fresh random identifier."""
        return secrets.token_hex(5)


class SequentialIds:
    """Identifiers ``000001``, ``000002``, ... for reproducible tests and probes."""

    def __init__(self, start: int = 1) -> None:
        self._counter = itertools.count(start)
        self._lock = threading.Lock()

    def new_id(self) -> str:
        """Return the next number, zero-padded to six digits."""
        with self._lock:
            return f"{next(self._counter):06d}"


_COMPACT_INSTANT = re.compile(r"^(\d{4})(\d{2})(\d{2})(\d{2})(\d{2})(\d{2})?$")


def parse_instant(value: str | _dt.datetime | _dt.date | int | float) -> _dt.datetime:
    """Turn an instant into an aware UTC datetime.

    Args:
        value: an ISO 8601 string (``2026-01-31``, ``2026-01-31T12:00:00Z``, with an offset or none, which
            means UTC), a compact ``YYYYMMDDHHMM[SS]`` string, a datetime or date, or epoch seconds.

    Returns:
        The instant in UTC.

    Raises:
        InvalidArgumentError: the value is not an instant.
    """
    if isinstance(value, bool):
        raise InvalidArgumentError(f"not an instant: {value!r}")
    if isinstance(value, _dt.datetime):
        moment = value
    elif isinstance(value, _dt.date):
        moment = _dt.datetime(value.year, value.month, value.day)
    elif isinstance(value, (int, float)):
        if not math.isfinite(value):
            raise InvalidArgumentError(f"not an instant: {value!r}")
        try:
            moment = _dt.datetime.fromtimestamp(value, UTC)
        except (OverflowError, OSError, ValueError) as exc:
            raise InvalidArgumentError(f"epoch seconds out of range: {value!r}") from exc
    elif isinstance(value, str):
        text = value.strip()
        compact = _COMPACT_INSTANT.match(text)
        try:
            if compact:
                parts = [int(part) for part in compact.groups(default="0")]
                moment = _dt.datetime(*parts)
            else:
                if text.endswith(("Z", "z")):
                    text = text[:-1] + "+00:00"
                moment = _dt.datetime.fromisoformat(text)
        except ValueError as exc:
            raise InvalidArgumentError(
                f"not an ISO 8601 instant: {value!r} (try 2026-01-31T12:00:00Z)") from exc
    else:
        raise InvalidArgumentError(f"not an instant: {value!r}")
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def format_instant(moment: _dt.datetime) -> str:
    """Format an instant the way the store keeps it: UTC, microseconds, ``Z`` (sorts as text)."""
    moment = parse_instant(moment)
    return f"{moment.year:04d}-{moment:%m-%dT%H:%M:%S}.{moment.microsecond:06d}Z"  # %Y is not padded everywhere


def _short_instant(moment: _dt.datetime) -> str:
    """Format an instant for krefs: whole seconds unless it has microseconds."""
    moment = parse_instant(moment)
    if moment.microsecond:
        return format_instant(moment)
    return f"{moment.year:04d}-{moment:%m-%dT%H:%M:%S}Z"


def canonical_json(value: Any) -> str:
    """Serialize JSON deterministically: sorted keys, no spaces, UTF-8 text, no NaN.

    Raises:
        InvalidArgumentError: the value holds something JSON cannot represent.
    """
    try:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidArgumentError(f"not JSON-serializable: {exc}") from exc
    except RecursionError:
        raise InvalidArgumentError("not JSON-serializable: nested too deeply") from None


def content_hash(text: str) -> str:
    """Return ``sha256:<hex>`` of the UTF-8 bytes of ``text``."""
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def _require(module_name: str, *, extra: str, package: str | None = None) -> Any:
    """Import an optional package, or raise ``BackendUnavailableError`` naming pip lines that work today:
    the package itself from PyPI, and the extra from a checkout of this project."""
    try:
        return importlib.import_module(module_name)
    except ImportError as exc:
        wanted = package or module_name.partition(".")[0]
        raise BackendUnavailableError(
            f"{module_name!r} is not installed; run: pip install '{wanted}' (in a checkout of kumiho_memory: "
            f"pip install -e '.[{extra}]')") from exc


def _unique_temporary(path: str) -> str:
    """A temporary file name beside ``path`` that no other process or thread will pick at the same time."""
    return f"{path}.{os.getpid()}.{threading.get_ident()}.{secrets.token_hex(4)}.tmp"


def _write_file_atomically(path: str, text: str) -> None:
    """Write ``text`` to ``path`` all at once (a unique temporary file, fsynced, then renamed over it), so a
    reader or a crash never sees half a file. Raises ``OSError``; the temporary file never stays behind."""
    temporary = _unique_temporary(path)
    try:
        with open(temporary, "w", encoding="utf-8") as stream:
            stream.write(text)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


class _FileLock:
    """An exclusive lock held across processes and threads: ``flock`` on POSIX, ``msvcrt`` on Windows.

    Each holder opens the lock file itself, so two threads of one process exclude each other as two
    processes do. ``acquire(blocking=False)`` answers at once; the lock goes with its holder when a process
    dies, so a crash never leaves it taken.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self._stream: IO[str] | None = None

    def acquire(self, blocking: bool = True) -> bool:
        """Take the lock; with ``blocking=False`` return False instead of waiting when another holds it."""
        os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
        stream = open(self.path, "a+", encoding="utf-8")
        try:
            if os.name == "nt":  # pragma: no cover - exercised on Windows only
                import msvcrt
                while True:
                    try:
                        msvcrt.locking(stream.fileno(), msvcrt.LK_NBLCK, 1)
                        break
                    except OSError:
                        if not blocking:
                            stream.close()
                            return False
                        time.sleep(0.05)
            else:
                import fcntl
                try:
                    fcntl.flock(stream.fileno(), fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
                except BlockingIOError:
                    stream.close()
                    return False
        except BaseException:
            stream.close()
            raise
        self._stream = stream
        return True

    def release(self) -> None:
        """Let the next holder in (closing the file releases the lock on every platform)."""
        stream, self._stream = self._stream, None
        if stream is not None:
            stream.close()

    def __enter__(self) -> "_FileLock":
        self.acquire()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.release()


def _redact_url(url: str) -> str:
    """A URL without its user-info part (a password never reaches a message)."""
    return re.sub(r"//[^/@]*@", "//***@", url)


def _redact_endpoint(endpoint: str) -> str:
    """An endpoint without any user or password part (``https://user:pw@host`` -> ``https://host``)."""
    scheme, sep, rest = endpoint.partition("://")
    if not sep:
        scheme, rest = "", endpoint
    host = rest.rpartition("@")[2]
    return f"{scheme}://{host}" if sep else host



# ==========================================================================================================
# 4. Configuration
# ==========================================================================================================

DEFAULT_PROJECT = "CognitiveMemory"

# Every environment variable this module reads, each only when asked: ``MemoryConfig.from_env`` reads the
# store's, ``KumihoBackend()`` its SDK's (endpoint, token; the SDK reads its TLS settings) and
# ``DreamState.from_env`` the Dream State policy:
ENVIRONMENT_VARIABLES = {
    "KUMIHO_MEMORY_PATH": "the store file (default: a per-user file, see default_store_path)",
    "KUMIHO_MEMORY_PROJECT": f"the project name (default {DEFAULT_PROJECT})",
    "KUMIHO_MEMORY_BUSY_TIMEOUT": "seconds a write waits for another process's lock (default 30)",
    "KUMIHO_EVIDENCE_RERANK": "0 turns off evidence-weighted recall (default on)",
    "KUMIHO_WORKING_MEMORY_TTL": "seconds a working-memory session lives after its last use (default 3600)",
    "KUMIHO_REDIS_URL": "Redis URL for working memory (redis://, rediss:// for TLS, password in the URL)",
    "REDIS_URL": "fallback for KUMIHO_REDIS_URL",
    "KUMIHO_SESSION_ID": "the host's session id, used by resolve_session_id when no user is named",
    "KUMIHO_RETRY_QUEUE_DIR": "folder of the retry queue for consolidations (default ~/.kumiho/retry_queue)",
    "KUMIHO_MEMORY_PREFETCH": "1 turns on anticipatory recall for engage calls that name a session (default off)",
    "KUMIHO_MEMORY_BACKEND": "sqlite (default) or kumiho: the Kumiho graph server through the kumiho SDK",
    "KUMIHO_SERVER_ENDPOINT": "the Kumiho server (host:port plain gRPC, https://host TLS; default localhost:8080)",
    "KUMIHO_AUTH_TOKEN": "bearer token for the Kumiho server (never logged or shown)",
    "KUMIHO_DREAM_EXTRA_INSTRUCTIONS": "deployment policy for Dream State (it may only tighten the guardrails)",
    "KUMIHO_DREAM_MIN_AGE_DAYS": "Dream State never deprecates a memory younger than this (default 7)",
    "KUMIHO_MEMORY_CREDENTIALS": "redact (default: a credential becomes a placeholder) or refuse (raise instead)",
}


def default_store_path(environ: Mapping[str, str] | None = None) -> str:
    """Return the per-user durable store file: ``$XDG_DATA_HOME/kumiho-memory/memory.db``.

    Falls back to ``~/.local/share`` when ``XDG_DATA_HOME`` is unset. Nothing is created here.
    """
    environ = os.environ if environ is None else environ
    base = environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(base, "kumiho-memory", "memory.db")


@dataclasses.dataclass(frozen=True)
class MemoryConfig:
    """Settings for a ``Memory``; the defaults live here and nowhere else.

    Attributes:
        path: the store file, or None for an in-memory store.
        project: the project new memories go to.
        busy_timeout: seconds a write waits for another process before ``StoreBusyError``.
    """

    path: str | None = None
    project: str = DEFAULT_PROJECT
    busy_timeout: float = 30.0
    evidence_rerank: bool = True
    backend: str = "sqlite"                       # "sqlite" | "kumiho"
    kumiho_endpoint: str | None = None
    kumiho_token: str | None = dataclasses.field(default=None, repr=False)   # never in a repr
    prefetch: bool = False                        # anticipatory recall for engage(session_id=...)
    credentials: str = "redact"                   # "redact" | "refuse": what a write holding a secret does

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, *, durable: bool = True) -> "MemoryConfig":
        """Build a config from the variables in ``ENVIRONMENT_VARIABLES``.

        Args:
            environ: the mapping to read; default ``os.environ``.
            durable: when ``KUMIHO_MEMORY_PATH`` is unset, use ``default_store_path()`` (True) or memory.
        """
        environ = os.environ if environ is None else environ
        path = environ.get("KUMIHO_MEMORY_PATH") or (default_store_path(environ) if durable else None)
        busy = environ.get("KUMIHO_MEMORY_BUSY_TIMEOUT", "")
        try:
            busy_timeout = float(busy) if busy else cls.busy_timeout
        except ValueError as exc:
            raise InvalidArgumentError(f"KUMIHO_MEMORY_BUSY_TIMEOUT is not a number: {busy!r}") from exc
        rerank = environ.get("KUMIHO_EVIDENCE_RERANK", "1").strip().lower() not in ("0", "false", "no", "off")
        backend = (environ.get("KUMIHO_MEMORY_BACKEND") or "sqlite").strip().lower()
        if backend not in ("sqlite", "kumiho"):
            raise InvalidArgumentError(f"KUMIHO_MEMORY_BACKEND must be sqlite or kumiho, not {backend!r}")
        credentials = (environ.get("KUMIHO_MEMORY_CREDENTIALS") or "redact").strip().lower()
        if credentials not in ("redact", "refuse"):
            raise InvalidArgumentError(f"KUMIHO_MEMORY_CREDENTIALS must be redact or refuse, not {credentials!r}")
        return cls(credentials=credentials, path=path, project=environ.get("KUMIHO_MEMORY_PROJECT") or DEFAULT_PROJECT,
                   busy_timeout=busy_timeout, evidence_rerank=rerank, backend=backend,
                   kumiho_endpoint=environ.get("KUMIHO_SERVER_ENDPOINT") or None,
                   kumiho_token=environ.get("KUMIHO_AUTH_TOKEN") or None,
                   prefetch=environ.get("KUMIHO_MEMORY_PREFETCH", "0").strip().lower() in ("1", "true", "yes", "on"))


# ==========================================================================================================
# 5. Data model: krefs, names, evidence levels, records
# ==========================================================================================================

SEGMENT_PATTERN = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_-]{0,63}$")       # project and space segments
ITEM_NAME_PATTERN = re.compile(r"^[A-Za-z0-9_](?:[A-Za-z0-9_.-]{0,126}[A-Za-z0-9_-])?$")  # no trailing dot
KIND_PATTERN = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_-]{0,31}$")
TAG_PATTERN = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.:-]{0,63}$")
ARTIFACT_PATTERN = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
EDGE_TYPE_PATTERN = re.compile(r"^[A-Z][A-Z0-9_]{0,49}$")
_CONTROL_CHARS = re.compile(r"[\x00-\x1f\x7f-\x9f]")

KREF_SCHEME = "kref://"
LATEST_TAG = "latest"
PUBLISHED_TAG = "published"
# Bookkeeping kinds: they describe a space or a job (space profiles and attributes, Dream State reports,
# prefetch tables), not knowledge: recall never returns them, profiles do not count them.
SYSTEM_KINDS = frozenset({"space-profile", "space-attribute", "dream-state", "prefetch-state"})

SUPERSEDES = "SUPERSEDES"
DERIVED_FROM = "DERIVED_FROM"
DEPENDS_ON = "DEPENDS_ON"
REFERENCED = "REFERENCED"
CONTAINS = "CONTAINS"
CREATED_FROM = "CREATED_FROM"
SUPPORTS = "SUPPORTS"
CONTRADICTS = "CONTRADICTS"
RELATED_TO = "RELATED_TO"
ABOUT = "ABOUT"
EDGE_TYPES = (SUPERSEDES, DERIVED_FROM, DEPENDS_ON, REFERENCED, CONTAINS, CREATED_FROM, SUPPORTS,
              CONTRADICTS, RELATED_TO, ABOUT)
EDGE_DIRECTIONS = ("outgoing", "incoming", "both")


def _check_pattern(value: Any, pattern: re.Pattern[str], what: str, error: type[Exception]) -> str:
    if not isinstance(value, str) or not pattern.match(value) or ".." in value:
        raise error(f"invalid {what}: {value!r} (expected {pattern.pattern})")
    return value


def normalize_space(space: str) -> str:
    """Validate a space path (``notes``, ``personal/u1``) and strip outer slashes; ``""`` is the project root.

    Raises:
        InvalidArgumentError: a segment is empty or has characters other than letters, digits, ``_``, ``-``.
    """
    if not isinstance(space, str):
        raise InvalidArgumentError(f"space must be a string, not {type(space).__name__}")
    stripped = space.strip("/")
    if not stripped:
        return ""
    for segment in stripped.split("/"):
        _check_pattern(segment, SEGMENT_PATTERN, "space segment", InvalidArgumentError)
    return stripped


def validate_tag(tag: Any) -> str:
    """Return ``tag`` if it is a valid tag name, else raise ``InvalidArgumentError``."""
    return _check_pattern(tag, TAG_PATTERN, "tag", InvalidArgumentError)


def validate_edge_type(edge_type: Any) -> str:
    """Return ``edge_type`` if it matches ``^[A-Z][A-Z0-9_]{0,49}$``, else raise ``InvalidArgumentError``."""
    return _check_pattern(edge_type, EDGE_TYPE_PATTERN, "edge type", InvalidArgumentError)


@dataclasses.dataclass(frozen=True)
class Kref:
    """A Kumiho address: ``kref://project/space[/sub...]/name.kind[?r=N|?t=TAG[&time=T]][&a=ARTIFACT]``.

    Without ``name.kind`` a kref names a project or a space. An item kref with no selector resolves to the
    item's latest revision. ``time`` (only with ``t``) asks where the tag pointed at that instant.
    """

    project: str
    space: str = ""
    name: str = ""
    kind: str = ""
    revision: int | None = None
    tag: str | None = None
    time: _dt.datetime | None = None
    artifact: str | None = None

    def __post_init__(self) -> None:
        _check_pattern(self.project, SEGMENT_PATTERN, "kref project", InvalidKrefError)
        if self.space:
            for segment in self.space.split("/"):
                _check_pattern(segment, SEGMENT_PATTERN, "kref space segment", InvalidKrefError)
        if bool(self.name) != bool(self.kind):
            raise InvalidKrefError("a kref item needs both a name and a kind (name.kind)")
        if self.name:
            _check_pattern(self.name, ITEM_NAME_PATTERN, "kref item name", InvalidKrefError)
            _check_pattern(self.kind, KIND_PATTERN, "kref item kind", InvalidKrefError)
        selectors = (self.revision, self.tag, self.time, self.artifact)
        if not self.name and any(value is not None for value in selectors):
            raise InvalidKrefError("only an item kref can carry ?r=, ?t=, time= or a=")
        if self.revision is not None:
            if isinstance(self.revision, bool) or not isinstance(self.revision, int) or not 1 <= self.revision < 10 ** 18:
                raise InvalidKrefError(f"revision must be a positive integer below 10**18, not {str(self.revision)[:40]}")
            if self.tag is not None:
                raise InvalidKrefError("a kref takes r= or t=, not both")
        if self.tag is not None:
            _check_pattern(self.tag, TAG_PATTERN, "kref tag", InvalidKrefError)
        if self.time is not None:
            if self.tag is None:
                raise InvalidKrefError("time= selects by tag: it needs t= (use t=latest for the newest)")
            if not isinstance(self.time, _dt.datetime):
                raise InvalidKrefError(f"kref time must be a datetime, not {self.time!r}")
            object.__setattr__(self, "time", parse_instant(self.time))
        if self.artifact is not None:
            _check_pattern(self.artifact, ARTIFACT_PATTERN, "kref artifact", InvalidKrefError)

    # -- parsing and formatting ---------------------------------------------------------------------------

    @classmethod
    def trusted(cls, project: str, space: str, name: str, kind: str, revision: int | None = None) -> "Kref":
        """Build a kref from parts the store already validated (skips the checks, for hot paths)."""
        kref = object.__new__(cls)
        for field, value in (("project", project), ("space", space), ("name", name), ("kind", kind),
                             ("revision", revision), ("tag", None), ("time", None), ("artifact", None)):
            object.__setattr__(kref, field, value)
        return kref

    @classmethod
    def parse(cls, text: "str | Kref") -> "Kref":
        """Parse a kref string (a ``Kref`` passes through).

        Raises:
            InvalidKrefError: the string is not a well-formed kref.
        """
        if isinstance(text, Kref):
            return text
        if not isinstance(text, str):
            raise InvalidKrefError(f"a kref must be a string, not {type(text).__name__}")
        if _CONTROL_CHARS.search(text):
            raise InvalidKrefError(f"kref contains a control character: {text!r}")
        if ".." in text:
            raise InvalidKrefError(f"kref contains '..': {text!r}")
        if not text.startswith(KREF_SCHEME):
            raise InvalidKrefError(f"kref must start with {KREF_SCHEME!r}: {text!r}")
        body, question_mark, query = text[len(KREF_SCHEME):].partition("?")
        if question_mark and not query:
            raise InvalidKrefError(f"kref has an empty query after '?': {text!r}")
        segments = body.split("/")
        if any(segment == "" for segment in segments):
            raise InvalidKrefError(f"kref has an empty path segment: {text!r}")
        project, rest = segments[0], segments[1:]
        name = kind = ""
        if rest and "." in rest[-1]:
            name, _, kind = rest[-1].rpartition(".")
            rest = rest[:-1]
        fields: dict[str, Any] = {}
        if query:
            if not name:
                raise InvalidKrefError(f"only an item kref can carry a query: {text!r}")
            for pair in query.split("&"):
                key, sep, value = pair.partition("=")
                if not sep or not value:
                    raise InvalidKrefError(f"kref query needs key=value pairs: {pair!r} in {text!r}")
                if key not in ("r", "t", "time", "a"):
                    raise InvalidKrefError(f"unknown kref query key {key!r} in {text!r}")
                if key in fields:
                    raise InvalidKrefError(f"kref query key {key!r} given twice in {text!r}")
                fields[key] = value
        revision = None
        if "r" in fields:
            if not fields["r"].isascii() or not fields["r"].isdigit():
                raise InvalidKrefError(f"kref revision must be a number: {fields['r'][:40]!r}")
            if len(fields["r"].lstrip("0")) > 18:
                raise InvalidKrefError(f"kref revision is out of range (at most 18 digits): {fields['r'][:40]!r}...")
            revision = int(fields["r"])
        moment = None
        if "time" in fields:
            if "t" not in fields:
                raise InvalidKrefError(f"time= needs a tag (t=) in {text!r}")
            try:
                moment = parse_instant(fields["time"])
            except InvalidArgumentError as exc:
                raise InvalidKrefError(f"kref time is not an instant: {fields['time']!r}") from exc
        return cls(project=project, space="/".join(rest), name=name, kind=kind, revision=revision,
                   tag=fields.get("t"), time=moment, artifact=fields.get("a"))

    def __str__(self) -> str:
        path = "/".join(part for part in (self.project, self.space, self.item) if part)
        query = []
        if self.revision is not None:
            query.append(f"r={self.revision}")
        if self.tag is not None:
            query.append(f"t={self.tag}")
        if self.time is not None:
            query.append(f"time={_short_instant(self.time)}")
        if self.artifact is not None:
            query.append(f"a={self.artifact}")
        return KREF_SCHEME + path + ("?" + "&".join(query) if query else "")

    # -- views --------------------------------------------------------------------------------------------

    @property
    def item(self) -> str:
        """``name.kind``, or ``""`` for a project or space kref."""
        return f"{self.name}.{self.kind}" if self.name else ""

    @property
    def is_item(self) -> bool:
        """True when the kref names an item (with or without a revision selector)."""
        return bool(self.name)

    @property
    def is_bare_item(self) -> bool:
        """True for an item kref with no ``r``, ``t``, ``time`` or ``a``."""
        return self.is_item and self.revision is None and self.tag is None and self.artifact is None

    def item_kref(self) -> "Kref":
        """The item this kref is in, without any selector."""
        return Kref.trusted(self.project, self.space, self.name, self.kind)

    def with_revision(self, number: int) -> "Kref":
        """The kref of revision ``number`` of this kref's item."""
        if isinstance(number, bool) or not isinstance(number, int) or not 1 <= number < 10 ** 18:
            raise InvalidKrefError(f"revision must be a positive integer below 10**18, not {str(number)[:40]}")
        return Kref.trusted(self.project, self.space, self.name, self.kind, number)


def parse_item_kref(text: "str | Kref", what: str = "item") -> Kref:
    """Parse ``text`` and insist that it names an item; raise ``InvalidKrefError`` otherwise."""
    kref = Kref.parse(text)
    if not kref.is_item:
        raise InvalidKrefError(f"{what} kref must name an item (…/name.kind): {str(kref)!r}")
    return kref


# Evidence grades, most to least trustworthy. Metadata ``evidence_level`` is the canonical carrier; the tag
# ``evidence:<level>`` mirrors it so tag history gives point-in-time audits. Metadata wins on disagreement.
OFFICIAL = "official"
CORROBORATED = "corroborated"
SINGLE_SOURCE = "single_source"
UNVERIFIED = "unverified"
EVIDENCE_LEVELS = (OFFICIAL, CORROBORATED, SINGLE_SOURCE, UNVERIFIED)
DEFAULT_EVIDENCE_LEVEL = UNVERIFIED
EVIDENCE_TAG_PREFIX = "evidence:"


def evidence_tag(level: str) -> str:
    """Return the tag that carries ``level`` (``evidence:<level>``).

    Raises:
        InvalidArgumentError: ``level`` is not one of ``EVIDENCE_LEVELS``.
    """
    if level not in EVIDENCE_LEVELS:
        raise InvalidArgumentError(f"unknown evidence level {level!r}; expected one of {EVIDENCE_LEVELS}")
    return EVIDENCE_TAG_PREFIX + level


def parse_evidence(metadata: Mapping[str, Any] | None, tags: Iterable[str] | None = None,
                   default: str | None = None) -> str | None:
    """Read a memory's evidence level: metadata ``evidence_level`` first, then an ``evidence:`` tag.

    Unknown values are ignored. Returns ``default`` when neither carrier holds a known level.
    """
    level = (metadata or {}).get("evidence_level")
    if level in EVIDENCE_LEVELS:
        return level
    for tag in tags or ():
        if isinstance(tag, str) and tag.startswith(EVIDENCE_TAG_PREFIX):
            candidate = tag[len(EVIDENCE_TAG_PREFIX):]
            if candidate in EVIDENCE_LEVELS:
                return candidate
    return default


@dataclasses.dataclass(frozen=True)
class RevisionRecord:
    """One immutable revision as the store returns it (``tags`` and ``deprecated`` are as of now)."""

    kref: Kref
    number: int
    title: str
    content: str
    metadata: Mapping[str, Any]
    tags: tuple[str, ...]
    created_at: str
    deprecated: bool

    @property
    def item_kref(self) -> Kref:
        """The revision's item."""
        return self.kref.item_kref()

    def to_dict(self, *, copy_metadata: bool = True) -> dict[str, Any]:
        """The public dict shape returned by ``Memory.get`` and ``Memory.history``.

        ``copy_metadata=False`` hands over the record's own metadata dict (for records made for one call).
        """
        item = self.kref.item_kref()
        return {
            "kref": str(self.kref), "item_kref": str(item), "revision": self.number,
            "space": self.kref.space, "kind": self.kref.kind, "title": self.title, "content": self.content,
            "metadata": copy.deepcopy(dict(self.metadata)) if copy_metadata else self.metadata,
            "tags": list(self.tags),
            "created_at": self.created_at, "deprecated": self.deprecated,
        }


@dataclasses.dataclass(frozen=True)
class ItemRecord:
    """An item: its address, supersession key, metadata and counters."""

    kref: Kref
    key: str | None
    metadata: Mapping[str, Any]
    created_at: str
    deprecated: bool
    revision_count: int
    latest_revision: int | None

    def to_dict(self) -> dict[str, Any]:
        """Public dict shape."""
        return {"item_kref": str(self.kref), "space": self.kref.space, "name": self.kref.name,
                "kind": self.kref.kind, "key": self.key, "metadata": dict(self.metadata),
                "created_at": self.created_at, "deprecated": self.deprecated,
                "revision_count": self.revision_count, "latest_revision": self.latest_revision}


@dataclasses.dataclass(frozen=True)
class EdgeRecord:
    """A typed edge from one revision to another."""

    source_kref: Kref
    target_kref: Kref
    edge_type: str
    metadata: Mapping[str, Any]
    created_at: str

    def to_dict(self) -> dict[str, Any]:
        """Public dict shape returned by ``Memory.edges`` and ``Memory.link``."""
        return {"source_kref": str(self.source_kref), "target_kref": str(self.target_kref),
                "edge_type": self.edge_type, "metadata": dict(self.metadata), "created_at": self.created_at}


@dataclasses.dataclass(frozen=True)
class ArtifactRecord:
    """A named pointer (a file path, a URL) attached to a revision."""

    revision_kref: Kref
    name: str
    location: str
    metadata: Mapping[str, Any]
    created_at: str

    def to_dict(self) -> dict[str, Any]:
        """Public dict shape."""
        return {"kref": str(dataclasses.replace(self.revision_kref, artifact=self.name)),
                "revision_kref": str(self.revision_kref), "name": self.name, "location": self.location,
                "metadata": dict(self.metadata), "created_at": self.created_at}


# -- what callers may pass: sizes and checks every way in shares ------------------------------------------

MAX_CONTENT_CHARS = 1_000_000
MAX_TITLE_CHARS = 500
MAX_METADATA_BYTES = 256 * 1024
MAX_RECALL_LIMIT = 1000
TITLE_FROM_CONTENT_CHARS = 80


def _checked_text(value: Any, name: str, *, limit: int, allow_empty: bool = False) -> str:
    if not isinstance(value, str):
        raise InvalidArgumentError(f"{name} must be a string, not {type(value).__name__}")
    if not allow_empty and not value.strip():
        raise InvalidArgumentError(f"{name} must not be empty")
    if len(value) > limit:
        raise InvalidArgumentError(f"{name} is {len(value)} characters; the limit is {limit}")
    _check_encodable(value, name)
    return value


def _check_encodable(text: str, name: str) -> None:
    """Text must be valid Unicode (a lone surrogate such as ``\\ud800`` cannot be stored)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidArgumentError(f"{name} is not valid Unicode text ({exc.reason} at position {exc.start})") from None


def _checked_metadata(metadata: Any) -> dict[str, Any]:
    """Validate metadata (a JSON object, string keys, ≤256 KiB) and return a deep copy."""
    if metadata is None:
        return {}
    if not isinstance(metadata, Mapping):
        raise InvalidArgumentError(f"metadata must be a mapping, not {type(metadata).__name__}")
    if not all(isinstance(key, str) for key in metadata):
        raise InvalidArgumentError("metadata keys must be strings")
    encoded = canonical_json(dict(metadata))
    _check_encodable(encoded, "metadata")
    if len(encoded.encode("utf-8")) > MAX_METADATA_BYTES:
        raise InvalidArgumentError(f"metadata is larger than {MAX_METADATA_BYTES} bytes as JSON")
    return json.loads(encoded)


def slugify(text: str, max_length: int = 40, *, fallback: str = "memory") -> str:
    """An ASCII slug of ``text`` for item names (``"Dark mode!"`` -> ``"dark-mode"``); ``fallback`` if empty."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii").lower()
    slug = re.sub(r"[^a-z0-9]+", "-", ascii_text).strip("-")[:max_length].rstrip("-")
    return slug or fallback


# ==========================================================================================================
# 6. Text: tokenizer, stemmer, BM25
# ==========================================================================================================

_WORD = re.compile(r"[^\W_]+", re.UNICODE)

STOPWORDS = frozenset("""
a about above after again against all am an and any are as at be because been before being below between
both but by can could did do does doing down during each few for from further had has have having he her
here hers herself him himself his how i if in into is it its itself just me more most my myself no nor not
now of off on once only or other our ours ourselves out over own same she should so some such than that the
their theirs them themselves then there these they this those through to too under until up very was we
were what when where which while who whom why will with would you your yours yourself yourselves
""".split())


def _is_consonant(word: str, index: int) -> bool:
    letter = word[index]
    if letter in "aeiou":
        return False
    if letter == "y":
        return index == 0 or not _is_consonant(word, index - 1)
    return True


def _measure(stem_part: str) -> int:
    """Porter's m: the number of vowel-consonant sequences in ``stem_part``."""
    pattern = "".join("c" if _is_consonant(stem_part, i) else "v" for i in range(len(stem_part)))
    return len(re.findall("v+c+", pattern))


def _has_vowel(stem_part: str) -> bool:
    return any(not _is_consonant(stem_part, i) for i in range(len(stem_part)))


def _ends_double_consonant(word: str) -> bool:
    return len(word) >= 2 and word[-1] == word[-2] and _is_consonant(word, len(word) - 1)


def _ends_cvc(word: str) -> bool:
    return (len(word) >= 3 and _is_consonant(word, len(word) - 3) and not _is_consonant(word, len(word) - 2)
            and _is_consonant(word, len(word) - 1) and word[-1] not in "wxy")


_STEP2 = (("ational", "ate"), ("tional", "tion"), ("enci", "ence"), ("anci", "ance"), ("izer", "ize"),
          ("abli", "able"), ("alli", "al"), ("entli", "ent"), ("eli", "e"), ("ousli", "ous"),
          ("ization", "ize"), ("ation", "ate"), ("ator", "ate"), ("alism", "al"), ("iveness", "ive"),
          ("fulness", "ful"), ("ousness", "ous"), ("aliti", "al"), ("iviti", "ive"), ("biliti", "ble"))
_STEP3 = (("icate", "ic"), ("ative", ""), ("alize", "al"), ("iciti", "ic"), ("ical", "ic"), ("ful", ""),
          ("ness", ""))
_STEP4 = ("al", "ance", "ence", "er", "ic", "able", "ible", "ant", "ement", "ment", "ent", "ion", "ou",
          "ism", "ate", "iti", "ous", "ive", "ize")


def _replace_suffix(word: str, rules: Sequence[tuple[str, str]], min_measure: int) -> str:
    for suffix, replacement in rules:
        if word.endswith(suffix):
            base = word[: -len(suffix)]
            return base + replacement if _measure(base) > min_measure else word
    return word


def stem(word: str) -> str:
    """Reduce an English word to its Porter (1980) stem; other words come back unchanged.

    Only lowercase ASCII words longer than two letters are stemmed, so names in other scripts and
    numbers keep their form.
    """
    if len(word) <= 2 or not word.isascii() or not word.isalpha():
        return word
    # Step 1a: plurals.
    if word.endswith("sses"):
        word = word[:-2]
    elif word.endswith("ies"):
        word = word[:-2]
    elif word.endswith("s") and not word.endswith("ss"):
        word = word[:-1]
    # Step 1b: -eed, -ed, -ing.
    if word.endswith("eed"):
        if _measure(word[:-3]) > 0:
            word = word[:-1]
    else:
        for suffix in ("ed", "ing"):
            if word.endswith(suffix) and _has_vowel(word[: -len(suffix)]):
                word = word[: -len(suffix)]
                if word.endswith(("at", "bl", "iz")):
                    word += "e"
                elif _ends_double_consonant(word) and word[-1] not in "lsz":
                    word = word[:-1]
                elif _measure(word) == 1 and _ends_cvc(word):
                    word += "e"
                break
    # Step 1c: y -> i after a vowel-bearing stem.
    if word.endswith("y") and _has_vowel(word[:-1]):
        word = word[:-1] + "i"
    word = _replace_suffix(word, _STEP2, 0)
    word = _replace_suffix(word, _STEP3, 0)
    # Step 4: drop a suffix when the stem is long enough (-ion only after s or t).
    for suffix in _STEP4:
        if word.endswith(suffix):
            base = word[: -len(suffix)]
            if _measure(base) > 1 and (suffix != "ion" or base.endswith(("s", "t"))):
                word = base
            break
    # Step 5: final e and double l.
    if word.endswith("e"):
        base = word[:-1]
        if _measure(base) > 1 or (_measure(base) == 1 and not _ends_cvc(base)):
            word = base
    if word.endswith("ll") and _measure(word) > 1:
        word = word[:-1]
    return word


def tokenize(text: str) -> list[str]:
    """Split text into index terms: casefolded words, stopwords dropped, Porter-stemmed.

    Single letters are dropped; single digits are kept (they matter in dates and versions).
    """
    terms = []
    for match in _WORD.finditer(unicodedata.normalize("NFKC", text).casefold()):
        word = match.group()
        if word in STOPWORDS or (len(word) == 1 and not word.isdigit()):
            continue
        terms.append(stem(word))
    return terms


BM25_K1 = 1.2
BM25_B = 0.75


def bm25_idf(document_count: int, document_frequency: int) -> float:
    """BM25's inverse document frequency, kept positive: ``ln(1 + (N - df + 0.5) / (df + 0.5))``."""
    return math.log(1.0 + (document_count - document_frequency + 0.5) / (document_frequency + 0.5))


def bm25_term_score(idf: float, term_frequency: int, document_length: int, average_length: float) -> float:
    """One term's BM25 contribution to one document's score."""
    norm = BM25_K1 * (1.0 - BM25_B + BM25_B * document_length / max(average_length, 1e-9))
    return idf * term_frequency * (BM25_K1 + 1.0) / (term_frequency + norm)


class _TermPostings:
    """One term's postings (slot, impact): a part sorted by impact, best first, and an unsorted tail."""

    __slots__ = ("slots", "impacts", "tail_slots", "tail_impacts", "live", "max_impact")

    def __init__(self) -> None:
        self.slots = array.array("i")            # slot numbers stay far below 2**31
        self.impacts = array.array("d")
        self.tail_slots = array.array("i")
        self.tail_impacts = array.array("d")
        self.live = 0                   # postings of live documents: the term's document frequency
        self.max_impact = 0.0


# BM25 profiles: chat turns and other short texts saturate term frequency sooner than notes and documents.
# A text's profile follows how long the texts of its space are, not who wrote it: a space of short turns
# (LoCoMo's, ~23 terms) reads as chat, a space of long replies and documents (LongMemEval's ~95-term turns)
# as documents, where length normalization must keep a long reply from outranking the short turn that holds
# the answer. In between, k1 and b move linearly with the space's mean length (``bm25_shortness``).
BM25_PROFILES = {False: (BM25_K1, BM25_B), True: (0.5, 0.4)}
CHAT_MEAN_TERMS, DOCUMENT_MEAN_TERMS = 32.0, 64.0
EXPANSION_WEIGHT = 0.5    # a term the query means without writing it (query_expansions) counts half


def bm25_shortness(mean_length: float) -> float:
    """How chat-like a space is, from its texts' mean length in terms: 1.0 chat, 0.0 documents."""
    return min(1.0, max(0.0, (DOCUMENT_MEAN_TERMS - mean_length) / (DOCUMENT_MEAN_TERMS - CHAT_MEAN_TERMS)))


def bm25_profile(shortness: float) -> tuple[float, float]:
    """BM25's ``(k1, b)`` for a text of the given shortness (0 documents .. 1 chat), interpolated."""
    (k1_doc, b_doc), (k1_chat, b_chat) = BM25_PROFILES[False], BM25_PROFILES[True]
    return k1_doc + (k1_chat - k1_doc) * shortness, b_doc + (b_chat - b_doc) * shortness


class RecallIndex:
    """An in-memory inverted index with impact-ordered postings and safe early termination.

    Each document is stored in a slot (re-adding a document takes a new slot; old slots are purged
    lazily), with its term frequencies in a compact forward index. Scores are BM25 with the average
    length frozen at ``reference_length`` (re-frozen when the corpus drifts by more than 25%), so each
    posting's impact is computed once. ``search`` reads terms by their best possible contribution and
    stops reading a term as soon as no unseen document could still reach the top ``k`` (MaxScore's
    argument); documents that may have lost a contribution that way are then scored exactly from the
    forward index. Cost grows with the postings a query must read, not with the store.

    Everything lives in ``array`` columns, so a large index costs little memory and no garbage-collector
    time. The index holds no text; the store feeds it.
    """

    TAIL_MERGE_MIN = 64
    UPDATE_ONLY_MAX = 16384

    def __init__(self) -> None:
        self.term_ids: dict[str, int] = {}
        self.terms: list[_TermPostings] = []
        self.doc_slot: dict[int, int] = {}
        self.slot_doc = array.array("q")          # -1 once the slot is dead
        self.slot_length = array.array("d")
        self.slot_short = array.array("d")       # each slot's shortness, 0 documents .. 1 chat (bm25_profile)
        self.forward_offsets = array.array("q", [0])
        self.forward_terms = array.array("i")
        self.forward_tfs = array.array("d")
        self.total_length = 0.0
        self.reference_length = 0.0
        self.dead_slots = 0
        self._rebuilding = False

    def __len__(self) -> int:
        return len(self.doc_slot)

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self.doc_slot

    # -- maintenance --------------------------------------------------------------------------------------

    def _impact(self, tf: float, length: float, short: float) -> float:
        k1, b = bm25_profile(short)
        return tf * (k1 + 1.0) / (tf + k1 * (1.0 - b + b * length / self.reference_length))

    def add(self, doc_id: int, term_frequencies: Mapping[str, float], length: float, *,
            short: float = 0.0) -> None:
        """Index a document (replacing its earlier entry): ``{term: tf}``, its length in tokens, and how
        chat-like its space is (``short``, 0..1, or a bool: see ``bm25_shortness``)."""
        if doc_id in self.doc_slot:
            self.remove(doc_id)
        slot = len(self.slot_doc)
        self.doc_slot[doc_id] = slot
        self.slot_doc.append(doc_id)
        self.slot_length.append(float(length))
        short = float(short)
        self.slot_short.append(short)
        self.total_length += length
        if not self.reference_length:
            self.reference_length = max(1.0, float(length))
        entries = []
        for term, tf in term_frequencies.items():
            if tf <= 0:
                continue
            term_id = self.term_ids.get(term)
            if term_id is None:
                term_id = self.term_ids[term] = len(self.terms)
                self.terms.append(_TermPostings())
            entries.append((term_id, float(tf)))
        entries.sort()
        for term_id, tf in entries:
            self.forward_terms.append(term_id)
            self.forward_tfs.append(tf)
            postings = self.terms[term_id]
            impact = self._impact(tf, length, short)
            postings.tail_slots.append(slot)
            postings.tail_impacts.append(impact)
            postings.live += 1
            if impact > postings.max_impact:
                postings.max_impact = impact
        self.forward_offsets.append(len(self.forward_terms))
        self._maybe_reorganize()

    def remove(self, doc_id: int) -> None:
        """Drop a document now; its postings are purged at the next merge of each term."""
        slot = self.doc_slot.pop(doc_id, None)
        if slot is None:
            return
        self.slot_doc[slot] = -1
        self.total_length -= self.slot_length[slot]
        for term_id in self.forward_terms[self.forward_offsets[slot]:self.forward_offsets[slot + 1]]:
            self.terms[term_id].live -= 1
        self.dead_slots += 1
        self._maybe_reorganize()

    def _maybe_reorganize(self) -> None:
        """Re-freeze the average length after a 25% drift, and drop dead slots once they outnumber live ones."""
        if self._rebuilding:
            return
        live = len(self.doc_slot)
        average = self.total_length / live if live else 0.0
        drifted = bool(average) and not 0.8 <= average / self.reference_length <= 1.25
        if drifted or self.dead_slots > max(1024, live):
            self.rebuild(reference_length=average or self.reference_length)

    def rebuild(self, reference_length: float | None = None) -> None:
        """Rewrite every column from the live documents (compacting slots), and sort all postings."""
        old_doc, old_length, old_short = self.slot_doc, self.slot_length, self.slot_short
        old_offsets, old_terms, old_tfs = self.forward_offsets, self.forward_terms, self.forward_tfs
        live_slots = sorted(self.doc_slot.values())
        term_names = {term_id: term for term, term_id in self.term_ids.items()}
        self.__init__()  # type: ignore[misc]
        self.reference_length = reference_length or 0.0
        self._rebuilding = True
        try:
            for slot in live_slots:
                start, end = old_offsets[slot], old_offsets[slot + 1]
                frequencies = {term_names[term_id]: tf
                               for term_id, tf in zip(old_terms[start:end], old_tfs[start:end])}
                self.add(old_doc[slot], frequencies, old_length[slot], short=old_short[slot])
        finally:
            self._rebuilding = False
        self.compact()

    def _merged(self, postings: _TermPostings, force: bool = False) -> _TermPostings:
        """Fold a long tail into the sorted part (dropping dead slots) once it is worth it."""
        tail = len(postings.tail_slots)
        if tail and (force or tail >= max(self.TAIL_MERGE_MIN, len(postings.slots) // 8)):
            slot_doc = self.slot_doc
            pairs = [(impact, slot) for slot, impact in zip(postings.slots, postings.impacts) if slot_doc[slot] >= 0]
            pairs.extend((impact, slot) for slot, impact in zip(postings.tail_slots, postings.tail_impacts)
                         if slot_doc[slot] >= 0)
            pairs.sort(reverse=True)
            postings.slots = array.array("i", [pair[1] for pair in pairs])
            postings.impacts = array.array("d", [pair[0] for pair in pairs])
            postings.tail_slots, postings.tail_impacts = array.array("i"), array.array("d")
            postings.max_impact = postings.impacts[0] if pairs else 0.0
        return postings

    def compact(self) -> None:
        """Sort every term's postings now (after a bulk load), so no query pays for it later."""
        for postings in self.terms:
            self._merged(postings, force=True)

    # -- search -------------------------------------------------------------------------------------------

    def term_weights(self, terms: Iterable[str], weights: Mapping[str, float] | None = None) -> dict[int, float]:
        """``{term_id: idf x query weight}`` for the query terms the index knows."""
        count = max(1, len(self.doc_slot))
        result = {}
        for term in dict.fromkeys(terms):
            term_id = self.term_ids.get(term)
            if term_id is not None and self.terms[term_id].live > 0:
                result[term_id] = bm25_idf(count, self.terms[term_id].live) * (weights or {}).get(term, 1.0)
        return result

    def term_frequencies(self, doc_id: int) -> dict[str, float]:
        """The indexed ``{term: tf}`` of a document (empty when it is not indexed)."""
        slot = self.doc_slot.get(doc_id)
        if slot is None:
            return {}
        names = {term_id: term for term, term_id in self.term_ids.items()} if slot is not None else {}
        start, end = self.forward_offsets[slot], self.forward_offsets[slot + 1]
        return {names[term_id]: tf for term_id, tf in zip(self.forward_terms[start:end], self.forward_tfs[start:end])}

    def _exact(self, slot: int, weights: Mapping[int, float]) -> float:
        start, end = self.forward_offsets[slot], self.forward_offsets[slot + 1]
        terms, tfs = self.forward_terms, self.forward_tfs
        k1, b = bm25_profile(self.slot_short[slot])
        norm = k1 * (1.0 - b + b * self.slot_length[slot] / self.reference_length)
        score = 0.0
        for term_id, weight in weights.items():
            position = bisect.bisect_left(terms, term_id, start, end)
            if position < end and terms[position] == term_id:
                tf = tfs[position]
                score += weight * tf * (k1 + 1.0) / (tf + norm)
        return score

    def exact_score(self, doc_id: int, weights: Mapping[int, float]) -> float:
        """A document's full BM25 score for ``{term_id: weight}`` (0 when not indexed)."""
        slot = self.doc_slot.get(doc_id)
        return 0.0 if slot is None else self._exact(slot, weights)

    def search(self, weights: Mapping[int, float], k: int, eligible: Container[int]) -> list[tuple[int, float]]:
        """The ``k`` best documents in ``eligible`` for ``{term_id: weight}``: ``(doc_id, score)``, best first."""
        if not weights or k <= 0:
            return []
        plan = sorted(((weight * self.terms[term_id].max_impact, weight, self._merged(self.terms[term_id]))
                       for term_id, weight in weights.items()), key=lambda entry: -entry[0])
        remaining = [0.0] * len(plan)
        for position in range(len(plan) - 2, -1, -1):
            remaining[position] = remaining[position + 1] + plan[position + 1][0]
        slot_doc = self.slot_doc
        scores: dict[int, float] = {}       # slot -> partial score
        exact: dict[int, float] = {}        # slot -> full score, for the best candidates so far
        missed = 0.0                         # the most any document can have lost to truncated postings
        cut: list[tuple[set[int], float]] = []   # per truncated term: the slots read, the most any other lost
        threshold = 0.0

        leaders: list[int] = []            # the k best partial candidates as of the last look
        get = scores.get

        touched: list[Iterable[int]] = []   # slots read since the last look

        def raise_threshold() -> float:
            """Score the k best partial candidates in full; their k-th score is a safe threshold. Partial
            scores only grow, so the leaders are among the old leaders and the slots read since."""
            nonlocal leaders
            pool = set(leaders)
            for batch in touched:
                pool.update(slot for slot in batch if slot in scores)
            touched.clear()
            leaders = heapq.nlargest(k, pool, key=get)
            for slot in leaders:
                if slot not in exact:
                    exact[slot] = self._exact(slot, weights)
            return heapq.nlargest(k, exact.values())[-1] if len(exact) >= k else 0.0

        for position, (_bound, weight, postings) in enumerate(plan):
            for slot, impact in zip(postings.tail_slots, postings.tail_impacts):
                score = scores.get(slot)
                if score is not None:
                    scores[slot] = score + weight * impact
                elif slot_doc[slot] in eligible:
                    scores[slot] = weight * impact
            ceiling = remaining[position] + missed
            slots, impacts = postings.slots, postings.impacts
            truncated = False
            touched.append(postings.tail_slots)
            start, chunk = 0, 128            # short first reads, so a threshold exists early; then longer
            while start < len(slots) and not truncated:
                if len(scores) >= k and len(slots) - start > 64:   # worth it only before a long read
                    threshold = max(threshold, raise_threshold())
                touched.append(slots[start:start + chunk])
                floor = (threshold - ceiling) / weight       # impacts at or below this cannot enter the top k
                for offset, (slot, impact) in enumerate(zip(slots[start:start + chunk], impacts[start:start + chunk])):
                    if impact <= floor:
                        rest = start + offset
                        if len(slots) - rest <= min(self.UPDATE_ONLY_MAX, 8 * len(scores)):
                            # A short remainder is finished for the candidates we have (no new one can
                            # qualify), so nothing is left to guess about this term.
                            get = scores.get
                            for tail_slot, tail_impact in zip(slots[rest:], impacts[rest:]):
                                score = get(tail_slot)
                                if score is not None:
                                    scores[tail_slot] = score + weight * tail_impact
                        else:
                            missed += weight * impact         # every later posting of this term is at most this
                            cut.append((set(slots[:rest]), weight * impact))
                        truncated = True
                        break
                    score = scores.get(slot)
                    if score is not None:
                        scores[slot] = score + weight * impact
                    elif slot_doc[slot] in eligible:
                        scores[slot] = weight * impact
                start, chunk = start + chunk, min(4096, 2 * chunk)
        if not missed:
            best_slots = heapq.nlargest(k, scores.items(), key=lambda pair: (pair[1], slot_doc[pair[0]]))
            return [(slot_doc[slot], score) for slot, score in best_slots]
        # Finish exactly: best partial first, until no partial score plus what it may lack can reach the top k.
        if len(scores) >= k:
            touched.append(list(scores))
            threshold = max(threshold, raise_threshold())
        cutoff = threshold - missed
        hopeful = sorted((slot for slot, partial in scores.items() if partial >= cutoff),
                         key=scores.__getitem__, reverse=True)
        best: list[tuple[float, int]] = []
        for slot in hopeful:
            partial = scores[slot]
            if len(best) >= k:
                if partial + missed < best[0][0]:
                    break                       # nothing further down can make it either
                if partial + sum(lost for seen, lost in cut if slot not in seen) < best[0][0]:
                    continue                    # what this one may lack cannot lift it far enough
            full = exact.get(slot)
            if full is None:
                full = self._exact(slot, weights)
            entry = (full, slot_doc[slot])
            if len(best) < k:
                heapq.heappush(best, entry)
            elif entry > best[0]:
                heapq.heapreplace(best, entry)
        return [(doc_id, score) for score, doc_id in sorted(best, reverse=True)]


# ==========================================================================================================
# 7. Privacy: credential and PII detection, and the one screening policy every way into the store uses
# ==========================================================================================================

# -- privacy: the detection engine (credentials and PII) -------------------------------------------------------
#
# Credentials are found in four layers, most specific first; where two findings overlap the earlier layer wins:
#
#   layer            finds                                                         family
#   ---------------  ------------------------------------------------------------  --------------------------
#   blocks           PEM / PuTTY private keys, base64-wrapped PEM                  private_key
#   providers        documented token formats: a literal prefix or infix, length,  stripe, github, aws, ...
#                    alphabet, a checksum where one is documented                  (CREDENTIAL_FAMILIES)
#   context          a provider's name shortly before a token of its shape         heroku, twilio, datadog, ...
#                    (formats with no prefix, e.g. a Heroku UUID key)
#   labels           a key that names a secret (password=, "apiKey": ..., <xToken>, password, generic,
#                    setProperty, --password, Authorization:, user:pass@ URLs,     http_auth, url_password
#                    k8s name:/value: pairs, Dockerfile ENV KEY value, sshpass / docker login -p, SQL
#                    WITH PASSWORD / IDENTIFIED BY, .netrc, psk=, chat "password for X is ...")
#   bare             a random-looking token in prose: shape and Shannon entropy    high_entropy
#
# Known non-secrets never count: placeholders (xxxx, <your-key>, ${TOKEN}, {{ secret }}, ****, changeme, ...),
# documented example keys (AKIAIOSFODNN7EXAMPLE, Stripe's docs test key, the Azurite emulator key), references
# to the environment or to code (os.environ["X"], process.env.X, get_token()), and our own placeholders
# ([credential:...], [redacted]), which a finding never cuts or nests in. In the bare layer, ids are not
# secrets: a UUID or hex id (request_id=, AZURE_TENANT_ID=, TWILIO_ACCOUNT_SID=), Stripe object ids (ch_, pi_,
# cus_, ...), OAuth client ids (...apps.googleusercontent.com), password hashes ($2b$12$...), file paths,
# certificate and public-key bodies, and base64 that decodes to ordinary text.
#
# Every pattern is fenced by look-arounds and uses bounded quantifiers, so the engine tries each pattern only
# at a bounded number of places per character and every rule runs in linear time. Provider rules are reached
# through one combined regex of literal anchors (the prefilter); only text at an anchor is examined further.

_PLACEHOLDER_PUNCTUATION = " \t\n\"'`,;:.-_/()[]{}<>|&=!?@#"
_CREDENTIAL_PLACEHOLDER = re.compile(r"\[(?:credential:[a-z0-9_]{1,40}|redacted)\]")
_MAX_REWRITE_PASSES = 64  # far above what any text needs; past it we fail closed instead of looping
_FAIL_CLOSED = "[credential:generic]"


@dataclasses.dataclass(frozen=True)
class CredentialFinding:
    """A secret found in text: where it is and what kind it is, never its value.

    Attributes:
        start: offset of the first character of the secret.
        end: offset just past the secret (labels such as ``password=`` or ``Bearer `` lie outside).
        family: a short slug naming the provider or kind, e.g. ``"stripe"``, ``"password"``.
        label: a human phrase such as ``"a Stripe secret key"``; it never holds any part of the secret.
    """

    start: int
    end: int
    family: str
    label: str


@dataclasses.dataclass(frozen=True)
class PIIFinding:
    """A piece of personal data found in text.

    Attributes:
        start: offset of the first character.
        end: offset just past the value.
        kind: one of ``PII_KINDS``.
        value: the text found (``text[start:end]``).
    """

    start: int
    end: int
    kind: str
    value: str


def _checked_str(text: object) -> str:
    if not isinstance(text, str):
        raise InvalidArgumentError(f"text must be a string, not {type(text).__name__}")
    return text


# -- shared judgements: placeholders, references, randomness ---------------------------------------------------

_PLACEHOLDER_WORDS = re.compile(
    r"(?i)example|changeme|change[_-]me|change[_-]?this|changeit|replace[_-]?(?:me|with|this)|placeholder|"
    r"dummy|sample|redacted|x{4}|(?<![a-z])fake(?![a-z])|(?<![a-z])your(?:[_ -]|(?=[A-Z]))|"
    r"(?:key|token|secret|password|value|pass)[_-]?here|insert[_ -]|enter[_ -]|<[^<>]{1,80}>|\$\{|\{\{|\{%|"
    r"%\(|\$\(|#\{|\*{3}|•{3}|\.{3}|…|not[_-]?a[_-]?(?:real|secret)|(?<![a-z])todo(?![a-z])|fixme|lorem|"
    r"(?<![A-Za-z0-9])(?-i:(?:foo|bar|baz)(?:bar|baz)?|FOO|BAR)(?![A-Za-z0-9])")
_PLACEHOLDER_VALUE = re.compile(
    r"\$[A-Za-z_][A-Za-z0-9_]*|%[A-Za-z_][A-Za-z0-9_]*%|__[A-Za-z0-9_]+__|@[A-Za-z0-9_]+@|\{[A-Za-z0-9_. -]+\}|"
    r"\[[A-Za-z0-9_ :.-]*\]|\(.*\)|[<\[({].*[>\])}]")
# Values that name a type, a state or the secret itself rather than being one ("password": "string").
_NOT_A_VALUE = frozenset("""
    password passwd pass secret token apikey api_key key credential credentials none null nil undefined true
    false string str bytes int required optional hidden masked empty default bearer basic token_here unknown
    unset notset not_set n/a na tbd secretkey secret_key mypassword my_password yourpassword password123
    test testing
""".split())


# Keys published in providers' own documentation and tools (Stripe's API reference test key, the Azurite /
# Azure Storage emulator's well-known account key): shared with everyone, so not secrets.
_DOCUMENTED_EXAMPLES = frozenset({
    "sk_test_4eC39HqLyjWDarjtT1zdp7dc", "sk_test_BQokikJOvBiI2HlWgH4olfQ2", "pk_test_TYooMQauvdEDq54NiTphI7jx",
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==",
})


def _is_placeholder(value: str) -> bool:
    """Whether a would-be secret is a template, mask, example or our own placeholder."""
    if value in _DOCUMENTED_EXAMPLES:
        return True
    if len(set(value)) <= 2 or len(set(value.lower())) <= 3 and len(value) >= 8:
        return True
    if _PLACEHOLDER_WORDS.search(value) or _PLACEHOLDER_VALUE.fullmatch(value):
        return True
    if value.lower().strip("\"'`") in _NOT_A_VALUE:
        return True
    stripped = _CREDENTIAL_PLACEHOLDER.sub("", value)
    return not stripped.strip(_PLACEHOLDER_PUNCTUATION)


def _is_template(value: str) -> bool:
    """The narrow placeholder test for formats whose own alphabet holds template-like punctuation (Django keys
    hold ``%(``, ``***``, ``${``): only a documented example, a word such as "example" or a mask counts."""
    return value in _DOCUMENTED_EXAMPLES or re.search(r"(?i)example|x{6}|\*{6}|your[_-]|change[_-]?me", value) is not None


_CAMEL_WORD = re.compile(r"[A-Z]?[a-z]{3,}|[A-Z]{3,}(?![a-z])")


_VOWELS = frozenset("aeiouyAEIOUY")


def _wordiness(token: str) -> float:
    """The share of ``token`` covered by word-like letter runs (camel humps, snake parts).

    A run counts only when it is pronounceable (about a third of its letters vowels, as in written words):
    random strings have runs of letters too (``pltj``, ``DLJG``), but few vowels in them."""
    covered = 0
    for part in _CAMEL_WORD.findall(token):
        vowels = sum(char in _VOWELS for char in part)
        if vowels and vowels * 4 >= len(part):
            covered += len(part)
    return covered / max(1, len(token))


def _entropy(token: str) -> float:
    """Shannon entropy of ``token`` in bits per character."""
    counts: dict[str, int] = {}
    for char in token:
        counts[char] = counts.get(char, 0) + 1
    size = len(token)
    return -sum(n / size * math.log2(n / size) for n in counts.values())


_HEXISH = re.compile(r"[0-9a-fA-F-]+")


def _looks_generated(token: str, *, minimum: int = 20) -> bool:
    """Whether ``token`` looks generated (a key) rather than written (a word, identifier, hash or date).

    A token counts when it is long enough, mixes letters and digits the way random strings do (digits spread
    through it, no long word-like runs), and its entropy is close to what a random string of its length has.
    Pure hex (hashes, git SHAs, UUIDs) never counts: without a provider's name or a key it is not a secret.
    """
    core = token.rstrip("=")
    size = len(core)
    if size < minimum or _HEXISH.fullmatch(core):
        return False
    digits = sum(char.isdigit() for char in core)
    upper = sum(char.isupper() for char in core)
    lower = sum(char.islower() for char in core)
    if size >= 30 and digits >= 1 and upper >= 3 and lower >= 3 and _entropy(core) >= 4.3 and \
            _wordiness(core) < 0.7:
        return True  # long, mixed case and near the entropy of random base62: a key with few digits
    if size >= 30 and not lower and digits >= 4 and core.isalnum() and _entropy(core) >= 4.0 and \
            _wordiness(core) < 0.8:
        return True  # upper-case base36 (Vultr-style keys)
    if digits < 2 or upper + lower < 4:
        return False
    if not (upper >= 2 and lower >= 2) and not (size >= 32 and digits >= 4):
        return False
    if _wordiness(core) > 0.5:
        return False
    threshold = min(4.2, 2.6 + 0.045 * size) if size < 40 else 4.2
    return _entropy(core) >= threshold - (0.6 if size >= 60 else 0.0)


# -- layer 1: private key blocks ---------------------------------------------------------------------------

_KEY_BLOCKS = re.compile(
    r"-----BEGIN (?:[A-Z0-9]{1,20} ){0,4}PRIVATE KEY(?: BLOCK)?-----"
    r"(?:[^-]|-(?!----END ))*"  # the body: one pass, stopping at the END line or the end of the text
    r"(?:-----END (?:[A-Z0-9]{1,20} ){0,4}PRIVATE KEY(?: BLOCK)?-----|\Z)"
    r"|PuTTY-User-Key-File-[0-9]: [^\n]{1,80}\n(?:[^\n]*\n){0,60}?Private-(?:MAC|Hash): ?[0-9a-fA-F]{20,128}"
    r"|(?<![A-Za-z0-9+/])LS0tLS1CRUdJT[A-Za-z0-9+/]{20,}={0,2}")  # base64 of "-----BEGIN"; kept when PRIVATE


def _key_blocks(text: str) -> Iterable[tuple[int, int, str, str]]:
    if "-----BEGIN" not in text and "PuTTY-User" not in text and "LS0tLS1CRUdJT" not in text:
        return
    for match in _KEY_BLOCKS.finditer(text):
        value = match.group()
        if value.startswith("-----BEGIN") and not _B64_TOKEN.search(
                re.sub(r"<[^<>\n]{0,80}>|-----[A-Z0-9 ]{1,60}-----", "", value)):
            continue  # a template: "-----BEGIN PRIVATE KEY-----\n...\n-----END ..." or "<your key here>"
        if value.startswith("LS0tLS1"):
            try:
                decoded = _b64_head(value)
            except ValueError:
                continue
            if "PRIVATE KEY" not in decoded:
                continue
        yield match.start(), match.end(), "private_key", "a private key"


def _b64_head(value: str) -> str:
    """The first few dozen decoded characters of a base64 run (enough to read a PEM header)."""
    head = value[:64]
    return base64.b64decode(head[: len(head) - len(head) % 4]).decode("ascii", "replace")


# -- layer 2: provider token formats ---------------------------------------------------------------------------
#
# One row per documented format: family, label, pattern, and optionally the literal anchors that reach it
# (default: the pattern's own literal prefix), how far before the anchor the token may start (``back``, for
# formats recognised by an infix such as Telegram's ``:AA``), and a check (a checksum, or randomness for
# prefixes short enough to occur in code). Patterns are written from each provider's published format.

_B62 = "[A-Za-z0-9]"
_B64U = "[A-Za-z0-9_-]"
_HEX = "[0-9a-f]"
_UUID = "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
_BASE62_DIGITS = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_BASE58_DIGITS = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"


def _github_checksum(token: str) -> bool:
    """GitHub's documented token checksum: the last 6 characters are base62(CRC32(the 30 random ones))."""
    body = token[4:]
    entropy, tail = body[:30], body[30:]
    value = zlib.crc32(entropy.encode("ascii"))
    encoded = ""
    while value:
        value, digit = divmod(value, 62)
        encoded = _BASE62_DIGITS[digit] + encoded
    return encoded.rjust(6, "0") == tail


def _base58check(token: str) -> bool:
    """Bitcoin's base58check: the last 4 bytes are the start of SHA-256(SHA-256(the rest))."""
    number = 0
    for char in token:
        index = _BASE58_DIGITS.find(char)
        if index < 0:
            return False
        number = number * 58 + index
    raw = number.to_bytes((number.bit_length() + 7) // 8, "big")
    raw = b"\0" * (len(token) - len(token.lstrip("1"))) + raw
    if len(raw) < 5:
        return False
    payload, checksum = raw[:-4], raw[-4:]
    return hashlib.sha256(hashlib.sha256(payload).digest()).digest()[:4] == checksum


def _randomish(token: str) -> bool:
    """A prefix rule's extra check for short prefixes: the body must look generated."""
    body = token.split("-", 1)[-1] if token[:3] in ("sk-", "pk-", "rk-", "ak-") else token
    return any(char.isdigit() for char in body) or re.search(r"[A-Za-z0-9]{20}", body) is not None


@dataclasses.dataclass(frozen=True)
class _ProviderRule:
    family: str
    label: str
    pattern: re.Pattern[str]
    anchors: tuple[str, ...]
    back: int = 0
    check: Callable[[str], bool] | None = None
    placeholder_words: bool = True  # False for formats whose alphabet holds "%(", "***", ... by chance


def _rule(family: str, label: str, pattern: str, *anchors: str, back: int = 0, lead: str = "A-Za-z0-9",
          tail: str = "A-Za-z0-9_", check: Callable[[str], bool] | None = None,
          placeholder_words: bool = True) -> _ProviderRule:
    """A provider rule: ``pattern`` fenced so it neither starts nor ends inside a longer token."""
    if not anchors:
        literal = re.match(r"(?:[A-Za-z0-9_~!-]|\\[.$/+-])+", pattern)
        if literal is None:
            raise ValueError(f"rule {family} needs an anchor")
        anchors = (literal.group().replace("\\", ""),)
    compiled = re.compile(rf"(?<![{lead}])(?:{pattern})(?![{tail}])")
    return _ProviderRule(family, label, compiled, anchors, back, check, placeholder_words)


_PROVIDER_RULES: tuple[_ProviderRule, ...] = (
    # Cloud platforms
    _rule("aws", "an AWS access key id", r"(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}", "AKIA", "ASIA", "ABIA", "ACCA"),
    _rule("amazon_mws", "an Amazon MWS auth token", rf"amzn\.mws\.{_UUID}"),
    _rule("google", "a Google API key", rf"AIza{_B64U}{{35}}", tail="A-Za-z0-9_-"),
    _rule("google", "a Google OAuth client secret", rf"GOCSPX-{_B64U}{{28}}", tail="A-Za-z0-9_-"),
    _rule("google", "a Google OAuth access token", rf"ya29\.{_B64U}{{16,512}}", tail="A-Za-z0-9_-"),
    _rule("google", "a Google OAuth refresh token", rf"1//0{_B64U}{{30,512}}", "1//0",
          tail="A-Za-z0-9_-"),
    _rule("firebase", "a Firebase Cloud Messaging server key", rf"AAAA{_B64U}{{7}}:APA91b{_B64U}{{100,180}}",
          ":APA91b", back=11, tail="A-Za-z0-9_-"),
    _rule("azure", "an Azure AD client secret", r"[A-Za-z0-9_~.-]{3}[0-9]Q~[A-Za-z0-9_~.-]{31,34}", "Q~",
          back=4, lead="A-Za-z0-9_~.-", tail="A-Za-z0-9_~.-"),
    _rule("azure", "an Azure DevOps personal access token", rf"{_B62}{{76}}AZDO{_B62}{{4}}", "AZDO", back=76),
    _rule("azure", "an Azure container registry key", r"[A-Za-z0-9+/]{42}\+ACR[A-Za-z0-9]{6}", "+ACR", back=42,
          lead="A-Za-z0-9+/"),
    _rule("alibaba", "an Alibaba Cloud access key id", rf"LTAI{_B62}{{12,20}}"),
    _rule("tencent", "a Tencent Cloud secret id", rf"AKID{_B62}{{13,40}}"),
    _rule("yandex", "a Yandex Cloud API key", rf"AQVN{_B64U}{{35,38}}", tail="A-Za-z0-9_-"),
    _rule("yandex", "a Yandex OAuth token", rf"y0_{_B64U}{{55,80}}", tail="A-Za-z0-9_-"),
    _rule("yandex", "a Yandex IAM token", rf"t1\.[A-Z0-9a-z_-]{{20,200}}={{0,2}}\.[A-Z0-9a-z_-]{{86}}={{0,2}}"),
    _rule("digitalocean", "a DigitalOcean token", r"do[opr]_v1_[a-f0-9]{64}", "dop_v1_", "doo_v1_", "dor_v1_"),
    _rule("scaleway", "a Scaleway access key", r"SCW[A-Z0-9]{17}"),
    _rule("heroku", "a Heroku API key", rf"HRKU-{_B64U}{{58,64}}", tail="A-Za-z0-9_-"),
    _rule("flyio", "a Fly.io token", rf"fo1_{_B64U}{{43}}", tail="A-Za-z0-9_-"),
    _rule("flyio", "a Fly.io macaroon token", r"fm[12][ar]?_[A-Za-z0-9+/=_,-]{100,2000}", "fm1_", "fm2_",
          "fm1a_", "fm2a_", "fm1r_", "fm2r_", tail="A-Za-z0-9+/=_,-"),
    _rule("netlify", "a Netlify personal access token", rf"nfp_{_B62}{{36,40}}"),
    _rule("vercel", "a Vercel Blob read-write token", rf"vercel_blob_rw_{_B62}{{16}}_{_B62}{{30}}"),
    _rule("render", "a Render API key", rf"rnd_{_B62}{{32}}"),
    _rule("supabase", "a Supabase access token", r"sbp_[a-f0-9]{40}"),
    _rule("supabase", "a Supabase secret key", rf"sb_secret_{_B64U}{{20,64}}", tail="A-Za-z0-9_-"),
    _rule("planetscale", "a PlanetScale token or password", r"pscale_(?:tkn|pw|oauth)_[A-Za-z0-9_.=-]{32,64}",
          "pscale_tkn_", "pscale_pw_", "pscale_oauth_", tail="A-Za-z0-9_.=-"),
    _rule("neon", "a Neon API key", r"napi_[a-z0-9]{64}"),
    _rule("terraform", "a Terraform Cloud token", rf"{_B62}{{14}}\.atlasv1\.[A-Za-z0-9_=-]{{60,70}}",
          ".atlasv1.", back=14, tail="A-Za-z0-9_=-"),
    _rule("vault", "a HashiCorp Vault token", rf"hv[sbr]\.{_B64U}{{90,250}}", "hvs.", "hvb.", "hvr.",
          tail="A-Za-z0-9_-"),
    _rule("vault", "a legacy HashiCorp Vault token", rf"s\.{_B62}{{24}}", lead="A-Za-z0-9.",
          check=lambda token: _looks_generated(token[2:], minimum=20)),
    _rule("pulumi", "a Pulumi access token", r"pul-[a-f0-9]{40}"),
    _rule("amazon", "an Amazon Login with Amazon client secret", r"amzn1\.oa2-cs\.v1\.[a-f0-9]{64}", "amzn1.oa2-cs."),
    _rule("e2b", "an E2B API key", r"e2b_[a-f0-9]{40}"),
    _rule("django", "a Django secret key", r"django-insecure-(?:[a-z0-9!@#$%^*(=_+)-]|&(?![A-Za-z_]{1,30}=)){40,60}",
          "django-insecure-", tail="a-z0-9!@#$%^*(=_+)-", placeholder_words=False),
    _rule("doppler", "a Doppler token", rf"dp\.(?:pt|ct|sa|scim|audit|st(?:\.[a-z0-9_-]{{2,35}})?)\.{_B62}{{40,44}}",
          "dp."),
    _rule("onepassword", "a 1Password service account token", r"ops_eyJ[A-Za-z0-9+/=_-]{100,2000}",
          tail="A-Za-z0-9+/=_-"),
    _rule("onepassword", "a 1Password secret key",
          r"A3-[A-Z0-9]{6}-(?:[A-Z0-9]{6}|[A-Z0-9]{5})-[A-Z0-9]{5}-[A-Z0-9]{5}-[A-Z0-9]{5}-[A-Z0-9]{5}",
          tail="A-Za-z0-9_-"),
    _rule("age", "an age secret key", r"AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}"),
    _rule("openshift", "an OpenShift user token", rf"sha256~{_B64U}{{43}}", tail="A-Za-z0-9_-"),
    _rule("rancher", "a Rancher API token", r"token-[a-z0-9]{5}:[a-z0-9]{54}"),
    _rule("portainer", "a Portainer access token", r"ptr_[A-Za-z0-9+/=]{40,50}", tail="A-Za-z0-9+/="),
    # Source hosting, CI and package registries
    _rule("github", "a GitHub token", rf"gh[pousr]_{_B62}{{36}}", "ghp_", "gho_", "ghu_", "ghs_", "ghr_",
          check=_github_checksum),
    _rule("github", "a GitHub fine-grained token", r"github_pat_[A-Za-z0-9_]{22,255}"),
    _rule("gitlab", "a GitLab token",
          r"gl(?:pat|dt|rt|cbt|ptt|oas|soat|ft|imt|agent|ffct|wt)-[A-Za-z0-9_-]{20,64}(?:\.[A-Za-z0-9_-]{2,16}){0,2}",
          "glpat-", "gldt-", "glrt-", "glcbt-", "glptt-", "gloas-", "glsoat-", "glft-", "glimt-", "glagent-",
          "glffct-", "glwt-", tail="A-Za-z0-9_-"),
    _rule("gitlab", "a GitLab runner registration token", rf"GR1348941{_B64U}{{20}}", tail="A-Za-z0-9_-"),
    _rule("bitbucket", "a Bitbucket app password", r"ATBB[A-Za-z0-9_=.-]{32}", tail="A-Za-z0-9_=.-"),
    _rule("atlassian", "an Atlassian API token", r"AT[ACS]TT3[A-Za-z0-9_=-]{150,300}", "ATATT3", "ATCTT3",
          "ATSTT3", tail="A-Za-z0-9_=-"),
    _rule("buildkite", "a Buildkite agent or API token", r"bk(?:ua|agent)_[a-f0-9]{40}", "bkua_", "bkagent_"),
    _rule("circleci", "a CircleCI personal or project token", r"CCIP(?:AT|RJ)_[A-Za-z0-9]{22}_[a-f0-9]{40}",
          "CCIPAT_", "CCIPRJ_"),
    _rule("sonarqube", "a SonarQube token", r"sq[upa]_[a-f0-9]{40}", "squ_", "sqp_", "sqa_"),
    _rule("npm", "an npm access token", rf"npm_{_B62}{{36}}"),
    _rule("pypi", "a PyPI upload token", rf"pypi-AgE(?:IcHlwaS5vcmc|NdGVzdC5weXBpLm9yZw){_B64U}{{50,500}}",
          "pypi-AgE", tail="A-Za-z0-9_-"),
    _rule("rubygems", "a RubyGems API key", r"rubygems_[a-f0-9]{48}"),
    _rule("clojars", "a Clojars deploy token", rf"CLOJARS_{_B62}{{60}}"),
    _rule("nuget", "a NuGet API key", r"oy2[a-z0-9]{43}"),
    _rule("docker", "a Docker Hub access token", rf"dckr_(?:pat|oat)_{_B64U}{{27,60}}", "dckr_pat_", "dckr_oat_",
          tail="A-Za-z0-9_-"),
    _rule("jfrog", "a JFrog API key", rf"AKCp{_B62}{{69}}"),
    _rule("jfrog", "a JFrog reference token", rf"cmVmdGtuOjAxOj{_B62}{{40,100}}"),
    _rule("octopus", "an Octopus Deploy API key", r"API-[A-Z0-9]{26,30}"),
    _rule("deno", "a Deno Deploy token", rf"dd[pw]_{_B62}{{36}}", "ddp_", "ddw_"),
    _rule("prefect", "a Prefect API key", rf"pnu_{_B62}{{36}}"),
    _rule("readme", "a ReadMe API key", r"rdme_[a-z0-9]{70}"),
    _rule("scalingo", "a Scalingo API token", rf"tk-us-{_B64U}{{48}}", tail="A-Za-z0-9_-"),
    _rule("postman", "a Postman API key", r"PMAK-[a-f0-9]{24}-[a-f0-9]{34}"),
    _rule("infracost", "an Infracost API key", rf"ico-{_B62}{{32}}"),
    _rule("harness", "a Harness access token", rf"(?:pat|sat)\.{_B64U}{{22}}\.[0-9a-f]{{24}}\.{_B62}{{20}}",
          "pat.", "sat."),
    _rule("launchdarkly", "a LaunchDarkly key", rf"(?:api|sdk)-{_UUID}", "api-", "sdk-"),
    _rule("contentful", "a Contentful personal access token", rf"CFPAT-{_B64U}{{43}}", tail="A-Za-z0-9_-"),
    _rule("frameio", "a Frame.io developer token", r"fio-u-[A-Za-z0-9_=-]{64}", tail="A-Za-z0-9_=-"),
    _rule("figma", "a Figma personal access token", rf"figd_{_B64U}{{40,43}}", tail="A-Za-z0-9_-"),
    _rule("adobe", "an Adobe client secret", rf"p8e-{_B62}{{32}}"),
    _rule("linear", "a Linear API key", rf"lin_api_{_B62}{{40}}"),
    _rule("linear", "a Linear OAuth token", r"lin_oauth_[a-f0-9]{64}"),
    _rule("notion", "a Notion integration token", rf"secret_{_B62}{{43}}"),
    _rule("notion", "a Notion integration token", rf"ntn_[0-9]{{11}}{_B62}{{35}}"),
    _rule("airtable", "an Airtable personal access token", rf"pat{_B62}{{14}}\.[a-f0-9]{{64}}"),
    _rule("clickup", "a ClickUp API token", r"pk_[0-9]{6,10}_[0-9A-Z]{32}"),
    _rule("dropbox", "a Dropbox access token", rf"sl\.(?:u\.)?{_B64U}{{130,1400}}", tail="A-Za-z0-9_-"),
    _rule("typeform", "a Typeform personal access token", r"tfp_[A-Za-z0-9_.=-]{40,64}", tail="A-Za-z0-9_.=-"),
    # Communication
    _rule("slack", "a Slack token", r"xox(?:[abposre]|e\.xox[bp])-[0-9A-Za-z-]{10,250}", "xoxa-", "xoxb-",
          "xoxp-", "xoxo-", "xoxs-", "xoxr-", "xoxe-", "xoxe.", tail="A-Za-z0-9_-"),
    _rule("slack", "a Slack app-level token", r"xapp-[0-9]-[A-Z0-9]{8,12}-[0-9]{10,14}-[a-z0-9]{40,80}", "xapp-"),
    _rule("slack", "a Slack webhook URL",
          r"hooks\.slack\.com/(?:services|workflows|triggers)/(?P<secret>[A-Za-z0-9_/-]{20,160})",
          tail="A-Za-z0-9_/-"),
    _rule("discord", "a Discord webhook URL",
          r"discord(?:app)?\.com/api/webhooks/(?P<secret>[0-9]{17,20}/[A-Za-z0-9_-]{60,70})", "discord.com/api/",
          "discordapp.com/api/", tail="A-Za-z0-9_-"),
    _rule("telegram", "a Telegram bot token", r"[0-9]{8,10}:AA[A-Za-z0-9_-]{33}", ":AA", back=10, lead="0-9",
          tail="A-Za-z0-9_-"),
    _rule("teams", "a Microsoft Teams webhook URL",
          r"webhook\.office\.com/webhookb2/(?P<secret>[0-9a-f@-]{36,80}/IncomingWebhook/[0-9a-f]{32}/[0-9a-f-]{36})",
          lead="A-Za-z0-9_"),
    _rule("zapier", "a Zapier webhook URL", r"hooks\.zapier\.com/hooks/catch/(?P<secret>[0-9]{3,12}/[a-z0-9]{5,12})",
          tail="A-Za-z0-9_"),
    _rule("twilio", "a Twilio API key", r"SK[0-9a-fA-F]{32}"),
    _rule("sendgrid", "a SendGrid API key", rf"SG\.{_B64U}{{22}}\.{_B64U}{{43}}", tail="A-Za-z0-9_-"),
    _rule("mailgun", "a Mailgun API key", r"key-[0-9a-f]{32}"),
    _rule("mailchimp", "a Mailchimp API key", r"[0-9a-f]{32}-us[0-9]{1,2}", "-us", back=32),
    _rule("mailersend", "a MailerSend API token", r"mlsn\.[a-f0-9]{64}"),
    _rule("mandrill", "a Mandrill API key", rf"md-{_B64U}{{22}}", tail="A-Za-z0-9_-",
          check=lambda token: _looks_generated(token[3:], minimum=20)),
    _rule("brevo", "a Brevo (Sendinblue) API key", rf"x(?:keysib|smtpsib)-[a-f0-9]{{64}}-{_B62}{{16}}",
          "xkeysib-", "xsmtpsib-"),
    _rule("resend", "a Resend API key", rf"re_{_B62}{{8}}_{_B62}{{24}}"),
    _rule("postmark", "a Postmark server token", rf"(?<=X-Postmark-Server-Token: ){_UUID}", "X-Postmark-"),
    _rule("intercom", "an Intercom access token", r"dG9rOi[A-Za-z0-9+/=_-]{40,80}", tail="A-Za-z0-9+/=_-"),
    _rule("hubspot", "a HubSpot private app token", rf"pat-(?:na|eu|ap)[12]-{_UUID}", "pat-na", "pat-eu", "pat-ap"),
    _rule("segment", "a Segment public API token", rf"sgp_{_B62}{{64}}"),
    _rule("sourcegraph", "a Sourcegraph access token", r"sgp_(?:[a-f0-9]{16}_)?[a-f0-9]{40}"),
    _rule("posthog", "a PostHog personal API key", rf"phx_{_B62}{{43}}"),
    _rule("tailscale", "a Tailscale key", rf"tskey-(?:auth|api|client|webhook|scim)-{_B62}{{6,24}}-{_B62}{{20,40}}",
          "tskey-"),
    _rule("newrelic", "a New Relic key", r"NRAK-[A-Z0-9]{27}|NRII-[A-Za-z0-9_-]{32}|NRJS-[a-f0-9]{19}|NRAA-[a-f0-9]{27}",
          "NRAK-", "NRII-", "NRJS-", "NRAA-", tail="A-Za-z0-9_-"),
    _rule("newrelic", "a New Relic license key", r"[a-f0-9]{36}NRAL", "NRAL", back=36),
    _rule("dynatrace", "a Dynatrace token", r"dt0[a-z][0-9]{2}\.[A-Z0-9]{24}\.[A-Z0-9]{64}", "dt0"),
    _rule("sentry", "a Sentry auth token", r"sntrys_eyJ[A-Za-z0-9+/=_-]{60,400}|sntryu_[a-f0-9]{64}", "sntrys_",
          "sntryu_", tail="A-Za-z0-9+/=_-"),
    _rule("grafana", "a Grafana Cloud token", r"glc_[A-Za-z0-9+/]{32,400}={0,2}", tail="A-Za-z0-9+/="),
    _rule("grafana", "a Grafana service account token", rf"glsa_{_B62}{{32}}_[A-Fa-f0-9]{{8}}"),
    _rule("grafana", "a Grafana API key", r"eyJrIjoi[A-Za-z0-9+/]{50,100}={0,2}", tail="A-Za-z0-9+/="),
    _rule("honeybadger", "a Honeybadger token", rf"hbp_{_B62}{{36}}"),
    _rule("honeycomb", "a Honeycomb ingest key", r"hc[ax]i[kc]_[a-z0-9]{50,70}", "hcaik_", "hcxik_", "hcaic_",
          "hcxic_"),
    _rule("neptune", "a Neptune.ai API token", r"eyJhcGlfYWRkcmVzcyI6[A-Za-z0-9+/=]{40,400}", tail="A-Za-z0-9+/="),
    # Payments and commerce
    _rule("stripe", "a Stripe secret key", rf"[sr]k_(?:live|test)_{_B62}{{20,247}}", "sk_live_", "sk_test_",
          "rk_live_", "rk_test_"),
    _rule("stripe", "a Stripe webhook signing secret", rf"whsec_{_B62}{{32,64}}"),
    _rule("checkout", "a Checkout.com secret key", r"sk_(?:sbox_)?[a-z0-9]{26,27}", "sk_", "sk_sbox_",
          check=lambda token: (token.startswith("sk_sbox_") or sum(char.isdigit() for char in token) >= 3)
          and _entropy(token) >= 3.5),
    _rule("gocardless", "a GoCardless access token", r"(?:live|sandbox)_[A-Za-z0-9_=-]{40}", "live_", "sandbox_",
          tail="A-Za-z0-9_=-", check=lambda token: _looks_generated(token.split("_", 1)[1], minimum=30)),
    _rule("klaviyo", "a Klaviyo private API key", r"pk_[a-f0-9]{34}",
          check=lambda token: sum(char.isdigit() for char in token) >= 4),
    _rule("square", "a Square access token", rf"sq0atp-{_B64U}{{22}}|EAAA{_B64U}{{60}}", "sq0atp-", "EAAA",
          tail="A-Za-z0-9_-"),
    _rule("square", "a Square OAuth secret", rf"sq0csp-{_B64U}{{43}}", tail="A-Za-z0-9_-"),
    _rule("braintree", "a Braintree access token", r"access_token\$(?:production|sandbox)\$[0-9a-z]{16}\$[0-9a-f]{32}",
          "access_token$"),
    _rule("shopify", "a Shopify access token", r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}", "shpat_", "shpca_", "shppa_",
          "shpss_"),
    _rule("woocommerce", "a WooCommerce API key", r"c[ks]_[a-f0-9]{40}", "ck_", "cs_"),
    _rule("razorpay", "a Razorpay key", rf"rzp_(?:live|test)_{_B62}{{14}}", "rzp_live_", "rzp_test_"),
    _rule("flutterwave", "a Flutterwave secret key", r"FLWSECK(?:_TEST)?-[a-h0-9]{32}-X|FLWSECK_TEST[a-h0-9]{12}",
          "FLWSECK"),
    _rule("plaid", "a Plaid access token", rf"access-(?:sandbox|development|production)-{_UUID}", "access-"),
    _rule("shippo", "a Shippo API token", r"shippo_(?:live|test)_[a-f0-9]{40}", "shippo_"),
    _rule("easypost", "an EasyPost API key", rf"EZ[AT]K{_B62}{{54}}", "EZAK", "EZTK"),
    _rule("duffel", "a Duffel API token", r"duffel_(?:test|live)_[A-Za-z0-9_=-]{43}", "duffel_", tail="A-Za-z0-9_=-"),
    _rule("salesforce", "a Salesforce access token", rf"00D{_B62}{{12,15}}![A-Za-z0-9._]{{80,110}}",
          tail="A-Za-z0-9._"),
    # Social and media
    _rule("facebook", "a Facebook access token", rf"EAA[BCDGIJ]{_B62}{{80,300}}", "EAA"),
    _rule("twitter", "a Twitter (X) bearer token", r"A{21}[A-Za-z0-9%]{30,120}", "AAAAAAAAAAAAAAAAAAAAA",
          tail="A-Za-z0-9%"),
    _rule("instagram", "an Instagram access token", rf"IGQV{_B64U}{{100,300}}", tail="A-Za-z0-9_-"),
    _rule("pinterest", "a Pinterest access token", rf"pina_{_B62}{{32,120}}"),
    _rule("mapbox", "a Mapbox secret token", rf"sk\.eyJ{_B64U}{{20,400}}\.{_B64U}{{20,30}}", tail="A-Za-z0-9_-"),
    _rule("twitch", "a Twitch OAuth token", r"oauth:[a-z0-9]{30}", "oauth:",
          check=lambda token: sum(char.isdigit() for char in token) >= 3),
    # AI and data platforms
    _rule("openai", "an OpenAI API key", rf"sk-(?:proj|svcacct|admin)-{_B64U}{{20,200}}", "sk-proj-",
          "sk-svcacct-", "sk-admin-", tail="A-Za-z0-9_-"),
    _rule("openai", "an OpenAI API key", rf"sk-{_B62}{{20}}T3BlbkFJ{_B62}{{20}}", "sk-"),
    _rule("anthropic", "an Anthropic API key", rf"sk-ant-(?:api|admin|sid|oat|ort)[0-9]{{2}}-{_B64U}{{80,120}}",
          "sk-ant-", tail="A-Za-z0-9_-"),
    _rule("openrouter", "an OpenRouter API key", r"sk-or-v1-[a-f0-9]{64}", "sk-or-"),
    _rule("huggingface", "a Hugging Face token", r"hf_[A-Za-z]{34}|api_org_[A-Za-z]{34}", "hf_", "api_org_"),
    _rule("groq", "a Groq API key", rf"gsk_{_B62}{{52}}"),
    _rule("replicate", "a Replicate API token", rf"r8_{_B62}{{37}}"),
    _rule("perplexity", "a Perplexity API key", rf"pplx-{_B62}{{48}}"),
    _rule("xai", "an xAI API key", rf"xai-{_B62}{{80}}"),
    _rule("cerebras", "a Cerebras API key", r"csk-[a-z0-9]{48}"),
    _rule("langsmith", "a LangSmith API key", r"lsv2_(?:pt|sk)_[a-f0-9]{32}_[a-f0-9]{10}", "lsv2_"),
    _rule("elevenlabs", "an ElevenLabs API key", r"sk_[a-f0-9]{48}"),
    _rule("modal", "a Modal token secret", rf"as-{_B62}{{22}}", "as-",
          check=lambda token: any(c.isdigit() for c in token) and sum(c.isupper() for c in token) >= 3 and
          sum(c.islower() for c in token) >= 4 and _wordiness(token[3:]) < 0.5),
    _rule("tavily", "a Tavily API key", rf"tvly-(?:dev-|prod-)?{_B62}{{32}}", "tvly-"),
    _rule("firecrawl", "a Firecrawl API key", r"fc-[a-f0-9]{32}"),
    _rule("browserbase", "a Browserbase API key", rf"bb_live_{_B64U}{{20,40}}", tail="A-Za-z0-9_-"),
    _rule("pagerduty", "a PagerDuty API key", r"u\+[A-Za-z0-9_+-]{18}", "u+", lead="A-Za-z0-9+",
          tail="A-Za-z0-9_+-", check=lambda token: sum(c.isupper() for c in token) >= 2 and
          sum(c.islower() for c in token) >= 3 and _wordiness(token[2:]) < 0.5),
    _rule("pinecone", "a Pinecone API key", rf"pcsk_{_B62}{{5,6}}_{_B62}{{40,70}}"),
    _rule("fireworks", "a Fireworks AI API key", rf"fw_{_B62}{{24}}"),
    _rule("anyscale", "an Anyscale API key", rf"esecret_{_B64U}{{30,60}}", tail="A-Za-z0-9_-"),
    _rule("databricks", "a Databricks token", r"dapi[0-9a-f]{32}(?:-[0-9])?"),
    _rule("adafruit", "an Adafruit IO key", rf"aio_{_B62}{{28}}"),
    _rule("akamai", "an Akamai client token", r"akab-[a-z0-9]{16}-[a-z0-9]{16}"),
    _rule("cloudflare", "a Cloudflare Origin CA key", r"v1\.0-[a-f0-9]{24}-[a-f0-9]{146}"),
    # Crypto wallets: the checksum rules out look-alikes
    _rule("bitcoin", "a Bitcoin extended private key", r"[xt]prv[1-9A-HJ-NP-Za-km-z]{107,108}", "xprv", "tprv",
          check=_base58check),
    # Generic prefixed keys shared by many providers (OpenAI-compatible servers, DeepSeek, Stability, ...)
    _rule("api_key", "an API key with an sk-/pk-/rk-/ak- prefix", rf"(?:sk|pk|rk|ak)-{_B64U}{{20,200}}", "sk-", "pk-",
          "rk-", "ak-", lead="A-Za-z0-9_-", tail="A-Za-z0-9_-", check=_randomish),
    _rule("jwt", "a JSON Web Token", rf"eyJ{_B64U}{{5,4000}}\.eyJ{_B64U}{{5,8000}}\.{_B64U}{{0,2000}}", "eyJ",
          lead="A-Za-z0-9_-", tail="A-Za-z0-9_-"),
)


def _trie_pattern(words: Iterable[str]) -> str:
    """A regex matching any of ``words``, longest first, shaped as a trie so each position costs a few
    character comparisons rather than one per word."""
    root: dict[str, dict] = {}
    for word in words:
        node = root
        for char in word:
            node = node.setdefault(char, {})
        node[""] = {}

    def emit(node: dict[str, dict]) -> str:
        branches = [re.escape(char) + emit(child) for char, child in sorted(node.items()) if char]
        if not branches:
            return ""
        body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
        return f"(?:{body})?" if "" in node else body

    return emit(root)


def _anchor_index(rules: Iterable[_ProviderRule]) -> tuple[re.Pattern[str], dict[str, tuple[_ProviderRule, ...]]]:
    """One regex of every anchor, and for each anchor the rules to try there.

    Prefix anchors are fenced (a token starts after a non-alphanumeric character); infix anchors such as
    Telegram's ``:AA`` are not. An anchor's rules include those of every shorter anchor that begins it
    (``eyJrIjoi`` also tries ``eyJ``).
    """
    by_anchor: dict[str, list[_ProviderRule]] = {}
    for rule in rules:
        for anchor in rule.anchors:
            by_anchor.setdefault(anchor, []).append(rule)
    table: dict[str, tuple[_ProviderRule, ...]] = {}
    for anchor in by_anchor:
        chain = [rule for other in sorted(by_anchor, key=len, reverse=True) if anchor.startswith(other)
                 for rule in by_anchor[other]]
        table[anchor] = tuple(dict.fromkeys(chain))
    infix = {anchor for rule in rules if rule.back for anchor in rule.anchors}
    prefix = [anchor for anchor in table if anchor not in infix]
    pattern = f"(?<![A-Za-z0-9]){_trie_pattern(prefix)}|{_trie_pattern(infix)}"
    return re.compile(pattern), table


_ANCHORS, _RULES_AT = _anchor_index(_PROVIDER_RULES)


def _secret_span(match: re.Match[str]) -> tuple[int, int]:
    return match.span("secret") if "secret" in match.re.groupindex else match.span()


def _provider_tokens(text: str) -> Iterable[tuple[int, int, str, str]]:
    for anchor_match in _ANCHORS.finditer(text):
        position = anchor_match.start()
        for rule in _RULES_AT[anchor_match.group()]:
            start = position - rule.back
            if rule.back:
                # An infix anchor: the token starts where the run of its lead characters does.
                start = position
                floor = max(0, position - rule.back)
                while start > floor and re.match(r"[A-Za-z0-9_~.+/-]", text[start - 1]):
                    start -= 1
            match = None
            for offset in range(start, position + 1):
                match = rule.pattern.match(text, offset)
                if match is not None or not rule.back:
                    break
            if match is None:
                continue
            value = match.group()
            if rule.check is not None and not rule.check(value):
                continue
            span = _secret_span(match)
            if (_is_placeholder(text[span[0]:span[1]]) if rule.placeholder_words
                    else _is_template(text[span[0]:span[1]])):
                continue
            yield span[0], span[1], rule.family, rule.label
            break


# Formats recognised by their structure alone, with no literal to anchor on. They are tried only where a
# token candidate (see layer 5) starts with one of the given characters.
_UNANCHORED = (
    ("discord", "a Discord bot token", "MNO",
     re.compile(r"[MNO][A-Za-z0-9_-]{23,27}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,40}(?![A-Za-z0-9_.-])"), None),
    ("bitcoin", "a Bitcoin private key (WIF)", "5KL",
     re.compile(r"(?:5[HJK][1-9A-HJ-NP-Za-km-z]{49}|[KL][1-9A-HJ-NP-Za-km-z]{51})(?![A-Za-z0-9])"), _base58check),
    ("asana", "an Asana personal access token", "12",
     re.compile(r"[12]/[0-9]{10,20}(?:/[0-9]{10,20})?:[a-f0-9]{32}(?![A-Za-z0-9])"), None),
)


def _unanchored_tokens(text: str, candidates: list[re.Match[str]]) -> Iterable[tuple[int, int, str, str]]:
    for candidate in candidates:
        first = candidate.group()[0]
        for family, label, firsts, pattern, check in _UNANCHORED:
            if first not in firsts:
                continue
            match = pattern.match(text, candidate.start())
            if match and (check is None or check(match.group())) and not _is_placeholder(match.group()):
                yield match.start(), match.end(), family, label


# -- layer 3: a provider's name next to a token of its shape -----------------------------------------------------

_SHAPES = {
    "uuid": _UUID.replace("a-f", "a-fA-F"),
    "hex32": "[0-9a-fA-F]{32}",
    "hex40": "[0-9a-fA-F]{40}",
    "hex64": "[0-9a-fA-F]{64}",
    "hex32_40": "[0-9a-fA-F]{32}|[0-9a-fA-F]{40}",
    "b62_20_64": "[A-Za-z0-9]{20,64}",
    "b64u_20_100": "[A-Za-z0-9_-]{20,100}",
    "b64_40_100": "[A-Za-z0-9+/]{40,100}={0,2}",
}
_CONTEXT_FAMILIES: tuple[tuple[str, str, str, str], ...] = (
    # (family, label, keywords separated by |, shape)
    ("heroku", "a Heroku API key", "heroku", "uuid"),
    ("twilio", "a Twilio auth token", "twilio", "hex32"),
    ("datadog", "a Datadog API or application key", "datadog|dd_api_key|dd_app_key|dd_application_key", "hex32_40"),
    ("mailgun", "a Mailgun API key", "mailgun", r"[0-9a-f]{32}-[0-9a-f]{8}-[0-9a-f]{8}|[0-9a-f]{32}"),
    ("github", "a GitHub OAuth token", "github_token|gh_token|github oauth|github_oauth|github_pat", "hex40"),
    ("azure", "an Azure key", "azure", "hex32|b64_40_100"),
    ("cloudflare", "a Cloudflare API token or key", "cloudflare|cf_api", r"[A-Za-z0-9_-]{40}|[0-9a-f]{37}"),
    ("okta", "an Okta API token", "okta", r"00[A-Za-z0-9_-]{40}"),
    ("algolia", "an Algolia API key", "algolia", "hex32"),
    ("sparkpost", "a SparkPost API key", "sparkpost", "hex40"),
    ("postmark", "a Postmark token", "postmark", "uuid"),
    ("mailjet", "a Mailjet API key", "mailjet", "hex32"),
    ("mixpanel", "a Mixpanel secret", "mixpanel", "hex32"),
    ("amplitude", "an Amplitude secret key", "amplitude", "hex32"),
    ("snyk", "a Snyk API token", "snyk", "uuid"),
    ("circleci", "a CircleCI API token", "circleci|circle_token", "hex40"),
    ("travis", "a Travis CI token", "travis", r"[A-Za-z0-9_-]{22}"),
    ("codecov", "a Codecov upload token", "codecov", "uuid"),
    ("sumologic", "a Sumo Logic access key", "sumologic|sumo_", r"[A-Za-z0-9]{64}"),
    ("pagerduty", "a PagerDuty API key", "pagerduty", r"u\+[A-Za-z0-9_+-]{18}|[A-Za-z0-9_+-]{20}"),
    ("opsgenie", "an Opsgenie API key", "opsgenie", "uuid"),
    ("rollbar", "a Rollbar access token", "rollbar", "hex32"),
    ("bugsnag", "a Bugsnag API key", "bugsnag", "hex32"),
    ("infura", "an Infura project secret", "infura", "hex32"),
    ("etherscan", "an Etherscan API key", "etherscan|bscscan|polygonscan", r"[A-Z0-9]{34}"),
    ("alchemy", "an Alchemy API key", "alchemy", r"[A-Za-z0-9_-]{32}"),
    ("coinbase", "a Coinbase API secret", "coinbase", r"[A-Za-z0-9+/]{64,88}={0,2}|[A-Za-z0-9]{32}"),
    ("binance", "a Binance API key or secret", "binance", r"[A-Za-z0-9]{64}"),
    ("kraken", "a Kraken private key", "kraken", r"[A-Za-z0-9+/]{80,90}={0,2}"),
    ("cohere", "a Cohere API key", "cohere|co_api_key", r"[A-Za-z0-9]{40}"),
    ("mistral", "a Mistral API key", "mistral", r"[A-Za-z0-9]{32}"),
    ("together", "a Together AI API key", "together_api|togetherai|together ai|together\\.ai", "hex64"),
    ("deepgram", "a Deepgram API key", "deepgram", "hex40"),
    ("assemblyai", "an AssemblyAI API key", "assemblyai|assembly ai", "hex32"),
    ("wandb", "a Weights & Biases API key", "wandb|weights & biases|weights and biases", "hex40"),
    ("ngrok", "an ngrok authtoken", "ngrok", r"[0-9A-Za-z]{20,32}_[0-9A-Za-z]{15,30}"),
    ("linode", "a Linode API token", "linode", "hex64"),
    ("vultr", "a Vultr API key", "vultr", r"[A-Z0-9]{36}"),
    ("hetzner", "a Hetzner Cloud API token", "hetzner|hcloud", r"[A-Za-z0-9]{64}"),
    ("scaleway", "a Scaleway secret key", "scaleway|scw_secret", "uuid"),
    ("ibm", "an IBM Cloud API key", "ibm cloud|ibmcloud|ibm_cloud|ibm api", r"[A-Za-z0-9_-]{44}"),
    ("zendesk", "a Zendesk API token", "zendesk", r"[A-Za-z0-9]{40}"),
    ("freshdesk", "a Freshdesk API key", "freshdesk", r"[A-Za-z0-9]{20}"),
    ("trello", "a Trello API key or token", "trello", "hex32|hex64|" + r"ATTA[A-Za-z0-9]{60,70}"),
    ("zoom", "a Zoom API secret", "zoom", r"[A-Za-z0-9]{32}"),
    ("twitch", "a Twitch OAuth token", "twitch", r"[a-z0-9]{30}"),
    ("spotify", "a Spotify client secret", "spotify", "hex32"),
    ("reddit", "a Reddit client secret", "reddit", r"[A-Za-z0-9_-]{27,30}"),
    ("linkedin", "a LinkedIn client secret", "linkedin", r"[A-Za-z0-9]{16}"),
    ("pipedrive", "a Pipedrive API token", "pipedrive", "hex40"),
    ("mollie", "a Mollie API key", "mollie", r"(?:live|test)_[A-Za-z0-9]{30}"),
    ("lob", "a Lob API key", "lob_|lob api|lob key", r"(?:live|test)_[a-f0-9]{35}"),
    ("gocardless", "a GoCardless access token", "gocardless", r"(?:live|sandbox)_[A-Za-z0-9_=-]{40}"),
    ("adyen", "an Adyen API key", "adyen", r"AQE[A-Za-z0-9+/=_.-]{60,300}"),
    ("wechat", "a WeChat app secret", "wechat|weixin", "hex32"),
    ("line", "a LINE channel secret or token", "line channel|line_channel", r"[0-9a-f]{32}|[A-Za-z0-9+/]{150,180}={0,2}"),
    ("kakao", "a Kakao REST API key", "kakao", "hex32"),
    ("vonage", "a Vonage (Nexmo) API secret", "vonage|nexmo", r"[A-Za-z0-9]{16}"),
    ("plivo", "a Plivo auth token", "plivo", r"[A-Za-z0-9]{40}"),
    ("messagebird", "a MessageBird API key", "messagebird", r"[A-Za-z0-9]{25}"),
    ("telnyx", "a Telnyx API key", "telnyx", r"KEY[0-9A-Za-z_-]{40,60}"),
    ("mux", "a Mux token secret", "mux_token|mux secret", r"[A-Za-z0-9+/]{60,80}"),
    ("fastly", "a Fastly API token", "fastly", r"[A-Za-z0-9_-]{32}"),
    ("jenkins", "a Jenkins API token", "jenkins", r"11[0-9a-f]{32}"),
    ("confluent", "a Confluent API secret", "confluent", r"[A-Za-z0-9+/]{64}"),
    ("mongodb", "a MongoDB Atlas API key", "mongodb atlas|atlas api|mongodb_atlas", "uuid"),
    ("splunk", "a Splunk HEC token", "splunk", "uuid"),
    ("loggly", "a Loggly token", "loggly", "uuid"),
    ("auth0", "an Auth0 client secret", "auth0", r"[A-Za-z0-9_-]{64}"),
    ("onelogin", "a OneLogin client secret", "onelogin", "hex64"),
    ("duo", "a Duo secret key", "duo ", r"[A-Za-z0-9]{40}"),
    ("meraki", "a Cisco Meraki API key", "meraki", "hex40"),
    ("ethereum", "an Ethereum private key", "private key|privkey|private_key|wallet key|eth_key",
     r"(?:0x)?[0-9a-fA-F]{64}"),
    ("aws", "an AWS secret access key", "aws|secret access key|secret_access_key", r"[A-Za-z0-9+/]{40}"),
    ("aws", "an AWS session token", "aws_session_token|session token|securitytoken", r"[A-Za-z0-9+/]{100,1200}={0,2}"),
    ("paypal", "a PayPal client secret", "paypal", r"E[A-Za-z0-9_-]{79}"),
    ("shopify", "a Shopify shared secret", "shopify", "hex32"),
    ("dropbox", "a Dropbox access token", "dropbox", r"[A-Za-z0-9_-]{64}"),
    ("box", "a Box client secret", "box_client|box api|box client", r"[A-Za-z0-9]{32}"),
    ("etsy", "an Etsy API key", "etsy", r"[a-z0-9]{24}"),
    ("sentry", "a Sentry auth token", "sentry", "hex64"),
    ("npm", "a legacy npm token", "npm_token|npmrc|_authtoken", "uuid"),
    ("gitea", "a Gitea access token", "gitea|forgejo|codeberg", "hex40"),
    ("weaviate", "a Weaviate API key", "weaviate", r"[A-Za-z0-9]{36,48}"),
    ("qdrant", "a Qdrant API key", "qdrant", r"[A-Za-z0-9_-]{30,64}"),
)


def _top_level_alternatives(pattern: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for char in pattern:
        depth += (char == "(") - (char == ")")
        if char == "|" and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    return parts + [current]


def _compile_context() -> tuple[re.Pattern[str], dict[str, list[tuple[str, str, re.Pattern[str]]]]]:
    by_keyword: dict[str, list[tuple[str, str, re.Pattern[str]]]] = {}
    for family, label, keywords, shape in _CONTEXT_FAMILIES:
        shape_pattern = re.compile("|".join(f"(?:{_SHAPES.get(part, part)})"
                                            for part in _top_level_alternatives(shape)))
        for keyword in keywords.split("|"):
            by_keyword.setdefault(keyword.replace("\\", ""), []).append((family, label, shape_pattern))
    words = sorted(by_keyword, key=len, reverse=True)
    return re.compile("|".join(re.escape(word) for word in words)), by_keyword


_CONTEXT_WORDS, _CONTEXT_RULES = _compile_context()
_CANDIDATE = re.compile(r"(?<![A-Za-z0-9_+/=-])[A-Za-z0-9_+/=-]{16,}")
_PUBLIC_PREFIXES = ("pk_live_", "pk_test_", "phc_", "sb_publishable_", "pk.eyJ", "AAAAB3NzaC1", "AAAAC3NzaC1",
                    "AAAAE2VjZHNh",  # publishable keys and SSH public keys are meant to be shared
                    "eyJ")  # base64 JSON such as a lone JWT header; a whole JWT is the jwt rule's
_CONTEXT_WINDOW = 72


_KEY_BEFORE = re.compile(r"([A-Za-z_][A-Za-z0-9_.-]{0,80})[\"'\]]{0,2}[ \t]*(?::=|=|:)[ \t]*[\"']?$")
_ID_TAILS = frozenset("id ids sid uid guid tenant subscription account org organization project region zone".split())


def _context_family(text: str, start: int, token: str, window: str | None = None) -> tuple[str, str] | None:
    """A provider named shortly before ``token`` (on its line, or in ``window``) whose format it has.

    A value assigned to an identifier's key (``AZURE_TENANT_ID=<uuid>``, ``TWILIO_ACCOUNT_SID=AC...``) is an
    id, whatever provider the key names."""
    if window is None:
        line_start = text.rfind("\n", 0, start) + 1
        window = text[max(line_start, start - _CONTEXT_WINDOW):start]
    key = _KEY_BEFORE.search(window)
    if key is not None:
        parts = _key_parts(key.group(1))
        if parts and (parts[-1] in _ID_TAILS or parts[-1] in _NOT_SECRET_TAILS):
            return None
    window = window.lower()
    for word in reversed(_CONTEXT_WORDS.findall(window)):
        for family, label, shape in _CONTEXT_RULES.get(word, ()):
            if shape.fullmatch(token):
                return family, label
    return None


# -- layer 4: a key that names a secret ----------------------------------------------------------------------------

_SECRET_WORD = re.compile(r"passw|passphrase|pass|pwd|secret|token|key|cred|auth|sig|pin|private|psk|pat(?![a-z])")
_IDENT_CHAR = re.compile(r"[A-Za-z0-9_.\-]")
_CAMEL_SPLIT = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
_PASSWORD_TAILS = ("password", "passwd", "passphrase", "passcode", "pwd")
_KEY_QUALIFIERS = frozenset("""
    api access secret private client auth signing encryption master app consumer service storage account admin
    deploy webhook hmac shared server ingest write root license subscription sas session jwt encrypt decrypt
    cipher crypt vault stripe openai anthropic aws gcp azure github gitlab slack twilio sendgrid mailgun
    datadog sentry
""".split())
_NOT_SECRET_TAILS = frozenset("""
    tokens tokenizer tokenize tokenized tokenizing keys keyboard keyword keywords keyspace keystore keyring
    keychain keyname keyid id ids name names type types file path url uri endpoint count length len size limit
    limits max min hash hashed digest salt format prefix field fields header headers policy policies expiry
    expires expiration ttl timeout enabled disabled required rotation version location source ref reference
    label env var variable manager provider store mode method scheme strength hint reset form input label
    secretary passage passenger passing passport passthrough bypass compass pinned pins pinyin pinch spinner
""".split())


_PAT_OWNERS = frozenset("""
    azure devops ado vsts tfs github gh gitlab gl git bitbucket atlassian jira confluence personal access api
    huggingface hf npm docker dockerhub circleci figma airtable supabase harness sonar sonarqube codeberg gitea
""".split())


def _key_parts(identifier: str) -> list[str]:
    parts: list[str] = []
    for chunk in re.split(r"[._\-\s]+", identifier):
        parts.extend(piece.lower() for piece in _CAMEL_SPLIT.findall(chunk))
    return [part for part in parts if part]


def _key_kind(identifier: str) -> str | None:
    """``"password"`` or ``"generic"`` when ``identifier`` names a secret, else None (``max_tokens``, ``key_id``)."""
    parts = _key_parts(identifier)
    if not parts:
        return None
    last = parts[-1]
    previous = parts[-2] if len(parts) > 1 else ""
    if last in _NOT_SECRET_TAILS:
        return None
    if last == "base" and previous == "key" and len(parts) > 2 and parts[-3] == "secret":
        return "generic"  # Rails' secret_key_base
    if last == "pat" and previous in _PAT_OWNERS:
        return "generic"  # a personal access token: AZURE_DEVOPS_PAT, GITHUB_PAT, GITLAB_PAT
    if last in ("psk", "wpa_psk"):
        return "password"  # a Wi-Fi pre-shared key (wpa_supplicant's psk="...")
    if last in ("password", "passwd", "passphrase", "passcode", "pwd", "pass", "pw") or last.endswith(
            _PASSWORD_TAILS):
        return "password"
    if last in ("pin",) and previous in ("", "card", "atm", "sim", "my", "the", "user", "account"):
        return "password"
    if last == "key":
        if previous in _KEY_QUALIFIERS:
            return "private_key" if previous == "private" else "generic"
        return None
    if last.endswith(("apikey", "secretkey", "accesskey", "privatekey", "authkey")):
        return "generic"
    if last in ("secret", "token", "credential", "credentials", "creds", "authorization", "sig"):
        return "generic"
    if last.endswith(("secret", "token")) and len(last) > 6:
        return "generic"
    if last == "auth" and previous in ("basic", "http", "proxy", "api", "x"):
        return "generic"
    if last == "signature" and previous in ("amz", "x", "url", "request"):
        return "generic"
    return None


_KEY_LABELS = {
    "password": "a password",
    "generic": "a secret assigned to a credential field",
    "private_key": "a private key",
}

# After a key: what joins it to its value. Order matters (longest operators first).
_JOINER = re.compile(
    r"(?P<close>[\"'`]?\]?[\"'`]?)[ \t]*"
    r"(?:"
    r"(?P<typed>(?::[ \t]*)?[A-Za-z_][A-Za-z0-9_.\[\]<>|?]{0,40}[ \t]*(?::=|=(?![=>~])))"  # Go/TS/Kotlin types
    r"|(?P<op>:::=|::=|:=|\?=|\+=|\.=|=>|===|!==|==|!=|=|:(?![:/])|->)"
    r"|(?P<comma>,)"
    r"|(?P<tag>>)"
    r"|(?P<is>[ \t]+(?:is|was|are|will be)(?:[ \t]+(?:now|still|set[ \t]+to|just))?(?:[ \t]*:)?)"
    r"|(?P<space>[ \t]+)"
    r")[ \t]*")
_AUTH_SCHEME = re.compile(r"(?i)(?:bearer|basic|token|digest|apikey|api-key|key|sso-key|otp|splunk|ghp)[ \t]+")
_QUOTED = re.compile(r"(?P<q>\"|'|`)(?P<v>(?:(?!(?P=q))[^\\\n]|\\.){1,512})(?P=q)")
_BACKTICK_BLOCK = re.compile(r"`(?P<v>[^`]{1,2048})`")
_BARE = re.compile(r"[^\s\"'`,;<>(){}\[\]|]{1,512}")
_BARE_IN_QUERY = re.compile(r"[^\s\"'`,;&<>(){}\[\]|#]{1,512}")  # after ?key= or &key=, & ends the value
_YAML_TAG = re.compile(r"!!?[a-z][\w/:.-]*")
_TAG_VALUE = re.compile(r"(?P<v>[^<\n]{1,512})</")
_CODE_REFERENCE = re.compile(
    r"(?:[A-Za-z_$][A-Za-z_$]*[0-9]?(?:\.|::|->))+[A-Za-z_$][A-Za-z_$]*[0-9]?(?:\(|\[|$)|"  # self.token
    r"[A-Za-z_$][A-Za-z0-9_$]*\(|"  # get_token(
    r"(?:os\.environ|os\.getenv|getenv|process\.env|ENV|env|System\.getenv|config|settings|secrets|vault)\b")
_PROSE_AFTER = re.compile(r"[ \t]+(?:the|a|an|to|of|for|and|or|in|on|at|by|with|from|is|be|that|this)\b", re.I)


def _value_after(text: str, at: int, joiner: str, query: bool = False) -> tuple[int, int, bool] | None:
    """The span of the value at ``at`` and whether it was quoted; None when there is no literal value."""
    if joiner == "tag":
        match = _TAG_VALUE.match(text, at)
        return (match.start("v"), match.end("v"), True) if match else None
    if at < len(text) and text[at] in "\"'`":
        match = _QUOTED.match(text, at)
        if match is None and text[at] == "`":
            match = _BACKTICK_BLOCK.match(text, at)
        if match is None:
            return None
        return match.start("v"), match.end("v"), True
    prefix = re.match(r"[rbfuRBFU]{1,2}(?=[\"'])", text[at:at + 3])
    if prefix is not None and not prefix.group().lower().count("f"):
        return _value_after(text, at + prefix.end(), joiner)
    match = (_BARE_IN_QUERY if query else _BARE).match(text, at)
    if match is None or _YAML_TAG.fullmatch(match.group()) or match.group().endswith(("...", "…")):
        return None
    end = match.end()
    while end > at and text[end - 1] in ".:!?":
        end -= 1
    return (at, end, False) if end > at else None


def _literal_secret(text: str, start: int, end: int, quoted: bool, joiner: str, kind: str) -> bool:
    """Whether the value ``text[start:end]`` is a literal secret rather than code, prose or a placeholder."""
    value = text[start:end]
    minimum = 6 if kind == "password" else 8
    if len(value) < minimum or _is_placeholder(value):
        return False
    if quoted:
        if value.count(" ") >= 4 or re.search(r"%[sd]|%\(|\{[0-9a-z_]*\}", value):
            return False  # a sentence or a format string, not a secret
        return True
    following = text[end:end + 1]
    if (following and following in "([") or _CODE_REFERENCE.match(value):
        return False
    if re.fullmatch(r"-?[0-9]{1,5}(?:\.[0-9]+)?", value):
        return False  # numbers: max_tokens: 4096, timeouts, ports
    if joiner in ("is", "space") or not any(not (char.isalpha() or char in "._-") for char in value):
        # Plain words are prose ("Password: required", "the token is expired"); a long run of letters
        # can be a passphrase when a key names it ("password: correcthorsebatterystaple").
        has_symbol = any(not char.isalpha() for char in value)
        if not has_symbol and not (value.isalpha() and len(value) >= 16 and joiner not in ("is", "space")):
            return False
        if joiner in ("is", "space") and not (any(char.isdigit() for char in value) or
                                             re.search(r"[^A-Za-z0-9]", value.strip("._-"))):
            return False
    return True


_DOCKERFILE_ENV = re.compile(r"[ \t]*ENV[ \t]+")
_UNQUOTED_RUN = re.compile(r"[^\s\"'`,;]{1,512}")
_CLOSERS = {")": "(", "]": "[", "}": "{", ">": "<"}


def _whole_unquoted_value(text: str, start: int, end: int) -> int:
    """Where an unquoted value after a secret-naming key really ends.

    Generated secrets hold brackets and ``&`` (a Django key: ``...k^@13nm&-pp)97$cjp=``), so a value that
    stops at one of them runs on to the next space, quote, comma or semicolon, minus closing brackets that
    close nothing inside it. A call (``get_secret(``) stays a call."""
    if end >= len(text) or text[end] not in "(){}[]<>|":
        return end
    if text[end] in "([" and re.fullmatch(r"[A-Za-z_$][A-Za-z0-9_.$:-]*", text[start:end]):
        return end
    run = _UNQUOTED_RUN.match(text, start)
    if run is None:
        return end
    value = run.group()
    depth = {opener: 0 for opener in "[{<"}
    for index, char in enumerate(value):
        if char in depth:
            depth[char] += 1
        elif char in "]}>":
            if not depth[_CLOSERS[char]]:
                value = value[:index]  # "url_password]@db": a closer that closes nothing ends the value
                break
            depth[_CLOSERS[char]] -= 1
    while value and value[-1] in _CLOSERS and value.count(value[-1]) > value.count(_CLOSERS[value[-1]]):
        value = value[:-1]
    value = value.rstrip(".:!?")
    return max(end, start + len(value))


def _labelled_secrets(text: str) -> Iterable[tuple[int, int, str, str]]:
    lowered = text.lower() if len(text.lower()) == len(text) else text
    done_until = -1
    for hit in _SECRET_WORD.finditer(lowered):
        if hit.start() < done_until:
            continue
        left = hit.start()
        floor = max(0, left - 64)
        while left > floor and _IDENT_CHAR.match(text[left - 1]):
            left -= 1
        right = hit.end()
        ceiling = min(len(text), right + 64)
        while right < ceiling and _IDENT_CHAR.match(text[right]):
            right += 1
        done_until = right
        identifier = text[left:right].rstrip(".-")
        right = left + len(identifier)
        flag = identifier.startswith("-")
        identifier = identifier.lstrip("-")
        kind = _key_kind(identifier)
        if kind is None:
            continue
        # Only the last segment of a dotted key matters; what precedes it (db., spring.datasource.) is path.
        joiner_match = _JOINER.match(text, right)
        if joiner_match is None:
            continue
        joiner = next(name for name in ("typed", "op", "comma", "tag", "is", "space") if joiner_match.group(name)
                      is not None)
        before = text[max(0, left - 1):left]
        if joiner == "tag" and before != "<":
            continue
        if joiner == "comma" and not (before and before in "\"'" and re.search(r"(?i)(?:property|put|set|env|add|header|"
                                                                     r"define)\w*\(\s*[\"']?$", text[max(0, left - 30):left])):
            continue
        if joiner == "space" and not flag:
            if _DOCKERFILE_ENV.fullmatch(text, text.rfind("\n", 0, left) + 1, left):
                joiner = "op"  # Dockerfile's ENV KEY value (the old space form)
            elif identifier.lower() not in ("authorization", "proxy-authorization"):
                continue
        if joiner == "op" and joiner_match.group("op") == ":" and text[joiner_match.end("op"):joiner_match.end(
                "op") + 1] == ":":
            continue
        at = joiner_match.end()
        if identifier.lower().endswith("authorization") or kind == "generic" and identifier.lower().endswith(
                "auth"):
            scheme = _AUTH_SCHEME.match(text, at)
            if scheme is not None:
                at = scheme.end()
        value = _value_after(text, at, joiner, query=before in ("?", "&"))
        if value is None:
            continue
        start, end, quoted = value
        if joiner == "space" and flag and text[start:end].startswith("-"):
            continue  # the next flag, not a value
        if not quoted and joiner in ("op", "typed") and before not in ("?", "&"):
            end = _whole_unquoted_value(text, start, end)
        if joiner == "op" and joiner_match.group("op") in ("==", "===", "!=", "!==") and not quoted:
            continue
        if not _literal_secret(text, start, end, quoted, joiner, kind):
            continue
        family = "http_auth" if identifier.lower().endswith("authorization") else kind
        label = "an HTTP Authorization credential" if family == "http_auth" else _KEY_LABELS[kind]
        provider = _context_family(text, start, text[start:end])  # HEROKU_API_KEY=<uuid> is a Heroku key
        if provider is not None:
            family, label = provider
        done_until = max(done_until, end)
        yield start, end, family, label


# Kubernetes env entries and name/value lists: the key is one field, the secret the next.
#   - name: DD_API_KEY                     {"name": "DB_PASSWORD", "value": "..."}
#     value: "97fc..."                     - key: SECRET_KEY
#                                            value: ...
_NAME_VALUE = re.compile(
    r"(?<![A-Za-z0-9_-])[\"']?(?:name|key|Name|Key|NAME|KEY)[\"']?[ \t]*[:=][ \t]*[\"']?"
    r"(?P<id>[A-Za-z_][A-Za-z0-9_.-]{0,80})[\"']?[ \t]*(?:,[ \t]*|\r?\n[ \t]*(?:-[ \t]+)?)"
    r"[\"']?(?:value|Value|VALUE)[\"']?[ \t]*[:=][ \t]*")


def _name_value_secrets(text: str) -> Iterable[tuple[int, int, str, str]]:
    if "alue" not in text and "ALUE" not in text:
        return
    for match in _NAME_VALUE.finditer(text):
        identifier = match.group("id")
        value = _value_after(text, match.end(), "op")
        if value is None:
            continue
        start, end, quoted = value
        if not quoted:
            end = _whole_unquoted_value(text, start, end)
        token = text[start:end]
        provider = _context_family(text, start, token, window=identifier + "=")
        kind = _key_kind(identifier)
        if provider is None and kind is None:
            continue
        if not _literal_secret(text, start, end, quoted, "op", kind or "generic"):
            continue
        family, label = provider or (kind, _KEY_LABELS[kind])
        yield start, end, family, label


# Bearer tokens outside a header, user:password in URLs and connection strings, and command-line passwords.
_BEARER = re.compile(r"(?<![A-Za-z0-9_])(?i:bearer)[ \t]+(?P<secret>[A-Za-z0-9._~+/-]{8,4096}=*)")
_URL_USERINFO = re.compile(r"://(?P<user>[^\s:/@?#\[\]\"'<>]{0,128}):(?P<secret>[^\s/@\[\]\"'<>]{1,256})@")
_CLI_PASSWORD = re.compile(
    r"(?<![\w-])(?:mysql|mysqldump|mysqladmin|mysqlimport|mysqlshow|mysqlcheck|mariadb|mariadb-dump)(?![\w-])"
    r"[^\n|;&]{0,200}?(?<=[ \t])-p(?P<secret>[^\s'\"]{1,128}|'[^'\n]{1,128}'|\"[^\"\n]{1,128}\")"
    r"|(?<![\w-])(?:curl|wget|http)(?![\w-])[^\n|;&]{0,200}?(?<=[ \t])(?:-u|--user)[ \t=]+[\"']?[^\s:\"']{1,64}:"
    r"(?P<secret2>[^\s\"'@]{1,128})"
    r"|(?<![\w-])sshpass[ \t]+-p[ \t]*(?P<secret3>'[^'\n]{1,128}'|\"[^\"\n]{1,128}\"|[^\s'\"]{1,128})"
    r"|(?<![\w-])docker(?:-compose)?[ \t]+login(?![\w-])[^\n|;&]{0,200}?(?<=[ \t])(?:-p|--password)(?:[ \t]+|=)"
    r"(?P<secret4>'[^'\n]{1,128}'|\"[^\"\n]{1,128}\"|[^\s'\"]{1,128})")


def _bearer_tokens(text: str) -> Iterable[tuple[int, int, str, str]]:
    if "earer" not in text and "EARER" not in text:
        return
    for match in _BEARER.finditer(text):
        token = match.group("secret")
        stripped = token.rstrip(".")
        if len(stripped) >= 8 and (len(stripped) >= 20 or any(char.isdigit() for char in stripped)) and not \
                _is_placeholder(stripped):
            yield match.start("secret"), match.start("secret") + len(stripped), "bearer", "a bearer token"


def _url_passwords(text: str) -> Iterable[tuple[int, int, str, str]]:
    if "://" not in text:
        return
    for match in _URL_USERINFO.finditer(text):
        secret = match.group("secret")
        if not _is_placeholder(secret) and secret.lower() not in ("pass", "pw", "pwd", "password", "secret"):
            yield match.start("secret"), match.end("secret"), "url_password", "a password in a URL"


def _cli_passwords(text: str) -> Iterable[tuple[int, int, str, str]]:
    if "-p" not in text and "-u" not in text:
        return
    for match in _CLI_PASSWORD.finditer(text):
        group = next(name for name in ("secret", "secret2", "secret3", "secret4") if match.group(name) is not None)
        start, end = match.span(group)
        if text[start] in "'\"":
            start, end = start + 1, end - 1
        if end - start >= 4 and not _is_placeholder(text[start:end]):
            yield start, end, "password", "a password"


# Passwords in syntaxes where no key=value says so: SQL, .netrc, and chat ("login: admin / <pw>",
# "the new password for the vpn is <pw>", "wifi password <pw>").
_SQL_PASSWORD = re.compile(
    r"(?i)(?<![\w])(?:with[ \t]+(?:encrypted[ \t]+|unencrypted[ \t]+)?password|identified[ \t]+"
    r"(?:with[ \t]+[\w]{1,40}[ \t]+)?by(?:[ \t]+password)?)[ \t]+(?P<q>['\"])(?P<secret>[^'\"\n]{1,128})(?P=q)")
_PHRASE_PASSWORD = re.compile(
    r"(?i)(?<![\w-])(?:"
    r"(?:login|logon|user(?:name)?|creds|credentials)[ \t]+[^\s:=]{1,64}[ \t]+(?:password|pass|pw)[ \t]+"  # .netrc
    r"|(?:login|logon|creds|credentials|user(?:name)?)[ \t]*[:=][ \t]*[^\s/:=]{1,64}[ \t]*/[ \t]*"  # user / pw
    r"|(?:pass(?:word|phrase|code)|pwd)(?:[ \t]+[a-z][\w.-]{0,20}){0,5}?[ \t]+(?:is|was|=)[ \t]+"  # ... is <pw>
    r"|(?:pass(?:word|phrase|code))[ \t]+(?=[^\s]*[0-9])(?=[^\s]*[A-Za-z])"  # password <pw>
    r")(?P<q>[`\"']?)(?P<secret>[^\s`\"']{6,128})(?P=q)")


def _password_phrases(text: str) -> Iterable[tuple[int, int, str, str]]:
    lowered = text.lower()
    if "identified" in lowered or "with" in lowered and "password" in lowered:
        for match in _SQL_PASSWORD.finditer(text):
            if not _is_placeholder(match.group("secret")):
                yield match.start("secret"), match.end("secret"), "password", "a password"
    if "pass" not in lowered and "pwd" not in lowered and "/" not in text:
        return
    for match in _PHRASE_PASSWORD.finditer(text):
        start, end = match.span("secret")
        if not match.group("q"):
            while end > start and text[end - 1] in ".,;:!?)":
                end -= 1
        value = text[start:end]
        if len(value) < 6 or "://" in value or _is_placeholder(value) or _CODE_REFERENCE.match(value):
            continue
        if not any(char.isdigit() for char in value) and value.isalpha():
            continue  # a word: "the password is expired"
        if not (any(char.isdigit() for char in value) or re.search(r"[^A-Za-z0-9]", value)):
            continue
        if re.fullmatch(r"[0-9.,:/-]+", value):
            continue  # a number, a date or a time
        yield start, end, "password", "a password"


# -- layer 5: random-looking tokens in prose ---------------------------------------------------------------------------

_URL = re.compile(r"(?i)\b[a-z][a-z0-9+.-]{1,20}://[^\s<>\"'`]{1,2048}")
_NOT_A_KEY_BEFORE = re.compile(
    r"(?i)(?:ssh-(?:rsa|ed25519|dss)|ecdsa-sha2-nistp[0-9]+|integrity|base64,|h1:|sha[0-9]{1,3}[-:=]|"
    r"sha[0-9]{1,3}-|nonce-|data:[a-z/+.-]+;|\$2[abxy]?\$[0-9]{2}\$|\$argon2(?:id|i|d)\$[^\s$]{0,40}\$[^\s$]{0,60}\$|"
    r"\$[56]\$(?:rounds=[0-9]+\$)?[^\s$]{0,16}\$|\$pbkdf2-sha[0-9]+\$[0-9]+\$[^\s$]{0,40}\$)[\s\"':=]*$")
# Stripe object ids (a charge, a payment intent, a customer, ...) name records, not keys; ``_secret_`` in one
# (a payment intent's client secret) is a secret.
_STRIPE_OBJECT_ID = re.compile(
    r"(?:ch|pi|cus|sub|in|il|ii|evt|prod|price|pm|py|pyr|re|txn|acct|seti|si|src|card|ba|tok|po|tr|dp|file|link|"
    r"plan|sku|or|fee|cs|bpc|cbtxn|ipi|iauth|ic|ich|inrf|prmc|promo|coupon|cn|du|fr|mbur|setatt|sess|person)"
    r"_[A-Za-z0-9]{14,40}")
_KEY_EQUALS = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,80}=(?=[^=])")
_HOST_AFTER = re.compile(r"\.apps\.googleusercontent\.com")
_ADO_LEGACY_PAT = re.compile(r"[a-z2-7]{52}")
_B64_TOKEN = re.compile(r"[A-Za-z0-9+/]{12,}={0,2}")
_USER_COLON_PASSWORD = re.compile(r"[^\s:]{1,64}:\S{4,128}")
_PUBLIC_BLOCK_BEGIN = re.compile(r"-----BEGIN (?!(?:[A-Z0-9]{1,20} ){0,4}PRIVATE)[A-Z0-9 ]{1,40}-----")


def _public_blocks(text: str) -> list[tuple[int, int]]:
    """Spans of PEM blocks that are not private keys (certificates, public keys): their bodies are public."""
    spans: list[tuple[int, int]] = []
    if "-----BEGIN" not in text:
        return spans
    at = 0
    while True:
        begin = text.find("-----BEGIN", at)
        if begin < 0:
            return spans
        match = _PUBLIC_BLOCK_BEGIN.match(text, begin)
        if match is None:
            at = begin + 10
            continue
        end = text.find("-----END", match.end())
        if end < 0:
            return spans  # a cut-off block: nothing after it is known to be public
        spans.append((begin, end))
        at = end + 8


def _decodes_to_prose(token: str) -> bool:
    """Whether a base64 token decodes to ordinary readable text (a sentence, markup, key=value settings)
    rather than random bytes; text that itself holds a secret (``user:password``, a key) does not count."""
    core = token.rstrip("=")
    if not _B64_TOKEN.fullmatch(token) or len(core) < 16:
        return False
    padded = core + "=" * (-len(core) % 4)
    try:
        decoded = base64.b64decode(padded, validate=True).decode("ascii")
    except (ValueError, UnicodeDecodeError):
        return False
    if not decoded or any(not (char.isprintable() or char in "\n\t\r") for char in decoded):
        return False
    letters = sum(char.isalpha() for char in decoded)
    runs = re.findall(r"[A-Za-z]{3,}", decoded)
    if letters < len(decoded) * 0.4 or sum(map(len, runs)) < letters * 0.6 or \
            sum(1 for run in runs if any(char in _VOWELS for char in run)) < 2:
        return False
    if _USER_COLON_PASSWORD.fullmatch(decoded) and " " not in decoded:
        return False  # base64 of user:password is a Basic credential
    return not _credential_spans(decoded)


def _is_path(token: str) -> bool:
    """A file path (``/home/runner/work/_temp/<uuid>.sh``) rather than a base64 secret with slashes in it."""
    segments = [part for part in token.split("/") if part]
    if token.count("/") < 2 or len(segments) < 2:
        return False
    words = [part for part in segments[:-1] if re.fullmatch(r"_?[a-z][a-z_.~-]{2,40}[0-9]{0,2}", part)
             and any(char in _VOWELS for char in part)]
    rooted = token.startswith(("/", "~/", "./", "../"))
    return (rooted and len(words) * 2 >= len(segments) - 1) or len(words) >= 2


def _bare_tokens(text: str, candidates: list[re.Match[str]],
                 claimed: Callable[[int, int], bool]) -> Iterable[tuple[int, int, str, str]]:
    urls: list[tuple[int, int]] = [m.span() for m in _URL.finditer(text)] if "://" in text else []
    public = _public_blocks(text)
    for match in candidates:
        start, end = match.span()
        token = match.group()
        key = _KEY_EQUALS.match(token)
        if key is not None and len(token) - key.end() >= 16:
            # data=<value>, request_id=<value>: the key is a word, only what follows it can be a secret.
            start += key.end()
            token = token[key.end():]
        if claimed(start, end):
            continue
        if any(lo <= start < hi for lo, hi in public):
            continue
        context = _context_family(text, start, token.rstrip("=") if len(token) > 20 else token)
        if context is None and token.startswith(("0x", "0X")):
            context = _context_family(text, start, token)
        if context is not None:
            if not _is_placeholder(token):
                yield start, end, context[0], context[1]
            continue
        if any(lo <= start < hi for lo, hi in urls):
            continue
        if token.startswith(_PUBLIC_PREFIXES):
            continue
        core = token.strip("-_/+")
        ado = len(token) == 52 and _ADO_LEGACY_PAT.fullmatch(token) is not None and \
            5 <= sum(char.isdigit() for char in token) <= 30 and _entropy(token) >= 3.9
        if not ado and not _looks_generated(core):
            continue
        if _NOT_A_KEY_BEFORE.search(text, max(0, start - 48), start):
            continue
        if _STRIPE_OBJECT_ID.fullmatch(token) and "_secret_" not in token:
            continue
        if _HOST_AFTER.match(text, end):
            continue  # an OAuth client id: <number>-<id>.apps.googleusercontent.com
        if ado:
            yield start, end, "azure", "an Azure DevOps personal access token"
            continue
        if _is_path(token) or _decodes_to_prose(token) or _is_placeholder(core):
            continue
        offset = token.find(core)
        yield start + offset, start + offset + len(core), "high_entropy", "a random-looking token"


# -- putting the layers together --------------------------------------------------------------------------------------------


class _Spans:
    """Accepted, non-overlapping spans kept sorted, with an overlap test in O(log n)."""

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.items: list[tuple[int, int, str, str]] = []

    def overlaps(self, start: int, end: int) -> bool:
        index = bisect.bisect_right(self.starts, start)
        if index and self.items[index - 1][1] > start:
            return True
        return index < len(self.items) and self.items[index][0] < end

    def add(self, item: tuple[int, int, str, str]) -> None:
        if item[1] <= item[0] or self.overlaps(item[0], item[1]):
            return
        index = bisect.bisect_right(self.starts, item[0])
        self.starts.insert(index, item[0])
        self.items.insert(index, item)


def _credential_spans(text: str) -> list[tuple[int, int, str, str]]:
    spans = _Spans()
    placeholders = [m.span() for m in _CREDENTIAL_PLACEHOLDER.finditer(text)] if "[" in text else []
    placeholder_ends = [hi for _, hi in placeholders]

    def accept(item: tuple[int, int, str, str]) -> None:
        # A finding never cuts one of our placeholders: one inside a placeholder is dropped, and one that
        # overlaps a placeholder keeps only its parts outside (so "[credential:stripe]:" never becomes
        # "[credential:[credential:password]"); parts that are mere punctuation are dropped.
        start, end, family, label = item
        first = bisect.bisect_right(placeholder_ends, start)
        if first == len(placeholders) or placeholders[first][0] >= end:
            spans.add(item)
            return
        cursor = start
        for lo, hi in placeholders[first:]:
            if lo >= end:
                break
            if lo > cursor and text[cursor:lo].strip(_PLACEHOLDER_PUNCTUATION):
                spans.add((cursor, lo, family, label))
            cursor = max(cursor, hi)
        if cursor < end and text[cursor:end].strip(_PLACEHOLDER_PUNCTUATION):
            spans.add((cursor, end, family, label))

    candidates = list(_CANDIDATE.finditer(text))
    layers = (_key_blocks(text), _provider_tokens(text), _unanchored_tokens(text, candidates), _url_passwords(text),
              _bearer_tokens(text), _cli_passwords(text), _name_value_secrets(text), _labelled_secrets(text),
              _password_phrases(text))
    for layer in layers:
        for item in layer:
            accept(item)
    for item in _bare_tokens(text, candidates, spans.overlaps):
        accept(item)
    return spans.items


def scan_credentials(text: str) -> list[CredentialFinding]:
    """Find every secret in ``text``: provider tokens, private keys, passwords and other credentials.

    Args:
        text: any text (a chat message, a config file, a log line).

    Returns:
        Findings sorted by ``start``, never overlapping. Each span covers only the secret: labels such as
        ``password=``, ``Bearer `` and the ``postgres://app:`` ... ``@host`` around a URL password stay outside.

    Raises:
        InvalidArgumentError: ``text`` is not a string.
    """
    text = _checked_str(text)
    return [CredentialFinding(start, end, family, label) for start, end, family, label in _credential_spans(text)]


def redact_credential_text(text: str) -> tuple[str, int]:
    """Replace every secret with ``[credential:<family>]`` until none is left.

    A whole private key block (to its END line, or to the end of a cut-off text) becomes one placeholder.
    Applying it again changes nothing, and no placeholder is ever taken for a secret.

    Args:
        text: any text.

    Returns:
        ``(redacted text, number of secrets replaced)``. In the unreachable case that rewriting does not
        settle, the whole text becomes ``[credential:generic]``, so a secret can never slip through.

    Raises:
        InvalidArgumentError: ``text`` is not a string.
    """
    text = _checked_str(text)
    replaced = 0
    for _ in range(_MAX_REWRITE_PASSES):
        spans = _credential_spans(text)
        if not spans:
            return text, replaced
        pieces, cursor = [], 0
        for start, end, family, _label in spans:
            pieces.append(text[cursor:start])
            pieces.append(f"[credential:{family}]")
            cursor = end
        pieces.append(text[cursor:])
        text = "".join(pieces)
        replaced += len(spans)
    return _FAIL_CLOSED, replaced + 1


# -- PII ----------------------------------------------------------------------------------------------------------------------
#
# PII is personal but legitimate content: it is rewritten to its kind, never refused. Numbers are validated
# where the format carries a check (Luhn for cards, mod-97 for IBANs, the calling-code table for phones) and
# the ambiguous spellings (an SSN without dashes, dotted or spaced; a national phone number with no trunk 0 such
# as 612 345 678 or 9123 4567) count only next to a word that says what they are. Decisions on look-alikes:
#   - a bare 15/16-digit Luhn run of a card network counts; a 12-14 or 17-19 digit one only with a card or
#     payment word before it or an expiry / CVC after it ("charge it to <14 digits> exp 04/27");
#   - a dashed 3-2-4 number is an SSN unless a part / order / model / serial / ref ... word precedes it;
#   - user@host straight after "://" is a URL's user part, and user@host after ssh / scp / sftp / rsync on
#     its line is a login on a machine: neither is a mailbox, both are left as they are (git@host:path too).

PII_KINDS: tuple[str, ...] = ("email", "phone", "iban", "credit_card", "ssn", "ip_address", "nino")
"""The kinds of personal data ``scan_pii`` finds, in tie-break order when two findings start together."""


_EMAIL = re.compile(
    r"(?<![\w.!#%&*+@-])"
    r"(?:\"(?:[^\"\\\n]|\\.){1,64}\"|[\w!#%&*+-]{1,64})(?:\.(?:\"(?:[^\"\\\n]|\\.){1,64}\"|[\w!#%&*+-]{1,64})){0,16}"
    r"@(?P<domain>(?:[^\W_](?:[\w-]{0,61}[^\W_])?\.){1,8}(?:[^\W\d_]{2,63}|xn--[a-z0-9-]{1,59}))"
    r"(?![\w-]|\.[^\W_])")
# A remote-login command before user@host on the same line (ssh, scp, sftp, rsync, mosh, ssh-copy-id).
_REMOTE_LOGIN = re.compile(r"(?<![\w-])(?:ssh|scp|sftp|rsync|mosh|ssh-copy-id|autossh)(?![\w-])[^\n]*$")
_FILE_SUFFIXES = frozenset("png jpg jpeg gif svg webp ico bmp css js mjs ts tsx jsx json map md txt lock py rb".split())

_LUHN_NETWORKS = (
    # (IIN prefix range low, high, prefix length, allowed lengths)
    (4, 4, 1, (13, 16, 19)),  # Visa
    (51, 55, 2, (16,)), (2221, 2720, 4, (16,)),  # Mastercard
    (34, 34, 2, (15,)), (37, 37, 2, (15,)),  # American Express
    (6011, 6011, 4, (16, 17, 18, 19)), (644, 649, 3, (16, 17, 18, 19)), (65, 65, 2, (16, 17, 18, 19)),  # Discover
    (300, 305, 3, (14, 15, 16, 17, 18, 19)), (36, 36, 2, (14, 15, 16, 17, 18, 19)),
    (38, 39, 2, (14, 15, 16, 17, 18, 19)),  # Diners Club
    (3528, 3589, 4, (16, 17, 18, 19)),  # JCB
    (62, 62, 2, (16, 17, 18, 19)),  # UnionPay
    (2200, 2204, 4, (16, 17, 18, 19)),  # Mir
    (50, 50, 2, tuple(range(12, 20))), (56, 69, 2, tuple(range(12, 20))),  # Maestro
    (60, 60, 2, (16,)), (81, 82, 2, (16, 17, 18, 19)),  # RuPay
)
_CARD = re.compile(
    r"(?<![\w.,+/-])(?<![0-9][ -])"
    r"(?:[0-9]{4}(?P<s>[ -])[0-9]{4}(?P=s)[0-9]{4}(?P=s)[0-9]{4}(?:(?P=s)[0-9]{1,3})?"  # 4-4-4-4(-3)
    r"|[0-9]{4}(?P<a>[ -])[0-9]{6}(?P=a)[0-9]{4,5}"  # 4-6-5 (Amex), 4-6-4 (Diners)
    r"|[0-9]{4}(?P<m>[ -])[0-9]{4}(?P=m)[0-9]{4}(?:(?P=m)[0-9]{1,3})?"  # 12-15 digit Maestro
    r"|[0-9]{12,19})"
    r"(?![\w-]|[.,][0-9]|[ -][0-9])")
_CARD_CONTEXT = re.compile(r"(?i)card|visa|mastercard|amex|maestro|diners|discover|jcb|unionpay|cc\b|cc#|pan\b|"
                           r"payment|charge|pay\b|paid|billing|checkout")
_CARD_AFTER = re.compile(r"(?i)[ \t,;]{1,3}(?:exp|expiry|expires|valid thru|cvv|cvc|[01][0-9]/[0-9]{2}(?![0-9]))")

_SSN_DASHED = re.compile(r"(?<![\w.-])(?<![0-9] )([0-9]{3})-([0-9]{2})-([0-9]{4})(?![\w-]|[.,][0-9]| [0-9])")
_SSN_OTHER = re.compile(r"(?<![\w.-])([0-9]{3})(\.| ?- ?| ?)([0-9]{2})\2([0-9]{4})(?![\w-]|[.,][0-9]| [0-9])")
# A dashed 3-2-4 number is an SSN unless a word before it says it is a part, order, model or other number.
_SSN_NOT_CONTEXT = re.compile(
    r"(?i)(?:part|order|model|serial|ref|reference|sku|item|invoice|ticket|case|tracking|product|catalog|lot|batch|"
    r"confirmation|booking|policy|claim|account|acct)(?:[ \t]*(?:no\.?|number|num|nr|#|id))?[ \t]*[:#.]?[ \t]*$")
_SSN_CONTEXT = re.compile(r"(?i)\bssn\b|\bss#|social[ -]security|soc\.? ?sec|\bssn:|tax ?payer id|\bsocial\b")

_NINO = re.compile(
    r"(?<![A-Za-z0-9])(?!BG|GB|KN|NK|NT|TN|ZZ)[A-CEGHJ-PR-TW-Z][A-CEGHJ-NPR-TW-Z]"
    r"(?P<s> ?)[0-9]{2}(?P=s)[0-9]{2}(?P=s)[0-9]{2}(?P=s)[A-D](?![A-Za-z0-9])")

_IBAN_LENGTHS = {
    "AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22, "BH": 22, "BR": 29, "BY": 28,
    "CH": 21, "CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DK": 18, "DO": 28, "EE": 20, "EG": 29, "ES": 24, "FI": 18,
    "FO": 18, "FR": 27, "GB": 22, "GE": 22, "GI": 23, "GL": 18, "GR": 27, "GT": 28, "HR": 21, "HU": 28, "IE": 22,
    "IL": 23, "IQ": 23, "IS": 26, "IT": 27, "JO": 30, "KW": 30, "KZ": 20, "LB": 28, "LC": 32, "LI": 21, "LT": 20,
    "LU": 20, "LV": 21, "MC": 27, "MD": 24, "ME": 22, "MK": 19, "MR": 27, "MT": 31, "MU": 30, "NL": 18, "NO": 15,
    "PK": 24, "PL": 28, "PS": 29, "PT": 25, "QA": 29, "RO": 24, "RS": 22, "SA": 24, "SC": 31, "SE": 24, "SI": 19,
    "SK": 24, "SM": 27, "ST": 25, "SV": 28, "TL": 23, "TN": 24, "TR": 26, "UA": 29, "VA": 22, "VG": 24, "XK": 20,
}
_IBAN = re.compile(r"(?<![A-Za-z0-9])[A-Z]{2}[0-9]{2}(?:(?P<s> ?)[A-Z0-9]{4}){2,7}(?:(?P=s)[A-Z0-9]{1,4})?(?![A-Za-z0-9])")

# Calling codes and the length of the national significant number that follows (min, max).
_CALLING_CODES = {
    "1": (10, 10), "7": (10, 10), "20": (9, 10), "27": (9, 9), "30": (10, 10), "31": (9, 9), "32": (8, 9),
    "33": (9, 9), "34": (9, 9), "36": (8, 9), "39": (6, 11), "40": (9, 9), "41": (9, 9), "43": (4, 13),
    "44": (9, 10), "45": (8, 8), "46": (7, 9), "47": (8, 8), "48": (9, 9), "49": (6, 11), "51": (8, 9),
    "52": (10, 10), "53": (8, 8), "54": (10, 11), "55": (10, 11), "56": (9, 9), "57": (10, 10), "58": (10, 10),
    "60": (8, 10), "61": (9, 9), "62": (8, 12), "63": (10, 10), "64": (8, 10), "65": (8, 8), "66": (8, 9),
    "81": (9, 10), "82": (8, 10), "84": (9, 10), "86": (10, 11), "90": (10, 10), "91": (10, 10), "92": (10, 10),
    "93": (9, 9), "94": (9, 9), "95": (8, 10), "98": (10, 10), "212": (9, 9), "213": (9, 9), "216": (8, 8),
    "233": (9, 9), "234": (8, 10), "254": (9, 9), "255": (9, 9), "256": (9, 9), "351": (9, 9), "352": (6, 11),
    "353": (7, 9), "354": (7, 9), "356": (8, 8), "357": (8, 8), "358": (5, 12), "359": (8, 9), "370": (8, 8),
    "371": (8, 8), "372": (7, 8), "380": (9, 9), "381": (8, 9), "385": (8, 9), "386": (8, 8), "420": (9, 9),
    "421": (9, 9), "852": (8, 8), "853": (8, 8), "855": (8, 9), "880": (10, 10), "886": (8, 9), "960": (7, 7),
    "961": (7, 8), "962": (8, 9), "963": (9, 9), "964": (10, 10), "965": (8, 8), "966": (9, 9), "971": (8, 9),
    "972": (8, 9), "973": (8, 8), "974": (8, 8), "977": (8, 10), "994": (9, 9), "995": (9, 9), "998": (9, 9),
}
_INTERNATIONAL = re.compile(
    r"(?<![\w+])(?:\+|00(?=[1-9]))[1-9](?:[ .\-]?(?:\((?:0|[0-9]{1,4})\)|[0-9])){6,17}(?![0-9]|[.\-][0-9])")
_NATIONAL = re.compile(
    r"(?<![\w.+/-])(?<![0-9] )"
    r"(?:"
    # North America: (555) 123-4567, 555-123-4567, 555.123.4567, 212 555 0100, 1-800-555-0199
    r"(?:1[-. ])?(?:\([2-9][0-9]{2}\)[-. ]?[0-9]{3}[-. ][0-9]{4}|[2-9][0-9]{2}-[0-9]{3}-[0-9]{4}"
    r"|[2-9][0-9]{2}\.[0-9]{3}\.[0-9]{4}|[2-9][0-9]{2} [0-9]{3} [0-9]{4})"
    # A trunk 0 then groups (UK 020 7946 0958, DE 030 12345678, FR 01 23 45 67 89, JP 03-1234-5678, ...)
    r"|\(?0[0-9]{1,4}\)?(?:[ ./-][0-9]{2,8}){1,4}"
    # Brazil (11) 91234-5678, Spain 612 34 56 78, India 98765 43210, China 138 0013 8000, Russia 8 (495) 123-45-67
    r"|\([1-9][0-9]\) ?9?[0-9]{4}-[0-9]{4}|[6-9][0-9]{2} [0-9]{2} [0-9]{2} [0-9]{2}|[6-9][0-9]{4} [0-9]{5}"
    r"|1[3-9][0-9] [0-9]{4} [0-9]{4}|8 ?\(?[0-9]{3}\)? ?[0-9]{3}-[0-9]{2}-[0-9]{2}"
    r")(?![\w-]|[.,/][0-9]| [0-9])")
_PHONE_CONTEXT = re.compile(
    r"(?i)(?:phone|tel|mobile|cell|whatsapp|call me|text me|fax|handy|telefon|téléphone|teléfono|telefone|"
    r"portable|móvil|celular|電話|携帯|ph\.|mob\.?|contact number|phone number|"
    r"(?:my|her|his|their|our|your)[ \t]+(?:number|digits)|(?:reach|call|ring|text|sms|message)[ \t]+"
    r"(?:me|her|him|us|them)(?:[ \t]+(?:on|at))?)[^\n0-9]{0,20}$")
_CONTEXT_DIGITS = re.compile(r"(?<![\w.+/-])[0-9]{2,6}(?:[ .-][0-9]{2,6}){1,4}(?![\w-]|[.,][0-9])|(?<![\w.+/-])[0-9]{8,12}(?![\w.-])")
_ISBN_BEFORE = re.compile(r"(?i)isbn(?:-1[03])?:?\s*$")

_IPV4 = re.compile(
    r"(?<![\w.])(?:(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\.){3}(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
    r"(?!\w|\.[0-9])")
_IPV6 = re.compile(
    r"(?<![\w:.%])(?:[0-9A-Fa-f]{1,4}|:)(?::[0-9A-Fa-f]{0,4}){1,7}"
    r"(?:(?<=:)(?:[0-9]{1,3}\.){3}[0-9]{1,3})?(?:%[A-Za-z0-9_.\-]{1,32})?(?![\w:]|\.[0-9])")


_CONTEXT_PHONE = "phone (by context)"


def _luhn(digits: str) -> bool:
    total = 0
    for position, char in enumerate(reversed(digits)):
        value = ord(char) - 48
        if position % 2:
            value = value * 2 - 9 if value > 4 else value * 2
        total += value
    return total % 10 == 0


def _card_network(digits: str) -> bool:
    for low, high, size, lengths in _LUHN_NETWORKS:
        if len(digits) in lengths and low <= int(digits[:size]) <= high:
            return True
    return False


def _iban_valid(compact: str) -> bool:
    if _IBAN_LENGTHS.get(compact[:2]) != len(compact):
        return False
    rearranged = compact[4:] + compact[:4]
    number = "".join(str(int(char, 36)) for char in rearranged)
    return int(number) % 97 == 1


def _phone_international(value: str) -> bool:
    digits = "".join(re.findall(r"\((?!0\))[0-9]{1,4}\)|[0-9]", value.replace("(0)", "")))
    digits = re.sub(r"[()]", "", digits)
    if value.startswith("00"):
        digits = digits[2:]
    for size in (1, 2, 3):
        code = digits[:size]
        if code in _CALLING_CODES:
            low, high = _CALLING_CODES[code]
            return low <= len(digits) - size <= high
    return False


# Numbers are only looked for inside runs of digits and separators, so a message with few numbers costs
# little; each run is searched with every number pattern (a window a few characters wider than the run, for
# the patterns' fences).
_NUMERIC_RUN = re.compile(r"[+(]?[0-9][0-9 ().\-/]{5,}")
_LETTERS_THEN_DIGITS = re.compile(r"[A-Z]{2} ?[0-9]{2}")


def _emails(text: str) -> Iterable[tuple[int, int, str]]:
    # Only the stretch from just before the first "@" to just after the last can hold an address.
    low = max(0, text.find("@") - 1100)  # room for the longest local part the pattern allows
    high = min(len(text), text.rfind("@") + 600)
    for match in _EMAIL.finditer(text, low, high):
        domain = match.group("domain")
        if domain.rsplit(".", 1)[-1].lower() in _FILE_SUFFIXES:
            continue
        if re.match(r":[\w~./-]", text[match.end():match.end() + 2]):
            continue  # git@github.com:org/repo.git is an address for a program, not a person
        if text.endswith("://", 0, match.start()):
            continue  # https://user@host/path: the user part of a URL, not a mailbox
        if _REMOTE_LOGIN.search(text, max(0, match.start() - 120), match.start()):
            continue  # ssh ubuntu@ec2-...amazonaws.com: a login on a machine, not a mailbox
        yield match.start(), match.end(), "email"


def _pii_candidates(text: str) -> Iterable[tuple[int, int, str]]:
    if "@" in text:
        yield from _emails(text)
    if _LETTERS_THEN_DIGITS.search(text):
        for match in _IBAN.finditer(text):
            valid = _iban_valid(match.group().replace(" ", ""))
            yield match.start(), match.end(), "iban" if valid else ""  # "" blocks what lies inside
        for match in _NINO.finditer(text):
            yield match.start(), match.end(), "nino"
    for run in _NUMERIC_RUN.finditer(text):
        value = run.group()
        digits = sum(char.isdigit() for char in value)
        if digits >= 7 or (digits >= 4 and value.count(".") >= 3):  # nothing shorter is PII
            yield from _numbers(text, run.start(), min(len(text), run.end() + 3))


def _numbers(text: str, low: int, high: int) -> Iterable[tuple[int, int, str]]:
    for match in _INTERNATIONAL.finditer(text, low, high):
        if _phone_international(match.group()):
            yield match.start(), match.end(), "phone"
    for match in _CARD.finditer(text, low, high):
        digits = re.sub(r"[^0-9]", "", match.group())
        if len(digits) < 12 or not _luhn(digits) or not _card_network(digits):
            continue
        if match.group().isdigit() and len(digits) not in (15, 16) and not _CARD_CONTEXT.search(
                text, max(0, match.start() - 40), match.start()) and not _CARD_AFTER.match(text, match.end()):
            continue  # a bare 12-14 or 17-19 digit run is more often an id than a card, unless a card word
            # comes before it or an expiry / CVC after it
        yield match.start(), match.end(), "credit_card"
    for match in _SSN_DASHED.finditer(text, low, high):
        area, group, serial = match.groups()
        if area not in ("000", "666") and area[0] != "9" and group != "00" and serial != "0000":
            before = max(0, match.start() - 40)
            if _SSN_NOT_CONTEXT.search(text, before, match.start()) and not _SSN_CONTEXT.search(
                    text, before, match.start()):
                continue
            yield match.start(), match.end(), "ssn"
    for match in _SSN_OTHER.finditer(text, low, high):
        area = match.group(1)
        if area in ("000", "666") or area[0] == "9" or match.group(3) == "00" or match.group(4) == "0000":
            continue
        if _SSN_CONTEXT.search(text, max(0, match.start() - 40), match.start()):
            yield match.start(), match.end(), "ssn"
    for match in _NATIONAL.finditer(text, low, high):
        value = match.group()
        digits = re.sub(r"[^0-9]", "", value)
        if value.startswith(("0", "(0")):
            if not 9 <= len(digits) <= 12 or _ISBN_BEFORE.search(text, max(0, match.start() - 12), match.start()):
                continue
            if re.fullmatch(r"0[0-9]{3}[ -][0-9]{2}[ -][0-9]{2}", value):
                continue
        yield match.start(), match.end(), "phone"
    for match in _CONTEXT_DIGITS.finditer(text, low, high):
        digits = re.sub(r"[^0-9]", "", match.group())
        if 8 <= len(digits) <= 12 and _PHONE_CONTEXT.search(text, max(0, match.start() - 40), match.start()):
            yield match.start(), match.end(), _CONTEXT_PHONE  # loses a tie to a card or an SSN of the same span
    for match in _IPV4.finditer(text, low, high):
        yield match.start(), match.end(), "ip_address"


_HEX_OR_COLON = frozenset("0123456789abcdefABCDEF:")


def _ipv6_windows(text: str) -> Iterable[tuple[int, int]]:
    """Stretches of text around colons with a hex digit or colon on each side: where an IPv6 address can be."""
    window: list[int] | None = None
    colon = text.find(":")
    while colon >= 0:
        if 0 < colon < len(text) - 1 and text[colon - 1] in _HEX_OR_COLON and text[colon + 1] in _HEX_OR_COLON:
            low, high = max(0, colon - 45), min(len(text), colon + 60)
            if window is not None and low <= window[1]:
                window[1] = high
            else:
                if window is not None:
                    yield window[0], window[1]
                window = [low, high]
        colon = text.find(":", colon + 1)
    if window is not None:
        yield window[0], window[1]


def _ipv6_candidates(text: str) -> Iterable[tuple[int, int, str]]:
    if "::" not in text and text.count(":") < 7:
        return
    reached = 0
    for low, high in _ipv6_windows(text):
        for match in _IPV6.finditer(text, max(low, reached), high):
            reached = match.end()
            if _ipv6_address(match.group().split("%", 1)[0]):
                yield match.start(), match.end(), "ip_address"


def _ipv6_address(address: str) -> bool:
    """Whether ``address`` is a valid IPv6 address that is written like one (``1::2`` is a slice)."""
    try:
        ipaddress.IPv6Address(address)
    except ValueError:
        return False
    groups = [group for group in address.split(":") if group]
    if "::" in address and address != "::1" and not address.lower().startswith("::ffff:"):
        return len(groups) >= 3 or len(groups[0] if groups else "") >= 3  # a::b is a C++ scope
    return True


def _pii_spans(text: str) -> list[tuple[int, int, str]]:
    rank = {kind: index for index, kind in enumerate(PII_KINDS + (_CONTEXT_PHONE,))}
    candidates = [*_pii_candidates(text), *_ipv6_candidates(text)]
    blocked = [(start, end) for start, end, kind in candidates if not kind]
    found = sorted((start, rank[kind], -end, kind) for start, end, kind in candidates
                   if kind and not any(low < end and start < high for low, high in blocked))
    chosen: list[tuple[int, int, str]] = []
    reached = 0
    for start, _, negative_end, kind in found:
        if start >= reached:
            chosen.append((start, -negative_end, "phone" if kind == _CONTEXT_PHONE else kind))
            reached = -negative_end
    return chosen


def scan_pii(text: str) -> list[PIIFinding]:
    """Find personal data in ``text``: emails, phones, IBANs, card numbers, SSNs, IP addresses, UK NINOs.

    Args:
        text: any text.

    Returns:
        Findings sorted by ``start``, never overlapping (on a tie the earlier kind in ``PII_KINDS`` wins).

    Raises:
        InvalidArgumentError: ``text`` is not a string.
    """
    text = _checked_str(text)
    return [PIIFinding(start, end, kind, text[start:end]) for start, end, kind in _pii_spans(text)]


def anonymize_pii_text(text: str) -> str:
    """Replace each piece of personal data with its kind: ``[email]``, ``[phone]``, ``[iban]``, ...

    Runs to a fixed point, so removing one value can never expose another, and applying it twice is the
    same as once.

    Args:
        text: any text.

    Returns:
        The text with every value ``scan_pii`` finds replaced by ``[<kind>]``.

    Raises:
        InvalidArgumentError: ``text`` is not a string.
    """
    text = _checked_str(text)
    for _ in range(_MAX_REWRITE_PASSES):
        spans = _pii_spans(text)
        if not spans:
            return text
        pieces, cursor = [], 0
        for start, end, kind in spans:
            pieces.append(text[cursor:start])
            pieces.append(f"[{kind}]")
            cursor = end
        pieces.append(text[cursor:])
        text = "".join(pieces)
    return text


CREDENTIAL_FAMILIES: tuple[str, ...] = tuple(sorted(
    {rule.family for rule in _PROVIDER_RULES} | {family for family, *_ in _UNANCHORED}
    | {family for family, *_ in _CONTEXT_FAMILIES}
    | {"private_key", "password", "generic", "http_auth", "bearer", "url_password", "high_entropy"}))
"""Every family slug ``scan_credentials`` can report: providers, plus the generic kinds (``password``,
``generic``, ``http_auth``, ``bearer``, ``url_password``, ``private_key``, ``high_entropy``)."""


def _redacted_placeholder(key: str) -> str:
    """What stands for a secret stored under a structured key (``{"password": ...}``): the whole value."""
    return f"[credential:{_key_kind(key) or 'generic'}]"


def _credential_kinds(text: str) -> list[str]:
    """The kinds of credential in ``text`` (their labels), each once, in order of first appearance."""
    return list(dict.fromkeys(finding.label for finding in scan_credentials(text)))


def _redact_credentials_text(text: str) -> str:
    """``text`` with every credential replaced by its placeholder (see ``redact_credential_text``)."""
    return redact_credential_text(text)[0]


def _privacy_text(text: Any) -> str:
    """``text`` itself, checked to be a string."""
    if not isinstance(text, str):
        raise InvalidArgumentError(f"text must be a string, not {type(text).__name__}")
    return text


class CredentialDetectedError(KumihoMemoryError, ValueError):
    """Text that must not hold a secret (a stored summary, an LLM prompt) holds one.

    The message and ``kinds`` name what kind of credential was seen, e.g. ``"an AWS access key id"``; neither
    ever contains the secret or any piece of it.
    """

    def __init__(self, message: str, kinds: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.kinds = tuple(kinds)

    def __reduce__(self) -> tuple[Any, ...]:  # keep ``kinds`` across pickling (multiprocessing, queues)
        return type(self), (str(self), self.kinds)


class PIIRedactor:
    """Rewrites personal data and removes credentials from text, with upstream kumiho-memory's methods.

    PII (see ``PII_KINDS``) becomes a placeholder; credentials (see ``CREDENTIAL_FAMILIES``) become
    ``[credential:<family>]`` or make ``reject_credentials`` raise. Every rewrite is idempotent: applying it
    twice gives the same text as once.

    One instance numbers PII placeholders across its calls (``[EMAIL_001]`` in one call and the next means
    the same address), so use one instance per conversation or document, and a fresh one for the next.
    Everything else is stateless; calls are thread-safe.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counters: dict[str, int] = {}
        self._assigned: dict[tuple[str, str], str] = {}

    def redact(self, text: str) -> tuple[str, dict[str, str]]:
        """Replace PII with numbered placeholders such as ``[EMAIL_001]`` and ``[PHONE_002]``.

        The same value always gets the same placeholder on this instance (an email in any letter case, a
        phone number with or without its country code and separators), and numbering continues after any
        placeholder already in the text, so two people never share a number.

        Args:
            text: any text.

        Returns:
            ``(text, entities)``: the rewritten text and ``{placeholder: original value}`` for the values
            this call replaced (keep it out of any store: it is the PII).

        Raises:
            InvalidArgumentError: ``text`` is not a string.
        """
        text = _privacy_text(text)
        entities: dict[str, str] = {}
        with self._lock:
            for kind, number in _NUMBERED_PLACEHOLDER.findall(text):
                self._counters[kind] = max(self._counters.get(kind, 0), int(number))
            # to a fixed point: removing one value can expose a neighbour its edge was hiding; each pass turns
            # original characters into placeholders, which never match, so it ends
            for _ in range(_MAX_REWRITE_PASSES):
                findings = scan_pii(text)
                if not findings:
                    break
                pieces, cursor = [], 0
                for finding in findings:
                    kind = finding.kind.upper()
                    key = (kind, _pii_identity(finding.kind, finding.value))
                    if key not in self._assigned:
                        self._counters[kind] = self._counters.get(kind, 0) + 1
                        self._assigned[key] = f"[{kind}_{self._counters[kind]:03d}]"
                    placeholder = self._assigned[key]
                    entities[placeholder] = finding.value
                    pieces += [text[cursor:finding.start], placeholder]
                    cursor = finding.end
                text = "".join(pieces) + text[cursor:]
        return text, entities

    def redact_text(self, text: str) -> str:
        """``redact(text)``'s text alone."""
        return self.redact(text)[0]

    def anonymize_summary(self, text: str) -> str:
        """Replace PII with its kind: ``[email]``, ``[phone]``, ``[iban]``, ``[credit_card]``, ``[ssn]``,
        ``[ip_address]``, ``[nino]``.

        Args:
            text: any text, typically a summary about to be stored.

        Raises:
            InvalidArgumentError: ``text`` is not a string.
        """
        return anonymize_pii_text(_privacy_text(text))

    def find_credentials(self, text: str) -> list[str]:
        """Name the kinds of credential in ``text``, for messages (never the secrets themselves).

        Returns:
            Labels such as ``"a Stripe secret key"``, each once, in order of appearance; empty when none.

        Raises:
            InvalidArgumentError: ``text`` is not a string.
        """
        return _credential_kinds(_privacy_text(text))

    def redact_credentials(self, text: str) -> tuple[str, int]:
        """Replace every credential with ``[credential:<family>]``; whole private-key blocks go at once.

        Labels are kept where they help a reader: ``Bearer [credential:bearer]``,
        ``"password": "[credential:password]"``, ``postgres://app:[credential:url_password]@db/main``.
        Afterwards ``find_credentials`` finds nothing.

        Returns:
            ``(text, count)``: the text without credentials, and how many were replaced.

        Raises:
            InvalidArgumentError: ``text`` is not a string.
        """
        return redact_credential_text(_privacy_text(text))

    def strip_credentials(self, text: str) -> str:
        """``redact_credentials(text)``'s text alone."""
        return redact_credential_text(_privacy_text(text))[0]

    def reject_credentials(self, text: str) -> None:
        """Raise if ``text`` holds a credential; for text about to be stored, where silently editing is wrong.

        Raises:
            CredentialDetectedError: a credential was found; the message names its kind, not its value.
            InvalidArgumentError: ``text`` is not a string.
        """
        kinds = self.find_credentials(text)
        if kinds:
            raise CredentialDetectedError(
                f"text holds {' and '.join(kinds)}; remove it (PIIRedactor.redact_credentials) before storing "
                "or sending it", kinds)

    def scrub_for_llm(self, text: str) -> str:
        """Make text safe to send to an LLM: cut credentials, anonymize PII, then check; fail closed.

        Returns:
            The scrubbed text, or just ``[credential:generic]`` if anything still looks like a credential
            after scrubbing (better an empty prompt than a leaked key).

        Raises:
            InvalidArgumentError: ``text`` is not a string.
        """
        scrubbed = self.anonymize_summary(self.strip_credentials(text))
        return _FAIL_CLOSED if self.find_credentials(scrubbed) else scrubbed


_NUMBERED_PLACEHOLDER = re.compile(r"\[([A-Z_]{2,20})_([0-9]{3,9})\]")


def _pii_identity(kind: str, value: str) -> str:
    """The identity of a PII value, so that spellings of one value share a placeholder."""
    if kind in ("email", "ip_address"):
        return value.lower()
    compact = re.sub(r"[^0-9A-Za-z]", "", value).upper()
    return compact[-9:] if kind == "phone" else compact   # +44 20 7946 0958 and 020 7946 0958 are one number


# -- one screening policy for everything bound for long-term memory -------------------------------------------
#
# Every way into the store (remember and revise, metadata at any depth, edges, artifacts, space attributes,
# working-memory messages, the retry queue) passes its text through ``screen_for_store``. Two policies:
#
#   "redact" (default)  each credential becomes a readable placeholder; the rest is stored as given
#   "refuse"            a credential raises CredentialDetectedError naming the field and kind; nothing stored
#
# A tag, a space or a supersession key holding a credential is refused under both: they become addresses
# and names, where a placeholder cannot stand. Summaries made by consolidation are redacted and then refused
# if anything still looks like a credential (fail closed).

CREDENTIAL_POLICIES = ("redact", "refuse")
_SCREEN_DEPTH = 64          # deeper metadata is refused by the validators before it gets here


def _checked_policy(policy: Any) -> str:
    if policy not in CREDENTIAL_POLICIES:
        raise InvalidArgumentError(f"credentials must be one of {CREDENTIAL_POLICIES}, not {policy!r}")
    return policy


def screen_for_store(value: Any, *, field: str = "text", policy: str = "redact") -> Any:
    """Return ``value`` with every credential removed, ready for long-term memory; or refuse it.

    Args:
        value: a string, or JSON-like data (dicts, lists, tuples; keys and values at any depth are screened,
            numbers, booleans and None pass unchanged).
        field: the name used in the error, e.g. ``"metadata['notes']"``.
        policy: ``"redact"`` (replace each credential with a placeholder) or ``"refuse"``.

    Returns:
        The screened value, of the same shape (tuples come back as lists, as JSON stores them).

    Raises:
        CredentialDetectedError: ``policy="refuse"`` and a credential was found (the message names the field
            and the kind, never the secret).
        InvalidArgumentError: an unknown policy.
    """
    policy = _checked_policy(policy)
    return _screen_value(value, field, policy, 0)


def _screen_value(value: Any, field: str, policy: str, depth: int) -> Any:
    if isinstance(value, str):
        return _screen_string(value, field, policy)
    if depth > _SCREEN_DEPTH:
        return value
    if isinstance(value, Mapping):
        screened = {}
        for key, item in value.items():
            clean_key = _screen_string(key, f"{field} key", policy) if isinstance(key, str) else key
            where = f"{field}[{clean_key!r}]"
            kinds = _credential_kinds(f'{key} = "{item}"') if isinstance(key, str) and isinstance(item, str) else []
            if kinds:
                # structure says what a line would: {"password": "hunter2!"} is password = "hunter2!"
                if policy == "refuse":
                    raise _credential_refused(where, kinds)
                screened[clean_key] = _redacted_placeholder(key)
                continue
            screened[clean_key] = _screen_value(item, where, policy, depth + 1)
        return screened
    if isinstance(value, (list, tuple)):
        return [_screen_value(item, f"{field}[{index}]", policy, depth + 1) for index, item in enumerate(value)]
    return value


def _screen_string(text: str, field: str, policy: str) -> str:
    kinds = _credential_kinds(text)
    if not kinds:
        return text
    if policy == "refuse":
        raise _credential_refused(field, kinds)
    return _redact_credentials_text(text)


def _credential_refused(field: str, kinds: Sequence[str]) -> CredentialDetectedError:
    return CredentialDetectedError(f"{field} holds {' and '.join(kinds)}; nothing was stored (remove it, or open "
                                   "the memory with credentials='redact' to store a placeholder)", kinds)


def refuse_credentials_in(value: str, field: str) -> str:
    """``value`` itself when it holds no credential; for names and addresses, where no placeholder can stand.

    Raises:
        CredentialDetectedError: a credential was found (named by kind, never shown).
    """
    kinds = _credential_kinds(value)
    if kinds:
        raise CredentialDetectedError(f"{field} holds {' and '.join(kinds)}; a name or address cannot hold a "
                                      "secret, nothing was stored", kinds)
    return value


# ==========================================================================================================
# 8. Storage: the graph-backend interface, the embedded SQLite engine, the Kumiho server backend
# ==========================================================================================================

@dataclasses.dataclass(frozen=True)
class RevisionDraft:
    """What ``Memory.remember`` asks a backend to write, already validated.

    Exactly one of three targets applies: ``item`` (add to that item), ``key`` (add to the item holding the
    key in ``space``, or create it; identical content to its latest revision adds nothing), or neither (a
    new item named ``name``).
    """

    project: str
    space: str
    kind: str
    name: str
    title: str
    content: str
    metadata: Mapping[str, Any]
    tags: tuple[str, ...] = ()
    key: str | None = None
    item: Kref | None = None
    vector: tuple[float, ...] | None = None      # unit-length embedding of title + content, if available
    vector_model: str = ""
    artifacts: tuple[tuple[str, str, Mapping[str, Any]], ...] = ()   # (name, location, metadata), same transaction
    edges: tuple[tuple[Kref, str, Mapping[str, Any]], ...] = ()   # (target revision, type, metadata) from the new one


@dataclasses.dataclass(frozen=True)
class RecallSignals:
    """How much each signal beyond the words counts (set a weight to 0 to turn it off).

    Attributes:
        neighbour_terms: share of the words of the messages around a message (within ``neighbour_window``
            in its thread) indexed with it, so an answer is found by the question before it.
        neighbour_window: how many messages each way lend their words.
        neighbour_spread: share of a strong hit's score lent to its thread neighbours at query time.
        who: boost factor for memories by or about a person or entity the query names.
        when: boost factor for memories whose ``event_date`` falls in (or near) a time the query names.
        when_scale_days: how fast the time boost fades outside the named window.
        edges: share of a top hit's score lent to memories joined to it by one of ``edge_types``.
        edge_seeds: how many top hits lend over edges.
    """

    neighbour_terms: float = 0.15
    neighbour_window: int = 2
    neighbour_spread: float = 0.0
    who: float = 0.5
    when: float = 1.0
    when_scale_days: float = 3.0
    edges: float = 0.5
    edge_seeds: int = 5
    edge_types: tuple[str, ...] = (DERIVED_FROM, DEPENDS_ON, REFERENCED, CONTAINS, CREATED_FROM, SUPPORTS,
                                   CONTRADICTS, RELATED_TO, ABOUT)


@dataclasses.dataclass(frozen=True)
class RecallQuery:
    """What a backend needs to score candidates for one recall (built by ``Memory.recall``)."""

    project: str
    terms: tuple[str, ...]
    pool: int
    spaces: tuple[str, ...] | None = None
    as_of: float | None = None
    include_superseded: bool = False
    time_window: tuple[float, float] | None = None
    keep: int | None = None       # how many of the best candidates to return (default: the whole pool)
    query_vector: tuple[float, ...] | None = None   # unit length; turns on the semantic channel
    follow_edges: bool = True     # let top hits lend score over typed edges
    semantic_weight: float = 0.2
    # Reads the query's times relative to "now" ("last Saturday") against a given now, when no query_time
    # or as_of fixed it: a backend that knows its spaces' newest event_date re-reads them against that
    # (``time_window`` is the reading against the clock, for backends that do not).
    relative_time: Callable[[_dt.datetime], tuple[float, float] | None] | None = None
    expansions: tuple[str, ...] = ()   # terms the query means in other words (``query_expansions``), weighed less


@dataclasses.dataclass
class ScoredRevision:
    """A candidate from a backend: the revision (made for this call alone), its score, and which signals
    touched it."""

    record: RevisionRecord
    score: float
    signals: dict[str, Any] = dataclasses.field(default_factory=dict)


class GraphBackend(abc.ABC):
    """The graph operations ``Memory`` needs; the embedded engine and the Kumiho server implement them.

    Krefs passed in are parsed and validated; a backend resolves them, raising ``NotFoundError`` when the
    thing named does not exist. Every write method is atomic.
    """

    @abc.abstractmethod
    def write_revision(self, draft: RevisionDraft) -> tuple[RevisionRecord, bool]:
        """Write ``draft``; return the revision and whether a new one was created."""

    @abc.abstractmethod
    def resolve(self, kref: Kref) -> RevisionRecord:
        """Return the revision an item kref selects (latest, ``r=``, ``t=``, ``t=`` at ``time=``)."""

    @abc.abstractmethod
    def item(self, kref: Kref) -> ItemRecord:
        """Return the item a kref is in."""

    @abc.abstractmethod
    def items(self, project: str, *, space: str | None = None, kind: str | None = None,
              include_deprecated: bool = False) -> list[ItemRecord]:
        """List items of a project, optionally within a space (and its sub-spaces) or of one kind."""

    def item_page(self, project: str, *, space: str | None = None, kind: str | None = None,
                  include_deprecated: bool = False, exclude_kinds: Container[str] = (), limit: int = 50,
                  offset: int = 0) -> tuple[list[ItemRecord], int]:
        """One page of items, newest first (then by name), and how many items there are in all. This default
        lists every item; a backend that can page in its store overrides it."""
        everything = [item for item in self.items(project, space=space, kind=kind,
                                                  include_deprecated=include_deprecated)
                      if item.kref.kind not in exclude_kinds]
        everything.sort(key=lambda item: (item.created_at, str(item.kref)), reverse=True)
        return everything[offset:offset + limit], len(everything)

    @abc.abstractmethod
    def item_by_key(self, project: str, space: str, key: str) -> ItemRecord | None:
        """The item holding a supersession key in a space, or None."""

    @abc.abstractmethod
    def revisions(self, item: Kref) -> list[RevisionRecord]:
        """Every revision of an item, oldest first."""

    @abc.abstractmethod
    def set_tag(self, revision: Kref, tag: str) -> RevisionRecord:
        """Point ``tag`` at the revision (moving it from another revision of the item)."""

    @abc.abstractmethod
    def remove_tag(self, revision: Kref, tag: str) -> bool:
        """Remove ``tag`` from the revision; False when the revision did not carry it."""

    @abc.abstractmethod
    def add_edge(self, source: Kref, target: Kref, edge_type: str, metadata: Mapping[str, Any]) -> EdgeRecord:
        """Create (or return the existing) typed edge between two revisions."""

    @abc.abstractmethod
    def edges(self, kref: Kref, *, direction: str = "both", edge_type: str | None = None) -> list[EdgeRecord]:
        """Edges of one revision, or of every revision of an item for a bare item kref."""

    @abc.abstractmethod
    def set_deprecated(self, kref: Kref, deprecated: bool) -> None:
        """Deprecate (or restore) an item (bare item kref) or one revision."""

    @abc.abstractmethod
    def forget(self, kref: Kref) -> dict[str, Any]:
        """Erase an item (bare kref) or one revision, with its edges, tags, artifacts and index entries."""

    @abc.abstractmethod
    def add_artifact(self, revision: Kref, name: str, location: str,
                     metadata: Mapping[str, Any]) -> ArtifactRecord:
        """Attach a named artifact to a revision (names are unique per revision)."""

    @abc.abstractmethod
    def artifacts(self, revision: Kref) -> list[ArtifactRecord]:
        """The artifacts of a revision, by name."""

    @abc.abstractmethod
    def tag_history(self, item: Kref) -> list[tuple[str, int | None, str]]:
        """Every move of every tag of an item, oldest first: ``(tag, revision number or None when removed
        or forgotten, ISO instant)``."""

    @abc.abstractmethod
    def search(self, query: RecallQuery) -> list[ScoredRevision]:
        """Score revisions for a recall (words and signals, see ``RecallQuery``); best first, at most
        ``query.pool``. By default one current revision per item, nothing deprecated or superseded; never
        bookkeeping (``SYSTEM_KINDS``), which must not shift the word statistics either."""

    @abc.abstractmethod
    def set_vector(self, revision: Kref, model: str, vector: Sequence[float]) -> None:
        """Store (or replace) a revision's unit-length embedding."""

    @abc.abstractmethod
    def revisions_without_vector(self, project: str, limit: int) -> list[RevisionRecord]:
        """Revisions of ``project`` that have no embedding yet (oldest first)."""

    @abc.abstractmethod
    def stats(self, project: str) -> dict[str, Any]:
        """Counts for a project: at least ``items``, ``revisions`` and ``edges``."""

    @abc.abstractmethod
    def export_records(self) -> Iterator[dict[str, Any]]:
        """Every record of the store, in a deterministic order that ``import_records`` accepts."""

    @abc.abstractmethod
    def import_records(self, records: Iterable[tuple[int, dict[str, Any]]],
                       progress: Callable[[int], None] | None = None) -> dict[str, int]:
        """Load ``(line_number, record)`` pairs atomically; identical records already present are skipped."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release the backend's resources; later calls raise ``StoreClosedError``."""

    def change_token(self, project: str | None = None) -> Any:
        """A value that changes whenever anything ``project``'s recall could see is written, by anyone;
        None when the backend cannot tell (then only this process's writes are noticed, through ``Memory``)."""
        return None

    def update_metadata(self, revision: Kref, updates: Mapping[str, Any]) -> RevisionRecord:
        """Merge ``updates`` into one revision's metadata (a ``None`` value removes the key); content, number,
        tags and content hash stay as they were. Used for enrichment (Dream State); a backend that cannot
        raises ``InvalidArgumentError``."""
        raise InvalidArgumentError(f"{type(self).__name__} cannot update revision metadata")


# Conversation threads and signals recall reads from memory metadata. A memory with a speaker or a role is a
# message; consecutive messages of one thread (space + the first of THREAD_KEYS present) are linked by
# FOLLOWS edges, newer -> older.
FOLLOWS = "FOLLOWS"
THREAD_KEYS = ("thread_id", "session_id", "conversation_id", "session")
MESSAGE_KEYS = ("speaker", "role")
WHO_KEYS = ("speaker", "author", "user", "user_id", "participants", "entities", "people")


def is_message(metadata: Mapping[str, Any]) -> bool:
    """True when a memory is a conversation message (its metadata names a speaker or a role)."""
    return any(isinstance(metadata.get(key), str) and metadata.get(key) for key in MESSAGE_KEYS)


def thread_key(metadata: Mapping[str, Any]) -> str:
    """The thread a message belongs to within its space: the first of ``THREAD_KEYS`` present, else ``""``."""
    for key in THREAD_KEYS:
        value = metadata.get(key)
        if value not in (None, "") and not isinstance(value, (dict, list)):
            return str(value)
    return ""


def who_names(metadata: Mapping[str, Any]) -> list[str]:
    """The people and entities a memory is by or about, from the metadata keys in ``WHO_KEYS``."""
    names = []
    for key in WHO_KEYS:
        value = metadata.get(key)
        for name in (value if isinstance(value, list) else [value]):
            if isinstance(name, str) and name.strip():
                names.append(name.strip())
    return names


def event_epoch(metadata: Mapping[str, Any]) -> float | None:
    """Epoch seconds of metadata ``event_date``, or None when absent or unreadable."""
    value = metadata.get("event_date")
    if not isinstance(value, str):
        return None
    try:
        return parse_instant(value).timestamp()
    except InvalidArgumentError:
        return None


class _RecallState:
    """The embedded store's recall index and per-revision signals, kept in step with the database.

    Built on first recall from the tables, then updated from the ``changes`` log: after each write of
    this process, and before a search when another process has written (``PRAGMA data_version``).
    Revision row ids are the document ids.
    """

    def __init__(self, signals: RecallSignals) -> None:
        self.signals = signals
        self.index = RecallIndex()
        self.last_seq = 0
        self.data_version: int | None = None
        self.space_ids: dict[tuple[str, str], int] = {}
        self.doc_item: dict[int, int] = {}
        self.doc_event: dict[int, float] = {}
        self.doc_who: dict[int, frozenset[str]] = {}
        self.doc_message: set[int] = set()
        self.doc_deprecated: set[int] = set()
        self.thread_prev: dict[int, int] = {}
        self.thread_next: dict[int, int] = {}
        self.links: dict[int, list[tuple[int, str]]] = {}
        self.superseded: set[int] = set()
        self.item_docs: dict[int, list[int]] = {}
        self.item_space: dict[int, int] = {}
        self.item_deprecated: set[int] = set()
        self.item_published: dict[int, int] = {}
        self.current_by_space: dict[int, set[int]] = {}
        self.live_by_space: dict[int, set[int]] = {}
        self.current_by_project: dict[str, set[int]] = {}
        self.space_project: dict[int, str] = {}
        self.space_newest: dict[int, float] = {}        # newest event_date seen in a space (epoch seconds)
        self.space_terms: dict[int, list[float]] = {}    # a space's [total length, revisions] in the index
        self.space_short: dict[int, float] = {}          # the shortness its revisions are indexed with
        self.doc_length: dict[int, float] = {}
        self.name_terms: dict[str, int] = {}
        self.vectors: dict[int, array.array] = {}        # unit-length embeddings, by revision
        self.contested: dict[int, set[int]] = {}         # revision -> revisions that CONTRADICT it

    # -- loading ------------------------------------------------------------------------------------------

    def space_id(self, project: str, space: str) -> int:
        """A small id for ``(project, space)``."""
        key = (project, space)
        if key not in self.space_ids:
            self.space_ids[key] = len(self.space_ids)
            self.space_project[self.space_ids[key]] = project
        return self.space_ids[key]

    def load(self, conn: sqlite3.Connection) -> None:
        """Build everything from the tables."""
        self.last_seq = conn.execute("SELECT coalesce(max(seq), 0) FROM changes").fetchone()[0]
        items = [row[0] for row in conn.execute("SELECT id FROM items")]
        self.refresh(conn, items, bulk=True)
        self.index.compact()

    def sync(self, conn: sqlite3.Connection) -> None:
        """Apply what the ``changes`` log recorded since the last sync."""
        first = conn.execute("SELECT min(seq) FROM changes").fetchone()[0]
        if first is not None and first > self.last_seq + 1:
            self.__init__(self.signals)  # type: ignore[misc]  # the log was pruned past us: start over
            self.load(conn)
            return
        rows = conn.execute("SELECT seq, item_id FROM changes WHERE seq > ? ORDER BY seq", (self.last_seq,)).fetchall()
        if rows:
            self.last_seq = rows[-1][0]
            self.refresh(conn, sorted({item_id for _, item_id in rows}))

    @staticmethod
    def _chunks(values: Sequence[int], size: int = 500) -> Iterator[Sequence[int]]:
        for start in range(0, len(values), size):
            yield values[start:start + size]

    def _forget_docs(self, doc_ids: Iterable[int]) -> None:
        for doc_id in doc_ids:
            self.index.remove(doc_id)
            space = self.item_space.get(self.doc_item.get(doc_id))   # type: ignore[arg-type]
            if space is not None:
                self.current_by_space.get(space, set()).discard(doc_id)
                self.live_by_space.get(space, set()).discard(doc_id)
                self.current_by_project.get(self.space_project[space], set()).discard(doc_id)
            previous, following = self.thread_prev.pop(doc_id, None), self.thread_next.pop(doc_id, None)
            if previous is not None and self.thread_next.get(previous) == doc_id:
                del self.thread_next[previous]
            if following is not None and self.thread_prev.get(following) == doc_id:
                del self.thread_prev[following]
            length = self.doc_length.pop(doc_id, None)
            if space is not None and length is not None:
                self.space_terms[space][0] -= length
                self.space_terms[space][1] -= 1
            for table in (self.doc_item, self.doc_event, self.doc_who, self.links):
                table.pop(doc_id, None)
            self.doc_message.discard(doc_id)
            self.doc_deprecated.discard(doc_id)
            self.vectors.pop(doc_id, None)
            self.contested.pop(doc_id, None)
            self.superseded.discard(doc_id)

    def refresh(self, conn: sqlite3.Connection, item_ids: Sequence[int], *, bulk: bool = False) -> None:
        """Reload the given items' revisions, flags, edges and index entries from the tables."""
        touched_docs: set[int] = set()
        neighbours_before: set[int] = set()
        for item_id in item_ids:
            old_docs = self.item_docs.pop(item_id, [])
            for doc_id in old_docs:
                neighbours_before.update(self._window(doc_id))
            touched_docs.update(old_docs)
            self._forget_docs(old_docs)
            self.item_deprecated.discard(item_id)
            self.item_published.pop(item_id, None)
            self.item_space.pop(item_id, None)
        def rows() -> Iterator[Sequence[Any]]:
            for chunk in ([item_ids] if bulk else self._chunks(item_ids)):
                marks = "" if bulk else f" WHERE i.id IN ({','.join('?' * len(chunk))})"
                yield from conn.execute(
                    "SELECT i.id, i.project, i.space, i.deprecated, r.id, r.metadata, r.deprecated, r.token_count, "
                    "i.kind FROM items i LEFT JOIN revisions r ON r.item_id = i.id" + marks + " ORDER BY i.id, r.number",
                    [] if bulk else list(chunk))
        new_docs: list[int] = []
        lengths: dict[int, int] = {}
        for item_id, project, space, item_deprecated, doc_id, metadata, deprecated, length, kind in rows():
            if kind in SYSTEM_KINDS:
                continue                  # bookkeeping is never recalled, nor counted in the word statistics
            space_id = self.space_id(project, space)
            self.item_space[item_id] = space_id
            self.item_docs.setdefault(item_id, [])
            if item_deprecated:
                self.item_deprecated.add(item_id)
            if doc_id is None:
                continue
            self.item_docs[item_id].append(doc_id)
            meta = json.loads(metadata) if metadata != "{}" else {}
            self.doc_item[doc_id] = item_id
            event = event_epoch(meta)
            if event is not None:
                self.doc_event[doc_id] = event
                if event > self.space_newest.get(space_id, -math.inf):
                    self.space_newest[space_id] = event
            names = frozenset(term for name in who_names(meta) for term in tokenize(name))
            if names:
                self.doc_who[doc_id] = names
                for term in names:
                    self.name_terms[term] = self.name_terms.get(term, 0) + 1
            if is_message(meta):
                self.doc_message.add(doc_id)
            if deprecated:
                self.doc_deprecated.add(doc_id)
            new_docs.append(doc_id)
            lengths[doc_id] = length
            self.doc_length[doc_id] = float(length or 0)
            totals = self.space_terms.setdefault(space_id, [0.0, 0])
            totals[0] += float(length or 0)
            totals[1] += 1
        self._load_edges(conn, new_docs, bulk)
        self._load_vectors(conn, new_docs, bulk)
        published_sql = "SELECT item_id, revision_id FROM tags WHERE tag = ?"
        if bulk:
            published = conn.execute(published_sql, (PUBLISHED_TAG,)).fetchall()
        else:
            published = []
            for chunk in self._chunks(list(item_ids)):
                published.extend(conn.execute(published_sql + f" AND item_id IN ({','.join('?' * len(chunk))})",
                                              [PUBLISHED_TAG, *chunk]).fetchall())
        for item_id, doc_id in published:
            self.item_published[item_id] = doc_id
        for item_id in item_ids:
            self._choose_current(item_id)
        # Index the new documents, and re-index the thread neighbours whose borrowed words changed.
        affected = set(new_docs)
        for doc_id in new_docs:
            affected.update(self._window(doc_id))
        affected.update(doc for doc in neighbours_before if doc in self.doc_item)
        if bulk:
            base = self._stream_base_terms(conn, lengths)
        else:
            base = self._base_terms(conn, sorted(affected | {n for d in affected for n in self._window(d)}))
        for doc_id in sorted(affected):
            if doc_id in self.doc_item and (not bulk or doc_id in self.doc_message):
                self._add_to_index(doc_id, base, lengths.get(doc_id))
        self._follow_space_lengths({self.item_space[self.doc_item[doc]] for doc in new_docs if doc in self.doc_item})

    def _shortness(self, doc_id: int) -> float:
        """The shortness a revision is indexed with: its space's, fixed when the space is first indexed."""
        space = self.item_space[self.doc_item[doc_id]]
        if space not in self.space_short:
            total, count = self.space_terms.get(space, (0.0, 0))
            self.space_short[space] = bm25_shortness(total / count if count else 0.0)
        return self.space_short[space]

    def _follow_space_lengths(self, spaces: Iterable[int]) -> None:
        """Re-index a space whose mean length has moved its shortness by a fifth or more since it was
        indexed (a young space settling); rare, since the mean steadies as the space grows."""
        for space in spaces:
            total, count = self.space_terms.get(space, (0.0, 0))
            if not count or space not in self.space_short:
                continue
            shortness = bm25_shortness(total / count)
            if abs(shortness - self.space_short[space]) < 0.2:
                continue
            self.space_short[space] = shortness
            for item_id, item_space in self.item_space.items():
                if item_space != space:
                    continue
                for doc_id in self.item_docs.get(item_id, ()):
                    if doc_id in self.index:
                        self.index.add(doc_id, self.index.term_frequencies(doc_id),
                                       self.index.slot_length[self.index.doc_slot[doc_id]], short=shortness)

    def _add_to_index(self, doc_id: int, base: Mapping[int, Mapping[str, float]], length: int | None) -> None:
        """Index a revision with its own words plus a share of its thread neighbours' words."""
        frequencies = dict(base.get(doc_id, {}))
        if doc_id in self.doc_message and self.signals.neighbour_terms:
            for neighbour in self._window(doc_id):
                for term, tf in base.get(neighbour, {}).items():
                    frequencies[term] = frequencies.get(term, 0.0) + self.signals.neighbour_terms * tf
        if length is None:
            length = int(sum(base.get(doc_id, {}).values()))
        self.index.add(doc_id, frequencies, length, short=self._shortness(doc_id))

    def _stream_base_terms(self, conn: sqlite3.Connection, lengths: Mapping[int, int]) -> dict[int, dict[str, float]]:
        """Bulk load: index non-messages straight from their stored terms; keep only messages' terms for later
        (their neighbours lend them words)."""
        kept: dict[int, dict[str, float]] = {}
        for doc_id, terms in conn.execute("SELECT revision_id, terms FROM doc_terms ORDER BY revision_id"):
            if doc_id not in self.doc_item:
                continue
            frequencies = json.loads(terms)
            if doc_id in self.doc_message:
                kept[doc_id] = frequencies
            else:
                self.index.add(doc_id, frequencies, lengths.get(doc_id, 0), short=self._shortness(doc_id))
        return kept

    def _window(self, doc_id: int) -> list[int]:
        """The thread neighbours within ``neighbour_window`` each way."""
        found = []
        for table in (self.thread_prev, self.thread_next):
            current = doc_id
            for _ in range(self.signals.neighbour_window):
                current = table.get(current)
                if current is None:
                    break
                found.append(current)
        return found

    def _load_vectors(self, conn: sqlite3.Connection, doc_ids: Sequence[int], bulk: bool) -> None:
        sql = "SELECT revision_id, vector FROM vectors"
        chunks = [()] if bulk else list(self._chunks(list(doc_ids)))
        for chunk in chunks:
            where = "" if bulk else f" WHERE revision_id IN ({','.join('?' * len(chunk))})"
            for doc_id, blob in conn.execute(sql + where, list(chunk)):
                self.vectors[doc_id] = array.array("f", blob)

    def _load_edges(self, conn: sqlite3.Connection, doc_ids: Sequence[int], bulk: bool) -> None:
        sql = ("SELECT e.source_id, e.target_id, e.edge_type, s.item_id, t.item_id FROM edges e "
               "JOIN revisions s ON s.id = e.source_id JOIN revisions t ON t.id = e.target_id")
        rows: list[Sequence[Any]] = []
        if bulk:
            rows = conn.execute(sql).fetchall()
        else:
            for chunk in self._chunks(list(doc_ids)):
                marks = ",".join("?" * len(chunk))
                rows.extend(conn.execute(sql + f" WHERE e.source_id IN ({marks}) OR e.target_id IN ({marks})",
                                         [*chunk, *chunk]).fetchall())
        linkable = set(self.signals.edge_types)
        for source, target, edge_type, source_item, target_item in rows:
            if edge_type == FOLLOWS:
                self.thread_prev[source], self.thread_next[target] = target, source
            elif edge_type == SUPERSEDES:
                if source_item != target_item:
                    self.superseded.add(target)
            if edge_type == CONTRADICTS:
                self.contested.setdefault(target, set()).add(source)
            elif edge_type in linkable:
                for one, other in ((source, target), (target, source)):
                    entries = self.links.setdefault(one, [])
                    if (other, edge_type) not in entries:
                        entries.append((other, edge_type))

    def _base_terms(self, conn: sqlite3.Connection, doc_ids: Sequence[int]) -> dict[int, dict[str, float]]:
        terms: dict[int, dict[str, float]] = {}
        for chunk in self._chunks(list(doc_ids)):
            for doc_id, stored in conn.execute(
                    f"SELECT revision_id, terms FROM doc_terms WHERE revision_id IN ({','.join('?' * len(chunk))})",
                    list(chunk)):
                terms[doc_id] = json.loads(stored)
        return terms

    def _choose_current(self, item_id: int) -> None:
        """Recall's default view of an item: its published revision, else its newest, if live and not
        superseded by another item."""
        space = self.item_space.get(item_id)
        if space is None:
            return
        live = [doc for doc in self.item_docs.get(item_id, []) if doc not in self.doc_deprecated]
        current_set = self.current_by_space.setdefault(space, set())
        live_set = self.live_by_space.setdefault(space, set())
        project_set = self.current_by_project.setdefault(self.space_project[space], set())
        for doc in self.item_docs.get(item_id, []):
            current_set.discard(doc)
            live_set.discard(doc)
            project_set.discard(doc)
        if item_id in self.item_deprecated:
            return
        live_set.update(live)
        published = self.item_published.get(item_id)
        choice = published if published in live else (live[-1] if live else None)
        if choice is not None and choice not in self.superseded:
            current_set.add(choice)
            project_set.add(choice)

    # -- queries ------------------------------------------------------------------------------------------

    def spaces_for(self, project: str, spaces: Sequence[str] | None) -> list[int]:
        """Space ids of ``project`` within any of ``spaces`` (each with its sub-spaces); all when None."""
        chosen = []
        for (space_project, path), space_id in self.space_ids.items():
            if space_project != project:
                continue
            if spaces is None or any(not prefix or path == prefix or path.startswith(prefix + "/")
                                     for prefix in spaces):
                chosen.append(space_id)
        return chosen

    def _nearest(self, vector: Sequence[float], k: int, eligible: Container[int]) -> list[tuple[int, float]]:
        """The ``k`` eligible revisions whose embeddings are closest (cosine) to a unit ``vector``."""
        query = array.array("f", vector)
        vectors = self.vectors
        if isinstance(eligible, (set, frozenset)) and len(eligible) < len(vectors):
            pairs = ((doc_id, vectors[doc_id]) for doc_id in eligible if doc_id in vectors)
        else:
            pairs = ((doc_id, stored) for doc_id, stored in vectors.items() if doc_id in eligible)
        scored = [(doc_id, sum(map(operator.mul, stored, query))) for doc_id, stored in pairs]
        return heapq.nlargest(k, scored, key=lambda pair: pair[1])

    @staticmethod
    def _fuse(lexical: list[tuple[int, float]], semantic: list[tuple[int, float]],
              weight: float) -> list[tuple[int, float]]:
        """Weighted sum of the two channels, each scaled so its best candidate is 1; best first."""
        lexical_top = lexical[0][1] if lexical else 1.0
        semantic_top = semantic[0][1] if semantic and semantic[0][1] > 0 else 1.0
        fused: dict[int, float] = {}
        for doc_id, score in lexical:
            fused[doc_id] = (1.0 - weight) * score / lexical_top
        for doc_id, score in semantic:
            fused[doc_id] = fused.get(doc_id, 0.0) + weight * max(score, 0.0) / semantic_top
        return sorted(fused.items(), key=lambda pair: -pair[1])

    def candidates(self, query: RecallQuery, eligible: Container[int]) -> list[tuple[int, float, dict[str, Any]]]:
        """Score ``eligible`` revisions for a query: words first, then the signals. Best first."""
        signals = self.signals
        extra = {term: EXPANSION_WEIGHT for term in query.expansions if term not in query.terms}
        weights = self.index.term_weights(query.terms + tuple(extra), extra)
        named = {term for term in query.terms if term in self.name_terms} if signals.who else set()
        reorders = bool(named) or (query.time_window is not None and bool(signals.when))
        depth = 2 * query.pool if reorders else query.pool
        hits = self.index.search(weights, depth, eligible)
        if query.query_vector is not None and self.vectors:
            hits = self._fuse(hits, self._nearest(query.query_vector, depth, eligible), query.semantic_weight)
        scores = dict(hits)
        notes: dict[int, dict[str, Any]] = {doc_id: {} for doc_id in scores}
        if signals.neighbour_spread and hits:
            strong = 0.5 * hits[0][1]
            for doc_id, score in hits:
                if score < strong:
                    break
                for neighbour in self._window(doc_id):
                    if neighbour in eligible:
                        scores[neighbour] = scores.get(neighbour, 0.0) + signals.neighbour_spread * score
                        notes.setdefault(neighbour, {}).setdefault("neighbour_of", doc_id)
        if named:
            for doc_id in scores:
                shared = self.doc_who.get(doc_id, frozenset()) & named
                if shared:
                    scores[doc_id] *= 1.0 + signals.who
                    notes[doc_id]["who"] = sorted(shared)
        if query.time_window is not None and signals.when:
            start, end = query.time_window
            for doc_id in scores:
                event = self.doc_event.get(doc_id)
                if event is not None:
                    gap_days = 0.0 if start <= event <= end else min(abs(event - start), abs(event - end)) / 86400.0
                    boost = signals.when * math.exp(-gap_days / max(signals.when_scale_days, 1e-9))
                    if boost > 1e-3:
                        scores[doc_id] *= 1.0 + boost
                        notes[doc_id]["when"] = round(boost, 4)
        if signals.edges and query.follow_edges:
            seeds = heapq.nlargest(signals.edge_seeds, scores.items(), key=lambda pair: pair[1])
            for doc_id, score in seeds:
                for other, edge_type in self.links.get(doc_id, ()):
                    lent = signals.edges * score
                    if other in eligible and lent > scores.get(other, 0.0):
                        if other not in scores:
                            notes[other] = {"graph_augmented": True, "hop": 1}
                        scores[other] = lent
                        notes[other].setdefault("via", {"kref_id": doc_id, "edge_type": edge_type})
        ranked = sorted(scores.items(), key=lambda pair: (-pair[1], -pair[0]))
        for doc_id, _ in ranked:
            challengers = {other for other in self.contested.get(doc_id, ()) if other in self.doc_item}
            if challengers:
                notes.setdefault(doc_id, {})["contested_by_ids"] = sorted(challengers)
        return [(doc_id, score, notes.get(doc_id, {})) for doc_id, score in ranked]


SCHEMA_VERSION = 1
EXPORT_FORMAT = "kumiho-memory-export"
EXPORT_FORMAT_VERSION = 1

_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE spaces (
    project TEXT NOT NULL, path TEXT NOT NULL, created_at TEXT NOT NULL,
    PRIMARY KEY (project, path));
CREATE TABLE items (
    id INTEGER PRIMARY KEY AUTOINCREMENT,     -- ids are never reused: logs and indexes may name old ones
    project TEXT NOT NULL, space TEXT NOT NULL, name TEXT NOT NULL, kind TEXT NOT NULL,
    key TEXT, metadata TEXT NOT NULL, created_at TEXT NOT NULL,
    deprecated INTEGER NOT NULL DEFAULT 0, deprecated_at TEXT,
    last_number INTEGER NOT NULL DEFAULT 0,   -- highest number ever issued: forgotten numbers are not reused
    head_id INTEGER,                          -- the newest existing revision (what 'latest' points at)
    UNIQUE (project, space, name, kind));
CREATE UNIQUE INDEX items_by_key ON items (project, space, key) WHERE key IS NOT NULL;
CREATE INDEX items_by_created ON items (project, created_at);
CREATE TABLE revisions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    item_id INTEGER NOT NULL, number INTEGER NOT NULL,
    title TEXT NOT NULL, content TEXT NOT NULL, metadata TEXT NOT NULL, content_hash TEXT NOT NULL,
    created_at TEXT NOT NULL, deprecated INTEGER NOT NULL DEFAULT 0, deprecated_at TEXT,
    token_count INTEGER NOT NULL DEFAULT 0,
    UNIQUE (item_id, number));
CREATE TABLE artifacts (
    revision_id INTEGER NOT NULL, name TEXT NOT NULL, location TEXT NOT NULL, metadata TEXT NOT NULL,
    created_at TEXT NOT NULL, PRIMARY KEY (revision_id, name));
CREATE TABLE tags (
    item_id INTEGER NOT NULL, tag TEXT NOT NULL, revision_id INTEGER NOT NULL, PRIMARY KEY (item_id, tag));
CREATE INDEX tags_by_revision ON tags (revision_id);
CREATE TABLE tag_events (                   -- every tag move, revision_id NULL = removed (or forgotten)
    id INTEGER PRIMARY KEY, item_id INTEGER NOT NULL, tag TEXT NOT NULL, revision_id INTEGER,
    at TEXT NOT NULL);
CREATE INDEX tag_events_by_time ON tag_events (item_id, tag, at);
CREATE INDEX tag_events_by_revision ON tag_events (revision_id);
CREATE TABLE edges (
    id INTEGER PRIMARY KEY, source_id INTEGER NOT NULL, target_id INTEGER NOT NULL, edge_type TEXT NOT NULL,
    metadata TEXT NOT NULL, created_at TEXT NOT NULL, UNIQUE (source_id, target_id, edge_type));
CREATE INDEX edges_by_target ON edges (target_id);
CREATE TABLE doc_terms (           -- each revision's index terms {term: tf}, JSON: the recall index rebuilds from it
    revision_id INTEGER PRIMARY KEY, terms TEXT NOT NULL);
CREATE TABLE changes (seq INTEGER PRIMARY KEY AUTOINCREMENT, item_id INTEGER NOT NULL);  -- what recall re-reads
CREATE TABLE vectors (revision_id INTEGER PRIMARY KEY, model TEXT NOT NULL, vector BLOB NOT NULL);
CREATE TABLE threads (
    project TEXT NOT NULL, space TEXT NOT NULL, thread TEXT NOT NULL, last_revision_id INTEGER NOT NULL,
    PRIMARY KEY (project, space, thread));
"""

_REVISION_SELECT = """
SELECT r.id, r.number, r.title, r.content, r.metadata, r.created_at, r.deprecated, i.deprecated,
       i.project, i.space, i.name, i.kind, i.head_id
FROM revisions r JOIN items i ON i.id = r.item_id
"""

_ITEM_SELECT = """
SELECT id, project, space, name, kind, key, metadata, created_at, deprecated, last_number, head_id,
       (SELECT number FROM revisions WHERE id = items.head_id) AS head_number
FROM items
"""

_EDGE_SELECT = """
SELECT e.edge_type, e.metadata, e.created_at,
       s.number, si.project, si.space, si.name, si.kind,
       t.number, ti.project, ti.space, ti.name, ti.kind
FROM edges e
JOIN revisions s ON s.id = e.source_id JOIN items si ON si.id = s.item_id
JOIN revisions t ON t.id = e.target_id JOIN items ti ON ti.id = t.item_id
"""


def _busy(exc: sqlite3.Error) -> bool:
    message = str(exc).lower()
    return "locked" in message or "busy" in message


def _space_clause(column: str, space: str | None) -> tuple[str, list[Any]]:
    """SQL matching ``space`` and everything under it (``a`` matches ``a`` and ``a/b``, not ``ab``)."""
    if space is None:
        return "1", []
    if space == "":
        return "1", []
    # '/' sorts just before '0', so [space + '/', space + '0') is exactly the sub-spaces.
    return f"({column} = ? OR ({column} >= ? AND {column} < ?))", [space, space + "/", space + "0"]


class SQLiteGraph(GraphBackend):
    """The embedded engine: SQLite in memory (``path=None``) or in a file (WAL, one transaction per write).

    Safe for many threads (calls are serialized) and many processes on one file (writers take SQLite's
    write lock up front with ``BEGIN IMMEDIATE`` and wait up to ``busy_timeout`` seconds for it).
    ``secure_delete`` and a WAL checkpoint after ``forget`` keep forgotten bytes out of the files.

    Args:
        path: the database file (parent folders are created), or None / ``":memory:"``.
        clock: the time source for ``created_at`` and tag moves.
        busy_timeout: seconds to wait for another process's write lock before ``StoreBusyError``.

    Raises:
        CorruptStoreError: the file is not a database.
        SchemaVersionError: the file was written by a newer schema.
        StoreError: the file cannot be opened or written.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, *, clock: Clock | None = None,
                 busy_timeout: float = 30.0) -> None:
        self.path = ":memory:" if path is None or str(path) == ":memory:" else os.fspath(path)
        self._clock = clock or SystemClock()
        self._busy_timeout = float(busy_timeout)
        self._lock = threading.RLock()
        self._recall: _RecallState | None = None
        self._page_index_checked = False
        self.signals = RecallSignals()
        self._conn: sqlite3.Connection | None = None
        self._conn = self._open()

    # -- connection, transactions, error mapping ----------------------------------------------------------

    @property
    def in_memory(self) -> bool:
        """True when nothing is written to disk."""
        return self.path == ":memory:"

    def _disk_is_full(self) -> bool:
        """Whether the store's file system has no room left (SQLite reports some full disks as I/O errors)."""
        if self.in_memory or not hasattr(os, "statvfs"):
            return False
        try:
            status = os.statvfs(os.path.dirname(os.path.abspath(self.path)))
        except OSError:
            return False
        return status.f_bavail * status.f_frsize < 64 * 1024

    def _store_error(self, exc: sqlite3.Error) -> StoreError:
        message = str(exc)
        lowered = message.lower()
        where = "the in-memory store" if self.in_memory else f"store file {self.path!r}"
        if "not a database" in lowered or "malformed" in lowered:
            return CorruptStoreError(
                f"{where} is not a kumiho_memory database or is damaged ({message}); restore it from a "
                f"backup or an export, or move it aside to start a new store")
        if "readonly" in lowered or "read-only" in lowered:
            return StoreError(f"{where} is read-only ({message}); check the file's and folder's permissions")
        if "full" in lowered or ("disk i/o error" in lowered and self._disk_is_full()):
            return StoreError(f"{where}: the disk is full ({message}); free space and retry")
        if _busy(exc):
            return StoreBusyError(
                f"{where} stayed locked by another process for {self._busy_timeout:g}s ({message}); retry, "
                f"or raise busy_timeout")
        if "unable to open" in lowered:
            return StoreError(f"cannot open {where} ({message}); check that its folder exists and is writable")
        return StoreError(f"{where}: {message}")

    def _open(self) -> sqlite3.Connection:
        if not self.in_memory:
            folder = os.path.dirname(os.path.abspath(self.path))
            try:
                os.makedirs(folder, exist_ok=True)
            except OSError as exc:
                raise StoreError(f"cannot create the folder for store file {self.path!r}: {exc}") from exc
        try:
            conn = sqlite3.connect(self.path, timeout=self._busy_timeout, isolation_level=None,
                                   check_same_thread=False)
        except sqlite3.Error as exc:
            raise self._store_error(exc) from exc
        try:
            conn.execute("PRAGMA secure_delete = ON")
            conn.execute("PRAGMA foreign_keys = OFF")
            conn.execute("PRAGMA schema_version").fetchone()   # fails fast on a file that is not a database
            conn.execute("PRAGMA synchronous = FULL")
            self._conn = conn
            self._ensure_schema()                               # before WAL: a refused file stays untouched
            if not self.in_memory:
                self._retry_busy(lambda: conn.execute("PRAGMA journal_mode = WAL").fetchone())
        except sqlite3.Error as exc:
            conn.close()
            self._conn = None
            raise self._store_error(exc) from exc
        except KumihoMemoryError:
            conn.close()
            self._conn = None
            raise
        return conn

    def _retry_busy(self, operation: Callable[[], Any]) -> Any:
        deadline = time.monotonic() + self._busy_timeout
        delay = 0.005
        while True:
            try:
                return operation()
            except sqlite3.OperationalError as exc:
                if not _busy(exc) or time.monotonic() >= deadline:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 0.1)

    def _ensure_schema(self) -> None:
        """Check that the file is our store (reading only), or create the schema in an empty file."""
        with self._read() as conn:
            empty = self._check_schema(conn)
        if empty:
            with self._write() as conn:
                if self._check_schema(conn):      # another process may have created it meanwhile
                    for statement in _SCHEMA.split(";"):
                        if statement.strip():
                            conn.execute(statement)
                    conn.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
                    conn.execute("INSERT INTO meta VALUES ('created_by', ?)", (f"kumiho_memory {__version__}",))

    def _check_schema(self, conn: sqlite3.Connection) -> bool:
        """True for an empty database; None of ours raises; a newer or foreign one raises."""
        has_meta = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'").fetchone()
        if not has_meta:
            if conn.execute("SELECT count(*) FROM sqlite_master WHERE type = 'table'").fetchone()[0]:
                raise CorruptStoreError(f"store file {self.path!r} is an SQLite database of another program; "
                                        f"choose another path")
            return True
        row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        version = int(row[0]) if row and str(row[0]).isdigit() else None
        if version is None:
            raise CorruptStoreError(f"store file {self.path!r} has no schema version; it was not written by "
                                    f"kumiho_memory")
        if version > SCHEMA_VERSION:
            raise SchemaVersionError(
                f"store file {self.path!r} has schema version {version}, newer than this module's "
                f"{SCHEMA_VERSION}; upgrade kumiho_memory (or open an export with this version)")
        return False

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StoreClosedError("this store is closed")
        return self._conn

    @contextlib.contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction: the write lock is taken up front so read-then-write cannot race."""
        with self._lock:
            conn = self._connection()
            try:
                self._retry_busy(lambda: conn.execute("BEGIN IMMEDIATE"))
            except sqlite3.Error as exc:
                raise self._store_error(exc) from exc
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException as exc:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
                if isinstance(exc, sqlite3.Error):
                    raise self._store_error(exc) from exc
                raise
            self._after_commit()

    def _after_commit(self) -> None:
        """Bring the recall index up to date with what was just written. The write is already durable, so a
        failure here only drops the index, which is rebuilt at the next recall."""
        if self._recall is None:
            return
        try:
            self._connection().execute("BEGIN")
            try:
                self._recall.sync(self._connection())
            finally:
                self._connection().execute("COMMIT")
        except sqlite3.Error:
            self._recall = None

    CHANGE_LOG_KEEP = 100_000     # a process further behind than this rebuilds its recall index instead

    @classmethod
    def _log_change(cls, conn: sqlite3.Connection, *item_ids: int) -> None:
        cursor = conn.executemany("INSERT INTO changes (item_id) VALUES (?)",
                                  [(item_id,) for item_id in dict.fromkeys(item_ids)])
        last = conn.execute("SELECT max(seq) FROM changes").fetchone()[0] or 0
        if cursor.rowcount and last % 10_000 < cursor.rowcount:     # now and then, trim the log
            conn.execute("DELETE FROM changes WHERE seq <= ?", (last - cls.CHANGE_LOG_KEEP,))

    @contextlib.contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        """One read transaction, so multi-query reads see one snapshot."""
        with self._lock:
            conn = self._connection()
            try:
                self._retry_busy(lambda: conn.execute("BEGIN"))
            except sqlite3.Error as exc:
                raise self._store_error(exc) from exc
            try:
                yield conn
            except sqlite3.Error as exc:
                raise self._store_error(exc) from exc
            finally:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("COMMIT")

    def close(self) -> None:
        """Checkpoint the WAL into the main file and close; closing twice is harmless. The checkpoint is
        best effort: it waits at most a second for another connection (the next writer or closer folds the
        WAL in), so closing never hangs on a reader someone left open."""
        with self._lock:
            if self._conn is None:
                return
            with contextlib.suppress(sqlite3.Error):
                if not self.in_memory:
                    self._conn.execute("PRAGMA busy_timeout = 1000")
                    self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            self._conn.close()
            self._conn = None

    def _now(self) -> str:
        return format_instant(self._clock.now())

    # -- row mapping --------------------------------------------------------------------------------------

    def _revision_by_id(self, conn: sqlite3.Connection, revision_id: int) -> RevisionRecord:
        return self._revisions_by_ids(conn, [revision_id])[revision_id]

    @staticmethod
    def _item_from_row(row: Sequence[Any]) -> ItemRecord:
        (_, project, space, name, kind, key, metadata, created_at, deprecated, last_number, _head_id,
         head_number) = row
        return ItemRecord(kref=Kref(project, space, name, kind), key=key, metadata=json.loads(metadata),
                          created_at=created_at, deprecated=bool(deprecated), revision_count=last_number,
                          latest_revision=head_number)

    @staticmethod
    def _edge_from_row(row: Sequence[Any]) -> EdgeRecord:
        edge_type, metadata, created_at = row[:3]
        source = Kref(row[4], row[5], row[6], row[7], revision=row[3])
        target = Kref(row[9], row[10], row[11], row[12], revision=row[8])
        return EdgeRecord(source, target, edge_type, json.loads(metadata), created_at)

    # -- resolution ---------------------------------------------------------------------------------------

    def _item_row(self, conn: sqlite3.Connection, kref: Kref) -> Sequence[Any]:
        row = conn.execute(_ITEM_SELECT + " WHERE project = ? AND space = ? AND name = ? AND kind = ?",
                           (kref.project, kref.space, kref.name, kref.kind)).fetchone()
        if row is None:
            raise NotFoundError(f"no such item: {kref.item_kref()}")
        return row

    def _revision_id(self, conn: sqlite3.Connection, kref: Kref) -> int:
        item_row = self._item_row(conn, kref)
        item_id, head_id = item_row[0], item_row[10]
        if kref.revision is not None:
            row = conn.execute("SELECT id FROM revisions WHERE item_id = ? AND number = ?",
                               (item_id, kref.revision)).fetchone()
            found = row[0] if row else None
        elif kref.tag in (None, LATEST_TAG):
            if kref.time is None:
                found = head_id
            else:
                row = conn.execute(
                    "SELECT id FROM revisions WHERE item_id = ? AND created_at <= ? ORDER BY number DESC "
                    "LIMIT 1", (item_id, format_instant(kref.time))).fetchone()
                found = row[0] if row else None
        elif kref.time is None:
            row = conn.execute("SELECT revision_id FROM tags WHERE item_id = ? AND tag = ?",
                               (item_id, kref.tag)).fetchone()
            found = row[0] if row else None
        else:
            row = conn.execute(
                "SELECT revision_id FROM tag_events WHERE item_id = ? AND tag = ? AND at <= ? "
                "ORDER BY at DESC, id DESC LIMIT 1", (item_id, kref.tag, format_instant(kref.time))).fetchone()
            found = row[0] if row else None
        if found is None:
            raise NotFoundError(f"no revision for {kref}")
        return found

    def resolve(self, kref: Kref) -> RevisionRecord:
        """Return the revision an item kref selects."""
        with self._read() as conn:
            return self._revision_by_id(conn, self._revision_id(conn, kref))

    def item(self, kref: Kref) -> ItemRecord:
        """Return the item a kref is in."""
        with self._read() as conn:
            return self._item_from_row(self._item_row(conn, kref))

    def items(self, project: str, *, space: str | None = None, kind: str | None = None,
              include_deprecated: bool = False) -> list[ItemRecord]:
        """List items of ``project`` in ``space`` (and below), of ``kind``, live unless asked otherwise."""
        clause, params = _space_clause("space", space)
        sql = _ITEM_SELECT + f" WHERE project = ? AND {clause}"
        params = [project, *params]
        if kind is not None:
            sql += " AND kind = ?"
            params.append(kind)
        if not include_deprecated:
            sql += " AND deprecated = 0"
        with self._read() as conn:
            rows = conn.execute(sql + " ORDER BY space, name, kind", params).fetchall()
        return [self._item_from_row(row) for row in rows]

    def item_page(self, project: str, *, space: str | None = None, kind: str | None = None,
                  include_deprecated: bool = False, exclude_kinds: Container[str] = (), limit: int = 50,
                  offset: int = 0) -> tuple[list[ItemRecord], int]:
        """One page of items, newest first, read with LIMIT/OFFSET (and the total by COUNT) along the
        ``items_by_created`` index (added to a store made before it on first use)."""
        self._ensure_page_index()
        clause, params = _space_clause("space", space)
        where = f" WHERE project = ? AND {clause}"
        params = [project, *params]
        if kind is not None:
            where += " AND kind = ?"
            params.append(kind)
        excluded = sorted(exclude_kinds)
        if excluded:
            where += f" AND kind NOT IN ({','.join('?' * len(excluded))})"
            params.extend(excluded)
        if not include_deprecated:
            where += " AND deprecated = 0"
        with self._read() as conn:
            total = conn.execute("SELECT count(*) FROM items" + where, params).fetchone()[0]
            # the page's ids first (a sort over bare columns), then only those rows with their head numbers
            ids = [row[0] for row in conn.execute(
                "SELECT id FROM items" + where + " ORDER BY created_at DESC, space DESC, name DESC, kind DESC "
                "LIMIT ? OFFSET ?", [*params, int(limit), int(offset)])]
            marks = ",".join("?" * len(ids)) or "NULL"
            rows = {row[0]: row for row in conn.execute(_ITEM_SELECT + f" WHERE id IN ({marks})", ids)}
        return [self._item_from_row(rows[item_id]) for item_id in ids if item_id in rows], total

    def _ensure_page_index(self) -> None:
        if self._page_index_checked:
            return
        with self._read() as conn:
            present = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'index' AND name = 'items_by_created'"
                                   ).fetchone()
        if not present:
            with contextlib.suppress(StoreError):        # a read-only file pages without it, just slower
                with self._write() as conn:
                    conn.execute("CREATE INDEX IF NOT EXISTS items_by_created ON items (project, created_at)")
        self._page_index_checked = True

    def item_by_key(self, project: str, space: str, key: str) -> ItemRecord | None:
        """The item holding ``key`` in ``project``/``space``, or None."""
        with self._read() as conn:
            row = conn.execute(_ITEM_SELECT + " WHERE project = ? AND space = ? AND key = ?",
                               (project, space, key)).fetchone()
        return None if row is None else self._item_from_row(row)

    def revisions(self, item: Kref) -> list[RevisionRecord]:
        """Every revision of an item, oldest first."""
        with self._read() as conn:
            item_id = self._item_row(conn, item)[0]
            ids = [row[0] for row in conn.execute("SELECT id FROM revisions WHERE item_id = ? ORDER BY number",
                                                  (item_id,))]
            records = self._revisions_by_ids(conn, ids)
            return [records[revision_id] for revision_id in ids]

    # -- writing revisions --------------------------------------------------------------------------------

    def _ensure_spaces(self, conn: sqlite3.Connection, project: str, space: str, now: str) -> None:
        parts = space.split("/") if space else []
        for depth in range(len(parts) + 1):
            conn.execute("INSERT OR IGNORE INTO spaces VALUES (?, ?, ?)", (project, "/".join(parts[:depth]), now))

    def _create_item(self, conn: sqlite3.Connection, draft: RevisionDraft, now: str) -> int:
        self._ensure_spaces(conn, draft.project, draft.space, now)
        for attempt in itertools.count(1):
            name = draft.name if attempt == 1 else f"{draft.name}-{attempt}"
            taken = conn.execute("SELECT 1 FROM items WHERE project = ? AND space = ? AND name = ? AND kind = ?",
                                 (draft.project, draft.space, name, draft.kind)).fetchone()
            if not taken:
                cursor = conn.execute(
                    "INSERT INTO items (project, space, name, kind, key, metadata, created_at) "
                    "VALUES (?, ?, ?, ?, ?, '{}', ?)", (draft.project, draft.space, name, draft.kind, draft.key, now))
                return int(cursor.lastrowid)
        raise AssertionError("unreachable")  # pragma: no cover

    def write_revision(self, draft: RevisionDraft) -> tuple[RevisionRecord, bool]:
        """Write a revision per ``draft`` in one transaction (see ``RevisionDraft``)."""
        text_hash = content_hash(draft.content)
        with self._write() as conn:
            now = self._now()
            item_row = None
            if draft.item is not None:
                item_row = self._item_row(conn, draft.item)
            elif draft.key is not None:
                item_row = conn.execute(_ITEM_SELECT + " WHERE project = ? AND space = ? AND key = ?",
                                        (draft.project, draft.space, draft.key)).fetchone()
            head_id = item_row[10] if item_row else None
            head_created = None
            if head_id is not None:
                head_hash, head_created = conn.execute(
                    "SELECT content_hash, created_at FROM revisions WHERE id = ?", (head_id,)).fetchone()
                if draft.key is not None and draft.item is None and head_hash == text_hash:
                    return self._revision_by_id(conn, head_id), False
            if item_row is None:
                item_id, number = self._create_item(conn, draft, now), 1
            else:
                item_id, number = item_row[0], item_row[9] + 1
            created_at = max(now, head_created) if head_created else now   # never before its predecessor
            revision_id = int(conn.execute(
                "INSERT INTO revisions (item_id, number, title, content, metadata, content_hash, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (item_id, number, draft.title, draft.content, canonical_json(dict(draft.metadata)), text_hash,
                 created_at)).lastrowid)
            conn.execute("UPDATE items SET last_number = ?, head_id = ? WHERE id = ?", (number, revision_id, item_id))
            if head_id is not None:
                conn.execute("INSERT INTO edges (source_id, target_id, edge_type, metadata, created_at) "
                             "VALUES (?, ?, ?, '{}', ?)", (revision_id, head_id, SUPERSEDES, created_at))
            tags = list(draft.tags)
            if head_id is not None and conn.execute("SELECT 1 FROM tags WHERE item_id = ? AND tag = ?",
                                                    (item_id, PUBLISHED_TAG)).fetchone():
                tags.append(PUBLISHED_TAG)        # a revised published belief stays published
            for tag in dict.fromkeys(tags):
                self._move_tag(conn, item_id, tag, revision_id, created_at)
            self._index(conn, revision_id, draft.title, draft.content, draft.kind)
            if draft.vector is not None:
                conn.execute("INSERT OR REPLACE INTO vectors VALUES (?, ?, ?)",
                             (revision_id, draft.vector_model, array.array("f", draft.vector).tobytes()))
            for artifact_name, location, artifact_metadata in draft.artifacts:
                conn.execute("INSERT OR REPLACE INTO artifacts VALUES (?, ?, ?, ?, ?)",
                             (revision_id, artifact_name, location, canonical_json(dict(artifact_metadata)), created_at))
            changed = [item_id]
            for target, edge_type, edge_metadata in draft.edges:
                target_id = self._revision_id(conn, target)
                conn.execute("INSERT OR IGNORE INTO edges (source_id, target_id, edge_type, metadata, created_at) "
                             "VALUES (?, ?, ?, ?, ?)", (revision_id, target_id, edge_type,
                                                        canonical_json(dict(edge_metadata)), created_at))
                changed.append(conn.execute("SELECT item_id FROM revisions WHERE id = ?", (target_id,)).fetchone()[0])
            if item_row is None and is_message(draft.metadata):
                changed.extend(self._thread(conn, draft, revision_id, created_at))
            self._log_change(conn, *changed)
            return self._revision_by_id(conn, revision_id), True

    def _thread(self, conn: sqlite3.Connection, draft: RevisionDraft, revision_id: int, now: str) -> list[int]:
        """Link a new message to the previous message of its thread (FOLLOWS); return the items touched."""
        thread = thread_key(draft.metadata)
        row = conn.execute("SELECT t.last_revision_id, r.item_id FROM threads t JOIN revisions r "
                           "ON r.id = t.last_revision_id WHERE t.project = ? AND t.space = ? AND t.thread = ?",
                           (draft.project, draft.space, thread)).fetchone()
        conn.execute("INSERT OR REPLACE INTO threads VALUES (?, ?, ?, ?)",
                     (draft.project, draft.space, thread, revision_id))
        if row is None:
            return []
        conn.execute("INSERT OR IGNORE INTO edges (source_id, target_id, edge_type, metadata, created_at) "
                     "VALUES (?, ?, ?, '{}', ?)", (revision_id, row[0], FOLLOWS, now))
        return [row[1]]

    # -- tags ---------------------------------------------------------------------------------------------

    def _record_tag_event(self, conn: sqlite3.Connection, item_id: int, tag: str, revision_id: int | None,
                          now: str) -> None:
        last = conn.execute("SELECT max(at) FROM tag_events WHERE item_id = ? AND tag = ?",
                            (item_id, tag)).fetchone()[0]
        conn.execute("INSERT INTO tag_events (item_id, tag, revision_id, at) VALUES (?, ?, ?, ?)",
                     (item_id, tag, revision_id, max(now, last) if last else now))

    def _move_tag(self, conn: sqlite3.Connection, item_id: int, tag: str, revision_id: int, now: str) -> None:
        row = conn.execute("SELECT revision_id FROM tags WHERE item_id = ? AND tag = ?", (item_id, tag)).fetchone()
        if row and row[0] == revision_id:
            return
        conn.execute("INSERT OR REPLACE INTO tags (item_id, tag, revision_id) VALUES (?, ?, ?)",
                     (item_id, tag, revision_id))
        self._record_tag_event(conn, item_id, tag, revision_id, now)

    def set_tag(self, revision: Kref, tag: str) -> RevisionRecord:
        """Point ``tag`` at a revision, recording the move."""
        with self._write() as conn:
            revision_id = self._revision_id(conn, revision)
            item_id = conn.execute("SELECT item_id FROM revisions WHERE id = ?", (revision_id,)).fetchone()[0]
            self._move_tag(conn, item_id, tag, revision_id, self._now())
            self._log_change(conn, item_id)
            return self._revision_by_id(conn, revision_id)

    def remove_tag(self, revision: Kref, tag: str) -> bool:
        """Remove ``tag`` if this revision carries it, recording the removal."""
        with self._write() as conn:
            revision_id = self._revision_id(conn, revision)
            item_id = conn.execute("SELECT item_id FROM revisions WHERE id = ?", (revision_id,)).fetchone()[0]
            removed = conn.execute("DELETE FROM tags WHERE item_id = ? AND tag = ? AND revision_id = ?",
                                   (item_id, tag, revision_id)).rowcount
            if removed:
                self._record_tag_event(conn, item_id, tag, None, self._now())
                self._log_change(conn, item_id)
            return bool(removed)

    # -- edges --------------------------------------------------------------------------------------------

    def add_edge(self, source: Kref, target: Kref, edge_type: str, metadata: Mapping[str, Any]) -> EdgeRecord:
        """Create the edge unless it exists; either way return it."""
        with self._write() as conn:
            source_id, target_id = self._revision_id(conn, source), self._revision_id(conn, target)
            if source_id == target_id:
                raise InvalidArgumentError(f"an edge joins two different revisions; both ends are {source}")
            conn.execute("INSERT OR IGNORE INTO edges (source_id, target_id, edge_type, metadata, created_at) "
                         "VALUES (?, ?, ?, ?, ?)",
                         (source_id, target_id, edge_type, canonical_json(dict(metadata)), self._now()))
            row = conn.execute(_EDGE_SELECT + " WHERE e.source_id = ? AND e.target_id = ? AND e.edge_type = ?",
                               (source_id, target_id, edge_type)).fetchone()
            self._log_change(conn, *(item for (item,) in conn.execute(
                "SELECT item_id FROM revisions WHERE id IN (?, ?)", (source_id, target_id))))
            return self._edge_from_row(row)

    def edges(self, kref: Kref, *, direction: str = "both", edge_type: str | None = None) -> list[EdgeRecord]:
        """Edges touching one revision, or every revision of the item for a bare item kref."""
        with self._read() as conn:
            if kref.is_bare_item:
                item_id = self._item_row(conn, kref)[0]
                ids_sql, ids_params = "(SELECT id FROM revisions WHERE item_id = ?)", [item_id]
            else:
                ids_sql, ids_params = "(?)", [self._revision_id(conn, kref)]
            clauses = {"outgoing": f"e.source_id IN {ids_sql}", "incoming": f"e.target_id IN {ids_sql}",
                       "both": f"(e.source_id IN {ids_sql} OR e.target_id IN {ids_sql})"}
            params = ids_params * (2 if direction == "both" else 1)
            sql = _EDGE_SELECT + " WHERE " + clauses[direction]
            if edge_type is not None:
                sql += " AND e.edge_type = ?"
                params.append(edge_type)
            return [self._edge_from_row(row) for row in conn.execute(sql + " ORDER BY e.created_at, e.id", params)]

    # -- deprecation and forgetting -----------------------------------------------------------------------

    def set_deprecated(self, kref: Kref, deprecated: bool) -> None:
        """Flag an item (bare kref) or one revision as deprecated, or clear the flag."""
        with self._write() as conn:
            item_id = self._item_row(conn, kref)[0]
            stamp = self._now() if deprecated else None
            # deprecated_at keeps the first deprecation: deprecating again changes nothing.
            sql = ("UPDATE {table} SET deprecated = ?, deprecated_at = CASE WHEN deprecated = 1 AND ? = 1 "
                   "THEN deprecated_at ELSE ? END WHERE id = ?")
            if kref.is_bare_item:
                conn.execute(sql.format(table="items"), (int(deprecated), int(deprecated), stamp, item_id))
            else:
                conn.execute(sql.format(table="revisions"),
                             (int(deprecated), int(deprecated), stamp, self._revision_id(conn, kref)))
            self._log_change(conn, item_id)

    def forget(self, kref: Kref) -> dict[str, Any]:
        """Erase an item or a revision and everything hanging off it, then scrub the WAL."""
        with self._write() as conn:
            item_row = self._item_row(conn, kref)
            item_id = item_row[0]
            if kref.is_bare_item:
                revision_ids = [row[0] for row in conn.execute("SELECT id FROM revisions WHERE item_id = ?",
                                                               (item_id,))]
            else:
                revision_ids = [self._revision_id(conn, kref)]
            marks = ",".join("?" * len(revision_ids)) or "NULL"
            linked_items = [row[0] for row in conn.execute(
                f"SELECT DISTINCT r.item_id FROM edges e JOIN revisions r ON r.id IN (e.source_id, e.target_id) "
                f"WHERE e.source_id IN ({marks}) OR e.target_id IN ({marks})", revision_ids * 2)]
            self._log_change(conn, item_id, *linked_items)
            # A thread whose last message is forgotten continues from the message before it.
            conn.execute(f"UPDATE threads SET last_revision_id = coalesce((SELECT e.target_id FROM edges e WHERE "
                         f"e.source_id = threads.last_revision_id AND e.edge_type = '{FOLLOWS}' AND e.target_id NOT IN "
                         f"({marks})), -1) WHERE last_revision_id IN ({marks})", revision_ids * 2)
            conn.execute("DELETE FROM threads WHERE last_revision_id = -1")
            edge_count = conn.execute(
                f"DELETE FROM edges WHERE source_id IN ({marks}) OR target_id IN ({marks})",
                revision_ids * 2).rowcount
            self._unindex(conn, revision_ids)
            conn.execute(f"DELETE FROM artifacts WHERE revision_id IN ({marks})", revision_ids)
            conn.execute(f"DELETE FROM vectors WHERE revision_id IN ({marks})", revision_ids)
            conn.execute(f"DELETE FROM tags WHERE revision_id IN ({marks})", revision_ids)
            conn.execute(f"DELETE FROM revisions WHERE id IN ({marks})", revision_ids)
            if kref.is_bare_item:
                conn.execute("DELETE FROM tag_events WHERE item_id = ?", (item_id,))
                conn.execute("DELETE FROM items WHERE id = ?", (item_id,))
            else:
                # History keeps that the tag pointed somewhere, but no longer where.
                conn.execute(f"UPDATE tag_events SET revision_id = NULL WHERE revision_id IN ({marks})",
                             revision_ids)
                conn.execute("UPDATE items SET head_id = (SELECT id FROM revisions WHERE item_id = ? "
                             "ORDER BY number DESC LIMIT 1) WHERE id = ?", (item_id, item_id))
        return {"kref": str(kref), "items": int(kref.is_bare_item), "revisions": len(revision_ids),
                "edges": edge_count, "scrubbed": self._scrub()}

    def _scrub(self) -> bool:
        """Move every WAL frame into the main file and truncate the WAL, so freed bytes leave the disk."""
        if self.in_memory:
            return True
        with self._lock:
            conn = self._connection()
            for _ in range(40):
                try:
                    busy = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
                except sqlite3.OperationalError as exc:
                    if not _busy(exc):
                        raise self._store_error(exc) from exc
                    busy = 1
                if not busy:
                    return True
                time.sleep(0.05)
        return False

    def update_metadata(self, revision: Kref, updates: Mapping[str, Any]) -> RevisionRecord:
        """Merge ``updates`` into the revision's metadata in one transaction (``None`` removes a key)."""
        with self._write() as conn:
            revision_id = self._revision_id(conn, revision)
            item_id, raw = conn.execute("SELECT item_id, metadata FROM revisions WHERE id = ?",
                                        (revision_id,)).fetchone()
            metadata = json.loads(raw)
            for key, value in updates.items():
                if value is None:
                    metadata.pop(key, None)
                else:
                    metadata[key] = value
            conn.execute("UPDATE revisions SET metadata = ? WHERE id = ?", (canonical_json(metadata), revision_id))
            self._log_change(conn, item_id)
            return self._revision_by_id(conn, revision_id)

    # -- artifacts ----------------------------------------------------------------------------------------

    def add_artifact(self, revision: Kref, name: str, location: str,
                     metadata: Mapping[str, Any]) -> ArtifactRecord:
        """Attach (or replace) the named artifact of a revision."""
        with self._write() as conn:
            revision_id = self._revision_id(conn, revision)
            now = self._now()
            conn.execute("INSERT OR REPLACE INTO artifacts VALUES (?, ?, ?, ?, ?)",
                         (revision_id, name, location, canonical_json(dict(metadata)), now))
            record = self._revision_by_id(conn, revision_id)
        return ArtifactRecord(record.kref, name, location, dict(metadata), now)

    def artifacts(self, revision: Kref) -> list[ArtifactRecord]:
        """The artifacts of one revision, by name."""
        with self._read() as conn:
            revision_id = self._revision_id(conn, revision)
            record = self._revision_by_id(conn, revision_id)
            rows = conn.execute("SELECT name, location, metadata, created_at FROM artifacts "
                                "WHERE revision_id = ? ORDER BY name", (revision_id,)).fetchall()
        return [ArtifactRecord(record.kref, name, location, json.loads(meta), created)
                for name, location, meta, created in rows]

    def tag_history(self, item: Kref) -> list[tuple[str, int | None, str]]:
        """Every move of every tag of an item, oldest first."""
        with self._read() as conn:
            item_id = self._item_row(conn, item.item_kref())[0]
            rows = conn.execute("SELECT e.tag, r.number, e.at FROM tag_events e LEFT JOIN revisions r ON "
                                "r.id = e.revision_id WHERE e.item_id = ? ORDER BY e.at, e.id", (item_id,)).fetchall()
        return [(tag, number, at) for tag, number, at in rows]

    # -- the lexical index --------------------------------------------------------------------------------

    def _index(self, conn: sqlite3.Connection, revision_id: int, title: str, content: str, kind: str) -> None:
        # Bookkeeping (SYSTEM_KINDS) is never recalled, and must not shift the word statistics of what is.
        terms = [] if kind in SYSTEM_KINDS else tokenize(title + "\n" + content)
        counts: dict[str, int] = {}
        for term in terms:
            counts[term] = counts.get(term, 0) + 1
        conn.execute("INSERT OR REPLACE INTO doc_terms VALUES (?, ?)", (revision_id, canonical_json(counts)))
        conn.execute("UPDATE revisions SET token_count = ? WHERE id = ?", (len(terms), revision_id))

    def _unindex(self, conn: sqlite3.Connection, revision_ids: Sequence[int]) -> None:
        for revision_id in revision_ids:
            conn.execute("DELETE FROM doc_terms WHERE revision_id = ?", (revision_id,))

    def search(self, query: RecallQuery) -> list[ScoredRevision]:
        """Score revisions with the in-memory recall index (built on first use, kept in step after)."""
        with self._read() as conn:
            state = self._recall_state(conn)
            space_ids = state.spaces_for(query.project, query.spaces)
            if query.relative_time is not None:
                newest = max((state.space_newest[i] for i in space_ids if i in state.space_newest), default=None)
                if newest is not None:        # a replayed history's "now" is its newest event, not the clock
                    window = query.relative_time(_dt.datetime.fromtimestamp(newest, UTC))
                    query = dataclasses.replace(query, time_window=window)
            if query.as_of is not None:
                eligible: Container[int] = self._current_at(conn, query.project, query.as_of, state, set(space_ids))
            elif query.spaces is None and not query.include_superseded:
                eligible = state.current_by_project.get(query.project, set())
            else:
                by_space = state.live_by_space if query.include_superseded else state.current_by_space
                sets = [by_space[space_id] for space_id in space_ids if by_space.get(space_id)]
                eligible = sets[0] if len(sets) == 1 else set().union(*sets)
            ranked = state.candidates(query, eligible)[: query.keep or query.pool]
            wanted = {doc_id for doc_id, _, _ in ranked}
            for _, _, notes in ranked:
                wanted.update(notes.get("contested_by_ids", ()))
                if isinstance(notes.get("via"), dict) and "kref_id" in notes["via"]:
                    wanted.add(notes["via"]["kref_id"])
            records = self._revisions_by_ids(conn, sorted(wanted))
            for _, _, notes in ranked:
                if "contested_by_ids" in notes:
                    notes["contested_by"] = [str(records[other].kref) for other in notes.pop("contested_by_ids")
                                             if other in records]
                via = notes.get("via")
                if isinstance(via, dict) and "kref_id" in via:   # signals carry krefs, never an engine row id
                    seed = records.get(via.pop("kref_id"))
                    notes["via"] = {"kref": str(seed.kref), **via} if seed is not None else {**via}
        return [ScoredRevision(records[doc_id], score, notes) for doc_id, score, notes in ranked if doc_id in records]

    def change_token(self, project: str | None = None) -> int:
        """The newest entry of the change log that can change a recall: it moves with every write of a
        memory, from this or another process (bookkeeping items, ``SYSTEM_KINDS``, do not move it; one log
        serves every project)."""
        marks = ",".join("?" * len(SYSTEM_KINDS))
        with self._read() as conn:
            row = conn.execute(f"SELECT c.seq FROM changes c LEFT JOIN items i ON i.id = c.item_id "
                               f"WHERE i.kind IS NULL OR i.kind NOT IN ({marks}) ORDER BY c.seq DESC LIMIT 1",
                               sorted(SYSTEM_KINDS)).fetchone()
        return row[0] if row else 0

    def _recall_state(self, conn: sqlite3.Connection) -> _RecallState:
        """The recall index, built on first use and caught up with other processes' writes."""
        version = conn.execute("PRAGMA data_version").fetchone()[0]
        if self._recall is None or self._recall.signals != self.signals:
            self._recall = _RecallState(self.signals)
            self._recall.load(conn)
        elif self._recall.data_version != version:
            self._recall.sync(conn)
        self._recall.data_version = version
        return self._recall

    def _current_at(self, conn: sqlite3.Connection, project: str, moment: float, state: _RecallState,
                    space_ids: set[int]) -> set[int]:
        """The revision each item of ``project`` showed at ``moment``: published then, else the newest
        then, unless deprecated or superseded by another item by then."""
        stamp = format_instant(_dt.datetime.fromtimestamp(moment, UTC))
        items = {item_id: space for item_id, space in conn.execute(
            "SELECT id, space FROM items WHERE project = ? AND created_at <= ? AND NOT "
            "(deprecated = 1 AND deprecated_at <= ?)", (project, stamp, stamp))}
        deprecated = {row[0] for row in conn.execute(
            "SELECT id FROM revisions WHERE deprecated = 1 AND deprecated_at <= ?", (stamp,))}
        newest = {item_id: doc_id for item_id, doc_id, _ in conn.execute(
            "SELECT item_id, id, max(number) FROM revisions WHERE created_at <= ? AND NOT "
            "(deprecated = 1 AND deprecated_at <= ?) GROUP BY item_id", (stamp, stamp))}
        published = {item_id: doc_id for item_id, doc_id, _ in conn.execute(
            "SELECT item_id, revision_id, max(at) FROM tag_events WHERE tag = ? AND at <= ? GROUP BY item_id",
            (PUBLISHED_TAG, stamp))}
        superseded = {row[0] for row in conn.execute(
            "SELECT e.target_id FROM edges e JOIN revisions s ON s.id = e.source_id JOIN revisions t "
            "ON t.id = e.target_id WHERE e.edge_type = ? AND e.created_at <= ? AND s.item_id != t.item_id",
            (SUPERSEDES, stamp))}
        eligible = set()
        for item_id, space in items.items():
            if state.space_ids.get((project, space)) not in space_ids:
                continue
            choice = published.get(item_id)
            if choice is None or choice in deprecated:
                choice = newest.get(item_id)
            if choice is not None and choice not in superseded:
                eligible.add(choice)
        return eligible

    def _revisions_by_ids(self, conn: sqlite3.Connection, doc_ids: Sequence[int]) -> dict[int, RevisionRecord]:
        """Materialize many revisions with two queries."""
        records: dict[int, RevisionRecord] = {}
        for chunk in _RecallState._chunks(list(doc_ids)):
            marks = ",".join("?" * len(chunk))
            tags: dict[int, list[str]] = {}
            for revision_id, tag in conn.execute(f"SELECT revision_id, tag FROM tags WHERE revision_id IN ({marks})",
                                                 list(chunk)):
                tags.setdefault(revision_id, []).append(tag)
            for row in conn.execute(_REVISION_SELECT + f" WHERE r.id IN ({marks})", list(chunk)):
                (revision_id, number, title, content, metadata, created_at, deprecated, item_deprecated,
                 project, space, name, kind, head_id) = row
                own = tags.get(revision_id, []) + ([LATEST_TAG] if revision_id == head_id else [])
                records[revision_id] = RevisionRecord(
                    kref=Kref.trusted(project, space, name, kind, number), number=number, title=title,
                    content=content, metadata=json.loads(metadata), tags=tuple(sorted(own)), created_at=created_at,
                    deprecated=bool(deprecated or item_deprecated))
        return records

    # -- embeddings ---------------------------------------------------------------------------------------

    def set_vector(self, revision: Kref, model: str, vector: Sequence[float]) -> None:
        """Store a revision's embedding (as float32)."""
        with self._write() as conn:
            revision_id = self._revision_id(conn, revision)
            conn.execute("INSERT OR REPLACE INTO vectors VALUES (?, ?, ?)",
                         (revision_id, model, array.array("f", vector).tobytes()))
            self._log_change(conn, self._item_row(conn, revision)[0])

    def revisions_without_vector(self, project: str, limit: int) -> list[RevisionRecord]:
        """Revisions of ``project`` with no stored embedding, oldest first."""
        with self._read() as conn:
            ids = [row[0] for row in conn.execute(
                "SELECT r.id FROM revisions r JOIN items i ON i.id = r.item_id LEFT JOIN vectors v "
                "ON v.revision_id = r.id WHERE i.project = ? AND v.revision_id IS NULL ORDER BY r.id LIMIT ?",
                (project, limit))]
            records = self._revisions_by_ids(conn, ids)
        return [records[revision_id] for revision_id in ids if revision_id in records]

    # -- stats --------------------------------------------------------------------------------------------

    def stats(self, project: str) -> dict[str, Any]:
        """Counts for one project, plus the store's path and schema version."""
        with self._read() as conn:
            def count(sql: str) -> int:
                return int(conn.execute(sql, (project,)).fetchone()[0])
            in_project = "(SELECT id FROM items WHERE project = ?)"
            return {
                "project": project,
                "items": count("SELECT count(*) FROM items WHERE project = ?"),
                "revisions": count(f"SELECT count(*) FROM revisions WHERE item_id IN {in_project}"),
                "edges": count("SELECT count(*) FROM edges WHERE source_id IN "
                               f"(SELECT id FROM revisions WHERE item_id IN {in_project})"),
                "spaces": count("SELECT count(*) FROM spaces WHERE project = ? AND path != ''"),
                "tags": count(f"SELECT count(*) FROM tags WHERE item_id IN {in_project}"),
                "deprecated_items": count("SELECT count(*) FROM items WHERE project = ? AND deprecated = 1"),
                "deprecated_revisions": count(
                    f"SELECT count(*) FROM revisions WHERE deprecated = 1 AND item_id IN {in_project}"),
                "backend": "sqlite", "path": self.path, "schema_version": SCHEMA_VERSION,
            }

    # -- export and import --------------------------------------------------------------------------------

    def export_records(self) -> Iterator[dict[str, Any]]:
        """Yield the whole store from one snapshot: header, spaces, items with their revisions, artifacts
        and tag history, then edges. Sorted by address, so equal stores export byte-identically."""
        with self._read() as conn:
            yield {"record": "header", "format": EXPORT_FORMAT, "format_version": EXPORT_FORMAT_VERSION}
            for project, path, created_at in conn.execute(
                    "SELECT project, path, created_at FROM spaces ORDER BY project, path").fetchall():
                yield {"record": "space", "project": project, "path": path, "created_at": created_at}
            items = conn.execute("SELECT id, project, space, name, kind, key, metadata, created_at, deprecated, "
                                 "last_number FROM items ORDER BY project, space, name, kind")
            for item_id, project, space, name, kind, key, metadata, created_at, deprecated, last in items:
                item_kref = Kref(project, space, name, kind)
                yield {"record": "item", "item_kref": str(item_kref), "key": key, "metadata": json.loads(metadata),
                       "created_at": created_at, "deprecated": bool(deprecated), "last_number": last}
                revisions = conn.execute("SELECT number, title, content, metadata, created_at, deprecated "
                                         "FROM revisions WHERE item_id = ? ORDER BY number", (item_id,))
                for number, title, content, rev_meta, rev_created, rev_deprecated in revisions:
                    yield {"record": "revision", "kref": str(item_kref.with_revision(number)), "title": title,
                           "content": content, "metadata": json.loads(rev_meta), "created_at": rev_created,
                           "deprecated": bool(rev_deprecated)}
                artifacts = conn.execute(
                    "SELECT r.number, a.name, a.location, a.metadata, a.created_at FROM artifacts a "
                    "JOIN revisions r ON r.id = a.revision_id WHERE r.item_id = ? ORDER BY r.number, a.name",
                    (item_id,))
                for number, art_name, location, art_meta, art_created in artifacts:
                    yield {"record": "artifact", "revision_kref": str(item_kref.with_revision(number)),
                           "name": art_name, "location": location, "metadata": json.loads(art_meta),
                           "created_at": art_created}
                events = conn.execute(
                    "SELECT e.tag, r.number, e.at FROM tag_events e LEFT JOIN revisions r ON r.id = e.revision_id "
                    "WHERE e.item_id = ? ORDER BY e.at, e.id", (item_id,))
                for tag, number, at in events:
                    yield {"record": "tag_event", "item_kref": str(item_kref), "tag": tag, "revision": number,
                           "at": at}
            edges = conn.execute(_EDGE_SELECT + " ORDER BY si.project, si.space, si.name, si.kind, s.number, "
                                 "ti.project, ti.space, ti.name, ti.kind, t.number, e.edge_type")
            for row in edges:
                yield {"record": "edge", **self._edge_from_row(row).to_dict()}

    def import_records(self, records: Iterable[tuple[int, dict[str, Any]]],
                       progress: Callable[[int], None] | None = None) -> dict[str, int]:
        """Load an export in one transaction: all of it, or (on any error) none of it."""
        counts = {"records": 0, "added": 0, "skipped": 0}
        importers = {"header": self._import_header, "space": self._import_space, "item": self._import_item,
                     "revision": self._import_revision, "artifact": self._import_artifact,
                     "tag_event": self._import_tag_event, "edge": self._import_edge}
        with self._write() as conn:
            touched_tags: set[tuple[int, str]] = set()
            touched_items: set[int] = set()
            for line_number, record in records:
                kind = record.get("record") if isinstance(record, dict) else None
                if counts["records"] == 0 and kind != "header":
                    raise ImportFormatError(f"line {line_number}: an export starts with a header record")
                if not isinstance(kind, str) or kind not in importers:
                    raise ImportFormatError(f"line {line_number}: unknown record type {kind!r}")
                try:
                    added = importers[kind](conn, record, touched_items, touched_tags)
                except ConflictError as exc:
                    raise ConflictError(f"line {line_number}: {exc}") from exc
                except NotFoundError as exc:
                    raise ImportFormatError(f"line {line_number}: refers to something not yet defined: {exc}") \
                        from exc
                except (InvalidArgumentError, KeyError, TypeError, ValueError) as exc:
                    raise ImportFormatError(f"line {line_number}: bad {kind} record: {exc}") from exc
                counts["records"] += 1
                if kind != "header":
                    counts["added" if added else "skipped"] += 1
                if progress is not None:
                    progress(counts["records"])
            for item_id, tag in touched_tags:
                row = conn.execute("SELECT revision_id FROM tag_events WHERE item_id = ? AND tag = ? "
                                   "ORDER BY at DESC, id DESC LIMIT 1", (item_id, tag)).fetchone()
                if row and row[0] is not None:
                    conn.execute("INSERT OR REPLACE INTO tags VALUES (?, ?, ?)", (item_id, tag, row[0]))
                else:
                    conn.execute("DELETE FROM tags WHERE item_id = ? AND tag = ?", (item_id, tag))
            for item_id in touched_items:
                conn.execute("UPDATE items SET head_id = (SELECT id FROM revisions WHERE item_id = ? "
                             "ORDER BY number DESC LIMIT 1) WHERE id = ?", (item_id, item_id))
            self._log_change(conn, *sorted(touched_items | {item_id for item_id, _ in touched_tags}))
            self._continue_threads(conn, touched_items)
        return counts

    @staticmethod
    def _continue_threads(conn: sqlite3.Connection, item_ids: Iterable[int]) -> None:
        """Point each imported conversation thread at its newest message, so the next message remembered
        in it is linked (FOLLOWS) to the imported ones."""
        newest: dict[tuple[str, str, str], tuple[str, int]] = {}
        for chunk in _RecallState._chunks(sorted(item_ids)):
            rows = conn.execute(
                "SELECT r.id, r.metadata, r.created_at, i.project, i.space FROM revisions r JOIN items i "
                f"ON i.id = r.item_id WHERE i.id IN ({','.join('?' * len(chunk))})", list(chunk)).fetchall()
            for revision_id, metadata, created_at, project, space in rows:
                meta = json.loads(metadata)
                if is_message(meta):       # import order follows names, so "newest" goes by time
                    key = (project, space, thread_key(meta))
                    newest[key] = max(newest.get(key, ("", 0)), (created_at, revision_id))
        for (project, space, thread), (created_at, revision_id) in newest.items():
            row = conn.execute("SELECT r.created_at FROM threads t JOIN revisions r ON r.id = t.last_revision_id "
                               "WHERE t.project = ? AND t.space = ? AND t.thread = ?", (project, space, thread)).fetchone()
            if row is None or row[0] <= created_at:
                conn.execute("INSERT OR REPLACE INTO threads VALUES (?, ?, ?, ?)", (project, space, thread, revision_id))

    @staticmethod
    def _import_header(conn: sqlite3.Connection, record: dict[str, Any], *_: Any) -> bool:
        _read_header(record)
        return False

    def _import_space(self, conn: sqlite3.Connection, record: dict[str, Any], *_: Any) -> bool:
        project = _check_pattern(record["project"], SEGMENT_PATTERN, "project", InvalidArgumentError)
        path = normalize_space(record["path"])
        return bool(conn.execute("INSERT OR IGNORE INTO spaces VALUES (?, ?, ?)",
                                 (project, path, _record_instant(record, "created_at"))).rowcount)

    def _import_item(self, conn: sqlite3.Connection, record: dict[str, Any], touched_items: set[int],
                     *_: Any) -> bool:
        kref, key, metadata, last_number, created_at = _read_item(record)
        row = conn.execute("SELECT id, key FROM items WHERE project = ? AND space = ? AND name = ? AND kind = ?",
                           (kref.project, kref.space, kref.name, kref.kind)).fetchone()
        if row:
            if row[1] != key:
                raise ConflictError(f"{kref} exists here with key {row[1]!r}, the import says {key!r}")
            conn.execute("UPDATE items SET last_number = max(last_number, ?) WHERE id = ?", (last_number, row[0]))
            touched_items.add(row[0])
            return False
        if key is not None and conn.execute("SELECT 1 FROM items WHERE project = ? AND space = ? AND key = ?",
                                            (kref.project, kref.space, key)).fetchone():
            raise ConflictError(f"key {key!r} is held by another item in {kref.project}/{kref.space}")
        self._ensure_spaces(conn, kref.project, kref.space, created_at)
        cursor = conn.execute(
            "INSERT INTO items (project, space, name, kind, key, metadata, created_at, deprecated, last_number) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (kref.project, kref.space, kref.name, kref.kind, key, canonical_json(metadata), created_at,
             int(bool(record.get("deprecated"))), last_number))
        touched_items.add(int(cursor.lastrowid))
        return True

    def _import_revision(self, conn: sqlite3.Connection, record: dict[str, Any], touched_items: set[int],
                         *_: Any) -> bool:
        kref, title, content, metadata_object, created_at = _read_revision(record)
        item_id = self._item_row(conn, kref)[0]
        metadata = canonical_json(metadata_object)
        existing = conn.execute("SELECT title, content, metadata, created_at FROM revisions "
                                "WHERE item_id = ? AND number = ?", (item_id, kref.revision)).fetchone()
        if existing:
            if tuple(existing) != (title, content, metadata, created_at):
                raise ConflictError(f"{kref} exists here with different content; revisions are immutable")
            return False
        revision_id = int(conn.execute(
            "INSERT INTO revisions (item_id, number, title, content, metadata, content_hash, created_at, deprecated) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (item_id, kref.revision, title, content, metadata, content_hash(content), created_at,
             int(bool(record.get("deprecated"))))).lastrowid)
        conn.execute("UPDATE items SET last_number = max(last_number, ?) WHERE id = ?", (kref.revision, item_id))
        self._index(conn, revision_id, title, content, kref.kind)
        touched_items.add(item_id)
        return True

    def _import_artifact(self, conn: sqlite3.Connection, record: dict[str, Any], *_: Any) -> bool:
        kref, name, location, metadata, created_at = _read_artifact(record)
        revision_id = self._revision_id(conn, kref)
        return bool(conn.execute("INSERT OR IGNORE INTO artifacts VALUES (?, ?, ?, ?, ?)",
                                 (revision_id, name, location, canonical_json(metadata), created_at)).rowcount)

    def _import_tag_event(self, conn: sqlite3.Connection, record: dict[str, Any], _items: set[int],
                          touched_tags: set[tuple[int, str]]) -> bool:
        kref = _record_kref(record, "item_kref", bare=True)
        tag = validate_tag(record["tag"])
        item_id = self._item_row(conn, kref)[0]
        number = record.get("revision")
        revision_id = None
        if number is not None:
            revision_id = self._revision_id(conn, _record_kref({"kref": str(kref.with_revision(number))}, "kref",
                                                               revision=True))
        at = _record_instant(record, "at")
        touched_tags.add((item_id, tag))
        if conn.execute("SELECT 1 FROM tag_events WHERE item_id = ? AND tag = ? AND revision_id IS ? AND at = ?",
                        (item_id, tag, revision_id, at)).fetchone():
            return False
        conn.execute("INSERT INTO tag_events (item_id, tag, revision_id, at) VALUES (?, ?, ?, ?)",
                     (item_id, tag, revision_id, at))
        return True

    def _import_edge(self, conn: sqlite3.Connection, record: dict[str, Any], *_: Any) -> bool:
        source_id = self._revision_id(conn, _record_kref(record, "source_kref", revision=True))
        target_id = self._revision_id(conn, _record_kref(record, "target_kref", revision=True))
        if source_id == target_id:
            raise InvalidArgumentError("an edge joins two different revisions")
        edge_type = validate_edge_type(record["edge_type"])
        return bool(conn.execute(
            "INSERT OR IGNORE INTO edges (source_id, target_id, edge_type, metadata, created_at) "
            "VALUES (?, ?, ?, ?, ?)",
            (source_id, target_id, edge_type, canonical_json(_record_object(record, "metadata")),
             _record_instant(record, "created_at"))).rowcount)


def _record_kref(record: Mapping[str, Any], field: str, *, bare: bool = False, revision: bool = False) -> Kref:
    kref = parse_item_kref(record[field], field)
    if bare and not kref.is_bare_item:
        raise InvalidArgumentError(f"{field} must be an item kref without a selector")
    if revision and (kref.revision is None or kref.tag is not None or kref.artifact is not None):
        raise InvalidArgumentError(f"{field} must be a revision kref (…?r=N)")
    return kref


def _record_object(record: Mapping[str, Any], field: str) -> dict[str, Any]:
    value = record.get(field, {})
    if not isinstance(value, dict):
        raise InvalidArgumentError(f"{field} must be a JSON object")
    return value


def _record_instant(record: Mapping[str, Any], field: str) -> str:
    value = record[field]
    if not isinstance(value, str):
        raise InvalidArgumentError(f"{field} must be an ISO 8601 string")
    return format_instant(parse_instant(value))


# What an export record says, checked the same way whichever backend imports it.

def _read_header(record: Mapping[str, Any]) -> None:
    if record.get("format") != EXPORT_FORMAT:
        raise InvalidArgumentError(f"not a {EXPORT_FORMAT} stream")
    version = record.get("format_version")
    if not isinstance(version, int) or version > EXPORT_FORMAT_VERSION:
        raise InvalidArgumentError(f"format_version {version!r} is newer than this module reads "
                                   f"({EXPORT_FORMAT_VERSION}); upgrade kumiho_memory")


def _read_item(record: Mapping[str, Any]) -> tuple[Kref, str | None, dict[str, Any], int, str]:
    """``(kref, key, metadata, last_number, created_at)`` of an item record."""
    kref = _record_kref(record, "item_kref", bare=True)
    key = record.get("key")
    if key is not None and not isinstance(key, str):
        raise InvalidArgumentError("key must be a string or null")
    last_number = record["last_number"]
    if not isinstance(last_number, int) or last_number < 0:
        raise InvalidArgumentError("last_number must be a non-negative integer")
    return kref, key, _record_object(record, "metadata"), last_number, _record_instant(record, "created_at")


def _read_revision(record: Mapping[str, Any]) -> tuple[Kref, str, str, dict[str, Any], str]:
    """``(kref, title, content, metadata, created_at)`` of a revision record."""
    kref = _record_kref(record, "kref", revision=True)
    title, content = record["title"], record["content"]
    if not isinstance(title, str) or not isinstance(content, str):
        raise InvalidArgumentError("title and content must be strings")
    metadata = _record_object(record, "metadata")
    canonical_json(metadata)
    return kref, title, content, metadata, _record_instant(record, "created_at")


def _read_artifact(record: Mapping[str, Any]) -> tuple[Kref, str, str, dict[str, Any], str]:
    """``(revision kref, name, location, metadata, created_at)`` of an artifact record."""
    kref = _record_kref(record, "revision_kref", revision=True)
    name = _check_pattern(record["name"], ARTIFACT_PATTERN, "artifact name", InvalidArgumentError)
    location = record["location"]
    if not isinstance(location, str):
        raise InvalidArgumentError("location must be a string")
    return kref, name, location, _record_object(record, "metadata"), _record_instant(record, "created_at")


# -- the Kumiho graph server, through the kumiho SDK ------------------------------------------------------

_KM = "kumiho_memory."            # prefix of the metadata keys and attributes this module keeps on the server
_KM_META = _KM + "metadata"       # the JSON of our metadata (server metadata maps hold strings only)
_KM_CREATED = _KM + "created_at"  # an imported record's original timestamp (the server stamps its own)
_KM_HASH = _KM + "content_hash"
_KM_VECTOR = _KM + "vector"       # float32 embedding, hex
_KM_VECTOR_MODEL = _KM + "vector_model"
_KM_KEY = _KM + "key"             # an item's supersession key
_KM_LAST = _KM + "last_number"    # highest revision number an import says was ever issued
_KM_TAGS = _KM + "tag_events"     # an item's tag history, JSON [[tag, number | null, at], ...]
_KM_DEPRECATIONS = _KM + "deprecations"   # an item's deprecation history, JSON [[number | null, flag, at], ...]
_KM_CHANGE = _KM + "change"       # a project's change mark: a fresh random value after every write
_KM_WRITE = _KM + "write_id"      # a revision's write id: a retried create finds the one that was applied
_TRANSIENT_CODES = ("UNAVAILABLE", "DEADLINE_EXCEEDED", "INTERNAL", "RESOURCE_EXHAUSTED", "ABORTED")


def _server_instant(text: str) -> str:
    """A server timestamp in the store's form (UTC, microseconds, ``Z``); unreadable text passes through."""
    try:
        return format_instant(parse_instant(text))
    except InvalidArgumentError:
        return text


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:40]


class KumihoBackend(GraphBackend):
    """The Kumiho graph server as a ``GraphBackend``, driven through the official ``kumiho`` SDK (gRPC).

    Projects, spaces, items, revisions, tags, edges, artifacts and krefs are the server's own: a kref this
    backend returns is the server's kref, revision numbers come from the server, ``latest`` is the server's,
    deprecation is the server's flag and ``forget`` its forced deletes. What the server's string-only
    metadata cannot hold is kept in keys prefixed ``kumiho_memory.`` (the metadata JSON, an item's key and
    tag history, imported timestamps, embeddings); revision metadata also carries plain ``title`` and
    ``content`` for other clients.

    Args:
        endpoint: ``host:port`` (plain gRPC; loopback only without TLS, the SDK warns otherwise),
            ``https://host`` or ``grpcs://host:port`` (TLS). Default ``$KUMIHO_SERVER_ENDPOINT``, then
            ``localhost:8080``. The SDK's TLS variables (``KUMIHO_SERVER_USE_TLS``, ``KUMIHO_SERVER_CA_FILE``,
            ``KUMIHO_SERVER_AUTHORITY``, ``KUMIHO_SSL_TARGET_OVERRIDE``) apply.
        token: the bearer token, sent as ``authorization: Bearer``; default ``$KUMIHO_AUTH_TOKEN``. It never
            appears in an error, a log line or a repr.
        client: an SDK client (``kumiho.connect(...)``) to use instead of making one; it is left as given.
        retries: extra attempts for a transient failure (UNAVAILABLE, DEADLINE_EXCEEDED, ...), with a short
            backoff; the SDK's own retry loop is set to one attempt so the bound is this one.
        timeout: seconds each call may take.
        clock: the time source for tag-history entries (the server stamps everything else).
        ids: the id source for idempotency keys and change marks (default random).
        search_pool: how many candidates recall asks the server's search for, per space searched.

    Environment variables are read here and only here. Nothing connects until the first call.

    What degrades compared with the embedded engine (documented in the README):
        - writes are several calls, not one transaction: a failure part-way is undone as far as the
          server still answers, and a write the server never acknowledged raises ``GraphServiceError``;
        - recall gathers candidates with the server's search, then ranks them here with the same BM25,
          who/when boosts, edges and evidence weights: word statistics come from the candidates (not the
          whole store), and a message does not borrow its thread neighbours' words;
        - the server's deprecation flag has no time, so this backend keeps a deprecation history on the item
          for ``as_of`` recall; something deprecated by another client counts as deprecated at every instant;
        - ``t=TAG&time=T`` asks the server first; tag history imported from another store (which the server
          cannot backdate) is answered from the history this backend keeps on the item;
        - ``forget`` reports ``scrubbed: None``: whether deleted bytes leave the server's disks is the server's
          business;
        - anticipatory recall notices other clients' writes through a change mark this module's writes set
          on the project (``change_token``); a client that writes without this module is not noticed.
    """

    def __init__(self, endpoint: str | None = None, token: str | None = None, *, client: Any = None,
                 retries: int = 2, timeout: float = 10.0, clock: Clock | None = None,
                 search_pool: int = 100, environ: Mapping[str, str] | None = None,
                 ids: IdFactory | None = None) -> None:
        environ = os.environ if environ is None else environ
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise InvalidArgumentError(f"retries must be a non-negative integer, not {retries!r}")
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
            raise InvalidArgumentError(f"timeout must be a positive number, not {timeout!r}")
        self.endpoint = (endpoint or environ.get("KUMIHO_SERVER_ENDPOINT") or "localhost:8080").strip()
        self.address = _redact_endpoint(self.endpoint)   # no `path`: Memory reads `path` as a store file
        self.__token = token if token is not None else environ.get("KUMIHO_AUTH_TOKEN", "")
        self._retries = retries
        self._timeout = float(timeout)
        self._clock = clock or SystemClock()
        self._ids = ids or RandomIds()
        self.announce_failures = 0
        self._search_pool = max(1, int(search_pool))
        self._batch_reads = True
        self._client = client
        self._own_client = client is None
        self._closed = False
        self._lock = threading.RLock()
        self._known_spaces: set[str] = set()
        self.signals = RecallSignals()
        self._pb: Any = None
        self._grpc: Any = None

    def __repr__(self) -> str:
        return f"KumihoBackend({self.address!r})"

    # -- the connection and the error mapping ---------------------------------------------------------------

    def _connect(self) -> Any:
        if self._closed:
            raise StoreClosedError("this Kumiho backend is closed")
        if self._pb is None:
            kumiho = _require("kumiho", extra="kumiho", package="kumiho>=0.14,<0.15")
            self._grpc = _require("grpc", extra="kumiho", package="kumiho>=0.14,<0.15")
            self._pb = importlib.import_module("kumiho.proto.kumiho_pb2")
            if self._client is None:
                try:
                    self._client = kumiho.connect(self.endpoint, token=self.__token or "", enable_auto_login=False,
                                                  use_discovery=False)
                except ValueError as exc:
                    raise InvalidArgumentError(f"bad Kumiho endpoint {self.address!r}: "
                                               f"{self._mask(str(exc))}") from None
                self._single_sdk_attempt(self._client)
        return self._client

    @staticmethod
    def _single_sdk_attempt(client: Any) -> None:
        """Set the SDK's transient-retry interceptor to one attempt: ``retries`` is the only retry loop."""
        channel = getattr(client, "channel", None)
        for _ in range(16):
            interceptor = getattr(channel, "_interceptor", None)
            if interceptor is None:
                return
            if hasattr(interceptor, "max_attempts"):
                interceptor.max_attempts = 1
            channel = getattr(channel, "_channel", None)

    def _mask(self, text: str) -> str:
        token = self.__token
        if token:
            text = text.replace(token, "[redacted]")
        return text

    def _error(self, exc: Any, rpc: str) -> KumihoMemoryError:
        code = exc.code() if callable(getattr(exc, "code", None)) else None
        name = getattr(code, "name", "UNKNOWN")
        details = exc.details() if callable(getattr(exc, "details", None)) else ""
        details = self._mask(str(details or ""))
        message = f"Kumiho server {self.address}: {rpc} failed ({name}): {details}"
        if name == "NOT_FOUND":
            return NotFoundError(message)
        if name in ("INVALID_ARGUMENT", "OUT_OF_RANGE"):
            return InvalidArgumentError(message)
        if name in ("ALREADY_EXISTS", "FAILED_PRECONDITION"):
            return ConflictError(message)
        if name in ("UNAUTHENTICATED", "PERMISSION_DENIED"):
            return GraphServiceError(message + " (check the token)", transient=False, code=name)
        return GraphServiceError(message, transient=name in _TRANSIENT_CODES, code=name)

    def _call(self, rpc: str, request: Any, *, idempotent: bool = True, metadata: Sequence[tuple[str, str]] = (),
              retries: int | None = None) -> Any:
        """One RPC with bounded retries: transient failures are retried (a non-idempotent call only on
        UNAVAILABLE, when the server cannot have acted), everything else is mapped at once. ``retries``
        overrides the backend's count (0: the caller decides)."""
        with self._lock:
            client = self._connect()
        method = getattr(client.stub, rpc)
        delay = 0.05
        retries = self._retries if retries is None else retries
        for attempt in range(retries + 1):
            try:
                if metadata:
                    return method(request, timeout=self._timeout, metadata=tuple(metadata))
                return method(request, timeout=self._timeout)
            except self._grpc.RpcError as exc:
                error = self._error(exc, rpc)
                code = getattr(error, "code", None)
                retry = isinstance(error, GraphServiceError) and error.transient and (idempotent or code == "UNAVAILABLE")
                if not retry or attempt == retries:
                    raise error from None
            time.sleep(delay)
            delay = min(delay * 4, 1.0)
        raise AssertionError("unreachable")  # pragma: no cover

    def close(self) -> None:
        """Close the channel (a client passed in is left open); later calls raise ``StoreClosedError``."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._own_client and self._client is not None:
                with contextlib.suppress(Exception):
                    self._client.close()
            self._client = None

    # -- addresses ------------------------------------------------------------------------------------------

    @staticmethod
    def _space_path(project: str, space: str) -> str:
        return "/" + project + ("/" + space if space else "")

    @staticmethod
    def _space_kref(project: str, space: str) -> str:
        return KREF_SCHEME + project + ("/" + space if space else "")

    # Other clients' writes: every write of this module sets a fresh random value on the project's attribute
    # ``kumiho_memory.change``, so a reader that saw another value knows something changed (two writers at
    # once still leave a value neither reader saw). Bookkeeping (``SYSTEM_KINDS``) does not announce itself.

    def change_token(self, project: str | None = None) -> Any:
        """The project's change mark (see above); None without a project, ``""`` before any write."""
        if project is None:
            return None
        try:
            response = self._call("GetAttribute", self._pb.GetAttributeRequest(
                kref=self._pb_kref(self._space_kref(project, "")), key=_KM_CHANGE))
        except NotFoundError:
            return ""
        return response.value

    def _announce(self, project: str, kind: str | None = None) -> None:
        """Move the project's change mark after a write. The write already happened: a failure here must not
        make it look failed (a retry would write it twice), so it is counted in ``announce_failures``."""
        if kind in SYSTEM_KINDS:
            return
        try:
            self._set_attribute(self._space_kref(project, ""), _KM_CHANGE, self._ids.new_id() + self._ids.new_id())
        except KumihoMemoryError:
            self.announce_failures += 1

    def _pb_kref(self, uri: str) -> Any:
        return self._pb.Kref(uri=uri)

    def _kref_of(self, uri: str) -> Kref:
        """Our Kref for a server kref string."""
        try:
            return Kref.parse(uri)
        except InvalidKrefError as exc:
            raise GraphServiceError(f"Kumiho server {self.address} returned a kref this module cannot read: "
                                    f"{uri!r} ({exc})", transient=False) from None

    def _ensure_space(self, project: str, space: str) -> None:
        """Create the project and every space down to ``space`` (get-or-create: ALREADY_EXISTS is fine)."""
        path = self._space_path(project, space)
        if path in self._known_spaces:
            return
        self._connect()
        try:
            self._call("CreateProject", self._pb.CreateProjectRequest(name=project))
        except ConflictError:
            pass
        parts = space.split("/") if space else []
        for depth in range(len(parts)):
            parent = self._space_path(project, "/".join(parts[:depth]))
            try:
                self._call("CreateSpace", self._pb.CreateSpaceRequest(parent_path=parent, space_name=parts[depth],
                                                                      exists_error=False))
            except ConflictError:
                pass
        self._known_spaces.add(path)

    # -- decoding -------------------------------------------------------------------------------------------

    @staticmethod
    def _json_field(metadata: Mapping[str, str], key: str, default: Any) -> Any:
        raw = metadata.get(key)
        if raw is None:
            return default
        try:
            return json.loads(raw)
        except ValueError:
            return default

    def _user_metadata(self, metadata: Mapping[str, str], *, plain_skip: Container[str] = ()) -> dict[str, Any]:
        """Our metadata back from a server map: the JSON we wrote, or (written by another client) its plain
        string entries."""
        if _KM_META in metadata:
            value = self._json_field(metadata, _KM_META, {})
            return value if isinstance(value, dict) else {}
        return {key: value for key, value in metadata.items() if not key.startswith(_KM) and key not in plain_skip}

    def _created(self, metadata: Mapping[str, str], server_value: str) -> str:
        return metadata.get(_KM_CREATED) or _server_instant(server_value)

    def _record(self, rev: Any, item_deprecated: bool) -> RevisionRecord:
        metadata = dict(rev.metadata)
        kref = self._kref_of(rev.item_kref.uri).with_revision(rev.number)
        tags = {tag for tag in rev.tags if tag != LATEST_TAG}
        if rev.latest:
            tags.add(LATEST_TAG)
        return RevisionRecord(kref=kref, number=rev.number, title=metadata.get("title", ""),
                              content=metadata.get("content", ""),
                              metadata=self._user_metadata(metadata, plain_skip=("title", "content")),
                              tags=tuple(sorted(tags)), created_at=self._created(metadata, rev.created_at),
                              deprecated=bool(rev.deprecated or item_deprecated))

    def _edge_record(self, edge: Any) -> EdgeRecord:
        metadata = dict(edge.metadata)
        return EdgeRecord(self._kref_of(edge.source_kref.uri), self._kref_of(edge.target_kref.uri), edge.edge_type,
                          self._user_metadata(metadata), self._created(metadata, edge.created_at))

    def _artifact_record(self, art: Any) -> ArtifactRecord:
        metadata = dict(art.metadata)
        return ArtifactRecord(self._kref_of(art.revision_kref.uri), art.name, art.location,
                              self._user_metadata(metadata), self._created(metadata, art.created_at))

    # -- reading ----------------------------------------------------------------------------------------------

    def _get_item(self, kref: Kref) -> Any:
        self._connect()
        try:
            return self._call("GetItem", self._pb.GetItemRequest(parent_path=self._space_path(kref.project, kref.space),
                                                                item_name=kref.name, kind=kref.kind))
        except NotFoundError:
            raise NotFoundError(f"no such item: {kref.item_kref()}") from None

    def _tag_events(self, item: Any) -> list[list[Any]]:
        events = self._json_field(item.metadata, _KM_TAGS, [])
        return [event for event in events if isinstance(event, list) and len(event) == 3]

    def _revisions_pb(self, item_uri: str) -> list[Any]:
        response = self._call("GetRevisions", self._pb.GetRevisionsRequest(item_kref=self._pb_kref(item_uri)))
        return sorted(response.revisions, key=lambda rev: rev.number)

    def _revision_pb(self, item_uri: str, number: int) -> Any:
        return self._call("GetRevision", self._pb.KrefRequest(kref=self._pb_kref(f"{item_uri}?r={number}")))

    @staticmethod
    def _wire_time(moment: _dt.datetime) -> str:
        """The SDK's ``YYYYMMDDHHMM`` on a whole minute, else ISO 8601 with microseconds."""
        if moment.second == 0 and moment.microsecond == 0:
            return f"{moment.year:04d}{moment:%m%d%H%M}"
        return format_instant(moment)

    def _resolve_pb(self, kref: Kref, item: Any) -> Any:
        """The server's revision for an item kref (its item already fetched)."""
        uri = str(kref.item_kref())
        try:
            if kref.revision is not None:
                return self._revision_pb(uri, kref.revision)
            if kref.time is None:
                return self._call("ResolveKref", self._pb.ResolveKrefRequest(
                    kref=uri, tag="" if kref.tag in (None, LATEST_TAG) else kref.tag))
            try:
                return self._call("ResolveKref", self._pb.ResolveKrefRequest(
                    kref=uri, tag=kref.tag or LATEST_TAG, time=self._wire_time(kref.time)))
            except (NotFoundError, InvalidArgumentError):
                pass
            # The server did not know (imported history it cannot backdate) or took no such time: our history.
            stamp = format_instant(kref.time)
            number = None
            if kref.tag in (None, LATEST_TAG):
                for rev in self._revisions_pb(uri):
                    if self._created(rev.metadata, rev.created_at) <= stamp:
                        number = rev.number
            else:
                for tag, event_number, at in self._tag_events(item):
                    if tag == kref.tag and at <= stamp:
                        number = event_number
            if number is None:
                raise NotFoundError(f"no revision for {kref}")
            return self._revision_pb(uri, number)
        except NotFoundError:
            raise NotFoundError(f"no revision for {kref}") from None

    def resolve(self, kref: Kref) -> RevisionRecord:
        """Return the revision an item kref selects (latest, ``r=``, ``t=``, ``t=`` at ``time=``)."""
        item = self._get_item(kref)
        return self._record(self._resolve_pb(kref, item), item.deprecated)

    def _revision_count(self, item: Any) -> tuple[int, int | None]:
        """(highest number ever issued, latest number or None)."""
        uri = item.kref.uri
        peek = self._call("PeekNextRevision", self._pb.PeekNextRevisionRequest(item_kref=self._pb_kref(uri))).number
        try:
            latest = self._call("ResolveKref", self._pb.ResolveKrefRequest(kref=uri)).number
        except NotFoundError:
            latest = None
        imported = self._json_field(item.metadata, _KM_LAST, 0)
        return max(peek - 1, imported if isinstance(imported, int) else 0, latest or 0), latest

    def _item_record(self, item: Any) -> ItemRecord:
        metadata = dict(item.metadata)
        count, latest = self._revision_count(item)
        key = metadata.get(_KM_KEY)
        return ItemRecord(kref=self._kref_of(item.kref.uri), key=key,
                          metadata=self._json_field(metadata, _KM_META, {}), created_at=self._created(metadata, item.created_at),
                          deprecated=bool(item.deprecated), revision_count=count, latest_revision=latest)

    def item(self, kref: Kref) -> ItemRecord:
        """Return the item a kref is in."""
        return self._item_record(self._get_item(kref))

    def _spaces_under(self, project: str, space: str | None) -> list[Any]:
        """``(path, SpaceResponse)`` of a space and all below it, or [] when it does not exist."""
        base = self._space_path(project, space or "")
        self._connect()
        try:
            root = self._call("GetSpace", self._pb.GetSpaceRequest(path_or_kref=base))
        except NotFoundError:
            return []
        found, cursor = [root], ""
        while True:
            response = self._call("GetChildSpaces", self._pb.GetChildSpacesRequest(
                parent_path=base, recursive=True, pagination=self._pb.PaginationRequest(page_size=500, cursor=cursor)))
            found.extend(response.spaces)
            cursor = response.pagination.next_cursor if response.HasField("pagination") else ""
            if not cursor:
                return found

    def _items_pb(self, project: str, space: str | None, kind: str | None, include_deprecated: bool) -> list[tuple[str, Any]]:
        rows = []
        for space_pb in self._spaces_under(project, space):
            cursor = ""
            while True:
                response = self._call("GetItems", self._pb.GetItemsRequest(
                    parent_path=space_pb.path, kind_filter=kind or "", include_deprecated=include_deprecated,
                    pagination=self._pb.PaginationRequest(page_size=500, cursor=cursor)))
                rows.extend((space_pb.path, item) for item in response.items)
                cursor = response.pagination.next_cursor if response.HasField("pagination") else ""
                if not cursor:
                    break
        rows.sort(key=lambda row: (self._kref_of(row[1].kref.uri).space, row[1].item_name, row[1].kind))
        return rows

    def items(self, project: str, *, space: str | None = None, kind: str | None = None,
              include_deprecated: bool = False) -> list[ItemRecord]:
        """List items of ``project`` in ``space`` (and below), of ``kind``, live unless asked otherwise."""
        return [self._item_record(item) for _, item in self._items_pb(project, space, kind, include_deprecated)]

    def _key_attribute(self, key: str) -> str:
        return f"{_KM}key.{_digest(key)}"

    def _item_by_key_pb(self, project: str, space: str, key: str) -> Any | None:
        self._connect()
        try:
            response = self._call("GetAttribute", self._pb.GetAttributeRequest(
                kref=self._pb_kref(self._space_kref(project, space)), key=self._key_attribute(key)))
        except NotFoundError:
            return None
        if not response.exists:
            return None
        name, _, kind = response.value.rpartition(".")
        try:
            item = self._get_item(Kref(project, space, name, kind))
        except (NotFoundError, InvalidKrefError):
            return None
        return item if item.metadata.get(_KM_KEY) == key else None

    def item_by_key(self, project: str, space: str, key: str) -> ItemRecord | None:
        """The item holding ``key`` in ``project``/``space``, or None."""
        item = self._item_by_key_pb(project, space, key)
        return None if item is None else self._item_record(item)

    def revisions(self, item: Kref) -> list[RevisionRecord]:
        """Every revision of an item, oldest first."""
        item_pb = self._get_item(item)
        return [self._record(rev, item_pb.deprecated) for rev in self._revisions_pb(item_pb.kref.uri)]

    # -- writing ----------------------------------------------------------------------------------------------

    def _encode_revision(self, title: str, content: str, metadata: Mapping[str, Any], *,
                         vector: Sequence[float] | None = None, vector_model: str = "",
                         created_at: str | None = None) -> dict[str, str]:
        encoded = {"title": title, "content": content, _KM_META: canonical_json(dict(metadata)),
                   _KM_HASH: content_hash(content)}
        if vector is not None:
            encoded[_KM_VECTOR] = array.array("f", vector).tobytes().hex()
            encoded[_KM_VECTOR_MODEL] = vector_model
        if created_at is not None:
            encoded[_KM_CREATED] = created_at
        return encoded

    def _set_attribute(self, uri: str, key: str, value: str) -> None:
        self._call("SetAttribute", self._pb.SetAttributeRequest(kref=self._pb_kref(uri), key=key, value=value))

    def _delete_attribute(self, uri: str, key: str) -> None:
        with contextlib.suppress(NotFoundError):
            self._call("DeleteAttribute", self._pb.DeleteAttributeRequest(kref=self._pb_kref(uri), key=key))

    def _create_item(self, project: str, space: str, name: str, kind: str) -> Any:
        for attempt in itertools.count(1):
            candidate = name if attempt == 1 else f"{name}-{attempt}"
            try:
                return self._call("CreateItem", self._pb.CreateItemRequest(
                    parent_path=self._space_path(project, space), item_name=candidate, kind=kind, exists_error=True),
                    idempotent=False)
            except ConflictError:
                continue
        raise AssertionError("unreachable")  # pragma: no cover

    def _create_revision(self, item_uri: str, encoded: Mapping[str, str], number: int = 0) -> Any:
        """Create a revision exactly once: a reply lost after the server applied the write (a dropped
        connection) is not retried blindly; the item's revisions are read for this write's id first."""
        text = f"{encoded.get('title', '')}\n{encoded.get('content', '')}"
        write_id = self._ids.new_id() + self._ids.new_id()
        request = self._pb.CreateRevisionRequest(
            item_kref=self._pb_kref(item_uri), metadata={**encoded, _KM_WRITE: write_id}, number=number,
            exists_error=number > 0, embedding_text=text[:8000])
        delay = 0.05
        for attempt in range(self._retries + 1):
            try:
                return self._call("CreateRevision", request, idempotent=False, retries=0,
                                  metadata=(("x-idempotency-key", write_id),))
            except GraphServiceError as error:
                if not error.transient or attempt == self._retries:
                    raise
            time.sleep(delay)
            delay = min(delay * 4, 1.0)
            with contextlib.suppress(GraphServiceError):
                applied = [rev for rev in self._revisions_pb(item_uri) if rev.metadata.get(_KM_WRITE) == write_id]
                if applied:
                    return applied[0]
        raise AssertionError("unreachable")  # pragma: no cover

    def _log_tag(self, item_uri: str, tag: str, number: int | None, moment: _dt.datetime) -> None:
        """Append a tag move to the item's history (what ``export`` and imported ``time=`` lookups read);
        ``moment`` is read just before the server made the move."""
        item = self._get_item(self._kref_of(item_uri))
        events = self._tag_events(item)
        now = format_instant(moment)
        last = max((event[2] for event in events if event[0] == tag), default=None)
        events.append([tag, number, max(now, last) if last else now])
        self._set_attribute(item_uri, _KM_TAGS, canonical_json(events))

    def _tag(self, rev: Any, tag: str, *, log: bool = True) -> bool:
        if tag in rev.tags:
            return False
        moment = self._clock.now()
        self._call("TagRevision", self._pb.TagRevisionRequest(kref=rev.kref, tag=tag))
        if log:
            self._log_tag(rev.item_kref.uri, tag, rev.number, moment)
        return True

    def write_revision(self, draft: RevisionDraft) -> tuple[RevisionRecord, bool]:
        """Write a revision per ``draft`` (see ``RevisionDraft``); a failure part-way undoes what it wrote."""
        text_hash = content_hash(draft.content)
        self._ensure_space(draft.project, draft.space)
        item = None
        if draft.item is not None:
            item = self._get_item(draft.item)
        elif draft.key is not None:
            item = self._item_by_key_pb(draft.project, draft.space, draft.key)
        head = None
        if item is not None:
            try:
                head = self._call("ResolveKref", self._pb.ResolveKrefRequest(kref=item.kref.uri))
            except NotFoundError:
                head = None
            if head is not None and draft.key is not None and draft.item is None \
                    and head.metadata.get(_KM_HASH) == text_hash:
                return self._record(head, item.deprecated), False
        created_item = item is None
        if item is None:
            item = self._create_item(draft.project, draft.space, draft.name, draft.kind)
        item_uri = item.kref.uri
        rev = None
        moved: list[tuple[str, Any]] = []               # (tag, the revision that held it before), to put back
        try:
            if created_item and draft.key is not None:
                self._set_attribute(item_uri, _KM_KEY, draft.key)
                self._set_attribute(self._space_kref(draft.project, draft.space), self._key_attribute(draft.key),
                                    f"{item.item_name}.{item.kind}")
            number = 0
            imported_last = self._json_field(item.metadata, _KM_LAST, 0)
            if isinstance(imported_last, int) and imported_last > 0:
                peek = self._call("PeekNextRevision", self._pb.PeekNextRevisionRequest(item_kref=item.kref)).number
                number = max(peek, imported_last + 1)
            rev = self._create_revision(item_uri, self._encode_revision(
                draft.title, draft.content, draft.metadata, vector=draft.vector, vector_model=draft.vector_model),
                number)
            tags = list(draft.tags)
            if head is not None:
                self._call("CreateEdge", self._pb.CreateEdgeRequest(
                    source_revision_kref=rev.kref, target_revision_kref=head.kref, edge_type=SUPERSEDES,
                    metadata={}, exists_error=False))
                try:
                    self._call("ResolveKref", self._pb.ResolveKrefRequest(kref=item_uri, tag=PUBLISHED_TAG))
                    tags.append(PUBLISHED_TAG)        # a revised published belief stays published
                except NotFoundError:
                    pass
            for artifact_name, location, artifact_metadata in draft.artifacts:
                self._put_artifact(rev.kref.uri, artifact_name, location, artifact_metadata)
            for target, edge_type, edge_metadata in draft.edges:
                target_rev = self._resolve_pb(target, self._get_item(target))
                self._put_edge(rev.kref.uri, target_rev.kref.uri, edge_type, {_KM_META: canonical_json(dict(edge_metadata))})
            if created_item and is_message(draft.metadata):
                self._thread(draft, rev)
            for tag in dict.fromkeys(tags):                # tags move last: they are what a failure must undo
                holder = None
                if not created_item:
                    with contextlib.suppress(NotFoundError):
                        holder = self._call("ResolveKref", self._pb.ResolveKrefRequest(kref=item_uri, tag=tag))
                moved.append((tag, holder))               # before the move: a half-done move is undone too
                self._tag(rev, tag)
            rev = self._revision_pb(item_uri, rev.number)
        except BaseException:
            with contextlib.suppress(Exception):
                for tag, holder in reversed(moved):       # put moved tags back where they were
                    if holder is not None and holder.kref.uri != rev.kref.uri:
                        self._call("TagRevision", self._pb.TagRevisionRequest(kref=holder.kref, tag=tag))
            with contextlib.suppress(Exception):
                if rev is not None and moved:             # the revision never was: its moves leave the history
                    events = [event for event in self._tag_events(self._get_item(self._kref_of(item_uri)))
                              if event[1] != rev.number]
                    self._set_attribute(item_uri, _KM_TAGS, canonical_json(events))
            with contextlib.suppress(Exception):
                if created_item:
                    self._call("DeleteItem", self._pb.DeleteItemRequest(kref=item.kref, force=True))
                    if draft.key is not None:
                        self._delete_attribute(self._space_kref(draft.project, draft.space),
                                               self._key_attribute(draft.key))
                elif rev is not None:
                    self._call("DeleteRevision", self._pb.DeleteRevisionRequest(kref=rev.kref, force=True))
            raise
        self._announce(draft.project, draft.kind)
        return self._record(rev, item.deprecated), True

    def _thread_attribute(self, metadata: Mapping[str, Any]) -> str:
        return f"{_KM}thread.{_digest(thread_key(metadata))}"

    def _thread(self, draft: RevisionDraft, rev: Any) -> None:
        """Link a new message to the previous message of its thread (FOLLOWS), then point the thread at it."""
        space_uri = self._space_kref(draft.project, draft.space)
        key = self._thread_attribute(draft.metadata)
        previous = self._call("GetAttribute", self._pb.GetAttributeRequest(kref=self._pb_kref(space_uri), key=key))
        if previous.exists and previous.value:
            with contextlib.suppress(NotFoundError):
                self._call("CreateEdge", self._pb.CreateEdgeRequest(
                    source_revision_kref=rev.kref, target_revision_kref=self._pb_kref(previous.value),
                    edge_type=FOLLOWS, metadata={}, exists_error=False))
        self._set_attribute(space_uri, key, rev.kref.uri)

    def set_tag(self, revision: Kref, tag: str) -> RevisionRecord:
        """Point ``tag`` at a revision (the server moves it off any other revision of the item)."""
        item = self._get_item(revision)
        rev = self._resolve_pb(revision, item)
        if self._tag(rev, tag):
            rev = self._revision_pb(item.kref.uri, rev.number)
        self._announce(revision.project)
        return self._record(rev, item.deprecated)

    def remove_tag(self, revision: Kref, tag: str) -> bool:
        """Remove ``tag`` if this revision carries it, recording the removal."""
        item = self._get_item(revision)
        rev = self._resolve_pb(revision, item)
        if tag not in rev.tags:
            return False
        moment = self._clock.now()
        try:
            self._call("UnTagRevision", self._pb.UnTagRevisionRequest(kref=rev.kref, tag=tag))
        except NotFoundError:
            return False
        self._log_tag(item.kref.uri, tag, None, moment)
        self._announce(revision.project)
        return True

    # -- edges ------------------------------------------------------------------------------------------------

    def _edges_pb(self, rev_uri: str, direction: str = "both", edge_type: str | None = None) -> list[Any]:
        code = {"outgoing": self._pb.OUTGOING, "incoming": self._pb.INCOMING, "both": self._pb.BOTH}[direction]
        found, cursor = [], ""
        while True:
            response = self._call("GetEdges", self._pb.GetEdgesRequest(
                kref=self._pb_kref(rev_uri), edge_type_filter=edge_type or "", direction=code,
                pagination=self._pb.PaginationRequest(page_size=500, cursor=cursor)))
            found.extend(response.edges)
            cursor = response.pagination.next_cursor if response.HasField("pagination") else ""
            if not cursor:
                return found

    def update_metadata(self, revision: Kref, updates: Mapping[str, Any]) -> RevisionRecord:
        """Merge ``updates`` into the revision's metadata with the server's UpdateRevisionMetadata."""
        item = self._get_item(revision)
        rev = self._resolve_pb(revision, item)
        metadata = self._user_metadata(dict(rev.metadata), plain_skip=("title", "content"))
        for key, value in updates.items():
            if value is None:
                metadata.pop(key, None)
            else:
                metadata[key] = value
        self._call("UpdateRevisionMetadata", self._pb.UpdateMetadataRequest(
            kref=self._pb_kref(rev.kref.uri), metadata={_KM_META: canonical_json(metadata)}))
        self._announce(revision.project)
        return self.resolve(self._kref_of(rev.item_kref.uri).with_revision(rev.number))

    def add_edge(self, source: Kref, target: Kref, edge_type: str, metadata: Mapping[str, Any]) -> EdgeRecord:
        """Create the edge unless it exists (the server's get-or-create); either way return it."""
        source_rev = self._resolve_pb(source, self._get_item(source))
        target_rev = self._resolve_pb(target, self._get_item(target))
        if source_rev.kref.uri == target_rev.kref.uri:
            raise InvalidArgumentError(f"an edge joins two different revisions; both ends are {source}")
        edge = self._put_edge(source_rev.kref.uri, target_rev.kref.uri, edge_type,
                              {_KM_META: canonical_json(dict(metadata))})
        self._announce(source.project)
        return edge

    def _put_edge(self, source_uri: str, target_uri: str, edge_type: str, encoded: Mapping[str, str]) -> EdgeRecord:
        try:
            self._call("CreateEdge", self._pb.CreateEdgeRequest(
                source_revision_kref=self._pb_kref(source_uri), target_revision_kref=self._pb_kref(target_uri),
                edge_type=edge_type, metadata=dict(encoded), exists_error=False))
        except ConflictError:
            pass                                          # ALREADY_EXISTS: the edge is there; read it below
        for edge in self._edges_pb(source_uri, "outgoing", edge_type):
            if edge.target_kref.uri == target_uri:
                return self._edge_record(edge)
        raise GraphServiceError(f"Kumiho server {self.address}: the edge {source_uri} -{edge_type}-> {target_uri} "
                                f"was accepted but cannot be read back", transient=True)

    def edges(self, kref: Kref, *, direction: str = "both", edge_type: str | None = None) -> list[EdgeRecord]:
        """Edges touching one revision, or every revision of the item for a bare item kref."""
        item = self._get_item(kref)
        if kref.is_bare_item:
            uris = [rev.kref.uri for rev in self._revisions_pb(item.kref.uri)]
        else:
            uris = [self._resolve_pb(kref, item).kref.uri]
        seen: dict[tuple[str, str, str], EdgeRecord] = {}
        for uri in uris:
            for edge in self._edges_pb(uri, direction, edge_type):
                seen.setdefault((edge.source_kref.uri, edge.target_kref.uri, edge.edge_type), self._edge_record(edge))
        return sorted(seen.values(), key=lambda e: (e.created_at, str(e.source_kref), str(e.target_kref), e.edge_type))

    # -- deprecation and forgetting -----------------------------------------------------------------------------

    def set_deprecated(self, kref: Kref, deprecated: bool) -> None:
        """Set the server's deprecated flag on an item (bare kref) or one revision."""
        item = self._get_item(kref)
        rev = None if kref.is_bare_item else self._resolve_pb(kref, item)
        moment = self._clock.now()
        self._call("SetDeprecated", self._pb.SetDeprecatedRequest(kref=item.kref if rev is None else rev.kref,
                                                                  deprecated=bool(deprecated)))
        # kept beside the flag (which has no time) so point-in-time recall knows when it changed
        events = self._json_field(item.metadata, _KM_DEPRECATIONS, [])
        events = events if isinstance(events, list) else []
        events.append([None if rev is None else rev.number, bool(deprecated), format_instant(moment)])
        self._set_attribute(item.kref.uri, _KM_DEPRECATIONS, canonical_json(events))
        self._announce(kref.project, kref.kind)

    def _deprecated_then(self, item: Any, number: int | None, stamp: str, now_flag: bool) -> bool:
        """Whether the item (``number`` None) or one revision was deprecated at ``stamp``: from the history
        this backend keeps, else (deprecated by another client, no history) today's flag."""
        events = self._json_field(item.metadata, _KM_DEPRECATIONS, [])
        mine = [event for event in (events if isinstance(events, list) else [])
                if isinstance(event, list) and len(event) == 3 and event[0] == number]
        if not mine:
            return now_flag
        past = [event for event in mine if isinstance(event[2], str) and event[2] <= stamp]
        return bool(past[-1][1]) if past else False

    def forget(self, kref: Kref) -> dict[str, Any]:
        """Erase an item or a revision with the server's forced deletes (its edges, tags and artifacts go
        with it); the tag history this backend keeps forgets where the tag pointed."""
        item = self._get_item(kref)
        item_uri = item.kref.uri
        revs = self._revisions_pb(item_uri) if kref.is_bare_item else [self._resolve_pb(kref, item)]
        edges: set[tuple[str, str, str]] = set()
        for rev in revs:
            for edge in self._edges_pb(rev.kref.uri):
                edges.add((edge.source_kref.uri, edge.target_kref.uri, edge.edge_type))
        self._repair_threads(kref, revs)
        if kref.is_bare_item:
            self._call("DeleteItem", self._pb.DeleteItemRequest(kref=item.kref, force=True))
            key = item.metadata.get(_KM_KEY)
            if key is not None:
                self._delete_attribute(self._space_kref(kref.project, kref.space), self._key_attribute(key))
        else:
            number = revs[0].number
            self._call("DeleteRevision", self._pb.DeleteRevisionRequest(kref=revs[0].kref, force=True))
            events = self._tag_events(item)
            if any(event[1] == number for event in events):
                self._set_attribute(item_uri, _KM_TAGS, canonical_json(
                    [[tag, None if event_number == number else event_number, at] for tag, event_number, at in events]))
        self._announce(kref.project)
        return {"kref": str(kref), "items": int(kref.is_bare_item), "revisions": len(revs), "edges": len(edges),
                "scrubbed": None}

    def _repair_threads(self, kref: Kref, revs: Sequence[Any]) -> None:
        """A thread whose last message is forgotten continues from the message before it."""
        gone = {rev.kref.uri for rev in revs}
        space_uri = self._space_kref(kref.project, kref.space)
        for rev in revs:
            metadata = self._user_metadata(dict(rev.metadata), plain_skip=("title", "content"))
            if not is_message(metadata):
                continue
            key = self._thread_attribute(metadata)
            pointer = self._call("GetAttribute", self._pb.GetAttributeRequest(kref=self._pb_kref(space_uri), key=key))
            if not pointer.exists or pointer.value != rev.kref.uri:
                continue
            before = [edge.target_kref.uri for edge in self._edges_pb(rev.kref.uri, "outgoing", FOLLOWS)
                      if edge.target_kref.uri not in gone]
            if before:
                self._set_attribute(space_uri, key, before[0])
            else:
                self._delete_attribute(space_uri, key)

    # -- artifacts ----------------------------------------------------------------------------------------------

    def _put_artifact(self, rev_uri: str, name: str, location: str, metadata: Mapping[str, Any],
                      created_at: str | None = None) -> Any:
        encoded = {_KM_META: canonical_json(dict(metadata))}
        if created_at is not None:
            encoded[_KM_CREATED] = created_at
        request = self._pb.CreateArtifactRequest(revision_kref=self._pb_kref(rev_uri), name=name, location=location,
                                                 exists_error=True, metadata=encoded)
        try:
            return self._call("CreateArtifact", request, idempotent=False)
        except ConflictError:
            self._call("DeleteArtifact", self._pb.DeleteArtifactRequest(kref=self._pb_kref(f"{rev_uri}&a={name}"),
                                                                         force=True))
            return self._call("CreateArtifact", request, idempotent=False)

    def add_artifact(self, revision: Kref, name: str, location: str,
                     metadata: Mapping[str, Any]) -> ArtifactRecord:
        """Attach (or replace) the named artifact of a revision."""
        rev = self._resolve_pb(revision, self._get_item(revision))
        artifact = self._artifact_record(self._put_artifact(rev.kref.uri, name, location, metadata))
        self._announce(revision.project)
        return artifact

    def artifacts(self, revision: Kref) -> list[ArtifactRecord]:
        """The artifacts of one revision, by name."""
        rev = self._resolve_pb(revision, self._get_item(revision))
        response = self._call("GetArtifacts", self._pb.GetArtifactsRequest(revision_kref=rev.kref))
        return sorted((self._artifact_record(art) for art in response.artifacts), key=lambda a: a.name)

    def tag_history(self, item: Kref) -> list[tuple[str, int | None, str]]:
        """Every move of every tag of an item that this backend recorded, oldest first."""
        events = self._tag_events(self._get_item(item.item_kref()))
        return [(str(tag), number if isinstance(number, int) else None, str(at)) for tag, number, at in events]

    # -- recall -------------------------------------------------------------------------------------------------

    def _candidates(self, query: RecallQuery) -> list[tuple[Any, Any]]:
        """``(item, revision)`` pairs the server's search finds, one current revision per item (or every live
        one with ``include_superseded``), as ``search`` would choose them on the embedded engine."""
        self._connect()
        contexts = [query.project] if query.spaces is None else [
            query.project + ("/" + space if space else "") for space in query.spaces]
        words = " ".join(dict.fromkeys(query.terms))
        items: dict[str, Any] = {}
        wanted = max(self._search_pool, query.pool)        # a filtered recall widens its pool: so do we
        for context in contexts:
            cursor, found = "", 0
            while found < wanted:
                request = self._pb.SearchRequest(
                    query=words, context_filter=context, include_deprecated=query.as_of is not None,
                    include_revision_metadata=True,
                    pagination=self._pb.PaginationRequest(page_size=min(wanted - found, 500), cursor=cursor))
                response = self._call("Search", request)
                for result in response.results:
                    found += 1
                    if (query.as_of is not None or not result.item.deprecated) and \
                            result.item.kind not in SYSTEM_KINDS and self._in_scope(result.item.kref.uri, query):
                        items.setdefault(result.item.kref.uri, result.item)
                cursor = response.pagination.next_cursor if response.HasField("pagination") else ""
                if not cursor or not response.results:
                    break
        stamp = None if query.as_of is None else format_instant(_dt.datetime.fromtimestamp(query.as_of, UTC))
        pairs = []
        if stamp is None and not query.include_superseded:
            current = self._current_revisions(list(items))
            for uri, item in items.items():
                if uri in current:
                    pairs.append((item, current[uri]))
            items = {uri: item for uri, item in items.items() if uri not in current}
        for uri, item in items.items():
            if stamp is None:
                revs = [rev for rev in self._revisions_pb(uri) if not rev.deprecated]
            elif self._deprecated_then(item, None, stamp, item.deprecated):
                continue
            else:
                revs = [rev for rev in self._revisions_pb(uri) if self._created(rev.metadata, rev.created_at) <= stamp
                        and not self._deprecated_then(item, rev.number, stamp, rev.deprecated)]
            if not revs:
                continue
            if query.include_superseded:
                chosen = revs
            else:
                published = None
                if stamp is None:
                    published = next((rev for rev in revs if PUBLISHED_TAG in rev.tags), None)
                else:
                    numbers = [number for tag, number, at in self._tag_events(item) if tag == PUBLISHED_TAG and at <= stamp]
                    if numbers and numbers[-1] is not None:
                        published = next((rev for rev in revs if rev.number == numbers[-1]), None)
                chosen = [published or revs[-1]]
                superseding = [edge for edge in self._edges_pb(chosen[0].kref.uri, "incoming", SUPERSEDES)
                               if edge.source_kref.uri.split("?")[0] != uri
                               and (stamp is None or self._created(edge.metadata, edge.created_at) <= stamp)]
                if superseding:
                    continue
            pairs.extend((item, rev) for rev in chosen)
        return pairs

    def _add_neighbour(self, rev_uri: str, query: RecallQuery, records: list[RevisionRecord],
                       uri_doc: dict[str, int | None]) -> None:
        """Make an edge's far end a candidate (``uri_doc[rev_uri]`` = its doc id) when it is a current, live
        revision inside the recall's project and spaces, else record None. Point-in-time and history recalls
        do not follow edges beyond the search's candidates on this backend."""
        uri_doc[rev_uri] = None
        if query.as_of is not None or query.include_superseded:
            return
        try:
            item = self._get_item(Kref.parse(rev_uri)) if self._in_scope(rev_uri, query) else None
        except (InvalidArgumentError, NotFoundError):
            item = None
        rev = None
        if item is not None and not item.deprecated:
            item_uri = item.kref.uri
            rev = self._current_revisions([item_uri]).get(item_uri)
            if rev is None:
                revs = [candidate for candidate in self._revisions_pb(item_uri) if not candidate.deprecated]
                rev = next((candidate for candidate in revs if PUBLISHED_TAG in candidate.tags), revs[-1] if revs else None)
        if rev is None or rev.kref.uri != rev_uri:
            return
        records.append(self._record(rev, item.deprecated))
        uri_doc[rev_uri] = len(records) - 1

    @staticmethod
    def _superseded_elsewhere(record: RevisionRecord, edges: list[Any]) -> bool:
        """Whether a revision of another item SUPERSEDES this one (it then never answers a recall)."""
        mine = str(record.kref)
        item = mine.split("?")[0]
        return any(edge.edge_type == SUPERSEDES and edge.target_kref.uri == mine
                   and edge.source_kref.uri.split("?")[0] != item for edge in edges)

    @staticmethod
    def _in_scope(uri: str, query: RecallQuery) -> bool:
        """Whether an item the server's search returned is in the recall's project and spaces (the search's
        context filter is a prefix, which need not stop at a path segment)."""
        try:
            kref = Kref.parse(uri)
        except InvalidArgumentError:
            return False
        return kref.project == query.project and (query.spaces is None or any(
            not space or kref.space == space or kref.space.startswith(space + "/") for space in query.spaces))

    def _current_revisions(self, item_uris: list[str]) -> dict[str, Any]:
        """Each item's current revision (``published``, else ``latest``) in two batched calls; items whose
        answer is missing or deprecated are left out (the caller reads them one by one). A server without
        batch reads makes this return nothing."""
        current: dict[str, Any] = {}
        if not item_uris or not self._batch_reads:
            return current
        for tag in (PUBLISHED_TAG, LATEST_TAG):
            wanted = [uri for uri in item_uris if uri not in current]
            if not wanted:
                break
            try:
                response = self._call("BatchGetRevisions", self._pb.BatchGetRevisionsRequest(
                    item_krefs=[self._pb_kref(uri) for uri in wanted], tag=tag, allow_partial=True))
            except (GraphServiceError, InvalidArgumentError) as error:
                if isinstance(error, GraphServiceError) and error.transient:
                    raise
                self._batch_reads = False                 # not offered here: read item by item from now on
                return {}
            for rev in response.revisions:
                uri = rev.item_kref.uri
                if uri in wanted and not rev.deprecated and uri not in current:
                    current[uri] = rev
        return current

    def search(self, query: RecallQuery) -> list[ScoredRevision]:
        """Gather candidates with the server's search, then rank them here: BM25 over the candidates' words,
        the who/when boosts, edges lending score, the semantic channel when revisions carry embeddings, and
        CONTRADICTS notes; so ``Memory.recall``'s evidence weights, siblings and filters work as on the
        embedded engine. Word statistics come from the candidates (see the class notes)."""
        if not query.terms and query.query_vector is None:
            return []
        pairs = self._candidates(query)
        if not pairs:
            return []
        # doc ids grow with time, so equal scores rank the newer memory first (as on the embedded engine)
        pairs.sort(key=lambda pair: (self._created(pair[1].metadata, pair[1].created_at), pair[1].kref.uri))
        signals = self.signals
        index = RecallIndex()
        records: list[RevisionRecord] = []
        who: dict[int, frozenset[str]] = {}
        events: dict[int, float] = {}
        vectors: dict[int, tuple[float, ...]] = {}
        uri_doc: dict[str, int | None] = {}         # revision uri -> doc id (None: looked up, not a candidate)
        for doc_id, (item, rev) in enumerate(pairs):
            record = self._record(rev, item.deprecated)
            records.append(record)
            uri_doc[rev.kref.uri] = doc_id
            terms = tokenize(record.title + "\n" + record.content)
            counts: dict[str, float] = {}
            for term in terms:
                counts[term] = counts.get(term, 0.0) + 1.0
            index.add(doc_id, counts, len(terms), short=is_message(record.metadata))
            names = frozenset(term for name in who_names(record.metadata) for term in tokenize(name))
            if names:
                who[doc_id] = names
            event = event_epoch(record.metadata)
            if event is not None:
                events[doc_id] = event
            raw = rev.metadata.get(_KM_VECTOR)
            if raw:
                with contextlib.suppress(ValueError):
                    vectors[doc_id] = tuple(array.array("f", bytes.fromhex(raw)))
        eligible = set(range(len(records)))
        depth = query.pool
        hits = index.search(index.term_weights(query.terms), depth, eligible)
        if query.query_vector is not None and vectors:
            semantic = sorted(((doc_id, sum(a * b for a, b in zip(vector, query.query_vector)))
                               for doc_id, vector in vectors.items()), key=lambda pair: -pair[1])[:depth]
            hits = _RecallState._fuse(hits, semantic, query.semantic_weight)
        scores = dict(hits)
        notes: dict[int, dict[str, Any]] = {doc_id: {} for doc_id in scores}
        name_terms = set().union(*who.values()) if who else set()
        named = {term for term in query.terms if term in name_terms} if signals.who else set()
        if named:
            for doc_id in scores:
                shared = who.get(doc_id, frozenset()) & named
                if shared:
                    scores[doc_id] *= 1.0 + signals.who
                    notes[doc_id]["who"] = sorted(shared)
        if query.time_window is not None and signals.when:
            start, end = query.time_window
            for doc_id in scores:
                event = events.get(doc_id)
                if event is not None:
                    gap_days = 0.0 if start <= event <= end else min(abs(event - start), abs(event - end)) / 86400.0
                    boost = signals.when * math.exp(-gap_days / max(signals.when_scale_days, 1e-9))
                    if boost > 1e-3:
                        scores[doc_id] *= 1.0 + boost
                        notes[doc_id]["when"] = round(boost, 4)
        ranked = sorted(scores.items(), key=lambda pair: (-pair[1], -pair[0]))
        wanted = query.keep or query.pool
        # Candidates read in a batch were not checked for a SUPERSEDES from another item: check the ones
        # that would be kept (their edges are read anyway) and skip those, going further down the ranking.
        check = query.as_of is None and not query.include_superseded
        edges_of: dict[int, list[Any]] = {}
        dropped: set[int] = set()

        def admissible(doc_id: int) -> bool:
            if doc_id not in edges_of:
                edges_of[doc_id] = self._edges_pb(str(records[doc_id].kref))
            if check and doc_id not in dropped and self._superseded_elsewhere(records[doc_id], edges_of[doc_id]):
                dropped.add(doc_id)
            return doc_id not in dropped

        keep = []
        for doc_id, score in ranked:
            if len(keep) >= wanted:
                break
            if admissible(doc_id):
                keep.append((doc_id, score))
        linkable = set(signals.edge_types)
        if signals.edges and query.follow_edges:
            for doc_id, score in keep[: signals.edge_seeds]:
                for edge in edges_of[doc_id]:
                    if edge.edge_type not in linkable:
                        continue
                    mine = str(records[doc_id].kref)
                    neighbour_uri = edge.target_kref.uri if edge.source_kref.uri == mine else edge.source_kref.uri
                    if neighbour_uri not in uri_doc:      # not among the search's candidates: fetch it
                        self._add_neighbour(neighbour_uri, query, records, uri_doc)
                    other = uri_doc[neighbour_uri]
                    lent = signals.edges * score
                    if other is not None and lent > scores.get(other, 0.0) and admissible(other):
                        if other not in scores:
                            notes[other] = {"graph_augmented": True, "hop": 1}
                        scores[other] = lent
                        notes[other].setdefault("via", {"kref": mine, "edge_type": edge.edge_type})
            ranked = sorted(((doc_id, score) for doc_id, score in scores.items() if doc_id not in dropped),
                            key=lambda pair: (-pair[1], -pair[0]))
            keep = []
            for doc_id, score in ranked:
                if len(keep) >= wanted:
                    break
                if admissible(doc_id):
                    keep.append((doc_id, score))
        results = []
        for doc_id, score in keep:
            mine = str(records[doc_id].kref)
            edges = edges_of.get(doc_id)
            if edges is None:
                edges = self._edges_pb(mine)
            challengers = sorted({edge.source_kref.uri for edge in edges
                                  if edge.edge_type == CONTRADICTS and edge.target_kref.uri == mine})
            if challengers:
                notes.setdefault(doc_id, {})["contested_by"] = challengers
            results.append(ScoredRevision(records[doc_id], score, notes.get(doc_id, {})))
        return results

    # -- embeddings ---------------------------------------------------------------------------------------------

    def set_vector(self, revision: Kref, model: str, vector: Sequence[float]) -> None:
        """Store a revision's embedding (float32) in its metadata."""
        rev = self._resolve_pb(revision, self._get_item(revision))
        self._set_attribute(rev.kref.uri, _KM_VECTOR_MODEL, model)
        self._set_attribute(rev.kref.uri, _KM_VECTOR, array.array("f", vector).tobytes().hex())
        self._announce(revision.project)

    def revisions_without_vector(self, project: str, limit: int) -> list[RevisionRecord]:
        """Revisions of ``project`` with no stored embedding, oldest first."""
        found = []
        for _, item in self._items_pb(project, None, None, True):
            for rev in self._revisions_pb(item.kref.uri):
                if _KM_VECTOR not in rev.metadata:
                    found.append(self._record(rev, item.deprecated))
        found.sort(key=lambda record: (record.created_at, str(record.kref)))
        return found[:limit]

    # -- stats --------------------------------------------------------------------------------------------------

    def stats(self, project: str) -> dict[str, Any]:
        """Counts for one project, read from the server (one pass over its items)."""
        counts = {"items": 0, "revisions": 0, "edges": 0, "tags": 0, "deprecated_items": 0, "deprecated_revisions": 0}
        for _, item in self._items_pb(project, None, None, True):
            counts["items"] += 1
            counts["deprecated_items"] += bool(item.deprecated)
            for rev in self._revisions_pb(item.kref.uri):
                counts["revisions"] += 1
                counts["deprecated_revisions"] += bool(rev.deprecated)
                counts["tags"] += sum(1 for tag in rev.tags if tag != LATEST_TAG)
                counts["edges"] += len(self._edges_pb(rev.kref.uri, "outgoing"))
        spaces = max(0, len(self._spaces_under(project, None)) - 1)
        return {"project": project, "items": counts["items"], "revisions": counts["revisions"],
                "edges": counts["edges"], "spaces": spaces, "tags": counts["tags"],
                "deprecated_items": counts["deprecated_items"], "deprecated_revisions": counts["deprecated_revisions"],
                "backend": "kumiho", "path": self.address, "schema_version": SCHEMA_VERSION}

    # -- export and import --------------------------------------------------------------------------------------

    def export_records(self) -> Iterator[dict[str, Any]]:
        """Every project on the server in ``SQLiteGraph.export_records``'s format and order: header, spaces,
        items with their revisions, artifacts and tag history, then edges. Timestamps are the originals for
        imported records and the server's otherwise."""
        self._connect()
        yield {"record": "header", "format": EXPORT_FORMAT, "format_version": EXPORT_FORMAT_VERSION}
        projects = sorted(project.name for project in self._call("GetProjects", self._pb.GetProjectsRequest()).projects)
        for project in projects:
            for space in sorted(self._spaces_under(project, None), key=lambda s: s.path):
                path = space.path.strip("/").partition("/")[2]
                yield {"record": "space", "project": project, "path": path,
                       "created_at": self._created(space.metadata, space.created_at)}
        edges: list[EdgeRecord] = []
        for project in projects:
            for _, item in self._items_pb(project, None, None, True):
                record = self._item_record(item)
                yield {"record": "item", "item_kref": str(record.kref), "key": record.key,
                       "metadata": dict(record.metadata), "created_at": record.created_at,
                       "deprecated": record.deprecated, "last_number": record.revision_count}
                revs = self._revisions_pb(item.kref.uri)
                for rev in revs:
                    rev_record = self._record(rev, False)
                    yield {"record": "revision", "kref": str(rev_record.kref), "title": rev_record.title,
                           "content": rev_record.content, "metadata": dict(rev_record.metadata),
                           "created_at": rev_record.created_at, "deprecated": bool(rev.deprecated)}
                for rev in revs:
                    response = self._call("GetArtifacts", self._pb.GetArtifactsRequest(revision_kref=rev.kref))
                    for art in sorted((self._artifact_record(a) for a in response.artifacts), key=lambda a: a.name):
                        yield {"record": "artifact", "revision_kref": str(art.revision_kref), "name": art.name,
                               "location": art.location, "metadata": dict(art.metadata), "created_at": art.created_at}
                ordered = sorted(enumerate(self._tag_events(item)), key=lambda pair: (pair[1][2], pair[0]))
                for _, (tag, number, at) in ordered:
                    yield {"record": "tag_event", "item_kref": str(record.kref), "tag": tag, "revision": number,
                           "at": at}
                for rev in revs:
                    edges.extend(self._edge_record(edge) for edge in self._edges_pb(rev.kref.uri, "outgoing"))

        def order(edge: EdgeRecord) -> tuple[Any, ...]:
            s, t = edge.source_kref, edge.target_kref
            return (s.project, s.space, s.name, s.kind, s.revision, t.project, t.space, t.name, t.kind, t.revision,
                    edge.edge_type)
        for edge in sorted(edges, key=order):
            yield {"record": "edge", **edge.to_dict()}

    def import_records(self, records: Iterable[tuple[int, dict[str, Any]]],
                       progress: Callable[[int], None] | None = None) -> dict[str, int]:
        """Load an export: every record is checked against the stream and the server first, so a bad or
        conflicting stream writes nothing; then the writes run in order, and a failure part-way deletes the
        items this import created (the server has no multi-call transaction)."""
        plan = _KumihoImportPlan(self)
        counts = {"records": 0, "added": 0, "skipped": 0}
        projects: set[str] = set()
        for line_number, record in records:
            kind = record.get("record") if isinstance(record, dict) else None
            if counts["records"] == 0 and kind != "header":
                raise ImportFormatError(f"line {line_number}: an export starts with a header record")
            if not isinstance(kind, str) or kind not in plan.checkers:
                raise ImportFormatError(f"line {line_number}: unknown record type {kind!r}")
            try:
                added = plan.checkers[kind](record)
            except ConflictError as exc:
                raise ConflictError(f"line {line_number}: {exc}") from exc
            except NotFoundError as exc:
                raise ImportFormatError(f"line {line_number}: refers to something not yet defined: {exc}") from exc
            except (InvalidArgumentError, KeyError, TypeError, ValueError) as exc:
                raise ImportFormatError(f"line {line_number}: bad {kind} record: {exc}") from exc
            counts["records"] += 1
            if kind != "header":
                counts["added" if added else "skipped"] += 1
            if kind == "space" and isinstance(record.get("project"), str):
                projects.add(record["project"])
        plan.run()
        for project in sorted(projects):
            self._announce(project)
        if progress is not None:
            for number in range(1, counts["records"] + 1):
                progress(number)
        return counts


class _KumihoImportPlan:
    """Checks an import stream against itself and the server (reading only), then writes it."""

    def __init__(self, backend: KumihoBackend) -> None:
        self.backend = backend
        self.actions: list[Callable[[], None]] = []
        self.new_items: dict[str, dict[str, Any]] = {}           # item kref -> the item record
        self.items: dict[str, Any] = {}                          # item kref -> server item (existing)
        self.revisions: dict[str, dict[str, Any] | None] = {}    # revision kref -> record (None: on the server)
        self.keys: dict[tuple[str, str, str], str] = {}
        self.tag_events: dict[str, list[list[Any]]] = {}
        self.touched_tags: set[tuple[str, str]] = set()
        self.created: list[Any] = []
        self.checkers = {"header": self.header, "space": self.space, "item": self.item, "revision": self.revision,
                         "artifact": self.artifact, "tag_event": self.tag_event, "edge": self.edge}

    @staticmethod
    def header(record: dict[str, Any]) -> bool:
        _read_header(record)
        return False

    def space(self, record: dict[str, Any]) -> bool:
        backend = self.backend
        project = _check_pattern(record["project"], SEGMENT_PATTERN, "project", InvalidArgumentError)
        path = normalize_space(record["path"])
        created_at = _record_instant(record, "created_at")
        backend._connect()
        try:
            backend._call("GetSpace", backend._pb.GetSpaceRequest(path_or_kref=backend._space_path(project, path)))
            return False
        except NotFoundError:
            pass

        def write() -> None:
            backend._ensure_space(project, path)
            backend._set_attribute(backend._space_kref(project, path), _KM_CREATED, created_at)
        self.actions.append(write)
        return True

    def _server_item(self, kref: Kref) -> Any | None:
        text = str(kref)
        if text not in self.items:
            try:
                self.items[text] = self.backend._get_item(kref)
            except NotFoundError:
                self.items[text] = None
        return self.items[text]

    def item(self, record: dict[str, Any]) -> bool:
        backend = self.backend
        kref, key, metadata, last_number, created_at = _read_item(record)
        text = str(kref)
        existing = self._server_item(kref)
        if existing is not None or text in self.new_items:
            held = existing.metadata.get(_KM_KEY) if existing is not None else self.new_items[text]["key"]
            if held != key:
                raise ConflictError(f"{kref} exists here with key {held!r}, the import says {key!r}")
            if existing is not None:
                def raise_last() -> None:
                    current = backend._json_field(backend._get_item(kref).metadata, _KM_LAST, 0)
                    if not isinstance(current, int) or current < last_number:
                        backend._set_attribute(existing.kref.uri, _KM_LAST, str(last_number))
                self.actions.append(raise_last)
            return False
        if key is not None:
            holder = self.keys.get((kref.project, kref.space, key))
            if holder is None and backend._item_by_key_pb(kref.project, kref.space, key) is not None:
                holder = "the server"
            if holder is not None:
                raise ConflictError(f"key {key!r} is held by another item in {kref.project}/{kref.space}")
            self.keys[(kref.project, kref.space, key)] = text
        self.new_items[text] = {"key": key}
        deprecated = bool(record.get("deprecated"))

        def write() -> None:
            backend._ensure_space(kref.project, kref.space)
            item = backend._call("CreateItem", backend._pb.CreateItemRequest(
                parent_path=backend._space_path(kref.project, kref.space), item_name=kref.name, kind=kref.kind,
                exists_error=True), idempotent=False)
            self.created.append(item.kref)
            uri = item.kref.uri
            backend._set_attribute(uri, _KM_META, canonical_json(metadata))
            backend._set_attribute(uri, _KM_CREATED, created_at)
            backend._set_attribute(uri, _KM_LAST, str(last_number))
            if key is not None:
                backend._set_attribute(uri, _KM_KEY, key)
                backend._set_attribute(backend._space_kref(kref.project, kref.space), backend._key_attribute(key),
                                       kref.item)
            if deprecated:
                self.finish.append(lambda: backend._call("SetDeprecated", backend._pb.SetDeprecatedRequest(
                    kref=item.kref, deprecated=True)))
        self.actions.append(write)
        return True

    finish: list[Callable[[], None]]

    def _known_item(self, kref: Kref) -> None:
        if str(kref.item_kref()) not in self.new_items and self._server_item(kref.item_kref()) is None:
            raise NotFoundError(f"no such item: {kref.item_kref()}")

    def _revision_known(self, kref: Kref) -> bool:
        text = str(kref)
        if text in self.revisions:
            return True
        item = self._server_item(kref.item_kref())
        if item is None:
            return False
        try:
            rev = self.backend._revision_pb(item.kref.uri, kref.revision)
        except NotFoundError:
            return False
        self.revisions[text] = {"server": rev}
        return True

    def revision(self, record: dict[str, Any]) -> bool:
        backend = self.backend
        kref, title, content, metadata, created_at = _read_revision(record)
        self._known_item(kref)
        if self._revision_known(kref):
            known = self.revisions[str(kref)]
            if "server" in known:
                current = backend._record(known["server"], False)
                same = (current.title, current.content, canonical_json(dict(current.metadata)), current.created_at)
            else:
                same = known["fields"]
            if same != (title, content, canonical_json(metadata), created_at):
                raise ConflictError(f"{kref} exists here with different content; revisions are immutable")
            return False
        self.revisions[str(kref)] = {"fields": (title, content, canonical_json(metadata), created_at)}
        deprecated = bool(record.get("deprecated"))

        def write() -> None:
            rev = backend._create_revision(str(kref.item_kref()), backend._encode_revision(
                title, content, metadata, created_at=created_at), kref.revision)
            if deprecated:
                self.finish.append(lambda: backend._call("SetDeprecated", backend._pb.SetDeprecatedRequest(
                    kref=rev.kref, deprecated=True)))
            if is_message(metadata):
                self.messages.append((kref, metadata, created_at))
        self.actions.append(write)
        return True

    messages: list[tuple[Kref, dict[str, Any], str]]

    def _check_revision(self, kref: Kref) -> None:
        self._known_item(kref)
        if not self._revision_known(kref):
            raise NotFoundError(f"no revision for {kref}")

    def artifact(self, record: dict[str, Any]) -> bool:
        backend = self.backend
        kref, name, location, metadata, created_at = _read_artifact(record)
        self._check_revision(kref)
        known = self.revisions[str(kref)]
        if "server" in known:
            try:
                backend._call("GetArtifact", backend._pb.GetArtifactRequest(revision_kref=known["server"].kref, name=name))
                return False
            except NotFoundError:
                pass
        names = known.setdefault("artifacts", set())
        if name in names:
            return False
        names.add(name)
        self.actions.append(lambda: backend._put_artifact(str(kref), name, location, metadata, created_at))
        return True

    def tag_event(self, record: dict[str, Any]) -> bool:
        kref = _record_kref(record, "item_kref", bare=True)
        tag = validate_tag(record["tag"])
        self._known_item(kref)
        number = record.get("revision")
        if number is not None:
            self._check_revision(kref.with_revision(number))
        at = _record_instant(record, "at")
        text = str(kref)
        if text not in self.tag_events:
            item = self._server_item(kref)
            self.tag_events[text] = self.backend._tag_events(item) if item is not None else []
        self.touched_tags.add((text, tag))
        event = [tag, number, at]
        if event in self.tag_events[text]:
            return False
        self.tag_events[text].append(event)
        return True

    def edge(self, record: dict[str, Any]) -> bool:
        backend = self.backend
        source = _record_kref(record, "source_kref", revision=True)
        target = _record_kref(record, "target_kref", revision=True)
        self._check_revision(source)
        self._check_revision(target)
        if source == target:
            raise InvalidArgumentError("an edge joins two different revisions")
        edge_type = validate_edge_type(record["edge_type"])
        metadata = _record_object(record, "metadata")
        created_at = _record_instant(record, "created_at")
        known = self.revisions[str(source)]
        if "server" in known:
            for edge in backend._edges_pb(str(source), "outgoing", edge_type):
                if edge.target_kref.uri == str(target):
                    return False
        planned = known.setdefault("edges", set())
        if (str(target), edge_type) in planned:
            return False
        planned.add((str(target), edge_type))
        encoded = {_KM_META: canonical_json(metadata), _KM_CREATED: created_at}
        self.actions.append(lambda: backend._put_edge(str(source), str(target), edge_type, encoded))
        return True

    def run(self) -> None:
        backend = self.backend
        self.finish = []
        self.messages = []
        try:
            for action in self.actions:
                action()
            for item_text, events in self.tag_events.items():
                backend._set_attribute(item_text, _KM_TAGS, canonical_json(events))
            for item_text, tag in sorted(self.touched_tags):
                ordered = [event for _, event in sorted(enumerate(self.tag_events[item_text]),
                                                        key=lambda pair: (pair[1][2], pair[0])) if event[0] == tag]
                number = ordered[-1][1] if ordered else None
                item_kref = Kref.parse(item_text)
                if number is not None:
                    rev = backend._revision_pb(item_text, number)
                    backend._tag(rev, tag, log=False)
                else:
                    for rev in backend._revisions_pb(item_text):
                        if tag in rev.tags:
                            backend._call("UnTagRevision", backend._pb.UnTagRevisionRequest(kref=rev.kref, tag=tag))
                del item_kref
            for step in self.finish:
                step()
            self._continue_threads()
        except BaseException:
            for kref in reversed(self.created):
                with contextlib.suppress(Exception):
                    backend._call("DeleteItem", backend._pb.DeleteItemRequest(kref=kref, force=True))
            raise

    def _continue_threads(self) -> None:
        """Point each imported thread at its newest message (by time), so the next message follows it."""
        backend = self.backend
        newest: dict[tuple[str, str, str], tuple[str, str]] = {}
        for kref, metadata, created_at in self.messages:
            key = (kref.project, kref.space, backend._thread_attribute(metadata))
            newest[key] = max(newest.get(key, ("", "")), (created_at, str(kref)))
        for (project, space, attribute), (created_at, kref_text) in newest.items():
            space_uri = backend._space_kref(project, space)
            pointer = backend._call("GetAttribute", backend._pb.GetAttributeRequest(kref=backend._pb_kref(space_uri),
                                                                                    key=attribute))
            if pointer.exists and pointer.value:
                try:
                    current = backend._record(backend._call("GetRevision", backend._pb.KrefRequest(
                        kref=backend._pb_kref(pointer.value))), False)
                    if current.created_at > created_at:
                        continue
                except NotFoundError:
                    pass
            backend._set_attribute(space_uri, attribute, kref_text)


# ==========================================================================================================
# 9. Working memory
# ==========================================================================================================
#
# A session's short-term memory: the messages of one conversation, kept for a sliding hour until
# consolidation turns them into long-term memories. Both buffers address their data with kumiho-memory's
# Redis key schema, so the in-process buffer is a faithful stand-in for Redis and the Redis buffer can share a
# server with the reference implementation:
#
#     kumiho:memory:[TENANT:]PROJECT:sessions:SESSION:messages   list of JSON {role, content, timestamp, metadata}
#     kumiho:memory:[TENANT:]PROJECT:sessions:SESSION:metadata   hash of strings (user_id, context, ...)
#     kumiho:memory:[TENANT:]session_seq:USER:YYYYMMDD           counter, 48 h
#     kumiho:memory:[TENANT:]session_gen:BASE                    counter, 24 h
#     kumiho:memory:[TENANT:]active_session:CONTEXT:USER         session id, 24 h, claimed with SET NX
#
# A session's list and hash share one sliding TTL: adding a message, setting metadata and reading a non-empty
# list all push both expiries to ``default_ttl`` from now. Tenants and projects may not be named like the
# fixed key segments, so no two (tenant, project, session) triples can ever share a key.

WORKING_MEMORY_TTL = 3600                 # seconds a session lives after its last write or non-empty read
MAX_MESSAGE_BYTES = 64 * 1024             # per message content, and per message metadata, in UTF-8 bytes
MESSAGE_ROLES = ("user", "assistant", "system", "tool")
SESSION_SEQUENCE_TTL = 48 * 3600
ACTIVE_SESSION_TTL = 24 * 3600
SESSION_GENERATION_TTL = 24 * 3600
DEFAULT_SESSION_CONTEXT = "mcp"
SESSION_SOURCES = ("request", "host-env", "active-pointer", "generated")

# Read only by WorkingMemoryConfig.from_env and RedisMemoryBuffer's constructor (merge into
# ENVIRONMENT_VARIABLES):

_KEY_ROOT = "kumiho:memory"
_RESERVED_KEY_SEGMENTS = frozenset({"sessions", "session_seq", "session_gen", "active_session"})
_WM_IDENTIFIER = re.compile(r"^[^\s\x00-\x1f\x7f]{1,256}$")            # session ids, user ids: no blanks
_WM_CONTEXT = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$")         # no ':' so pointer keys stay unambiguous
_WM_DATE = re.compile(r"^\d{8}$")
_REDIS_RETRY_DELAY = 0.05                 # the reference retries a failed Redis call once, after 50 ms
_REDIS_SCHEMES = ("redis://", "rediss://", "unix://")

# Delete a key only while it still holds the value the caller expects (one atomic step on the server).
_DELETE_IF_EQUAL = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""
_EXPIRE_IF_EQUAL = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('EXPIRE', KEYS[1], ARGV[2]) end
return 0
"""


class MessageTooLargeError(InvalidArgumentError):
    """A message (its content or its metadata) is over ``MAX_MESSAGE_BYTES``; nothing was stored.

    Attributes:
        size: the size in UTF-8 bytes. limit: the limit in bytes.
    """

    def __init__(self, what: str, size: int, limit: int = MAX_MESSAGE_BYTES) -> None:
        super().__init__(f"{what} is {size} bytes (UTF-8), over the {limit}-byte limit ({limit // 1024} KiB); "
                         f"nothing was stored: split it, or keep the bulk as an artifact")
        self.size = size
        self.limit = limit


def _wm_segment(value: Any, what: str) -> str:
    """A tenant or project name: a kref segment that is not one of the fixed key segments."""
    text = _check_pattern(value, SEGMENT_PATTERN, what, InvalidArgumentError)
    if text in _RESERVED_KEY_SEGMENTS:
        raise InvalidArgumentError(f"{what} may not be {text!r}: that name is a fixed part of working-memory keys")
    return text


def _wm_identifier(value: Any, what: str) -> str:
    if not isinstance(value, str) or not _WM_IDENTIFIER.match(value):
        raise InvalidArgumentError(f"{what} must be 1-256 characters without spaces or control characters, "
                                   f"not {value!r}")
    return value


def _wm_context(value: Any) -> str:
    return _check_pattern(value, _WM_CONTEXT, "context", InvalidArgumentError)


def _wm_seconds(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidArgumentError(f"{what} must be a whole number of seconds >= 1, not {value!r}")
    return value


def _wm_count(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidArgumentError(f"{what} must be a whole number >= 0, not {value!r}")
    return value


def _utf8_size(text: str, what: str) -> int:
    try:
        return len(text.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise InvalidArgumentError(f"{what} is not valid Unicode text ({exc.reason})") from exc


def _text(value: Any) -> str:
    """A Redis reply as text (clients without ``decode_responses`` answer bytes)."""
    return value.decode("utf-8") if isinstance(value, (bytes, bytearray)) else str(value)


def _decode_message(record: str, session_id: str) -> dict[str, Any]:
    """One stored message as ``{role, content, timestamp, metadata}``.

    Raises:
        StoreError: the stored record is not a JSON object (another program wrote under our key).
    """
    try:
        value = json.loads(record)
    except ValueError as exc:
        raise StoreError(f"a working-memory message of session {session_id!r} is not JSON; another program "
                         f"may be writing under kumiho's keys") from exc
    if not isinstance(value, dict):
        raise StoreError(f"a working-memory message of session {session_id!r} is not a JSON object")
    metadata = value.get("metadata")
    return {"role": str(value.get("role", "")), "content": str(value.get("content", "")),
            "timestamp": str(value.get("timestamp", "")),
            "metadata": metadata if isinstance(metadata, dict) else {}}


class _KeySchema:
    """The reference's key names, under one tenant (or none)."""

    def __init__(self, tenant: str | None) -> None:
        self.root = f"{_KEY_ROOT}:{tenant}" if tenant else _KEY_ROOT

    def sessions(self, project: str) -> str:
        return f"{self.root}:{project}:sessions:"

    def messages(self, project: str, session_id: str) -> str:
        return f"{self.sessions(project)}{session_id}:messages"

    def metadata(self, project: str, session_id: str) -> str:
        return f"{self.sessions(project)}{session_id}:metadata"

    def lease(self, project: str, session_id: str) -> str:
        return f"{self.sessions(project)}{session_id}:consolidating"

    def sequence(self, user_canonical_id: str, date_str: str) -> str:
        return f"{self.root}:session_seq:{user_canonical_id}:{date_str}"

    def generation(self, base: str) -> str:
        return f"{self.root}:session_gen:{base}"

    def active(self, context: str, user_id: str) -> str:
        return f"{self.root}:active_session:{context}:{user_id}"


def _one_of(ours: Any, upstream: Any, name: str, upstream_name: str) -> Any:
    """An argument given under our name or upstream's (not both, differently)."""
    if ours is not None and upstream is not None and ours != upstream:
        raise InvalidArgumentError(f"give {name} or {upstream_name}, not both")
    value = ours if ours is not None else upstream
    if value is None:
        raise InvalidArgumentError(f"{name} is missing")
    return value


class WorkingMemoryBuffer(abc.ABC):
    """Per-session message buffers, session metadata, session pointers and counters, all with expiry.

    The public methods (async, named as in kumiho-memory's ``RedisMemoryBuffer``) validate their arguments,
    build keys and shape results here, once; a backend implements only the twelve storage primitives at the end
    of this class, which behave like the Redis commands named in their docstrings. Use it with
    ``async with``, or call ``close()``.

    Args:
        clock: time for message timestamps (and, on the in-process buffer, for expiry).
        default_ttl: seconds a session lives after its last write or non-empty read.
        tenant: keeps this tenant's keys apart from every other tenant's; None for no tenant segment.
    """

    def __init__(self, *, clock: Clock | None = None, default_ttl: int = WORKING_MEMORY_TTL,
                 tenant: str | None = None) -> None:
        self.clock: Clock = clock or SystemClock()
        self.default_ttl = _wm_seconds(default_ttl, "default_ttl")
        self.tenant = None if tenant is None else _wm_segment(tenant, "tenant")
        self._keys = _KeySchema(self.tenant)

    # -- messages ----------------------------------------------------------------------------------------

    async def add_message(self, *, project: str, session_id: str, role: str, content: str,
                          metadata: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Append a message to a session and slide the session's expiry.

        Args:
            project: the project the session belongs to. session_id: the session.
            role: one of ``MESSAGE_ROLES``. content: the text, at most ``MAX_MESSAGE_BYTES`` in UTF-8.
            metadata: JSON-serializable details kept with the message (at most ``MAX_MESSAGE_BYTES``).

        Returns:
            ``{"message_id": "SESSION:N", "message_count": N, "created_bucket": N == 1}``.

        Raises:
            MessageTooLargeError: the content or metadata is too large (nothing is stored).
            InvalidArgumentError: a malformed argument. ServiceError / StoreError: the backend failed.
        """
        project = _wm_segment(project, "project")
        session_id = _wm_identifier(session_id, "session_id")
        if role not in MESSAGE_ROLES:
            raise InvalidArgumentError(f"role must be one of {', '.join(MESSAGE_ROLES)}, not {role!r}")
        if not isinstance(content, str):
            raise InvalidArgumentError(f"content must be text, not {type(content).__name__}")
        size = _utf8_size(content, "message content")
        if size > MAX_MESSAGE_BYTES:
            raise MessageTooLargeError("message content", size)
        if metadata is not None and not isinstance(metadata, Mapping):
            raise InvalidArgumentError(f"metadata must be a mapping, not {type(metadata).__name__}")
        # a secret never reaches the buffer, whoever calls: it becomes a placeholder here (see screen_for_store)
        content = screen_for_store(content, field="message content")
        metadata_json = canonical_json(screen_for_store(dict(metadata or {}), field="message metadata"))
        metadata_size = _utf8_size(metadata_json, "message metadata")
        if metadata_size > MAX_MESSAGE_BYTES:
            raise MessageTooLargeError("message metadata", metadata_size)
        record = canonical_json({"role": role, "content": content, "timestamp": format_instant(self.clock.now()),
                                 "metadata": json.loads(metadata_json)})
        count = await self._append(self._keys.messages(project, session_id),
                                   self._keys.metadata(project, session_id), record, self.default_ttl)
        return {"message_id": f"{session_id}:{count}", "message_count": count, "created_bucket": count == 1}

    async def get_messages(self, *, project: str, session_id: str, limit: int = 10,
                           offset: int = 0) -> dict[str, Any]:
        """Read the last ``limit`` messages before the newest ``offset`` ones, oldest first.

        A read of a non-empty session slides its expiry.

        Args:
            project: the project. session_id: the session.
            limit: how many messages at most. offset: how many of the newest messages to pass over.

        Returns:
            ``{"messages": [{role, content, timestamp, metadata}], "message_count": total in the session,
            "ttl_remaining": seconds until the session expires, or None when it holds nothing}``.

        Raises:
            InvalidArgumentError: a malformed argument. ServiceError / StoreError: the backend failed.
        """
        project = _wm_segment(project, "project")
        session_id = _wm_identifier(session_id, "session_id")
        limit = _wm_count(limit, "limit")
        offset = _wm_count(offset, "offset")
        # LRANGE -limit-offset .. -1-offset; LRANGE 1 0 is the empty range, for limit 0.
        start, stop = (-limit - offset, -1 - offset) if limit else (1, 0)
        records, count, ttl_remaining = await self._read_list(
            self._keys.messages(project, session_id), self._keys.metadata(project, session_id), start, stop,
            self.default_ttl)
        return {"messages": [_decode_message(record, session_id) for record in records],
                "message_count": count, "ttl_remaining": ttl_remaining if count else None}

    async def clear_session(self, project: str, session_id: str) -> int:
        """Delete a session's messages and metadata.

        Args:
            project: the project. session_id: the session.

        Returns:
            How many messages were removed (0 when the session did not exist).

        Raises:
            InvalidArgumentError: a malformed argument. ServiceError / StoreError: the backend failed.
        """
        project = _wm_segment(project, "project")
        session_id = _wm_identifier(session_id, "session_id")
        return await self._delete_session(self._keys.messages(project, session_id),
                                          self._keys.metadata(project, session_id))

    async def consume_messages(self, *, project: str, session_id: str, count: int,
                               first: Mapping[str, Any] | None = None) -> int:
        """Remove a session's ``count`` oldest messages (the ones a consolidation stored), keeping any that
        arrived meanwhile; when none remain the session and its metadata go too. With ``first`` (the oldest
        message as it was read) nothing is removed unless the session still starts with it (it was not
        cleared or expired and refilled meanwhile).

        Returns:
            How many messages remain, or -1 when ``first`` no longer heads the session (nothing removed).
        """
        project = _wm_segment(project, "project")
        session_id = _wm_identifier(session_id, "session_id")
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise InvalidArgumentError(f"count must be a non-negative integer, not {count!r}")
        head = "" if first is None else f"{first.get('timestamp', '')}\n{first.get('content', '')}"
        return await self._consume(self._keys.messages(project, session_id), self._keys.metadata(project, session_id),
                                   count, head)

    async def pop_message(self, *, project: str, session_id: str) -> dict[str, Any] | None:
        """Remove and return a session's newest message (like Redis RPOP), or None when it holds none; when
        none remain the session and its metadata go too.

        Raises:
            InvalidArgumentError: a malformed argument. ServiceError / StoreError: the backend failed.
        """
        project = _wm_segment(project, "project")
        session_id = _wm_identifier(session_id, "session_id")
        record = await self._pop(self._keys.messages(project, session_id), self._keys.metadata(project, session_id))
        return None if record is None else _decode_message(record, session_id)

    async def acquire_session_lease(self, *, project: str, session_id: str, owner: str, ttl_seconds: int = 600) -> bool:
        """Claim a session for one consolidation across processes (SET NX with expiry); False when another
        owner holds it."""
        key = self._keys.lease(_wm_segment(project, "project"), _wm_identifier(session_id, "session_id"))
        return await self._set_string(key, owner, _wm_seconds(ttl_seconds, "ttl_seconds"), True)

    async def session_lease_owner(self, *, project: str, session_id: str) -> str | None:
        """Who holds a session's consolidation lease, or None."""
        return await self._get_string(self._keys.lease(_wm_segment(project, "project"),
                                                       _wm_identifier(session_id, "session_id")))

    async def release_session_lease(self, *, project: str, session_id: str, owner: str) -> bool:
        """Give up a claim (only ``owner``'s own)."""
        key = self._keys.lease(_wm_segment(project, "project"), _wm_identifier(session_id, "session_id"))
        return await self._delete_string(key, owner)

    async def renew_session_lease(self, *, project: str, session_id: str, owner: str, ttl_seconds: int = 600) -> bool:
        """Extend ``owner``'s claim by ``ttl_seconds`` from now; False (and nothing changed) when it is no
        longer ``owner``'s."""
        key = self._keys.lease(_wm_segment(project, "project"), _wm_identifier(session_id, "session_id"))
        return await self._expire_string(key, owner, _wm_seconds(ttl_seconds, "ttl_seconds"))

    async def list_sessions(self, project: str, limit: int = 20) -> list[str]:
        """List the sessions of a project that hold messages.

        Args:
            project: the project. limit: how many session ids at most.

        Returns:
            Session ids in ascending order (minted ids sort by user, then date and sequence).

        Raises:
            InvalidArgumentError: a malformed argument. ServiceError / StoreError: the backend failed.
        """
        prefix = self._keys.sessions(_wm_segment(project, "project"))
        limit = _wm_count(limit, "limit")
        suffix = ":messages"
        keys = await self._scan_lists(prefix, suffix)
        return sorted(key[len(prefix):-len(suffix)] for key in keys)[:limit]

    # -- session metadata -------------------------------------------------------------------------------

    async def set_session_metadata(self, project: str, session_id: str, metadata: Mapping[str, str]) -> None:
        """Merge fields into a session's metadata (like Redis HSET) and slide the session's expiry.

        Args:
            project: the project. session_id: the session.
            metadata: field names to string values, e.g. ``{"user_id": "ann", "context": "personal"}``.

        Raises:
            InvalidArgumentError: a field name or value is not a string. ServiceError / StoreError: the backend
                failed.
        """
        project = _wm_segment(project, "project")
        session_id = _wm_identifier(session_id, "session_id")
        if not isinstance(metadata, Mapping):
            raise InvalidArgumentError(f"metadata must be a mapping, not {type(metadata).__name__}")
        fields: dict[str, str] = {}
        for name, value in metadata.items():
            if not isinstance(name, str) or not name or not isinstance(value, str):
                raise InvalidArgumentError(f"session metadata maps non-empty names to strings; {str(name)[:80]!r}: a "
                                           f"{type(value).__name__} is not that (store structured values as JSON text)")
            fields[name] = value
        fields = screen_for_store(fields, field="session metadata")
        size = _utf8_size(canonical_json(fields), "session metadata")
        if size > MAX_MESSAGE_BYTES:
            raise MessageTooLargeError("session metadata", size)
        if fields:
            await self._merge_hash(self._keys.metadata(project, session_id),
                                   self._keys.messages(project, session_id), fields, self.default_ttl)

    async def get_session_metadata(self, project: str, session_id: str) -> dict[str, str]:
        """Return a session's metadata fields (``{}`` when it has none).

        Raises:
            InvalidArgumentError: a malformed argument. ServiceError / StoreError: the backend failed.
        """
        project = _wm_segment(project, "project")
        session_id = _wm_identifier(session_id, "session_id")
        return await self._read_hash(self._keys.metadata(project, session_id))

    # -- session ids: sequences, generations, active pointers --------------------------------------------

    async def next_session_sequence(self, *, user_canonical_id: str, date_str: str,
                                    ttl_seconds: int = SESSION_SEQUENCE_TTL) -> int:
        """Return the next number (1, 2, ...) of a user's sessions on one day.

        Args:
            user_canonical_id: the user as it appears in minted ids (``user-<hash>``).
            date_str: ``YYYYMMDD``. ttl_seconds: how long the counter lives after its last use.

        Raises:
            InvalidArgumentError: a malformed argument. ServiceError / StoreError: the backend failed.
        """
        user = _wm_identifier(user_canonical_id, "user_canonical_id")
        if not isinstance(date_str, str) or not _WM_DATE.match(date_str):
            raise InvalidArgumentError(f"date_str must be YYYYMMDD, not {date_str!r}")
        return await self._increment(self._keys.sequence(user, date_str), _wm_seconds(ttl_seconds, "ttl_seconds"))

    async def get_session_generation(self, base: str | None = None, *, base_session_id: str | None = None) -> int:
        """Return how many times the session ``base`` was consolidated lately (0 if never, or 24 h ago).
        ``base_session_id`` is upstream's name for ``base``.

        Raises:
            InvalidArgumentError: a malformed base. ServiceError / StoreError: the backend failed.
        """
        base = _one_of(base, base_session_id, "base", "base_session_id")
        value = await self._get_string(self._keys.generation(_wm_identifier(base, "base")))
        return int(value) if value is not None else 0

    async def bump_session_generation(self, base: str | None = None, *, base_session_id: str | None = None) -> int:
        """Count one more consolidation of the session ``base`` (upstream: ``base_session_id``) and return the
        new generation.

        Raises:
            InvalidArgumentError: a malformed base. ServiceError / StoreError: the backend failed.
        """
        base = _one_of(base, base_session_id, "base", "base_session_id")
        return await self._increment(self._keys.generation(_wm_identifier(base, "base")), SESSION_GENERATION_TTL)

    async def get_active_session(self, *, context: str, user_id: str | None = None,
                                 user_canonical_id: str | None = None) -> str | None:
        """Return the session id a user's pointer names in a context, or None (``user_canonical_id`` is
        upstream's name for ``user_id``).

        Raises:
            InvalidArgumentError: a malformed argument. ServiceError / StoreError: the backend failed.
        """
        user_id = _one_of(user_id, user_canonical_id, "user_id", "user_canonical_id")
        return await self._get_string(self._keys.active(_wm_context(context), _wm_identifier(user_id, "user_id")))

    async def set_active_session(self, *, context: str, session_id: str, user_id: str | None = None,
                                 ttl_seconds: int = ACTIVE_SESSION_TTL, nx: bool = False,
                                 user_canonical_id: str | None = None) -> bool:
        """Point a user's active session in a context at ``session_id``.

        Args:
            context: e.g. ``mcp`` or ``personal``. user_id: the user (upstream: ``user_canonical_id``).
            session_id: the session.
            ttl_seconds: how long the pointer lives.
            nx: claim only if no pointer exists (atomic: of racing claims exactly one wins).

        Returns:
            True when the pointer was written; False when ``nx`` and another session holds it.

        Raises:
            InvalidArgumentError: a malformed argument. ServiceError / StoreError: the backend failed.
        """
        user_id = _one_of(user_id, user_canonical_id, "user_id", "user_canonical_id")
        key = self._keys.active(_wm_context(context), _wm_identifier(user_id, "user_id"))
        return await self._set_string(key, _wm_identifier(session_id, "session_id"),
                                      _wm_seconds(ttl_seconds, "ttl_seconds"), bool(nx))

    async def clear_active_session(self, *, context: str, user_id: str | None = None, only_if: str | None = None,
                                   user_canonical_id: str | None = None) -> bool:
        """Remove a user's active-session pointer in a context.

        Args:
            context: the context. user_id: the user (upstream: ``user_canonical_id``).
            only_if: remove it only while it still names this session (atomic compare-and-delete).

        Returns:
            True when a pointer was removed.

        Raises:
            InvalidArgumentError: a malformed argument. ServiceError / StoreError: the backend failed.
        """
        user_id = _one_of(user_id, user_canonical_id, "user_id", "user_canonical_id")
        key = self._keys.active(_wm_context(context), _wm_identifier(user_id, "user_id"))
        expected = None if only_if is None else _wm_identifier(only_if, "only_if")
        return await self._delete_string(key, expected)

    # -- lifecycle ---------------------------------------------------------------------------------------

    @abc.abstractmethod
    async def close(self) -> None:
        """Release the backend; closing twice is harmless."""

    async def __aenter__(self) -> "WorkingMemoryBuffer":
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.close()

    # -- storage primitives (what a backend implements) ---------------------------------------------------

    @abc.abstractmethod
    async def _append(self, list_key: str, hash_key: str, record: str, ttl: int) -> int:
        """RPUSH ``record``; EXPIRE both keys ``ttl``; return the new length."""

    @abc.abstractmethod
    async def _read_list(self, list_key: str, hash_key: str, start: int, stop: int,
                         ttl: int) -> tuple[list[str], int, int | None]:
        """LRANGE start stop and LLEN; when the list is non-empty EXPIRE both keys ``ttl``.
        Return (records, length, seconds left or None)."""

    @abc.abstractmethod
    async def _merge_hash(self, hash_key: str, list_key: str, fields: dict[str, str], ttl: int) -> None:
        """HSET ``fields``; EXPIRE both keys ``ttl``."""

    @abc.abstractmethod
    async def _read_hash(self, hash_key: str) -> dict[str, str]:
        """HGETALL."""

    @abc.abstractmethod
    async def _delete_session(self, list_key: str, hash_key: str) -> int:
        """LLEN then DEL both keys, atomically; return the length."""

    @abc.abstractmethod
    async def _consume(self, list_key: str, hash_key: str, count: int, head: str) -> int:
        """Unless ``head`` ("timestamp\\ncontent" of the first record, "" for any) differs from the list's first
        record (then -1): LTRIM list count -1, and DEL both keys when the list is empty; atomically; return
        what remains."""

    @abc.abstractmethod
    async def _pop(self, list_key: str, hash_key: str) -> str | None:
        """RPOP, and DEL both keys when the list is then empty; atomically; return the record or None."""

    @abc.abstractmethod
    async def _scan_lists(self, prefix: str, suffix: str) -> list[str]:
        """Every live key that starts with ``prefix`` and ends with ``suffix`` (SCAN MATCH)."""

    @abc.abstractmethod
    async def _increment(self, key: str, ttl: int) -> int:
        """INCR then EXPIRE ``ttl``, atomically; return the new value."""

    @abc.abstractmethod
    async def _get_string(self, key: str) -> str | None:
        """GET."""

    @abc.abstractmethod
    async def _set_string(self, key: str, value: str, ttl: int, nx: bool) -> bool:
        """SET key value EX ttl [NX]; return whether it was written."""

    @abc.abstractmethod
    async def _delete_string(self, key: str, only_if: str | None) -> bool:
        """DEL, or delete only while the value equals ``only_if`` (atomically); return whether it was."""

    @abc.abstractmethod
    async def _expire_string(self, key: str, only_if: str, ttl: int) -> bool:
        """EXPIRE ``ttl`` only while the value equals ``only_if`` (atomically); return whether it was."""


async def resolve_session_id(buffer: WorkingMemoryBuffer, *, user_id: str | None = None, context: str | None = None,
                             session_id: str | None = None, environ: Mapping[str, str] | None = None,
                             clock: Clock | None = None, project: str | None = None) -> tuple[str, str]:
    """Decide which session a message belongs to, in the reference's order.

    1. ``session_id`` given (a hosted request's id): it, source ``"request"``.
    2. No ``user_id``: ``KUMIHO_SESSION_ID`` from ``environ``, plus ``:c<N>`` once the session was
       consolidated N times (see ``bump_session_generation``), source ``"host-env"``.
    3. The user's active pointer for ``(context or "mcp", user_id)``, source ``"active-pointer"``.
    4. A new id ``CONTEXT:user-<sha256(user_id)[:10]>:YYYYMMDD:NNN`` claimed with an atomic NX pointer; a
       caller that loses the race adopts the winner's id. Source ``"generated"``.

    Args:
        buffer: the working memory holding pointers and counters.
        user_id: the user, if known. context: the pointer's context (default ``"mcp"``).
        session_id: an explicit session id. environ: where ``KUMIHO_SESSION_ID`` is read (default
            ``os.environ``, read at call time). clock: the date for minted ids (default the buffer's clock).
        project: when given, a newly minted session is stamped with ``{user_id, context}`` metadata there.

    Returns:
        ``(session_id, source)`` with source one of ``SESSION_SOURCES``.

    Raises:
        InvalidArgumentError: no identity at all (no session id, no user, no ``KUMIHO_SESSION_ID``), or a
            malformed one.
        ServiceError: the pointer kept changing under three claims in a row (retry).
    """
    if session_id:
        return _wm_identifier(session_id, "session_id"), "request"
    if not user_id:
        environ = os.environ if environ is None else environ
        base = (environ.get("KUMIHO_SESSION_ID") or "").strip()
        if not base:
            raise InvalidArgumentError("no session identity: pass session_id= or user_id=, or set KUMIHO_SESSION_ID")
        base = _wm_identifier(base, "KUMIHO_SESSION_ID")
        generation = await buffer.get_session_generation(base)
        return (f"{base}:c{generation}" if generation else base), "host-env"
    user_id = _wm_identifier(user_id, "user_id")
    context = _wm_context(context or DEFAULT_SESSION_CONTEXT)
    pointer = await buffer.get_active_session(context=context, user_id=user_id)
    if pointer:
        return pointer, "active-pointer"
    date_str = f"{(clock or buffer.clock).now():%Y%m%d}"
    canonical = "user-" + hashlib.sha256(user_id.encode("utf-8")).hexdigest()[:10]
    for _attempt in range(3):
        sequence = await buffer.next_session_sequence(user_canonical_id=canonical, date_str=date_str)
        candidate = f"{context}:{canonical}:{date_str}:{sequence:03d}"
        if await buffer.set_active_session(context=context, user_id=user_id, session_id=candidate, nx=True):
            if project is not None:
                await buffer.set_session_metadata(project=project, session_id=candidate,
                                                  metadata={"user_id": user_id, "context": context})
            return candidate, "generated"
        winner = await buffer.get_active_session(context=context, user_id=user_id)
        if winner:                                   # lost the race: adopt the winner's session
            return winner, "generated"
    raise ServiceError(f"could not claim a session for user {user_id!r} in context {context!r}: the pointer "
                       f"changed under three claims in a row; retry", transient=True)


# -- the in-process buffer: a small Redis keyspace in SQLite -----------------------------------------------

_WM_SCHEMA = """
CREATE TABLE IF NOT EXISTS wm_keys (
    key TEXT PRIMARY KEY, kind TEXT NOT NULL, value TEXT NOT NULL, expires_at REAL NOT NULL);
CREATE INDEX IF NOT EXISTS wm_keys_by_expiry ON wm_keys (expires_at);
CREATE TABLE IF NOT EXISTS wm_lists (
    key TEXT NOT NULL, position INTEGER NOT NULL, value TEXT NOT NULL,
    PRIMARY KEY (key, position)) WITHOUT ROWID;
"""


class _SQLiteKeyspace:
    """Lists, hashes, strings and counters with expiry, in two SQLite tables (``wm_keys``, ``wm_lists``).

    Blocking and thread-safe: one connection, one lock, one transaction per operation; operations that read
    then write take SQLite's write lock first (``BEGIN IMMEDIATE``) so they are atomic across processes too.
    Expired keys are invisible to reads and purged by the next write (time comes from the injected clock).
    """

    def __init__(self, path: str | None, clock: Clock, busy_timeout: float) -> None:
        self.path = ":memory:" if path is None or path == ":memory:" else path
        self._clock = clock
        self._busy_timeout = busy_timeout
        self._lock = threading.Lock()
        if self.path != ":memory:":
            # Creates the graph schema in a new file, and refuses a foreign or newer file, before we add ours.
            SQLiteGraph(self.path, clock=clock, busy_timeout=busy_timeout).close()
        try:
            conn = sqlite3.connect(self.path, timeout=busy_timeout, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as exc:
            raise self._error(exc) from exc
        self._conn: sqlite3.Connection | None = conn
        try:
            conn.execute("PRAGMA secure_delete = ON")       # a cleared message leaves no bytes behind
            conn.execute("PRAGMA synchronous = FULL")
            conn.execute("BEGIN IMMEDIATE")
            for statement in _WM_SCHEMA.split(";"):
                if statement.strip():
                    conn.execute(statement)
            conn.execute("COMMIT")
        except KumihoMemoryError:
            self.close()
            raise
        except sqlite3.Error as exc:
            self.close()
            raise self._error(exc) from exc

    def _error(self, exc: sqlite3.Error) -> StoreError:
        where = "in-memory working memory" if self.path == ":memory:" else f"working memory in {self.path!r}"
        if _busy(exc):
            return StoreBusyError(f"{where} stayed locked by another process for {self._busy_timeout:g}s ({exc}); "
                                  f"retry, or raise busy_timeout")
        return StoreError(f"{where}: {exc}")

    @contextlib.contextmanager
    def transaction(self, *, write: bool) -> Iterator[tuple[sqlite3.Connection, float]]:
        """One transaction and the clock's reading for it; a write first purges expired keys."""
        with self._lock:
            if self._conn is None:
                raise StoreClosedError("this working-memory buffer is closed")
            conn = self._conn
            now = self._clock.now().timestamp()
            try:
                conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            except sqlite3.Error as exc:
                raise self._error(exc) from exc
            try:
                if write:
                    conn.execute("DELETE FROM wm_lists WHERE key IN "
                                 "(SELECT key FROM wm_keys WHERE expires_at <= ?)", (now,))
                    conn.execute("DELETE FROM wm_keys WHERE expires_at <= ?", (now,))
                yield conn, now
                conn.execute("COMMIT")
            except BaseException as exc:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
                if isinstance(exc, sqlite3.Error):
                    raise self._error(exc) from exc
                raise

    @staticmethod
    def _live(conn: sqlite3.Connection, key: str, now: float) -> tuple[str, float] | None:
        row = conn.execute("SELECT value, expires_at FROM wm_keys WHERE key = ? AND expires_at > ?",
                           (key, now)).fetchone()
        return (row[0], row[1]) if row else None

    @staticmethod
    def _touch(conn: sqlite3.Connection, keys: Sequence[str], now: float, ttl: int) -> None:
        conn.executemany("UPDATE wm_keys SET expires_at = ? WHERE key = ?", [(now + ttl, key) for key in keys])

    def append(self, list_key: str, hash_key: str, record: str, ttl: int) -> int:
        with self.transaction(write=True) as (conn, now):
            live = self._live(conn, list_key, now)
            length = int(live[0]) if live else 0
            conn.execute("INSERT INTO wm_lists VALUES (?, ?, ?)", (list_key, length, record))
            conn.execute("INSERT OR REPLACE INTO wm_keys VALUES (?, 'list', ?, ?)",
                         (list_key, str(length + 1), now + ttl))
            self._touch(conn, [hash_key], now, ttl)
            return length + 1

    def read_list(self, list_key: str, hash_key: str, start: int, stop: int,
                  ttl: int) -> tuple[list[str], int, int | None]:
        with self.transaction(write=True) as (conn, now):
            live = self._live(conn, list_key, now)
            length = int(live[0]) if live else 0
            if not length:
                return [], 0, None
            first = max(start + length if start < 0 else start, 0)
            last = min(stop + length if stop < 0 else stop, length - 1)
            rows = conn.execute("SELECT value FROM wm_lists WHERE key = ? AND position BETWEEN ? AND ? "
                                "ORDER BY position", (list_key, first, last)).fetchall() if first <= last else []
            self._touch(conn, [list_key, hash_key], now, ttl)
            return [row[0] for row in rows], length, ttl

    def merge_hash(self, hash_key: str, list_key: str, fields: dict[str, str], ttl: int) -> None:
        with self.transaction(write=True) as (conn, now):
            live = self._live(conn, hash_key, now)
            merged = {**(json.loads(live[0]) if live else {}), **fields}
            conn.execute("INSERT OR REPLACE INTO wm_keys VALUES (?, 'hash', ?, ?)",
                         (hash_key, canonical_json(merged), now + ttl))
            self._touch(conn, [list_key], now, ttl)

    def read_hash(self, hash_key: str) -> dict[str, str]:
        with self.transaction(write=False) as (conn, now):
            live = self._live(conn, hash_key, now)
            return dict(json.loads(live[0])) if live else {}

    def delete_session(self, list_key: str, hash_key: str) -> int:
        with self.transaction(write=True) as (conn, now):
            live = self._live(conn, list_key, now)
            conn.execute("DELETE FROM wm_lists WHERE key = ?", (list_key,))
            conn.execute("DELETE FROM wm_keys WHERE key IN (?, ?)", (list_key, hash_key))
            removed = int(live[0]) if live else 0
        self._checkpoint()
        return removed

    def consume(self, list_key: str, hash_key: str, count: int, head: str) -> int:
        with self.transaction(write=True) as (conn, now):
            live = self._live(conn, list_key, now)
            length = int(live[0]) if live else 0
            if head:
                row = conn.execute("SELECT value FROM wm_lists WHERE key = ? AND position = 0", (list_key,)).fetchone()
                record = json.loads(row[0]) if row and length else {}
                if f"{record.get('timestamp', '')}\n{record.get('content', '')}" != head:
                    return -1
            remaining = max(0, length - count)
            if remaining == 0:
                conn.execute("DELETE FROM wm_lists WHERE key = ?", (list_key,))
                conn.execute("DELETE FROM wm_keys WHERE key IN (?, ?)", (list_key, hash_key))
            else:
                conn.execute("DELETE FROM wm_lists WHERE key = ? AND position < ?", (list_key, count))
                # shift down through negative positions, so no two rows ever share one
                conn.execute("UPDATE wm_lists SET position = -(position - ?) - 1 WHERE key = ?", (count, list_key))
                conn.execute("UPDATE wm_lists SET position = -position - 1 WHERE key = ?", (list_key,))
                conn.execute("UPDATE wm_keys SET value = ? WHERE key = ?", (str(remaining), list_key))
        self._checkpoint()
        return remaining

    def pop(self, list_key: str, hash_key: str) -> str | None:
        with self.transaction(write=True) as (conn, now):
            live = self._live(conn, list_key, now)
            length = int(live[0]) if live else 0
            if not length:
                return None
            row = conn.execute("SELECT value FROM wm_lists WHERE key = ? AND position = ?",
                               (list_key, length - 1)).fetchone()
            conn.execute("DELETE FROM wm_lists WHERE key = ? AND position = ?", (list_key, length - 1))
            if length == 1:
                conn.execute("DELETE FROM wm_keys WHERE key IN (?, ?)", (list_key, hash_key))
            else:
                conn.execute("UPDATE wm_keys SET value = ? WHERE key = ?", (str(length - 1), list_key))
        self._checkpoint()
        return row[0] if row else None

    def _checkpoint(self) -> None:
        """Fold the WAL into the file and truncate it, so deleted text leaves the WAL's bytes too (best effort:
        a reader in another connection may keep the WAL; the next checkpoint then finishes the job)."""
        if self.path == ":memory:":
            return
        with self._lock:
            if self._conn is not None:
                with contextlib.suppress(sqlite3.Error):
                    self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()

    def scan(self, prefix: str, suffix: str) -> list[str]:
        # Every key starting with the prefix sorts in [prefix, prefix[:-1] + chr(ord(prefix[-1]) + 1)).
        upper = prefix[:-1] + chr(ord(prefix[-1]) + 1)
        with self.transaction(write=False) as (conn, now):
            rows = conn.execute("SELECT key FROM wm_keys WHERE key >= ? AND key < ? AND kind = 'list' "
                                "AND expires_at > ?", (prefix, upper, now)).fetchall()
        return [row[0] for row in rows if row[0].endswith(suffix)]

    def increment(self, key: str, ttl: int) -> int:
        with self.transaction(write=True) as (conn, now):
            live = self._live(conn, key, now)
            value = (int(live[0]) if live else 0) + 1
            conn.execute("INSERT OR REPLACE INTO wm_keys VALUES (?, 'string', ?, ?)", (key, str(value), now + ttl))
            return value

    def get_string(self, key: str) -> str | None:
        with self.transaction(write=False) as (conn, now):
            live = self._live(conn, key, now)
            return live[0] if live else None

    def set_string(self, key: str, value: str, ttl: int, nx: bool) -> bool:
        with self.transaction(write=True) as (conn, now):
            if nx and self._live(conn, key, now):
                return False
            conn.execute("INSERT OR REPLACE INTO wm_keys VALUES (?, 'string', ?, ?)", (key, value, now + ttl))
            return True

    def delete_string(self, key: str, only_if: str | None) -> bool:
        with self.transaction(write=True) as (conn, now):
            live = self._live(conn, key, now)
            if live is None or (only_if is not None and live[0] != only_if):
                return False
            conn.execute("DELETE FROM wm_keys WHERE key = ?", (key,))
            return True

    def expire_string(self, key: str, only_if: str, ttl: int) -> bool:
        with self.transaction(write=True) as (conn, now):
            live = self._live(conn, key, now)
            if live is None or live[0] != only_if:
                return False
            conn.execute("UPDATE wm_keys SET expires_at = ? WHERE key = ?", (now + ttl, key))
            return True

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                with contextlib.suppress(sqlite3.Error):
                    if self.path != ":memory:":
                        self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
                self._conn.close()
                self._conn = None


class InProcessBuffer(WorkingMemoryBuffer):
    """The default working memory: in this process's memory, or kept in the store file so a restart keeps
    the messages not yet consolidated.

    With a ``path`` the buffer adds two tables (``wm_keys``, ``wm_lists``) to the kumiho_memory store file at
    that path, over its own SQLite connection (WAL, busy timeout, one transaction per operation). A new file
    is created as a kumiho_memory store first, so ``Memory(path)`` and ``InProcessBuffer(path)`` may be opened
    in either order; a file of another program is refused. Blocking work runs in a worker thread.

    Args:
        path: the store file, or None to keep everything in memory.
        clock: time for timestamps and expiry (a ``ManualClock`` makes TTLs testable).
        default_ttl: seconds a session lives after its last write or non-empty read.
        tenant: keeps this tenant's sessions apart from every other tenant's.
        busy_timeout: seconds a write waits for another process's lock before ``StoreBusyError``.

    Raises:
        StoreError: the file cannot be used (``CorruptStoreError`` for a file of another program).
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, *, clock: Clock | None = None,
                 default_ttl: int = WORKING_MEMORY_TTL, tenant: str | None = None,
                 busy_timeout: float = 30.0) -> None:
        super().__init__(clock=clock, default_ttl=default_ttl, tenant=tenant)
        if isinstance(busy_timeout, bool) or not isinstance(busy_timeout, (int, float)) or busy_timeout < 0:
            raise InvalidArgumentError(f"busy_timeout must be a non-negative number, not {busy_timeout!r}")
        self._space = _SQLiteKeyspace(None if path is None else os.fspath(path), self.clock, float(busy_timeout))

    @property
    def path(self) -> str:
        """The store file, or ``":memory:"``."""
        return self._space.path

    def __repr__(self) -> str:
        return f"InProcessBuffer({self.path!r}, tenant={self.tenant!r}, default_ttl={self.default_ttl})"

    async def close(self) -> None:
        """Checkpoint and close the connection; closing twice is harmless, using it afterwards raises
        ``StoreClosedError``."""
        await asyncio.to_thread(self._space.close)

    async def _append(self, list_key: str, hash_key: str, record: str, ttl: int) -> int:
        return await asyncio.to_thread(self._space.append, list_key, hash_key, record, ttl)

    async def _read_list(self, list_key: str, hash_key: str, start: int, stop: int,
                         ttl: int) -> tuple[list[str], int, int | None]:
        return await asyncio.to_thread(self._space.read_list, list_key, hash_key, start, stop, ttl)

    async def _merge_hash(self, hash_key: str, list_key: str, fields: dict[str, str], ttl: int) -> None:
        await asyncio.to_thread(self._space.merge_hash, hash_key, list_key, fields, ttl)

    async def _read_hash(self, hash_key: str) -> dict[str, str]:
        return await asyncio.to_thread(self._space.read_hash, hash_key)

    async def _delete_session(self, list_key: str, hash_key: str) -> int:
        return await asyncio.to_thread(self._space.delete_session, list_key, hash_key)

    async def _consume(self, list_key: str, hash_key: str, count: int, head: str) -> int:
        return await asyncio.to_thread(self._space.consume, list_key, hash_key, count, head)

    async def _pop(self, list_key: str, hash_key: str) -> str | None:
        return await asyncio.to_thread(self._space.pop, list_key, hash_key)

    async def _scan_lists(self, prefix: str, suffix: str) -> list[str]:
        return await asyncio.to_thread(self._space.scan, prefix, suffix)

    async def _increment(self, key: str, ttl: int) -> int:
        return await asyncio.to_thread(self._space.increment, key, ttl)

    async def _get_string(self, key: str) -> str | None:
        return await asyncio.to_thread(self._space.get_string, key)

    async def _set_string(self, key: str, value: str, ttl: int, nx: bool) -> bool:
        return await asyncio.to_thread(self._space.set_string, key, value, ttl, nx)

    async def _delete_string(self, key: str, only_if: str | None) -> bool:
        return await asyncio.to_thread(self._space.delete_string, key, only_if)

    async def _expire_string(self, key: str, only_if: str, ttl: int) -> bool:
        return await asyncio.to_thread(self._space.expire_string, key, only_if, ttl)


# -- the Redis buffer ---------------------------------------------------------------------------------------

# Remove the consumed front of a session's list and, when nothing is left, its metadata: one atomic step.
# Take the newest message off a session's list and, when nothing is left, its metadata: one atomic step.
_POP_SCRIPT = """
local record = redis.call('RPOP', KEYS[1])
if redis.call('LLEN', KEYS[1]) == 0 then redis.call('DEL', KEYS[2]) end
return record
"""

_CONSUME_SCRIPT = """
if ARGV[2] ~= '' then
  local first = redis.call('LINDEX', KEYS[1], 0)
  if not first then return -1 end
  local ok, record = pcall(cjson.decode, first)
  if not ok or (tostring(record['timestamp']) .. '\\n' .. tostring(record['content'])) ~= ARGV[2] then return -1 end
end
redis.call('LTRIM', KEYS[1], ARGV[1], -1)
local remaining = redis.call('LLEN', KEYS[1])
if remaining == 0 then redis.call('DEL', KEYS[2]) end
return remaining
"""

def _url_secrets(url: str) -> list[str]:
    """The password in a URL's user-info or ``password=`` query field, raw and decoded (to scrub messages)."""
    import urllib.parse
    found: list[str] = []
    userinfo = re.search(r"//([^/@]*)@", url)
    if userinfo and ":" in userinfo.group(1):
        found.append(userinfo.group(1).split(":", 1)[1])
    found += re.findall(r"[?&]password=([^&#]*)", url)
    return [secret for raw in found if raw for secret in {raw, urllib.parse.unquote(raw)}]


class _RedisCommands:
    """Runs raw commands on a redis-py client, sync or asyncio: one retry after 50 ms for a lost connection,
    errors mapped to ``ServiceError`` with every known password scrubbed from the message.

    An asyncio client that this buffer built is rebuilt when the running event loop changes (redis-py binds
    connections to a loop); a caller's asyncio client is used as given.
    """

    def __init__(self, redis_module: Any, client: Any, factory: Callable[[], Any] | None, where: str,
                 secrets_to_hide: Sequence[str]) -> None:
        self._errors = redis_module.exceptions
        self._client = client
        self._factory = factory
        self._sync = isinstance(client, redis_module.Redis)
        self._loop: asyncio.AbstractEventLoop | None = None
        self.where = where
        self._secrets = sorted(set(secrets_to_hide), key=len, reverse=True)

    def scrub(self, text: str) -> str:
        """``text`` with URLs' user-info and every known password replaced by ``***``."""
        text = _redact_url(text)
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text

    def _current_client(self) -> Any:
        if self._client is None:
            raise StoreClosedError("this working-memory buffer is closed")
        if self._sync:
            return self._client
        loop = asyncio.get_running_loop()
        if self._loop is not None and self._loop is not loop and self._factory is not None:
            self._client = self._factory()          # the old client's connections belong to the old loop
        self._loop = loop
        return self._client

    async def run(self, *commands: tuple[Any, ...], transaction: bool = False) -> list[Any]:
        """Run commands (in one MULTI/EXEC when ``transaction``) and return their replies.

        Raises:
            ServiceError: transient for a lost connection or timeout (after one retry); permanent for refused
                credentials or a command the server rejects.
        """
        retried = False
        while True:
            try:
                client = self._current_client()
                if self._sync:
                    return await asyncio.to_thread(self._run_sync, client, commands, transaction)
                if len(commands) == 1 and not transaction:
                    return [await client.execute_command(*commands[0])]
                if not hasattr(client, "pipeline"):      # a minimal injected client: one command at a time
                    return [await client.execute_command(*command) for command in commands]
                async with client.pipeline(transaction=transaction) as pipe:
                    for command in commands:
                        pipe.execute_command(*command)
                    return list(await pipe.execute())
            except (self._errors.AuthenticationError, self._errors.NoPermissionError) as exc:
                raise ServiceError(f"Redis at {self.where} refused the credentials ({self.scrub(str(exc))}); "
                                   f"check the user and password in the Redis URL", transient=False) from exc
            except (self._errors.ConnectionError, self._errors.TimeoutError, OSError) as exc:
                if retried:
                    raise ServiceError(f"Redis at {self.where} is unreachable ({self.scrub(str(exc))}); working "
                                       f"memory is unavailable until it answers, retry later",
                                       transient=True) from exc
                retried = True
                await asyncio.sleep(_REDIS_RETRY_DELAY)
            except self._errors.RedisError as exc:
                name = _text(commands[0][0]) if commands else "?"
                raise ServiceError(f"Redis at {self.where} rejected {name} ({self.scrub(str(exc))})",
                                   transient=False) from exc

    @staticmethod
    def _run_sync(client: Any, commands: Sequence[tuple[Any, ...]], transaction: bool) -> list[Any]:
        if len(commands) == 1 and not transaction:
            return [client.execute_command(*commands[0])]
        if not hasattr(client, "pipeline"):
            return [client.execute_command(*command) for command in commands]
        pipe = client.pipeline(transaction=transaction)
        try:
            for command in commands:
                pipe.execute_command(*command)
            return list(pipe.execute())
        finally:
            pipe.reset()

    async def close(self) -> None:
        """Close a client this buffer built (a caller's client stays open); harmless twice."""
        client, self._client = self._client, None
        if client is None or self._factory is None:
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if self._loop is None or self._loop is running:
            closer = getattr(client, "aclose", None) or client.close
            with contextlib.suppress(self._errors.RedisError, OSError):
                await closer()


def _glob_escape(text: str) -> str:
    return re.sub(r"([*?\[\]\\])", r"\\\1", text)


class _UnconfiguredRedis:
    """Stands in for a Redis connection no one configured: every command says how to configure one."""

    where = "(not configured)"

    async def run(self, *commands: tuple[Any, ...], transaction: bool = False) -> list[Any]:
        raise InvalidArgumentError("no Redis URL: pass redis_url= or client=, or set KUMIHO_REDIS_URL (or REDIS_URL)")

    def scrub(self, text: str) -> str:
        return text

    async def close(self) -> None:
        return None


class RedisMemoryBuffer(WorkingMemoryBuffer):
    """Working memory on Redis (redis-py, imported here), under the reference's key schema.

    Pointer claims are ``SET NX EX`` and the conditional pointer delete is a server-side script, so racing
    callers (in any number of processes) agree on one session. A call that loses its connection is retried
    once after 50 ms, then raises ``ServiceError(transient=True)``. Passwords never appear in an error
    message or in ``repr``.

    Args:
        redis_url: ``redis://[:password@]host:port/db``, ``rediss://...`` for TLS, or ``unix://path``;
            default ``KUMIHO_REDIS_URL``, then ``REDIS_URL``, from ``environ``.
        default_ttl: seconds a session lives after its last use (default ``WORKING_MEMORY_TTL``).
        tenant_hint, tenant_id: the tenant segment of every key (``tenant_id`` wins).
        client: a ready ``redis.asyncio.Redis`` or ``redis.Redis`` (sync calls run in a worker thread)
            instead of a URL; it is not closed by ``close()``.
        clock: time for message timestamps (expiry is Redis's own).
        environ: where the URL variables are read (default ``os.environ``, read here only).
        connection_options: extra keyword arguments for ``redis.asyncio.from_url`` (e.g. ``ssl_ca_certs``).

    Raises:
        BackendUnavailableError: redis-py is not installed (the message names the pip line).
        InvalidArgumentError: a URL that is not Redis's; with no URL anywhere, the first call raises it.

    ``control_plane_url``, ``discovery_timeout``, ``force_refresh``, ``prefer_discovery`` and ``proxy_url``
    are upstream's hosted-discovery options: accepted, and they change nothing here. An injected client
    without ``pipeline()`` works too; its multi-command steps then run one command at a time (not atomic).
    """

    def __init__(self, redis_url: str | None = None, *, default_ttl: int | None = None,
                 tenant_hint: str | None = None, tenant_id: str | None = None, client: Any = None,
                 clock: Clock | None = None, environ: Mapping[str, str] | None = None,
                 connection_options: Mapping[str, Any] | None = None, control_plane_url: str | None = None,
                 discovery_timeout: float = 10.0, force_refresh: bool = False, prefer_discovery: bool = True,
                 proxy_url: str | None = None) -> None:
        super().__init__(clock=clock, default_ttl=WORKING_MEMORY_TTL if default_ttl is None else default_ttl,
                         tenant=tenant_id or tenant_hint)
        redis_module = _require("redis", extra="redis")
        if client is not None:                    # upstream's order: an explicit client wins over any URL
            kwargs = getattr(getattr(client, "connection_pool", None), "connection_kwargs", {}) or {}
            where = (f"redis://{kwargs.get('host', '?')}:{kwargs.get('port', '?')}/{kwargs.get('db', 0)}"
                     if "host" in kwargs else str(kwargs.get("path") or "the given client"))
            hidden = [str(kwargs["password"])] if kwargs.get("password") else []
            self._commands = _RedisCommands(redis_module, client, None, where, hidden)
            return
        environ = os.environ if environ is None else environ
        url = redis_url or environ.get("KUMIHO_REDIS_URL") or environ.get("REDIS_URL")
        if not url:                               # upstream builds lazily: the first command says what is missing
            self._commands = _UnconfiguredRedis()
            return
        hidden = _url_secrets(url)
        where = _redact_url(url)
        for secret in hidden:
            where = where.replace(secret, "***")
        if not url.startswith(_REDIS_SCHEMES):
            raise InvalidArgumentError(f"not a Redis URL: {where!r} (use redis://, rediss:// or unix://)")
        factory = self._client_factory(url, dict(connection_options or {}))
        try:
            built = factory()
        except (ValueError, TypeError) as exc:
            message = str(exc)
            for secret in hidden:
                message = message.replace(secret, "***")
            raise InvalidArgumentError(f"bad Redis URL {where!r}: {_redact_url(message)}") from None
        self._commands = _RedisCommands(redis_module, built, factory, where, hidden)

    @staticmethod
    def _client_factory(url: str, options: dict[str, Any]) -> Callable[[], Any]:
        """A closure that builds asyncio clients (it keeps the URL out of ``vars(buffer)``)."""
        asyncio_redis = _require("redis.asyncio", extra="redis")
        retry_module = _require("redis.asyncio.retry", extra="redis")
        backoff = _require("redis.backoff", extra="redis")
        # Our own single retry replaces redis-py's default backoff, so an outage is reported in ~50 ms.
        options.setdefault("retry", retry_module.Retry(backoff.NoBackoff(), 0))
        options.setdefault("socket_connect_timeout", 5.0)
        options.setdefault("socket_timeout", 5.0)
        options["decode_responses"] = True
        return lambda: asyncio_redis.from_url(url, **options)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **options: Any) -> "RedisMemoryBuffer":
        """A buffer configured by ``KUMIHO_REDIS_URL``/``REDIS_URL`` and ``KUMIHO_WORKING_MEMORY_TTL``.

        Raises:
            InvalidArgumentError: a variable is malformed, or no URL is set.
        """
        config = WorkingMemoryConfig.from_env(environ)
        options.setdefault("default_ttl", config.ttl)
        return cls(config.redis_url, environ={}, **options)

    def __repr__(self) -> str:
        return f"RedisMemoryBuffer({self._commands.where!r}, tenant={self.tenant!r}, default_ttl={self.default_ttl})"

    async def close(self) -> None:
        """Close the client this buffer built (a caller's client stays open); closing twice is harmless."""
        await self._commands.close()

    async def _append(self, list_key: str, hash_key: str, record: str, ttl: int) -> int:
        replies = await self._commands.run(("RPUSH", list_key, record), ("EXPIRE", list_key, ttl),
                                           ("EXPIRE", hash_key, ttl), transaction=True)
        return int(replies[0])

    async def _read_list(self, list_key: str, hash_key: str, start: int, stop: int,
                         ttl: int) -> tuple[list[str], int, int | None]:
        length, records = await self._commands.run(("LLEN", list_key), ("LRANGE", list_key, start, stop),
                                                   transaction=True)
        if not int(length):
            return [], 0, None
        replies = await self._commands.run(("EXPIRE", list_key, ttl), ("EXPIRE", hash_key, ttl),
                                           ("TTL", list_key), transaction=True)
        remaining = int(replies[2])
        return [_text(record) for record in records], int(length), remaining if remaining >= 0 else None

    async def _merge_hash(self, hash_key: str, list_key: str, fields: dict[str, str], ttl: int) -> None:
        pairs = [part for name, value in fields.items() for part in (name, value)]
        await self._commands.run(("HSET", hash_key, *pairs), ("EXPIRE", hash_key, ttl), ("EXPIRE", list_key, ttl),
                                 transaction=True)

    async def _read_hash(self, hash_key: str) -> dict[str, str]:
        (reply,) = await self._commands.run(("HGETALL", hash_key))
        if isinstance(reply, Mapping):
            return {_text(name): _text(value) for name, value in reply.items()}
        flat = list(reply or [])
        return {_text(flat[index]): _text(flat[index + 1]) for index in range(0, len(flat) - 1, 2)}

    async def _delete_session(self, list_key: str, hash_key: str) -> int:
        replies = await self._commands.run(("LLEN", list_key), ("DEL", list_key, hash_key), transaction=True)
        return int(replies[0])

    async def _consume(self, list_key: str, hash_key: str, count: int, head: str) -> int:
        (reply,) = await self._commands.run(("EVAL", _CONSUME_SCRIPT, 2, list_key, hash_key, count, head))
        return int(reply)

    async def _pop(self, list_key: str, hash_key: str) -> str | None:
        (reply,) = await self._commands.run(("EVAL", _POP_SCRIPT, 2, list_key, hash_key))
        return None if reply is None else _text(reply)

    async def _scan_lists(self, prefix: str, suffix: str) -> list[str]:
        pattern = f"{_glob_escape(prefix)}*{_glob_escape(suffix)}"
        found: set[str] = set()
        cursor = 0
        while True:
            (reply,) = await self._commands.run(("SCAN", cursor, "MATCH", pattern, "COUNT", 1000))
            cursor = int(_text(reply[0]))
            found.update(_text(key) for key in reply[1])
            if cursor == 0:
                return sorted(found)

    async def _increment(self, key: str, ttl: int) -> int:
        replies = await self._commands.run(("INCR", key), ("EXPIRE", key, ttl), transaction=True)
        return int(replies[0])

    async def _get_string(self, key: str) -> str | None:
        (reply,) = await self._commands.run(("GET", key))
        return None if reply is None else _text(reply)

    async def _set_string(self, key: str, value: str, ttl: int, nx: bool) -> bool:
        command: tuple[Any, ...] = ("SET", key, value, "EX", ttl) + (("NX",) if nx else ())
        (reply,) = await self._commands.run(command)
        return reply is True or (reply is not None and reply is not False and _text(reply) == "OK")

    async def _delete_string(self, key: str, only_if: str | None) -> bool:
        if only_if is None:
            (reply,) = await self._commands.run(("DEL", key))
        else:
            (reply,) = await self._commands.run(("EVAL", _DELETE_IF_EQUAL, 1, key, only_if))
        return int(reply) > 0

    async def _expire_string(self, key: str, only_if: str, ttl: int) -> bool:
        (reply,) = await self._commands.run(("EVAL", _EXPIRE_IF_EQUAL, 1, key, only_if, ttl))
        return int(reply) > 0


@dataclasses.dataclass(frozen=True)
class WorkingMemoryConfig:
    """Which working memory to open, and its TTL; the defaults live here.

    Attributes:
        ttl: seconds a session lives after its last use.
        redis_url: a Redis URL (then ``open_buffer`` returns a ``RedisMemoryBuffer``); never shown in ``repr``.
        tenant: the tenant segment of every key, or None.
    """

    ttl: int = WORKING_MEMORY_TTL
    redis_url: str | None = dataclasses.field(default=None, repr=False)
    tenant: str | None = None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> "WorkingMemoryConfig":
        """Read ``KUMIHO_WORKING_MEMORY_TTL`` and ``KUMIHO_REDIS_URL`` (else ``REDIS_URL``).

        Args:
            environ: the mapping to read; default ``os.environ``.

        Raises:
            InvalidArgumentError: the TTL is not a whole number of seconds >= 1.
        """
        environ = os.environ if environ is None else environ
        text = (environ.get("KUMIHO_WORKING_MEMORY_TTL") or "").strip()
        try:
            ttl = int(text) if text else WORKING_MEMORY_TTL
        except ValueError:
            raise InvalidArgumentError(
                f"KUMIHO_WORKING_MEMORY_TTL is not a whole number of seconds: {text!r}") from None
        if ttl < 1:
            raise InvalidArgumentError(f"KUMIHO_WORKING_MEMORY_TTL must be >= 1, not {ttl}")
        url = environ.get("KUMIHO_REDIS_URL") or environ.get("REDIS_URL") or None
        return cls(ttl=ttl, redis_url=url)

    def open_buffer(self, path: str | os.PathLike[str] | None = None, *,
                    clock: Clock | None = None) -> WorkingMemoryBuffer:
        """Open the buffer this config describes: Redis when ``redis_url`` is set, else in-process.

        Args:
            path: the store file the in-process buffer keeps its tables in (None: in memory).
            clock: time source for the buffer.

        Raises:
            BackendUnavailableError: Redis is configured but redis-py is not installed.
            StoreError: the store file cannot be used.
        """
        if self.redis_url:
            return RedisMemoryBuffer(self.redis_url, default_ttl=self.ttl, tenant_id=self.tenant, clock=clock,
                                     environ={})
        return InProcessBuffer(path, clock=clock, default_ttl=self.ttl, tenant=self.tenant)


# ==========================================================================================================
# 10. Recall: what the query means, filters, evidence, reranking, belief similarity and relation matching,
#    context, anticipatory recall
# ==========================================================================================================

MONTHS = {name: number for number, names in enumerate(
    [("january", "jan"), ("february", "feb"), ("march", "mar"), ("april", "apr"), ("may",), ("june", "jun"),
     ("july", "jul"), ("august", "aug"), ("september", "sep", "sept"), ("october", "oct"),
     ("november", "nov"), ("december", "dec")], start=1) for name in names}
_MONTH = r"(january|february|march|april|may|june|july|august|september|october|november|december|jan|feb|mar|apr" \
         r"|jun|jul|aug|sept|sep|oct|nov|dec)\.?"
_DAY_MONTH_YEAR = re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH},?\s+(\d{{4}})\b")
_MONTH_DAY_YEAR = re.compile(rf"\b{_MONTH}\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+(\d{{4}})\b")
_MONTH_YEAR = re.compile(rf"\b{_MONTH},?\s+(\d{{4}})\b")
_ISO_DATE = re.compile(r"\b(\d{4})-(\d{2})(?:-(\d{2}))?\b")
_YEAR = re.compile(r"\b(?:in|during|of|since|from|around)\s+(\d{4})\b")
_AGO = re.compile(r"\b(\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten)\s+(day|week|month|year)s?\s+ago\b")
_NUMBER_WORDS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
                 "eight": 8, "nine": 9, "ten": 10}
_RELATIVE = {"yesterday": (-1, "day"), "today": (0, "day"), "last week": (-1, "week"), "this week": (0, "week"),
             "last month": (-1, "month"), "this month": (0, "month"), "last year": (-1, "year"),
             "this year": (0, "year")}
_RELATIVE_WORDS = re.compile(r"\b(" + "|".join(_RELATIVE) + r")\b")
WEEKDAYS = {name: number for number, name in enumerate(
    ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"))}
_WEEKDAY = re.compile(r"\b(?:(last|this|past|previous)\s+)?(monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b")
_WEEKEND = re.compile(r"\b(?:last|past|previous|this)\s+weekend\b")
# A month named without its year ("in December", "last March") is the latest one that has begun by ``now``
# ("this December" the one of ``now``'s year). "may" needs its preposition: "you may" is not a month.
_BARE_MONTH = re.compile(rf"\b(in|during|since|of|last|this|early|late|mid|past)[\s-]+(?:the\s+month\s+of\s+)?{_MONTH}"
                         r"(?![\w-])(?!\.?\s*\d)")
SEASONS = {"spring": 3, "summer": 6, "autumn": 9, "fall": 9, "winter": 12}   # northern meteorological seasons
_SEASON = re.compile(r"\b(last|this|past|previous|in|during|over|the)\s+(spring|summer|autumn|fall|winter)\b")
_EARLIER = re.compile(r"\bearlier\s+this\s+(week|month|year)\b")


def _period(start: _dt.datetime, unit: str, count: int = 1) -> tuple[float, float]:
    """The window of ``count`` calendar units starting at ``start``."""
    if unit == "day":
        end = start + _dt.timedelta(days=count)
    elif unit == "week":
        end = start + _dt.timedelta(weeks=count)
    elif unit == "month":
        month = start.month - 1 + count
        end = start.replace(year=start.year + month // 12, month=month % 12 + 1, day=1)
    else:
        end = start.replace(year=start.year + count)
    return start.timestamp(), end.timestamp() - 1e-6


def _shift(moment: _dt.datetime, unit: str, count: int) -> _dt.datetime:
    """The start of the calendar unit ``count`` units away from the one holding ``moment``."""
    day = moment.replace(hour=0, minute=0, second=0, microsecond=0)
    if unit == "day":
        return day + _dt.timedelta(days=count)
    if unit == "week":
        return day - _dt.timedelta(days=day.weekday()) + _dt.timedelta(weeks=count)
    if unit == "month":
        month = day.month - 1 + count
        return day.replace(year=day.year + month // 12, month=month % 12 + 1, day=1)
    return day.replace(year=day.year + count, month=1, day=1)


def parse_time_window(query: str, now: _dt.datetime | None = None) -> tuple[float, float] | None:
    """The time a query names, as an epoch-seconds window, or None.

    Understands dates ("8 May 2023", "May 8, 2023", "2023-05-08"), months ("May 2023", "2023-05"), years
    after a preposition ("in 2023"), and, relative to ``now``, "yesterday", "today", "last/this
    week/month/year", "N days/weeks/months/years ago", weekdays ("on Saturday", "last Tuesday": the latest
    before today), "the past weekend", months without a year ("in December": the latest begun by ``now``),
    seasons ("last summer": meteorological, northern) and "earlier this week/month/year" (up to ``now``).
    The most specific match wins. A time outside what a date can hold ("3000 years ago" in a calendar that
    starts at year 1) is no window: None, never an error.
    """
    text = query.casefold()
    try:
        for pattern, order in ((_DAY_MONTH_YEAR, "dmy"), (_MONTH_DAY_YEAR, "mdy")):
            match = pattern.search(text)
            if match:
                groups = match.groups()
                day, month, year = (groups[0], groups[1], groups[2]) if order == "dmy" else (groups[1], groups[0], groups[2])
                return _period(_dt.datetime(int(year), MONTHS[month.rstrip(".")], int(day), tzinfo=UTC), "day")
        match = _ISO_DATE.search(text)
        if match:
            year, month, day = match.groups()
            start = _dt.datetime(int(year), int(month), int(day or 1), tzinfo=UTC)
            return _period(start, "day" if day else "month")
        match = _MONTH_YEAR.search(text)
        if match:
            return _period(_dt.datetime(int(match.group(2)), MONTHS[match.group(1).rstrip(".")], 1, tzinfo=UTC), "month")
        match = _YEAR.search(text)
        if match and 1000 <= int(match.group(1)) <= 9999:
            return _period(_dt.datetime(int(match.group(1)), 1, 1, tzinfo=UTC), "year")
    except (ValueError, OverflowError):   # 31 February, or a period that ends past year 9999
        return None
    if now is None:
        return None
    now = parse_instant(now)
    try:
        match = _AGO.search(text)
        if match:
            count = _NUMBER_WORDS.get(match.group(1)) or int(match.group(1)[:7])
            return _period(_shift(now, match.group(2), -count), match.group(2))
        return _relative_window(text, now)
    except (ValueError, OverflowError):   # "66000000 years ago": before any date a datetime can hold
        return None


def _relative_window(text: str, now: _dt.datetime) -> tuple[float, float] | None:
    """The calendar words of ``parse_time_window`` that need ``now``, after "N units ago"; most specific first."""
    today = now.replace(hour=0, minute=0, second=0, microsecond=0)
    match = _WEEKDAY.search(text)
    if match:
        back = (today.weekday() - WEEKDAYS[match.group(2)]) % 7
        if match.group(1) == "this":
            return _period(today - _dt.timedelta(days=today.weekday() - WEEKDAYS[match.group(2)]), "day")
        return _period(today - _dt.timedelta(days=back or 7), "day")
    if _WEEKEND.search(text):
        saturday = today - _dt.timedelta(days=(today.weekday() - 5) % 7 or 7)
        return _period(saturday, "day", 2)
    match = _EARLIER.search(text)
    if match:
        start = _shift(now, match.group(1), 0)
        return start.timestamp(), max(start.timestamp(), now.timestamp())
    match = _BARE_MONTH.search(text)
    if match and not (match.group(2) == "may" and match.group(1) not in ("in", "during", "since", "last", "this")):
        month = MONTHS[match.group(2).rstrip(".")]
        year = now.year if match.group(1) == "this" or month <= now.month else now.year - 1
        if match.group(1) == "last" and year == now.year and month == now.month:
            year -= 1
        return _period(_dt.datetime(year, month, 1, tzinfo=UTC), "month")
    match = _SEASON.search(text)
    if match:
        first = SEASONS[match.group(2)]
        start = _dt.datetime(now.year, first, 1, tzinfo=UTC)
        if first == 12 and now.month < 3:
            start = start.replace(year=now.year - 1)          # January and February belong to last December's winter
        if start > now or (match.group(1) in ("last", "previous", "past") and start.timestamp() <= now.timestamp()
                           < _period(start, "month", 3)[1]):
            start = start.replace(year=start.year - 1)          # not begun yet, or the one we are in: a year back
        return _period(start, "month", 3)
    match = _RELATIVE_WORDS.search(text)
    if match:
        count, unit = _RELATIVE[match.group(1)]
        return _period(_shift(now, unit, count), unit)
    return None


# -- hard filters (where=) and soft preferences (prefer=) -----------------------------------------------------

_OPERATORS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin", "$contains", "$exists")


def _compare(actual: Any, operator: str, expected: Any) -> bool:
    if operator == "$exists":
        return (actual is not None) == bool(expected)
    if operator == "$eq":
        return actual == expected
    if operator == "$ne":
        return actual != expected
    if operator == "$in":
        return actual in expected or (isinstance(actual, list) and any(value in expected for value in actual))
    if operator == "$nin":
        return not _compare(actual, "$in", expected)
    if operator == "$contains":
        if isinstance(actual, str):
            return isinstance(expected, str) and expected.casefold() in actual.casefold()
        return isinstance(actual, list) and expected in actual
    if actual is None or isinstance(actual, bool) != isinstance(expected, bool):
        return False
    try:
        return {"$gt": actual > expected, "$gte": actual >= expected, "$lt": actual < expected,
                "$lte": actual <= expected}[operator]
    except TypeError:
        return False


def validate_where(where: Any) -> dict[str, Any]:
    """Check a metadata filter: ``{field: value | [values] | {"$op": value, ...}}``; return it.

    Raises:
        InvalidArgumentError: not a mapping, an unknown operator, or an operand of the wrong shape.
    """
    if not isinstance(where, Mapping):
        raise InvalidArgumentError(f"where must be a mapping of metadata field to condition, not {where!r}")
    for field, condition in where.items():
        if not isinstance(field, str):
            raise InvalidArgumentError(f"where field names must be strings, not {field!r}")
        if isinstance(condition, Mapping):
            for operator, operand in condition.items():
                if operator not in _OPERATORS:
                    raise InvalidArgumentError(f"unknown operator {operator!r} for {field!r}; use {_OPERATORS}")
                if operator in ("$in", "$nin") and not isinstance(operand, (list, tuple)):
                    raise InvalidArgumentError(f"{operator} for {field!r} takes a list")
    canonical_json(dict(where))
    return dict(where)


def matches_where(metadata: Mapping[str, Any], where: Mapping[str, Any]) -> bool:
    """True when ``metadata`` satisfies every condition of ``where`` (a list means ``$in``)."""
    for field, condition in where.items():
        actual = metadata.get(field)
        if isinstance(condition, Mapping):
            if not all(_compare(actual, operator, operand) for operator, operand in condition.items()):
                return False
        elif isinstance(condition, list):
            if not _compare(actual, "$in", condition):
                return False
        elif not _compare(actual, "$eq", condition):
            return False
    return True


def validate_prefer(prefer: Any) -> list[tuple[dict[str, Any], float]]:
    """Normalize ``prefer=``: a list of ``{"where": {...}, "trust": 0..1}`` cues (a bare filter is one cue
    with trust 0.5). Returns ``[(where, trust)]``."""
    cues = prefer if isinstance(prefer, list) else [prefer]
    normalized = []
    for cue in cues:
        if isinstance(cue, Mapping) and "where" in cue:
            trust = cue.get("trust", 0.5)
            if isinstance(trust, bool) or not isinstance(trust, (int, float)) or not 0.0 <= trust <= 1.0:
                raise InvalidArgumentError(f"prefer trust must be a number from 0 to 1, not {trust!r}")
            normalized.append((validate_where(cue["where"]), float(trust)))
        else:
            normalized.append((validate_where(cue), 0.5))
    return normalized


# -- evidence-weighted reranking ------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class EvidenceRankConfig:
    """How evidence grades move recall scores (added to the normalized score; ungraded sets are untouched)."""

    enabled: bool = True
    weights: Mapping[str, float] = dataclasses.field(default_factory=lambda: {
        OFFICIAL: 0.15, CORROBORATED: 0.08, SINGLE_SOURCE: 0.0, UNVERIFIED: -0.10})
    badges: bool = True

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> "EvidenceRankConfig":
        """``KUMIHO_EVIDENCE_RERANK=0`` turns evidence reranking off."""
        environ = os.environ if environ is None else environ
        return cls(enabled=environ.get("KUMIHO_EVIDENCE_RERANK", "1").strip().lower() not in ("0", "false", "no", "off"))


def apply_evidence_weights(memories: list[dict[str, Any]], config: EvidenceRankConfig | None = None) -> list[dict[str, Any]]:
    """Add each memory's evidence weight to its ``score`` (keeping the raw one as ``base_score``) and re-sort,
    in place. A strict no-op when disabled or when no memory carries a grade. Score-less memories go last."""
    config = config or EvidenceRankConfig()
    levels = [memory_evidence_level(memory) for memory in memories]
    if not config.enabled or not any(levels):
        return memories
    for memory, level in zip(memories, levels):
        if memory.get("score") is None:
            continue
        memory.setdefault("base_score", memory["score"])
        memory["score"] = round(memory["base_score"] + (config.weights.get(level, 0.0) if level else 0.0), 6)
        if level:
            memory["evidence_level"] = level
    memories.sort(key=lambda memory: (memory.get("score") is None, -(memory.get("score") or 0.0)))
    return memories


def memory_evidence_level(memory: Mapping[str, Any]) -> str | None:
    """A memory's evidence grade, wherever its shape keeps it: a top-level ``evidence_level`` (recall results
    and upstream memory dicts), else its metadata and ``evidence:`` tags. None when ungraded."""
    level = memory.get("evidence_level")
    if isinstance(level, str) and level in EVIDENCE_LEVELS:
        return level
    return parse_evidence(memory.get("metadata"), memory.get("tags"))


def evidence_badge(memory: Mapping[str, Any] | str | None, config: EvidenceRankConfig | None = None) -> str:
    """``"[official] "``-style prefix for a prompt; empty for single_source and ungraded memories.

    Args:
        memory: a memory dict (upstream's form; its grade is read with ``memory_evidence_level``), or a
            level name.
        config: ``EvidenceRankConfig(badges=False)`` turns badges off.
    """
    if config is not None and not config.badges:
        return ""
    level = memory_evidence_level(memory) if isinstance(memory, Mapping) else memory
    return f"[{level}] " if level in (OFFICIAL, CORROBORATED, UNVERIFIED) else ""


# -- optional reranking: recency and diversity ----------------------------------------------------------------

def apply_recency(memories: list[dict[str, Any]], now: _dt.datetime, half_life_days: float,
                  max_boost: float = 0.12) -> None:
    """Add up to ``max_boost`` to recent memories (by ``event_date``, else ``created_at``), halving every
    ``half_life_days``; re-sorts in place."""
    for memory in memories:
        stamp = memory.get("metadata", {}).get("event_date") or memory.get("created_at")
        try:
            age_days = max(0.0, (now - parse_instant(stamp)).total_seconds() / 86400.0)
        except (InvalidArgumentError, TypeError):
            continue
        memory["score"] = round(memory["score"] + max_boost * 0.5 ** (age_days / half_life_days), 6)
    memories.sort(key=lambda memory: -memory["score"])


def _jaccard(left: set[str], right: set[str]) -> float:
    return len(left & right) / len(left | right) if left and right else 0.0


def apply_mmr(memories: list[dict[str, Any]], limit: int, diversity_lambda: float = 0.72) -> list[dict[str, Any]]:
    """Maximal marginal relevance: pick ``limit`` memories trading score against word overlap (Jaccard) with
    those already picked; ``diversity_lambda`` 1.0 is pure score."""
    pool = [(memory, set(tokenize(memory.get("title", "") + " " + memory.get("content", "")))) for memory in memories]
    chosen: list[tuple[dict[str, Any], set[str]]] = []
    while pool and len(chosen) < limit:
        best = max(pool, key=lambda entry: diversity_lambda * entry[0]["score"] - (1 - diversity_lambda) * max(
            (_jaccard(entry[1], picked[1]) for picked in chosen), default=0.0))
        pool.remove(best)
        chosen.append(best)
    return [memory for memory, _ in chosen]


# -- sibling revisions ----------------------------------------------------------------------------------------

SIBLING_STRONG_SCORE = 0.40
SIBLING_CHAR_BUDGET = 20_000


def bm25_light(query: str, text: str) -> float:
    """kumiho-memory's light keyword score: mean of ln(1 + tf) over the query's distinct terms."""
    terms = list(dict.fromkeys(tokenize(query)))
    if not terms:
        return 0.0
    counts: dict[str, int] = {}
    for term in tokenize(text):
        counts[term] = counts.get(term, 0) + 1
    return sum(math.log1p(counts.get(term, 0)) for term in terms) / (len(terms) + 1)


def select_siblings(query: str, siblings: list[dict[str, Any]], *, strong_score: float = SIBLING_STRONG_SCORE,
                    char_budget: int = SIBLING_CHAR_BUDGET, embed: Callable[[list[str]], list[list[float]]] | None = None,
                    top_k: int = 0) -> list[dict[str, Any]]:
    """Pick which other revisions of an item to show with it.

    Keyword mode: if any sibling scores at least ``strong_score``, keep only those (best first); otherwise
    keep all, oldest first, within ``char_budget`` characters. Cosine mode (``embed`` given): rank by
    cosine with the query and keep those above ``strong_score``, else the best one.
    """
    if not siblings:
        return []
    vectors = embed([query] + [s.get("title", "") + " " + s.get("content", "") for s in siblings]) if embed else None
    if vectors is not None:            # an embedder that fails (returns None) leaves keyword mode
        scored = [(cosine(vectors[0], vector), sibling) for vector, sibling in zip(vectors[1:], siblings)]
    else:
        embed = None
        scored = [(bm25_light(query, s.get("title", "") + " " + s.get("content", "")), s) for s in siblings]
    for score, sibling in scored:
        sibling["_score"] = round(score, 4)
    strong = sorted((pair for pair in scored if pair[0] >= strong_score), key=lambda pair: -pair[0])
    if strong:
        chosen = [sibling for _, sibling in strong]
    elif embed is not None:
        chosen = [max(scored, key=lambda pair: pair[0])[1]]
    else:
        chosen, used = [], 0
        for sibling in sorted(siblings, key=lambda s: s.get("revision", 0)):
            size = len(sibling.get("content", ""))
            if used + size > char_budget:
                break
            chosen.append(sibling)
            used += size
    return chosen[:top_k] if top_k > 0 else chosen


def cosine(left: Sequence[float], right: Sequence[float]) -> float:
    """Cosine similarity of two vectors (0 when either is zero)."""
    dot = sum(a * b for a, b in zip(left, right))
    norm = math.sqrt(sum(a * a for a in left)) * math.sqrt(sum(b * b for b in right))
    return dot / norm if norm else 0.0


# -- embeddings (optional) ------------------------------------------------------------------------------------

class EmbeddingAdapter(Protocol):
    """Anything that turns texts into vectors. A plain callable ``texts -> vectors`` works as well."""

    def embed(self, texts: list[str], *, model: str = "") -> list[list[float]]:
        """Return one vector per text, in order (``model`` overrides the adapter's, when it has several)."""


def _sdk_payload(response: Any) -> Any:
    """An SDK response object (pydantic model, attribute object or dict) as plain JSON-like data."""
    if isinstance(response, Mapping):
        return dict(response)
    dump = getattr(response, "model_dump", None)
    if callable(dump):
        return dump()
    if isinstance(response, (list, tuple)):
        return [_sdk_payload(item) for item in response]
    if isinstance(response, (str, int, float, bool)) or response is None:
        return response
    return {key: _sdk_payload(value) for key, value in vars(response).items() if not key.startswith("_")}


async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


def unit_vector(vector: Sequence[float]) -> tuple[float, ...]:
    """``vector`` scaled to length 1.

    Raises:
        InvalidArgumentError: empty, all zeros, or not finite numbers.
    """
    try:
        values = tuple(float(value) for value in vector)
    except (TypeError, ValueError) as exc:
        raise InvalidArgumentError(f"an embedding must be a list of numbers: {exc}") from exc
    norm = math.sqrt(sum(value * value for value in values))
    if not values or not math.isfinite(norm) or norm == 0.0:
        raise InvalidArgumentError("an embedding must be a non-empty, non-zero list of finite numbers")
    return tuple(value / norm for value in values)


def embed_function(embedder: Any) -> Callable[[list[str]], list[list[float]]]:
    """Accept an object with ``embed(texts)`` or a callable, and return the callable.

    Raises:
        InvalidArgumentError: neither.
    """
    if hasattr(embedder, "embed") and callable(embedder.embed):
        return embedder.embed
    if callable(embedder):
        return embedder
    raise InvalidArgumentError(f"embedder must have embed(texts) or be callable, not {type(embedder).__name__}")


# -- language models (optional) -------------------------------------------------------------------------------
#
# Two adapters over the standard library's ``urllib``: any server speaking OpenAI's chat completions, and
# Anthropic's messages API. Both share one POST-with-retries (``_post_json``) that runs in a worker thread,
# so ``chat`` never blocks the event loop. Rules for every request:
#
#   what happened                                   transient  retried  note
#   429, 408, 409, 5xx (incl. Anthropic's 529)      yes        yes      ``Retry-After`` honoured up to a cap
#   refused / reset / timed out / cut-off reply     yes        yes      exponential backoff 0.5, 1, 2 ... 8 s
#   3xx                                             no         no       redirects are not followed, so a key
#                                                                       never travels to another host
#   other 4xx                                       no         no       message names status + server's text
#   200 that is not the expected JSON shape         no         no
#
# An API key is masked in every message (before any truncation, so no prefix of it leaks) and never shown by
# ``repr``; URL user-info is redacted.

_RETRY_AFTER_CAP = 30.0          # seconds: a longer Retry-After is cut to this, so a call cannot stall for hours
_MAX_REPLY_BYTES = 16 * 1024 * 1024
_MAX_ERROR_BYTES = 64 * 1024
_TRANSIENT_STATUSES = frozenset({408, 409, 429})
_ERROR_DETAIL_CHARS = 500


def _backoff(attempt: int) -> float:
    """Seconds to wait before retry number ``attempt + 1`` when the server gave no ``Retry-After``."""
    return min(8.0, 0.5 * 2 ** attempt)


def _mask(text: str, secret: str | None) -> str:
    """``text`` with ``secret`` blotted out (servers sometimes echo a key back)."""
    return text.replace(secret, "***") if secret else text


def _retry_after_seconds(headers: Any) -> float | None:
    """The wait a server asked for: ``retry-after-ms`` (OpenAI), else ``Retry-After`` in seconds or as an
    HTTP date; ``None`` when absent or unreadable."""
    if headers is None:
        return None
    seconds: float | None = None
    milliseconds = headers.get("retry-after-ms")
    if milliseconds:
        with contextlib.suppress(ValueError):
            seconds = float(milliseconds) / 1000.0
    value = headers.get("Retry-After")
    if seconds is None and value:
        try:
            seconds = float(value)
        except ValueError:
            import email.utils
            try:
                moment = email.utils.parsedate_to_datetime(value)
            except (TypeError, ValueError, IndexError):
                return None
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=_dt.timezone.utc)
            seconds = moment.timestamp() - time.time()
    if seconds is None or not math.isfinite(seconds):
        return None
    return max(0.0, seconds)


def _error_detail(raw: bytes) -> str:
    """The server's own error message from an error body: ``error.message`` (OpenAI, Anthropic), ``error``
    as a string (Ollama), ``message`` (vLLM) or ``detail`` (FastAPI); else the body with its whitespace
    collapsed."""
    text = raw.decode("utf-8", "replace")
    with contextlib.suppress(ValueError):
        payload = json.loads(text)
        if isinstance(payload, dict):
            error = payload.get("error")
            if isinstance(error, dict) and isinstance(error.get("message"), str):
                return error["message"]
            if isinstance(error, str):
                return error
            for key in ("message", "detail"):
                if isinstance(payload.get(key), str):
                    return payload[key]
    return " ".join(text.split())


def _read_reply(response: Any, limit: int, seconds: float) -> bytes:
    """The whole body of ``response``, read in pieces so that a server dribbling bytes cannot hold the call
    past ``seconds`` (each socket read is already bounded by the request timeout).

    Raises:
        TimeoutError: the body took longer than ``seconds``.
        http.client.IncompleteRead: the connection closed before the promised ``Content-Length``.
        ValueError: the body is larger than ``limit`` bytes.
    """
    import http.client
    deadline = time.monotonic() + seconds
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = response.read1(65536)
        if not chunk:
            break
        size += len(chunk)
        if size > limit:
            raise ValueError(f"the reply is larger than {limit} bytes")
        chunks.append(chunk)
        if time.monotonic() > deadline:
            raise TimeoutError(f"the reply took longer than {seconds:g} s to arrive")
    # read1 returns b"" at a premature end instead of raising, so compare with what was promised.
    missing = getattr(response, "length", None)
    if missing:
        raise http.client.IncompleteRead(b"".join(chunks), missing)
    return b"".join(chunks)


def _no_redirect_opener() -> Any:
    """A urllib opener that turns every redirect into an ``HTTPError``: following one would resend the API
    key headers to wherever the ``Location`` points."""
    import urllib.request

    class RefuseRedirects(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, req: Any, fp: Any, code: int, msg: str, headers: Any, newurl: str) -> None:
            return None

    return urllib.request.build_opener(RefuseRedirects)


def _post_json(url: str, body: Mapping[str, Any], headers: Mapping[str, str], *, timeout: float, retries: int,
               sleep: Callable[[float], None], secret: str | None, what: str,
               max_wait: float = _RETRY_AFTER_CAP) -> dict[str, Any]:
    """POST ``body`` as JSON to ``url`` and return the JSON object the server answers, retrying transient
    failures (see the table above this function).

    Args:
        url: the full endpoint; its user-info is redacted in messages.
        body: the request, sent as UTF-8 JSON.
        headers: extra headers (auth); ``Content-Type``/``Accept`` are added.
        timeout: seconds for connecting and for each wait on the socket; the body must also arrive within
            this many seconds once the headers are in.
        retries: extra attempts for transient failures.
        sleep: how to wait between attempts (injected so tests do not wait).
        secret: a credential to mask in every message.
        what: names the call in messages, e.g. ``"chat completion"``.
        max_wait: the cap on a server's ``Retry-After``.

    Returns:
        The decoded JSON object.

    Raises:
        ServiceError: ``transient`` and ``status`` say what failed; the message never contains ``secret``.
    """
    import http.client
    import urllib.error
    import urllib.request
    where = _redact_url(url)
    data = json.dumps(body).encode("utf-8")
    request_headers = {"Content-Type": "application/json", "Accept": "application/json",
                       "User-Agent": f"{DISTRIBUTION_NAME}/{__version__}", **headers}
    opener = _no_redirect_opener()
    for attempt in range(retries + 1):
        request = urllib.request.Request(url, data=data, headers=request_headers, method="POST")
        asked_wait: float | None = None
        try:
            with opener.open(request, timeout=timeout) as response:
                raw = _read_reply(response, _MAX_REPLY_BYTES, timeout)
            break
        except urllib.error.HTTPError as exc:
            error = _http_status_error(exc, where=where, what=what, secret=secret)
            asked_wait = _retry_after_seconds(exc.headers)
        except (ValueError, http.client.InvalidURL) as exc:   # a bad URL or an oversized reply: no retry helps
            error = ServiceError(_mask(f"{what} request to {where} failed: {exc}", secret), transient=False)
        except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
            reason = getattr(exc, "reason", None) or exc
            error = ServiceError(_mask(f"{what} service at {where} unreachable, timed out or cut off: "
                                       f"{type(reason).__name__}: {reason}", secret), transient=True)
        if not error.transient or attempt == retries:
            if attempt:
                error.args = (f"{error.args[0]} (after {attempt + 1} attempts)",)
            raise error
        sleep(min(max_wait, asked_wait) if asked_wait is not None else _backoff(attempt))
    try:
        payload = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        snippet = " ".join(raw[:2000].decode("utf-8", "replace").split())
        raise ServiceError(_mask(f"{what} service at {where} answered with something that is not JSON: "
                                 f"{snippet[:200]!r}", secret), transient=False) from None
    if not isinstance(payload, dict):
        raise ServiceError(f"{what} service at {where} answered with a JSON {type(payload).__name__}, "
                           f"not an object", transient=False)
    return payload


def _http_status_error(exc: Any, *, where: str, what: str, secret: str | None) -> ServiceError:
    """A ``ServiceError`` for an HTTP error status, naming the status and the server's own message."""
    import http.client
    try:
        raw = exc.read(_MAX_ERROR_BYTES) if exc.fp else b""
    except (OSError, http.client.HTTPException):
        raw = b""
    # Mask before cutting: a cut through the key would otherwise leave its prefix in the message.
    detail = _mask(_error_detail(raw), secret)[:_ERROR_DETAIL_CHARS]
    if 300 <= exc.code < 400:
        location = _redact_url(exc.headers.get("Location", "?")) if exc.headers else "?"
        message = (f"{what} request to {where} was redirected (HTTP {exc.code}) to {location}; set base_url "
                   f"to the final address (redirects are not followed, so credentials stay put)")
    else:
        message = f"{what} request to {where} failed: HTTP {exc.code}" + (f": {detail}" if detail else "")
    transient = exc.code in _TRANSIENT_STATUSES or exc.code >= 500
    return ServiceError(_mask(message, secret), transient=transient, status=exc.code)


# -- the LLM adapter interface, and helpers both adapters share -----------------------------------------------

class LLMAdapter(Protocol):
    """Anything that answers a chat. ``GraphAugmentedRecall`` and the summarizer call it.

    ``json_mode`` asks for machine-readable output: ``False`` (free text), ``True`` (one JSON object),
    ``"array"`` (one JSON array) or ``{"name": ..., "schema": {...}}`` (structured output matching a JSON
    Schema). The reply is still text; read it with ``parse_llm_json``.
    """

    async def chat(self, *, messages: list[dict[str, Any]], model: str = "", system: str = "",
                   max_tokens: int = 1024, json_mode: bool | str | dict[str, Any] = False) -> str:
        """Return the model's reply to ``messages`` (``{"role", "content"}`` dicts)."""


_FENCE = re.compile(r"```[^\n`]*\n?(.*?)```", re.S)
_PARSE_ATTEMPTS = 256        # openers tried before giving up, so a reply full of brackets stays linear-ish


def parse_llm_json(text: str, expect: type | None = None) -> Any:
    """The first JSON object or array in an LLM reply, tolerating code fences and prose around it.

    Tries, in order: the whole reply; the inside of each fenced block (a fence marks the intended answer);
    then each ``{`` or ``[`` from the left until one starts a complete JSON value. Bare scalars (``42``,
    ``"yes"``) are not answers here: a reply like "42 items" must not read as the number 42. The module's
    older private ``_json_from_llm`` can become an alias of this; callers that want a list should pass
    ``expect=list`` (the old helper found an array nested in an object, this finds the object first).

    Args:
        text: the reply.
        expect: ``dict`` or ``list`` to skip values of the other kind (the search then goes on, also into
            the skipped value); with ``list``, an object whose only member is an array counts as that
            array (what a model forced into a JSON object answers). ``None`` takes either.

    Returns:
        The decoded dict or list.

    Raises:
        InvalidArgumentError: ``text`` is not a string, ``expect`` is not ``None``/``dict``/``list``, or no
            fitting JSON value is in the reply (a ``ValueError``, so callers catching that keep working).
    """
    if not isinstance(text, str):
        raise InvalidArgumentError(f"an LLM reply must be a string, not {type(text).__name__}")
    if expect not in (None, dict, list):
        raise InvalidArgumentError(f"expect must be None, dict or list, not {expect!r}")

    def fitting(value: Any) -> Any:
        if not isinstance(value, (dict, list)) or expect is None or isinstance(value, expect):
            return value
        if expect is list and len(value) == 1 and isinstance(next(iter(value.values())), list):
            return next(iter(value.values()))
        return None

    for candidate in [text.strip()] + [match.group(1).strip() for match in _FENCE.finditer(text)]:
        if candidate[:1] in ("{", "["):
            with contextlib.suppress(ValueError, RecursionError):
                found = fitting(json.loads(candidate))
                if found is not None:
                    return found
    decoder = json.JSONDecoder()
    for attempt, match in enumerate(re.finditer(r"[\[{]", text)):
        if attempt >= _PARSE_ATTEMPTS:
            break
        with contextlib.suppress(ValueError, RecursionError):
            found = fitting(decoder.raw_decode(text, match.start())[0])
            if found is not None:
                return found
    shown = " ".join(text.split())
    kind = {None: "object or array", dict: "object", list: "array"}[expect]
    raise InvalidArgumentError(f"no JSON {kind} in the reply: {shown[:120]!r}")


_SCHEMA_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def _check_json_mode(json_mode: Any) -> bool | str | dict[str, Any]:
    """``json_mode`` validated: ``False``, ``True``, ``"array"`` or ``{"name", "schema"[, "strict"]}``.

    Raises:
        InvalidArgumentError: anything else.
    """
    if isinstance(json_mode, bool) or json_mode == "array":
        return json_mode
    if isinstance(json_mode, dict):
        unknown = set(json_mode) - {"name", "schema", "strict"}
        if unknown:
            raise InvalidArgumentError(f"json_mode has unknown keys {sorted(unknown)}; use name, schema, strict")
        if not isinstance(json_mode.get("name"), str) or not _SCHEMA_NAME.match(json_mode["name"]):
            raise InvalidArgumentError("json_mode['name'] must be 1-64 letters, digits, '_' or '-'")
        if not isinstance(json_mode.get("schema"), dict):
            raise InvalidArgumentError("json_mode['schema'] must be a JSON Schema object (a dict)")
        if not isinstance(json_mode.get("strict", True), bool):
            raise InvalidArgumentError("json_mode['strict'] must be a bool")
        return json_mode
    raise InvalidArgumentError(f"json_mode must be False, True, 'array' or {{'name', 'schema'}}, "
                               f"not {json_mode!r}")


def _check_chat(messages: Any, max_tokens: Any) -> list[dict[str, Any]]:
    """``messages`` validated as a non-empty list of ``{"role": str, "content": str | list}`` dicts.

    Raises:
        InvalidArgumentError: a malformed message or a ``max_tokens`` that is not a positive integer.
    """
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise InvalidArgumentError(f"max_tokens must be a positive integer, not {max_tokens!r}")
    if not isinstance(messages, (list, tuple)) or not messages:
        raise InvalidArgumentError("messages must be a non-empty list of {'role', 'content'} dicts")
    for index, message in enumerate(messages):
        if (not isinstance(message, Mapping) or not isinstance(message.get("role"), str)
                or not isinstance(message.get("content"), (str, list))):
            raise InvalidArgumentError(f"messages[{index}] must be a dict with a string role and a string "
                                       f"(or list of parts) content")
    return [dict(message) for message in messages]


def _json_instruction(json_mode: bool | str | dict[str, Any], *, object_only: bool) -> str:
    """The system-prompt sentence that asks for ``json_mode``'s shape (empty when it is ``False``).

    ``object_only``: the server may force a JSON object (OpenAI's ``json_object``), so tell the model how to
    wrap an array.
    """
    if json_mode is False:
        return ""
    if json_mode is True:
        return "Reply with one JSON object and nothing else: no prose, no code fences."
    if json_mode == "array":
        instruction = "Reply with one JSON array and nothing else: no prose, no code fences."
        if object_only:
            instruction += ' If you must reply with a JSON object, reply {"items": [...]} holding the array.'
        return instruction
    schema = json.dumps(json_mode["schema"], sort_keys=True)  # type: ignore[index]
    return ("Reply with one JSON value and nothing else: no prose, no code fences. It must match this "
            f"JSON Schema ({json_mode['name']}): {schema}")  # type: ignore[index]


def _accepts_json_mode(chat: Callable[..., Any]) -> bool:
    """Whether an adapter's ``chat`` takes ``json_mode`` (ours do; one written to the seed's shape may not)."""
    try:
        parameters = inspect.signature(chat).parameters.values()
    except (TypeError, ValueError):
        return True
    return any(p.name == "json_mode" or p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)


async def adapter_chat(adapter: Any, *, messages: list[dict[str, str]], model: str = "", system: str | None = None,
                       max_tokens: int | None = None, json_mode: bool | str | dict[str, Any] = False) -> str:
    """Call ``adapter.chat`` the way it was written: with ``json_mode`` when it takes one, else with the
    same request as an instruction in the system text, so an adapter of the seed's ``LLMAdapter`` shape
    (``chat(messages, model, system, max_tokens)``) serves every assessor, summarizer and Dream State.

    Returns:
        The reply text.
    """
    options: dict[str, Any] = {} if max_tokens is None else {"max_tokens": max_tokens}
    if _accepts_json_mode(adapter.chat):
        if system is not None:
            options["system"] = system
        return await adapter.chat(messages=messages, model=model, json_mode=json_mode, **options)
    instruction = _json_instruction(_check_json_mode(json_mode), object_only=False)
    if system is not None or instruction:
        options["system"] = _join_text(system or "", instruction)
    return await adapter.chat(messages=messages, model=model, **options)


def _join_text(*parts: str) -> str:
    """Non-empty ``parts`` joined by blank lines."""
    return "\n\n".join(part for part in parts if part)


def _http_root(base_url: Any) -> str:
    """``base_url`` checked to be http(s), without a trailing slash.

    Raises:
        InvalidArgumentError: not an http(s) URL.
    """
    if not isinstance(base_url, str) or not re.match(r"^https?://[^/]", base_url):
        shown = _redact_url(base_url) if isinstance(base_url, str) else type(base_url).__name__
        raise InvalidArgumentError(f"base_url must be an http(s) URL, not {shown!r}")
    return base_url.rstrip("/")


def _check_transport(timeout: Any, retries: Any) -> tuple[float, int]:
    """``timeout`` (positive, finite seconds) and ``retries`` (a non-negative integer), validated.

    Raises:
        InvalidArgumentError: either is out of range.
    """
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout < math.inf:
        raise InvalidArgumentError(f"timeout must be a positive number of seconds, not {timeout!r}")
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        raise InvalidArgumentError(f"retries must be a non-negative integer, not {retries!r}")
    return float(timeout), retries


def _unwrap_array(text: str) -> str:
    """For ``json_mode="array"`` under a server that forces an object: an object whose only member is an
    array becomes that array (as JSON text); any other reply is returned unchanged."""
    try:
        value = parse_llm_json(text)
    except InvalidArgumentError:
        return text
    if isinstance(value, dict) and len(value) == 1:
        (member,) = value.values()
        if isinstance(member, list):
            return json.dumps(member, ensure_ascii=False)
    return text


# -- OpenAI-compatible chat -----------------------------------------------------------------------------------

_RESPONSE_FORMAT_REJECTED = re.compile(r"response_format|json_schema|json_object", re.I)


class OpenAICompatAdapter:
    """Chat with any server speaking OpenAI's ``POST /v1/chat/completions`` (OpenAI, Ollama, vLLM,
    llama.cpp server, LM Studio), over the standard library's ``urllib``.

    ``json_mode``: ``True`` and ``"array"`` send ``response_format: {"type": "json_object"}``; a schema dict
    sends ``{"type": "json_schema", "json_schema": {name, schema, strict}}`` (strict by default: OpenAI then
    wants ``additionalProperties: false`` and every property required). The system text also states the
    shape, so when a server answers 400 about ``response_format`` (it lacks that mode) the request is sent
    once more without ``response_format`` and the prompt alone carries the instruction. Because
    ``json_object`` forces an object, an ``"array"`` reply that is an object whose only member is an array is
    unwrapped to that array. A model that rejects ``max_tokens`` (OpenAI's reasoning models) gets the same
    number as ``max_completion_tokens`` on a second try.

    Args:
        base_url: the API root including ``/v1``, e.g. ``http://localhost:11434/v1``.
        api_key: sent as ``Authorization: Bearer``; never shown in errors or ``repr``.
        model: the model used when ``chat`` names none.
        timeout: seconds to connect and for each wait on the server; make it longer than the slowest
            generation, since a reply is not streamed.
        retries: extra attempts for transient failures, with exponential backoff.
        sleep: how to wait between attempts (tests inject a recorder).

    Raises:
        InvalidArgumentError: a malformed ``base_url``, ``timeout`` or ``retries``.
    """

    DEFAULT_BASE_URL = "https://api.openai.com/v1"

    def __init__(self, base_url: Any, api_key: str | None = None, model: str = "gpt-4o-mini", *,
                 timeout: float = 60.0, retries: int = 2, sleep: Callable[[float], None] = time.sleep) -> None:
        if api_key is not None and not isinstance(api_key, str):
            raise InvalidArgumentError("api_key must be a string or None")
        if not isinstance(model, str) or not model:
            raise InvalidArgumentError("model must be a non-empty string")
        # upstream's form: OpenAICompatAdapter(client), an ``openai``-shaped SDK client (sync or async)
        self._client = None if isinstance(base_url, str) else base_url
        if self._client is not None and not hasattr(getattr(self._client, "chat", None), "completions"):
            raise InvalidArgumentError("give a base URL or an OpenAI-style client (client.chat.completions.create)")
        self.base_url = "client" if self._client is not None else _http_root(base_url)
        self.model = model
        self.timeout, self.retries = _check_transport(timeout, retries)
        self._api_key = api_key or None
        self._sleep = sleep

    @classmethod
    def create(cls, *, api_key: str | None = None, base_url: str | None = None, model: str = "gpt-4o-mini",
               **options: Any) -> "OpenAICompatAdapter":
        """An adapter for ``base_url`` (default OpenAI's ``https://api.openai.com/v1``); ``options`` are the
        constructor's keywords (``timeout``, ``retries``, ``sleep``)."""
        return cls(base_url or cls.DEFAULT_BASE_URL, api_key, model, **options)

    def __repr__(self) -> str:
        return f"OpenAICompatAdapter({_redact_url(self.base_url)!r}, model={self.model!r})"

    async def chat(self, *, messages: list[dict[str, Any]], model: str = "", system: str = "",
                   max_tokens: int = 1024, json_mode: bool | str | dict[str, Any] = False) -> str:
        """Send one chat completion and return the reply text.

        Runs the HTTP call in a worker thread; cancelling the await returns at once, while the thread ends
        within ``timeout``.

        Args:
            messages: ``{"role", "content"}`` dicts, oldest first.
            model: overrides the adapter's model.
            system: sent first as a system message (with the ``json_mode`` instruction appended).
            max_tokens: the reply's token budget.
            json_mode: ``False``, ``True``, ``"array"`` or ``{"name", "schema"[, "strict"]}``.

        Returns:
            ``choices[0].message.content``.

        Raises:
            InvalidArgumentError: malformed arguments.
            ServiceError: the server failed, refused, or answered in another shape.
        """
        turns = _check_chat(messages, max_tokens)
        json_mode = _check_json_mode(json_mode)
        system_text = _join_text(system, _json_instruction(json_mode, object_only=True))
        body: dict[str, Any] = {"model": model or self.model,
                                "messages": ([{"role": "system", "content": system_text}] if system_text else [])
                                + turns,
                                "max_tokens": max_tokens}
        if isinstance(json_mode, dict):
            body["response_format"] = {"type": "json_schema", "json_schema": {
                "name": json_mode["name"], "schema": json_mode["schema"], "strict": json_mode.get("strict", True)}}
        elif json_mode:
            body["response_format"] = {"type": "json_object"}
        text = self._reply_text(await self._post_with_fallbacks(body))
        return _unwrap_array(text) if json_mode == "array" else text

    async def _post_with_fallbacks(self, body: dict[str, Any]) -> dict[str, Any]:
        """POST ``body``; on a 400 about a feature the server lacks, drop that feature and POST again (each
        fallback at most once, so at most three requests)."""
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        while True:
            try:
                if self._client is not None:
                    return _sdk_payload(await _maybe_await(self._client.chat.completions.create(**body)))
                return await asyncio.to_thread(
                    _post_json, f"{self.base_url}/chat/completions", body, headers, timeout=self.timeout,
                    retries=self.retries, sleep=self._sleep, secret=self._api_key, what="chat completion")
            except ServiceError as exc:
                complaint = str(exc) if exc.status == 400 else ""
                if "response_format" in body and _RESPONSE_FORMAT_REJECTED.search(complaint):
                    body = {key: value for key, value in body.items() if key != "response_format"}
                elif "max_tokens" in body and "max_completion_tokens" in complaint:
                    body = {("max_completion_tokens" if key == "max_tokens" else key): value
                            for key, value in body.items()}
                else:
                    raise

    def _reply_text(self, payload: dict[str, Any]) -> str:
        """``choices[0].message.content`` (text parts joined when it is a list of parts).

        Raises:
            ServiceError: not transient: a refusal or another shape.
        """
        where = f"{_redact_url(self.base_url)}/chat/completions"
        try:
            message = payload["choices"][0]["message"]
            content = message.get("content")
        except (KeyError, IndexError, TypeError, AttributeError):
            raise ServiceError(f"chat completion service at {where} answered without choices[0].message",
                               transient=False) from None
        if isinstance(content, str):
            return content
        if isinstance(content, list):
            return "".join(part.get("text", "") for part in content
                           if isinstance(part, dict) and part.get("type") == "text")
        refusal = message.get("refusal")
        if isinstance(refusal, str) and refusal:
            raise ServiceError(_mask(f"the model at {where} declined: {refusal[:300]}", self._api_key),
                               transient=False)
        raise ServiceError(f"chat completion service at {where} answered without text in "
                           f"choices[0].message.content", transient=False)


# -- Anthropic messages ---------------------------------------------------------------------------------------

class AnthropicAdapter:
    """Chat with Anthropic's ``POST /v1/messages`` over the standard library's ``urllib``.

    Anthropic has no JSON mode, so ``json_mode`` adds an instruction to the system text. System messages
    found in ``messages`` (an OpenAI habit the API rejects) are moved into the system text.

    Args:
        api_key: sent as ``x-api-key``; never shown in errors or ``repr``.
        model: the model used when ``chat`` names none.
        base_url: the API root without ``/v1`` (a trailing ``/v1`` is dropped).
        timeout: seconds to connect and for each wait on the server.
        retries: extra attempts for transient failures (429, 5xx incl. 529 overloaded, network).
        sleep: how to wait between attempts.

    Raises:
        InvalidArgumentError: an empty ``api_key`` or a malformed ``base_url``, ``timeout`` or ``retries``.
    """

    API_VERSION = "2023-06-01"
    DEFAULT_BASE_URL = "https://api.anthropic.com"

    def __init__(self, api_key: Any, model: str = "claude-haiku-4-5-20251001", *,
                 base_url: str = DEFAULT_BASE_URL, timeout: float = 60.0, retries: int = 2,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        # upstream's form: AnthropicAdapter(client), an ``anthropic``-shaped SDK client (client.messages.create)
        self._client = None if isinstance(api_key, str) else api_key
        if self._client is not None:
            if not hasattr(getattr(self._client, "messages", None), "create"):
                raise InvalidArgumentError("give an API key or an Anthropic-style client (client.messages.create)")
            api_key = "client"
        if not isinstance(api_key, str) or not api_key.strip():
            raise InvalidArgumentError("api_key must be a non-empty string")
        if not isinstance(model, str) or not model:
            raise InvalidArgumentError("model must be a non-empty string")
        root = _http_root(base_url)
        self.base_url = root[:-3] if root.endswith("/v1") else root
        self.model = model
        self.timeout, self.retries = _check_transport(timeout, retries)
        self._api_key = api_key
        self._sleep = sleep

    @classmethod
    def create(cls, *, api_key: str, model: str = "claude-haiku-4-5-20251001", base_url: str | None = None,
               **options: Any) -> "AnthropicAdapter":
        """An adapter for ``base_url`` (default ``https://api.anthropic.com``); ``options`` are the
        constructor's keywords (``timeout``, ``retries``, ``sleep``)."""
        return cls(api_key, model, base_url=base_url or cls.DEFAULT_BASE_URL, **options)

    def __repr__(self) -> str:
        return f"AnthropicAdapter(model={self.model!r}, base_url={_redact_url(self.base_url)!r})"

    async def chat(self, *, messages: list[dict[str, Any]], model: str = "", system: str = "",
                   max_tokens: int = 1024, json_mode: bool | str | dict[str, Any] = False) -> str:
        """Send one message request and return the reply text.

        Runs the HTTP call in a worker thread; cancelling the await returns at once, while the thread ends
        within ``timeout``.

        Args:
            messages: ``{"role", "content"}`` dicts, oldest first; ``system`` ones join the system text.
            model: overrides the adapter's model.
            system: the system text (with the ``json_mode`` instruction appended).
            max_tokens: the reply's token budget.
            json_mode: ``False``, ``True``, ``"array"`` or ``{"name", "schema"[, "strict"]}``.

        Returns:
            The ``text`` of the reply's ``content`` blocks of type ``text``, concatenated.

        Raises:
            InvalidArgumentError: malformed arguments, or no user/assistant message.
            ServiceError: the server failed, refused, or answered in another shape.
        """
        system_parts = [system]
        turns = []
        for message in _check_chat(messages, max_tokens):
            if message["role"] != "system":
                turns.append(message)
            elif isinstance(message["content"], str):
                system_parts.append(message["content"])
            else:
                raise InvalidArgumentError("a system message for Anthropic must have string content")
        if not turns:
            raise InvalidArgumentError("messages needs at least one user or assistant message")
        system_parts.append(_json_instruction(_check_json_mode(json_mode), object_only=False))
        body: dict[str, Any] = {"model": model or self.model, "max_tokens": max_tokens, "messages": turns}
        system_text = _join_text(*system_parts)
        if system_text:
            body["system"] = system_text
        if self._client is not None:
            return self._reply_text(_sdk_payload(await _maybe_await(self._client.messages.create(**body))))
        headers = {"x-api-key": self._api_key, "anthropic-version": self.API_VERSION}
        payload = await asyncio.to_thread(
            _post_json, f"{self.base_url}/v1/messages", body, headers, timeout=self.timeout,
            retries=self.retries, sleep=self._sleep, secret=self._api_key, what="Anthropic messages")
        return self._reply_text(payload)

    def _reply_text(self, payload: dict[str, Any]) -> str:
        """The concatenated ``text`` blocks of ``content``.

        Raises:
            ServiceError: not transient: a refusal with no text, or another shape.
        """
        where = f"{_redact_url(self.base_url)}/v1/messages"
        content = payload.get("content")
        if not isinstance(content, list):
            raise ServiceError(f"Anthropic messages service at {where} answered without a content list",
                               transient=False)
        texts = [block["text"] for block in content
                 if isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str)]
        if not texts and payload.get("stop_reason") == "refusal":
            raise ServiceError(f"the model at {where} declined (stop_reason 'refusal')", transient=False)
        return "".join(texts)


# -- the embedding adapter (shares the HTTP plumbing above) ------------------------------------------------

class OpenAICompatEmbeddingAdapter:
    """Embeddings from any server speaking OpenAI's ``POST /v1/embeddings`` (OpenAI, Ollama, vLLM,
    llama.cpp server), over the standard library's ``urllib``.

    Args:
        base_url: the API root including ``/v1``, e.g. ``http://localhost:11434/v1``.
        api_key: sent as ``Authorization: Bearer``; never shown in errors or ``repr``.
        model: the embedding model name.
        timeout: seconds to wait for one request.
        batch_size: texts per request.
        retries: extra attempts for transient failures (connection errors, 429, 5xx), with backoff.
    """

    def __init__(self, base_url: Any, api_key: str | None = None, model: str = "text-embedding-3-small", *,
                 timeout: float = 30.0, batch_size: int = 64, retries: int = 2,
                 sleep: Callable[[float], None] = time.sleep, default_model: str | None = None) -> None:
        # upstream's form: OpenAICompatEmbeddingAdapter(client, default_model=...), an ``openai``-shaped
        # client (client.embeddings.create)
        self._client = None if isinstance(base_url, str) else base_url
        if default_model:
            model = default_model
        if self._client is not None:
            if not hasattr(getattr(self._client, "embeddings", None), "create"):
                raise InvalidArgumentError("give a base URL or an OpenAI-style client (client.embeddings.create)")
            base_url = "http://client"
        if not isinstance(base_url, str) or not re.match(r"^https?://", base_url):
            shown = _redact_url(base_url) if isinstance(base_url, str) else type(base_url).__name__
            raise InvalidArgumentError(f"base_url must be an http(s) URL, not {shown!r}")
        if not isinstance(batch_size, int) or batch_size < 1:
            raise InvalidArgumentError("batch_size must be a positive integer")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.timeout = float(timeout)
        self.batch_size = batch_size
        self.retries = int(retries)
        self._api_key = api_key
        self._sleep = sleep

    @classmethod
    def create(cls, *, api_key: str | None = None, base_url: str | None = None,
               model: str = "text-embedding-3-small", **options: Any) -> "OpenAICompatEmbeddingAdapter":
        """An adapter for ``base_url`` (default OpenAI's ``https://api.openai.com/v1``)."""
        return cls(base_url or OpenAICompatAdapter.DEFAULT_BASE_URL, api_key, model, **options)

    def __repr__(self) -> str:
        return f"OpenAICompatEmbeddingAdapter({_redact_url(self.base_url)!r}, model={self.model!r})"

    def embed(self, texts: list[str], *, model: str = "") -> list[list[float]]:
        """Embed ``texts`` (batched); raises ``ServiceError`` when the server fails or answers nonsense."""
        if isinstance(texts, str) or not all(isinstance(text, str) for text in texts):
            raise InvalidArgumentError("texts must be a list of strings")
        vectors: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            vectors.extend(self._request(list(texts[start:start + self.batch_size]), model or self.model))
        return vectors

    def _request(self, texts: list[str], model: str) -> list[list[float]]:
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        if self._client is not None:
            payload = _sdk_payload(self._client.embeddings.create(model=model, input=texts))
        else:
            payload = _post_json(self.base_url + "/embeddings", {"model": model, "input": texts}, headers,
                                 timeout=self.timeout, retries=self.retries, sleep=self._sleep,
                                 secret=self._api_key, what="embedding")
        where = f"{_redact_url(self.base_url)}/embeddings"
        try:
            data = sorted(payload["data"], key=lambda entry: entry.get("index", 0))
            vectors = [[float(value) for value in entry["embedding"]] for entry in data]
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ServiceError(f"embedding service at {where} answered without data[].embedding",
                               transient=False) from exc
        if len(vectors) != len(texts):
            raise ServiceError(f"embedding service at {where} returned {len(vectors)} vectors for "
                               f"{len(texts)} texts", transient=False)
        return vectors



# -- graph-augmented recall -----------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class GraphAugmentationConfig:
    """How ``GraphAugmentedRecall`` widens a recall (names and defaults as in kumiho-memory).

    Attributes:
        max_hops: how far to walk edges from the seeds (1 or 2).
        edge_types: which edges to walk.
        top_k_for_traversal: how many of the best hits seed the walk.
        max_total: cap on results (default ``3 x limit``).
        reformulate_queries: ask the query from other angles before merging.
        reformulate_max_angles: at most this many extra angles.
        traversal_timeout: seconds for the whole recall before it returns what it has.
        hop_decay: a neighbour's score is its seed's score times this, per hop.
    """

    max_hops: int = 1
    edge_types: tuple[str, ...] = (DERIVED_FROM, DEPENDS_ON, REFERENCED, CONTAINS, CREATED_FROM, SUPERSEDES,
                                   SUPPORTS, CONTRADICTS)
    top_k_for_traversal: int = 5
    max_total: int | None = None
    reformulate_queries: bool = True
    reformulate_max_angles: int = 3
    traversal_timeout: float = 30.0
    hop_decay: float = 0.5


async def _call(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Run a sync function in a thread, or await a coroutine function."""
    if asyncio.iscoroutinefunction(function):
        return await function(*args, **kwargs)
    return await asyncio.to_thread(function, *args, **kwargs)


_json_from_llm = parse_llm_json      # the name the graph and summary code grew up with


def lexical_angles(query: str, hits: Sequence[Mapping[str, Any]], max_angles: int) -> list[str]:
    """Other ways to ask ``query`` without an LLM: its content words alone, then words that its first
    hits share with each other but the query lacks (pseudo-relevance feedback)."""
    terms = [match.group() for match in _WORD.finditer(query.casefold()) if match.group() not in STOPWORDS]
    angles = []
    if terms and " ".join(terms) != query.casefold().strip():
        angles.append(" ".join(terms))
    counts: dict[str, int] = {}
    query_terms = set(tokenize(query))
    for hit in hits[:3]:
        for word in dict.fromkeys(match.group() for match in _WORD.finditer(
                (hit.get("title", "") + " " + hit.get("content", "")).casefold())):
            if word not in STOPWORDS and len(word) > 2 and stem(word) not in query_terms:
                counts[word] = counts.get(word, 0) + 1
    shared = [word for word, count in sorted(counts.items(), key=lambda pair: -pair[1]) if count >= 2][:5]
    if shared:
        angles.append(query + " " + " ".join(shared))
    return angles[:max_angles]


class GraphAugmentedRecall:
    """Recall that asks from several angles, merges, and walks typed edges from the best hits.

    Args:
        adapter: optional LLM adapter (``async chat(messages=..., model=..., max_tokens=..., json_mode=...)``)
            for reformulating queries and proposing edges; without one both are done lexically.
        model: the model name passed to the adapter.
        recall_fn: ``(query, *, limit, space_paths, memory_types) -> list[dict]`` (sync or async); default
            ``memory.recall``.
        config: a ``GraphAugmentationConfig``.
        memory: the ``Memory`` whose graph is walked (required to walk edges and create them).
    """

    def __init__(self, adapter: Any = None, model: str = "", recall_fn: Callable[..., Any] | None = None,
                 config: GraphAugmentationConfig | None = None, *, memory: "Memory | None" = None) -> None:
        if recall_fn is None and memory is None:
            raise InvalidArgumentError("GraphAugmentedRecall needs memory= or recall_fn=")
        self.adapter, self.model, self.memory = adapter, model, memory
        self.config = config or GraphAugmentationConfig()
        self.recall_fn = recall_fn or (  # the walk below replaces recall's own edge signal
            lambda query, **options: memory.recall(query, follow_edges=False, **options))  # type: ignore[union-attr]
        self.last_error: str | None = None

    async def _angles(self, query: str, hits: Sequence[Mapping[str, Any]]) -> list[str]:
        if not self.config.reformulate_queries or self.config.reformulate_max_angles <= 0:
            return []
        if self.adapter is not None:
            prompt = (f"Rewrite this memory search query from up to {self.config.reformulate_max_angles} "
                      f"different angles (synonyms, the underlying need, likely wording of the answer). "
                      f"Reply with a JSON array of strings only.\n\nQuery: {query}")
            try:
                reply = await adapter_chat(self.adapter, messages=[{"role": "user", "content": prompt}], model=self.model,
                                                max_tokens=256, json_mode="array")
                angles = [angle for angle in parse_llm_json(reply, expect=list) if isinstance(angle, str) and angle.strip()]
                if not angles:
                    raise ValueError("the reply held no query strings")
                return angles[: self.config.reformulate_max_angles]
            except Exception as exc:  # the adapter is the caller's code: any failure falls back to lexical angles
                self.last_error = f"reformulation failed, used lexical angles: {type(exc).__name__}: {exc}"
        return lexical_angles(query, hits, self.config.reformulate_max_angles)

    async def recall(self, query: str, *, limit: int = 5, space_paths: Sequence[str] | None = None,
                     memory_types: Sequence[str] | None = None, max_total: int | None = None,
                     max_hops: int | None = None, edge_types: Sequence[str] | None = None,
                     query_time: str | float | _dt.datetime | None = None) -> list[dict[str, Any]]:
        """Recall ``query`` from several angles, merge by kref (best score), then add the edge neighbours
        of the top hits (``graph_augmented: True``, ``hop``); if the seeds have no such edges, a second
        recall on their titles stands in for the walk. At most ``max_total`` (default ``3 x limit``)."""
        try:
            return await asyncio.wait_for(
                self._recall(query, limit, space_paths, memory_types, max_total, max_hops, edge_types, query_time),
                timeout=self.config.traversal_timeout)
        except asyncio.TimeoutError as exc:
            raise ServiceError(f"graph-augmented recall took longer than {self.config.traversal_timeout:g}s",
                               transient=True) from exc

    async def _recall(self, query: str, limit: int, space_paths: Sequence[str] | None,
                      memory_types: Sequence[str] | None, max_total: int | None, max_hops: int | None,
                      edge_types: Sequence[str] | None, query_time: Any = None) -> list[dict[str, Any]]:
        options: dict[str, Any] = {"limit": 2 * limit, "space_paths": space_paths, "memory_types": memory_types}
        if query_time is not None:
            options["query_time"] = query_time
        first = await _call(self.recall_fn, query, **options)
        merged = {hit["kref"]: hit for hit in first}
        for angle in await self._angles(query, first):
            for hit in await _call(self.recall_fn, angle, **options):
                if hit["kref"] not in merged or hit["score"] > merged[hit["kref"]]["score"]:
                    merged[hit["kref"]] = {**hit, "angle": angle}
        ranked = sorted(merged.values(), key=lambda hit: -hit["score"])[: 2 * limit]
        extras, had_edges = await self._walk(ranked, max_hops or self.config.max_hops,
                                             set(edge_types or self.config.edge_types))
        if not had_edges and ranked and self.memory is not None:
            titles = " ".join(hit.get("title", "") for hit in ranked[:3])
            for hit in await _call(self.recall_fn, titles, **options):
                if hit["kref"] not in merged:
                    extras.append({**hit, "score": round(hit["score"] * self.config.hop_decay * ranked[0]["score"], 6),
                                   "graph_augmented": True, "hop": 2})
        known = {hit["kref"] for hit in ranked}
        combined = ranked + [extra for extra in extras if extra["kref"] not in known]
        combined.sort(key=lambda hit: -hit["score"])
        return combined[: max_total or self.config.max_total or 3 * limit]

    async def _walk(self, seeds: list[dict[str, Any]], hops: int,
                    edge_types: set[str]) -> tuple[list[dict[str, Any]], bool]:
        """Neighbours of the seeds over ``edge_types`` (current revisions only), and whether any seed had
        such an edge at all."""
        if self.memory is None:
            return [], False
        memory = self.memory
        had_edges = False
        found: dict[str, dict[str, Any]] = {}
        frontier = seeds[: self.config.top_k_for_traversal]
        seen = {hit["kref"] for hit in seeds}
        for hop in range(1, max(1, hops) + 1):
            next_frontier = []
            for seed in frontier:
                edges = await asyncio.to_thread(memory.edges, seed["kref"])
                for edge in edges:
                    if edge["edge_type"] not in edge_types:
                        continue
                    had_edges = True
                    other = edge["target_kref"] if edge["source_kref"] == seed["kref"] else edge["source_kref"]
                    if edge["edge_type"] == CONTRADICTS and other not in seed.setdefault("contested_by", []):
                        seed["contested_by"].append(other)
                    if other in seen:
                        continue
                    try:
                        record = await asyncio.to_thread(memory.get, other)
                        current = await asyncio.to_thread(memory.get, record["item_kref"])
                    except NotFoundError:
                        continue
                    if record["deprecated"] or current["kref"] != record["kref"]:
                        continue                     # retired, or an older revision of its belief
                    seen.add(other)
                    found[other] = {**record, "score": round(seed["score"] * self.config.hop_decay, 6),
                                    "graph_augmented": True, "hop": hop,
                                    "via": {"kref": seed["kref"], "edge_type": edge["edge_type"]}}
                    next_frontier.append(found[other])
            frontier = next_frontier
        return list(found.values()), had_edges

    async def discover_edges(self, revision_kref: str, summary: str, *, max_queries: int = 5, max_edges: int = 3,
                             min_score: float = 0.3, edge_type: str = REFERENCED,
                             space_paths: Sequence[str] | None = None) -> list[dict[str, Any]]:
        """Find memories related to ``summary`` and link ``revision_kref`` to them.

        Queries come from the LLM adapter (what this memory implies) or, without one, from the summary's
        sentences. Each candidate's score is the share of its words found in the summary (0..1); those
        below ``min_score`` and the memory's own item are dropped; the best ``max_edges`` get an edge with
        metadata ``{reason, score, query}``.

        Returns:
            ``[{source, target, edge_type, query, score}]``.
        """
        if self.memory is None:
            raise InvalidArgumentError("discover_edges needs memory=")
        source = parse_item_kref(revision_kref)
        summary = _checked_text(summary, "summary", limit=MAX_CONTENT_CHARS)
        validate_edge_type(edge_type)
        queries: list[str] = []
        if self.adapter is not None:
            prompt = (f"List up to {max_queries} short search queries for earlier memories this one relates to "
                      f"(causes, dependencies, same topic). Reply with a JSON array of strings only.\n\n{summary}")
            try:
                reply = await adapter_chat(self.adapter, messages=[{"role": "user", "content": prompt}], model=self.model,
                                                max_tokens=256, json_mode="array")
                queries = [q for q in parse_llm_json(reply, expect=list) if isinstance(q, str) and q.strip()][:max_queries]
            except Exception as exc:  # the adapter is the caller's code: fall back to the summary's sentences
                self.last_error = f"edge queries failed, used the summary's sentences: {type(exc).__name__}: {exc}"
        if not queries:
            sentences = [part.strip() for part in re.split(r"(?<=[.!?])\s+", summary) if len(part.strip()) > 12]
            queries = (sentences or [summary])[:max_queries]
        summary_terms = set(tokenize(summary))
        own_item = str(source.item_kref())
        best: dict[str, dict[str, Any]] = {}
        for query in queries:
            for hit in await _call(self.recall_fn, query, limit=3, space_paths=space_paths, memory_types=None):
                if hit["item_kref"] == own_item:
                    continue
                terms = set(tokenize(hit.get("title", "") + " " + hit.get("content", "")))
                score = round(len(terms & summary_terms) / len(terms), 4) if terms else 0.0
                if score >= min_score and score > best.get(hit["kref"], {}).get("score", -1.0):
                    best[hit["kref"]] = {"source": str(source), "target": hit["kref"], "edge_type": edge_type,
                                         "query": query, "score": score}
        chosen = sorted(best.values(), key=lambda edge: -edge["score"])[:max_edges]
        for edge in chosen:
            await asyncio.to_thread(self.memory.link, edge["source"], edge["target"], edge_type,
                                    {"reason": "shares words with the new memory" if self.adapter is None
                                     else "proposed by the edge discoverer", "score": edge["score"],
                                     "query": edge["query"]})
        return chosen


# -- belief revision: when a new statement revises an old one ---------------------------------------------------

GROUNDING_STALE_TAG = "grounding:stale"
GROUNDING_FANOUT = 20
_CAPITALIZED = re.compile(r"\b[A-Z][\w'-]*")


def normalize_statement(text: str) -> str:
    """Text compared for equivalence: casefolded, whitespace collapsed, outer punctuation dropped."""
    return " ".join(text.casefold().split()).strip(" .!?;:,")


def statement_subjects(text: str) -> set[str]:
    """The named things a statement is about: stems of its capitalized words that are not stopwords."""
    subjects = set()
    for match in _CAPITALIZED.finditer(text):
        word = match.group().casefold().rstrip("'s").rstrip("'")
        if word and word not in STOPWORDS:
            subjects.update(tokenize(word))
    return subjects


def belief_similarity(left: str, right: str) -> float:
    """How much two statements share, 0..1: the overlap coefficient of their index terms, with the named
    things they are about counting double. Statements about different named subjects score 0."""
    left_subjects, right_subjects = statement_subjects(left), statement_subjects(right)
    if left_subjects and right_subjects and not left_subjects & right_subjects:
        return 0.0
    def weights(text: str, subjects: set[str]) -> dict[str, float]:
        return {term: (2.0 if term in subjects else 1.0) for term in tokenize(text)}
    left_weights, right_weights = weights(left, left_subjects), weights(right, right_subjects)
    if not left_weights or not right_weights:
        return 0.0
    shared = sum(min(left_weights[term], right_weights[term]) for term in left_weights.keys() & right_weights.keys())
    return shared / min(sum(left_weights.values()), sum(right_weights.values()))


_SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*://")
_SECOND_LEVEL = {"co", "com", "org", "net", "gov", "ac", "edu"}


def canonical_source(source: str) -> str:
    """One name per independent source, so "Wikipedia", "wikipedia.org" and
    "https://en.wikipedia.org/wiki/X" count once: URLs and domains become their registrable name
    (``wikipedia``), other names their lowercase slug (``press-release:acme`` keeps its prefix).
    """
    text = source.strip().casefold()
    host = None
    if _SCHEME.match(text):
        host = _SCHEME.sub("", text).split("/", 1)[0].split("@")[-1].split(":")[0]
    elif re.fullmatch(r"[a-z0-9-]+(\.[a-z0-9-]+)+(/.*)?", text):
        host = text.split("/", 1)[0]
    if host:
        labels = [label for label in host.split(".") if label]
        if len(labels) >= 3 and labels[-2] in _SECOND_LEVEL and len(labels[-1]) == 2:
            return labels[-3]
        return labels[-2] if len(labels) >= 2 else labels[0]
    return re.sub(r"[^a-z0-9:]+", "-", text).strip("-") or text


_DISCOURSE_OPENER = re.compile(r"^\s*[A-Za-z]+\s*[,:]")     # "Actually, ...", "Update: ..."
# Capitalized only because they open a sentence: never the subject ("Actually the dog Nina has ...").
DISCOURSE_WORDS = frozenset("""
actually also anyway apparently basically btw correction fyi hey hi hmm however incidentally indeed luckily
meanwhile no note nowadays ok okay oh please plus ps recently reminder so sorry still thanks today tomorrow
turns unfortunately update well yes yesterday
""".split())


def _statement_body(text: str) -> str:
    return _DISCOURSE_OPENER.sub("", text, count=1)


_NAME_RUN = re.compile(r"\b[A-Z][\w'-]*(?:\s+[A-Z][\w'-]*)*")


# After a possessive these name another person or thing than the possessor: "Nina's sister works at X" is
# about Nina's sister, not Nina ("Nina's favorite color", "Nina's employer" stay about Nina).
RELATIVE_NOUNS = frozenset("""
sister brother mother father mom dad parent parents wife husband partner spouse son daughter child children
kid kids baby friend friends boyfriend girlfriend fiance fiancee boss manager colleague coworker cousin aunt
uncle niece nephew grandmother grandfather grandma grandpa neighbor neighbour roommate flatmate team company
client customer teacher doctor mentor assistant
""".split())


# -- first person: "I", "my", "we" name the speaker ---------------------------------------------------------
#
# In a user's message "I live in Berlin" is about the user, not Berlin. Before statements are compared, first
# person is rewritten into the speaker's name ("Ann lives in Berlin", "Ann's daughter is 7", "Ann-group's
# office"), so a first-person statement and a third-person one about the same person are one subject, and "my
# daughter" is a subject of its own (a relative of the speaker). Stored text is never rewritten.

USER_ROLES = frozenset({"user", "human", "me", "customer", "client", "owner"})
ASSISTANT_ROLES = frozenset({"assistant", "ai", "bot", "system", "agent", "model", "tool", "developer"})
SPACE_USER = "User"          # who "I" is when nothing in the metadata says: the space's user
_FIRST_PERSON = re.compile(
    r"(?<![\w'’-])(?:(?P<i_is>I'm|I’m|I am)|(?P<i_has>I've|I’ve)|(?P<i_would>I'd|I’d)|(?P<i_will>I'll|I’ll)|"
    r"(?P<i>I)|(?P<my>[Mm]y|[Mm]ine)|(?P<me>[Mm]e|[Mm]yself)|(?P<we_are>[Ww]e're|[Ww]e’re|[Ww]e are)|"
    r"(?P<we_have>[Ww]e've|[Ww]e’ve)|(?P<we>[Ww]e|us|[Oo]urselves)|(?P<our>[Oo]ur|[Oo]urs))(?![\w'’-])")
_FIRST_PERSON_FORMS = {"i_is": "{n} is", "i_has": "{n} has", "i_would": "{n} would", "i_will": "{n} will",
                       "i": "{n}", "my": "{n}'s", "me": "{n}", "we_are": "{n}-group is", "we_have": "{n}-group has",
                       "we": "{n}-group", "our": "{n}-group's"}


def speaker_name(metadata: Mapping[str, Any] | None) -> str:
    """Who "I" is in a memory: a named ``speaker``; "Assistant" for an assistant's (``role``/``speaker``)
    message; else the user: ``user_id`` (or ``user``), else the space's user (``SPACE_USER``)."""
    metadata = metadata or {}
    speaker = metadata.get("speaker") if isinstance(metadata.get("speaker"), str) else ""
    role = metadata.get("role") if isinstance(metadata.get("role"), str) else ""
    if speaker.strip() and speaker.strip().casefold() not in USER_ROLES | ASSISTANT_ROLES:
        return speaker.strip()
    if (speaker or role).strip().casefold() in ASSISTANT_ROLES:
        return "Assistant"
    for key in ("user_id", "user"):
        value = metadata.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return SPACE_USER


def first_person(text: str, speaker: str | None) -> str:
    """``text`` with its first person rewritten into ``speaker``'s name (see above); unchanged without a
    speaker or first person. "I moved to Munich" -> "Ann moved to Munich", "my daughter" -> "Ann's daughter"."""
    if not speaker:
        return text
    return _first_person_cached(text, speaker)


@functools.lru_cache(maxsize=1024)
def _first_person_cached(text: str, speaker: str) -> str:
    if not _FIRST_PERSON.search(text):
        return text
    name = "-".join(part[:1].upper() + part[1:] for part in _WORD.findall(speaker)) or SPACE_USER
    return _FIRST_PERSON.sub(lambda match: _FIRST_PERSON_FORMS[match.lastgroup].format(n=name), text)


def resolved_statement(text: str, metadata: Mapping[str, Any] | None = None) -> str:
    """The statement a memory makes, as the belief logic compares it: first person resolved to the speaker
    (``speaker_name``)."""
    return first_person(text, speaker_name(metadata))


# A statement that opens with a determiner ("The meeting day is Monday") is about that noun phrase: a name
# after its verb is its value, never its subject ("The office wifi is called Harbor-5").
_DETERMINERS = frozenset("the a an this that these those its their his her your every each some any".split())
_VERB_BOUNDARY = frozenset("""
is are was were be been being has have had will would can could should shall may might must does do did isn't
aren't wasn't weren't hasn't haven't won't uses use used runs run ran gets got became becomes moved moves
switched changed renamed called named goes went starts started lives works takes took means stands
""".split())
# Names of days and months open statements without being what they are about ("Monday I start at Globex").
TIME_NAMES = frozenset("""
monday tuesday wednesday thursday friday saturday sunday january february march april may june july august
september october november december today tonight tomorrow yesterday
""".split())


def _value_start(body: str) -> int | None:
    """Where the value part of a determiner-led statement starts (its first verb), else None."""
    words = list(re.finditer(r"[\w'’-]+", body))
    index = 0
    while index < len(words) and words[index].group().casefold() in DISCOURSE_WORDS:
        index += 1
    if index >= len(words) or words[index].group().casefold() not in _DETERMINERS:
        return None
    for word in words[index + 1:]:
        if word.group().casefold() in _VERB_BOUNDARY:
            return word.start()
    return None


def statement_subject(text: str, *, speaker: str | None = None) -> str | None:
    """The named thing a statement is about: the stems of its first run of capitalized non-stopword words
    ("Nina Tanaka's ..." -> ``"nina tanaka"``, "Nina's sister ..." -> ``"nina sister"``); an opening
    "Actually," or "Update:" does not count, nor does a name after the verb of a statement that opens with a
    determiner ("The meeting day is Monday" has no named subject). With ``speaker``, first person names the
    speaker ("I moved" -> the speaker, "my daughter" -> ``"<speaker> daughter"``)."""
    body = _statement_body(first_person(text, speaker))
    value_start = _value_start(body)
    for match in _NAME_RUN.finditer(body):
        if value_start is not None and match.start() >= value_start:
            return None
        words = []
        for word in match.group().split():
            plain = word.casefold()
            possessive = plain.endswith("'s")
            plain = plain[:-2] if possessive else plain.rstrip("'")
            if plain in STOPWORDS or (not words and plain in TIME_NAMES) or \
                    (not words and plain in DISCOURSE_WORDS and match.start() == 0):
                if words:
                    break
                continue
            words.append(plain)
            if possessive:
                following = re.match(r"\s+([A-Za-z]+)", body[match.start() + match.group().find(word) + len(word):])
                if following and following.group(1).casefold() in RELATIVE_NOUNS:
                    words.append(following.group(1).casefold())
                break
        stems = [stem_part for word in words for stem_part in tokenize(word)]
        if stems:
            return " ".join(stems)
    return None


def _claim_terms(text: str) -> list[str]:
    subject = set((statement_subject(text) or "").split())
    return [term for term in tokenize(_statement_body(text)) if term not in subject]


# Identifier-like names are exact: "a_val" and "b_val", "v1" and "v2" name different things.
_IDENTIFIER = re.compile(r"(?<![\w.-])(?:[A-Za-z][A-Za-z0-9]*_[A-Za-z0-9_]*[A-Za-z0-9]|[a-z]{1,3}\d+[a-z0-9]*)"
                         r"(?![\w-])")


def statement_identifiers(text: str) -> frozenset[str]:
    """The identifier-like tokens a statement names (``a_val``, ``skill_python``, ``db_choice``, ``v1``),
    but not its last word, which is its value ("the API version is *v2*")."""
    end = len(text.rstrip(" .!?;:,\"')"))
    return frozenset(match.group().casefold() for match in _IDENTIFIER.finditer(text) if match.end() != end)


# Words that say a statement corrects an earlier one (issue 16): with a value the old statement holds, they
# tie a correction to it ("I sold the *Civic*", "switched from *vim*").
_CORRECTION_CUE = re.compile(
    r"\b(?:actually|now|these days|nowadays|no longer|not anymore|any ?more|switch\w*|chang\w*|turns out|"
    r"turned out|instead|sold|replaced|traded|gave up|quit|left|gone back|went back|used to|from|new)\b")
CUE_WORDS = frozenset("""
switched switch switching changed change changing instead sold replaced traded gave quit left gone went back
used longer new bought got started
""".split())


# Verbs whose objects add up rather than replace each other: "plays the piano" and "plays tennis" are two
# beliefs, while "lives in Paris" then "lives in London" is one belief changing.
MULTI_VALUED_PREDICATES = frozenset(stem(word) for word in (
    "like", "likes", "love", "loves", "enjoy", "enjoys", "play", "plays", "allergic", "own", "owns", "has",
    "have", "speak", "speaks", "know", "knows", "visit", "visited", "collect", "collects", "read", "reads",
    "watch", "watches", "listen", "listens", "study", "studies", "friend", "friends", "hobby", "hobbies"))


# -- relation-level matching: a correction in other words ------------------------------------------------------
#
# "Nina moved to Lyon" corrects "Nina lives in Paris" though the two share no word but the name. Two things
# say that they state the same relation: a small registry of relation words (English, general, like the
# upstream ontology's predicate registry: synonyms -> one canonical relation), and, for a statement that
# names no relation ("Nina prefers teal these days"), how its value is used elsewhere in the store (teal is
# someone's favorite color). A new statement revises an old one about the same subject only when exactly one
# of the subject's current beliefs shares a relation with it; several or none -> a new belief (precision first).

BELIEF_RELATIONS: dict[str, str] = {
    "residence": r"\b(?:lives?|lived|living|resides?|resided|residing|based in|home is|hometown|moved|moves|"
                 r"moving|relocat\w*|apartment|flat in|house in|settled in)\b",
    "employer": r"\b(?:works?|worked|working|employ\w*|jobs?|joined|hired|workplace|started at|"
                r"career at|position at)\b",
    "vehicle": r"\b(?:drives?|drove|driving|car|cars|vehicle|motorbike|motorcycle)\b",
    "dog": r"\b(?:dog|dogs|puppy)\b",
    "cat": r"\b(?:cat|cats|kitten)\b",
    "partner": r"\b(?:married|wife|husband|spouse|partner|girlfriend|boyfriend|fianc\w*|dating)\b",
    "age": r"\b(?:years? old|age is|aged|turn(?:s|ed|ing)? \d+)\b",
    "school": r"\b(?:studies at|student at|enrolled|attends|graduated from)\b",
    "phone": r"\b(?:phone|mobile|cell) (?:number|no)\b",
    "email": r"\be-?mail(?: address)?\b",
    # what people correct about themselves (issue 16): role, devices, tools, diet, schedule, plans
    "role": r"\b(?:role|job title|promoted|works? as an?|working as an?|position as|"
            r"as an? (?:\w+ )?(?:engineer|designer|developer|manager|analyst|teacher|nurse|doctor|lawyer|"
            r"consultant|scientist|writer|architect|researcher|director|intern))\b",
    "manager": r"\b(?:reports? to|reporting to|supervisor|line manager)\b",
    "pet": r"\b(?:pet|hamster|parrot|rabbit|bunny|guinea pig|goldfish|turtle|tortoise)\b",
    "handset": r"\b(?:iphone|android phone|pixel \d+|galaxy s\d+|smartphone|phone is an?)\b",
    "computer": r"\b(?:laptop|macbook|thinkpad|chromebook|desktop pc|tablet|ipad)\b",
    "editor": r"\b(?:editor|ide|vim|neovim|emacs|vs ?code|visual studio|intellij|pycharm|sublime text|"
              r"editing code|for coding)\b",
    "display": r"\b(?:dark|light) (?:mode|theme)\b",
    "diet": r"\b(?:vegetarian|vegan|pescatarian|keto|paleo|gluten-free|dairy-free|diet|eat meat|eating meat)\b",
    "wake": r"\b(?:wakes? up|woke up|waking up|gets? up at|alarm)\b",
    "bedtime": r"\b(?:bedtime|goes? to bed|went to bed|go to sleep)\b",
    "hours": r"\b(?:work(?:ing)? hours|shift starts|start work|starts? work)\b",
    "trip": r"\b(?:trip|vacation|holiday|flying to|fly to|flight to)\b",
    "health": r"\b(?:diagnosed|injur\w*|sprained|recovering from|medication|prescribed|surgery)\b",
}
# "favorite X" names a relation by its noun; these nouns name one thing.
FAVORITE_NOUNS = {"colour": "color", "dish": "food", "meal": "food", "cuisine": "food", "foods": "food",
                  "sports": "sport", "game": "sport", "movie": "film", "films": "film", "book": "book",
                  "band": "music", "song": "music", "singer": "music", "drink": "drink", "beverage": "drink"}
_FAVORITE = re.compile(r"\bfavou?rite\s+([a-z]+)")
_TYPED_NOUN = re.compile(r"\b(?:the colou?r|colou?r)\b")
_COMPILED_RELATIONS = {name: re.compile(pattern) for name, pattern in BELIEF_RELATIONS.items()}
_RELATION_WORDS = re.compile("|".join(f"(?:{pattern})" for pattern in BELIEF_RELATIONS.values())
                             + r"|\bfavou?rite\s+[a-z]+|\bcolou?r\b")


# -- query-time expansion: a question in other words than the memory ------------------------------------------

def _relation_terms(pattern: str) -> tuple[str, ...]:
    """The index terms a belief relation's pattern spells out ("lives?|moved|relocat\\w*" -> live, move, reloc)."""
    words = re.sub(r"\\w\*", "ed", pattern)              # relocat\w* -> relocated -> reloc
    words = re.sub(r"\\b|\(\?:|\)|\\d\+|\?", " ", words)
    return tuple(dict.fromkeys(term for alternative in words.split("|") for term in tokenize(alternative)))


_RELATION_TERMS = {name: _relation_terms(pattern) for name, pattern in BELIEF_RELATIONS.items()}


def query_expansions(query: str) -> tuple[str, ...]:
    """Terms a query means without writing them: the words of the belief relations it names ("where does Ann
    live?" also searches moved, relocated, home, ...), and the -y/-ic pair of derived words (allergy,
    allergies / allergic) that the Porter stemmer leaves apart."""
    text = query.casefold()
    found: dict[str, None] = {}
    for name, pattern in _COMPILED_RELATIONS.items():
        if pattern.search(text):
            found.update(dict.fromkeys(_RELATION_TERMS[name]))
    for word in _WORD.findall(text):
        if word in STOPWORDS or len(word) < 5:
            continue
        term = stem(word)
        if term.endswith("i"):
            found[term[:-1]] = None                    # allergi (allergy) -> allerg (allergic)
        elif word.endswith("ic"):
            found[stem(word[:-2] + "y")] = None        # allergic -> allergi
    written = set(tokenize(query))
    return tuple(term for term in found if term not in written)


def belief_relations(text: str) -> frozenset[str]:
    """The single-valued relations a statement names about its subject: registry names (``residence``,
    ``employer``, ...) and ``favorite:<noun>`` ("favourite dish" -> ``favorite:food``)."""
    lowered = text.casefold()
    found = {name for name, pattern in _COMPILED_RELATIONS.items() if pattern.search(lowered)}
    for noun in _FAVORITE.findall(lowered):
        found.add("favorite:" + FAVORITE_NOUNS.get(noun, noun))
    if _TYPED_NOUN.search(lowered) and not any(name.startswith("favorite:") for name in found):
        found.add("favorite:color")                     # "loves the color blue", "likes blue more than any color"
    return frozenset(found)


# Words of time and frequency: they say when, never what ("these *days*", "every *weekend*").
TIME_WORDS = frozenset("""
now nowadays today tonight yesterday tomorrow lately recently currently still anymore again already soon
day days week weeks weekend weekends month months year years morning mornings evening evenings night nights
time times ago since last next every always usually often sometimes
""".split())


# Words that only colour a statement ("is *really* into judo"): never its value.
FILLER_WORDS = frozenset("""
really very quite pretty totally truly absolutely definitely certainly probably maybe perhaps basically
literally seriously honestly actually just even also rather somewhat kinda sorta super mostly mainly
especially simply
""".split())


def _words(text: str) -> list[str]:
    return re.findall(r"[\w-]+", text.casefold().replace("'s ", " "))


def _value_words(text: str) -> list[str]:
    """Words of a statement that are neither its subject, relation words, stopwords nor time words: where its
    value lives ("Nina prefers *teal* these days")."""
    subject = set((statement_subject(text) or "").split())
    body = _RELATION_WORDS.sub(" ", _statement_body(text).casefold())
    return list(dict.fromkeys(word for word in _words(body) if word not in STOPWORDS and word not in TIME_WORDS
                              and word not in FILLER_WORDS and word not in CUE_WORDS and tokenize(word)
                              and not set(tokenize(word)) & subject))


class RelationMatcher:
    """Finds which current belief of a subject a statement in other words corrects (see above).

    Args:
        search: ``query -> [text, ...]``, statements in the store that share words with ``query`` (the
            memory's own recall, within the space); used to learn what kind of value a word is.
        min_votes: statements naming one relation a word must appear in before it counts as its value.
        min_share: the share of those naming statements that must agree on that relation.
        min_named: the share of the word's statements that must name a relation at all.

    A statement whose words point at two relations is left alone: when unsure, a new belief.
    """

    def __init__(self, search: Callable[[str], list[str]], *, min_votes: int = 2, min_share: float = 0.75,
                 min_named: float = 0.6, min_kinship: float = 0.5, kinship_margin: float = 0.15) -> None:
        self.search = search
        self.min_votes = min_votes
        self.min_share = min_share
        self.min_named = min_named
        self.min_kinship = min_kinship
        self.kinship_margin = kinship_margin
        self._typed: dict[str, str | None] = {}
        self._statements: dict[str, list[str]] = {}
        self._profiles: dict[str, dict[str, float]] = {}

    def statements_with(self, word: str) -> list[str]:
        """The store's statements that hold ``word`` (as a word, not a stem)."""
        if word not in self._statements:
            self._statements[word] = [other for other in self.search(word) if word in _words(other)]
        return self._statements[word]

    def profile(self, word: str) -> dict[str, float]:
        """The company a word keeps: how often each other word (no names, stopwords or time words) shares a
        statement with it in the store, as a unit vector. Values of one kind keep the same company
        ("tennis" and "rugby": *playing*, *into*, *sport*), whatever the words around them today."""
        if word not in self._profiles:
            counts: dict[str, float] = {}
            for other in self.statements_with(word):
                names = {name.casefold() for name in _CAPITALIZED.findall(other)}
                for neighbour in set(_words(other)):
                    if neighbour != word and neighbour not in STOPWORDS and neighbour not in TIME_WORDS \
                            and neighbour not in names and not neighbour.isdigit():
                        counts[neighbour] = counts.get(neighbour, 0.0) + 1.0
            norm = math.sqrt(sum(value * value for value in counts.values())) or 1.0
            self._profiles[word] = {key: value / norm for key, value in counts.items()}
        return self._profiles[word]

    def kinship(self, left: str, right: str) -> float:
        """How alike two statements' values are, 0..1: the best cosine between the profiles of a value
        word of one and a value word of the other (words they share do not count: that is no change)."""
        left_words, right_words = set(_value_words(left)), set(_value_words(right))
        shared = left_words & right_words
        a, b = self.rarest(left_words - shared), self.rarest(right_words - shared)
        if a is None or b is None:
            return 0.0
        pa, pb = self.profile(a), self.profile(b)
        if len(pb) < len(pa):
            pa, pb = pb, pa
        return sum(value * pb.get(key, 0.0) for key, value in pa.items())

    def rarest(self, words: Iterable[str]) -> str | None:
        """The statement's most specific value word: the one the fewest stored statements hold (the value,
        not the words around it), provided the store has seen it at least twice."""
        seen = [(len(self.statements_with(word)), word) for word in words]
        seen = [pair for pair in seen if pair[0] >= 2]
        return min(seen)[1] if seen else None

    def relations(self, text: str) -> frozenset[str]:
        """Named relations, else the one relation its value words carry elsewhere in the store."""
        return belief_relations(text) or self.inferred(text)

    def word_relation(self, word: str) -> str | None:
        """The relation ``word`` is a value of in the store's statements, or None when unclear."""
        if word not in self._typed:
            votes: dict[str, int] = {}
            statements = self.statements_with(word)
            named = 0
            for other in statements:
                relations = belief_relations(other)
                named += bool(relations)
                for relation in relations:
                    votes[relation] = votes.get(relation, 0) + 1
            best = max(votes.items(), key=lambda pair: (pair[1], pair[0]), default=None)
            typed = best is not None and best[1] >= self.min_votes and named >= len(statements) * self.min_named \
                and best[1] / sum(votes.values()) >= self.min_share
            self._typed[word] = best[0] if typed else None
        return self._typed[word]

    def inferred(self, text: str) -> frozenset[str]:
        """The relation the statement's value words carry elsewhere; empty when none or several."""
        found = {self.word_relation(word) for word in _value_words(text)} - {None}
        return frozenset(found) if len(found) == 1 else frozenset()

    def belief_relations(self, history: Sequence[str]) -> frozenset[str]:
        """The relations of a belief given its statements, oldest first: every relation one of them names
        (a belief keeps its relation whatever words its latest statement uses), else the current one's
        inferred relation."""
        named = frozenset().union(*(belief_relations(text) for text in history))
        return named or self.inferred(history[-1])

    def corrected(self, statement: str, beliefs: Sequence[str | Sequence[str]]) -> int | None:
        """Index of the one belief in ``beliefs`` (current statements about the same subject, or each
        belief's statements oldest first) that ``statement`` revises at the relation level, or None when
        none or several do."""
        subject = statement_subject(statement)
        if subject is None:
            return None
        mine = self.relations(statement)
        new_terms = set(_claim_terms(statement))
        matches: list[int] = []
        unknown: list[tuple[int, str]] = []
        for index, belief in enumerate(beliefs):
            history = [belief] if isinstance(belief, str) else list(belief)
            if not history or statement_subject(history[-1]) != subject:
                continue
            if statement_identifiers(history[-1]) != statement_identifiers(statement):
                continue                                  # another identifier: another thing
            if MULTI_VALUED_PREDICATES & new_terms & set(_claim_terms(history[-1])):
                continue                                  # another value of a many-valued relation
            theirs = self.belief_relations(history)
            if mine & theirs:
                matches.append(index)
            elif not (mine and theirs):                  # a known relation never meets another known one
                unknown.append((index, history[-1]))
        if matches:
            return matches[0] if len(matches) == 1 else None
        # A correction cue and a value the old statement holds: "I sold the Civic", "switched from vim".
        if _CORRECTION_CUE.search(statement.casefold()):
            values = set(_value_words(statement))
            mentioned = [index for index, text in unknown if values & set(_value_words(text))]
            if len(mentioned) == 1:
                return mentioned[0]
        # No relation decides: the one belief whose value is of the same kind as the new one, by a margin.
        scored = sorted(((self.kinship(statement, text), index) for index, text in unknown), reverse=True)
        if scored and scored[0][0] >= self.min_kinship and \
                (len(scored) == 1 or scored[0][0] - scored[1][0] >= self.kinship_margin):
            return scored[0][1]
        return None

    def split(self, statement: str, beliefs: Sequence[str | Sequence[str]]) -> list[int]:
        """Indices of the beliefs that hold one belief split in two: two or more current beliefs of the
        statement's subject that name (in words, not by inference) the single-valued relation the statement
        names, as an earlier correction that was missed leaves behind. Empty when fewer than two."""
        subject = statement_subject(statement)
        named = frozenset(relation for relation in belief_relations(statement) if _single_valued(relation))
        if subject is None or not named:
            return []
        new_terms = set(_claim_terms(statement))
        found = []
        for index, belief in enumerate(beliefs):
            history = [belief] if isinstance(belief, str) else list(belief)
            if not history or statement_subject(history[-1]) != subject or \
                    MULTI_VALUED_PREDICATES & new_terms & set(_claim_terms(history[-1])):
                continue
            if named & frozenset().union(*(belief_relations(text) for text in history)):
                found.append(index)
        return found if len(found) >= 2 else []


# Relations that hold one value at a time, so two beliefs naming one of them are one belief split in two.
# A person may have two jobs, two homes, two dogs or two cars: those are never joined.
SINGLE_VALUED_RELATIONS = frozenset({"age", "phone", "email", "partner"})


def _single_valued(relation: str) -> bool:
    return relation in SINGLE_VALUED_RELATIONS or relation.startswith("favorite:")


def same_belief(old: str, new: str) -> bool:
    """Whether ``new`` restates or updates the belief ``old`` states.

    Both must name the same subject (or none), and say the same thing about it except for the value, which
    English puts last: they may differ only in their final word ("... lives in *Paris*"), their final two
    words when at least two words remain alike ("the user prefers *dark mode*"), or one word after the
    first ("the office is at *1* Main Street"). Precision first: unrelated
    memories must never stack, so an update in other words ("moved to" for "lives in") stays a separate
    belief, and a look-alike about another attribute ("favorite *food*" vs "favorite *color*") never merges.
    """
    if normalize_statement(old) == normalize_statement(new):
        return True
    if statement_identifiers(old) != statement_identifiers(new):
        return False                                      # "a_val" is not "b_val"
    if statement_subject(old) != statement_subject(new):
        return False
    old_relations, new_relations = belief_relations(old), belief_relations(new)
    if old_relations and new_relations and not old_relations & new_relations:
        return False                                      # "favorite dish" is not "favorite color"
    old_terms, new_terms = _claim_terms(old), _claim_terms(new)
    if MULTI_VALUED_PREDICATES & set(old_terms) & set(new_terms):
        return False                                      # another value of a many-valued relation
    if len(old_terms) == len(new_terms) >= 2:
        differing = [index for index, (a, b) in enumerate(zip(old_terms, new_terms)) if a != b]
        if len(differing) == 1 and differing[0] >= 1:      # one word swapped after the claim's first word
            return True
    for value_words in (1, 2):
        if len(old_terms) > value_words and len(new_terms) > value_words:
            head = set(old_terms[:-value_words])
            if head == set(new_terms[:-value_words]) and (value_words == 1 or len(head) >= 2):
                return True
    return False


REVISION_OUTCOMES = ("vacuous", "revised", "created")

# The plain words of each relation, to find a speaker's statements of it (they hold no name to find them by).
_RELATION_QUERY = {name: " ".join(word for word in re.findall(r"[a-z]{3,}", pattern) if word not in STOPWORDS)
                   for name, pattern in BELIEF_RELATIONS.items()}


def _topic(text: str) -> str | None:
    """What a statement is about: its named subject, else the noun phrase a determiner-led statement opens
    with ("The quarterly report is due on Friday" -> ``"quarterli report"``)."""
    subject = statement_subject(text)
    if subject is not None:
        return subject
    body = _statement_body(text)
    start = _value_start(body)
    if start is None:
        return None
    return " ".join(term for term in tokenize(body[:start]) if term not in TIME_WORDS) or None


def belief_difference(old: str, new: str) -> str | None:
    """Why ``new`` is clearly not a statement of the belief ``old`` states, or None when it may be: another
    named subject, another identifier (``a_val`` / ``b_val``), or only other named relations. ``revise`` with
    an explicit target revises it unless this gives a reason."""
    old_subject, new_subject = _topic(old), _topic(new)
    if old_subject and new_subject and old_subject != new_subject:
        return f"about another subject ({new_subject!r}, the target is about {old_subject!r})"
    old_ids, new_ids = statement_identifiers(old), statement_identifiers(new)
    if old_ids and new_ids and old_ids != new_ids:
        return f"names another identifier ({', '.join(sorted(new_ids))}, the target names {', '.join(sorted(old_ids))})"
    old_relations, new_relations = belief_relations(old), belief_relations(new)
    if old_relations and new_relations and not old_relations & new_relations:
        return (f"states another relation ({', '.join(sorted(new_relations))}, the target states "
                f"{', '.join(sorted(old_relations))})")
    return None


def _belief_features(memory: Mapping[str, Any]) -> tuple[Any, ...] | None:
    """What ``_same_relation`` compares of a recalled memory: (subject, relations, identifiers, claim terms,
    official), or None when it names no subject or no relation."""
    features = _statement_features(resolved_statement(memory.get("content") or "", memory.get("metadata")))
    if features is None:
        return None
    return features + (parse_evidence(memory.get("metadata"), memory.get("tags")) == OFFICIAL,)


@functools.lru_cache(maxsize=1024)
def _statement_features(text: str) -> tuple[Any, ...] | None:
    subject = statement_subject(text)
    relations = belief_relations(text) if subject is not None else frozenset()
    if not relations:
        return None
    return subject, relations, statement_identifiers(text), frozenset(_claim_terms(text))


def _same_relation(older: Mapping[str, Any], newer: Mapping[str, Any],
                   features: Mapping[int, Any] | None = None) -> str | None:
    """The relation two recalled memories both state of one subject (``newer`` being the later one), when
    ``newer`` should outrank ``older``: None for another subject, the same claim, another value of a
    many-valued relation, another identifier, or an official ``older`` against a ``newer`` that is not."""
    if (newer.get("created_at") or "") <= (older.get("created_at") or ""):
        return None
    old = features[id(older)] if features is not None else _belief_features(older)
    new = features[id(newer)] if features is not None else _belief_features(newer)
    if old is None or new is None or old[0] != new[0] or old[2] != new[2] or old[3] == new[3]:
        return None
    shared = old[1] & new[1]
    if not shared or MULTI_VALUED_PREDICATES & old[3] & new[3] or (old[4] and not new[4]):
        return None
    return min(shared)


def newest_first_within_relation(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Reorder recall results (best first) so that of two current memories stating the same relation of the
    same subject (``_same_relation``; two beliefs that were never merged) the newer ranks first, and say so
    in their ``signals``: ``superseded_by`` on the older, ``supersedes`` on the newer. Scores are raised
    where needed to stay in order. A superseded value is never served before the current one."""
    order = list(results)
    features = {id(result): _belief_features(result) for result in order}
    groups: dict[Any, int] = {}       # only memories of one subject and identifiers can be two beliefs of one
    for feature in features.values():
        if feature is not None:
            groups[(feature[0], feature[2])] = groups.get((feature[0], feature[2]), 0) + 1
    if not any(count > 1 for count in groups.values()):
        return order
    for _ in range(len(order) * len(order)):
        moved = False
        for upper in range(len(order)):
            for lower in range(upper + 1, len(order)):
                relation = _same_relation(order[upper], order[lower], features)
                if relation is None:
                    continue
                older, newer = order[upper], order[lower]
                older["signals"] = {**(older.get("signals") or {}), "superseded_by": newer["kref"],
                                    "same_relation": relation}
                newer["signals"] = {**(newer.get("signals") or {}), "same_relation": relation,
                                    "supersedes": sorted({*(newer.get("signals") or {}).get("supersedes", ()),
                                                          older["kref"]})}
                order.insert(upper, order.pop(lower))
                moved = True
                break
            if moved:
                break
        if not moved:
            break
    for index in range(len(order) - 2, -1, -1):
        if order[index]["score"] < order[index + 1]["score"]:
            order[index]["score"] = order[index + 1]["score"]
    return order


_FIRST_PERSON_QUESTION = re.compile(r"(?i)\b(?:i|me|my|mine|myself|we|our|us)\b")
_QUESTION = re.compile(r"(?is)^\s*(?:where|what|which|who|whom|whose|how|when|do|does|did|is|am|are|was|were|"
                       r"have|has|can)\b|.*\?\s*$")


def _speaker_filter(metadata: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A ``where`` filter for the memories whose "I" is the same speaker as in ``metadata``'s."""
    metadata = metadata or {}
    speaker = speaker_name(metadata)
    if speaker == SPACE_USER or speaker == "Assistant":
        return None
    if isinstance(metadata.get("speaker"), str) and metadata["speaker"].strip() == speaker:
        return {"speaker": speaker}
    return {"user_id": speaker} if metadata.get("user_id") == speaker else {"user": speaker}


# -- context for a prompt -------------------------------------------------------------------------------------

CONTEXT_CHAR_BUDGET = 8000


def build_recalled_context(memories: Sequence[Mapping[str, Any]], query: str = "", *,
                           char_budget: int = CONTEXT_CHAR_BUDGET, badges: bool = True) -> str:
    """Render recalled memories for a prompt: ``[badge][event date] title: content`` blocks, best first,
    cut to ``char_budget`` characters (a memory that does not fit whole is cut with ``…[truncated]``)."""
    blocks, used = [], 0
    for memory in memories:
        metadata = memory.get("metadata") or {}
        level = memory.get("evidence_level") or parse_evidence(metadata, memory.get("tags"))
        badge = evidence_badge(level) if badges else ""
        when = f"[{metadata['event_date']}] " if isinstance(metadata.get("event_date"), str) else ""
        title, content = memory.get("title") or "", memory.get("content") or memory.get("summary") or ""
        head = f"{badge}{when}{title}"
        block = head if content.strip() == title.strip() else f"{head}: {content}"
        for sibling in memory.get("sibling_revisions") or ():
            block += f"\n  (earlier, r{sibling.get('revision')}) {sibling.get('content', '')}"
        room = char_budget - used - (2 if blocks else 0)
        if room <= 0:
            break
        if len(block) > room:
            marker = "…[truncated]"
            if room <= len(marker):
                break
            block = block[: room - len(marker)] + marker
        blocks.append(block)
        used += len(block) + (2 if len(blocks) > 1 else 0)
    return "\n\n".join(blocks)


# -- anticipatory recall --------------------------------------------------------------------------------------
#
# A session moves through memory: each engage lands somewhere (its top result's space, item or entity), and
# the next one usually lands somewhere predictable. AnticipatoryRecall learns those moves as decayed
# transition counts, predicts the next states after each engage, and prepares the engage results that
# usually follow in the background, so the next agent of a pipeline finds them ready.
#
# When a prepared result may be served (the rule that keeps a wrong prediction from changing anything):
#
#     same query text, limit, char_budget and recall options      -> required (the entry's key)
#     query or options read the clock ("last week", recency)      -> never prepared
#     anything written since the entry was prepared               -> not served; re-prepared in the background
#         (this Memory's writes through on_change; other processes' through the backend's change_token)
#     a memory the entry covers was revised, deprecated, forgotten -> entry dropped at once
#
# Recall is a pure function of the query, its options and the store, so an entry that passes this table is
# exactly what a fresh engage would return; a prediction only decides which entries get prepared.

PREFETCH_GRAINS = ("item", "space", "entity")
SESSION_START = "<start>"     # the state before a session's first step (no space, item or entity is named so)
PREFETCH_SYSTEM_SPACE = "_system"
PREFETCH_STATE_KIND = "prefetch-state"
PREFETCH_STATE_KEY = "prefetch-state"
PREFETCH_STATE_FORMAT = 1
_DAY_SECONDS = 86400.0


def recall_state(results: Sequence[Mapping[str, Any]], grain: str = "space") -> str | None:
    """Where a recall landed: the state of its top result at ``grain``, or None when nothing was found.

    ``space`` -> ``"space:<path>"``; ``item`` -> ``"item:<item kref>"``; ``entity`` -> ``"entity:<name>"``
    from the first who-name in the metadata (``who_names``), else the statement's subject
    (``statement_subject``), else the ``space`` state.
    """
    if grain not in PREFETCH_GRAINS:
        raise InvalidArgumentError(f"grain must be one of {PREFETCH_GRAINS}, not {grain!r}")
    if not results:
        return None
    top = results[0]
    if grain == "item":
        return f"item:{top['item_kref']}"
    if grain == "entity":
        names = who_names(top.get("metadata") or {})
        subject = names[0].casefold() if names else statement_subject(top.get("content") or "")
        if subject:
            return f"entity:{' '.join(subject.split())}"
    return f"space:{top['space']}"


@dataclasses.dataclass(frozen=True)
class PrefetchConfig:
    """How ``Memory`` anticipates the next recall of a session (``Memory(..., prefetch=PrefetchConfig())``).

    Attributes:
        enabled: False keeps engage exactly as without prefetching (no tables, no thread).
        grain: what a state is: the top result's ``space`` (default), ``item`` or ``entity``.
        top_n: how many next states are predicted after each engage.
        min_probability: the confidence gate: only states at or above it are predicted (and reported).
        spare_probability: None (default), or a lower floor: states between it and the gate are also
            prepared, with whatever token budget the predicted ones leave, and never reported as predictions.
        half_life_days: transition counts halve over this many days without being seen (None: no decay).
        personal_sessions: sessions after which an agent's own table fully replaces the global one.
        cache_size: prepared results kept (least recently used go first).
        token_budget: tokens (len/4) one round of predictions may prepare, split by probability.
        cues_per_transition: the queries remembered per transition (the ones prepared for it).
        save_every: transitions between saves of the tables (they are also saved at ``end_session``).
        max_sessions: open sessions tracked (the least recently active is dropped beyond it).
        workers: background threads preparing results.
    """

    enabled: bool = True
    grain: str = "space"
    top_n: int = 3
    min_probability: float = 0.4
    spare_probability: float | None = None
    half_life_days: float | None = 14.0
    personal_sessions: int = 20
    cache_size: int = 64
    token_budget: int = 4000
    cues_per_transition: int = 4
    save_every: int = 100
    max_sessions: int = 1024
    workers: int = 2

    def __post_init__(self) -> None:
        if not isinstance(self.enabled, bool):
            raise InvalidArgumentError(f"enabled must be True or False, not {self.enabled!r}")
        if self.grain not in PREFETCH_GRAINS:
            raise InvalidArgumentError(f"grain must be one of {PREFETCH_GRAINS}, not {self.grain!r}")
        for name in ("top_n", "personal_sessions", "cache_size", "token_budget", "cues_per_transition",
                     "save_every", "max_sessions", "workers"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidArgumentError(f"{name} must be a positive integer, not {value!r}")
        probability = self.min_probability
        if isinstance(probability, bool) or not isinstance(probability, (int, float)) or not 0.0 <= probability <= 1.0:
            raise InvalidArgumentError(f"min_probability must be a number from 0 to 1, not {probability!r}")
        spare = self.spare_probability
        if spare is not None and (isinstance(spare, bool) or not isinstance(spare, (int, float))
                                  or not 0.0 < spare <= probability):
            raise InvalidArgumentError(f"spare_probability must be None or above 0 and at most min_probability, "
                                       f"not {spare!r}")
        half_life = self.half_life_days
        if half_life is not None and (isinstance(half_life, bool) or not isinstance(half_life, (int, float))
                                      or not math.isfinite(half_life) or half_life <= 0):
            raise InvalidArgumentError(f"half_life_days must be a positive number or None, not {half_life!r}")

    @property
    def decay_lambda(self) -> float:
        """The decay rate per day, ``ln 2 / half_life_days`` (0 without decay)."""
        return 0.0 if self.half_life_days is None else math.log(2.0) / self.half_life_days


class TransitionTable:
    """Decayed counts of moves between states: ``effective = count * exp(-lambda * days since last_seen)``.

    A new observation first decays the stored count to now, then adds one, so an old habit fades while a
    new one grows (``observe``); ``probabilities`` normalizes the effective counts out of one state.

    Args:
        decay_lambda: decay per day (0: counts never fade).
    """

    def __init__(self, decay_lambda: float = 0.0) -> None:
        if isinstance(decay_lambda, bool) or not isinstance(decay_lambda, (int, float)) or decay_lambda < 0:
            raise InvalidArgumentError(f"decay_lambda must be a non-negative number, not {decay_lambda!r}")
        self.decay_lambda = float(decay_lambda)
        self.sessions = 0
        self._edges: dict[str, dict[str, list[float]]] = {}     # source -> target -> [count, last_seen epoch]

    def __len__(self) -> int:
        return sum(len(targets) for targets in self._edges.values())

    def _decayed(self, count: float, last_seen: float, at: float) -> float:
        days = max(0.0, at - last_seen) / _DAY_SECONDS
        return count * math.exp(-self.decay_lambda * days)

    def observe(self, source: str, target: str, at: float, weight: float = 1.0) -> float:
        """Count one move ``source -> target`` at epoch ``at``; return the new effective count."""
        entry = self._edges.setdefault(source, {}).get(target)
        count = weight if entry is None else self._decayed(entry[0], entry[1], at) + weight
        self._edges[source][target] = [count, max(at, entry[1]) if entry else at]
        return count

    def effective(self, source: str, target: str, at: float) -> float:
        """The decayed count of ``source -> target`` at epoch ``at`` (0 when never seen)."""
        entry = self._edges.get(source, {}).get(target)
        return 0.0 if entry is None else self._decayed(entry[0], entry[1], at)

    def probabilities(self, source: str, at: float) -> dict[str, float]:
        """``{target: p}`` out of ``source`` at epoch ``at`` (empty when nothing left ``source``)."""
        counts = {target: self._decayed(count, seen, at) for target, (count, seen) in self._edges.get(source, {}).items()}
        total = sum(counts.values())
        return {target: value / total for target, value in counts.items()} if total > 0 else {}

    def prune(self, at: float, floor: float = 0.01) -> int:
        """Drop moves whose effective count fell below ``floor``; return how many went."""
        dropped = 0
        for source in list(self._edges):
            targets = self._edges[source]
            for target in [t for t, (count, seen) in targets.items() if self._decayed(count, seen, at) < floor]:
                del targets[target]
                dropped += 1
            if not targets:
                del self._edges[source]
        return dropped

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready copy: ``{sessions, edges: {source: {target: [count, last_seen]}}}``."""
        return {"sessions": self.sessions,
                "edges": {source: {target: [round(count, 6), seen] for target, (count, seen) in targets.items()}
                          for source, targets in self._edges.items()}}

    @classmethod
    def from_json(cls, document: Any, decay_lambda: float = 0.0) -> "TransitionTable":
        """Rebuild a table from ``to_json`` output.

        Raises:
            InvalidArgumentError: the document does not have that shape.
        """
        table = cls(decay_lambda)
        if not isinstance(document, dict) or not isinstance(document.get("edges"), dict):
            raise InvalidArgumentError("a transition table is {sessions, edges}")
        sessions = document.get("sessions", 0)
        if isinstance(sessions, bool) or not isinstance(sessions, int) or sessions < 0:
            raise InvalidArgumentError(f"sessions must be a non-negative integer, not {sessions!r}")
        table.sessions = sessions
        for source, targets in document["edges"].items():
            if not isinstance(targets, dict):
                raise InvalidArgumentError(f"transitions out of {source!r} are not an object")
            for target, pair in targets.items():
                if not (isinstance(pair, list) and len(pair) == 2
                        and all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in pair)
                        and pair[0] >= 0):
                    raise InvalidArgumentError(f"transition {source!r} -> {target!r} is not [count, last_seen]")
                table._edges.setdefault(source, {})[target] = [float(pair[0]), float(pair[1])]
        return table


def blend_probabilities(personal: Mapping[str, float], shared: Mapping[str, float], sessions: int,
                        full_weight_sessions: int = 20) -> dict[str, float]:
    """The cold-start blend ``p = w * p_personal + (1 - w) * p_global`` with ``w = min(1, sessions / N)``.

    Args:
        personal: the agent's (or user's) own ``{state: p}``. shared: the global ``{state: p}``.
        sessions: how many sessions the personal table has learned from. full_weight_sessions: ``N``.
    """
    weight = min(1.0, max(0, sessions) / full_weight_sessions)
    states = set(personal) | set(shared)
    return {state: weight * personal.get(state, 0.0) + (1.0 - weight) * shared.get(state, 0.0) for state in states}


@dataclasses.dataclass
class _Cue:
    """One engage call that followed a transition: enough to repeat it exactly."""

    query: str
    limit: int
    char_budget: int
    options: dict[str, Any]
    count: float
    last_seen: float
    tokens: int

    def to_json(self) -> list[Any]:
        return [self.query, self.limit, self.char_budget, self.options, round(self.count, 6), self.last_seen,
                self.tokens]


@dataclasses.dataclass
class _Prepared:
    """A prepared engage result and what it depends on."""

    key: str
    state: str
    result: dict[str, Any]
    generation: int
    token: Any
    covers: frozenset[str]
    tokens: int
    served: int = 0


@dataclasses.dataclass
class _SessionTrace:
    last_state: str | None = None          # SESSION_START for the trace that prepares sessions' first steps
    agent: str | None = None
    predictions: list[tuple[str, float]] = dataclasses.field(default_factory=list)
    spare: list[tuple[str, float]] = dataclasses.field(default_factory=list)   # below the gate, above the floor
    wanted: list[str] = dataclasses.field(default_factory=list)      # keys prepared for the next step
    transitions: int = 0
    hits: int = 0
    engages: int = 0
    profiles: set[str] = dataclasses.field(default_factory=set)


def _covered_items(result: Mapping[str, Any]) -> frozenset[str]:
    """Every item an engage result shows or names (results, contested-by krefs, sibling revisions)."""
    covered = set()
    for memory in result.get("results") or ():
        covered.add(memory["item_kref"])
        for kref in list(memory.get("contested_by") or ()) + [s.get("kref") for s in memory.get("sibling_revisions") or ()]:
            if isinstance(kref, str):
                with contextlib.suppress(InvalidKrefError):
                    covered.add(str(Kref.parse(kref).item_kref()))
    return frozenset(covered)


PREPARED_WAIT_SECONDS = 5.0   # the longest an engage waits for its own call's preparation to finish


class AnticipatoryRecall:
    """Learns how sessions move through memory and prepares the next engage before it is asked for.

    ``Memory`` builds one when given ``prefetch=PrefetchConfig(...)`` and routes ``engage(session_id=...)``
    here. Per session it records the move from the previous engage's state to this one (global table and
    the previous agent's personal table), predicts the ``top_n`` next states with ``p >= min_probability``
    (``p = w * personal + (1 - w) * global``), and prepares, on a background thread, the engage calls that
    followed those moves before (within ``token_budget``, split by probability). A later engage with the
    same call is served from the prepared result only while nothing was written since (see the table
    above), so prefetching changes how fast a result comes, never what it is.

    Tables are saved as the deprecated item ``_system/prefetch-state`` (kind ``prefetch-state``, JSON
    content; deprecated so recall never returns it) every ``save_every`` transitions, at ``end_session``
    and at ``close``; they are loaded on first use.

    Args:
        memory: the ``Memory`` whose recall is anticipated (its clock dates the transitions).
        config: the ``PrefetchConfig``.
    """

    def __init__(self, memory: "Memory", config: PrefetchConfig) -> None:
        if not isinstance(config, PrefetchConfig):
            raise InvalidArgumentError(f"prefetch must be a PrefetchConfig, not {type(config).__name__}")
        self.config = config
        self._memory = memory
        self._backend = memory.backend
        self._clock = memory.clock
        self._change_token = getattr(self._backend, "change_token", None)
        self._lock = threading.RLock()
        self._loaded = False
        self._closed = False
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._global = TransitionTable(config.decay_lambda)
        self._personal: dict[str, TransitionTable] = {}
        self._cues: dict[tuple[str, str], dict[str, _Cue]] = {}
        self._other_grains: dict[str, Any] = {}        # tables of other grains, kept as loaded
        self._sessions: dict[str, _SessionTrace] = {}
        self._ready = _SessionTrace(last_state=SESSION_START)    # what the next session will likely ask first
        self._cache: dict[str, _Prepared] = {}         # insertion order = least recently used first
        self._pending: dict[str, concurrent.futures.Future[Any]] = {}
        self._running: set[str] = set()
        self._generation = 0
        self._token: Any = None
        self._unsaved = 0
        self._dirty = False
        self._stats = dict.fromkeys(("hits", "misses", "cold", "uncacheable", "prepared", "refreshes", "wasted_prefetches",
                                     "invalidations", "stale_discarded", "tokens_spent", "tokens_served",
                                     "transitions", "sessions", "saves", "errors"), 0)
        self._last_error: str | None = None

    # -- the engage path ----------------------------------------------------------------------------------

    def engage(self, query: str, *, session_id: str, agent: str | None = None, limit: int = 5,
               char_budget: int = CONTEXT_CHAR_BUDGET, **recall_options: Any) -> dict[str, Any]:
        """``Memory.engage`` for one step of a session: the result (prepared or fresh), plus
        ``context_was_prefetched``, ``state`` and ``predictions: [{state, p}]`` for the next step."""
        session_id = _checked_text(session_id, "session_id", limit=512)
        if agent is not None:
            agent = _checked_text(agent, "agent", limit=512)
        if self._closed:
            raise StoreClosedError("this memory is closed")
        self._ensure_loaded()
        self._sync_token()
        key = self._key(query, limit, char_budget, recall_options)
        result = self._take(key) if key is not None else None
        prefetched = result is not None
        if result is None:
            result = self._memory._engage_fresh(query, limit=limit, char_budget=char_budget, **recall_options)
        state = recall_state(result["results"], self.config.grain)
        now = self._now()
        save = False
        with self._lock:
            trace = self._sessions.pop(session_id, None) or _SessionTrace()
            self._sessions[session_id] = trace                  # most recently active last
            while len(self._sessions) > self.config.max_sessions:
                self._sessions.pop(next(iter(self._sessions)))
            outcome = "hits" if prefetched else ("misses" if trace.predictions else "cold")
            self._stats[outcome] += 1
            if key is None:
                self._stats["uncacheable"] += 1
            if prefetched:
                trace.hits += 1
                self._stats["tokens_served"] += result["approx_tokens"]
            if state is not None and trace.engages == 0:
                self._learn_start(state, key, query, limit, char_budget, recall_options, result, now)
            trace.engages += 1
            if state is not None and trace.last_state is not None:
                self._learn(trace, state, key, query, limit, char_budget, recall_options, result, now)
                save = self._unsaved >= self.config.save_every
            if state is not None:
                trace.last_state, trace.agent = state, agent
                trace.predictions, trace.spare = self._forecast(state, agent, now)
            trace.wanted = self._plan(trace)
            predictions = list(trace.predictions)
        if save:
            self._submit("save", self.save)
        return {**result, "context_was_prefetched": prefetched, "state": state,
                "predictions": [{"state": name, "p": round(p, 4)} for name, p in predictions]}

    def _key(self, query: str, limit: int, char_budget: int, options: Mapping[str, Any]) -> str | None:
        """The cache key of an engage call, or None when its result depends on the clock or the options
        are not plain JSON (then it is never prepared, and always recalled fresh)."""
        if not isinstance(query, str) or isinstance(limit, bool) or not isinstance(limit, int) \
                or isinstance(char_budget, bool) or not isinstance(char_budget, int):
            return None
        anchored = options.get("as_of") is not None or options.get("query_time") is not None
        if not anchored and (options.get("recency_half_life_days") or parse_time_window(query, self._clock.now())):
            return None
        try:
            return canonical_json([query, limit, char_budget, dict(options)])
        except (TypeError, ValueError):
            return None

    def _take(self, key: str) -> dict[str, Any] | None:
        """A copy of the prepared result for ``key`` if it is still exact. When it is being prepared, or is
        queued behind the background thread's current job, this waits for it (a bounded wait, shorter than
        recalling afresh in the usual case), so whether a prepared answer is served never depends on which
        thread ran first."""
        deadline = time.monotonic() + PREPARED_WAIT_SECONDS
        while True:                  # a preparation found stale on finishing is queued again: wait for that too
            with self._lock:
                future = self._pending.get(key)
            left = deadline - time.monotonic()
            if future is None or left <= 0:
                break
            try:
                future.result(timeout=left)
            except Exception:        # noqa: BLE001 - failed or slow: counted by the job; recall afresh
                break
        with self._lock:
            entry = self._cache.get(key)
            if entry is None or entry.generation != self._generation or entry.token != self._token:
                return None
            self._cache[key] = self._cache.pop(key)          # most recently used last
            entry.served += 1
            return copy.deepcopy(entry.result)

    def _learn_start(self, state: str, key: str | None, query: str, limit: int, char_budget: int,
                     options: Mapping[str, Any], result: Mapping[str, Any], now: float) -> None:
        """Count a session's first step as the move ``SESSION_START -> state`` (global table only; not a
        transition between memory states in the statistics) and remember its call (lock held)."""
        self._global.observe(SESSION_START, state, now)
        self._dirty = True
        if key is not None:
            self._remember_cue(SESSION_START, state, key, query, limit, char_budget, options, result, now)

    def _prepare_first_steps(self) -> None:
        """Prepare what the next session will likely ask first (lock held)."""
        if self._closed:
            return
        self._ready.predictions, self._ready.spare = self._forecast(SESSION_START, None, self._now())
        self._ready.wanted = self._plan(self._ready)

    def _remember_cue(self, source: str, state: str, key: str, query: str, limit: int, char_budget: int,
                      options: Mapping[str, Any], result: Mapping[str, Any], now: float) -> None:
        cues = self._cues.setdefault((source, state), {})
        cue = cues.get(key)
        if cue is None:
            cue = cues[key] = _Cue(query, limit, char_budget, json.loads(canonical_json(dict(options))), 0.0, now, 0)
        cue.count = self._global._decayed(cue.count, cue.last_seen, now) + 1.0
        cue.last_seen, cue.tokens = now, int(result.get("approx_tokens") or 0)
        if len(cues) > self.config.cues_per_transition:
            weakest = min(cues, key=lambda k: (self._global._decayed(cues[k].count, cues[k].last_seen, now), cues[k].last_seen))
            del cues[weakest]

    def _learn(self, trace: _SessionTrace, state: str, key: str | None, query: str, limit: int, char_budget: int,
               options: Mapping[str, Any], result: Mapping[str, Any], now: float) -> None:
        """Count the move ``trace.last_state -> state`` and remember the call that made it (lock held)."""
        source = str(trace.last_state)
        self._global.observe(source, state, now)
        profile = trace.agent
        if profile is not None:
            table = self._personal.setdefault(profile, TransitionTable(self.config.decay_lambda))
            table.observe(source, state, now)
            if profile not in trace.profiles:
                trace.profiles.add(profile)
                table.sessions += 1
        if trace.transitions == 0:
            self._global.sessions += 1
            self._stats["sessions"] += 1
        trace.transitions += 1
        self._stats["transitions"] += 1
        self._unsaved += 1
        self._dirty = True
        if key is not None:
            self._remember_cue(source, state, key, query, limit, char_budget, options, result, now)

    def predict(self, state: str, *, agent: str | None = None, at: float | None = None) -> list[tuple[str, float]]:
        """The ``top_n`` next states after ``state`` with ``p >= min_probability``: ``[(state, p)]``, most
        likely first (ties by name). ``agent`` selects the personal table blended in."""
        return self._ranked(state, agent, at, self.config.min_probability)[: self.config.top_n]

    def _forecast(self, state: str, agent: str | None, at: float
                  ) -> tuple[list[tuple[str, float]], list[tuple[str, float]]]:
        """``predict``'s states, and the spare ones: under the gate but at or above ``spare_probability``
        (none unless it is set), from one ranking."""
        gate, spare = self.config.min_probability, self.config.spare_probability
        ranked = self._ranked(state, agent, at, gate if spare is None else spare)
        predicted = [(name, p) for name, p in ranked if p >= gate - 1e-12][: self.config.top_n]
        chosen = {name for name, _ in predicted}
        return predicted, [(name, p) for name, p in ranked if name not in chosen][: self.config.top_n] if spare else []

    def _ranked(self, state: str, agent: str | None, at: float | None, floor: float) -> list[tuple[str, float]]:
        at = self._now() if at is None else at
        with self._lock:
            self._ensure_loaded()
            shared = self._global.probabilities(state, at)
            personal_table = self._personal.get(agent) if agent is not None else None
            if personal_table is None:
                blended = shared
            else:
                blended = blend_probabilities(personal_table.probabilities(state, at), shared,
                                              personal_table.sessions, self.config.personal_sessions)
        return sorted(((name, p) for name, p in blended.items() if p >= floor - 1e-12),
                      key=lambda pair: (-pair[1], pair[0]))

    # -- preparing ----------------------------------------------------------------------------------------

    def _plan(self, trace: _SessionTrace) -> list[str]:
        """Queue the calls that followed the predicted moves and return their keys (lock held).

        Each predicted state gets ``token_budget * p / sum(p)`` tokens: its most frequent call always, the
        next ones while their last size still fits. Spare states (``spare_probability``) then get what is
        left of the budget, a call only when it fits.
        """
        if not (trace.predictions or trace.spare) or trace.last_state is None or self._closed:
            return []
        now = self._now()
        total = sum(p for _, p in trace.predictions) or 1.0
        wanted = []
        left = self.config.token_budget
        # the predicted states share the budget by probability; spare states get what is left, in order
        plan = [(state, self.config.token_budget * p / total) for state, p in trace.predictions]
        plan += [(state, None) for state, _ in trace.spare]
        for state, share in plan:
            spare = share is None
            if spare:
                share = left
            cues = self._cues.get((trace.last_state, state), {})
            ranked = sorted(cues.items(), key=lambda pair: (-self._global._decayed(pair[1].count, pair[1].last_seen, now),
                                                            pair[0]))
            spent = 0
            for key, cue in ranked:
                if (spent or spare) and spent + cue.tokens > share:
                    break                                 # a predicted state always gets its first call
                spent += max(1, cue.tokens)
                wanted.append(key)
                entry = self._cache.get(key)
                if entry is not None and entry.generation == self._generation and entry.token == self._token:
                    self._cache[key] = self._cache.pop(key)
                elif key not in self._pending:
                    self._pending[key] = self._submit(
                        key, lambda key=key, cue=cue, state=state: self._prepare(key, cue, state))
            left -= spent
        return wanted

    def _submit(self, name: str, work: Callable[[], Any]) -> concurrent.futures.Future[Any]:
        """Run ``work`` on the background thread (started on first use; after ``close`` nothing runs)."""
        with self._lock:
            if not self._closed:
                if self._executor is None:
                    self._executor = concurrent.futures.ThreadPoolExecutor(
                        max_workers=self.config.workers, thread_name_prefix="kumiho-prefetch")
                with contextlib.suppress(RuntimeError):   # shut down between the check and here: nothing runs
                    return self._executor.submit(self._guarded, name, work)
        finished: concurrent.futures.Future[Any] = concurrent.futures.Future()
        finished.set_result(None)
        return finished

    def _guarded(self, name: str, work: Callable[[], Any]) -> Any:
        """Run a background job; a failure is counted and kept in ``last_error``, never lost."""
        try:
            return work()
        except Exception as exc:  # a job on our thread: record what failed (the caller recalls afresh)
            with self._lock:
                self._stats["errors"] += 1
                self._last_error = f"{'save' if name == 'save' else 'prepare'}: {type(exc).__name__}: {exc}"
            raise

    def _prepare(self, key: str, cue: _Cue, state: str, attempt: int = 0) -> None:
        """Run one anticipated engage and keep its result if nothing was written meanwhile."""
        with self._lock:
            if self._closed:
                self._pending.pop(key, None)
                return
            self._running.add(key)
            generation, token = self._generation, self._token
        try:
            result = self._memory._engage_fresh(cue.query, limit=cue.limit, char_budget=cue.char_budget, **cue.options)
            current_token = self._read_token()
        finally:
            with self._lock:
                self._running.discard(key)
                self._pending.pop(key, None)
        with self._lock:
            self._stats["prepared"] += 1
            self._stats["tokens_spent"] += result["approx_tokens"]
            if current_token != token:
                self._changed_locked(None, token=current_token)
            if generation != self._generation or self._closed:
                self._stats["stale_discarded"] += 1
                self._stats["wasted_prefetches"] += 1
                if not self._closed and attempt < 3 and any(key in t.wanted for t in [*self._sessions.values(), self._ready]):
                    self._pending[key] = self._submit(
                        key, lambda: self._prepare(key, cue, state, attempt + 1))
                return
            old = self._cache.pop(key, None)
            if old is not None and not old.served:
                self._stats["wasted_prefetches"] += 1
            self._cache[key] = _Prepared(key, state, result, generation, token, _covered_items(result),
                                         int(result["approx_tokens"]))
            while len(self._cache) > self.config.cache_size:
                evicted = self._cache.pop(next(iter(self._cache)))
                if not evicted.served:
                    self._stats["wasted_prefetches"] += 1

    # -- staying exact ------------------------------------------------------------------------------------

    def on_change(self, item_kref: str | None = None) -> None:
        """Tell the prefetcher the store changed: ``item_kref`` (any kref form) was written, revised,
        tagged, linked, deprecated or forgotten; None when the change is not about one item.

        Entries that show the item are dropped at once; every other entry stops being served until it is
        prepared again (a new memory may outrank what it holds), which happens in the background for the
        calls open sessions expect next.
        """
        item = None
        if item_kref is not None:
            item = str(parse_item_kref(item_kref).item_kref())
        token = self._read_token()
        with self._lock:
            if self._closed:
                return
            self._changed_locked(item, token=token)

    def _changed_locked(self, item: str | None, *, token: Any) -> None:
        self._generation += 1
        self._token = token
        if self._closed:
            return
        if item is not None:
            for key in [k for k, entry in self._cache.items() if item in entry.covers]:
                entry = self._cache.pop(key)
                self._stats["invalidations"] += 1
                if not entry.served:
                    self._stats["wasted_prefetches"] += 1
        for trace in list(self._sessions.values()) + [self._ready]:
            if trace.wanted:
                self._stats["refreshes"] += 1
                trace.wanted = self._plan(trace)

    def _read_token(self) -> Any:
        return None if self._change_token is None else self._change_token(self._memory.project)

    def _sync_token(self) -> None:
        """Notice writes by other processes (when the backend can tell)."""
        token = self._read_token()
        with self._lock:
            if token != self._token:
                self._changed_locked(None, token=token)

    # -- sessions, persistence, stats ---------------------------------------------------------------------

    def end_session(self, session_id: str) -> dict[str, Any]:
        """Forget the session's trace and save the tables.

        Returns:
            ``{session_id, engages, transitions, hits, saved}`` (zeros for a session never seen).
        """
        session_id = _checked_text(session_id, "session_id", limit=512)
        with self._lock:
            trace = self._sessions.pop(session_id, None) or _SessionTrace()
            dirty = self._dirty
            if trace.engages:
                self._prepare_first_steps()
        saved = self.save() if dirty else False
        return {"session_id": session_id, "engages": trace.engages, "transitions": trace.transitions,
                "hits": trace.hits, "saved": saved}

    def _now(self) -> float:
        return self._clock.now().timestamp()

    def _ensure_loaded(self) -> None:
        """Load the saved tables on first use. Unreadable tables are a lost cache, not a broken memory:
        learning starts over (``last_error`` says why) and the next save replaces them."""
        with self._lock:
            if self._loaded:
                return
            held = self._backend.item_by_key(self._memory.project, PREFETCH_SYSTEM_SPACE, PREFETCH_STATE_KEY)
            if held is not None and held.latest_revision is not None:
                record = self._backend.resolve(held.kref)
                try:
                    self._restore(json.loads(record.content))
                except (ValueError, KeyError, TypeError, AttributeError) as exc:
                    self._global = TransitionTable(self.config.decay_lambda)
                    self._personal, self._cues, self._other_grains = {}, {}, {}
                    self._stats["errors"] += 1
                    self._last_error = f"load: the tables in {record.kref} are unreadable ({exc}); starting over"
            self._loaded = True

    def _restore(self, document: Any) -> None:
        if not isinstance(document, dict) or document.get("format") != PREFETCH_STATE_FORMAT:
            raise ValueError(f"expected format {PREFETCH_STATE_FORMAT}")
        grains = document["grains"]
        if not isinstance(grains, dict):
            raise ValueError("grains is not an object")
        decay = self.config.decay_lambda
        for grain, tables in grains.items():
            if grain != self.config.grain:
                self._other_grains[grain] = tables
                continue
            self._global = TransitionTable.from_json(tables["global"], decay)
            self._personal = {name: TransitionTable.from_json(table, decay) for name, table in tables["personal"].items()}
            self._cues = {}
            for source, targets in tables["cues"].items():
                for target, cues in targets.items():
                    bucket = self._cues.setdefault((source, target), {})
                    for query, limit, char_budget, options, count, seen, tokens in cues:
                        if not isinstance(query, str) or not isinstance(options, dict):
                            raise ValueError("a cue is [query, limit, char_budget, options, count, seen, tokens]")
                        bucket[canonical_json([query, limit, char_budget, options])] = _Cue(
                            query, int(limit), int(char_budget), options, float(count), float(seen), int(tokens))

    def _document(self) -> dict[str, Any]:
        now = self._now()
        for table in [self._global, *self._personal.values()]:
            table.prune(now)
        cues: dict[str, dict[str, list[Any]]] = {}
        for (source, target), bucket in sorted(self._cues.items()):
            if self._global.effective(source, target, now) > 0:
                cues.setdefault(source, {})[target] = [cue.to_json() for cue in bucket.values()]
        grains = dict(self._other_grains)
        grains[self.config.grain] = {"global": self._global.to_json(), "cues": cues,
                                     "personal": {name: table.to_json() for name, table in sorted(self._personal.items())}}
        return {"format": PREFETCH_STATE_FORMAT, "grains": grains}

    def save(self) -> bool:
        """Write the tables to the store now (a new revision of ``_system/prefetch-state`` when they changed).

        Returns:
            True when something was written.
        """
        with self._lock:
            self._ensure_loaded()
            content = canonical_json(self._document())
            self._unsaved, self._dirty = 0, False
        draft = RevisionDraft(project=self._memory.project, space=PREFETCH_SYSTEM_SPACE, kind=PREFETCH_STATE_KIND,
                              name=PREFETCH_STATE_KEY, title="Anticipatory recall: transition tables",
                              content=content, metadata={"format": PREFETCH_STATE_FORMAT}, key=PREFETCH_STATE_KEY)
        record, created = self._backend.write_revision(draft)
        item = self._backend.item(record.kref)
        if not item.deprecated:
            self._backend.set_deprecated(item.kref, True)     # recall never returns the tables
        with self._lock:
            self._stats["saves"] += int(created)       # bookkeeping: no recall changes, nothing to invalidate
        return created

    def stats(self) -> dict[str, Any]:
        """Counters since this memory opened: ``hits`` (served prepared), ``misses`` (a step was predicted
        but recalled fresh), ``cold`` (nothing predicted yet), ``hit_rate`` = hits / (hits + misses),
        ``prepared``, ``wasted_prefetches`` (prepared, never served), ``invalidations``, ``refreshes``,
        ``stale_discarded``, ``tokens_spent`` (preparing) and ``tokens_served``, ``transitions``,
        ``sessions``, ``saves``, ``errors`` (+ ``last_error``), ``cache_entries``, ``pending``,
        ``open_sessions``, ``grain``."""
        with self._lock:
            stats = dict(self._stats)
            predicted = stats["hits"] + stats["misses"]
            stats.update(hit_rate=round(stats["hits"] / predicted, 4) if predicted else None,
                         cache_entries=len(self._cache), pending=len(self._pending),
                         open_sessions=len(self._sessions), grain=self.config.grain, last_error=self._last_error)
            return stats

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until no preparation is queued or running; False if ``timeout`` seconds passed first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self._lock:
                futures = list(self._pending.values())
            if not futures:
                return True
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            done, not_done = concurrent.futures.wait(futures, timeout=remaining)
            if not_done and deadline is not None and time.monotonic() >= deadline:
                return False

    def close(self) -> None:
        """Stop the background thread (queued preparations are dropped) and save unsaved tables. Safe to
        call twice."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            executor, self._executor = self._executor, None
            dirty = self._dirty and self._loaded
        if executor is not None:
            executor.shutdown(wait=True, cancel_futures=True)
        with self._lock:
            self._stats["wasted_prefetches"] += sum(1 for entry in self._cache.values() if not entry.served)
            self._cache.clear()
            self._pending.clear()
        if dirty:
            self.save()

    @property
    def closed(self) -> bool:
        """True after ``close()``."""
        return self._closed


# ==========================================================================================================
# 11. Consolidation: summaries, write-time assessors, the retry queue, space attributes
# ==========================================================================================================

# -- summarizing a conversation -------------------------------------------------------------------------------

_SENTENCE_SPLIT = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(\[])")
_DECISION_CUE = re.compile(r"\b(decided|decide|we'll|we will|i'll|i will|going to|let's|let us|agreed|chose|choose|"
                           r"settled on|plan to|switch(?:ed)? to)\b", re.I)
_FACT_CUE = re.compile(r"\b(is|are|was|were|has|have|had|prefer|prefers|like|likes|love|loves|use|uses|live|lives|"
                       r"work|works|own|owns|need|needs|always|never|my|our)\b", re.I)
_REASON = re.compile(r"\b(?:because|since|so that|as)\b\s+(.+)$", re.I)
_ENTITY = re.compile(r"(?<![.!?]\s)(?<!^)\b([A-Z][a-z]+(?:\s+[A-Z][a-z]+)*)\b")


def _sentences(text: str) -> list[str]:
    return [part.strip() for part in _SENTENCE_SPLIT.split(" ".join(text.split())) if part.strip()]


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


class ExtractiveSummarizer:
    """Summarize a conversation with no LLM: sentences and facts taken from the transcript itself.

    Returns the same structure as ``MemorySummarizer.summarize_conversation``: ``{type, title, summary,
    events[{event, when, event_date, participants, consequence}], knowledge{facts[{claim, certainty}],
    decisions[{decision, reason}], actions[], open_questions[]}, classification{topics, entities}}``.

    Args:
        summary_sentences: how many salient sentences make the summary.
        clock: anchors relative time words ("yesterday") when messages carry no timestamp.
    """

    def __init__(self, *, summary_sentences: int = 4, clock: Clock | None = None) -> None:
        self.summary_sentences = summary_sentences
        self.clock = clock or SystemClock()

    async def summarize_conversation(self, messages: Sequence[Mapping[str, Any]], *,
                                     context: str | None = None, strict: bool = False) -> dict[str, Any]:
        """The structured summary of ``messages`` (``[{role, content, timestamp?}]``)."""
        return self.summarize(messages)

    def summarize(self, messages: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """Sync form of ``summarize_conversation``."""
        turns = [(str(m.get("role", "user")), str(m.get("content", "")), m.get("timestamp")) for m in messages
                 if str(m.get("content", "")).strip()]
        sentences = [(role, sentence, stamp) for role, text, stamp in turns for sentence in _sentences(text)]
        frequency: dict[str, int] = {}
        for _, sentence, _ in sentences:
            for term in set(tokenize(sentence)):
                frequency[term] = frequency.get(term, 0) + 1

        def salience(entry: tuple[int, tuple[str, str, Any]]) -> float:
            position, (role, sentence, _) = entry
            terms = set(tokenize(sentence))
            weight = sum(frequency[term] for term in terms) / (len(terms) + 2) if terms else 0.0
            return weight * (1.2 if role == "user" else 1.0) + (0.5 if position == 0 else 0.0)

        ranked = sorted(enumerate(sentences), key=salience, reverse=True)[: self.summary_sentences]
        summary = " ".join(sentence for _, (_, sentence, _) in sorted(ranked))
        first_user = next((text for role, text, _ in turns if role == "user"), turns[0][1] if turns else "")
        title = _short((_sentences(first_user) or [first_user or "Conversation"])[0], 80)
        facts, decisions, events, questions = [], [], [], []
        for role, sentence, stamp in sentences:
            if sentence.endswith("?"):
                if role == "user":
                    questions.append(sentence)
                continue
            if _DECISION_CUE.search(sentence):
                reason = _REASON.search(sentence)
                decisions.append({"decision": _short(sentence, 240), "reason": reason.group(1) if reason else ""})
            elif role == "user" and _FACT_CUE.search(sentence):
                facts.append({"claim": _short(sentence, 240), "certainty": "stated"})
            anchor = parse_instant(stamp) if isinstance(stamp, str) else self.clock.now()
            window = parse_time_window(sentence, anchor)
            if window is not None:
                when = _dt.datetime.fromtimestamp(window[0], UTC).date().isoformat()
                events.append({"event": _short(sentence, 240), "when": when, "event_date": when,
                               "participants": [role], "consequence": ""})
        entities: dict[str, int] = {}
        for _, text, _ in turns:
            for match in _ENTITY.finditer(text):
                name = match.group(1)
                if name.casefold() not in STOPWORDS and len(name) > 2:
                    entities[name] = entities.get(name, 0) + 1
        words: dict[str, int] = {}
        for _, text, _ in turns:
            for word in _WORD.findall(text.casefold()):
                if word not in STOPWORDS and len(word) > 3 and not word.isdigit():
                    words[word] = words.get(word, 0) + 1
        topics = [word for word, count in sorted(words.items(), key=lambda pair: (-pair[1], pair[0])) if count > 1][:5]
        return {"type": "conversation", "title": title, "summary": summary,
                "events": events[:10],
                "knowledge": {"facts": facts[:10], "decisions": decisions[:10], "actions": [],
                              "open_questions": questions[:5]},
                "classification": {"topics": topics,
                                   "entities": [name for name, _ in sorted(entities.items(), key=lambda p: -p[1])][:10]}}

    async def generate_implications(self, messages: Sequence[Mapping[str, Any]]) -> list[str]:
        """Without an LLM there are no hypothetical questions to add."""
        return []


_SUMMARY_SCHEMA = {
    "type": "object",
    "properties": {
        "type": {"type": "string"}, "title": {"type": "string"}, "summary": {"type": "string"},
        "events": {"type": "array", "items": {"type": "object", "properties": {
            "event": {"type": "string"}, "when": {"type": "string"}, "event_date": {"type": "string"},
            "participants": {"type": "array", "items": {"type": "string"}}, "consequence": {"type": "string"}}}},
        "knowledge": {"type": "object", "properties": {
            "facts": {"type": "array", "items": {"type": "object", "properties": {
                "claim": {"type": "string"}, "certainty": {"type": "string"}}}},
            "decisions": {"type": "array", "items": {"type": "object", "properties": {
                "decision": {"type": "string"}, "reason": {"type": "string"}}}},
            "actions": {"type": "array", "items": {"type": "object"}},
            "open_questions": {"type": "array", "items": {"type": "string"}}}},
        "classification": {"type": "object", "properties": {
            "topics": {"type": "array", "items": {"type": "string"}},
            "entities": {"type": "array", "items": {"type": "string"}}}},
    },
    "required": ["title", "summary"],
}


class MemorySummarizer:
    """Summarize a conversation with an LLM adapter into the seed's structure, plus prospective questions.

    The model is found in upstream's order: ``adapter``; else ``client`` (an ``openai``- or
    ``anthropic``-shaped SDK client, by ``provider``); else ``api_key``/``base_url``; else the environment
    (``KUMIHO_LLM_PROVIDER``, ``KUMIHO_LLM_API_KEY``, ``KUMIHO_LLM_BASE_URL``, ``KUMIHO_LLM_MODEL``,
    ``KUMIHO_LLM_LIGHT_MODEL``, then ``OPENAI_API_KEY`` / ``ANTHROPIC_API_KEY``), read when it is built. With
    none, every call gives the offline extractive summary.

    Args:
        adapter: an LLM adapter (``async chat(...)``).
        provider: ``"openai"`` (any OpenAI-compatible server, the default) or ``"anthropic"``.
        api_key, base_url, client: how to reach the model when no adapter is given.
        model: the model for summaries; light_model: the model for implications and topics (default
            ``model``).
        fallback: what to use when the LLM fails (default an ``ExtractiveSummarizer``).
    """

    def __init__(self, adapter: Any = None, *, model: str = "", light_model: str = "",
                 fallback: ExtractiveSummarizer | None = None, provider: str | None = None,
                 api_key: str | None = None, base_url: str | None = None, client: Any = None) -> None:
        if adapter is not None and not hasattr(adapter, "chat"):
            raise InvalidArgumentError("MemorySummarizer needs an adapter with async chat(...)")
        if adapter is None:
            adapter, model, light_model = self._resolve(provider, api_key, base_url, client, model, light_model)
        self.adapter, self.model, self.light_model = adapter, model, light_model or model
        self.fallback = fallback or ExtractiveSummarizer()

    @staticmethod
    def _resolve(provider: str | None, api_key: str | None, base_url: str | None, client: Any, model: str,
                 light_model: str) -> tuple[Any, str, str]:
        """An adapter from the keywords, else from the environment; None when nothing is configured."""
        environ = os.environ
        provider = (provider or environ.get("KUMIHO_LLM_PROVIDER") or "").strip().lower()
        model = model or environ.get("KUMIHO_LLM_MODEL", "")
        light_model = light_model or environ.get("KUMIHO_LLM_LIGHT_MODEL", "")
        if client is None and api_key is None and base_url is None:
            api_key = environ.get("KUMIHO_LLM_API_KEY") or None
            base_url = environ.get("KUMIHO_LLM_BASE_URL") or None
            if api_key is None and base_url is None:
                if provider != "anthropic" and environ.get("OPENAI_API_KEY"):
                    api_key, provider = environ["OPENAI_API_KEY"], provider or "openai"
                elif environ.get("ANTHROPIC_API_KEY"):
                    api_key, provider = environ["ANTHROPIC_API_KEY"], "anthropic"
        if provider not in ("", "openai", "anthropic"):
            raise InvalidArgumentError(f"provider must be 'openai' or 'anthropic', not {provider!r}")
        if client is not None:
            adapter = AnthropicAdapter(client) if provider == "anthropic" else OpenAICompatAdapter(client)
        elif api_key is not None or base_url is not None:
            if provider == "anthropic":
                adapter = AnthropicAdapter.create(api_key=api_key or "", base_url=base_url)
            else:
                adapter = OpenAICompatAdapter.create(api_key=api_key, base_url=base_url)
        else:
            return None, model, light_model
        return adapter, model, light_model

    @staticmethod
    def _transcript(messages: Sequence[Mapping[str, Any]]) -> str:
        return "\n".join(f"{m.get('role', 'user')}: {m.get('content', '')}" for m in messages)

    async def summarize_conversation(self, messages: Sequence[Mapping[str, Any]], *,
                                     context: str | None = None, strict: bool = False) -> dict[str, Any]:
        """The structured summary; on an LLM failure the extractive one, with ``error`` set (or raise when
        ``strict``)."""
        if self.adapter is None:
            return self.fallback.summarize(messages)
        system = ("You summarize a conversation for an agent's long-term memory. Reply with JSON: type, title "
                  "(<= 80 chars), summary (<= 3 sentences), events [{event, when, event_date (ISO date), "
                  "participants, consequence}], knowledge {facts [{claim, certainty}], decisions [{decision, "
                  "reason}], actions, open_questions}, classification {topics, entities}. Only what was said.")
        try:
            reply = await adapter_chat(self.adapter, messages=[{"role": "user", "content": self._transcript(messages)}],
                                            model=self.model, system=system, max_tokens=2560,
                                            json_mode={"name": "conversation_summary", "schema": _SUMMARY_SCHEMA})
            result = parse_llm_json(reply, expect=dict)
            if not isinstance(result, dict) or not isinstance(result.get("summary"), str):
                raise ValueError("the reply has no summary")
            return result
        except (KumihoMemoryError, ValueError, TypeError, OSError, asyncio.TimeoutError) as exc:
            if strict:
                raise ServiceError(f"conversation summarization failed: {exc}", transient=True) from exc
            fallback = self.fallback.summarize(messages)
            fallback["error"] = f"conversation summarization failed, used the extractive summary: {exc}"
            return fallback

    async def generate_implications(self, messages: Sequence[Mapping[str, Any]]) -> list[str]:
        """3-5 questions a future user might ask that this conversation answers (prospective indexing)."""
        if self.adapter is None:
            return []
        prompt = ("List 3 to 5 short questions (<= 20 words each) that someone might ask later and that this "
                  "conversation answers. Reply with a JSON array of strings.\n\n" + self._transcript(messages))
        try:
            reply = await adapter_chat(self.adapter, messages=[{"role": "user", "content": prompt}], model=self.light_model,
                                            max_tokens=400, json_mode="array")
            questions = parse_llm_json(reply, expect=list)
            return [q.strip() for q in questions if isinstance(q, str) and q.strip()][:5]
        except (KumihoMemoryError, ValueError, TypeError, OSError, asyncio.TimeoutError):
            return []

    async def extract_topics(self, text: str, *, limit: int = 5) -> list[str]:
        """A few short topic labels for ``text`` (upstream's method): the model's, else its most frequent
        content words."""
        text = _checked_text(text, "text", limit=MAX_CONTENT_CHARS)
        if self.adapter is not None:
            try:
                reply = await adapter_chat(self.adapter, messages=[{"role": "user", "content": (
                    f"Give up to {limit} short topic labels (1-3 words each) for this text, as a JSON array of "
                    f"strings.\n\n{text[:8000]}")}], model=self.light_model, max_tokens=200, json_mode="array")
                topics = [t.strip() for t in parse_llm_json(reply, expect=list) if isinstance(t, str) and t.strip()]
                if topics:
                    return topics[:limit]
            except (KumihoMemoryError, ValueError, TypeError, OSError, asyncio.TimeoutError):
                pass
        counts: dict[str, int] = {}
        for word in re.findall(r"[A-Za-z][A-Za-z'-]{3,}", text):
            if word.lower() not in STOPWORDS:
                counts[word.lower()] = counts.get(word.lower(), 0) + 1
        return [word for word, _ in sorted(counts.items(), key=lambda pair: (-pair[1], pair[0]))][:limit]


def render_summary(summary: Mapping[str, Any], implications: Sequence[str] = ()) -> str:
    """The text stored for a consolidated conversation: summary, key events, facts, decisions, and the
    questions it answers (indexed with it, so recall bridges vocabulary gaps)."""
    parts = [str(summary.get("summary", "")).strip()]
    events = summary.get("events") or []
    if events:
        parts.append("Key events:\n" + "\n".join(
            f"- [{e.get('when') or e.get('event_date') or '?'}] {e.get('event', '')}"
            + (f" -> {e['consequence']}" if e.get("consequence") else "") for e in events if isinstance(e, Mapping)))
    knowledge = summary.get("knowledge") or {}
    facts = knowledge.get("facts") or []
    if facts:
        parts.append("Key facts:\n" + "\n".join(f"- {f.get('claim', '')}" for f in facts if isinstance(f, Mapping)))
    decisions = knowledge.get("decisions") or []
    if decisions:
        parts.append("Decisions:\n" + "\n".join(
            f"- {d.get('decision', '')}" + (f" (reason: {d['reason']})" if d.get("reason") else "")
            for d in decisions if isinstance(d, Mapping)))
    if implications:
        parts.append("Questions this answers:\n" + "\n".join(f"- {q}" for q in implications))
    return "\n\n".join(part for part in parts if part)


# -- write-time assessors: what to remember, and how much to trust it ---------------------------------------------

DEFAULT_STORAGE_POLICY = """Store a memory only when the conversation contains something worth knowing later:
- a stated preference, habit or constraint of the user ("I prefer", "always", "never", "I use");
- a decision and its reason ("we decided", "let's go with", "because");
- a durable fact about the user, their work, people or things they care about;
- a correction of something believed before (say what changed).
Do not store greetings, thanks, small talk, questions without answers, code listings, or anything secret.
Write the memory as one self-contained sentence in the third person."""

_STORE_SIGNAL = re.compile(r"\b(prefer|prefers|always|never|decided|decide|remember|we agreed|agreed|i use|we use|"
                           r"i like|i love|i hate|my favorite|my favourite|from now on|going forward|important|"
                           r"actually|correction|not anymore|no longer|switch(?:ed)? to|moved to)\b", re.I)
_ACKNOWLEDGEMENT = re.compile(r"^\s*(ok(ay)?|thanks?|thank you|great|cool|sure|yes|no|got it|hi|hello|hey|"
                              r"bye|good (morning|night))\b[\s.!]*$", re.I)


@dataclasses.dataclass
class MemoryAssessResult:
    """What an assessor decided about the latest turns (names as in kumiho-memory)."""

    should_store: bool
    content: str = ""
    memory_type: str = "fact"
    reason: str = ""
    tags: list[str] = dataclasses.field(default_factory=list)
    evidence_level: str = ""
    source: str = ""
    supporting_krefs: list[str] = dataclasses.field(default_factory=list)
    conflicting_krefs: list[str] = dataclasses.field(default_factory=list)
    create_contradicts_edges: bool = True


# The shape of ``auto_assess_fn``: ``async (messages, recalled) -> MemoryAssessResult`` (upstream's name).
AutoAssessFn = Callable[[list[dict[str, Any]], list[dict[str, Any]]], Awaitable[MemoryAssessResult]]


def get_memory_space(channel_type: str, *, project: str = DEFAULT_PROJECT, team_slug: str = "",
                     group_id: str = "") -> str:
    """The space path a conversation's memories go to, by the kind of channel (upstream's routing).

    Args:
        channel_type: ``"team_channel"``, ``"group_dm"``, or anything else (a personal conversation).
        project: the project at the head of the path. team_slug / group_id: the team or group, when known.

    Returns:
        ``"{project}/work/{team_slug}"``, ``"{project}/groups/{group_id}"`` (``default`` when not given) or
        ``"{project}/personal"``.
    """
    if channel_type == "team_channel":
        return f"{project}/work/{team_slug or 'default'}"
    if channel_type == "group_dm":
        return f"{project}/groups/{group_id or 'default'}"
    return f"{project}/personal"


@dataclasses.dataclass(frozen=True)
class EvidencePolicy:
    """How the evidence assessor grades: ``min_corroboration`` distinct sources make ``corroborated``;
    contradicting a memory tagged with one of ``official_tags`` pins the claim ``unverified``."""

    min_corroboration: int = 2
    official_tags: frozenset[str] = frozenset({evidence_tag(OFFICIAL)})
    create_supports_edges: bool = False
    create_contradicts_edges: bool = True
    storage_policy: str = DEFAULT_STORAGE_POLICY
    duplicate_score_threshold: float = 0.90


def heuristic_prefilter(messages: Sequence[Mapping[str, Any]]) -> bool:
    """Cheap gate before any LLM call: the last turns say enough, the last one is not a bare
    acknowledgement or a code block, and something in them signals a preference, decision or fact."""
    window = [str(m.get("content", "")) for m in messages[-4:]]
    if sum(len(text) for text in window) < 60 or not window:
        return False
    last = window[-1].strip()
    if _ACKNOWLEDGEMENT.match(last) or last.startswith("```"):
        return False
    return any(_STORE_SIGNAL.search(text) for text in window)


def _assessment_prompt(messages: Sequence[Mapping[str, Any]], recalled: Sequence[Mapping[str, Any]],
                       policy: str, evidence: bool) -> str:
    turns = "\n".join(f"{m.get('role', 'user')}: {str(m.get('content', ''))[:600]}" for m in messages[-6:])
    known = "\n".join(f"[{index}] {str(r.get('content') or r.get('summary') or '')[:300]}"
                      + (f" (source: {r['metadata'].get('source')})" if r.get("metadata", {}).get("source") else "")
                      for index, r in enumerate(recalled[:5], 1))
    reply = ('{"should_store": bool, "content": str, "memory_type": "fact|preference|decision|correction", '
             '"reason": str' + (', "agrees_with": [indices], "contradicts": [indices], "source": str' if evidence else "")
             + "}")
    return (f"{policy}\n\nRecent conversation:\n{turns}\n\nWhat memory already holds:\n{known or '(nothing)'}\n\n"
            f"Reply with JSON only: {reply}")


def _most_similar(content: str, recalled: Sequence[Mapping[str, Any]]) -> float:
    return max((belief_similarity(content, str(r.get("content", ""))) for r in recalled), default=0.0)


def create_llm_assessor(adapter: Any, model: str = "", *, storage_policy: str = DEFAULT_STORAGE_POLICY,
                        duplicate_score_threshold: float = 0.90,
                        skip_heuristic: bool = False) -> Callable[..., Any]:
    """An ``auto_assess_fn``: the heuristic prefilter, then a near-duplicate check against what recall
    found (word overlap of the last user turn with a recalled memory >= ``duplicate_score_threshold``
    skips the LLM), then the LLM's JSON decision under ``storage_policy``."""

    async def assess(messages: Sequence[Mapping[str, Any]], recalled: Sequence[Mapping[str, Any]]) -> MemoryAssessResult:
        if not skip_heuristic and not heuristic_prefilter(messages):
            return MemoryAssessResult(False, reason="nothing worth storing (prefilter)")
        last_user = next((str(m.get("content", "")) for m in reversed(messages) if m.get("role") == "user"), "")
        if _most_similar(last_user, recalled) >= duplicate_score_threshold:
            return MemoryAssessResult(False, reason="already remembered (near-duplicate)")
        reply = await adapter_chat(adapter, messages=[{"role": "user", "content": _assessment_prompt(
            messages, recalled, storage_policy, evidence=False)}], model=model, max_tokens=250, json_mode=True)
        decision = parse_llm_json(reply, expect=dict)
        return MemoryAssessResult(bool(decision.get("should_store")), content=str(decision.get("content", "")),
                                  memory_type=str(decision.get("memory_type") or "fact"),
                                  reason=str(decision.get("reason", "")))
    return assess


def grade_evidence(recalled: Sequence[Mapping[str, Any]], agrees_with: Iterable[int], contradicts: Iterable[int],
                   policy: EvidencePolicy | None = None) -> dict[str, Any]:
    """Grade a claim from which recalled memories (1-based) it agrees with and contradicts. Pure.

    Contradicting an official memory -> ``unverified``, pinned, with the conflicts; otherwise agreement from
    at least ``max(1, min_corroboration)`` distinct canonical sources and no conflict -> ``corroborated``
    (memory type ``fact``); else no level. Never ``official``.

    Returns:
        ``{evidence_level, memory_type, supporting_krefs, conflicting_krefs, pinned, has_agreement}``.
    """
    policy = policy or EvidencePolicy()
    def picked(indices: Iterable[int]) -> list[Mapping[str, Any]]:     # True is not index 1
        return [recalled[i - 1] for i in indices
                if isinstance(i, int) and not isinstance(i, bool) and 1 <= i <= len(recalled)]

    def source_of(memory: Mapping[str, Any]) -> str | None:              # top level (upstream) or metadata
        value = memory.get("source") or (memory.get("metadata") or {}).get("source")
        return str(value) if value else None
    agreeing, conflicting = picked(agrees_with), picked(contradicts)
    conflicting_krefs = [str(r.get("kref")) for r in conflicting]
    official = [r for r in conflicting if set(r.get("tags") or ()) & set(policy.official_tags)
                or memory_evidence_level(r) == OFFICIAL]
    if official:
        return {"evidence_level": UNVERIFIED, "memory_type": None, "supporting_krefs": [],
                "conflicting_krefs": conflicting_krefs, "pinned": True, "has_agreement": bool(agreeing)}
    sources = {canonical_source(source_of(r)) for r in agreeing if source_of(r)}
    if not conflicting and len(sources) >= max(1, policy.min_corroboration):
        return {"evidence_level": CORROBORATED, "memory_type": "fact",
                "supporting_krefs": [str(r.get("kref")) for r in agreeing], "conflicting_krefs": [],
                "pinned": False, "has_agreement": True}
    return {"evidence_level": None, "memory_type": None, "supporting_krefs": [str(r.get("kref")) for r in agreeing],
            "conflicting_krefs": conflicting_krefs, "pinned": False, "has_agreement": bool(agreeing)}


def create_evidence_assessor(adapter: Any, model: str = "", *, policy: EvidencePolicy | None = None,
                             skip_heuristic: bool = False) -> Callable[..., Any]:
    """An ``auto_assess_fn`` that also grades: the LLM says what the claim agrees with and contradicts and
    its source; ``grade_evidence`` turns that into a level (``single_source`` with a source, else
    ``unverified``, or ``corroborated``); never ``official``."""
    policy = policy or EvidencePolicy()

    async def assess(messages: Sequence[Mapping[str, Any]], recalled: Sequence[Mapping[str, Any]]) -> MemoryAssessResult:
        if not skip_heuristic and not heuristic_prefilter(messages):
            return MemoryAssessResult(False, reason="nothing worth storing (prefilter)")
        reply = await adapter_chat(adapter, messages=[{"role": "user", "content": _assessment_prompt(
            messages, recalled, policy.storage_policy, evidence=True)}], model=model, max_tokens=300, json_mode=True)
        decision = parse_llm_json(reply, expect=dict)
        if not decision.get("should_store"):
            return MemoryAssessResult(False, reason=str(decision.get("reason", "")))
        grade = grade_evidence(recalled, decision.get("agrees_with") or [], decision.get("contradicts") or [], policy)
        source = str(decision.get("source") or "")
        level = grade["evidence_level"] or (SINGLE_SOURCE if source else UNVERIFIED)
        return MemoryAssessResult(
            True, content=str(decision.get("content", "")), memory_type=grade["memory_type"] or str(
                decision.get("memory_type") or "fact"), reason=str(decision.get("reason", "")), evidence_level=level,
            source=source, supporting_krefs=grade["supporting_krefs"] if policy.create_supports_edges else [],
            conflicting_krefs=grade["conflicting_krefs"], create_contradicts_edges=policy.create_contradicts_edges)
    return assess


# -- a durable queue for work that must not be lost -----------------------------------------------------------

class RetryQueue:
    """Consolidations that could not be stored yet, kept in a JSON-lines file until they are.

    Each line is ``{"id", "timestamp", "attempts", "payload"}``. Writes are appended and fsynced; a flush
    rewrites the file atomically. Every process of a user may share one folder: writes are ordered by a lock
    file across processes, and only one process flushes at a time (a second waits, then replays what is left). Payloads that fail for a reason a retry cannot fix (bad input) are
    moved to ``parked.jsonl`` with the reason instead of being retried forever.

    Args:
        queue_dir: the folder for ``pending.jsonl`` and ``parked.jsonl`` (created on first write); default
            ``$KUMIHO_RETRY_QUEUE_DIR`` when read by ``from_env``, else ``~/.kumiho/retry_queue``.
        clock: time source for timestamps.
    """

    def __init__(self, queue_dir: str | os.PathLike[str] | None = None, *, clock: Clock | None = None,
                 ids: IdFactory | None = None) -> None:
        base = os.fspath(queue_dir) if queue_dir is not None else os.path.join(os.path.expanduser("~"), ".kumiho",
                                                                               "retry_queue")
        self.pending_path = os.path.join(base, "pending.jsonl")
        self.parked_path = os.path.join(base, "parked.jsonl")
        self.clock = clock or SystemClock()
        self.ids = ids or RandomIds()
        self._lock = threading.Lock()
        # Every process of a user shares the default folder: writes hold ``queue.lock`` (so an append is
        # never lost to another process's rewrite), and a flush holds ``flush.lock`` for its whole run (so two
        # processes never replay the same payload).
        self._write_lock_path = os.path.join(base, "queue.lock")
        self._flush_lock_path = os.path.join(base, "flush.lock")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **options: Any) -> "RetryQueue":
        """A queue in ``$KUMIHO_RETRY_QUEUE_DIR`` when set."""
        environ = os.environ if environ is None else environ
        return cls(environ.get("KUMIHO_RETRY_QUEUE_DIR") or None, **options)

    def _read(self, path: str) -> list[dict[str, Any]]:
        try:
            with open(path, encoding="utf-8") as stream:
                lines = stream.readlines()
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise StoreError(f"cannot read retry queue {path!r}: {exc}") from exc
        entries = []
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                entries.append(json.loads(line))
            except json.JSONDecodeError:
                if number != len(lines):       # only a torn last line (a crash mid-append) is tolerated
                    raise StoreError(f"retry queue {path!r} line {number} is damaged; move the file aside") from None
        return entries

    def _append(self, path: str, entry: Mapping[str, Any]) -> None:
        """Append one entry, durable on return; the caller holds the write lock."""
        try:
            with open(path, "a", encoding="utf-8") as stream:
                stream.write(canonical_json(dict(entry)) + "\n")
                stream.flush()
                os.fsync(stream.fileno())
        except OSError as exc:
            raise StoreError(f"cannot write retry queue {path!r}: {exc}") from exc

    def _rewrite(self, entries: Sequence[Mapping[str, Any]]) -> None:
        """Replace the pending file atomically; the caller holds the write lock."""
        try:
            _write_file_atomically(self.pending_path, "".join(canonical_json(dict(entry)) + "\n" for entry in entries))
        except OSError as exc:
            raise StoreError(f"cannot write retry queue {self.pending_path!r}: {exc}") from exc

    @contextlib.contextmanager
    def _writing(self) -> Iterator[None]:
        """Hold the thread lock and the cross-process write lock (creating the folder on first write)."""
        with self._lock:
            try:
                lock = _FileLock(self._write_lock_path)
                lock.acquire()
            except OSError as exc:
                raise StoreError(f"cannot lock retry queue {self._write_lock_path!r}: {exc}") from exc
            try:
                yield
            finally:
                lock.release()

    @property
    def count(self) -> int:
        """How many payloads wait (a property, as upstream has it)."""
        return len(self._read(self.pending_path))   # a rewrite is an atomic replace: reads need no lock

    def enqueue(self, payload: Mapping[str, Any]) -> str:
        """Persist a payload (durable when this returns); return its id. Credentials in it become
        placeholders first: the queue file is on disk too."""
        entry_id = self.ids.new_id()
        screened = screen_for_store(json.loads(canonical_json(dict(payload))), field="payload")
        with self._writing():
            self._append(self.pending_path, {"id": entry_id, "timestamp": format_instant(self.clock.now()),
                                             "attempts": 0, "payload": screened})
        return entry_id

    def drain(self) -> list[dict[str, Any]]:
        """The waiting entries (the queue is unchanged)."""
        return self._read(self.pending_path)

    def parked(self) -> list[dict[str, Any]]:
        """Entries set aside because retrying cannot help, with their ``reason``."""
        return self._read(self.parked_path)

    def clear(self) -> int:
        """Drop every waiting entry; return how many there were."""
        with self._writing():
            count = len(self._read(self.pending_path))
            self._rewrite([])
            return count

    async def flush(self, store: Callable[..., Any], *, max_retries: int = 2,
                    sleep: Callable[[float], Any] = asyncio.sleep) -> dict[str, int]:
        """Replay each payload as ``store(**payload)`` (sync or async; upstream's call), trying a transient failure up to
        ``max_retries`` more times with a short backoff. Stored ones leave the queue; transiently failing
        ones stay (``attempts`` counted) for the next flush; permanently failing ones (bad input, a
        non-transient ``ServiceError``) are parked with the reason, never retried forever.

        Returns:
            ``{succeeded, failed, dropped}`` (``failed`` stay queued; ``dropped`` were parked).
        """
        counts = {"succeeded": 0, "failed": 0, "dropped": 0}
        flushing = _FileLock(self._flush_lock_path)
        try:
            while not flushing.acquire(blocking=False):   # another process is flushing: wait for it, then
                await sleep(0.05)                          # replay only what it left
        except OSError as exc:
            raise StoreError(f"cannot lock retry queue {self._flush_lock_path!r}: {exc}") from exc
        try:
            await self._flush_entries(store, counts, max_retries, sleep)
        finally:
            flushing.release()
        return counts

    async def _flush_entries(self, store: Callable[..., Any], counts: dict[str, int],
                             max_retries: int, sleep: Callable[[float], Any]) -> None:
        for entry in self.drain():
            error: Exception | None = None
            for attempt in range(max_retries + 1):
                try:
                    await _call(store, **entry["payload"])
                    error = None
                    break
                except (InvalidArgumentError, ServiceError, StoreError, NotFoundError) as exc:
                    error = exc
                    if not _is_transient(exc):
                        break
                    if attempt < max_retries:
                        await sleep(min(2.0, 0.1 * 2 ** attempt))
            with self._writing():
                remaining = [e for e in self._read(self.pending_path) if e["id"] != entry["id"]]
                if error is None:
                    counts["succeeded"] += 1
                elif _is_transient(error):
                    remaining.append({**entry, "attempts": entry.get("attempts", 0) + max_retries + 1,
                                      "last_error": f"{type(error).__name__}: {error}"})
                    counts["failed"] += 1
                else:
                    self._append(self.parked_path, {**entry, "reason": f"{type(error).__name__}: {error}"})
                    counts["dropped"] += 1
                self._rewrite(remaining)


def _is_transient(error: BaseException) -> bool:
    """Whether retrying later may succeed: store trouble and transient service errors, not bad input."""
    if isinstance(error, ServiceError):
        return error.transient
    return isinstance(error, (StoreError, OSError)) and not isinstance(error, (CorruptStoreError, SchemaVersionError))


class FailureClass(str, enum.Enum):
    """What kind of failure an error is, for deciding whether to try again (upstream's names)."""

    TRANSIENT = "transient"           # a timeout, a dropped connection, 408/429/5xx: later may work
    DETERMINISTIC = "deterministic"   # bad input, another 4xx, a refused credential: it will fail again
    UNKNOWN = "unknown"               # anything else: retried, but fewer times


def classify_failure(error: BaseException) -> FailureClass:
    """Sort an error into ``FailureClass``: our own errors by their kind, others by an HTTP status
    (``status_code``/``status``) or their builtin type.

    Examples:
        ``TimeoutError``, ``ConnectionError``, HTTP 408/429/5xx, a transient ``ServiceError`` -> transient;
        ``ValueError``, ``TypeError``, other HTTP 4xx -> deterministic; the rest -> unknown.
    """
    if isinstance(error, ServiceError):
        return FailureClass.TRANSIENT if error.transient else FailureClass.DETERMINISTIC
    if isinstance(error, StoreError):
        return FailureClass.TRANSIENT if _is_transient(error) else FailureClass.DETERMINISTIC
    status = getattr(error, "status_code", None) or getattr(error, "status", None)
    if isinstance(status, int) and not isinstance(status, bool):
        if status in (408, 429) or status >= 500:
            return FailureClass.TRANSIENT
        if 400 <= status < 500:
            return FailureClass.DETERMINISTIC
    if isinstance(error, (TimeoutError, ConnectionError, asyncio.TimeoutError)):
        return FailureClass.TRANSIENT
    if isinstance(error, (ValueError, TypeError, KeyError)):
        return FailureClass.DETERMINISTIC
    return FailureClass.UNKNOWN


async def retry_with_backoff(function: Callable[[], Any], *, max_retries: int = 3, base_delay: float = 1.0,
                             max_delay: float = 30.0, unknown_max_retries: int = 2,
                             sleep: Callable[[float], Any] = asyncio.sleep,
                             jitter: Callable[[], float] | None = None) -> Any:
    """Call ``function()`` (sync or async) until it succeeds: a transient failure is retried up to
    ``max_retries`` times, an unknown one up to ``unknown_max_retries``, a deterministic one never.

    The wait doubles from ``base_delay`` up to ``max_delay``, plus up to 25% jitter (``jitter()`` in [0, 1);
    default random).

    Returns:
        What ``function`` returned.

    Raises:
        The last error, once retrying stops.
    """
    draw = jitter or (lambda: secrets.randbelow(1000) / 1000.0)
    attempt = 0
    while True:
        try:
            return await _maybe_await(function())
        except Exception as error:  # noqa: BLE001 - classified, then re-raised when retrying stops
            kind = classify_failure(error)
            allowed = {FailureClass.TRANSIENT: max_retries, FailureClass.UNKNOWN: unknown_max_retries}.get(kind, 0)
            if attempt >= allowed:
                raise
            delay = min(max_delay, base_delay * 2 ** attempt)
            await sleep(delay * (1.0 + 0.25 * draw()))
            attempt += 1


# -- space attributes --------------------------------------------------------------------
#
# A space attribute is one named string on a space (upstream: a Space's single-key attribute). The embedded
# store has no space rows, so an attribute is a keyed item of kind ``space-attribute`` in that space: setting
# it adds a revision, so the history of a pin is kept like any other memory's.

SPACE_ATTRIBUTE_KIND = "space-attribute"
SPACE_PROFILE_KIND = "space-profile"
SPACE_PROFILE_ITEM = "_space_profile"
SPACE_CLASS_ATTRIBUTE = "space_class"
JOB_KINDS = frozenset({"dream-state", PREFETCH_STATE_KIND})   # a space holding only these is a job's
_ATTRIBUTE_KEY_PREFIX = "space-attribute:"
_ATTRIBUTE_NAME_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$")
MAX_ATTRIBUTE_CHARS = 4096


def _keyed_item(memory: Any, space: str, key: str, kind: str | None = None) -> dict[str, Any] | None:
    """The item (live or deprecated) that holds supersession ``key`` in exactly ``space``, or None."""
    for item in memory.items(space=space, kind=kind, include_deprecated=True):
        if item["space"] == space and item["key"] == key:
            return item
    return None


def _checked_attribute_name(name: Any) -> str:
    if not isinstance(name, str) or not _ATTRIBUTE_NAME_PATTERN.match(name):
        raise InvalidArgumentError(f"invalid space attribute name {name!r} (expected "
                                   f"{_ATTRIBUTE_NAME_PATTERN.pattern})")
    return name


def set_space_attribute(memory: Any, space: str, name: str, value: str | None) -> str | None:
    """Set (or, with ``value=None``, remove) the attribute ``name`` of a space.

    Args:
        memory: the ``Memory`` holding the space.
        space: the space path (``"news"``, ``"personal/u1"``).
        name: the attribute name, e.g. ``space_class``.
        value: a non-empty string, or None to remove the attribute.

    Returns:
        The kref of the revision that holds the value (unchanged values write nothing), or None on removal.

    Raises:
        InvalidArgumentError: a malformed space, name or value (nothing is written).
    """
    space = normalize_space(space)
    name = _checked_attribute_name(name)
    if value is not None and (not isinstance(value, str) or not value.strip() or len(value) > MAX_ATTRIBUTE_CHARS):
        raise InvalidArgumentError(f"a space attribute value is a non-empty string of at most "
                                   f"{MAX_ATTRIBUTE_CHARS} characters, not {value!r:.80}")
    held = _keyed_item(memory, space, _ATTRIBUTE_KEY_PREFIX + name, SPACE_ATTRIBUTE_KIND)
    if value is None:
        if held is not None and not held["deprecated"]:
            memory.deprecate(held["item_kref"])
        return None
    if held is None:
        return memory.remember(value, space=space, kind=SPACE_ATTRIBUTE_KIND, title=name,
                               metadata={"attribute": name}, key=_ATTRIBUTE_KEY_PREFIX + name)
    current = memory.get(held["item_kref"])
    # Compared exactly: a supersession key would treat "Canonical" and "canonical" as the same statement.
    kref = current["kref"] if current["content"] == value else memory.remember(
        value, space=space, kind=SPACE_ATTRIBUTE_KIND, title=name, metadata={"attribute": name},
        item=held["item_kref"])
    if held["deprecated"]:
        memory.deprecate(held["item_kref"], False)
    return kref


def space_attribute(memory: Any, space: str, name: str) -> str | None:
    """The value of a space's attribute ``name``, or None when it is not set."""
    space = normalize_space(space)
    held = _keyed_item(memory, space, _ATTRIBUTE_KEY_PREFIX + _checked_attribute_name(name), SPACE_ATTRIBUTE_KIND)
    if held is None or held["deprecated"]:
        return None
    return memory.get(held["item_kref"])["content"]


def space_attributes(memory: Any, space: str) -> dict[str, str]:
    """Every attribute set on exactly ``space`` (not its sub-spaces), as ``{name: value}``."""
    space = normalize_space(space)
    found = {}
    for item in memory.items(space=space, kind=SPACE_ATTRIBUTE_KIND):
        key = item["key"] or ""
        if item["space"] == space and key.startswith(_ATTRIBUTE_KEY_PREFIX):
            found[key[len(_ATTRIBUTE_KEY_PREFIX):]] = memory.get(item["item_kref"])["content"]
    return dict(sorted(found.items()))


# The evidence carriers: enrichment (Dream State, update_metadata) never changes them.
EVIDENCE_METADATA_KEYS = frozenset({"evidence_level", "source", "sources", "confidence"})



# ==========================================================================================================
# 12. Export renderings
# ==========================================================================================================

def _mermaid_label(text: str) -> str:
    return text.replace("\\", "/").replace('"', "#quot;").replace("\n", " ")


def render_mermaid(item: Kref, revisions: Sequence[RevisionRecord], edges: Sequence[EdgeRecord]) -> str:
    """Draw an item's revisions (newest first, with tags) and every edge touching them as Mermaid."""
    lines = ["flowchart TB", f"  %% {item}"]
    node_ids: dict[str, str] = {}
    for record in sorted(revisions, key=lambda r: -r.number):
        node = f"r{record.number}"
        node_ids[str(record.kref)] = node
        title = record.title if len(record.title) <= 40 else record.title[:39] + "…"
        tags = f"<br/>[{', '.join(record.tags)}]" if record.tags else ""
        flag = " (deprecated)" if record.deprecated else ""
        lines.append(f'  {node}["r{record.number}: {_mermaid_label(title)}{flag}{tags}"]')
    for edge in edges:
        ends = []
        for kref in (edge.source_kref, edge.target_kref):
            key = str(kref)
            if key not in node_ids:
                node_ids[key] = f"x{len(node_ids)}"
                lines.append(f'  {node_ids[key]}(["{_mermaid_label(kref.item)} r{kref.revision}"])')
            ends.append(node_ids[key])
        lines.append(f"  {ends[0]} -->|{edge.edge_type}| {ends[1]}")
    return "\n".join(lines) + "\n"


# ==========================================================================================================
# 13. Facades: the sync Memory and the async UniversalMemoryManager
# ==========================================================================================================

def _title_from_content(content: str) -> str:
    first_line = " ".join(content.strip().split("\n", 1)[0].split())
    if len(first_line) <= TITLE_FROM_CONTENT_CHARS:
        return first_line
    return first_line[: TITLE_FROM_CONTENT_CHARS - 1].rstrip() + "…"


def _is_iso_date(value: Any) -> bool:
    """True for a string ``parse_instant`` reads."""
    if not isinstance(value, str):
        return False
    try:
        parse_instant(value)
    except InvalidArgumentError:
        return False
    return True


def _checked_artifacts(artifacts: Any) -> tuple[tuple[str, str, dict[str, Any]], ...]:
    """Validate ``[{"name", "location", "metadata"?}]`` for ``remember(artifacts=...)``."""
    if artifacts is None:
        return ()
    if isinstance(artifacts, (str, Mapping)) or not isinstance(artifacts, (list, tuple)):
        raise InvalidArgumentError("artifacts must be a list of {name, location, metadata} mappings")
    checked = []
    for artifact in artifacts:
        if not isinstance(artifact, Mapping):
            raise InvalidArgumentError("each artifact must be a mapping with name and location")
        name = _check_pattern(artifact.get("name"), ARTIFACT_PATTERN, "artifact name", InvalidArgumentError)
        location = _checked_text(artifact.get("location"), "artifact location", limit=4096)
        checked.append((name, location, _checked_metadata(artifact.get("metadata"))))
    return tuple(checked)


def _earned_trust(memory: Mapping[str, Any]) -> bool:
    """Official, corroborated, or backed by at least two distinct canonical sources."""
    level = parse_evidence(memory.get("metadata"), memory.get("tags"))
    if level in (OFFICIAL, CORROBORATED):
        return True
    if level == UNVERIFIED:
        return False          # explicitly demoted or pinned: sources listed earlier do not vouch for it
    sources = (memory.get("metadata") or {}).get("sources") or []
    return len({canonical_source(str(source)) for source in sources if str(source).strip()}) >= 2


def _embedding_text(title: str, content: str) -> str:
    """What is embedded for a memory: its content, with the title first when it adds something."""
    return content if title == _title_from_content(content) else f"{title}\n{content}"


def _checked_tags(tags: Any) -> tuple[str, ...]:
    if tags is None:
        return ()
    if isinstance(tags, str) or not isinstance(tags, (list, tuple, set, frozenset)):
        raise InvalidArgumentError("tags must be a list of strings")
    checked = tuple(dict.fromkeys(validate_tag(tag) for tag in tags))
    if LATEST_TAG in checked:
        raise InvalidArgumentError("'latest' is maintained by the store and cannot be set")
    return checked


class Memory:
    """Long-term memory over a versioned graph: remember, recall, revise, tag, link, forget.

    Args:
        path: a store file for durable memory (created if missing), or None for memory that lives only as
            long as this object.
        project: the project new memories go to and recall searches.
        backend: a ``GraphBackend`` to use instead of the embedded engine (``path`` must then be None).
        clock: time source (default the wall clock); ids: id source for new item names.
        busy_timeout: seconds a write waits for another process's lock.
        embedder: optional ``EmbeddingAdapter`` or callable ``texts -> vectors``; turns on hybrid recall.
            A failing embedder never fails a write: the memory is stored, and its vector is added later by
            ``backfill_embeddings``, or a few at a time by the next writes and recalls once it answers.
        evidence_rank: default evidence weighting for ``recall`` (``EvidenceRankConfig``).
        prefetch: a ``PrefetchConfig`` turns on anticipatory recall for ``engage(session_id=...)``.
        credentials: what a write holding a credential (an API key, a token, a password) does: ``"redact"``
            (default) stores a placeholder such as ``[credential:stripe]`` instead; ``"refuse"`` raises
            ``CredentialDetectedError`` and stores nothing. It applies to every way in: content, titles,
            metadata keys and values at any depth, sources, edges, artifacts. Tags, spaces and keys holding
            one are refused either way.

    Raises:
        StoreError: the file cannot be used (its subclasses say why).

    Use it as a context manager, or call ``close()``.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, *, project: str = DEFAULT_PROJECT,
                 backend: GraphBackend | None = None, clock: Clock | None = None, ids: IdFactory | None = None,
                 busy_timeout: float = 30.0, embedder: Any = None,
                 evidence_rank: EvidenceRankConfig | None = None, prefetch: PrefetchConfig | None = None,
                 credentials: str = "redact") -> None:
        self.project = _check_pattern(project, SEGMENT_PATTERN, "project", InvalidArgumentError)
        self.credentials = _checked_policy(credentials)
        if prefetch is not None and not isinstance(prefetch, PrefetchConfig):
            raise InvalidArgumentError(f"prefetch must be a PrefetchConfig, not {type(prefetch).__name__}")
        if backend is not None and path is not None:
            raise InvalidArgumentError("give either a path or a backend, not both")
        if not isinstance(busy_timeout, (int, float)) or busy_timeout < 0:
            raise InvalidArgumentError(f"busy_timeout must be a non-negative number, not {busy_timeout!r}")
        self._clock = clock or SystemClock()
        self._ids = ids or RandomIds()
        self._embed = None if embedder is None else embed_function(embedder)
        self.embedding_model = str(getattr(embedder, "model", "") or type(embedder).__name__) if embedder else ""
        self.evidence_rank = evidence_rank or EvidenceRankConfig()
        self.last_embedding_error: ServiceError | None = None
        self._vectors_pending = False
        self._backend = backend or SQLiteGraph(path, clock=self._clock, busy_timeout=busy_timeout)
        self._closed = False
        self._prefetch = AnticipatoryRecall(self, prefetch) if prefetch is not None and prefetch.enabled else None

    @classmethod
    def from_config(cls, config: MemoryConfig, **options: Any) -> "Memory":
        """Open the memory a ``MemoryConfig`` describes (extra keyword options pass through)."""
        options.setdefault("evidence_rank", EvidenceRankConfig(enabled=config.evidence_rerank))
        options.setdefault("credentials", config.credentials)
        if config.prefetch:
            options.setdefault("prefetch", PrefetchConfig())
        if config.backend == "kumiho":
            backend = KumihoBackend(config.kumiho_endpoint, config.kumiho_token or "",
                                    clock=options.get("clock"), environ={})
            return cls(project=config.project, backend=backend, **options)
        return cls(config.path, project=config.project, busy_timeout=config.busy_timeout, **options)

    @property
    def backend(self) -> GraphBackend:
        """The graph backend behind this memory."""
        return self._backend

    @property
    def closed(self) -> bool:
        """Whether ``close()`` was called."""
        return self._closed

    @property
    def clock(self) -> Clock:
        """The time source this memory stamps its writes with (the features built on it use it too)."""
        return self._clock

    def close(self) -> None:
        """Stop prefetching (saving its tables), flush and release the store. Safe to call twice."""
        self._closed = True
        try:
            if self._prefetch is not None:
                self._prefetch.close()
        finally:
            self._backend.close()

    @property
    def prefetcher(self) -> AnticipatoryRecall | None:
        """The anticipatory-recall engine, or None when this memory was opened without ``prefetch``."""
        return self._prefetch

    def _changed(self, kref: str | None) -> None:
        """Tell the prefetcher what a write touched (None: not one item)."""
        if self._prefetch is not None:
            self._prefetch.on_change(kref)

    def __enter__(self) -> "Memory":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        where = getattr(self._backend, "path", None) or getattr(self._backend, "address", type(self._backend).__name__)
        return f"Memory({where!r}, project={self.project!r})"

    def _own(self, text: Any, name: str = "kref") -> Kref:
        """Parse an item or revision kref of this memory's project.

        Raises:
            InvalidKrefError: malformed. NotFoundError: it names another project (projects never see each
            other's memories, even by address).
        """
        kref = parse_item_kref(text, name)
        if kref.project != self.project:
            raise NotFoundError(f"{name} {str(kref)!r} is not in project {self.project!r}")
        return kref

    def _own_target(self, text: Any, name: str = "kref") -> Kref:
        """``_own`` for a change: a kref naming an artifact (``&a=``) is refused, since a change made through
        it would reach the whole revision, more than the address names."""
        kref = self._own(text, name)
        if kref.artifact is not None:
            raise InvalidKrefError(f"{name} {str(kref)!r} names the artifact {kref.artifact!r}; this call changes "
                                   "a whole revision or item, so give the revision's kref without '&a='")
        return kref

    # -- writing ------------------------------------------------------------------------------------------

    def remember(self, content: str, *, space: str = "notes", title: str | None = None, kind: str = "memory",
                 metadata: Mapping[str, Any] | None = None, tags: Sequence[str] | None = None,
                 item: str | None = None, key: str | None = None, evidence_level: str | None = None,
                 source: str | None = None, stack: bool = False,
                 artifacts: Sequence[Mapping[str, Any]] | None = None) -> str:
        """Store a memory as a new immutable revision and return its kref.

        Args:
            content: the text to remember.
            space: the space (folder) for a new item, e.g. ``"notes"`` or ``"personal/u1"``.
            title: a short title; default the first line of ``content``.
            kind: the item kind for a new item (``memory``, ``fact``, ``decision``, ...).
            metadata: any JSON object; ``event_date`` (ISO 8601) says when the remembered event happened.
            tags: tags to point at the new revision (they move off older revisions of the item).
            item: an item kref: add this revision to that item.
            key: a supersession key: the item in ``space`` holding this key gets the revision (created on
                first use); content identical to its latest revision adds nothing and returns that kref.
            evidence_level: one of ``EVIDENCE_LEVELS``; stored as metadata and as an ``evidence:`` tag.
                ``official`` is the operator's flag; nothing else ever grades a memory official.
            source: where the memory came from; stored as metadata ``source`` (and, canonicalized, in
                ``sources``). A memory with a source and no level is ``single_source``; a belief restated by
                at least two independent sources (and contradicted by none) becomes ``corroborated``.
            stack: revise the matching belief in ``space`` when this restates it (see ``revise``),
                else create a new item. Unrelated memories never stack.
            artifacts: ``[{"name", "location", "metadata"?}]`` attached to the new revision in the same
                transaction (so a memory never exists without them).

        Without ``item``, ``key`` or ``stack`` every call creates a new item: raw capture never merges. A
        revision added to an existing item gets a ``SUPERSEDES`` edge to the item's previous latest
        revision, and memories that depend on the old revision are tagged ``grounding:stale``. A belief
        graded official is never revised by a claim that is not: such a claim becomes a new unverified
        item with a ``CONTRADICTS`` edge to it.

        Returns:
            The revision kref, ``kref://project/space/name.kind?r=N``.

        Raises:
            InvalidArgumentError: an argument is malformed (nothing is written).
            NotFoundError: ``item`` names an item that does not exist.
        """
        content = _checked_text(content, "content", limit=MAX_CONTENT_CHARS)
        space = normalize_space(space)
        title = _title_from_content(content) if title is None else _checked_text(
            title, "title", limit=MAX_TITLE_CHARS)
        kind = _check_pattern(kind, KIND_PATTERN, "kind", InvalidArgumentError)
        checked_metadata = _checked_metadata(metadata)
        checked_tags = _checked_tags(tags)
        if item is not None and key is not None:
            raise InvalidArgumentError("give item= or key=, not both")
        item_kref = None
        if item is not None:
            item_kref = self._own(item, "item")
            if not item_kref.is_bare_item:
                raise InvalidArgumentError(f"item= takes an item kref without ?r=/?t=: {item!r}")
        if key is not None:
            key = _checked_text(key, "key", limit=512)
        if evidence_level is not None:
            checked_tags = tuple(dict.fromkeys(checked_tags + (evidence_tag(evidence_level),)))
            checked_metadata["evidence_level"] = evidence_level
        if source is not None:
            checked_metadata["source"] = _checked_text(source, "source", limit=2000)
        if "event_date" in checked_metadata:
            event_date = checked_metadata["event_date"]
            if not isinstance(event_date, str):
                raise InvalidArgumentError("metadata['event_date'] must be an ISO 8601 string")
            parse_instant(event_date)
        return self._store_belief(content=content, space=space, title=title, kind=kind, metadata=checked_metadata,
                                  tags=checked_tags, item_kref=item_kref, key=key, stack=bool(stack),
                                  artifacts=_checked_artifacts(artifacts))["kref"]

    def _store_belief(self, *, content: str, space: str, title: str, kind: str, metadata: dict[str, Any],
                      tags: tuple[str, ...], item_kref: Kref | None, key: str | None, stack: bool,
                      decide: bool = False, artifacts: tuple[tuple[str, str, dict[str, Any]], ...] = ()) -> dict[str, Any]:
        """Decide how a validated statement enters the graph, then write it: ``{outcome, kref, ...}``.

        The table of decisions (target = the item named by ``item``/``key``, or the best stacking match):

            target is official, claim is not        -> created: new unverified item, CONTRADICTS target
            same text (normalized), no new source   -> vacuous: nothing written, the target's kref
            key given, or item given without decide -> revised: new revision on the target
            restates the target (``same_belief``)   -> revised
            otherwise                               -> created: a new item
        """
        # screened first, so that stacking compares and sources are canonicalized from what will be stored
        content, title = self._screen(content, "content"), self._screen(title, "title")
        metadata = self._screen(metadata, "metadata")
        target: dict[str, Any] | None = None
        if item_kref is not None:
            target = self.get(str(item_kref))
        elif key is not None:
            held = self._backend.item_by_key(self.project, space, key)
            if held is not None and held.latest_revision is not None:
                target = self.get(str(held.kref))
        elif stack:
            target = self._stacking_match(content, space, kind, metadata)
        level = metadata.get("evidence_level")
        source = metadata.get("source")
        if source is not None:
            metadata.setdefault("sources", [canonical_source(source)])
            if level is None:
                level = metadata["evidence_level"] = SINGLE_SOURCE     # first stored occurrence with a source
                tags = tuple(dict.fromkeys(tags + (evidence_tag(SINGLE_SOURCE),)))
        outcome, extra = "created", {}
        if target is not None:
            target_level = parse_evidence(target["metadata"], target["tags"])
            explicit_append = item_kref is not None and not decide     # remember(item=...) always appends
            agrees = normalize_statement(target["content"]) == normalize_statement(content)
            old_sources = set(target["metadata"].get("sources") or [])
            new_sources = set(metadata.get("sources") or []) - old_sources
            if agrees and not explicit_append and (not new_sources or target_level == OFFICIAL):
                return {"outcome": "vacuous", "kref": target["kref"]}      # agreeing with an official belief too
            if target_level == OFFICIAL and level != OFFICIAL:
                return self._store_contradiction(content, space, title, kind, metadata, tags, target, artifacts)
            said, saying = resolved_statement(target["content"], target["metadata"]), resolved_statement(content, metadata)
            restates = key is not None or explicit_append or bool(target.get("_relation_match")) or \
                same_belief(said, saying)
            if not restates and decide and item_kref is not None:
                # an explicit target decides: revised unless the statement is clearly about something else
                extra["reason"] = belief_difference(said, saying) or "the target named by revise()"
                restates = extra["reason"] == "the target named by revise()"
            if restates:
                outcome = "revised"
                item_kref, key = Kref.parse(target["item_kref"]), None
                # Only an agreeing restatement adds its source to the belief's; a changed value starts over,
                # so a correction from a second source is never "corroborated" by the first one.
                sources = sorted(old_sources | set(metadata.get("sources") or [])) if agrees else \
                    sorted(set(metadata.get("sources") or []))
                if sources:
                    metadata["sources"] = sources
                if agrees and len(sources) >= 2 and level in (None, SINGLE_SOURCE, UNVERIFIED) and \
                        not self._backend.edges(Kref.parse(target["kref"]), edge_type=CONTRADICTS):
                    metadata["evidence_level"] = CORROBORATED
                    tags = tuple(t for t in tags if not t.startswith(EVIDENCE_TAG_PREFIX)) + (evidence_tag(CORROBORATED),)
                extra["previous_kref"] = target["kref"]
            elif item_kref is not None or key is not None:
                item_kref, key = None, None      # an unrelated statement never stacks onto the named item
        # the same belief, split earlier by a missed correction: joined into one chain by the same write
        joined = list((target or {}).get("_also_supersedes") or []) if outcome == "revised" else []
        kref = self._write(content=content, space=space, title=title, kind=kind, metadata=metadata, tags=tags,
                           item_kref=item_kref, key=key, artifacts=artifacts,
                           edges=tuple((Kref.parse(older), SUPERSEDES, {"reason": "same belief"}) for older in joined))
        if outcome == "revised":
            extra["grounding_stale"] = self._mark_dependents_stale(extra["previous_kref"])
            for older in joined:
                self._changed(older)
                extra["grounding_stale"] += self._mark_dependents_stale(older)
            if joined:
                extra["joined"] = joined
        return {"outcome": outcome, "kref": kref, **extra}

    def _write(self, *, content: str, space: str, title: str, kind: str, metadata: dict[str, Any],
               tags: tuple[str, ...], item_kref: Kref | None, key: str | None,
               artifacts: tuple[tuple[str, str, dict[str, Any]], ...] = (),
               edges: tuple[tuple[Kref, str, Mapping[str, Any]], ...] = ()) -> str:
        # Raw items are named by id alone: a name drawn from the text would outlive a forgotten revision. A
        # keyed item's name carries a fresh id too, so a key remembered again after its item was forgotten
        # never hands the old address (and its ?r=1) to new content.
        content, title, metadata, tags, key, artifacts, edges = self._screened_revision(
            content, space, title, metadata, tags, key, artifacts, edges)
        if key is not None:
            name = f"{slugify(key)}-{self._ids.new_id()}"
        else:
            name = f"{kind}-{self._ids.new_id()}"
        vector = self._embed_texts([_embedding_text(title, content)])
        if vector is not None:
            self._catch_up_embeddings()
        draft = RevisionDraft(project=self.project, space=space, kind=kind, name=name, title=title,
                              content=content, metadata=metadata, tags=tags, key=key, item=item_kref,
                              vector=vector[0] if vector else None, vector_model=self.embedding_model,
                              artifacts=artifacts, edges=edges)
        record, _created = self._backend.write_revision(draft)
        self._changed(str(record.kref))
        return str(record.kref)

    def _screen(self, value: Any, field: str) -> Any:
        """``value`` under this memory's credential policy (see ``screen_for_store``)."""
        return screen_for_store(value, field=field, policy=self.credentials)

    def _screened_revision(self, content: str, space: str, title: str, metadata: dict[str, Any],
                           tags: tuple[str, ...], key: str | None, artifacts: tuple[tuple[str, str, dict[str, Any]], ...],
                           edges: tuple[tuple[Kref, str, Mapping[str, Any]], ...]) -> tuple[Any, ...]:
        """The parts of a revision about to be written that its callers did not screen already: names and
        addresses (refused when they hold a credential), artifacts and edge metadata. Content, title and
        metadata arrive screened (``_store_belief``, ``set_evidence``): screening them twice would scan every
        write twice."""
        refuse_credentials_in(space, "space")
        for tag in tags:
            refuse_credentials_in(tag, "tag")
        if key is not None:
            refuse_credentials_in(key, "key")
        for name, _, _ in artifacts:
            refuse_credentials_in(name, "artifact name")
        return (content, title, metadata, tags, key,
                tuple((name, self._screen(location, f"artifact {name!r} location"),
                       self._screen(artifact_metadata, f"artifact {name!r} metadata"))
                      for name, location, artifact_metadata in artifacts),
                tuple((target, edge_type, self._screen(edge_metadata, "edge metadata"))
                      for target, edge_type, edge_metadata in edges))

    def _stacking_match(self, content: str, space: str, kind: str,
                        metadata: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
        """The current memory in exactly ``space`` (same kind) that this statement restates or corrects:
        one that ``same_belief`` accepts, else the one belief of the same subject that ``RelationMatcher``
        finds it corrects in other words. When the belief was split in two by a correction missed earlier
        (``RelationMatcher.split``), the others are named in ``_also_supersedes`` to be joined. Statements
        are compared with their first person resolved to their speaker (``resolved_statement``)."""
        def here(hits: list[dict[str, Any]]) -> list[dict[str, Any]]:
            return [hit for hit in hits if hit["space"] == space and hit["kind"] == kind]

        def said(hit: Mapping[str, Any]) -> str:
            return resolved_statement(hit["content"], hit.get("metadata"))
        mine = resolved_statement(content, metadata)
        target = next((hit for hit in here(self.recall(content[:2000], limit=5, space=space or None,
                                                       follow_edges=False))
                       if same_belief(said(hit), mine)), None)
        subject = statement_subject(mine)
        if subject is None:
            return target
        if target is not None and not any(_single_valued(relation) for relation in belief_relations(mine)):
            return target                                 # nothing that could be split: done
        # the subject's current beliefs: recall by the subject's own words (as written in the statement)
        name = " ".join(word for word in re.findall(r"[\w'-]+", _statement_body(mine))
                        if set(tokenize(word)) & set(subject.split()))
        found = here(self.recall(name or subject, limit=25, space=space or None, follow_edges=False))
        if mine != content:          # first person: the speaker's own statements hold no name to find them by
            where = _speaker_filter(metadata)
            relation_words = " ".join(_RELATION_QUERY.get(relation, "") for relation in belief_relations(mine))
            for query in (_statement_body(content), relation_words):
                if tokenize(query):
                    found += here(self.recall(query[:2000], limit=25, space=space or None, follow_edges=False,
                                              where=where))
        beliefs, seen = [], set()
        for hit in found:
            if hit["item_kref"] not in seen and statement_subject(said(hit)) == subject:
                seen.add(hit["item_kref"])
                beliefs.append(hit)
        if not beliefs:
            return target

        def search(term: str) -> list[str]:
            return [hit["content"] for hit in self.recall(term, limit=20, space=space or None, follow_edges=False)]
        histories = [[resolved_statement(revision["content"], revision["metadata"])
                      for revision in self.history(hit["item_kref"]) if not revision["deprecated"]] or [said(hit)]
                     for hit in beliefs]
        matcher = RelationMatcher(search)
        split = matcher.split(mine, histories)
        if target is None:
            index = matcher.corrected(mine, histories)
            if index is not None:
                target = {**beliefs[index], "_relation_match": True}
            elif split:                                   # revise the newest part, supersede the others
                newest = max(split, key=lambda at: (beliefs[at]["created_at"], beliefs[at]["kref"]))
                target = {**beliefs[newest], "_relation_match": True}
        if target is None:
            return None
        others = [beliefs[at]["kref"] for at in split if beliefs[at]["item_kref"] != target["item_kref"]]
        return {**target, "_also_supersedes": others} if others else target

    def _store_contradiction(self, content: str, space: str, title: str, kind: str, metadata: dict[str, Any],
                             tags: tuple[str, ...], official: Mapping[str, Any],
                             artifacts: tuple[tuple[str, str, dict[str, Any]], ...] = ()) -> dict[str, Any]:
        """A claim against an official belief: kept, as a new unverified item that CONTRADICTS it."""
        metadata = {**metadata, "evidence_level": UNVERIFIED, "conflicts_with": official["kref"]}
        tags = tuple(t for t in tags if not t.startswith(EVIDENCE_TAG_PREFIX)) + (evidence_tag(UNVERIFIED),)
        kref = self._write(content=content, space=space, title=title, kind=kind, metadata=metadata, tags=tags,
                           item_kref=None, key=None, artifacts=artifacts,
                           edges=((Kref.parse(official["kref"]), CONTRADICTS, {"basis": "official-pin"}),))
        self._changed(official["kref"])
        return {"outcome": "created", "kref": kref, "contradicts": official["kref"]}

    def _mark_dependents_stale(self, superseded_kref: str) -> list[str]:
        """Tag what depends on a superseded revision ``grounding:stale`` (at most ``GROUNDING_FANOUT``)."""
        marked = []
        for entry in self.analyze_impact(superseded_kref)[:GROUNDING_FANOUT]:
            with contextlib.suppress(NotFoundError):
                self._backend.set_tag(Kref.parse(entry["kref"]), GROUNDING_STALE_TAG)
                marked.append(entry["kref"])
                self._changed(entry["kref"])
        return marked

    def revise(self, target: str, content: str, *, space: str | None = None, **remember_options: Any) -> dict[str, Any]:
        """Offer a new statement of a belief and let the store decide (AGM revision without an LLM).

        Args:
            target: an item kref, or a supersession key (then ``space`` names its space).
            content: the new statement. remember_options: as for ``remember`` (title, metadata, source, ...).

        Returns:
            ``{"outcome": "vacuous" | "revised" | "created", "kref": ...}``: ``vacuous`` when the content is
            equivalent (nothing written), ``revised`` when it restates or updates the target's belief (a new
            revision with SUPERSEDES), ``created`` when it is a different belief (a new item), plus
            ``contradicts`` when the target is official and the claim is not.
        """
        for forbidden in ("item", "key", "stack"):
            if forbidden in remember_options:
                raise InvalidArgumentError(f"revise() takes the target, not {forbidden}=")
        if isinstance(target, str) and target.startswith(KREF_SCHEME):
            item_kref = self._own(target).item_kref()
            held = self.get(str(item_kref))
            return self._remember_decision(content, space=held["space"] if space is None else space,
                                           item_kref=item_kref, key=None, **remember_options)
        if space is None:
            raise InvalidArgumentError("revise(key, ...) needs space= (keys are unique per space)")
        return self._remember_decision(content, space=space, item_kref=None, key=_checked_text(target, "key", limit=512),
                                       **remember_options)

    def _remember_decision(self, content: str, *, space: str, item_kref: Kref | None, key: str | None,
                           title: str | None = None, kind: str = "memory", metadata: Mapping[str, Any] | None = None,
                           tags: Sequence[str] | None = None, evidence_level: str | None = None,
                           source: str | None = None) -> dict[str, Any]:
        content = _checked_text(content, "content", limit=MAX_CONTENT_CHARS)
        space = normalize_space(space)
        title = _title_from_content(content) if title is None else _checked_text(title, "title", limit=MAX_TITLE_CHARS)
        kind = _check_pattern(kind, KIND_PATTERN, "kind", InvalidArgumentError)
        checked_metadata, checked_tags = _checked_metadata(metadata), _checked_tags(tags)
        if evidence_level is not None:
            checked_tags = tuple(dict.fromkeys(checked_tags + (evidence_tag(evidence_level),)))
            checked_metadata["evidence_level"] = evidence_level
        if source is not None:
            checked_metadata["source"] = _checked_text(source, "source", limit=2000)
        return self._store_belief(content=content, space=space, title=title, kind=kind, metadata=checked_metadata,
                                  tags=checked_tags, item_kref=item_kref, key=key, stack=False, decide=True)

    def _embed_texts(self, texts: list[str]) -> list[tuple[float, ...]] | None:
        """Unit vectors for ``texts``, or None when there is no embedder or it failed (kept in
        ``last_embedding_error``; the caller carries on without vectors)."""
        if self._embed is None:
            return None
        try:
            vectors = self._embed(texts)
            if not isinstance(vectors, Sequence) or len(vectors) != len(texts):
                raise ServiceError(f"embedder returned {len(vectors) if isinstance(vectors, Sequence) else vectors!r} "
                                   f"vectors for {len(texts)} texts", transient=False)
            unit = [unit_vector(vector) for vector in vectors]
        except Exception as exc:  # the embedder is the caller's code: whatever it raises must not fail a write
            self.last_embedding_error = exc if isinstance(exc, ServiceError) else ServiceError(
                f"embedder failed: {type(exc).__name__}: {exc}", transient=False)
            self._vectors_pending = True
            return None
        self.last_embedding_error = None
        return unit

    def _catch_up_embeddings(self) -> None:
        """After an embedder outage, add the missing vectors a few at a time once it answers again."""
        if self._vectors_pending and self._embed is not None:
            self._vectors_pending = False
            if self.backfill_embeddings(max_revisions=32) == 32:
                self._vectors_pending = True

    def backfill_embeddings(self, *, batch_size: int = 64, max_revisions: int | None = None) -> int:
        """Embed stored revisions that have no vector yet (e.g. written while the embedder was down).

        Returns:
            How many revisions got a vector. Stops early (without raising) when the embedder fails.
        """
        if self._embed is None:
            raise InvalidArgumentError("this Memory has no embedder")
        done = 0
        while max_revisions is None or done < max_revisions:
            wanted = batch_size if max_revisions is None else min(batch_size, max_revisions - done)
            pending = self._backend.revisions_without_vector(self.project, wanted)
            if not pending:
                break
            vectors = self._embed_texts([_embedding_text(record.title, record.content) for record in pending])
            if vectors is None:
                break
            for record, vector in zip(pending, vectors):
                self._backend.set_vector(record.kref, self.embedding_model, vector)
                self._changed(str(record.kref))
            done += len(pending)
        return done

    def tag(self, kref: str, tag: str) -> dict[str, Any]:
        """Point ``tag`` at the revision ``kref`` selects, moving it off any other revision of the item.

        Every move is recorded, so ``?t=TAG&time=...`` resolves the tag as it stood at any past time.

        Returns:
            The tagged revision (as ``get`` returns it).

        Raises:
            InvalidArgumentError: bad tag, or ``latest`` (the store maintains it).
            NotFoundError: no such revision.
        """
        parsed = self._own_target(kref)
        checked = _checked_tags([tag])[0]
        tagged = self._backend.set_tag(parsed, checked).to_dict()
        self._changed(tagged["kref"])
        return tagged

    def untag(self, kref: str, tag: str) -> bool:
        """Remove ``tag`` from the revision ``kref`` selects; False when that revision did not carry it."""
        parsed = self._own_target(kref)
        checked = _checked_tags([tag])[0]
        removed = self._backend.remove_tag(parsed, checked)
        self._changed(str(parsed))
        return removed

    def link(self, source_kref: str, target_kref: str, edge_type: str,
             metadata: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Create a typed edge between two revisions (an item kref means its latest revision).

        ``edge_type`` is one of ``EDGE_TYPES`` or any name matching ``^[A-Z][A-Z0-9_]{0,49}$``. Linking the
        same pair with the same type again returns the existing edge.

        Returns:
            ``{source_kref, target_kref, edge_type, metadata, created_at}``.
        """
        source, target = self._own_target(source_kref, "source"), self._own_target(target_kref, "target")
        checked_type = validate_edge_type(edge_type)
        edge = self._backend.add_edge(source, target, checked_type,
                                      self._screen(_checked_metadata(metadata), "metadata")).to_dict()
        self._changed(str(source))
        self._changed(str(target))
        return edge

    def deprecate(self, kref: str, deprecated: bool = True) -> None:
        """Soft-retire an item (bare item kref) or one revision; ``deprecated=False`` restores it.

        Deprecated memories stay readable by ``get`` and ``history`` but ``recall`` skips them.
        """
        if not isinstance(deprecated, bool):
            raise InvalidArgumentError("deprecated must be True or False")
        self._backend.set_deprecated(self._own_target(kref), deprecated)
        self._changed(kref)

    def forget(self, kref: str) -> dict[str, Any]:
        """Erase an item (bare item kref) or one revision, for good.

        The revisions go with their edges, tags, artifacts and index entries; their bytes are overwritten
        in the database and the WAL is checkpointed and truncated before this returns (``scrubbed`` is
        False if another process's open read kept the WAL from being truncated; it is then truncated at the
        next checkpoint). Revision numbers are never reused.

        Returns:
            ``{kref, items, revisions, edges, scrubbed}``.

        Raises:
            InvalidKrefError: malformed, or it names an artifact (``&a=``): forgetting never reaches more than
            the address names, so give the revision or item. NotFoundError: nothing there.
        """
        forgotten = self._backend.forget(self._own_target(kref))
        self._changed(kref)
        return forgotten

    def add_artifact(self, kref: str, name: str, location: str,
                     metadata: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Attach a named pointer (file path, URL) to a revision; address it as ``...?r=N&a=NAME``."""
        checked_name = refuse_credentials_in(_check_pattern(name, ARTIFACT_PATTERN, "artifact name",
                                                            InvalidArgumentError), "artifact name")
        checked_location = self._screen(_checked_text(location, "location", limit=4096), "location")
        return self._backend.add_artifact(self._own_target(kref), checked_name, checked_location,
                                          self._screen(_checked_metadata(metadata), "metadata")).to_dict()

    def set_evidence(self, kref: str, level: str, *, reason: str = "", source: str | None = None) -> str:
        """Grade (or regrade) a belief explicitly: a new revision with the same content and the new
        ``evidence_level`` (both carriers), so the history shows what was believed, when and why.

        This is the operator's call: the only way to demote, and with ``level="official"`` the only way
        besides ``remember(evidence_level="official")`` to grade a memory official.

        Returns:
            The new revision's kref.
        """
        evidence_tag(level)
        current = self.get(kref)
        newest = self.get(current["item_kref"])
        if newest["kref"] != current["kref"]:
            raise InvalidArgumentError(f"set_evidence regrades a belief's current revision; {current['kref']} is "
                                       f"superseded by {newest['kref']}")
        metadata = {**current["metadata"], "evidence_level": level}
        if reason:
            metadata["evidence_reason"] = self._screen(_checked_text(reason, "reason", limit=2000), "reason")
        if source is not None:
            source = metadata["source"] = self._screen(_checked_text(source, "source", limit=2000), "source")
            metadata["sources"] = sorted(set(metadata.get("sources") or []) | {canonical_source(source)})
        tags = tuple(t for t in current["tags"] if t not in (LATEST_TAG,) and not t.startswith(EVIDENCE_TAG_PREFIX))
        metadata = self._screen(metadata, "metadata")     # a revision stored before screening is cleaned here
        return self._write(content=self._screen(current["content"], "content"), space=current["space"],
                           title=self._screen(current["title"], "title"),
                           kind=current["kind"], metadata=metadata, tags=tags + (evidence_tag(level),),
                           item_kref=Kref.parse(current["item_kref"]), key=None)

    def update_metadata(self, kref: str, updates: Mapping[str, Any]) -> dict[str, Any]:
        """Merge ``updates`` into one revision's metadata (``None`` removes a key) and return the revision.

        Enrichment, not revision: content, number and tags stay. The evidence carriers are refused here
        (``evidence_level``, ``source``, ``sources``, ``confidence``: grades move only by ``set_evidence``
        and the promotion rules), and so is ``event_date`` unless it is ISO 8601.

        Raises:
            InvalidArgumentError: bad kref or updates, or an evidence key; NotFoundError: no such revision.
        """
        parsed = self._own_target(kref, "kref")
        if not isinstance(updates, Mapping) or not all(isinstance(key, str) for key in updates):
            raise InvalidArgumentError("updates must be a JSON object with string keys")
        checked = _checked_metadata({key: value for key, value in updates.items() if value is not None})
        forbidden = sorted(set(updates) & EVIDENCE_METADATA_KEYS)
        if forbidden:
            raise InvalidArgumentError(f"update_metadata never changes evidence carriers: {forbidden}")
        if isinstance(checked.get("event_date"), str):
            parse_instant(checked["event_date"])
        removed = [key for key, value in updates.items() if value is None]
        checked = self._screen(checked, "metadata")
        merged = {**checked, **dict.fromkeys(removed)}
        target = self._backend.resolve(parsed)
        _checked_metadata({**{key: value for key, value in target.metadata.items() if key not in removed},
                           **checked})                   # the result must respect the metadata cap too
        record = self._backend.update_metadata(target.kref, merged)
        self._changed(str(record.kref))
        return record.to_dict()

    def set_space_attribute(self, space: str, name: str, value: str | None) -> str | None:
        """Set (or with ``None`` remove) a named string attribute of a space, such as the ``space_class``
        pin of the space profiler; returns the kref of the revision that holds it (None when removed)."""
        return set_space_attribute(self, space, name, value)

    def space_attribute(self, space: str, name: str) -> str | None:
        """The value of a space attribute, or None when it is not set."""
        return space_attribute(self, space, name)

    def space_attributes(self, space: str) -> dict[str, str]:
        """Every attribute set on a space, by name."""
        return space_attributes(self, space)

    def contradictions(self) -> list[dict[str, Any]]:
        """Every CONTRADICTS pair in this project, for review (nothing is ever deleted here).

        Returns:
            ``[{source_kref, target_kref, edge_type, metadata, created_at, source, target}]`` where ``source``
            and ``target`` are the two revisions as ``get`` returns them.
        """
        pairs, seen = [], set()
        for item in self.items(include_deprecated=True):
            for edge in self.edges(item["item_kref"], edge_type=CONTRADICTS):
                key = (edge["source_kref"], edge["target_kref"])
                if key in seen:
                    continue
                seen.add(key)
                with contextlib.suppress(NotFoundError):
                    pairs.append({**edge, "source": self.get(edge["source_kref"]), "target": self.get(edge["target_kref"])})
        return pairs

    def analyze_impact(self, kref: str, *, max_depth: int = 8) -> list[dict[str, Any]]:
        """Everything that transitively depends on a revision (incoming DEPENDS_ON and DERIVED_FROM edges).

        Returns:
            Breadth first: ``[{kref, depth, edge_type, via}]``.
        """
        start = str(Kref.parse(self.get(kref)["kref"]))
        found, frontier = {}, [start]
        for depth in range(1, max_depth + 1):
            following = []
            for node in frontier:
                for edge in self.edges(node, direction="incoming"):
                    if edge["edge_type"] in (DEPENDS_ON, DERIVED_FROM) and edge["source_kref"] not in found \
                            and edge["source_kref"] != start:
                        found[edge["source_kref"]] = {"kref": edge["source_kref"], "depth": depth,
                                                      "edge_type": edge["edge_type"], "via": node}
                        following.append(edge["source_kref"])
            frontier = following
            if not frontier:
                break
        return list(found.values())

    # -- reading ------------------------------------------------------------------------------------------

    def get(self, kref: str) -> dict[str, Any]:
        """Read one revision by any kref form.

        An item kref gives the latest revision; ``?r=N`` that number; ``?t=TAG`` where the tag points now;
        ``?t=TAG&time=T`` where it pointed at ``T``; ``&a=NAME`` adds that artifact as ``artifact``.

        Returns:
            ``{kref, item_kref, revision, space, kind, title, content, metadata, tags, created_at,
            deprecated}`` (+ ``artifact``).

        Raises:
            InvalidKrefError: malformed kref. NotFoundError: nothing there.
        """
        parsed = self._own(kref)
        record = self._backend.resolve(dataclasses.replace(parsed, artifact=None))
        result = record.to_dict()
        if parsed.artifact is not None:
            matches = [a for a in self._backend.artifacts(record.kref) if a.name == parsed.artifact]
            if not matches:
                raise NotFoundError(f"no artifact {parsed.artifact!r} on {record.kref}")
            result["artifact"] = matches[0].to_dict()
        return result

    def history(self, item_kref: str) -> list[dict[str, Any]]:
        """Every revision of an item, oldest first (the same dicts ``get`` returns)."""
        return [record.to_dict() for record in self._backend.revisions(self._own(item_kref).item_kref())]

    def edges(self, kref: str, *, direction: str = "both", edge_type: str | None = None) -> list[dict[str, Any]]:
        """Edges of a revision (or, for a bare item kref, of all its revisions), oldest first.

        Args:
            direction: ``"outgoing"``, ``"incoming"`` or ``"both"``.
            edge_type: only edges of this type.
        """
        if direction not in EDGE_DIRECTIONS:
            raise InvalidArgumentError(f"direction must be one of {EDGE_DIRECTIONS}, not {direction!r}")
        checked_type = None if edge_type is None else validate_edge_type(edge_type)
        return [edge.to_dict() for edge in self._backend.edges(self._own(kref), direction=direction,
                                                               edge_type=checked_type)]

    def artifacts(self, kref: str) -> list[dict[str, Any]]:
        """The artifacts of the revision ``kref`` selects."""
        return [artifact.to_dict() for artifact in self._backend.artifacts(self._own(kref))]

    def tag_history(self, item_kref: str) -> list[dict[str, Any]]:
        """Where each tag of an item pointed over time, oldest move first.

        Returns:
            ``[{tag, revision, revision_kref, at}]``; ``revision`` and ``revision_kref`` are None for a move
            that took the tag off (or whose revision was forgotten).

        Raises:
            InvalidKrefError: malformed. NotFoundError: no such item.
        """
        item = self._own(item_kref).item_kref()
        return [{"tag": tag, "revision": number, "revision_kref": None if number is None else str(item.with_revision(number)),
                 "at": at} for tag, number, at in self._backend.tag_history(item)]

    def items(self, *, space: str | None = None, kind: str | None = None,
              include_deprecated: bool = False) -> list[dict[str, Any]]:
        """Items of this project, optionally within ``space`` (and its sub-spaces) or of one ``kind``."""
        checked_space = None if space is None else normalize_space(space)
        checked_kind = None if kind is None else _check_pattern(kind, KIND_PATTERN, "kind", InvalidArgumentError)
        return [record.to_dict() for record in self._backend.items(
            self.project, space=checked_space, kind=checked_kind, include_deprecated=include_deprecated)]

    def item_page(self, *, space: str | None = None, kind: str | None = None, include_deprecated: bool = False,
                  exclude_kinds: Sequence[str] = (), limit: int = 50, offset: int = 0) -> dict[str, Any]:
        """One page of this project's items, newest first, read a page at a time from the store.

        Args:
            space, kind, include_deprecated: as for ``items``. exclude_kinds: kinds to leave out.
            limit: items on the page (1..1000). offset: how many newer items come before it.

        Returns:
            ``{items: [...as items() gives them], total, offset, limit}``.
        """
        checked_space = None if space is None else normalize_space(space)
        checked_kind = None if kind is None else _check_pattern(kind, KIND_PATTERN, "kind", InvalidArgumentError)
        for name, value, low, high in (("limit", limit, 1, 1000), ("offset", offset, 0, 10 ** 12)):
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise InvalidArgumentError(f"{name} must be a whole number from {low} to {high}, not {value!r}")
        records, total = self._backend.item_page(
            self.project, space=checked_space, kind=checked_kind, include_deprecated=include_deprecated,
            exclude_kinds=frozenset(exclude_kinds), limit=limit, offset=offset)
        return {"items": [record.to_dict() for record in records], "total": total, "offset": offset, "limit": limit}

    def recall(self, query: str, *, limit: int = 5, space: str | None = None,
               space_paths: Sequence[str] | None = None, memory_types: Sequence[str] | None = None,
               where: Mapping[str, Any] | None = None, prefer: Any = None, prefer_max_boost: float = 0.5,
               min_score: float | None = None, as_of: str | float | _dt.datetime | None = None,
               include_superseded: bool = False, query_time: str | float | _dt.datetime | None = None,
               evidence_rank: EvidenceRankConfig | None = None, recency_half_life_days: float | None = None,
               mmr_lambda: float | None = None, siblings: bool = False,
               semantic_weight: float = 0.2, follow_edges: bool = True,
               influence_only: bool = False) -> list[dict[str, Any]]:
        """Find the memories that best answer ``query``.

        Words are matched with BM25 (our tokenizer and Porter stemmer) over an in-memory index, then the
        signals a memory system has and a bag of words does not: people the query names (speaker, author,
        entities), thread neighbours (a message is indexed with a share of the words around it), times
        the query names (``event_date``), and typed edges from the top hits. Scores are normalized so the
        best is 1.0, then evidence grades add their weight (``EvidenceRankConfig``).

        Args:
            query: free text. limit: how many results (1..1000).
            space, space_paths: only these spaces and the spaces under them.
            memory_types: only memories whose metadata ``memory_type`` (or ``type``, or item kind) is one
                of these.
            where: hard metadata filter, ``{field: value | [values] | {"$gte": ..., "$in": [...], ...}}``
                (operators ``$eq $ne $gt $gte $lt $lte $in $nin $contains $exists``).
            prefer: soft boosts, ``[{"where": {...}, "trust": 0..1}]``: each matching cue multiplies the
                score by ``1 + trust``, capped at ``1 + prefer_max_boost``.
            min_score: drop results scoring below this (after evidence weighting).
            as_of: recall what was current at that instant (ISO 8601, datetime or epoch seconds).
            include_superseded: return older and superseded revisions too (history), not one per item.
            query_time: "now" for relative times in the query ("last week"); default ``as_of``, else the
                newest ``event_date`` in the searched spaces (a replayed conversation reads its own time),
                else the clock.
            evidence_rank: evidence weights (default ``EvidenceRankConfig()``; ``enabled=False`` turns off).
            recency_half_life_days: if given, newer memories get up to +0.12, halving per half-life.
            mmr_lambda: if given, diversify the results (maximal marginal relevance, 1.0 = off).
            siblings: attach each item's other revisions that bear on the query as ``sibling_revisions``.
            semantic_weight: with an embedder, the share of the semantic channel in the fused score (0..1).
            follow_edges: let the top hits pull in their typed-edge neighbours (``GraphAugmentedRecall``
                turns this off and walks the graph itself).
            influence_only: only memories that earned trust (official, corroborated, or backed by two
                distinct canonical sources), so one injected memory cannot drive an action.

        Returns:
            Best first: ``{kref, item_kref, revision, title, content, score, base_score, metadata, tags,
            created_at, space, kind, deprecated, signals}`` (+ ``evidence_level``, ``graph_augmented``,
            ``sibling_revisions`` when they apply).
        """
        query = _checked_text(query, "query", limit=MAX_CONTENT_CHARS)
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_RECALL_LIMIT:
            raise InvalidArgumentError(f"limit must be an integer from 1 to {MAX_RECALL_LIMIT}, not {limit!r}")
        spaces = [] if space is None else [normalize_space(space)]
        if space_paths is not None:
            if isinstance(space_paths, str):
                raise InvalidArgumentError("space_paths must be a list of space paths")
            spaces.extend(normalize_space(path) for path in space_paths)
        types = None
        if memory_types is not None:
            if isinstance(memory_types, str) or not all(isinstance(value, str) for value in memory_types):
                raise InvalidArgumentError("memory_types must be a list of strings")
            types = set(memory_types)
        checked_where = None if where is None else validate_where(where)
        cues = [] if prefer is None else validate_prefer(prefer)
        for name, value in (("prefer_max_boost", prefer_max_boost), ("min_score", min_score),
                            ("recency_half_life_days", recency_half_life_days), ("mmr_lambda", mmr_lambda)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                      or not math.isfinite(value) or value < 0):
                raise InvalidArgumentError(f"{name} must be a non-negative number, not {value!r}")
        moment = None if as_of is None else parse_instant(as_of)
        anchor = parse_instant(query_time) if query_time is not None else (moment or self._clock.now())
        if isinstance(semantic_weight, bool) or not isinstance(semantic_weight, (int, float)) \
                or not 0.0 <= semantic_weight <= 1.0:
            raise InvalidArgumentError(f"semantic_weight must be a number from 0 to 1, not {semantic_weight!r}")
        terms = tuple(tokenize(query))
        if terms and not include_superseded and _QUESTION.match(query) and _FIRST_PERSON_QUESTION.search(query):
            # a user's question about themself also finds their corrections in other words ("Where do I live?"
            # -> "Actually I moved to Munich"), so the current value is there to rank first; questions about
            # others get the lighter expansion of query_expansions below
            terms += tuple(dict.fromkeys(term for relation in sorted(belief_relations(query))
                                         for term in tokenize(_RELATION_QUERY.get(relation, "")) if term not in terms))
        query_vector = None
        if self._embed is not None and semantic_weight > 0:
            vectors = self._embed_texts([query])
            query_vector = vectors[0] if vectors else None
            if query_vector is not None:
                self._catch_up_embeddings()
        if not terms and query_vector is None:
            return []
        expansions = query_expansions(query)
        window = parse_time_window(query, anchor)
        relative = None
        if query_time is None and moment is None and window != parse_time_window(query):
            relative = functools.partial(parse_time_window, query)
        pool = limit + 5            # room for evidence grades to reorder; signals double it when they apply
        filtered = checked_where is not None or types is not None or mmr_lambda is not None or min_score is not None \
            or influence_only
        while True:
            hits = self._backend.search(RecallQuery(
                project=self.project, terms=terms, pool=pool, spaces=tuple(spaces) if spaces else None,
                as_of=None if moment is None else moment.timestamp(), include_superseded=include_superseded,
                time_window=window, keep=None if filtered else pool, query_vector=query_vector,
                semantic_weight=float(semantic_weight), follow_edges=bool(follow_edges), relative_time=relative,
                expansions=expansions))
            results = []
            for hit in hits:
                result = {**hit.record.to_dict(copy_metadata=False), "score": hit.score, "signals": hit.signals}
                if hit.signals.get("graph_augmented"):
                    result["graph_augmented"], result["hop"] = True, hit.signals.get("hop", 1)
                metadata = result["metadata"]
                if checked_where is not None and not matches_where(metadata, checked_where):
                    continue
                if types is not None and (metadata.get("memory_type") or metadata.get("type") or result["kind"]) not in types:
                    continue
                if influence_only and not _earned_trust(result):
                    continue
                if GROUNDING_STALE_TAG in result["tags"]:
                    result["grounding_stale"] = True
                contested = hit.signals.get("contested_by")
                if contested:
                    result["contested_by"] = contested
                results.append(result)
            if not filtered or len(results) >= limit or len(hits) < pool or pool >= 4 * MAX_RECALL_LIMIT:
                break
            pool *= 4
        if not results:
            return []
        top = max(result["score"] for result in results) or 1.0
        for result in results:
            boost = 1.0
            for cue_where, trust in cues:
                if matches_where(result["metadata"], cue_where):
                    boost *= 1.0 + trust
            result["score"] = round(result["score"] / top * min(boost, 1.0 + prefer_max_boost), 6)
            result["base_score"] = result["score"]
        results.sort(key=lambda result: -result["score"])
        apply_evidence_weights(results, evidence_rank or self.evidence_rank)
        if recency_half_life_days:
            apply_recency(results, anchor, recency_half_life_days)
        if not include_superseded:
            results = newest_first_within_relation(results)
        if min_score is not None:
            results = [result for result in results if result["score"] >= min_score]
        results = apply_mmr(results, limit, mmr_lambda) if mmr_lambda is not None else results[:limit]
        if siblings:
            for result in results:
                others = [r.to_dict() for r in self._backend.revisions(Kref.parse(result["item_kref"]))
                          if str(r.kref) != result["kref"]]
                if others:   # cosine mode when this memory has an embedder, keyword mode otherwise
                    result["sibling_revisions"] = select_siblings(
                        query, others, embed=self._embed_texts if self._embed is not None else None)
        return results

    def engage(self, query: str, *, session_id: str | None = None, agent: str | None = None, limit: int = 5,
               char_budget: int = CONTEXT_CHAR_BUDGET, **recall_options: Any) -> dict[str, Any]:
        """Recall and build the prompt context in one call.

        Args:
            query, limit, recall_options: as for ``recall``. char_budget: the context's length cap.
            session_id: the session (or pipeline run) this call is a step of. With ``prefetch`` on, the
                move from the session's previous step is learned, the next steps are predicted and their
                context prepared in the background; a prepared result is served only when it is exactly
                what this call would recall now.
            agent: who is asking (an agent or user id): its own transitions are blended into predictions.

        Returns:
            ``{context, results, source_krefs, count, approx_tokens, context_was_prefetched, state,
            predictions}``: ``approx_tokens`` = len/4; ``state`` = where the top result lives (at the
            prefetch grain; None without a session or results); ``predictions`` = ``[{state, p}]`` for the
            next step (empty without prefetching).
        """
        if self._prefetch is not None and session_id is not None:
            return self._prefetch.engage(query, session_id=session_id, agent=agent, limit=limit,
                                         char_budget=char_budget, **recall_options)
        result = self._engage_fresh(query, limit=limit, char_budget=char_budget, **recall_options)
        return {**result, "context_was_prefetched": False, "state": None, "predictions": []}

    def _engage_fresh(self, query: str, *, limit: int = 5, char_budget: int = CONTEXT_CHAR_BUDGET,
                      **recall_options: Any) -> dict[str, Any]:
        """Recall and render, nothing cached: ``{context, results, source_krefs, count, approx_tokens}``."""
        results = self.recall(query, limit=limit, **recall_options)
        context = build_recalled_context(results, query, char_budget=char_budget)
        return {"context": context, "results": results, "source_krefs": [r["kref"] for r in results],
                "count": len(results), "approx_tokens": len(context) // 4}

    def end_session(self, session_id: str) -> dict[str, Any]:
        """Close a session's trace of engage steps and save what prefetching learned from it.

        Returns:
            ``{session_id, engages, transitions, hits, saved}`` (zeros without ``prefetch``).
        """
        if self._prefetch is None:
            return {"session_id": _checked_text(session_id, "session_id", limit=512), "engages": 0,
                    "transitions": 0, "hits": 0, "saved": False}
        return self._prefetch.end_session(session_id)

    def prefetch_stats(self) -> dict[str, Any]:
        """Anticipatory-recall counters (``AnticipatoryRecall.stats``): hits, misses, hit_rate,
        wasted_prefetches, tokens_spent, ...; ``{"enabled": False}`` without ``prefetch``."""
        if self._prefetch is None:
            return {"enabled": False}
        return {"enabled": True, **self._prefetch.stats()}

    def stats(self) -> dict[str, Any]:
        """Counts for this project: ``items``, ``revisions``, ``edges``, ``spaces``, ``tags``, ..."""
        return self._backend.stats(self.project)

    # -- export and import --------------------------------------------------------------------------------

    def export_jsonl(self, stream: IO[str], *, progress: Callable[[int], None] | None = None) -> int:
        """Write the whole store as JSON lines (one canonical record a line); return the line count."""
        count = 0
        for record in self._backend.export_records():
            stream.write(canonical_json(record) + "\n")
            count += 1
            if progress is not None:
                progress(count)
        return count

    def import_jsonl(self, lines: Iterable[str], *, progress: Callable[[int], None] | None = None) -> dict[str, int]:
        """Load an ``export_jsonl`` stream atomically; records already present are skipped.

        Returns:
            ``{records, added, skipped}``.

        Raises:
            ImportFormatError: a line is not a valid record (nothing is written).
            ConflictError: a record contradicts what the store holds (nothing is written).
            CredentialDetectedError: a line holds a credential (nothing is written): an import restores an
                archive exactly or not at all, so it refuses rather than redacts.
        """
        def parsed() -> Iterator[tuple[int, dict[str, Any]]]:
            for line_number, line in enumerate(lines, 1):
                if isinstance(line, bytes):
                    try:
                        line = line.decode("utf-8")
                    except UnicodeDecodeError as exc:
                        raise ImportFormatError(f"line {line_number}: not UTF-8 ({exc.reason})") from None
                if not isinstance(line, str):
                    raise ImportFormatError(f"line {line_number}: a line must be text, not {type(line).__name__}")
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise ImportFormatError(f"line {line_number}: not JSON ({exc.msg})") from exc
                except RecursionError:
                    raise ImportFormatError(f"line {line_number}: nested too deeply to be a record") from None
                kinds = _credential_kinds(line)
                if kinds:      # an archive is restored as it is or not at all: never silently edited
                    raise CredentialDetectedError(f"line {line_number} holds {' and '.join(kinds)}; nothing was "
                                                  "imported (remove it from the file first)", kinds)
                yield line_number, record
        try:
            return self._backend.import_records(parsed(), progress)
        finally:
            self._changed(None)

    def mermaid(self, item_kref: str) -> str:
        """A Mermaid flowchart of an item's revision chain, with its tags and edges."""
        item = self._own(item_kref).item_kref()
        revisions = self._backend.revisions(item)
        return render_mermaid(item, revisions, self._backend.edges(item))


class _DefaultMemories:
    """The memories opened for calls that name none, one per configuration, each opened on first use and
    closed at interpreter exit (never at import). A changed ``KUMIHO_MEMORY_PATH`` opens another."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: dict[tuple[Any, ...], Memory] = {}

    def get(self, environ: Mapping[str, str] | None = None, project: str | None = None) -> Memory:
        config = MemoryConfig.from_env(environ)
        if project is not None:
            config = dataclasses.replace(config, project=_check_pattern(project, SEGMENT_PATTERN, "project",
                                                                          InvalidArgumentError))
        key = (config.backend, config.path, config.project, config.kumiho_endpoint, config.credentials)
        with self._lock:
            memory = self._open.get(key)
            if memory is None or memory.closed:
                if not self._open:
                    import atexit
                    atexit.register(self.close)
                memory = self._open[key] = Memory.from_config(config)
            return memory

    def close(self) -> None:
        with self._lock:
            opened, self._open = list(self._open.values()), {}
        for memory in opened:
            with contextlib.suppress(KumihoMemoryError):
                memory.close()


_DEFAULTS = _DefaultMemories()


def default_memory(*, project: str | None = None, environ: Mapping[str, str] | None = None) -> Memory:
    """The memory used by calls that name none (``DreamState()``, ``SpaceProfiler()``, ``ingest_skill(path)``,
    ``UniversalMemoryManager()``, the tool table), resolved as the CLI resolves its store.

    ``KUMIHO_MEMORY_BACKEND`` (``sqlite`` or ``kumiho``), ``KUMIHO_MEMORY_PATH`` (else the per-user store,
    ``default_store_path()``) and ``KUMIHO_MEMORY_PROJECT`` decide it, read when this is called. It is opened
    on first use, shared by every caller with the same settings, and closed at exit. Passing ``memory=``
    explicitly is still the recommended way; it always wins.

    Args:
        project: open this project instead of ``KUMIHO_MEMORY_PROJECT``'s.
        environ: the variables to read (default ``os.environ``).

    Raises:
        StoreError: the store cannot be opened. InvalidArgumentError: a variable is malformed.
    """
    return _DEFAULTS.get(environ, project)


def memory_or_default(memory: Memory | None, project: str | None = None) -> Memory:
    """``memory`` itself (checked against ``project`` when both are given), else ``default_memory(project=)``.

    Raises:
        InvalidArgumentError: ``memory`` is not a ``Memory``, or belongs to another project than ``project``.
    """
    if memory is None:
        return default_memory(project=project)
    if not isinstance(memory, Memory):
        raise InvalidArgumentError(f"memory must be a Memory, not {type(memory).__name__}")
    if project is not None and project != memory.project:
        raise InvalidArgumentError(f"project {project!r} is not the memory's project {memory.project!r}")
    return memory


# A consolidation's lease on its session lives this long unless renewed; the consolidation renews it every
# third of that while it runs (a lease that ran out is checked before anything is consumed). So a lease its
# attempt could not release (the buffer went away mid-way) is gone within this bound; one left by a killed
# process on this machine is taken over at once, and the attempt's own manager may retry at once.
CONSOLIDATION_LEASE_SECONDS = 60
CONSOLIDATION_LEASE_WAIT = 30.0      # how long a consolidation waits for another's (then: a transient error)


def _process_place() -> str:
    """Where process ids mean something: host name, and on Linux the pid namespace (containers)."""
    import socket
    try:
        namespace = str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        namespace = "-"
    return f"{socket.gethostname()}/{namespace}".replace(":", "_")


def _lease_holder_died(holder: str) -> bool:
    """Whether a lease ``place:pid:token`` belongs to a process in this pid namespace that no longer runs
    (POSIX only: elsewhere a lease is only ever freed by its owner or its expiry)."""
    place, _, rest = holder.partition(":")
    pid_text = rest.partition(":")[0]
    if os.name != "posix" or place.endswith("/-") or place != _process_place() or not pid_text.isdigit() \
            or int(pid_text) == os.getpid():
        return False
    try:
        os.kill(int(pid_text), 0)
    except ProcessLookupError:
        return True
    except OSError:                                   # alive, someone else's
        return False
    return False


class UniversalMemoryManager:
    """The seed's core loop, async: ingest -> working memory -> consolidate -> recall.

    Names, arguments and results follow kumiho-memory. Blocking store work runs in a thread.

    Args:
        project: used when ``memory`` is not given.
        memory: the ``Memory`` to consolidate into and recall from; default ``default_memory(project=)``, the
            durable store the CLI uses (``KUMIHO_MEMORY_PATH``, else the per-user file).
        memory_store, memory_retrieve: upstream's seam instead of ``memory``: ``memory_store(**payload)``
            stores a consolidation (upstream's payload: ``project, memory_type, title, summary, user_text,
            assistant_text, artifact_location, artifact_name, bundle_name, tags, metadata, space_path,
            stack_revisions``) and returns its result; ``memory_retrieve(project=, query=, limit=,
            space_paths=, memory_types=)`` returns ``{revision_krefs, item_krefs, scores,
            resolved_metadata}``. With either, a private in-memory ``Memory`` serves what the seam does not.
        consolidation_threshold: ``handle_user_message`` flags ``should_consolidate`` at this many messages.
        redis_url: use a ``RedisMemoryBuffer`` at this URL for working memory.
        redis_buffer: a ready ``WorkingMemoryBuffer`` (wins over ``redis_url``). Default: Redis when
            ``KUMIHO_REDIS_URL`` (or ``REDIS_URL``) is set, else an ``InProcessBuffer`` kept in the memory's
            store file when it has one.
        artifact_root: a folder for raw transcripts (``{root}/{project}/{space}/{session}.md``) and copied
            attachments (``{root}/{project}/attachments/{context}/``); default none (transcripts stay in the
            store, redacted, as the ``transcript`` artifact).
        evidence_rank: ``EvidenceRankConfig`` for ``recall_memories`` (default the memory's).
        recall_mode: ``"summarized"`` (default) or ``"full"``, upstream's default for ``build_recalled_context``
            (both render title and content here).
        recall_candidate_multiplier: ``memory_retrieve`` is asked for ``ceil(limit * multiplier)`` results.
        auto_assess_min_messages, auto_assess_window, auto_assess_timeout: when the background assessor runs
            (new messages since the last run), how many recent messages it sees, and how long it may take.
        failure_ledger, entity_promotion, sibling_strong_score, sibling_char_budget,
            sibling_similarity_threshold, sibling_top_k, sibling_llm_cap, sibling_score_fields,
            embedding_adapter, rerank, reranker: upstream's cloud-side knobs, accepted so upstream code runs;
            they change nothing here (siblings and reranking are built into ``Memory.recall``; give an
            embedder to ``Memory(embedder=...)``).
        llm_adapter: an LLM adapter for summaries, implications, graph-augmented recall and edge discovery.
        summarizer: an object with async ``summarize_conversation`` / ``generate_implications``; default a
            ``MemorySummarizer`` over ``llm_adapter``, else the offline ``ExtractiveSummarizer``.
        pii_redactor: a ``PIIRedactor`` (default one).
        retry_queue: where consolidations go when the store fails (default: none, the error is raised and
            the buffer kept).
        auto_assess_fn: ``async (messages, recalled) -> MemoryAssessResult``, run after assistant responses.
        tenant_hint: tenant prefix for the Redis buffer.
        store_max_retries: attempts to store a consolidation before queueing it.
        graph_augmentation: a ``GraphAugmentationConfig`` for ``recall_memories(graph_augmented=True)``.
        environ: where ``KUMIHO_SESSION_ID`` is read (default ``os.environ``, read at call time).
        consolidation_lease_seconds: how long a consolidation's claim on its session lives unless renewed
            (``CONSOLIDATION_LEASE_SECONDS``); one left behind by a lost connection is gone after this.
    """

    def __init__(self, *, project: str = DEFAULT_PROJECT, memory: Memory | None = None,
                 consolidation_threshold: int = 50, redis_url: str | None = None,
                 redis_buffer: WorkingMemoryBuffer | None = None, llm_adapter: Any = None, summarizer: Any = None,
                 pii_redactor: PIIRedactor | None = None, retry_queue: RetryQueue | None = None,
                 auto_assess_fn: Callable[..., Any] | None = None, tenant_hint: str | None = None,
                 store_max_retries: int = 3, graph_augmentation: GraphAugmentationConfig | bool | None = None,
                 environ: Mapping[str, str] | None = None, clock: Clock | None = None,
                 memory_store: Callable[..., Any] | None = None, memory_retrieve: Callable[..., Any] | None = None,
                 artifact_root: str | os.PathLike[str] | None = None,
                 evidence_rank: EvidenceRankConfig | None = None, recall_mode: str = "summarized",
                 recall_candidate_multiplier: float = 1.0, auto_assess_min_messages: int = 3,
                 auto_assess_window: int = 6, auto_assess_timeout: float = 120.0, failure_ledger: Any = None,
                 entity_promotion: bool = True, sibling_strong_score: float = 0.40, sibling_char_budget: int = 20000,
                 sibling_similarity_threshold: float = 0.0, sibling_top_k: int = 0, sibling_llm_cap: int = 16,
                 sibling_score_fields: Any = None, embedding_adapter: Any = None, rerank: Any = None,
                 reranker: Any = None, consolidation_lease_seconds: int = CONSOLIDATION_LEASE_SECONDS) -> None:
        if recall_mode not in ("summarized", "full"):
            raise InvalidArgumentError(f"recall_mode must be 'summarized' or 'full', not {recall_mode!r}")
        for name, value in (("memory_store", memory_store), ("memory_retrieve", memory_retrieve)):
            if value is not None and not callable(value):
                raise InvalidArgumentError(f"{name} must be callable")
        self.memory_store, self.memory_retrieve = memory_store, memory_retrieve
        seam = memory_store is not None or memory_retrieve is not None
        if memory is not None:
            self.memory, self._owns_memory = memory, False
        elif seam:                                    # the seam stores and retrieves; RAM serves the rest
            self.memory, self._owns_memory = Memory(project=project), True
        else:                                         # the shared durable default: never closed by us
            self.memory, self._owns_memory = default_memory(project=project), False
        self.project = self.memory.project
        self.clock = clock or self.memory.clock
        self.consolidation_threshold = consolidation_threshold
        if isinstance(consolidation_lease_seconds, bool) or not isinstance(consolidation_lease_seconds, int) \
                or consolidation_lease_seconds < 3:
            raise InvalidArgumentError("consolidation_lease_seconds must be a whole number of seconds >= 3")
        self.consolidation_lease_seconds = consolidation_lease_seconds
        self.artifact_root = None if artifact_root is None else os.fspath(artifact_root)
        self.evidence_rank = evidence_rank
        self.recall_mode = recall_mode
        self.recall_candidate_multiplier = float(recall_candidate_multiplier)
        self.upstream_options = {"failure_ledger": failure_ledger, "entity_promotion": entity_promotion,
                                 "sibling_strong_score": sibling_strong_score, "sibling_char_budget": sibling_char_budget,
                                 "sibling_similarity_threshold": sibling_similarity_threshold,
                                 "sibling_top_k": sibling_top_k, "sibling_llm_cap": sibling_llm_cap,
                                 "sibling_score_fields": sibling_score_fields, "embedding_adapter": embedding_adapter,
                                 "rerank": rerank, "reranker": reranker}
        if redis_url is None and redis_buffer is None:
            redis_url = WorkingMemoryConfig.from_env(environ).redis_url
        if redis_buffer is not None:
            self.buffer = redis_buffer
        elif redis_url is not None:
            self.buffer = RedisMemoryBuffer(redis_url, tenant_hint=tenant_hint, clock=self.clock)
        else:
            path = getattr(self.memory.backend, "path", None)
            self.buffer = InProcessBuffer(None if path in (None, ":memory:") else path, clock=self.clock)
        self.llm_adapter = llm_adapter
        if summarizer is None:
            summarizer = MemorySummarizer(llm_adapter) if llm_adapter is not None else ExtractiveSummarizer(clock=self.clock)
        self.summarizer = summarizer
        self.pii = pii_redactor or PIIRedactor()
        self.retry_queue = retry_queue
        self.auto_assess_fn = auto_assess_fn
        self.store_max_retries = max(1, int(store_max_retries))
        self.environ = environ
        config = graph_augmentation if isinstance(graph_augmentation, GraphAugmentationConfig) else None
        self.graph_recall = GraphAugmentedRecall(llm_adapter, config=config, memory=self.memory)
        self._assess_tasks: set[asyncio.Task[Any]] = set()
        self._session_locks: dict[tuple[int, str], asyncio.Lock] = {}
        self._lease_prefix = f"{_process_place()}:{os.getpid()}:{secrets.token_hex(4)}"
        self._live_leases: set[str] = set()      # the leases this manager's consolidations hold right now
        self._assessed_upto: dict[str, int] = {}
        self.auto_assess_min_messages = int(auto_assess_min_messages)
        self.auto_assess_window = int(auto_assess_window)
        self.auto_assess_timeout = float(auto_assess_timeout)
        self.last_assess_error: str | None = None

    # -- working memory -----------------------------------------------------------------------------------

    def _session_lock(self, session_id: str) -> asyncio.Lock:
        """One lock per session (and event loop): a message that arrives while its session is being
        consolidated waits, then lands in the emptied session instead of being cleared with it."""
        key = (id(asyncio.get_running_loop()), session_id)
        if key not in self._session_locks:
            self._session_locks[key] = asyncio.Lock()
        return self._session_locks[key]

    async def resolve_session_id(self, user_id: str | None = None, context: str | None = None) -> tuple[str, str]:
        """The session for a user: ``KUMIHO_SESSION_ID``, the active pointer, or a new id (see
        ``resolve_session_id``). Returns ``(session_id, source)``."""
        return await resolve_session_id(self.buffer, user_id=user_id, context=context,
                                        environ=self.environ, clock=self.clock)

    async def ingest_message(self, *, user_id: str, message: str, role: str = "user", channel: str = "unknown",
                             context: str = "personal", session_id: str | None = None,
                             attachments: Sequence[Any] | None = None, evidence_level: str | None = None,
                             source: str | None = None) -> dict[str, Any]:
        """Add a message to its session's working memory (created on first use).

        ``attachments`` are file paths: each is copied to ``{artifact_root}/{project}/attachments/{context}/``
        (named by the first 12 hex digits of its SHA-256 and its file name; the root defaults to
        ``$KUMIHO_MEMORY_ARTIFACT_ROOT``, else ``~/.kumiho/artifacts``), and the message keeps a pointer
        ``{name, location (file://), content_hash (sha256:), size, mime_type}``.

        Returns:
            ``{success, session_id, session_id_source, message_count, attachments}``.

        Raises:
            InvalidArgumentError: bad level, empty message, or an attachment that is not a readable file.
            MessageTooLargeError: over 64 KiB.
        """
        if evidence_level is not None:
            evidence_tag(evidence_level)
        _checked_text(message, "message", limit=MAX_CONTENT_CHARS)
        pointers = await asyncio.to_thread(self._copy_attachments, attachments or (), context) if attachments else []
        _checked_text(user_id, "user_id", limit=512)
        message = self.pii.strip_credentials(message)   # a secret never reaches the store, not even its buffer
        channel, context = self.pii.strip_credentials(channel), self.pii.strip_credentials(context)
        source = self.pii.strip_credentials(source) if source else source
        self.pii.reject_credentials(user_id)
        if session_id is None:
            session_id, origin = await resolve_session_id(self.buffer, user_id=user_id, context=context,
                                                          environ=self.environ, clock=self.clock,
                                                          project=self.project)
        else:
            origin = "request"
        async with self._session_lock(session_id):
            added = await self.buffer.add_message(
                project=self.project, session_id=session_id, role=role, content=message,
                metadata={"channel": channel, **({"attachments": pointers} if pointers else {})})
            if added["message_count"] == 1 or not await self.buffer.get_session_metadata(
                    project=self.project, session_id=session_id):
                meta = {"user_id": user_id, "context": context}
                if evidence_level:
                    meta["evidence_level"] = evidence_level
                if source:
                    meta["source"] = source
                await self.buffer.set_session_metadata(project=self.project, session_id=session_id, metadata=meta)
        return {"success": True, "session_id": session_id, "session_id_source": origin,
                "message_count": added["message_count"], "attachments": pointers}

    def _artifact_folder(self, *parts: str) -> str:
        """``{artifact_root}/{project}/...``; the root defaults to ``$KUMIHO_MEMORY_ARTIFACT_ROOT``, else
        ``~/.kumiho/artifacts``."""
        root = self.artifact_root or (self.environ if self.environ is not None else os.environ).get(
            "KUMIHO_MEMORY_ARTIFACT_ROOT") or os.path.join(os.path.expanduser("~"), ".kumiho", "artifacts")
        return os.path.join(root, self.project, *parts)

    def _copy_attachments(self, attachments: Sequence[Any], context: str) -> list[dict[str, Any]]:
        """Copy each attachment file beside the memory's artifacts; return the pointers (all or none)."""
        import mimetypes
        import shutil
        folder = self._artifact_folder("attachments", slugify(context or "personal", 64) or "personal")
        pointers = []
        for attachment in attachments:
            if not isinstance(attachment, (str, os.PathLike)) or not os.path.isfile(attachment):
                raise InvalidArgumentError(f"an attachment must be the path of a readable file, not {str(attachment)[:200]!r}")
            source = os.path.abspath(os.fspath(attachment))
            digest = hashlib.sha256()
            try:
                with open(source, "rb") as stream:
                    for block in iter(lambda: stream.read(1 << 16), b""):
                        digest.update(block)
                os.makedirs(folder, exist_ok=True)
                name = os.path.basename(source)
                target = os.path.join(folder, f"{digest.hexdigest()[:12]}_{name}")
                if not os.path.exists(target):
                    temporary = _unique_temporary(target)
                    shutil.copyfile(source, temporary)
                    os.replace(temporary, target)
                size = os.path.getsize(target)
            except OSError as exc:
                raise StoreError(f"cannot copy attachment {source!r}: {exc}") from exc
            pointers.append({"name": name, "location": "file://" + urllib.parse.quote(target),
                             "content_hash": f"sha256:{digest.hexdigest()}", "size": size,
                             "mime_type": mimetypes.guess_type(name)[0] or "application/octet-stream"})
        return pointers

    async def add_assistant_response(self, *, session_id: str, response: str,
                                     channel: str = "unknown") -> dict[str, Any]:
        """Add the assistant's reply to working memory; runs ``auto_assess_fn`` in the background if set.

        Returns:
            ``{success, message_count, created_bucket}``.
        """
        _checked_text(response, "response", limit=MAX_CONTENT_CHARS)
        async with self._session_lock(session_id):
            added = await self.buffer.add_message(project=self.project, session_id=session_id, role="assistant",
                                                  content=self.pii.strip_credentials(response),
                                                  metadata={"channel": self.pii.strip_credentials(channel)})
        if self.auto_assess_fn is not None:
            task = asyncio.ensure_future(self._assess(session_id))
            self._assess_tasks.add(task)
            task.add_done_callback(self._assess_tasks.discard)
        return {"success": True, "message_count": added["message_count"], "created_bucket": added["created_bucket"]}

    async def _assess(self, session_id: str) -> None:
        """Write-time screening after an assistant response: when at least ``auto_assess_min_messages`` new
        messages arrived, ask ``auto_assess_fn`` about the latest window (redacted) and what recall knows,
        and store what it approves (never graded official), with its provenance and evidence edges.
        Failures are kept in ``last_assess_error``; they never reach the conversation."""
        try:
            window = await self.buffer.get_messages(project=self.project, session_id=session_id,
                                                    limit=self.auto_assess_window)
            count = window["message_count"]
            if count - self._assessed_upto.get(session_id, 0) < self.auto_assess_min_messages:
                return
            self._assessed_upto[session_id] = count
            messages = [{**m, "content": self.pii.scrub_for_llm(m["content"])} for m in window["messages"]]
            probe = " ".join(str(m["content"])[:300] for m in messages[-3:])
            recalled = await self.recall_memories(probe, limit=5) if probe.strip() else []
            result = await asyncio.wait_for(_call(self.auto_assess_fn, messages, recalled),
                                            timeout=self.auto_assess_timeout)
            if not getattr(result, "should_store", False) or not str(result.content).strip():
                return
            meta = await self.buffer.get_session_metadata(project=self.project, session_id=session_id)
            await asyncio.to_thread(self._store_assessment, session_id, result, recalled, meta)
        except Exception as exc:  # the assessor is the caller's code, and this runs in the background
            self.last_assess_error = f"{type(exc).__name__}: {exc}"

    def _store_assessment(self, session_id: str, result: MemoryAssessResult, recalled: Sequence[Mapping[str, Any]],
                          session: Mapping[str, str]) -> str:
        level = result.evidence_level if result.evidence_level in EVIDENCE_LEVELS and result.evidence_level != OFFICIAL \
            else None
        content = self.pii.anonymize_summary(self.pii.strip_credentials(str(result.content)))
        self.pii.reject_credentials(content)
        metadata = {"auto_memorized": "true", "session_id": session_id, "memory_type": result.memory_type,
                    "reason": result.reason[:500], "conflicts_with": list(result.conflicting_krefs),
                    "user_id": session.get("user_id")}
        space = "/".join(slugify(part, 64) for part in (session.get("context"), session.get("user_id")) if part) or "auto"
        tags = ["auto-memorized"] + [t for t in result.tags if isinstance(t, str) and TAG_PATTERN.match(t)]
        kref = self.memory.remember(content, space=space, title=content[:80], kind="memory", metadata=metadata,
                                    tags=tags, evidence_level=level, source=result.source or None)
        for recalled_memory in recalled:
            with contextlib.suppress(KumihoMemoryError):
                self.memory.link(kref, recalled_memory["kref"], DERIVED_FROM)
        for supporting in result.supporting_krefs:
            with contextlib.suppress(KumihoMemoryError):
                self.memory.link(kref, supporting, SUPPORTS, {"reason": result.reason[:200]})
        if result.create_contradicts_edges:
            for conflicting in result.conflicting_krefs:
                with contextlib.suppress(KumihoMemoryError):
                    self.memory.link(kref, conflicting, CONTRADICTS, {"basis": "evidence-assessor"})
        return kref

    async def handle_user_message(self, *, user_id: str, message: str, channel: str = "unknown",
                                  context: str = "personal", session_id: str | None = None,
                                  working_memory_limit: int = 10, recall_limit: int = 5,
                                  evidence_level: str | None = None, source: str | None = None) -> dict[str, Any]:
        """Ingest a user message, then return the session's recent messages and the long-term memories it
        recalls.

        Returns:
            ``{session_id, session_id_source, working_memory, long_term_memory, should_consolidate}``.
        """
        ingested = await self.ingest_message(user_id=user_id, message=message, channel=channel, context=context,
                                             session_id=session_id, evidence_level=evidence_level, source=source)
        window = await self.buffer.get_messages(project=self.project, session_id=ingested["session_id"],
                                                limit=working_memory_limit)
        recalled = await self.recall_memories(message, limit=recall_limit)
        return {"session_id": ingested["session_id"], "session_id_source": ingested["session_id_source"],
                "working_memory": window["messages"], "long_term_memory": recalled,
                "should_consolidate": ingested["message_count"] >= self.consolidation_threshold}

    # -- consolidation ------------------------------------------------------------------------------------

    async def consolidate_session(self, *, session_id: str, space_path: str | None = None,
                                  user_id: str | None = None, context: str | None = None,
                                  stack_revisions: bool | None = None, evidence_level: str | None = None,
                                  source: str | None = None, summary: Any = None,
                                  implications: Sequence[str] | None = None) -> dict[str, Any]:
        """Turn a session's working memory into one long-term memory, then clear the session.

        The summary is the caller's ``summary`` (text or a summarizer-shaped dict), else the summarizer's
        (an LLM's when configured, on a redacted copy; otherwise extractive). PII in it is anonymized and a
        credential makes it raise ``CredentialDetectedError``. The memory keeps its provenance: session id,
        message ids, and the redacted transcript as artifact ``transcript``. The buffer is cleared only after
        the memory is stored (or durably queued in the ``RetryQueue``).

        Returns:
            ``{success, buffer_was_empty, summary, store_result}`` or ``{success: False, error}``.
        """
        if evidence_level is not None:
            evidence_tag(evidence_level)
        async with self._session_lock(session_id):
            # one consolidation of a session at a time across processes too (a lease in the buffer): a second
            # one would store the same messages again, or consume messages that arrived after the first read
            owner = f"{self._lease_prefix}:{secrets.token_hex(6)}"
            await self._take_lease(session_id, owner)
            self._live_leases.add(owner)
            keeper = asyncio.ensure_future(self._keep_lease(session_id, owner))
            try:
                return await self._consolidate(session_id, space_path, user_id, context, stack_revisions,
                                               evidence_level, source, summary, implications, owner)
            finally:
                self._live_leases.discard(owner)
                keeper.cancel()
                with contextlib.suppress(asyncio.CancelledError, KumihoMemoryError):
                    await keeper
                with contextlib.suppress(KumihoMemoryError):
                    await self.buffer.release_session_lease(project=self.project, session_id=session_id, owner=owner)

    async def _take_lease(self, session_id: str, owner: str) -> None:
        """Claim the session's consolidation lease, taking over one whose holder is gone (a killed process
        here, or an attempt of this manager that has ended); wait for a live one, then a transient error."""
        waited, delay = 0.0, 0.05
        while not await self.buffer.acquire_session_lease(project=self.project, session_id=session_id,
                                                          owner=owner, ttl_seconds=self.consolidation_lease_seconds):
            holder = await self.buffer.session_lease_owner(project=self.project, session_id=session_id)
            left_behind = holder is not None and holder.startswith(self._lease_prefix + ":") \
                and holder not in self._live_leases
            if holder is not None and (left_behind or _lease_holder_died(holder)):
                await self.buffer.release_session_lease(project=self.project, session_id=session_id, owner=holder)
                continue
            if waited >= CONSOLIDATION_LEASE_WAIT:
                raise ServiceError(f"session {session_id!r} is being consolidated by another process; "
                                   f"nothing was changed, try again", transient=True)
            await asyncio.sleep(delay)
            waited, delay = waited + delay, min(delay * 2, 1.0)

    async def _keep_lease(self, session_id: str, owner: str) -> None:
        """Renew the lease while the consolidation runs; stop when it is lost (the consolidation then
        consumes nothing) or the buffer fails (the lease then runs out by itself)."""
        while True:
            await asyncio.sleep(self.consolidation_lease_seconds / 3)
            try:
                if not await self.buffer.renew_session_lease(project=self.project, session_id=session_id,
                                                             owner=owner, ttl_seconds=self.consolidation_lease_seconds):
                    return
            except KumihoMemoryError:
                return

    async def _consolidate(self, session_id: str, space_path: str | None, user_id: str | None, context: str | None,
                           stack_revisions: bool | None, evidence_level: str | None, source: str | None,
                           summary: Any, implications: Sequence[str] | None, lease: str | None = None) -> dict[str, Any]:
        window = await self.buffer.get_messages(project=self.project, session_id=session_id, limit=1000)
        for _ in range(10):                    # a long session: read all of it, in one consistent window
            if window["message_count"] <= len(window["messages"]):
                break
            window = await self.buffer.get_messages(project=self.project, session_id=session_id,
                                                    limit=window["message_count"] + 100)
        else:
            raise ServiceError(f"session {session_id!r} grew faster than it could be read; try again", transient=True)
        messages = window["messages"]
        if not messages and summary is None:
            return {"success": False, "error": "No messages to consolidate", "buffer_was_empty": True}
        meta = await self.buffer.get_session_metadata(project=self.project, session_id=session_id)
        user_id = user_id or meta.get("user_id")
        context = context or meta.get("context")
        level = evidence_level or (meta.get("evidence_level") if meta.get("evidence_level") in EVIDENCE_LEVELS else None)
        source = source or meta.get("source")
        space_path_given = space_path is not None
        if space_path is None:
            space_path = "/".join(slugify(part, 64) for part in (context, user_id) if part) or "sessions"
        space = normalize_space(space_path)
        redacted = [{**m, "content": self.pii.scrub_for_llm(m["content"])} for m in messages]
        if summary is None:
            structured = await self.summarizer.summarize_conversation(redacted, context=context)
            if implications is None:
                implications = await self.summarizer.generate_implications(redacted)
        elif isinstance(summary, str):
            structured = {**ExtractiveSummarizer(clock=self.clock).summarize(redacted), "summary": summary}
        elif isinstance(summary, Mapping):
            structured = dict(summary)
        else:
            raise InvalidArgumentError("summary must be text or a summarizer-shaped mapping")
        text = self.pii.anonymize_summary(render_summary(structured, implications or ()))
        title = self.pii.anonymize_summary(str(structured.get("title") or "Conversation"))[:MAX_TITLE_CHARS]
        for part in (text, title):
            self.pii.reject_credentials(part)
        events = structured.get("events") or []
        dates = sorted(e.get("event_date") for e in events if isinstance(e, Mapping) and _is_iso_date(e.get("event_date")))
        classification = structured.get("classification") or {}
        screen = self._screened
        metadata = {
            "session_id": session_id, "message_count": len(messages), "memory_type": structured.get("type", "conversation"),
            "message_ids": [f"{session_id}:{index}" for index in range(1, window["message_count"] + 1)][-len(messages):],
            "topics": screen(list(classification.get("topics") or [])),
            "entities": screen(list(classification.get("entities") or [])),
            "implications": screen(list(implications or [])), "user_id": user_id,
            "channel": self.pii.strip_credentials(str(messages[-1].get("metadata", {}).get("channel") or ""))
            if messages else None,
        }
        if dates:
            metadata["event_date"] = dates[0]
        # The same messages always give the same id: a rerun after a crash between storing and clearing (or a
        # replay of a queued payload that was stored) finds the memory instead of storing it twice.
        # A caller's own summary is part of the id (two summaries are two memories); a generated one is not
        # (an LLM words it differently on every run, and a rerun must still find the first).
        metadata["consolidation_id"] = hashlib.sha256(canonical_json(
            [session_id, metadata["message_ids"], [m["content"] for m in messages],
             None if summary is None else [title, text]]).encode("utf-8")).hexdigest()[:24]
        transcript_redactor = type(self.pii)()      # one numbering per transcript, never across conversations
        transcript = "\n".join(f"**{m['role']}** ({m.get('timestamp', '')}): "
                               f"{transcript_redactor.redact_text(self.pii.strip_credentials(m['content']))}"
                               for m in messages)
        if self.artifact_root is not None or (self.environ if self.environ is not None else os.environ).get(
                "KUMIHO_MEMORY_ARTIFACT_ROOT"):
            metadata["artifact_location"] = await asyncio.to_thread(self._write_transcript, space, session_id,
                                                                    transcript)
        by_role = {role: "\n".join(transcript_redactor.redact_text(self.pii.strip_credentials(m["content"]))
                                   for m in messages if m["role"] == role) for role in ("user", "assistant")}
        payload = {"content": text, "title": title, "space": space, "metadata": metadata,
                   "user_text": by_role["user"], "assistant_text": by_role["assistant"],
                   "tags": ["summarized", PUBLISHED_TAG], "evidence_level": level,
                   "source": self.pii.strip_credentials(source) if source else source,
                   # into a named space a restated belief becomes a new revision (stack_revisions=False opts out)
                   "stack": bool(stack_revisions) if stack_revisions is not None else space_path_given,
                   "transcript": transcript}
        store_result = await self._store_with_retry(payload)
        # only what was read and stored goes: messages that arrived meanwhile stay for the next consolidation;
        # and only while this consolidation still holds the session (a lease that ran out is not consumed on)
        remaining = -1
        if lease is None or await self.buffer.session_lease_owner(project=self.project, session_id=session_id) == lease:
            remaining = await self.buffer.consume_messages(project=self.project, session_id=session_id,
                                                           count=len(messages), first=messages[0] if messages else None)
        if user_id and remaining == 0:         # the session is done: the user's next message starts a new one
            with contextlib.suppress(KumihoMemoryError):
                await self.buffer.clear_active_session(context=context or "mcp", user_id=user_id, only_if=session_id)
        return {"success": True, "buffer_was_empty": not messages, "summary": structured, "store_result": store_result}

    def _write_transcript(self, space: str, session_id: str, transcript: str) -> str:
        """Keep a consolidation's (redacted) transcript as Markdown under ``artifact_root``; return its path."""
        folder = self._artifact_folder(*[part for part in space.split("/") if part])
        path = os.path.join(folder, session_id.replace(":", "_").replace("/", "_") + ".md")
        try:
            os.makedirs(folder, exist_ok=True)
            _write_file_atomically(path, transcript + "\n")
        except OSError as exc:
            raise StoreError(f"cannot write the transcript {path!r}: {exc}") from exc
        return path

    def _upstream_payload(self, payload: Mapping[str, Any]) -> dict[str, Any]:
        """Our consolidation payload as upstream's ``memory_store(**payload)`` takes it."""
        metadata = dict(payload.get("metadata") or {})
        level, source = payload.get("evidence_level"), payload.get("source")
        if level:
            metadata["evidence_level"] = level
        if source:
            metadata["source"] = source
        tags = ["summarized"] + ([evidence_tag(level)] if level else []) + [PUBLISHED_TAG]
        topics = metadata.get("topics") or []
        return {"project": self.project, "memory_type": metadata.get("memory_type", "conversation"),
                "title": payload["title"], "summary": payload["content"], "user_text": payload.get("user_text", ""),
                "assistant_text": payload.get("assistant_text", ""),
                "artifact_location": metadata.get("artifact_location", ""), "artifact_name": "conversation",
                "bundle_name": topics[0] if topics else "", "tags": tags, "metadata": metadata,
                "space_path": payload["space"], "stack_revisions": bool(payload.get("stack"))}

    async def _store_any(self, payload: Mapping[str, Any]) -> dict[str, Any]:
        """Store a consolidation payload: through ``memory_store`` when given, else into the memory."""
        if self.memory_store is not None:
            result = await _call(self.memory_store, **self._upstream_payload(payload))
            return dict(result) if isinstance(result, Mapping) else {"result": result}
        return await asyncio.to_thread(self._store_payload, payload)

    def _screened(self, values: list[Any]) -> list[Any]:
        """Strings bound for stored metadata: PII anonymized; a credential raises CredentialDetectedError."""
        screened = []
        for value in values:
            if isinstance(value, str):
                value = self.pii.anonymize_summary(value)
                self.pii.reject_credentials(value)
            screened.append(value)
        return screened

    def _store_payload(self, payload: Mapping[str, Any]) -> dict[str, Any]:
        """Write a consolidation payload (also what the retry queue replays); a payload whose
        ``consolidation_id`` is already stored is not stored again (``already_stored: True``)."""
        consolidation_id = (payload.get("metadata") or {}).get("consolidation_id")
        if consolidation_id:
            for hit in self.memory.recall(payload["content"][:2000], limit=1, space=payload["space"] or None,
                                          where={"consolidation_id": consolidation_id}, follow_edges=False,
                                          include_superseded=True):
                return {"revision_kref": hit["kref"], "item_kref": hit["item_kref"], "space_path": payload["space"],
                        "already_stored": True}
        artifacts = [{"name": "transcript", "location": "memory://transcript",
                      "metadata": {"format": "markdown", "text": payload["transcript"]}}] if payload.get("transcript") else []
        kref = self.memory.remember(payload["content"], space=payload["space"], title=payload["title"],
                                    kind="conversation", metadata=payload["metadata"], tags=payload["tags"],
                                    evidence_level=payload.get("evidence_level"), source=payload.get("source"),
                                    artifacts=artifacts, stack=bool(payload.get("stack")))
        return {"revision_kref": kref, "item_kref": kref.split("?")[0], "space_path": payload["space"]}

    async def _store_with_retry(self, payload: dict[str, Any]) -> dict[str, Any]:
        delay = 0.1
        for attempt in range(self.store_max_retries):
            try:
                return await self._store_any(payload)
            except (StoreError, ServiceError) as exc:
                if not _is_transient(exc) or attempt == self.store_max_retries - 1:
                    if self.retry_queue is None:
                        raise
                    entry_id = await asyncio.to_thread(self.retry_queue.enqueue, payload)
                    return {"queued": True, "queue_id": entry_id, "error": str(exc)}
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)
        raise AssertionError("unreachable")  # pragma: no cover

    async def flush_retry_queue(self) -> dict[str, int]:
        """Store what the retry queue holds. Returns ``{succeeded, failed, dropped}``."""
        if self.retry_queue is None:
            return {"succeeded": 0, "failed": 0, "dropped": 0}
        async def replay(**payload: Any) -> dict[str, Any]:
            return await self._store_any(payload)
        return await self.retry_queue.flush(replay)

    async def store_tool_execution(self, *, task: str, status: str = "done", exit_code: int | None = None,
                                   duration_ms: int | None = None, stdout: str = "", stderr: str = "",
                                   tools: Sequence[str] | None = None, topics: Sequence[str] | None = None,
                                   space_hint: str = "", open_questions: Sequence[str] | None = None,
                                   derived_from: Sequence[str] | None = None) -> dict[str, Any]:
        """Remember what a tool run did: an ``action`` memory, or an ``error`` one when it failed.

        Returns:
            ``{success, memory_type, store_result}``.
        """
        _checked_text(task, "task", limit=MAX_CONTENT_CHARS)
        failed = status in ("failed", "error", "blocked") or (exit_code not in (None, 0))
        memory_type = "error" if failed else "action"
        title = ("Failed: " if failed else "Successfully executed: ") + self.pii.anonymize_summary(
            self.pii.strip_credentials(task))[:60]
        lines = [f"Task: {task}", f"Status: {status}" + (f" (exit code {exit_code})" if exit_code is not None else "")]
        if duration_ms is not None:
            lines.append(f"Duration: {duration_ms} ms")
        if stdout.strip():
            lines.append("Output:\n" + stdout.strip()[-2000:])
        if stderr.strip():
            lines.append("Errors:\n" + stderr.strip()[-2000:])
        if open_questions:
            lines.append("Open questions:\n" + "\n".join(f"- {q}" for q in open_questions))
        text = self.pii.anonymize_summary(self.pii.strip_credentials("\n".join(lines)))
        self.pii.reject_credentials(text)
        space = normalize_space("/".join(["executions", slugify(space_hint, 64)]) if space_hint else "executions")
        metadata = {"memory_type": memory_type, "exit_code": exit_code, "duration_ms": duration_ms,
                    "topics": list(topics or []), "tools": list(tools or []), "derived_from": list(derived_from or []),
                    "status": status}
        kref = await asyncio.to_thread(self.memory.remember, text, space=space, title=title, kind=memory_type,
                                       metadata=metadata, tags=[memory_type, status, PUBLISHED_TAG]
                                       if re.match(r"^[A-Za-z0-9_]", status) else [memory_type, PUBLISHED_TAG])
        for source_kref in derived_from or ():
            with contextlib.suppress(NotFoundError, InvalidArgumentError):
                await asyncio.to_thread(self.memory.link, kref, source_kref, DERIVED_FROM)
        return {"success": True, "memory_type": memory_type,
                "store_result": {"revision_kref": kref, "item_kref": kref.split("?")[0], "space_path": space}}

    async def recall_memories(self, query: str, *, limit: int = 5, space_paths: Sequence[str] | None = None,
                              memory_types: Sequence[str] | None = None, graph_augmented: bool = False,
                              query_time: str | float | _dt.datetime | None = None) -> list[dict[str, Any]]:
        """Recall memories, shaped as kumiho-memory returns them.

        Args:
            query: free text. limit: how many results.
            space_paths: only these spaces (and their sub-spaces).
            memory_types: only memories whose metadata ``memory_type`` (or ``type``, or item kind) is one of
                these.
            graph_augmented: use ``GraphAugmentedRecall`` (several angles, edge walk).
            query_time: "now" for relative times in the query.

        Returns:
            Best first, each with ``kref, score, _item_kref, title, summary, type, space, created_at, tags``
            beside the ``Memory.recall`` fields.
        """
        if self.memory_retrieve is not None:
            return await self._retrieved(query, limit, space_paths, memory_types)
        options: dict[str, Any] = {} if self.evidence_rank is None else {"evidence_rank": self.evidence_rank}
        if graph_augmented:
            hits = await self.graph_recall.recall(query, limit=limit, space_paths=space_paths,
                                                  memory_types=memory_types, query_time=query_time)
        else:
            hits = await asyncio.to_thread(self.memory.recall, query, limit=limit, space_paths=space_paths,
                                           memory_types=memory_types, query_time=query_time, **options)
        return [self.shape_result(hit) for hit in hits]

    async def _retrieved(self, query: str, limit: int, space_paths: Sequence[str] | None,
                         memory_types: Sequence[str] | None) -> list[dict[str, Any]]:
        """Recall through upstream's ``memory_retrieve`` seam, shaped and evidence-weighted like ours."""
        wanted = max(1, math.ceil(limit * self.recall_candidate_multiplier))
        reply = await _call(self.memory_retrieve, project=self.project, query=query, limit=wanted,
                            space_paths=list(space_paths) if space_paths else None,
                            memory_types=list(memory_types) if memory_types else None)
        if not isinstance(reply, Mapping) or reply.get("error"):
            return []
        revisions = list(reply.get("revision_krefs") or [])
        items = list(reply.get("item_krefs") or [])
        scores = list(reply.get("scores") or [])
        resolved = reply.get("resolved_metadata") or {}
        results = []
        for index, revision_kref in enumerate(revisions):
            entry = resolved.get(revision_kref) if isinstance(resolved, Mapping) else None
            entry = entry if isinstance(entry, Mapping) else {}
            metadata = dict(entry.get("metadata") or {})
            item_kref = items[index] if index < len(items) else str(revision_kref).split("?")[0]
            result = {"kref": revision_kref, "score": float(scores[index]) if index < len(scores) else None,
                      "_item_kref": item_kref, "item_kref": item_kref, "title": metadata.get("title", ""),
                      "summary": metadata.get("summary", ""), "content": metadata.get("summary", ""),
                      "type": metadata.get("memory_type") or metadata.get("type"),
                      "space": metadata.get("space", ""), "created_at": entry.get("created_at"),
                      "tags": list(entry.get("tags") or []), "metadata": metadata}
            for key in ("evidence_level", "source"):
                if metadata.get(key):
                    result[key] = metadata[key]
            results.append(result)
        apply_evidence_weights(results, self.evidence_rank or self.memory.evidence_rank)
        return results[:limit]

    @staticmethod
    def shape_result(hit: dict[str, Any]) -> dict[str, Any]:
        """A recall hit in upstream's shape: ``_item_kref``, ``summary``, ``type``, and at the top level the
        ``evidence_level`` and ``source`` its metadata holds."""
        metadata = hit.get("metadata", {})
        memory_type = metadata.get("memory_type") or metadata.get("type") or hit.get("kind")
        shaped = {**hit, "_item_kref": hit["item_kref"], "summary": hit["content"], "type": memory_type}
        level = memory_evidence_level(hit)
        if level:
            shaped["evidence_level"] = level
        if metadata.get("source"):
            shaped["source"] = metadata["source"]
        return shaped

    async def discover_edges_post_consolidation(self, revision_kref: str, summary: str,
                                                **options: Any) -> list[dict[str, Any]]:
        """Link a new memory to related ones (``GraphAugmentedRecall.discover_edges``)."""
        return await self.graph_recall.discover_edges(revision_kref, summary, **options)

    def build_recalled_context(self, memories: Sequence[Mapping[str, Any]], query: str = "",
                               recall_mode: str | None = None) -> str:
        """Render recalled memories for a prompt (see the module function ``build_recalled_context``).
        ``recall_mode`` (default the manager's) is checked and accepted for upstream's callers; both modes
        render each memory's title and content (our memories are their summaries)."""
        mode = recall_mode or self.recall_mode
        if mode not in ("summarized", "full"):
            raise InvalidArgumentError(f"recall_mode must be 'summarized' or 'full', not {mode!r}")
        return build_recalled_context(memories, query)

    async def close(self) -> None:
        """Wait for background assessments, close the buffer, and the memory if this manager created it."""
        if self._assess_tasks:
            await asyncio.gather(*self._assess_tasks, return_exceptions=True)
        await self.buffer.close()
        if self._owns_memory:
            await asyncio.to_thread(self.memory.close)

    async def __aenter__(self) -> "UniversalMemoryManager":
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.close()


# ==========================================================================================================
# 14. Built on Memory: space profiles, skill ingest, Dream State
# ==========================================================================================================

# -- space profiles ------------------------------------------------------------------------------------------

# Space classification, as the reference gives it (scores rounded to 4 decimal places):
#
#   churn     = min(1, .5*min(1, revisions_per_item/5) + .3*min(1, revision_rate_per_day/3)
#                      + .2*min(1, supersedes_max_depth/5))                    all revisions, deprecated too
#   evidence  = sum(quality[level] * count) / live revisions                   live revisions only
#   stability = min(1, .6*published_share + .4*min(1, median_revision_age_days/30))   live revisions only
#
#   label          rule (first that holds)
#   canonical      stability >= .6 and churn <= .4 and (no live revision graded or evidence >= .3)
#   correspondence churn >= .6 and stability <= .4
#   working        otherwise
SPACE_CLASSES = ("canonical", "working", "correspondence")
EVIDENCE_QUALITY = {OFFICIAL: 1.0, CORROBORATED: 0.7, SINGLE_SOURCE: 0.3, UNVERIFIED: 0.0}
UNGRADED = "ungraded"
SCORE_DECIMALS = 4


@dataclasses.dataclass(frozen=True)
class SpaceSignals:
    """What the profiler measured in one space (bookkeeping kinds in ``SYSTEM_KINDS`` are not counted).

    Attributes:
        items_count, live_item_count: items, and those not deprecated.
        revisions_count, live_revisions_count: revisions, and those neither deprecated nor in a deprecated
            item.
        revisions_per_item_mean: ``revisions_count / items_count``.
        revisions_in_window, revision_rate_per_day: revisions created in the window, and per day of it.
        supersedes_edge_count, supersedes_max_depth: SUPERSEDES edges leaving the space's revisions, and the
            longest chain of them (capped at the profiler's ``max_supersedes_depth``).
        evidence_histogram: live revisions per evidence level, plus ``ungraded``.
        deprecated_items, deprecated_revisions: deprecated items; revisions that are not live.
        deprecation_ratio: ``deprecated_revisions / revisions_count``.

    The names are upstream's; the earlier ``item_count``, ``revision_count``, ``live_revision_count``,
    ``deprecated_item_count`` and ``deprecated_revision_count`` still read (and ``from_dict`` takes them).
        published_share: share of live revisions tagged ``published``.
        median_revision_age_days: median age of the live revisions at ``window_end``.
        window_start, window_end: the window, as ISO 8601 instants.
    """

    items_count: int = 0
    live_item_count: int = 0
    revisions_count: int = 0
    live_revisions_count: int = 0
    revisions_per_item_mean: float = 0.0
    revisions_in_window: int = 0
    revision_rate_per_day: float = 0.0
    supersedes_edge_count: int = 0
    supersedes_max_depth: int = 0
    evidence_histogram: dict[str, int] = dataclasses.field(default_factory=dict)
    deprecated_items: int = 0
    deprecated_revisions: int = 0
    deprecation_ratio: float = 0.0
    published_share: float = 0.0
    median_revision_age_days: float = 0.0
    window_start: str = ""
    window_end: str = ""

    def to_dict(self) -> dict[str, Any]:
        """The signals as a JSON-ready dict."""
        return {**dataclasses.asdict(self), "evidence_histogram": dict(self.evidence_histogram)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "SpaceSignals":
        """Rebuild signals from ``to_dict`` output, this version's or an earlier one's (unknown keys are
        ignored, missing ones default)."""
        names = {field.name for field in dataclasses.fields(cls)}
        renamed = {_SIGNAL_RENAMES.get(key, key): value for key, value in data.items()}
        return cls(**{key: value for key, value in renamed.items() if key in names})

    item_count = property(lambda self: self.items_count, doc="Earlier name of ``items_count``.")
    revision_count = property(lambda self: self.revisions_count, doc="Earlier name of ``revisions_count``.")
    live_revision_count = property(lambda self: self.live_revisions_count,
                                   doc="Earlier name of ``live_revisions_count``.")
    deprecated_item_count = property(lambda self: self.deprecated_items, doc="Earlier name of ``deprecated_items``.")
    deprecated_revision_count = property(lambda self: self.deprecated_revisions,
                                         doc="Earlier name of ``deprecated_revisions``.")


    @property
    def graded(self) -> bool:
        """True when at least one live revision carries an evidence level."""
        return any(count for level, count in self.evidence_histogram.items() if level != UNGRADED)


_SIGNAL_RENAMES = {"item_count": "items_count", "revision_count": "revisions_count",
                   "live_revision_count": "live_revisions_count", "deprecated_item_count": "deprecated_items",
                   "deprecated_revision_count": "deprecated_revisions"}


@dataclasses.dataclass(frozen=True)
class SpaceProfile:
    """What kind of knowledge a space holds, as one profiler run saw it.

    Attributes:
        space_path: the space (``"news"``; ``""`` is the project root).
        signals: the ``SpaceSignals`` measured.
        scores: ``{churn, evidence, stability}``, each 0..1, rounded to 4 decimal places.
        label: the class in force: the ``space_class`` pin when set, else ``observed_label``; None when empty.
        pinned: True when the space's ``space_class`` attribute fixes the label.
        previous_label: the label of the previous stored profile, if any.
        observed_label: the class the signals give (one of ``SPACE_CLASSES``); None when empty.
        empty: True when the space holds no memories (it is then neither classified nor stored).
        revision_kref: the stored profile revision (None on a dry run or when empty).
        profiled_at: when the profile was made (ISO 8601).
    """

    space_path: str
    signals: SpaceSignals
    scores: dict[str, float]
    label: str | None
    pinned: bool = False
    previous_label: str | None = None
    observed_label: str | None = None
    empty: bool = False
    revision_kref: str | None = None
    profiled_at: str = ""

    def to_dict(self) -> dict[str, Any]:
        """The profile as a JSON-ready dict."""
        return {"space_path": self.space_path, "label": self.label, "observed_label": self.observed_label,
                "pinned": self.pinned, "previous_label": self.previous_label, "empty": self.empty,
                "scores": dict(self.scores), "signals": self.signals.to_dict(), "revision_kref": self.revision_kref,
                "profiled_at": self.profiled_at}


def _score(value: float) -> float:
    return round(min(1.0, max(0.0, value)), SCORE_DECIMALS)


def space_scores(signals: SpaceSignals) -> dict[str, float]:
    """The reference's churn, evidence and stability scores for ``signals`` (0..1, 4 decimal places)."""
    churn = (0.5 * min(1.0, signals.revisions_per_item_mean / 5) + 0.3 * min(1.0, signals.revision_rate_per_day / 3)
             + 0.2 * min(1.0, signals.supersedes_max_depth / 5))
    live = signals.live_revision_count
    evidence = (sum(EVIDENCE_QUALITY[level] * signals.evidence_histogram.get(level, 0) for level in EVIDENCE_QUALITY)
                / live) if live else 0.0
    stability = 0.6 * signals.published_share + 0.4 * min(1.0, signals.median_revision_age_days / 30)
    return {"churn": _score(churn), "evidence": _score(evidence), "stability": _score(stability)}


def classify_space(scores: Mapping[str, float], *, graded: bool) -> str:
    """The class (one of ``SPACE_CLASSES``) that rounded ``scores`` give; ``graded`` says whether any live
    revision carries an evidence level (an ungraded space is not held back from ``canonical``)."""
    churn, evidence, stability = scores["churn"], scores["evidence"], scores["stability"]
    if stability >= 0.6 and churn <= 0.4 and (not graded or evidence >= 0.3):
        return "canonical"
    if churn >= 0.6 and stability <= 0.4:
        return "correspondence"
    return "working"


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    if not ordered:
        return 0.0
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def _longest_chain(successors: Mapping[str, Sequence[str]], cap: int) -> int:
    """Edges in the longest path through ``successors`` (a cycle counts until ``cap``)."""
    depth = dict.fromkeys(successors, 0)
    for _ in range(cap):
        following = {node: max((1 + depth.get(target, 0) for target in targets), default=0)
                     for node, targets in successors.items()}
        if following == depth:
            break
        depth = following
    return min(cap, max(depth.values(), default=0))


def _space_from_path(memory: Any, space_path: str) -> str:
    """A space given as ``news`` or upstream-style ``/Project/news`` (this memory's project)."""
    if not isinstance(space_path, str):
        raise InvalidArgumentError(f"space_path must be a string, not {type(space_path).__name__}")
    project = getattr(memory, "project", None)
    if space_path.startswith("/") and project:
        head, _, rest = space_path.strip("/").partition("/")
        if head == project:
            return normalize_space(rest)
    return normalize_space(space_path)


def _stored_profile(memory: Any, space: str, profile_kind: str, profile_item_name: str) -> dict[str, Any] | None:
    """The latest stored profile revision of ``space`` (as ``Memory.get`` returns it), or None."""
    held = _keyed_item(memory, space, profile_item_name, profile_kind)
    return None if held is None or held["latest_revision"] is None else memory.get(held["item_kref"])


def get_space_profile(project_or_memory: Memory | str | None, space_path: str, *, memory: Memory | None = None,
                      profile_kind: str = SPACE_PROFILE_KIND,
                      profile_item_name: str = SPACE_PROFILE_ITEM) -> SpaceProfile | None:
    """Read the latest stored profile of a space (what ``SpaceProfiler`` last persisted).

    Upstream's call is ``get_space_profile("CognitiveMemory", "/CognitiveMemory/news")``: a project name
    first, and the default memory (``default_memory``) holds it; ``memory=`` names one explicitly. A
    ``Memory`` as the first argument works too.

    Args:
        project_or_memory: the project (upstream's form), or the ``Memory`` holding the space.
        space_path: ``"news"``, or upstream-style ``"/CognitiveMemory/news"``.
        memory: the memory, when the first argument is a project.
        profile_kind, profile_item_name: as given to ``SpaceProfiler``.

    Returns:
        The ``SpaceProfile``, or None when the space was never profiled.

    Raises:
        InvalidArgumentError: a malformed space path.
    """
    if isinstance(project_or_memory, Memory):
        memory = memory_or_default(project_or_memory, None if memory is None else memory.project)
    else:
        memory = memory_or_default(memory, project_or_memory)
    space = _space_from_path(memory, space_path)
    stored = _stored_profile(memory, space, profile_kind, profile_item_name)
    if stored is None:
        return None
    meta = stored["metadata"]
    return SpaceProfile(space_path=space, signals=SpaceSignals.from_dict(meta.get("signals") or {}),
                        scores=dict(meta.get("scores") or {}), label=meta.get("label"),
                        pinned=bool(meta.get("pinned")), previous_label=meta.get("previous_label"),
                        observed_label=meta.get("observed_label"), empty=False, revision_kref=stored["kref"],
                        profiled_at=meta.get("profiled_at", stored["created_at"]))


class SpaceProfiler:
    """Classifies every space of a memory as canonical, working or correspondence knowledge (no LLM).

    Per space it measures churn (revisions per item, revisions created per day in the window, SUPERSEDES
    chain depth), evidence (grades of live revisions) and stability (published share, median age), scores
    and labels them (see ``SPACE_CLASSES`` and ``classify_space``), and stores each profile as a revision of
    the space's ``space-profile`` item, so successive runs form a SUPERSEDES chain. A ``space_class`` space
    attribute (``set_space_attribute``) pins the label; the profiler then reports disagreement as drift.

    Args:
        memory: the ``Memory`` to profile.
        window_days: the window for the revision rate, in days (>= 1).
        max_supersedes_depth: how far SUPERSEDES chains are followed (>= 1).
        dry_run: classify and report, store nothing.
        profile_kind, profile_item_name: the kind and key of the items profiles are stored in.
        clock: time source (default the memory's own clock).

    Raises:
        InvalidArgumentError: a parameter is out of range.
    """

    def __init__(self, memory: Memory | None = None, *, window_days: int = 30, max_supersedes_depth: int = 10,
                 dry_run: bool = False, profile_kind: str = SPACE_PROFILE_KIND,
                 profile_item_name: str = SPACE_PROFILE_ITEM, clock: Clock | None = None,
                 project: str | None = None) -> None:
        memory = memory_or_default(memory, project)
        for name, value in (("window_days", window_days), ("max_supersedes_depth", max_supersedes_depth)):
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 36_500:
                raise InvalidArgumentError(f"{name} must be a whole number from 1 to 36500, not {str(value)[:40]}")
        if not isinstance(dry_run, bool):
            raise InvalidArgumentError("dry_run must be True or False")
        _check_pattern(profile_kind, KIND_PATTERN, "profile kind", InvalidArgumentError)
        if not isinstance(profile_item_name, str) or not profile_item_name.strip():
            raise InvalidArgumentError("profile_item_name must be a non-empty string")
        self.memory = memory
        self.window_days = window_days
        self.max_supersedes_depth = max_supersedes_depth
        self.dry_run = dry_run
        self.profile_kind = profile_kind
        self.profile_item_name = profile_item_name
        self.clock = clock or memory.clock
        self.ignored_kinds = SYSTEM_KINDS | {profile_kind}

    async def run(self) -> dict[str, Any]:
        """Profile every space (in a worker thread); see ``run_sync`` for the result."""
        return await asyncio.to_thread(self.run_sync)

    def run_sync(self) -> dict[str, Any]:
        """Profile every space that holds an item.

        Returns:
            ``{success, spaces_profiled, labels, drift, profiles, errors, dry_run, duration_ms}``: ``labels``
            counts classified spaces per class; ``drift`` lists ``{space_path, from, to, pinned}`` (a pin the
            signals disagree with, or an unpinned label that changed since the last stored profile);
            ``profiles`` maps each space to ``{label, observed_label, pinned, empty, scores, previous_label,
            revision_kref}``; ``errors`` lists ``{space_path, error}`` (a space that failed is skipped, the
            others are still profiled).
        """
        started = self.clock.now()
        by_space: dict[str, list[dict[str, Any]]] = {}
        for item in self.memory.items(include_deprecated=True):
            by_space.setdefault(item["space"], []).append(item)
        by_space = {space: items for space, items in by_space.items()
                    if not all(item["kind"] in JOB_KINDS for item in items)}
        labels = dict.fromkeys(SPACE_CLASSES, 0)
        drift: list[dict[str, Any]] = []
        profiles: dict[str, dict[str, Any]] = {}
        errors: list[dict[str, str]] = []
        for space in sorted(by_space):
            try:
                profile, pin_error = self._profile(space, by_space[space], started)
            except KumihoMemoryError as exc:
                errors.append({"space_path": space, "error": str(exc)})
                continue
            if pin_error:
                errors.append({"space_path": space, "error": pin_error})
            profiles[space] = {"label": profile.label, "observed_label": profile.observed_label,
                               "pinned": profile.pinned, "empty": profile.empty, "scores": profile.scores,
                               "previous_label": profile.previous_label, "revision_kref": profile.revision_kref}
            if profile.empty:
                continue
            labels[profile.label] += 1
            if profile.pinned and profile.observed_label != profile.label:
                drift.append({"space_path": space, "from": profile.label, "to": profile.observed_label, "pinned": True})
            elif not profile.pinned and profile.previous_label not in (None, profile.label):
                drift.append({"space_path": space, "from": profile.previous_label, "to": profile.label,
                              "pinned": False})
        elapsed = (self.clock.now() - started).total_seconds()
        return {"success": not errors, "spaces_profiled": sum(labels.values()), "labels": labels, "drift": drift,
                "profiles": profiles, "errors": errors, "dry_run": self.dry_run,
                "duration_ms": max(0, int(round(elapsed * 1000)))}

    def signals(self, items: Sequence[Mapping[str, Any]], now: _dt.datetime) -> SpaceSignals:
        """Measure one space's items (as ``Memory.items`` lists them) at ``now``."""
        window_start = now - _dt.timedelta(days=self.window_days)
        histogram = dict.fromkeys((*EVIDENCE_LEVELS, UNGRADED), 0)
        revisions = live = in_window = published = deprecated_items = 0
        ages: list[float] = []
        successors: dict[str, list[str]] = {}
        counted = [item for item in items if item["kind"] not in self.ignored_kinds]
        for item in counted:
            deprecated_items += bool(item["deprecated"])
            for revision in self.memory.history(item["item_kref"]):
                revisions += 1
                created = parse_instant(revision["created_at"])
                in_window += window_start <= created <= now
                if item["deprecated"] or revision["deprecated"]:
                    continue
                live += 1
                histogram[parse_evidence(revision["metadata"], revision["tags"], UNGRADED)] += 1
                published += PUBLISHED_TAG in revision["tags"]
                ages.append(max(0.0, (now - created).total_seconds() / 86400))
            for edge in self.memory.edges(item["item_kref"], direction="outgoing", edge_type=SUPERSEDES):
                successors.setdefault(edge["source_kref"], []).append(edge["target_kref"])
        edge_count = sum(len(set(targets)) for targets in successors.values())
        return SpaceSignals(
            items_count=len(counted), live_item_count=len(counted) - deprecated_items, revisions_count=revisions,
            live_revisions_count=live,
            revisions_per_item_mean=round(revisions / len(counted), SCORE_DECIMALS) if counted else 0.0,
            revisions_in_window=in_window,
            revision_rate_per_day=round(in_window / self.window_days, SCORE_DECIMALS),
            supersedes_edge_count=edge_count,
            supersedes_max_depth=_longest_chain(successors, self.max_supersedes_depth),
            evidence_histogram=histogram, deprecated_items=deprecated_items,
            deprecated_revisions=revisions - live,
            deprecation_ratio=round((revisions - live) / revisions, SCORE_DECIMALS) if revisions else 0.0,
            published_share=round(published / live, SCORE_DECIMALS) if live else 0.0,
            median_revision_age_days=round(_median(ages), SCORE_DECIMALS),
            window_start=format_instant(window_start), window_end=format_instant(now))

    def _profile(self, space: str, items: Sequence[Mapping[str, Any]],
                 now: _dt.datetime) -> tuple[SpaceProfile, str]:
        """Profile one space and store the profile; returns it and a pin problem to report ("" if none)."""
        signals = self.signals(items, now)
        stored = _stored_profile(self.memory, space, self.profile_kind, self.profile_item_name)
        previous_label = stored["metadata"].get("label") if stored else None
        pin, pin_error = space_attribute(self.memory, space, SPACE_CLASS_ATTRIBUTE), ""
        if pin is not None and pin.strip().lower() not in SPACE_CLASSES:
            pin_error = f"space_class {pin!r} is not one of {SPACE_CLASSES}; the pin is ignored"
            pin = None
        pin = pin.strip().lower() if pin is not None else None
        if signals.item_count == 0:
            return SpaceProfile(space_path=space, signals=signals, scores={}, label=None, pinned=pin is not None,
                                previous_label=previous_label, empty=True,
                                profiled_at=signals.window_end), pin_error
        scores = space_scores(signals)
        observed = classify_space(scores, graded=signals.graded)
        profile = SpaceProfile(space_path=space, signals=signals, scores=scores, label=pin or observed,
                               pinned=pin is not None, previous_label=previous_label, observed_label=observed,
                               profiled_at=signals.window_end)
        if self.dry_run:
            return profile, pin_error
        record = {"label": profile.label, "observed_label": observed, "pinned": profile.pinned,
                  "scores": scores, "signals": signals.to_dict()}
        metadata = {**record, "memory_type": self.profile_kind, "space_path": space,
                    "previous_label": previous_label, "window_days": self.window_days,
                    "profiled_at": signals.window_end}
        kref = self.memory.remember(canonical_json(record), space=space, kind=self.profile_kind,
                                    title=f"Space profile of {space or '(root)'}: {profile.label}",
                                    metadata=metadata, key=self.profile_item_name)
        return dataclasses.replace(profile, revision_kref=kref), pin_error


# -- skill ingest: SKILL.md files and reference docs as versioned, safety-scanned memories ---------------------
#
# A SKILL.md is YAML-ish frontmatter (name, description, tags) and Markdown; each ``##`` section becomes a
# ``skill`` item keyed by skill name and section slug, so re-ingesting an unchanged section adds nothing and a
# changed one adds a revision. Before anything is published a scan looks for what should never reach an
# agent unreviewed (hidden unicode, injection phrases, secrets, base64 payloads); flagged revisions stay out
# of ``published`` and carry ``quarantine:flagged`` until an operator calls ``clear_quarantine``.

SKILL_KIND = "skill"
QUARANTINE_TAG = "quarantine:flagged"
SKILL_AGENT_COMPAT = ("claude", "zeroclaw", "openclaw")
MAX_SKILL_FILE_BYTES = 1_000_000
_SKILL_KEY_PREFIX = "skill:"
_SUMMARY_CHARS = 300
_SKILL_TITLE_CHARS = 500
_DESCRIPTION_CHARS = 2000


@dataclasses.dataclass(frozen=True)
class SkillSection:
    """One ``##`` section of a skill file.

    Attributes:
        name: the section's slug (``"usage"``; repeated titles get ``-2``, ``-3``).
        title: the heading text. content: the body below the heading (trailing blank lines dropped).
        inline: True when ``<!-- inline -->`` stands in the section or on the line before its heading: the
            section belongs inline in the skill's prompt and is not ingested on its own.
        level: the heading level (always 2: only ``##`` opens a section). line_start: the heading's line (1-based).
    """

    name: str
    title: str
    content: str
    inline: bool = False
    level: int = 2
    line_start: int = 0


@dataclasses.dataclass(frozen=True)
class ParsedSkill:
    """A parsed skill file.

    Attributes:
        name: frontmatter ``name`` ("" without one, as upstream has it).
        key_name: what the skill's items are named by: ``name``, else the folder name for ``SKILL.md``, else
            the file name without ``.md``.
        description: frontmatter ``description``, else the first paragraph of the preamble.
        tags: frontmatter ``tags`` (a list or a comma-separated string), as a list.
        preamble: the text before the first ``##`` heading. title: its ``#`` heading, if any.
        sections: the ``##`` sections in order. frontmatter: every frontmatter key as read.
        path: the file read (resolved). body: the whole text after the frontmatter.
    """

    name: str
    description: str
    tags: list[str]
    preamble: str
    sections: list[SkillSection]
    title: str = ""
    key_name: str = ""
    frontmatter: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    path: str = ""
    body: str = ""


@dataclasses.dataclass(frozen=True)
class IngestResult:
    """What ingesting one skill section (or one file) did, or on a dry run would do.

    Attributes:
        item_name: the item's supersession key (``skill-name/section``, or the file's item name).
        item_kref, revision_kref, artifact_kref: where it is stored (None for what a dry run would create).
        created_new_item: a new item was (would be) created. changed: a new revision was (would be) written.
        quarantined: the revision is held back from ``published`` by the safety scan.
        quarantine_reasons: what the scan found. section: the section slug (None for ``ingest_file``).
    """

    item_name: str
    item_kref: str | None
    revision_kref: str | None
    artifact_kref: str | None
    created_new_item: bool
    quarantined: bool
    quarantine_reasons: tuple[str, ...] = ()
    changed: bool = False
    section: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The result as a JSON-ready dict."""
        return {**dataclasses.asdict(self), "quarantine_reasons": list(self.quarantine_reasons)}


# -- the safety scan -----------------------------------------------------------------------------------------

# Characters that render as nothing (or reorder what is shown) and so can hide text from a human reviewer.
_HIDDEN_RANGES = ((0x061C, 0x061C), (0x180E, 0x180E), (0x200B, 0x200F), (0x202A, 0x202E), (0x2060, 0x2064),
                  (0x2066, 0x2069), (0xFEFF, 0xFEFF), (0xFFF9, 0xFFFB), (0xE0000, 0xE007F), (0xE0100, 0xE01EF))
_HIDDEN_CHARS = re.compile("[" + "".join(f"\\U{low:08x}-\\U{high:08x}" for low, high in _HIDDEN_RANGES) + "]")
_HIDDEN_GROUPS = {(0xE0000, 0xE007F): "U+E0000-U+E007F TAG CHARACTERS",
                  (0xE0100, 0xE01EF): "U+E0100-U+E01EF VARIATION SELECTORS SUPPLEMENT"}
_ZWJ = "\u200d"

# Phrases that try to take over the reading model, matched on casefolded NFKC text with hidden characters
# removed and whitespace collapsed (so "Ignore\u200b previous" and full-width letters do not slip by).
_INJECTION_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple((label, re.compile(pattern)) for label, pattern in (
    ("ignore previous instructions",
     r"\b(?:ignore|disregard|forget|override|bypass)\s+(?:(?:all|any|the|your|of|these|those)\s+)*"
     r"(?:previous|prior|above|earlier|preceding|foregoing|original|system|developer)\s+(?:\w+\s+)?"
     r"(?:instructions?|prompts?|rules|directions|guidelines|messages|directives|context)\b"),
    ("disregard all prior", r"\b(?:disregard|forget|ignore)\s+(?:all|any|everything)\s+(?:\w+\s+)?"
                            r"(?:prior|previous|above|earlier|before|you\s+were\s+told)\b"),
    ("you are now", r"\byou\s+are\s+now\s+(?:a|an|the|my|no\s+longer|free|unrestricted|unfiltered|jailbroken|"
                    r"in\s+(?:developer|dan|god)\s+mode|dan)\b"),
    ("system prompt", r"\bsystem\s+prompt\b"),
    ("new instructions", r"\b(?:new|updated|real|actual|hidden)\s+instructions\s*:"),
    ("do not tell the user", r"\b(?:do\s+not|don't|never)\s+(?:tell|inform|alert|notify|let)\s+(?:the\s+)?user\b"),
    ("jailbreak persona", r"\b(?:act|behave|pretend|roleplay)\s+as\s+(?:an?\s+)?(?:unrestricted|unfiltered|"
                          r"jailbroken|uncensored|evil)\b|\bjailbreak\b|\b(?:dan|developer|god)\s+mode\b"),
    ("reveal hidden instructions", r"\b(?:reveal|print|output|repeat|leak|disclose)\s+(?:your|the)\s+"
                                   r"(?:hidden\s+|secret\s+|initial\s+|original\s+)?(?:instructions|prompt)\b"),
    ("chat-template control tokens", r"<\|(?:im_start|im_end|system|endoftext)\|>|\[/?inst\]|<</?sys>>"),
    ("exfiltration request", r"\b(?:send|post|upload|exfiltrate|forward|email)\s+(?:\w+\s+){0,3}(?:credentials|"
                             r"api\s+keys?|secrets|tokens|passwords|env(?:ironment)?\s+variables)\s+to\b"),
))

_BASE64_RUN = re.compile(r"(?<![A-Za-z0-9+/=_-])(?:[A-Za-z0-9+/]{24,}={0,2}|[A-Za-z0-9_-]{24,}={0,2})"
                         r"(?![A-Za-z0-9+/=_-])")
_BASE64_HINT = re.compile(r"(?i)base64\s+(?:-d|-D|--decode)\b|b64decode|atob\s*\(|frombase64string|"
                          r"base64\.decode|decode\s+(?:the\s+following|this)\b|\|\s*base64\b|base64[- ]encoded")
BASE64_MIN_RUN = 32            # characters, for a run with no decoding hint near it
_BASE64_HINT_WINDOW = 200      # characters either side of a run where a hint counts


def _hidden_character(text: str, index: int) -> bool:
    """A hidden character at ``index``, except a zero-width joiner inside an emoji sequence."""
    if text[index] != _ZWJ:
        return True
    before = text[index - 1] if index else ""
    after = text[index + 1] if index + 1 < len(text) else ""
    return not (before and after and unicodedata.category(before) == "So" and unicodedata.category(after) == "So")


def _readable(data: bytes) -> str | None:
    """``data`` as text when it is mostly printable UTF-8 (at least 16 characters), else None."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    printable = sum(char.isprintable() or char in "\n\r\t" for char in text)
    return text if len(text) >= 16 and printable >= 0.9 * len(text) else None


def _decode_base64(run: str) -> bytes | None:
    stripped = run.rstrip("=")
    if len(stripped) % 4 == 1:
        return None
    padded = stripped + "=" * (-len(stripped) % 4)
    try:
        if "-" in padded or "_" in padded:
            return base64.urlsafe_b64decode(padded)
        return base64.b64decode(padded, validate=True)
    except ValueError:           # binascii.Error is a ValueError
        return None


def _phrase_text(text: str) -> str:
    return " ".join(_HIDDEN_CHARS.sub("", unicodedata.normalize("NFKC", text)).casefold().split())


def scan_skill_text(text: str, *, first_line: int = 1) -> list[str]:
    """Look for content that must not reach an agent unreviewed.

    Four checks: hidden or bidirectional unicode (zero-width and bidi controls, the BOM, invisible
    operators, tag characters); prompt-injection phrases ("ignore previous instructions", "you are now a",
    "system prompt", chat-template tokens, ...); credentials (the ``PIIRedactor`` rules); and base64
    payloads (a long run that decodes to readable text, or any 24+ character run near a decoding hint such
    as ``base64 -d`` or ``atob(``).

    Args:
        text: the text to scan.
        first_line: the line number of the text's first line, for the reasons.

    Returns:
        One reason per finding, in a fixed order; empty when the text is clean. Reasons never quote a
        secret or a decoded payload.

    Raises:
        InvalidArgumentError: ``text`` is not a string.
    """
    if not isinstance(text, str):
        raise InvalidArgumentError(f"text must be a string, not {type(text).__name__}")
    reasons: list[str] = []
    hidden: dict[str, list[int]] = {}
    for match in _HIDDEN_CHARS.finditer(text):
        if _hidden_character(text, match.start()):
            hidden.setdefault(match.group(), []).append(match.start())
    grouped: dict[str, list[int]] = {}
    for char, positions in hidden.items():      # tag characters spell hidden text: one finding, not one per letter
        label = next((group for (low, high), group in _HIDDEN_GROUPS.items() if low <= ord(char) <= high), None)
        grouped.setdefault(label or f"U+{ord(char):04X} {unicodedata.name(char, 'FORMAT CHARACTER')}",
                           []).extend(positions)
    for label, positions in sorted(grouped.items(), key=lambda entry: min(entry[1])):
        line = first_line + text.count("\n", 0, min(positions))
        reasons.append(f"hidden unicode: {label} x{len(positions)} (first on line {line})")
    phrases = _phrase_text(text)
    claimed: list[tuple[int, int]] = []          # one phrase is reported once, by the first pattern it fits
    for label, pattern in _INJECTION_PATTERNS:
        spans = [match.span() for match in pattern.finditer(phrases)]
        fresh = [span for span in spans if not any(span[0] < end and start < span[1] for start, end in claimed)]
        if fresh:
            reasons.append(f"prompt-injection phrase: {label!r}")
        claimed.extend(spans)
    reasons.extend(f"credential: {kind}" for kind in PIIRedactor().find_credentials(text))
    for match in _BASE64_RUN.finditer(text):
        run = match.group()
        window = text[max(0, match.start() - _BASE64_HINT_WINDOW): match.end() + _BASE64_HINT_WINDOW]
        hinted = _BASE64_HINT.search(window) is not None
        decoded = _decode_base64(run)
        readable = _readable(decoded) if decoded is not None else None
        if decoded is None or (readable is None and not hinted) or (not hinted and len(run) < BASE64_MIN_RUN):
            continue
        line = first_line + text.count("\n", 0, match.start())
        why = "decodes to readable text" if readable is not None else "next to a decoding hint"
        inner = []
        if readable is not None:
            inner_phrases = _phrase_text(readable)
            if any(pattern.search(inner_phrases) for _, pattern in _INJECTION_PATTERNS):
                inner.append("a prompt-injection phrase")
            if PIIRedactor().find_credentials(readable):
                inner.append("a credential")
        reasons.append(f"base64 payload: {len(run)} characters on line {line} {why}"
                       + (f" containing {' and '.join(inner)}" if inner else ""))
    return list(dict.fromkeys(reasons))


# -- reading skill files -------------------------------------------------------------------------------------

_SKILL_FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")
_SECTION_HEADING = re.compile(r"^##(?!#)\s+(.*?)\s*#*\s*$")
_TITLE_HEADING = re.compile(r"^#(?!#)\s+(.*?)\s*#*\s*$")
_INLINE_MARKER = re.compile(r"^\s*<!--\s*inline\s*-->\s*$", re.I)
_FRONTMATTER_KEY = re.compile(r"^([A-Za-z_][A-Za-z0-9_-]*)\s*:\s*(.*)$")


def _skill_slug(text: str, max_length: int = 48) -> str:
    """An ASCII slug for section and skill names (``"Error Handling!"`` -> ``"error-handling"``); may be empty."""
    return slugify(text, max_length, fallback="")


def _scalar(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


def _parse_frontmatter(lines: list[str], path: str) -> tuple[dict[str, Any], int]:
    """Read a ``---`` frontmatter block (simple YAML: scalars, ``[a, b]``, ``- item`` lists, ``|``/``>`` blocks).

    Returns the keys and the index of the first line after the block (0 when there is none).
    """
    if not lines or lines[0].strip() != "---":
        return {}, 0
    end = next((index for index in range(1, len(lines)) if lines[index].strip() in ("---", "...")), None)
    if end is None:
        raise InvalidArgumentError(f"{path}: frontmatter opened with '---' is never closed")
    data: dict[str, Any] = {}
    index = 1
    while index < end:
        line = lines[index]
        index += 1
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        match = _FRONTMATTER_KEY.match(line)
        if match is None:
            raise InvalidArgumentError(f"{path}, line {index}: frontmatter line is not 'key: value': {line.strip()!r:.80}")
        key, value = match.group(1), match.group(2).strip()
        if value in ("|", ">", "|-", ">-"):
            block = []
            while index < end and (not lines[index].strip() or lines[index][:1] in " \t"):
                block.append(lines[index].strip())
                index += 1
            data[key] = ("\n" if value.startswith("|") else " ").join(block).strip()
        elif value.startswith("[") and value.endswith("]"):
            data[key] = [_scalar(part) for part in value[1:-1].split(",") if part.strip()]
        elif not value:
            items = []
            while index < end and lines[index].lstrip().startswith("- "):
                items.append(_scalar(lines[index].lstrip()[2:]))
                index += 1
            data[key] = items if items else ""
        else:
            data[key] = _scalar(value)
    return data, end + 1


def _first_paragraph(text: str) -> str:
    """The first paragraph of Markdown text that is not a heading, comment or fence, on one line."""
    paragraph: list[str] = []
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped:
            if paragraph:
                break
            continue
        if stripped.startswith(("#", "<!--", "```", "~~~")):
            if paragraph:
                break
            continue
        paragraph.append(stripped)
    return " ".join(paragraph)


def _tag_list(value: Any, path: str) -> tuple[str, ...]:
    if value in (None, ""):
        return ()
    parts = value.split(",") if isinstance(value, str) else value
    if not isinstance(parts, list) or not all(isinstance(part, str) for part in parts):
        raise InvalidArgumentError(f"{path}: frontmatter tags must be a list of strings")
    return tuple(dict.fromkeys(part.strip() for part in parts if part.strip()))


def _strip_trailing_blank(lines: list[str]) -> list[str]:
    while lines and not lines[-1].strip():
        lines = lines[:-1]
    return lines


def _check_relative_parts(text: str) -> None:
    if ".." in re.split(r"[\\/]", text):
        raise InvalidArgumentError(f"{text!r} climbs out of its folder with '..'; give a path inside it")


def _confined_path(path: Any, root: Any, *, directory: bool = False) -> str:
    """Resolve ``path`` (relative paths against ``root``) and insist it stays inside ``root``.

    ``root`` defaults to the folder the path names (for a file, its parent). ``..`` is refused outright, and a
    symlink anywhere on the way that resolves outside ``root`` is refused.

    Returns:
        The resolved path. Raises InvalidArgumentError (outside, wrong type) or NotFoundError (missing).
    """
    if not isinstance(path, (str, os.PathLike)) or isinstance(path, bytes):
        raise InvalidArgumentError(f"a path must be a string, not {type(path).__name__}")
    text = os.fspath(path)
    if not text or "\x00" in text:
        raise InvalidArgumentError(f"invalid path {text!r}")
    _check_relative_parts(text)
    if root is None:
        absolute = os.path.abspath(text)
        root_dir = absolute if directory else os.path.dirname(absolute)
    else:
        if not isinstance(root, (str, os.PathLike)) or isinstance(root, bytes):
            raise InvalidArgumentError(f"root must be a path, not {type(root).__name__}")
        root_dir = os.path.abspath(os.fspath(root))
        absolute = text if os.path.isabs(text) else os.path.join(root_dir, text)
    real_root, real = os.path.realpath(root_dir), os.path.realpath(absolute)
    try:
        inside = os.path.commonpath([real_root, real]) == real_root
    except ValueError:           # different drives
        inside = False
    if not inside:
        raise InvalidArgumentError(f"{text!r} resolves outside {root_dir!r}; refusing to read it")
    if not os.path.exists(real):
        raise NotFoundError(f"no such {'folder' if directory else 'file'}: {text!r}")
    if directory != os.path.isdir(real) or not (directory or os.path.isfile(real)):
        raise InvalidArgumentError(f"{text!r} is not a {'folder' if directory else 'regular file'}")
    return real


def _read_skill_text(real: str) -> str:
    size = os.stat(real).st_size
    if size > MAX_SKILL_FILE_BYTES:
        raise InvalidArgumentError(f"{real} is {size} bytes; skill files are limited to {MAX_SKILL_FILE_BYTES}")
    try:
        with open(real, encoding="utf-8-sig", newline="") as stream:
            return stream.read().replace("\r\n", "\n").replace("\r", "\n")
    except UnicodeDecodeError as exc:
        raise InvalidArgumentError(f"{real} is not UTF-8 text: {exc.reason} at byte {exc.start}") from exc
    except OSError as exc:
        raise InvalidArgumentError(f"cannot read {real}: {exc.strerror}") from exc


def _parse_skill_text(text: str, path: str) -> ParsedSkill:
    lines = text.split("\n")
    frontmatter, start = _parse_frontmatter(lines, path)
    preamble: list[str] = []
    chunks: list[tuple[str, int, list[str], bool]] = []      # (title, line, body lines, inline)
    fence: str | None = None
    current = preamble
    for number, line in enumerate(lines[start:], start=start + 1):
        fence_match = _SKILL_FENCE.match(line)
        if fence_match:
            marker = fence_match.group(1)
            if fence is None:
                fence = marker                            # CommonMark: closed by the same character, as long
            elif marker[0] == fence[0] and len(marker) >= len(fence):
                fence = None
        heading = _SECTION_HEADING.match(line) if fence is None and not fence_match else None
        if heading is None:
            current.append(line)
            continue
        body = _strip_trailing_blank(current)
        inline_before = bool(body) and _INLINE_MARKER.match(body[-1]) is not None
        if inline_before:
            del current[len(body) - 1:]
        chunks.append((heading.group(1), number, [], inline_before))
        current = chunks[-1][2]
    default_name = os.path.basename(os.path.dirname(path)) if os.path.basename(path).lower() == "skill.md" else \
        os.path.splitext(os.path.basename(path))[0]
    name = str(frontmatter.get("name") or "").strip()
    key_name = name or default_name.strip()
    if not _skill_slug(key_name):
        raise InvalidArgumentError(f"{path}: the skill name {key_name!r} has no letters or digits to name items by")
    preamble_text = "\n".join(_strip_trailing_blank(preamble)).strip("\n")
    title = next((match.group(1) for match in map(_TITLE_HEADING.match, preamble) if match), "")
    sections, used = [], {}
    for heading_title, number, body_lines, inline_before in chunks:
        marked = [index for index, line in enumerate(body_lines) if _INLINE_MARKER.match(line)]
        body = [line for index, line in enumerate(body_lines) if index not in marked]
        slug = _skill_slug(heading_title) or "section"
        used[slug] = used.get(slug, 0) + 1
        if used[slug] > 1:
            slug = f"{slug}-{used[slug]}"
        sections.append(SkillSection(name=slug, title=heading_title or slug, line_start=number,
                                     content="\n".join(_strip_trailing_blank(body)).strip("\n"),
                                     inline=inline_before or bool(marked)))
    description = frontmatter.get("description")
    description = str(description).strip() if description else _first_paragraph(preamble_text)
    body_text = "\n".join(lines[start:]).strip("\n")
    return ParsedSkill(name=name, description=description, tags=list(_tag_list(frontmatter.get("tags"), path)),
                       preamble=preamble_text, sections=sections, title=title, frontmatter=frontmatter,
                       path=path, body=body_text, key_name=key_name)


def parse_skill(path: str | os.PathLike[str], *, root: str | os.PathLike[str] | None = None) -> ParsedSkill:
    """Read a SKILL.md (or any Markdown file) into frontmatter, preamble and ``##`` sections.

    Args:
        path: the file; relative paths are taken from ``root``.
        root: the folder the file must stay inside (default: the file's own folder, so a symlink that
            leads elsewhere is refused).

    Returns:
        A ``ParsedSkill``. ``##`` inside fenced code blocks does not open a section.

    Raises:
        InvalidArgumentError: the path leaves ``root`` or has ``..``; not UTF-8; larger than
            ``MAX_SKILL_FILE_BYTES``; malformed frontmatter. NotFoundError: no such file.
    """
    real = _confined_path(path, root)
    return _parse_skill_text(_read_skill_text(real), real)


# -- writing skills ------------------------------------------------------------------------------------------

@dataclasses.dataclass
class _PlannedSkillWrite:
    """One item's worth of ingest, decided before anything is written."""

    key: str
    section: str | None
    title: str
    content: str
    metadata: dict[str, Any]
    artifact: tuple[str, str]
    reasons: tuple[str, ...]
    evidence_level: str | None
    held: dict[str, Any] | None           # the existing item, if any
    latest: dict[str, Any] | None         # its latest revision
    changed: bool
    demote: bool = False                  # the item is official and the operator gave a lower grade


def _checked_skill_options(space: Any, evidence_level: Any, tags: Any = None) -> tuple[str, tuple[str, ...]]:
    space = normalize_space(space)
    if evidence_level is not None:
        evidence_tag(evidence_level)
    if tags is None:
        return space, ()
    if isinstance(tags, str) or not isinstance(tags, (list, tuple)) or not all(isinstance(t, str) for t in tags):
        raise InvalidArgumentError("tags must be a list of strings")
    return space, tuple(dict.fromkeys(t.strip() for t in tags if t.strip()))


def _skill_index(memory: Any, space: str) -> dict[str, dict[str, Any]]:
    """The skill items in exactly ``space`` by supersession key (deprecated ones too)."""
    return {item["key"]: item for item in memory.items(space=space, kind=SKILL_KIND, include_deprecated=True)
            if item["space"] == space and item["key"]}


_MAX_QUARANTINE_REASONS = 50


def _plan(memory: Any, index: Mapping[str, dict[str, Any]], *, key: str, section: str | None, title: str,
          content: str, summary: str, description: str, tags: tuple[str, ...], source_skill: str, real: str,
          line_start: int, evidence_level: str | None, scan_prefix: str = "") -> _PlannedSkillWrite:
    reasons = tuple(scan_skill_text(f"{title}\n{content}", first_line=max(1, line_start)))
    if scan_prefix:
        reasons = tuple(dict.fromkeys(reasons + tuple(f"frontmatter/preamble: {reason}"
                                                      for reason in scan_skill_text(scan_prefix))))
    if len(reasons) > _MAX_QUARANTINE_REASONS:                # a hostile file still fits in quarantine
        reasons = reasons[:_MAX_QUARANTINE_REASONS] + (
            f"... and {len(reasons) - _MAX_QUARANTINE_REASONS} more findings",)
    redactor = PIIRedactor()
    # A flagged revision is stored for review, but a secret never enters the store: the artifact points at
    # the original file.
    title, content = redactor.strip_credentials(title)[:_SKILL_TITLE_CHARS], redactor.strip_credentials(content)
    summary = redactor.strip_credentials(summary)[:_SUMMARY_CHARS]
    description = redactor.strip_credentials(description)[:_DESCRIPTION_CHARS]
    if not content.strip():
        content = f"## {title}"
    fingerprint = content_hash(canonical_json({"title": title, "content": content, "tags": list(tags),
                                               "description": description}))
    metadata: dict[str, Any] = {"memory_type": SKILL_KIND, "title": title, "summary": summary,
                                "description": description, "tags": list(tags), "source_skill": source_skill,
                                "source_path": real, "line_start": line_start, "skill_hash": fingerprint}
    if section is not None:
        metadata["section"] = section
    if reasons:
        metadata.update(quarantined="true", quarantine_reasons=list(reasons))
    else:
        metadata["agent_compat"] = list(SKILL_AGENT_COMPAT)
    # every write is checked here, before the first one happens, so a file that cannot be stored writes nothing
    _checked_metadata(metadata)
    _checked_text(content, "content", limit=MAX_CONTENT_CHARS)
    held = index.get(key)
    latest = memory.get(held["item_kref"]) if held is not None and held["latest_revision"] is not None else None
    # A grade counts only when given: re-ingesting without --evidence-level leaves a graded skill alone.
    changed = latest is None or latest["metadata"].get("skill_hash") != fingerprint or (
        evidence_level is not None and latest["metadata"].get("evidence_level") != evidence_level)
    held_level = parse_evidence(latest["metadata"], latest["tags"]) if latest is not None else None
    artifact_name = f"{section or _skill_slug(key.rsplit('/', 1)[-1]) or 'skill'}.md"
    return _PlannedSkillWrite(key=key, section=section, title=title, content=content, metadata=metadata,
                              artifact=(artifact_name, real), reasons=reasons,
                              evidence_level=evidence_level if evidence_level is not None else held_level,
                              held=held, latest=latest, changed=changed,
                              demote=held_level == OFFICIAL and evidence_level not in (None, OFFICIAL))


def _plan_skill(memory: Any, parsed: ParsedSkill, index: Mapping[str, dict[str, Any]], *,
                section_filter: Any, evidence_level: str | None) -> list[_PlannedSkillWrite]:
    wanted = None
    if section_filter is not None:
        wanted = {section_filter} if isinstance(section_filter, str) else set(section_filter)
        known = {section.name for section in parsed.sections if not section.inline}
        unknown = sorted(wanted - known)
        if unknown:
            raise InvalidArgumentError(f"{parsed.path}: no ingestible section {', '.join(map(repr, unknown))}; "
                                       f"sections: {', '.join(sorted(known)) or '(none)'}")
    skill_slug = _skill_slug(parsed.key_name)
    skill_level = "\n".join(part for part in (parsed.key_name, parsed.description, " ".join(parsed.tags),
                                              parsed.preamble) if part)
    plans = []
    for section in parsed.sections:
        if section.inline or (wanted is not None and section.name not in wanted):
            continue
        plans.append(_plan(memory, index, key=f"{_SKILL_KEY_PREFIX}{skill_slug}/{section.name}", section=section.name,
                           title=f"{parsed.key_name}: {section.title}", content=section.content,
                           summary=_first_paragraph(section.content), description=parsed.description,
                           tags=tuple(parsed.tags), source_skill=parsed.key_name, real=parsed.path,
                           line_start=section.line_start, evidence_level=evidence_level, scan_prefix=skill_level))
    return plans


def _plan_file(memory: Any, parsed: ParsedSkill, index: Mapping[str, dict[str, Any]], *, item_name: str | None,
               tags: tuple[str, ...], evidence_level: str | None) -> _PlannedSkillWrite:
    name = item_name if item_name is not None else os.path.splitext(os.path.basename(parsed.path))[0]
    if not isinstance(name, str) or not _skill_slug(name):
        raise InvalidArgumentError(f"item_name {name!r} has no letters or digits to name an item by")
    body = parsed.body if parsed.body.strip() else name
    return _plan(memory, index, key=f"{_SKILL_KEY_PREFIX}{_skill_slug(name)}", section=None,
                 title=parsed.title or name, content=body, summary=_first_paragraph(parsed.preamble or body),
                 description=parsed.description, tags=tuple(dict.fromkeys([*parsed.tags, *tags])),
                 source_skill=name, real=parsed.path, line_start=1, evidence_level=evidence_level)


def _apply(memory: Any, plans: Sequence[_PlannedSkillWrite], space: str, dry_run: bool) -> list[IngestResult]:
    """Write the plans that changed (none on a dry run); one result per plan, in order."""
    results = []
    for plan in plans:
        quarantined = bool(plan.reasons)
        item_kref = plan.held["item_kref"] if plan.held else None
        if not plan.changed:
            latest = plan.latest or {}
            stored_flag = latest.get("metadata", {}).get("quarantined") == "true"
            results.append(IngestResult(
                item_name=plan.key[len(_SKILL_KEY_PREFIX):], item_kref=item_kref, revision_kref=latest.get("kref"),
                artifact_kref=f"{latest['kref']}&a={plan.artifact[0]}" if latest else None, created_new_item=False,
                quarantined=stored_flag and PUBLISHED_TAG not in latest.get("tags", ()),
                quarantine_reasons=tuple(latest.get("metadata", {}).get("quarantine_reasons") or ()),
                changed=False, section=plan.section))
            continue
        revision_kref = None
        if not dry_run:
            revision_kref = _write_skill_revision(memory, plan, space)
            item_kref = revision_kref.split("?", 1)[0]
        results.append(IngestResult(
            item_name=plan.key[len(_SKILL_KEY_PREFIX):], item_kref=item_kref, revision_kref=revision_kref,
            artifact_kref=f"{revision_kref}&a={plan.artifact[0]}" if revision_kref else None,
            created_new_item=plan.held is None, quarantined=quarantined, quarantine_reasons=plan.reasons,
            changed=True, section=plan.section))
    return results


def _write_skill_revision(memory: Any, plan: _PlannedSkillWrite, space: str) -> str:
    """Add one revision; a flagged one never inherits ``published`` from the item's older revisions."""
    tags = [QUARANTINE_TAG] if plan.reasons else [PUBLISHED_TAG]
    options = dict(space=space, kind=SKILL_KIND, title=plan.title, metadata=plan.metadata, tags=tags,
                   evidence_level=plan.evidence_level,
                   artifacts=[{"name": plan.artifact[0], "location": plan.artifact[1]}])
    if plan.held is None:
        return memory.remember(plan.content, key=plan.key, **options)
    if plan.demote:
        # An official belief is only ever regraded explicitly (``set_evidence``); a plain new revision with a
        # lower grade would be kept apart as a contradiction of it.
        regraded = memory.set_evidence(plan.latest["kref"], plan.evidence_level,
                                       reason=f"skill re-ingested as {plan.evidence_level}")
        if plan.latest["metadata"].get("skill_hash") == plan.metadata["skill_hash"]:
            return regraded
    published_kref = None
    if plan.reasons:
        # The store carries ``published`` forward to a new revision of a published item; take it off first
        # and put it back on the clean revision afterwards, so the flagged text is never published, even
        # for a moment (if this fails half way the item is unpublished, never wrongly published).
        with contextlib.suppress(NotFoundError):
            published_kref = memory.get(f"{plan.held['item_kref']}?t={PUBLISHED_TAG}")["kref"]
        if published_kref is not None:
            memory.untag(published_kref, PUBLISHED_TAG)
    try:
        return memory.remember(plan.content, item=plan.held["item_kref"], **options)
    finally:
        if published_kref is not None:
            memory.tag(published_kref, PUBLISHED_TAG)


def _memory_first(first: Any, second: Any, memory: Memory | None, project: str | None,
                  name: str) -> tuple[Memory, Any]:
    """Read both call forms: ours, ``f(memory, target)``, and upstream's, ``f(target, project=...)`` on the
    default memory (or ``memory=``)."""
    if isinstance(first, Memory):
        if memory is not None:
            raise InvalidArgumentError("give the memory once: first, or as memory=")
        if second is None:
            raise InvalidArgumentError(f"{name} is missing")
        return memory_or_default(first, project), second
    if second is not None:
        raise InvalidArgumentError(f"the first argument must be a Memory when {name} is given too")
    return memory_or_default(memory, project), first


def _skill_space(space: str | None, space_name: str | None) -> str:
    """``space`` (ours) or ``space_name`` (upstream's), default ``"Skills"``."""
    if space is not None and space_name is not None and normalize_space(space) != normalize_space(space_name):
        raise InvalidArgumentError(f"space {space!r} and space_name {space_name!r} disagree; give one")
    return space if space is not None else (space_name if space_name is not None else "Skills")


def ingest_skill(memory_or_path: Memory | str | os.PathLike[str], path: str | os.PathLike[str] | None = None, *,
                 space: str | None = None, section_filter: Any = None, dry_run: bool = False,
                 evidence_level: str | None = None, root: str | os.PathLike[str] | None = None,
                 memory: Memory | None = None, project: str | None = None,
                 space_name: str | None = None) -> list[IngestResult]:
    """Ingest a SKILL.md: each ``##`` section (not marked inline) becomes a versioned ``skill`` item.

    Each section is an item keyed ``skill-name/section-slug`` in ``space``: new -> created; unchanged (same
    title, content, tags and description, and the same evidence level when one is given) -> nothing
    written; changed -> a new revision
    (SUPERSEDES the previous one). Each revision gets the metadata ``title, summary, description, tags,
    source_skill, section, source_path, skill_hash`` and an artifact ``<section>.md`` pointing at the file.
    A section that passes ``scan_skill_text`` (together with the frontmatter and preamble) is tagged
    ``published`` (with ``agent_compat``); a flagged one gets ``quarantine:flagged``, metadata
    ``quarantined="true"`` and ``quarantine_reasons``, and no ``published`` tag until ``clear_quarantine``.
    Credentials are redacted from what is stored.

    Both call forms work: ``ingest_skill(memory, path)`` and upstream's ``ingest_skill(path, project=...,
    space_name=...)`` on the default memory (``default_memory``) or ``memory=``.

    Args:
        memory_or_path: the ``Memory`` to write to (then ``path`` follows), or the path itself.
        path: the skill file (see ``parse_skill`` for ``root``).
        memory, project: with upstream's form, the memory (default: ``default_memory(project=project)``).
        space: the space for the items (default ``"Skills"``); ``space_name`` is upstream's name for it.
        section_filter: a section slug or list of slugs to ingest (only).
        dry_run: report what would happen, write nothing. evidence_level: grade every revision written
            (without it a new revision keeps the grade its section already has).

    Returns:
        One ``IngestResult`` per ingested section, in file order.

    Raises:
        InvalidArgumentError: bad path (outside ``root``, ``..``), unreadable file, unknown section or evidence
            level; NotFoundError: no such file. On any error nothing is written.
    """
    memory, path = _memory_first(memory_or_path, path, memory, project, 'path')
    space = _skill_space(space, space_name)
    space, _ = _checked_skill_options(space, evidence_level)
    parsed = parse_skill(path, root=root)
    plans = _plan_skill(memory, parsed, _skill_index(memory, space), section_filter=section_filter,
                        evidence_level=evidence_level)
    return _apply(memory, plans, space, dry_run)


def ingest_file(memory_or_path: Memory | str | os.PathLike[str], path: str | os.PathLike[str] | None = None, *,
                item_name: str | None = None, space: str | None = None, tags: Sequence[str] | None = None,
                dry_run: bool = False, evidence_level: str | None = None,
                root: str | os.PathLike[str] | None = None, memory: Memory | None = None,
                project: str | None = None, space_name: str | None = None) -> IngestResult:
    """Ingest a whole Markdown document (a reference doc) as one versioned ``skill`` item.

    The title is the first ``#`` heading (else the item name), the summary the first paragraph; ``tags``
    join the frontmatter tags. Versioning, the safety scan and quarantine work as in ``ingest_skill``.

    Args:
        item_name: the item's name (default the file name without ``.md``). Other arguments, and the two call
            forms (``ingest_file(memory, path)``, upstream's ``ingest_file(path, project=...)``), as
            ``ingest_skill``.

    Returns:
        The ``IngestResult``.

    Raises:
        As ``ingest_skill``.
    """
    memory, path = _memory_first(memory_or_path, path, memory, project, 'path')
    space = _skill_space(space, space_name)
    space, checked_tags = _checked_skill_options(space, evidence_level, tags)
    parsed = parse_skill(path, root=root)
    plan = _plan_file(memory, parsed, _skill_index(memory, space), item_name=item_name, tags=checked_tags,
                      evidence_level=evidence_level)
    return _apply(memory, [plan], space, dry_run)[0]


def _is_skill_file(parsed: ParsedSkill) -> bool:
    return os.path.basename(parsed.path).lower() == "skill.md" or "name" in parsed.frontmatter


def ingest_batch(memory_or_directory: Memory | str | os.PathLike[str],
                 directory: str | os.PathLike[str] | None = None, *, space: str | None = None,
                 tags: Sequence[str] | None = None, dry_run: bool = False, evidence_level: str | None = None,
                 root: str | os.PathLike[str] | None = None, memory: Memory | None = None,
                 project: str | None = None, space_name: str | None = None) -> list[IngestResult]:
    """Ingest every ``*.md`` in a folder (sorted by name), and every ``<sub-folder>/SKILL.md``.

    A file named ``SKILL.md`` or with a frontmatter ``name`` is ingested by sections (``ingest_skill``); any
    other file whole (``ingest_file``). Every file is read, checked and planned before anything is written.

    Args:
        directory: the folder (it must stay inside ``root`` when given; every file must stay inside it).
        Other arguments as ``ingest_file``.

    Returns:
        All results, file by file.

    Raises:
        As ``ingest_skill``, for any file: then nothing at all is written.
    """
    memory, directory = _memory_first(memory_or_directory, directory, memory, project, 'directory')
    space = _skill_space(space, space_name)
    space, checked_tags = _checked_skill_options(space, evidence_level, tags)
    real_dir = _confined_path(directory, root, directory=True)
    names = []
    for entry in sorted(os.listdir(real_dir)):
        full = os.path.join(real_dir, entry)
        if entry.lower().endswith(".md") and not os.path.isdir(full):
            names.append(entry)
        elif os.path.isdir(full) and os.path.lexists(os.path.join(full, "SKILL.md")):
            names.append(os.path.join(entry, "SKILL.md"))
    index = _skill_index(memory, space)
    plans: list[_PlannedSkillWrite] = []
    keys: dict[str, str] = {}
    for name in names:
        parsed = parse_skill(name, root=real_dir)
        planned = _plan_skill(memory, parsed, index, section_filter=None, evidence_level=evidence_level) \
            if _is_skill_file(parsed) else [_plan_file(memory, parsed, index, item_name=None, tags=checked_tags,
                                                       evidence_level=evidence_level)]
        for plan in planned:
            if plan.key in keys:
                raise InvalidArgumentError(f"{parsed.path} and {keys[plan.key]} both ingest as "
                                           f"{plan.key[len(_SKILL_KEY_PREFIX):]!r}; rename one")
            keys[plan.key] = parsed.path
        plans.extend(planned)
    return _apply(memory, plans, space, dry_run)


def clear_quarantine(memory_or_kref: Memory | str, revision_kref: str | None = None, *,
                     memory: Memory | None = None, project: str | None = None) -> dict[str, Any]:
    """Publish a quarantined skill revision after review: tag it ``published``, remove ``quarantine:flagged``.

    The revision's metadata keeps the scan's verdict (revisions are immutable); the tags say what is in force.
    Both forms work: ``clear_quarantine(memory, kref)`` and upstream's ``clear_quarantine(kref)`` on the
    default memory (or ``memory=``).

    Returns:
        ``{revision_kref, item_kref, published, quarantine_reasons}``.

    Raises:
        InvalidArgumentError: the revision was never quarantined, or is deprecated. NotFoundError: no such
            revision.
    """
    memory, revision_kref = _memory_first(memory_or_kref, revision_kref, memory, project, 'revision_kref')
    revision = memory.get(revision_kref)
    if revision["metadata"].get("quarantined") != "true":
        raise InvalidArgumentError(f"{revision['kref']} was not quarantined by a skill scan")
    if revision["deprecated"]:
        raise InvalidArgumentError(f"{revision['kref']} is deprecated; restore it before publishing it")
    memory.tag(revision["kref"], PUBLISHED_TAG)
    memory.untag(revision["kref"], QUARANTINE_TAG)
    return {"revision_kref": revision["kref"], "item_kref": revision["item_kref"], "published": True,
            "quarantine_reasons": list(revision["metadata"].get("quarantine_reasons") or [])}


def list_skills(memory: Memory | None = None, *, space: str = "Skills", project: str | None = None) -> list[dict[str, Any]]:
    """The live skill items in ``space``: ``[{item_name, item_kref, revision_kref, title, published_kref,
    quarantined}]`` where ``quarantined`` says the latest revision is held back by the scan."""
    memory = memory_or_default(memory, project)
    space = normalize_space(space)
    listed = []
    for item in memory.items(space=space, kind=SKILL_KIND):
        if item["space"] != space or item["latest_revision"] is None:
            continue
        latest = memory.get(item["item_kref"])
        published = None
        with contextlib.suppress(NotFoundError):
            published = memory.get(f"{item['item_kref']}?t={PUBLISHED_TAG}")["kref"]
        key = item["key"] or item["name"]
        listed.append({"item_name": key[len(_SKILL_KEY_PREFIX):] if key.startswith(_SKILL_KEY_PREFIX) else key,
                       "item_kref": item["item_kref"], "revision_kref": latest["kref"], "title": latest["title"],
                       "published_kref": published,
                       "quarantined": latest["metadata"].get("quarantined") == "true"
                       and PUBLISHED_TAG not in latest["tags"]})
    return listed


# -- Dream State: tidying memory between sessions, behind hard guardrails ----------------------------------------
#
# A run walks the memories written since its cursor, assesses them in batches (by heuristics, or by an LLM
# when one is given), and applies what passes the guardrails below. The guardrails are code, applied after
# any suggestion, whatever the policy text or the model says:
#
#   the revision is graded official                 -> never deprecated
#   it is published (tag)                           -> never, unless allow_published_deprecation
#   it is younger than min_age_days (or age unknown) -> not yet
#   it is corroborated                              -> only with a stated reason of 10+ characters
#   another memory got an edge to it this run       -> kept (something now refers to it)
#   deprecations so far reach the ratio cap          -> the rest wait for the next run
#
# Deprecation is soft (the revision stays addressable and can be restored); enrichment never touches the
# evidence carriers (``evidence:`` tags, ``evidence_level``, ``source``, ``sources``, ``confidence``).

DREAM_SPACE = "_dream_state"
DREAM_KIND = "dream-state"
DREAM_MIN_AGE_DAYS = 7
DREAM_MAX_FAILURES = 2
ACKNOWLEDGEMENTS = frozenset("""
ok okay k kk sure thanks thank thx ty yes yeah yep no nope lol haha cool great nice fine alright right hi hello
hey bye got it np sounds sound good awesome perfect gotcha noted understood agreed will done welcome
appreciated appreciate wow oh ah hmm absolutely definitely exactly totally cheers
""".split())

DREAM_SYSTEM_PROMPT = """You tidy an AI agent's long-term memory. For each memory in the batch decide:
relevance_score (0..1), should_deprecate (true only for duplicates, superseded leftovers, or stale
chit-chat with no lasting value), deprecation_reason (one sentence), suggested_tags (short lowercase),
metadata_updates ([{key, value}] facts worth indexing: topics, entities), related_indices (indices of other
memories in this batch it relates to) and relationship_type (DERIVED_FROM, REFERENCED, DEPENDS_ON or
SUPERSEDES). Be conservative: when in doubt, keep. Answer with one JSON object {"assessments": [...]}, one
entry per memory, each with its "index"."""


DREAM_VERIFIER_PROMPT = """You double-check proposed deprecations of an AI agent's memories. For each proposal
answer whether to refute it: refute (true) when the memory may still be useful or the reason does not hold;
false only when you are sure it is redundant or obsolete. Answer with one JSON object {"verdicts": [{"index",
"refute", "why"}]}, one entry per proposal."""


@dataclasses.dataclass
class MemoryAssessment:
    """What a Dream State assessment says about one revision (the reference's fields)."""

    revision_kref: str
    relevance_score: float = 0.5
    should_deprecate: bool = False
    deprecation_reason: str = ""
    suggested_tags: list[str] = dataclasses.field(default_factory=list)
    metadata_updates: dict[str, Any] = dataclasses.field(default_factory=dict)
    related_memories: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    category: str = ""          # duplicate | superseded | stale | llm: why it was proposed


@dataclasses.dataclass
class DreamStateStats:
    """Counters of one Dream State run."""

    events_processed: int = 0
    revisions_assessed: int = 0
    deprecated: int = 0
    metadata_updated: int = 0
    tags_added: int = 0
    edges_created: int = 0
    last_cursor: str | None = None
    duration_ms: float = 0.0
    errors: list[str] = dataclasses.field(default_factory=list)
    deprecations_proposed: int = 0
    guarded_skips: dict[str, int] = dataclasses.field(default_factory=dict)
    refuted_skips: int = 0
    parked: int = 0


def _duplicate_key(text: str) -> tuple[str, ...]:
    """What two copies of one statement share: its words in order, casefolded, without punctuation (so a
    negation or another word order is another statement)."""
    return tuple(re.findall(r"\w+", text.casefold()))


class DreamState:
    """Offline consolidation of a ``Memory``: deprecate duplicates and leftovers, enrich, link.

    Args:
        memory: the ``Memory`` to tidy.
        llm_adapter: an ``LLMAdapter``; with one, batches are assessed by the model (structured JSON), else
            by heuristics (exact and near-exact duplicates in a space, items superseded from another item but
            still live, stale low-value chat messages; contradictions are reported and tagged ``contested``).
        model: the model name passed to the adapter.
        batch_size: memories per assessment batch.
        dry_run: assess and report, change nothing (not even the cursor).
        max_deprecation_ratio: at most ``max(1, int(assessed * ratio))`` deprecations per run, 0.1..0.9.
        allow_published_deprecation: let a ``published`` revision be deprecated.
        kind_filter: only items of these kinds (default every kind but the system ones).
        extra_instructions: deployment policy appended to the LLM prompt (it may only tighten; the
            guardrails apply in code whatever it says). Default ``$KUMIHO_DREAM_EXTRA_INSTRUCTIONS`` via
            ``from_env``.
        min_age_days: a revision younger than this is never deprecated (``$KUMIHO_DREAM_MIN_AGE_DAYS``, 7).
        stale_after_days: a chat message this old with no lasting content may be deprecated (90).
        max_failures: an item whose assessment failed this many runs is parked (skipped from then on).
        report_dir: also write each run's Markdown report there as ``dream_state_{time}.md``.
        progress: ``callable(done, total)`` after each batch (the CLI prints it on stderr).
        project: the reference's argument; if given it must be the memory's project.
        cursor_item_name: the space of the cursor item (``_dream_state``).
        artifact_root: with no ``report_dir``, reports go to ``{artifact_root}/{project}/{cursor}/reports``.
        verifier: an ``LLMAdapter`` asked once per run to refute the deprecations about to be applied; one
            goes ahead only on an explicit ``refute: false`` (``refuted_skips`` counts the others).
        verifier_model: the model name for the verifier.

    The cursor (time of the newest memory processed), the failure counts and the parked items live in the
    graph, as revisions of the ``_dream_state`` item (kind ``dream-state``) whose content is the run's
    report; a run resumes where the last one stopped, and a failed batch is assessed again next run.

    Raises:
        InvalidArgumentError: ``max_deprecation_ratio`` outside 0.1..0.9 or another bad argument.
    """

    def __init__(self, memory: Memory | None = None, *, llm_adapter: Any = None, model: str = "", batch_size: int = 20,
                 dry_run: bool = False, max_deprecation_ratio: float = 0.5,
                 allow_published_deprecation: bool = False, kind_filter: Sequence[str] | str | None = None,
                 extra_instructions: str | None = None, min_age_days: float = DREAM_MIN_AGE_DAYS,
                 stale_after_days: float = 90.0, max_failures: int = DREAM_MAX_FAILURES,
                 report_dir: str | os.PathLike[str] | None = None,
                 progress: Callable[[int, int], None] | None = None, project: str | None = None,
                 cursor_item_name: str = DREAM_SPACE, artifact_root: str | os.PathLike[str] | None = None,
                 verifier: Any = None, verifier_model: str = "") -> None:
        memory = memory_or_default(memory, project)
        if extra_instructions is None:        # explicit argument > $KUMIHO_DREAM_EXTRA_INSTRUCTIONS; "" turns it off
            extra_instructions = os.environ.get("KUMIHO_DREAM_EXTRA_INSTRUCTIONS", "")
        cursor_item_name = _check_pattern(cursor_item_name, SEGMENT_PATTERN, "cursor_item_name", InvalidArgumentError)
        if report_dir is None and artifact_root is not None:
            report_dir = os.path.join(os.fspath(artifact_root), memory.project, cursor_item_name, "reports")
        if not isinstance(max_deprecation_ratio, (int, float)) or not 0.1 <= max_deprecation_ratio <= 0.9:
            raise InvalidArgumentError(f"max_deprecation_ratio must be between 0.1 and 0.9, not {max_deprecation_ratio!r}")
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
            raise InvalidArgumentError(f"batch_size must be a positive integer, not {batch_size!r}")
        for name, value in (("min_age_days", min_age_days), ("stale_after_days", stale_after_days)):
            if not isinstance(value, (int, float)) or value < 0:
                raise InvalidArgumentError(f"{name} must be a non-negative number, not {value!r}")
        if not isinstance(max_failures, int) or max_failures < 1:
            raise InvalidArgumentError(f"max_failures must be a positive integer, not {max_failures!r}")
        if extra_instructions is not None and not isinstance(extra_instructions, str):
            raise InvalidArgumentError("extra_instructions must be a string")
        self.memory = memory
        self.llm_adapter = llm_adapter
        self.model = model
        self.batch_size = batch_size
        self.dry_run = bool(dry_run)
        self.max_deprecation_ratio = float(max_deprecation_ratio)
        self.allow_published_deprecation = bool(allow_published_deprecation)
        self.kind_filter = None if kind_filter is None else frozenset(
            [kind_filter] if isinstance(kind_filter, str) else kind_filter)
        self.extra_instructions = (extra_instructions or "").strip()
        self.min_age_days = float(min_age_days)
        self.stale_after_days = float(stale_after_days)
        self.max_failures = max_failures
        self.report_dir = report_dir
        self.progress = progress
        self.cursor_space = cursor_item_name
        self.verifier = verifier
        self.verifier_model = verifier_model

    @classmethod
    def from_env(cls, memory: Memory | None = None, environ: Mapping[str, str] | None = None,
                 **options: Any) -> "DreamState":
        """Build with ``KUMIHO_DREAM_EXTRA_INSTRUCTIONS`` and ``KUMIHO_DREAM_MIN_AGE_DAYS`` read from ``environ``
        (explicit options win)."""
        env = os.environ if environ is None else environ
        if options.get("extra_instructions") is None:
            options["extra_instructions"] = env.get("KUMIHO_DREAM_EXTRA_INSTRUCTIONS", "")
        if env.get("KUMIHO_DREAM_MIN_AGE_DAYS") and "min_age_days" not in options:
            try:
                options["min_age_days"] = float(env["KUMIHO_DREAM_MIN_AGE_DAYS"])
            except ValueError:
                raise InvalidArgumentError("KUMIHO_DREAM_MIN_AGE_DAYS must be a number of days") from None
        return cls(memory, **options)

    # -- the run ---------------------------------------------------------------------------------------------

    def run_sync(self) -> dict[str, Any]:
        """``run()`` for synchronous callers (not from inside a running event loop)."""
        return asyncio.run(self.run())

    async def run(self) -> dict[str, Any]:
        """Assess, apply within the guardrails, save the cursor and the report.

        Returns:
            ``{success, dry_run, ...DreamStateStats fields, actions, report, report_kref, extra_instructions}``
            where ``actions`` lists every applied (or, in a dry run, proposed) action with its reason.
        """
        started = time.perf_counter()
        stats = DreamStateStats()
        state = self._load_state()
        now = self.memory.clock.now()
        todo = self._collect(state)
        stats.events_processed = len(todo)
        actions: list[dict[str, Any]] = []
        proposals: list[tuple[dict[str, Any], MemoryAssessment]] = []
        failed: list[dict[str, Any]] = []
        transient_failures = 0
        batches = [todo[start:start + self.batch_size] for start in range(0, len(todo), self.batch_size)]
        for number, batch in enumerate(batches, 1):
            assessed, batch_failed, errors, transient = await self._assess_batch(batch)
            stats.errors += errors
            failed += batch_failed
            transient_failures += transient
            proposals += assessed
            stats.revisions_assessed += len(assessed)
            if self.progress is not None:
                self.progress(number, len(batches))
        # Everything failing is an outage (nothing is parked), unless it was one item failing for a reason
        # a retry cannot fix: that is a poison item, counted toward parking like any other.
        systemic = bool(failed) and len(failed) == len(todo) and (len(todo) > 1 or transient_failures > 0)
        for revision in failed:
            if systemic:
                break                                    # everything failed: the service, not the items
            count = state["failures"].get(revision["item_kref"], 0) + 1
            state["failures"][revision["item_kref"]] = count
            if count >= self.max_failures:
                state["parked"].append(revision["item_kref"])
                stats.parked += 1
                actions.append({"action": "park", "kref": revision["kref"],
                                "reason": f"assessment failed in {count} runs"})
        actions += self._contradiction_notes(stats)
        deferred: list[dict[str, Any]] = []
        actions += await self._apply(proposals, stats, now, deferred)
        # The cursor moves past everything done, but not past a memory that failed and is not parked, nor
        # one whose deprecation the ratio cap deferred: the next run starts there again.
        held_back = [revision for revision in failed if revision["item_kref"] not in state["parked"]] + deferred
        processed = todo
        if held_back:
            first = min(revision["created_at"] for revision in held_back)
            processed = [revision for revision in todo if revision["created_at"] < first]
        if processed:
            state["cursor"] = max(state["cursor"] or "", max(revision["created_at"] for revision in processed))
        for revision in processed:
            state["failures"].pop(revision["item_kref"], None)
        stats.last_cursor = state["cursor"] or None
        stats.duration_ms = round((time.perf_counter() - started) * 1000, 1)
        report = self._report(stats, actions, now)
        result: dict[str, Any] = {"success": True, "dry_run": self.dry_run, **dataclasses.asdict(stats),
                                  "actions": actions, "report": report, "report_kref": None,
                                  "extra_instructions": self.extra_instructions}
        if not self.dry_run:
            result["report_kref"] = self._save(state, stats, report)
            if self.report_dir is not None:
                result["report_path"] = self._write_report_file(report, now)
        return result

    # -- state: the cursor item ---------------------------------------------------------------------------

    def _load_state(self) -> dict[str, Any]:
        held = self.memory.backend.item_by_key(self.memory.project, self.cursor_space, "cursor")
        state: dict[str, Any] = {"cursor": None, "failures": {}, "parked": [], "runs": 0}
        if held is not None and held.latest_revision is not None:
            metadata = self.memory.get(str(held.kref))["metadata"]
            saved = metadata.get("dream_state")
            if isinstance(saved, dict):                 # read field by field: a damaged part starts over
                cursor, failures, parked, runs = (saved.get(key) for key in ("cursor", "failures", "parked", "runs"))
                if isinstance(cursor, str):
                    with contextlib.suppress(InvalidArgumentError):
                        parse_instant(cursor)
                        state["cursor"] = cursor
                if isinstance(failures, dict):
                    state["failures"] = {key: value for key, value in failures.items()
                                         if isinstance(value, int) and not isinstance(value, bool)}
                if isinstance(parked, list):
                    state["parked"] = [kref for kref in parked if isinstance(kref, str)]
                if isinstance(runs, int) and not isinstance(runs, bool):
                    state["runs"] = runs
        return state

    def _save(self, state: dict[str, Any], stats: DreamStateStats, report: str) -> str:
        counters = {key: value for key, value in dataclasses.asdict(stats).items()
                    if isinstance(value, (int, float)) and not isinstance(value, bool)}
        metadata = {"type": "dream_state_report", "run_at": format_instant(self.memory.clock.now()),
                    "dream_state": {"cursor": state["cursor"], "failures": state["failures"],
                                    "parked": state["parked"], "runs": state["runs"] + 1},
                    "counters": counters, "policy": self.extra_instructions}
        return self.memory.remember(report, space=self.cursor_space, kind=DREAM_KIND, key="cursor",
                                    title=f"Dream State report {metadata['run_at']}", metadata=metadata)

    def _write_report_file(self, report: str, now: _dt.datetime) -> str:
        folder = os.fspath(self.report_dir)
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, f"dream_state_{now.strftime('%Y%m%dT%H%M%S%fZ')}.md")
        _write_file_atomically(path, report)
        return path

    # -- collecting and assessing -----------------------------------------------------------------------------

    def _collect(self, state: dict[str, Any]) -> list[dict[str, Any]]:
        """Current revisions of live items written after the cursor, oldest first (parked items skipped)."""
        parked = set(state["parked"])
        revisions = []
        for item in self.memory.items():
            if item["kind"] in SYSTEM_KINDS or item["item_kref"] in parked:
                continue
            if self.kind_filter is not None and item["kind"] not in self.kind_filter:
                continue
            try:
                revision = self.memory.get(item["item_kref"])
            except NotFoundError:
                continue
            if revision["deprecated"] or (state["cursor"] and revision["created_at"] <= state["cursor"]):
                continue
            revisions.append(revision)
        revisions.sort(key=lambda revision: (revision["created_at"], revision["kref"]))
        return revisions

    async def _assess_batch(self, batch: list[dict[str, Any]]
                            ) -> tuple[list[tuple[dict[str, Any], MemoryAssessment]], list[dict[str, Any]], list[str], int]:
        """Assess a batch; on failure, each item alone, so one poison item does not sink the others.

        Returns the assessments, the revisions that failed, the error lines, and how many of the failures
        a retry might cure (transient)."""
        try:
            return await self._assess(batch), [], [], 0
        except Exception as error:                       # noqa: BLE001 - any assessor failure is retried
            first_error, first_transient = f"batch of {len(batch)}: {type(error).__name__}: {error}", _is_transient(error)
        if len(batch) == 1:
            return [], batch, [first_error], int(first_transient)
        assessed, failed, errors, transient = [], [], [first_error], 0
        for revision in batch:
            try:
                assessed += await self._assess([revision])
            except Exception as error:                   # noqa: BLE001
                failed.append(revision)
                transient += _is_transient(error)
                errors.append(f"{revision['kref']}: {type(error).__name__}: {error}")
        return assessed, failed, errors, transient

    async def _assess(self, batch: list[dict[str, Any]]) -> list[tuple[dict[str, Any], MemoryAssessment]]:
        if self.llm_adapter is not None:
            return await self._assess_with_llm(batch)
        return [(revision, self._assess_by_heuristics(revision)) for revision in batch]

    def _assess_by_heuristics(self, revision: dict[str, Any]) -> MemoryAssessment:
        assessment = MemoryAssessment(revision_kref=revision["kref"])
        superseded_by = self._superseded_from_elsewhere(revision)
        if superseded_by:
            assessment.should_deprecate, assessment.category = True, "superseded"
            assessment.deprecation_reason = f"superseded by {superseded_by} in another item, still live"
            assessment.relevance_score = 0.1
            return assessment
        keeper = self._duplicate_keeper(revision)
        if keeper is not None:
            assessment.should_deprecate, assessment.category = True, "duplicate"
            assessment.deprecation_reason = f"duplicate of {keeper['kref']}"
            assessment.relevance_score = 0.2
            return assessment
        if self._stale_chatter(revision):
            assessment.should_deprecate, assessment.category = True, "stale"
            assessment.deprecation_reason = (f"a chat message older than {self.stale_after_days:g} days with "
                                             "nothing lasting in it")
            assessment.relevance_score = 0.05
        return assessment

    def _superseded_from_elsewhere(self, revision: dict[str, Any]) -> str | None:
        for edge in self.memory.edges(revision["kref"], direction="incoming", edge_type=SUPERSEDES):
            source = edge["source_kref"]
            if Kref.parse(source).item_kref != Kref.parse(revision["kref"]).item_kref:
                with contextlib.suppress(NotFoundError):
                    if not self.memory.get(source)["deprecated"]:
                        return source
        return None

    def _duplicate_keeper(self, revision: dict[str, Any]) -> dict[str, Any] | None:
        """The copy to keep when other live memories in the space say exactly the same (the same words in
        the same order, up to case and punctuation), and it is not ``revision``; else None."""
        key = _duplicate_key(revision["content"])
        if len(key) < 2:
            return None
        copies = [revision]
        for hit in self.memory.recall(revision["content"][:2000], limit=10, space=revision["space"] or None,
                                      follow_edges=False, evidence_rank=False):
            if hit["item_kref"] != revision["item_kref"] and hit["space"] == revision["space"] and \
                    hit["kind"] == revision["kind"] and _duplicate_key(hit["content"]) == key:
                copies.append(hit)
        if len(copies) == 1:
            return None
        keeper = max(copies, key=self._keep_rank)
        return None if keeper["kref"] == revision["kref"] else keeper

    @staticmethod
    def _keep_rank(revision: Mapping[str, Any]) -> tuple:
        """Which of two duplicates to keep: published, then better evidence, then the older one."""
        level = parse_evidence(revision["metadata"], revision["tags"])
        strength = {OFFICIAL: 4, CORROBORATED: 3, SINGLE_SOURCE: 2, UNVERIFIED: 1}.get(level or "", 0)
        return ("published" in revision["tags"], strength, -parse_instant(revision["created_at"]).timestamp(),
                revision["kref"])

    def _stale_chatter(self, revision: dict[str, Any]) -> bool:
        if not is_message(revision["metadata"]) or "published" in revision["tags"]:
            return False
        age = self._age_days(revision)
        if age is None or age < self.stale_after_days:
            return False
        words = [word for word in _words(revision["content"]) if word not in ACKNOWLEDGEMENTS]
        if any(word not in STOPWORDS for word in words):
            return False                                  # "I am vegan": one word can be a lasting fact
        return not [edge for edge in self.memory.edges(revision["kref"]) if edge["edge_type"] != FOLLOWS]

    def _age_days(self, revision: Mapping[str, Any]) -> float | None:
        try:
            created = parse_instant(revision["created_at"])
        except (InvalidArgumentError, KeyError, TypeError):
            return None
        return (self.memory.clock.now() - created).total_seconds() / 86400

    async def _assess_with_llm(self, batch: list[dict[str, Any]]) -> list[tuple[dict[str, Any], MemoryAssessment]]:
        entries = [{"index": index, "kref": revision["kref"], "title": revision["title"][:200],
                    "summary": revision["content"][:600], "type": revision["metadata"].get("memory_type") or
                    revision["kind"], "tags": [tag for tag in revision["tags"] if tag != "latest"],
                    "evidence_level": parse_evidence(revision["metadata"], revision["tags"]) or ""}
                   for index, revision in enumerate(batch)]
        system = DREAM_SYSTEM_PROMPT
        if self.extra_instructions:
            system += ("\n\nDEPLOYMENT POLICY (it may only make you more conservative):\n"
                       + self.extra_instructions)
        reply = await adapter_chat(self.llm_adapter, messages=[{"role": "user", "content": json.dumps(
            {"memories": entries}, ensure_ascii=False)}], model=self.model, system=system, max_tokens=2048,
            json_mode=True)
        answer = parse_llm_json(reply, dict)
        rows = answer.get("assessments")
        if not isinstance(rows, list):
            raise InvalidArgumentError("the assessment reply has no 'assessments' list")
        by_index: dict[int, dict[str, Any]] = {}
        for row in rows:
            if isinstance(row, dict) and isinstance(row.get("index"), int) and 0 <= row["index"] < len(batch):
                by_index[row["index"]] = row
        results = []
        for index, revision in enumerate(batch):
            row = by_index.get(index, {})
            updates = row.get("metadata_updates") or []
            if isinstance(updates, dict):
                updates = [{"key": key, "value": value} for key, value in updates.items()]
            relationship = str(row.get("relationship_type") or REFERENCED).upper()
            # SUPERSEDES would hide its target from recall past every guardrail: supersession is belief
            # revision's decision, so Dream State records the suggestion as a plain reference.
            if relationship not in (DERIVED_FROM, REFERENCED, DEPENDS_ON):
                relationship = REFERENCED
            related = [(batch[other]["kref"], relationship) for other in row.get("related_indices") or []
                       if isinstance(other, int) and 0 <= other < len(batch) and other != index]
            score = row.get("relevance_score", 0.5)
            results.append((revision, MemoryAssessment(
                revision_kref=revision["kref"],
                relevance_score=float(score) if isinstance(score, (int, float)) else 0.5,
                should_deprecate=row.get("should_deprecate") is True,
                deprecation_reason=str(row.get("deprecation_reason") or "")[:500],
                suggested_tags=[str(tag) for tag in row.get("suggested_tags") or [] if isinstance(tag, str)],
                metadata_updates={str(update["key"]): update.get("value") for update in updates
                                  if isinstance(update, dict) and isinstance(update.get("key"), str)},
                related_memories=related, category="llm")))
        return results

    # -- applying, within the guardrails ------------------------------------------------------------------------

    def _guard(self, revision: dict[str, Any], assessment: MemoryAssessment, referenced: set[str]) -> str | None:
        """Why a proposed deprecation may not happen, or None when it may.

        A deprecation retires the whole item, so the guards hold for every revision it would hide, read
        fresh from the store (an older ``published`` or ``official`` revision keeps the item as surely as the
        newest would), not only for the revision the batch happened to show.
        """
        age = self._age_days(revision)
        try:
            touched = self.memory.history(revision["item_kref"])
        except NotFoundError:
            return "gone"                                 # forgotten meanwhile: nothing left to deprecate
        for each in touched or [revision]:
            level = parse_evidence(each["metadata"], each["tags"])
            if level == OFFICIAL or evidence_tag(OFFICIAL) in each["tags"]:
                return "official"
            if PUBLISHED_TAG in each["tags"] and not self.allow_published_deprecation:
                return "published"
        if age is None or age < self.min_age_days:
            return "min_age"
        for each in touched or [revision]:
            level = parse_evidence(each["metadata"], each["tags"])
            if (level == CORROBORATED or evidence_tag(CORROBORATED) in each["tags"]) and \
                    len(assessment.deprecation_reason.strip()) < 10:
                return "corroborated_without_reason"
        if revision["item_kref"] in referenced or any(each["kref"] in referenced for each in touched):
            return "referenced"
        return None

    async def _apply(self, proposals: list[tuple[dict[str, Any], MemoryAssessment]], stats: DreamStateStats,
                     now: _dt.datetime, deferred: list[dict[str, Any]]) -> list[dict[str, Any]]:
        actions: list[dict[str, Any]] = []
        approved: list[tuple[dict[str, Any], MemoryAssessment]] = []
        budget = max(1, int(len(proposals) * self.max_deprecation_ratio)) if proposals else 0
        # edges first: a memory something now refers to is not deprecated in the same run
        referenced: set[str] = set()
        for revision, assessment in proposals:
            for target, relationship in assessment.related_memories:
                if relationship == "duplicate":
                    continue
                referenced.add(target)
                if self._edge_exists(revision["kref"], target, relationship):
                    continue
                try:
                    if not self.dry_run:
                        self.memory.link(revision["kref"], target, relationship, {"reason": "dream state"})
                except KumihoMemoryError as error:
                    stats.errors.append(f"{revision['kref']}: link refused: {type(error).__name__}: {error}")
                    continue
                stats.edges_created += 1
                actions.append({"action": "link", "kref": revision["kref"], "target": target,
                                "edge_type": relationship, "reason": assessment.deprecation_reason or
                                "related by the assessment"})
        for revision, assessment in proposals:
            tags = [tag for tag in assessment.suggested_tags
                    if TAG_PATTERN.match(tag) and not tag.startswith(EVIDENCE_TAG_PREFIX)
                    and tag not in ("published", "latest") and not tag.startswith("quarantine")
                    and tag not in revision["tags"]]
            # enrichment only adds: a key already there (provenance, speaker, dates) is never changed or removed
            updates = {key: value for key, value in assessment.metadata_updates.items()
                       if key not in EVIDENCE_METADATA_KEYS and key not in revision["metadata"] and value is not None}
            try:
                for tag in tags:
                    if not self.dry_run:
                        self.memory.tag(revision["kref"], tag)
                    stats.tags_added += 1
                    actions.append({"action": "tag", "kref": revision["kref"], "tag": tag,
                                    "reason": "suggested by the assessment"})
                if updates:
                    if not self.dry_run:
                        self.memory.update_metadata(revision["kref"], updates)
                    stats.metadata_updated += 1
                    actions.append({"action": "metadata", "kref": revision["kref"], "updates": updates,
                                    "reason": "enrichment suggested by the assessment"})
            except KumihoMemoryError as error:            # a bad suggestion is reported, never half the run
                stats.errors.append(f"{revision['kref']}: enrichment refused: {type(error).__name__}: {error}")
            if not assessment.should_deprecate:
                continue
            stats.deprecations_proposed += 1
            why_not = self._guard(revision, assessment, referenced)
            if why_not is None and len(approved) >= budget:
                why_not = "ratio_cap"
            if why_not in ("ratio_cap", "min_age"):
                deferred.append(revision)                 # the cursor waits: it is assessed again next run
            if why_not is not None:
                stats.guarded_skips[why_not] = stats.guarded_skips.get(why_not, 0) + 1
                actions.append({"action": "kept", "kref": revision["kref"], "guard": why_not,
                                "reason": assessment.deprecation_reason, "category": assessment.category})
                continue
            approved.append((revision, assessment))
        confirmed = await self._verify(approved, stats) if approved and self.verifier is not None else None
        for revision, assessment in approved:
            if confirmed is not None and revision["kref"] not in confirmed:
                stats.refuted_skips += 1
                actions.append({"action": "kept", "kref": revision["kref"], "guard": "verifier",
                                "reason": assessment.deprecation_reason, "category": assessment.category})
                continue
            stats.deprecated += 1
            actions.append({"action": "deprecate", "kref": revision["kref"], "reason": assessment.deprecation_reason,
                            "category": assessment.category})
            if not self.dry_run:
                self.memory.deprecate(revision["item_kref"])
        return actions

    async def _verify(self, approved: list[tuple[dict[str, Any], MemoryAssessment]], stats: DreamStateStats) -> set[str]:
        """One batched refutation call: the krefs whose deprecation the verifier explicitly did not refute
        (``refute: false``). Anything else, a failing call included, keeps the memory."""
        entries = [{"index": index, "kref": revision["kref"], "content": revision["content"][:600],
                    "reason": assessment.deprecation_reason} for index, (revision, assessment) in enumerate(approved)]
        try:
            reply = await adapter_chat(self.verifier, 
                messages=[{"role": "user", "content": json.dumps({"proposals": entries}, ensure_ascii=False)}],
                model=self.verifier_model, system=DREAM_VERIFIER_PROMPT, max_tokens=1024, json_mode=True)
            verdicts = parse_llm_json(reply, dict).get("verdicts")
        except Exception as error:                       # noqa: BLE001 - a failed check keeps everything
            stats.errors.append(f"verifier: {type(error).__name__}: {error}")
            return set()
        confirmed = set()
        for verdict in verdicts if isinstance(verdicts, list) else []:
            if isinstance(verdict, dict) and verdict.get("refute") is False and isinstance(verdict.get("index"), int) \
                    and 0 <= verdict["index"] < len(approved):
                confirmed.add(approved[verdict["index"]][0]["kref"])
        return confirmed

    def _edge_exists(self, source: str, target: str, edge_type: str) -> bool:
        return any(edge["target_kref"] == target for edge in self.memory.edges(source, direction="outgoing",
                                                                                 edge_type=edge_type))

    def _contradiction_notes(self, stats: DreamStateStats) -> list[dict[str, Any]]:
        """Open contradictions are reported and their challenger tagged ``contested``; nothing is deprecated."""
        notes = []
        for pair in self.memory.contradictions():
            source = pair["source"]
            if source["deprecated"]:
                continue
            notes.append({"action": "contradiction", "kref": source["kref"], "target": pair["target_kref"],
                          "reason": "claims against another memory; left for review"})
            if "contested" not in source["tags"]:
                stats.tags_added += 1
                notes.append({"action": "tag", "kref": source["kref"], "tag": "contested",
                              "reason": "an open contradiction"})
                if not self.dry_run:
                    self.memory.tag(source["kref"], "contested")
        return notes

    # -- the report ------------------------------------------------------------------------------------------

    def _report(self, stats: DreamStateStats, actions: list[dict[str, Any]], now: _dt.datetime) -> str:
        lines = [f"# Dream State report, {format_instant(now)}", ""]
        if self.dry_run:
            lines += ["**Dry run**: nothing was changed; these are the actions a run would take.", ""]
        if self.allow_published_deprecation:
            lines += ["**WARNING**: published memories may be deprecated in this run "
                      "(allow_published_deprecation).", ""]
        lines += ["## Counts", ""]
        for field in ("events_processed", "revisions_assessed", "deprecations_proposed", "deprecated",
                      "tags_added", "metadata_updated", "edges_created", "parked"):
            lines.append(f"- {field.replace('_', ' ')}: {getattr(stats, field)}")
        if stats.guarded_skips:
            lines.append("- kept by guardrails: " + ", ".join(f"{name} {count}" for name, count in
                                                              sorted(stats.guarded_skips.items())))
        lines += ["", "## Policy", "", f"> {self.extra_instructions}" if self.extra_instructions else
                  "No deployment policy (defaults only).", f"Assessed by: {'LLM ' + self.model if self.llm_adapter else 'heuristics'}",
                  f"Max deprecation ratio {self.max_deprecation_ratio:g}, minimum age {self.min_age_days:g} days.",
                  "", "## Actions", ""]
        if not actions:
            lines.append("None.")
        for action in actions:
            target = f" -> {action['target']}" if "target" in action else ""
            detail = {"tag": lambda: f" `{action['tag']}`", "metadata": lambda: f" {json.dumps(action['updates'])}",
                      "kept": lambda: f" (guard: {action['guard']})", "link": lambda: f" {action['edge_type']}"
                      }.get(action["action"], lambda: "")()
            lines.append(f"- **{action['action']}** `{action['kref']}`{target}{detail}: {action.get('reason', '')}")
        if stats.errors:
            lines += ["", "## Errors", ""] + [f"- {error}" for error in stats.errors]
        lines += ["", "## Cursor", "", stats.last_cursor or "(none yet)", ""]
        return "\n".join(lines)


# ==========================================================================================================
# 15. Integrations: listing and describing memories, the memory browser, LangGraph's store, the OpenAI
#     Agents SDK session
# ==========================================================================================================
#
# Everything here stands on Memory's public face (and the working-memory buffer's); the frameworks are
# imported inside the functions that build their adapters, so ``import kumiho_memory`` imports neither.

LIST_PAGE_LIMIT = 200            # memories on one page of `list` / the browser, at most
LIST_SCAN_LIMIT = 5000           # items one filtered page examines at most (then it offers to go on)
MAX_DESCRIBED_REVISIONS = 500    # revisions `describe_memory` details; older ones are counted, not listed
MAX_DESCRIBED_EDGES = 500        # edges per direction `describe_memory` lists


def _instant(value: Any, what: str = "as_of") -> _dt.datetime | None:
    """``parse_instant`` for optional caller input, naming the argument when it is unreadable."""
    if value is None or value == "":
        return None
    try:
        return parse_instant(value)
    except (KumihoMemoryError, ValueError, TypeError, OverflowError) as exc:
        raise InvalidArgumentError(f"{what} is not a time (ISO 8601, e.g. 2026-01-31T12:00:00Z): {value!r:.80}") \
            from exc


def _page_bounds(limit: Any, offset: Any, *, most: int = LIST_PAGE_LIMIT) -> tuple[int, int]:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= most:
        raise InvalidArgumentError(f"limit must be a whole number from 1 to {most}, not {limit!r}")
    if isinstance(offset, bool) or not isinstance(offset, int) or not 0 <= offset <= 10**9:
        raise InvalidArgumentError(f"offset must be a whole number >= 0, not {offset!r}")
    return limit, offset


def _revision_at(memory: Memory, item_kref: str, moment: _dt.datetime | None) -> dict[str, Any] | None:
    """The item's current revision (its ``published`` one, else its latest), now or at ``moment``; None
    when the item did not exist yet."""
    if moment is None:
        with contextlib.suppress(NotFoundError):
            return memory.get(f"{item_kref}?t={PUBLISHED_TAG}")
        return memory.get(item_kref)
    with contextlib.suppress(NotFoundError):
        return memory.get(f"{item_kref}?t={PUBLISHED_TAG}&time={format_instant(moment)}")
    earlier = [revision for revision in memory.history(item_kref) if parse_instant(revision["created_at"]) <= moment]
    return earlier[-1] if earlier else None


def _memory_summary(memory: Memory, item: Mapping[str, Any], revision: Mapping[str, Any]) -> dict[str, Any]:
    """One row of a listing: the item with its current revision's title, tags, evidence and marks."""
    contested = bool(memory.edges(item["item_kref"], edge_type=CONTRADICTS))
    return {"item_kref": item["item_kref"], "kref": revision["kref"], "revision": revision["revision"],
            "revision_count": item.get("revision_count"), "space": item["space"], "kind": item["kind"],
            "key": item.get("key"), "title": revision["title"], "content": revision["content"],
            "tags": list(revision["tags"]), "evidence_level": parse_evidence(revision["metadata"], revision["tags"]),
            "deprecated": bool(item["deprecated"] or revision["deprecated"]), "contested": contested,
            "created_at": item["created_at"], "updated_at": revision["created_at"]}


def list_memories(memory: Memory, *, space: str | None = None, kind: str | None = None, tag: str | None = None,
                  evidence: str | None = None, include_deprecated: bool = False,
                  as_of: str | float | _dt.datetime | None = None, limit: int = 50, offset: int = 0,
                  scan_limit: int = LIST_SCAN_LIMIT) -> dict[str, Any]:
    """List memories newest first, each with its current revision (``published``, else latest).

    Args:
        memory: the memory to list.
        space: only this space and the spaces under it. kind: only items of this kind (bookkeeping kinds
            such as space profiles are left out unless asked for by name).
        tag: only memories whose current revision carries this tag. evidence: only this evidence grade.
        include_deprecated: list deprecated items too (marked).
        as_of: list what existed then, each with the revision that was current then.
        limit: memories on this page (1..200). offset: where the page starts in the newest-first order of
            items; with ``tag`` or ``evidence`` a page examines at most ``scan_limit`` items from there, and
            ``next_offset`` says where the next page goes on.

    Returns:
        ``{memories: [{item_kref, kref, revision, revision_count, space, kind, key, title, content, tags,
        evidence_level, deprecated, contested, created_at, updated_at}], total_items, offset, limit,
        next_offset (None at the end), scanned}``.

    Raises:
        InvalidArgumentError: a malformed filter or page.
    """
    limit, offset = _page_bounds(limit, offset)
    if tag is not None:
        validate_tag(tag)
    if evidence is not None and evidence not in EVIDENCE_LEVELS:
        raise InvalidArgumentError(f"evidence must be one of {', '.join(EVIDENCE_LEVELS)}, not {evidence!r}")
    if isinstance(scan_limit, bool) or not isinstance(scan_limit, int) or scan_limit < limit:
        raise InvalidArgumentError(f"scan_limit must be a whole number >= limit, not {scan_limit!r}")
    moment = _instant(as_of)
    filtered = tag is not None or evidence is not None
    excluded = () if kind is not None else tuple(sorted(SYSTEM_KINDS))
    if moment is None:             # a page read from the store: bounded work however large the store is
        page = memory.item_page(space=space, kind=kind, include_deprecated=include_deprecated,
                                exclude_kinds=excluded, limit=min(scan_limit if filtered else limit, 1000),
                                offset=offset)
        items, total, first = page["items"], page["total"], offset
    else:
        items = [item for item in memory.items(space=space, kind=kind, include_deprecated=include_deprecated)
                 if item["kind"] not in excluded and parse_instant(item["created_at"]) <= moment]
        items.sort(key=lambda item: (item["created_at"], item["item_kref"]), reverse=True)
        total, first = len(items), 0
    found, position, budget = [], offset, scan_limit if filtered else limit
    while position - first < len(items) and len(found) < limit and budget > 0:
        item = items[position - first]
        position, budget = position + 1, budget - 1
        revision = _revision_at(memory, item["item_kref"], moment)
        if revision is None:
            continue
        if tag is not None and tag not in revision["tags"]:
            continue
        if evidence is not None and parse_evidence(revision["metadata"], revision["tags"]) != evidence:
            continue
        found.append(_memory_summary(memory, item, revision))
    return {"memories": found, "total_items": total, "offset": offset, "limit": limit,
            "next_offset": position if position < total else None, "scanned": position - offset}


def describe_memory(memory: Memory, kref: str, *, as_of: str | float | _dt.datetime | None = None) -> dict[str, Any]:
    """Everything the store knows about one item: its revision chain, tags and where they pointed over
    time, edges in and out, artifacts, evidence and contradictions, optionally as it stood at ``as_of``.

    Args:
        memory: the memory. kref: any kref of the item (a revision kref names its item).
        as_of: also say which revision was current then and where each tag pointed then.

    Returns:
        ``{item_kref, space, kind, current, revisions: [revision + {supersedes, artifacts, after_as_of}],
        revision_count, revisions_omitted, tags: {tag: {now, at_as_of, history: [{revision_kref, revision,
        at}]}}, edges_out, edges_in (other items; each edge + {other_title}), evidence_level, contested_by,
        contradicts, deprecated, as_of, current_at_as_of}``.

    Raises:
        InvalidKrefError: a malformed kref. NotFoundError: no such item.
    """
    moment = _instant(as_of)
    item_kref = memory.get(kref)["item_kref"]
    history = memory.history(item_kref)
    omitted = max(0, len(history) - MAX_DESCRIBED_REVISIONS)
    shown = history[omitted:]
    edges = memory.edges(item_kref)
    chain: dict[str, list[str]] = {}
    outgoing, incoming = [], []
    for edge in edges:
        source_item, target_item = edge["source_kref"].split("?")[0], edge["target_kref"].split("?")[0]
        if source_item == item_kref and target_item == item_kref:
            if edge["edge_type"] == SUPERSEDES:
                chain.setdefault(edge["source_kref"], []).append(edge["target_kref"])
                continue
        if source_item == item_kref and len(outgoing) < MAX_DESCRIBED_EDGES:
            outgoing.append(edge)
        elif target_item == item_kref and len(incoming) < MAX_DESCRIBED_EDGES:
            incoming.append(edge)
    for edge, other in [(edge, edge["target_kref"]) for edge in outgoing] + [(edge, edge["source_kref"]) for edge in incoming]:
        try:
            edge["other_title"] = memory.get(other)["title"]
        except NotFoundError:
            edge["other_title"] = None
    revisions = []
    for revision in shown:
        revisions.append({**revision, "supersedes": chain.get(revision["kref"], []),
                          "artifacts": memory.artifacts(revision["kref"]),
                          "after_as_of": moment is not None and parse_instant(revision["created_at"]) > moment})
    tags: dict[str, dict[str, Any]] = {}
    for event in memory.tag_history(item_kref):
        entry = tags.setdefault(event["tag"], {"now": None, "at_as_of": None, "history": []})
        entry["history"].append({"revision_kref": event["revision_kref"], "revision": event["revision"],
                                 "at": event["at"]})
        entry["now"] = event["revision_kref"]
        if moment is not None and parse_instant(event["at"]) <= moment:
            entry["at_as_of"] = event["revision_kref"]
    current = _revision_at(memory, item_kref, None)
    then = _revision_at(memory, item_kref, moment) if moment is not None else None
    return {"item_kref": item_kref, "space": current["space"], "kind": current["kind"], "current": current,
            "revisions": revisions, "revision_count": len(history), "revisions_omitted": omitted, "tags": tags,
            "edges_out": outgoing, "edges_in": incoming,
            "evidence_level": parse_evidence(current["metadata"], current["tags"]),
            "contested_by": [edge["source_kref"] for edge in incoming if edge["edge_type"] == CONTRADICTS],
            "contradicts": [edge["target_kref"] for edge in outgoing if edge["edge_type"] == CONTRADICTS],
            "deprecated": bool(history[-1]["deprecated"]) if history else False,
            "as_of": None if moment is None else format_instant(moment), "current_at_as_of": then}


# -- the tool table: the seed's memory tools (and ours) as plain JSON schemas with sync handlers ---------------
#
# ``MEMORY_TOOLS`` is what any function-calling API takes (``tool_definitions`` reshapes it for OpenAI and
# Anthropic); ``MEMORY_TOOL_HANDLERS`` runs each tool over the default memory; ``kumiho_memory_mcp.py`` serves
# the same names with the same descriptions and arguments (a test holds the two to one contract).

def _schema(properties: Mapping[str, Mapping[str, Any]], required: Sequence[str] = ()) -> dict[str, Any]:
    return {"type": "object", "properties": {name: dict(spec) for name, spec in properties.items()},
            "required": list(required), "additionalProperties": False}


_STRING = {"type": "string"}
_STRINGS = {"type": "array", "items": {"type": "string"}}
_LEVEL = {"type": ["string", "null"], "enum": [*EVIDENCE_LEVELS, None],
          "description": "Evidence grade: official, corroborated, single_source or unverified."}
_SESSION = {"project": {"type": "string", "description": "The working-memory project (the server's own)."},
            "session_id": {"type": "string", "description": "The session; default the user's active session."},
            "user_id": {"type": "string", "description": "Whose session, when session_id is not given."},
            "context": {"type": "string", "description": "The session's context, e.g. 'personal' or 'work'."}}
_RECALL = {"query": {"type": "string", "description": "What to remember, in plain words."},
           "limit": {"type": "integer", "minimum": 1, "maximum": 100, "default": 5},
           "min_score": {"type": "number", "minimum": 0, "maximum": 1},
           "space_paths": {**_STRINGS, "description": "Only these spaces (and below)."},
           "memory_types": {**_STRINGS, "description": "Only these memory types."},
           "graph_augmented": {"type": "boolean", "default": False},
           "recall_mode": {"type": "string", "enum": ["summarized", "full"], "default": "summarized"}}
_CAPTURE = {"type": "object", "required": ["type", "title", "content"], "properties": {
    "type": {"type": "string", "enum": ["decision", "preference", "fact", "correction", "architecture",
                                        "implementation", "synthesis", "reflection", "summary", "skill"]},
    "title": _STRING, "content": _STRING, "tags": _STRINGS, "space_hint": _STRING,
    "revises": {"type": "string", "description": "Kref of the memory this updates."},
    "event_date": {"type": "string", "description": "ISO 8601 date the event happened."}}}

MEMORY_TOOLS: list[dict[str, Any]] = [
    {"name": "kumiho_chat_add", "description": "Append one message to a working-memory session (short-term, expires after an hour idle).\n\nUse kumiho_memory_ingest instead when you also want related long-term memories back.\nReturns {success, message_id, message_count, created_bucket, session_id, session_id_source}.",
     "inputSchema": _schema({**_SESSION, "message": _STRING,
                             "role": {"type": "string", "enum": ["user", "assistant"], "default": "user"}}, ["message"])},
    {"name": "kumiho_chat_get", "description": "Read the most recent messages of a working-memory session, oldest first.\n\nReturns {messages: [{role, content, timestamp, metadata}], session_id, message_count, ttl_remaining}.",
     "inputSchema": _schema({**_SESSION, "limit": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 50}})},
    {"name": "kumiho_chat_clear", "description": "Delete every message of a working-memory session (long-term memories are not touched).\n\nReturns {success, cleared_count}.",
     "inputSchema": _schema(_SESSION)},
    {"name": "kumiho_memory_ingest",
     "description": "Record a user message in working memory and get back the session's recent messages plus the\nlong-term memories it recalls. Call it for every user message; consolidate the session later.\n\nReturns {session_id, session_id_source, working_memory, long_term_memory, should_consolidate}.",
     "inputSchema": _schema({"user_id": _STRING, "message": _STRING,
                             "context": {"type": "string", "default": "personal"},
                             "session_id": _STRING, "working_memory_limit": {"type": "integer", "default": 10},
                             "recall_limit": {"type": "integer", "default": 5}, "evidence_level": _LEVEL,
                             "source": _STRING}, ["user_id", "message"])},
    {"name": "kumiho_memory_add_response", "description": "Record your (the assistant's) reply in the session's working memory, after kumiho_memory_ingest.\n\nReturns {success, message_count, created_bucket, session_id}.",
     "inputSchema": _schema({"session_id": _STRING, "response": _STRING, "user_id": _STRING, "context": _STRING},
                            ["response"])},
    {"name": "kumiho_memory_consolidate",
     "description": "Turn a session's working memory into one long-term memory (summary + transcript), then clear the\nsession. Call it when a conversation or task ends. Credentials are refused; PII is anonymized.\n\nReturns {success, buffer_was_empty, summary, store_result: {revision_kref, item_kref, space_path}},\nor {success: false, error} when the session is empty.",
     "inputSchema": _schema({"session_id": _SESSION["session_id"], "user_id": _SESSION["user_id"],
                             "context": _SESSION["context"], "summary": {"type": ["string", "object", "null"]},
                             "implications": _STRINGS, "space_path": _STRING, "evidence_level": _LEVEL,
                             "source": _STRING})},
    {"name": "kumiho_memory_recall", "description": "Search long-term memory. Results are best first, each with kref, score, title, summary, type,\nspace, created_at, tags and evidence. Use kumiho_memory_engage to get prompt-ready context instead.\n\nReturns {results, count, recall_mode}.",
     "inputSchema": _schema(_RECALL, ["query"])},
    {"name": "kumiho_memory_discover_edges", "description": "Find memories related to a memory and link it to them with typed edges. Needs an LLM endpoint\n(KUMIHO_LLM_BASE_URL) to think of related questions; without one it finds nothing and writes nothing.\n\nReturns {edges: [{source, target, edge_type, query, score}], count}.",
     "inputSchema": _schema({"revision_kref": _STRING, "summary": _STRING,
                             "max_queries": {"type": "integer", "default": 5}, "max_edges": {"type": "integer", "default": 3},
                             "min_score": {"type": "number", "default": 0.3},
                             "edge_type": {"type": "string", "default": REFERENCED}, "space_paths": _STRINGS},
                            ["revision_kref", "summary"])},
    {"name": "kumiho_memory_store_execution", "description": "Remember what a tool or command run did, so a later session can reuse what worked and avoid\nwhat failed. Stored as an 'action' memory, or 'error' when it failed.\n\nReturns {success, memory_type, store_result: {revision_kref, item_kref, space_path}}.",
     "inputSchema": _schema({"task": _STRING, "status": {"type": "string", "enum": ["done", "failed", "error", "blocked"],
                                                          "default": "done"},
                             "exit_code": {"type": ["integer", "null"]}, "duration_ms": {"type": ["integer", "null"]},
                             "stdout": _STRING, "stderr": _STRING, "tools": _STRINGS, "topics": _STRINGS,
                             "space_hint": _STRING}, ["task"])},
    {"name": "kumiho_memory_engage", "description": "Recall and render what memory knows about the query as context to read before answering.\nCite source_krefs when you store what you conclude (kumiho_memory_reflect).\n\nReturns {context, results, source_krefs, count, recall_mode, approx_tokens, approx_payload_tokens,\ncontext_was_prefetched, state, predictions: [{state, p}]}.",
     "inputSchema": _schema({**_RECALL, "session_id": {"type": "string", "description": "The pipeline run or "
                                                       "session this step belongs to (anticipatory recall)."},
                             "agent": {"type": "string", "description": "Who is asking."}}, ["query"])},
    {"name": "kumiho_memory_reflect", "description": "Record your reply and store what is worth remembering from it. A capture with `revises` updates\nthat memory (new revision, SUPERSEDES edge); every capture gets DERIVED_FROM edges to source_krefs.\nEverything is checked before anything is written.\n\nReturns {buffered, captures_stored, edges_discovered, stored_krefs, created_bucket, capture_results,\ndropped_event_dates}.",
     "inputSchema": _schema({"session_id": _STRING, "response": _STRING,
                             "captures": {"type": "array", "items": _CAPTURE}, "source_krefs": _STRINGS,
                             "space_path": _STRING, "discover_edges": {"type": "boolean", "default": True},
                             "idempotency_prefix": {"type": "string", "description": "A capture with the same "
                                                    "prefix and position is stored once (safe retries)."}},
                            ["response"])},
    {"name": "kumiho_memory_dream_state", "description": "Tidy long-term memory between sessions (Dream State): deprecate duplicates and leftovers, tag and\nlink related memories, behind hard guardrails (never official or published memories, never anything\nyounger than the minimum age, a cap on how much one run may deprecate). Deprecation is soft and\nreversible. Uses the server's LLM endpoint when one is configured, else heuristics.\n\nReturns {success, dry_run, deprecated, actions: [{action, kref, reason}], report, report_kref, ...}.",
     "inputSchema": _schema({"project": _STRING, "dry_run": {"type": "boolean", "default": False},
                             "batch_size": {"type": "integer", "minimum": 1, "default": 20},
                             "max_deprecation_ratio": {"type": "number", "minimum": 0.1, "maximum": 0.9, "default": 0.5},
                             "allow_published_deprecation": {"type": "boolean", "default": False},
                             "extra_instructions": _STRING})},
    {"name": "kumiho_memory_space_profile", "description": "Classify each space by how its knowledge behaves: canonical (stable, well-sourced), working\n(changing) or correspondence (claims that churn). Profiles are stored as versioned space-profile\nmemories; a pinned label (space attribute space_class) that disagrees is reported as drift.\n\nReturns {success, spaces_profiled, labels, drift, profiles: {space: {label, scores, ...}}, errors}.",
     "inputSchema": _schema({"project": _STRING, "window_days": {"type": "integer", "minimum": 1, "default": 30},
                             "dry_run": {"type": "boolean", "default": False}})},
    {"name": "kumiho_memory_get", "description": "Read one memory revision by any kref form: item kref (latest), ?r=N, ?t=TAG, ?t=TAG&time=ISO.\n\nReturns {kref, item_kref, revision, space, kind, title, content, metadata, tags, created_at,\ndeprecated}.",
     "inputSchema": _schema({"kref": _STRING}, ["kref"])},
    {"name": "kumiho_memory_history", "description": "List every revision of a memory item, oldest first, to see how a belief changed over time.\n\nReturns {item_kref, revisions, count}.",
     "inputSchema": _schema({"item_kref": _STRING}, ["item_kref"])},
    {"name": "kumiho_memory_tag", "description": "Point a tag at a revision (moving it off the item's other revisions; every move is recorded, so\n?t=TAG&time=ISO can read where it pointed before). 'latest' is maintained by the store.\n\nReturns the tagged revision, as kumiho_memory_get returns it.",
     "inputSchema": _schema({"kref": _STRING, "tag": _STRING}, ["kref", "tag"])},
    {"name": "kumiho_memory_link", "description": "Create a typed edge between two memory revisions (an item kref means its latest revision).\nLinking the same pair with the same type again returns the existing edge.\n\nReturns {source_kref, target_kref, edge_type, metadata, created_at}.",
     "inputSchema": _schema({"source_kref": _STRING, "target_kref": _STRING, "edge_type": _STRING,
                             "metadata": {"type": ["object", "null"]}}, ["source_kref", "target_kref", "edge_type"])},
    {"name": "kumiho_memory_edges", "description": "List the typed edges of a memory revision (or of all revisions of an item), oldest first.\n\nReturns {kref, edges: [{source_kref, target_kref, edge_type, metadata, created_at}], count}.",
     "inputSchema": _schema({"kref": _STRING, "direction": {"type": "string", "enum": ["outgoing", "incoming", "both"],
                                                            "default": "both"},
                             "edge_type": {"type": ["string", "null"]}}, ["kref"])},
    {"name": "kumiho_memory_list", "description": "Browse long-term memory without a query: items newest first, each with its current revision, space,\nkind, tags, evidence grade and deprecated/contested marks. Use kumiho_memory_recall to search by meaning.\n\nReturns {memories: [{item_kref, kref, title, content, space, kind, tags, evidence_level, deprecated,\ncontested, ...}], total_items, next_offset, ...}.",
     "inputSchema": _schema({"space": _STRING, "kind": _STRING, "tag": _STRING, "evidence": _LEVEL,
                             "include_deprecated": {"type": "boolean", "default": False}, "as_of": _STRING,
                             "limit": {"type": "integer", "minimum": 1, "maximum": 200, "default": 50},
                             "offset": {"type": "integer", "minimum": 0, "default": 0}})},
    {"name": "kumiho_memory_forget", "description": "Erase a memory for good: its content, edges, tags and artifacts are removed from the store's bytes.\nCannot be undone. Only when the user asks to forget something or it must not be kept.\n\nReturns {kref, items, revisions, edges, scrubbed}.",
     "inputSchema": _schema({"kref": _STRING}, ["kref"])},
]

_JSON_TYPES = {"string": str, "integer": int, "number": (int, float), "boolean": bool, "array": list,
               "object": dict, "null": type(None)}


def _checked_tool_arguments(tool: Mapping[str, Any], arguments: Any) -> dict[str, Any]:
    """The arguments of a tool call, checked against its ``inputSchema`` (required, unknown, JSON types)."""
    if not isinstance(arguments, Mapping):
        raise InvalidArgumentError(f"{tool['name']} takes a JSON object of arguments")
    schema = tool["inputSchema"]
    missing = [name for name in schema["required"] if arguments.get(name) is None]
    unknown = sorted(set(arguments) - set(schema["properties"]))
    if missing or unknown:
        raise InvalidArgumentError(f"{tool['name']}: " + "; ".join(
            ([f"missing {', '.join(missing)}"] if missing else []) + ([f"unknown {', '.join(unknown)}"] if unknown else [])))
    for name, value in arguments.items():
        kinds = schema["properties"][name].get("type")
        kinds = kinds if isinstance(kinds, list) else [kinds] if kinds else []
        allowed = tuple(_JSON_TYPES[kind] for kind in kinds)
        if allowed and (not isinstance(value, allowed) or (isinstance(value, bool) and bool not in allowed)):
            raise InvalidArgumentError(f"{tool['name']}: {name} must be {' or '.join(kinds)}")
    return dict(arguments)


class MemoryToolbox:
    """The tools of ``MEMORY_TOOLS`` over one ``UniversalMemoryManager`` (its memory and working memory).

    ``await toolbox.call(name, arguments)`` runs one tool and returns its result dict; bad arguments raise
    ``InvalidArgumentError`` naming the field, before anything is written.
    """

    def __init__(self, manager: "UniversalMemoryManager") -> None:
        self.manager = manager
        self.memory = manager.memory

    async def call(self, name: str, arguments: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Run the tool ``name`` with ``arguments`` (a JSON object)."""
        tool = next((tool for tool in MEMORY_TOOLS if tool["name"] == name), None)
        if tool is None:
            raise NotFoundError(f"no tool named {name!r}; see MEMORY_TOOLS")
        args = _checked_tool_arguments(tool, arguments or {})
        return await getattr(self, "_" + name.removeprefix("kumiho_").removeprefix("memory_"))(**args)

    async def _session(self, session_id: str | None, user_id: str | None, context: str | None) -> str:
        if session_id is not None:
            return session_id
        return (await self.manager.resolve_session_id(user_id, context))[0]

    def _project(self, project: str | None) -> str:
        if project is not None and project != self.manager.project:
            raise NotFoundError(f"this memory serves project {self.manager.project!r}, not {project!r}")
        return self.manager.project

    async def _chat_add(self, message: str, role: str = "user", project: str | None = None,
                        session_id: str | None = None, user_id: str | None = None,
                        context: str | None = None) -> dict[str, Any]:
        session_id = await self._session(session_id, user_id, context)
        added = await self.manager.buffer.add_message(project=self._project(project), session_id=session_id,
                                                      role=role, content=message, metadata={"channel": "tools"})
        return {"success": True, **added, "session_id": session_id}

    async def _chat_get(self, project: str | None = None, session_id: str | None = None, user_id: str | None = None,
                        context: str | None = None, limit: int = 50) -> dict[str, Any]:
        session_id = await self._session(session_id, user_id, context)
        window = await self.manager.buffer.get_messages(project=self._project(project), session_id=session_id,
                                                        limit=limit)
        return {**window, "session_id": session_id}

    async def _chat_clear(self, project: str | None = None, session_id: str | None = None,
                          user_id: str | None = None, context: str | None = None) -> dict[str, Any]:
        session_id = await self._session(session_id, user_id, context)
        cleared = await self.manager.buffer.clear_session(self._project(project), session_id)
        return {"success": True, "cleared_count": cleared, "session_id": session_id}

    async def _ingest(self, **arguments: Any) -> dict[str, Any]:
        return await self.manager.handle_user_message(channel="tools", **arguments)

    async def _add_response(self, response: str, session_id: str | None = None, user_id: str | None = None,
                            context: str | None = None) -> dict[str, Any]:
        session_id = await self._session(session_id, user_id, context)
        added = await self.manager.add_assistant_response(session_id=session_id, response=response, channel="tools")
        return {**added, "session_id": session_id}

    async def _consolidate(self, project: str | None = None, session_id: str | None = None,
                           user_id: str | None = None, context: str | None = None, **options: Any) -> dict[str, Any]:
        self._project(project)
        session_id = await self._session(session_id, user_id, context)
        result = await self.manager.consolidate_session(session_id=session_id, user_id=user_id, context=context,
                                                        **options)
        return {**result, "session_id": session_id}

    async def _recall(self, query: str, limit: int = 5, min_score: float | None = None,
                      space_paths: list[str] | None = None, memory_types: list[str] | None = None,
                      graph_augmented: bool = False, recall_mode: str = "summarized") -> dict[str, Any]:
        results = await self.manager.recall_memories(query, limit=limit, space_paths=space_paths,
                                                     memory_types=memory_types, graph_augmented=graph_augmented)
        results = [r for r in results if min_score is None or (r.get("score") or 0.0) >= min_score]
        return {"results": results, "count": len(results), "recall_mode": recall_mode}

    async def _engage(self, query: str, session_id: str | None = None, agent: str | None = None,
                      **options: Any) -> dict[str, Any]:
        if session_id is not None and not options.get("graph_augmented"):
            engaged = await asyncio.to_thread(
                self.memory.engage, query, session_id=session_id, agent=agent, limit=options.get("limit", 5),
                min_score=options.get("min_score"), space_paths=options.get("space_paths"),
                memory_types=options.get("memory_types"))
            return {**engaged, "results": [self.manager.shape_result(hit) for hit in engaged["results"]],
                    "recall_mode": options.get("recall_mode", "summarized")}
        recalled = await self._recall(query, **options)
        context = self.manager.build_recalled_context(recalled["results"], query, recalled["recall_mode"])
        return {**recalled, "context": context, "source_krefs": [r["kref"] for r in recalled["results"]],
                "approx_tokens": len(context) // 4}

    async def _discover_edges(self, revision_kref: str, summary: str, **options: Any) -> dict[str, Any]:
        await asyncio.to_thread(self.memory.get, revision_kref)
        edges = await self.manager.discover_edges_post_consolidation(revision_kref, summary, **options)
        return {"edges": edges, "count": len(edges)}

    async def _store_execution(self, **arguments: Any) -> dict[str, Any]:
        return await self.manager.store_tool_execution(**arguments)

    async def _reflect(self, response: str, session_id: str | None = None, captures: list[Any] | None = None,
                       source_krefs: list[str] | None = None, space_path: str | None = None,
                       discover_edges: bool = True, idempotency_prefix: str | None = None) -> dict[str, Any]:
        if not response.strip():
            raise InvalidArgumentError("response must not be empty")
        for index, capture in enumerate(captures or []):
            if not isinstance(capture, Mapping) or not all(isinstance(capture.get(k), str) and capture.get(k)
                                                           for k in ("type", "title", "content")):
                raise InvalidArgumentError(f"captures[{index}] needs type, title and content")
        buffered = False
        if session_id is not None:
            await self.manager.add_assistant_response(session_id=session_id, response=response, channel="tools")
            buffered = True
        stored = []
        for position, capture in enumerate(captures or []):
            space = capture.get("space_hint") or space_path or f"reflections/{capture['type']}"
            metadata = {"memory_type": capture["type"], "captured_by": "reflect"}
            if capture.get("event_date"):
                metadata["event_date"] = capture["event_date"]
            options = {"title": capture["title"], "kind": capture["type"], "metadata": metadata,
                       "tags": capture.get("tags") or None}
            if capture.get("revises"):
                item = str(parse_item_kref(capture["revises"]).item_kref())
                kref = await asyncio.to_thread(self.memory.remember, capture["content"], item=item, **options)
            elif idempotency_prefix:
                kref = await asyncio.to_thread(self.memory.remember, capture["content"], space=space,
                                               key=f"{idempotency_prefix}:{position}", **options)
            else:
                kref = await asyncio.to_thread(self.memory.remember, capture["content"], space=space, **options)
            for source in source_krefs or []:
                await asyncio.to_thread(self.memory.link, kref, source, DERIVED_FROM)
            stored.append(kref)
        return {"buffered": buffered, "captures_stored": len(stored), "stored_krefs": stored}

    async def _dream_state(self, project: str | None = None, **options: Any) -> dict[str, Any]:
        self._project(project)
        dream = DreamState(self.memory, llm_adapter=self.manager.llm_adapter, **options)
        return await dream.run()

    async def _space_profile(self, project: str | None = None, window_days: int = 30,
                             dry_run: bool = False) -> dict[str, Any]:
        self._project(project)
        return await SpaceProfiler(self.memory, window_days=window_days, dry_run=dry_run).run()

    async def _get(self, kref: str) -> dict[str, Any]:
        return await asyncio.to_thread(self.memory.get, kref)

    async def _history(self, item_kref: str) -> dict[str, Any]:
        revisions = await asyncio.to_thread(self.memory.history, item_kref)
        return {"item_kref": str(parse_item_kref(item_kref).item_kref()), "revisions": revisions,
                "count": len(revisions)}

    async def _tag(self, kref: str, tag: str) -> dict[str, Any]:
        return await asyncio.to_thread(self.memory.tag, kref, tag)

    async def _link(self, source_kref: str, target_kref: str, edge_type: str,
                    metadata: Mapping[str, Any] | None = None) -> dict[str, Any]:
        return await asyncio.to_thread(self.memory.link, source_kref, target_kref, edge_type, metadata)

    async def _edges(self, kref: str, direction: str = "both", edge_type: str | None = None) -> dict[str, Any]:
        found = await asyncio.to_thread(self.memory.edges, kref, direction=direction, edge_type=edge_type)
        return {"kref": kref, "edges": found, "count": len(found)}

    async def _list(self, **options: Any) -> dict[str, Any]:
        return await asyncio.to_thread(list_memories, self.memory, **options)

    async def _forget(self, kref: str) -> dict[str, Any]:
        return await asyncio.to_thread(self.memory.forget, kref)


def memory_tool_handlers(manager: "UniversalMemoryManager | None" = None) -> dict[str, Callable[[Mapping[str, Any]], dict[str, Any]]]:
    """Sync handlers for every tool of ``MEMORY_TOOLS``: ``handlers[name](arguments) -> result``.

    Each call runs the tool to completion on its own event loop (call them from synchronous code, not from
    inside a running loop). Without ``manager`` a manager over the default memory (``default_memory``) is
    made on the first call.
    """
    made: list[UniversalMemoryManager] = [] if manager is None else [manager]

    def handler_for(name: str) -> Callable[[Mapping[str, Any]], dict[str, Any]]:
        def handle(arguments: Mapping[str, Any] | None = None) -> dict[str, Any]:
            if not made:
                made.append(UniversalMemoryManager())
            return asyncio.run(MemoryToolbox(made[0]).call(name, arguments or {}))
        handle.__name__ = name
        handle.__doc__ = next(tool["description"] for tool in MEMORY_TOOLS if tool["name"] == name)
        return handle
    return {tool["name"]: handler_for(tool["name"]) for tool in MEMORY_TOOLS}


MEMORY_TOOL_HANDLERS = memory_tool_handlers()


def tool_definitions(api: str = "openai", tools: Sequence[Mapping[str, Any]] | None = None) -> list[dict[str, Any]]:
    """``MEMORY_TOOLS`` as a function-calling API's tool list.

    Args:
        api: ``"openai"`` (Chat Completions ``{"type": "function", "function": {name, description,
            parameters}}``), ``"responses"`` (OpenAI Responses ``{"type": "function", name, ...}``) or
            ``"anthropic"`` (Messages ``{name, description, input_schema}``).
        tools: a subset of ``MEMORY_TOOLS`` (default all).
    """
    chosen = list(MEMORY_TOOLS if tools is None else tools)
    if api == "openai":
        return [{"type": "function", "function": {"name": t["name"], "description": t["description"],
                                                  "parameters": copy.deepcopy(t["inputSchema"])}} for t in chosen]
    if api == "responses":
        return [{"type": "function", "name": t["name"], "description": t["description"],
                 "parameters": copy.deepcopy(t["inputSchema"])} for t in chosen]
    if api == "anthropic":
        return [{"name": t["name"], "description": t["description"], "input_schema": copy.deepcopy(t["inputSchema"])}
                for t in chosen]
    raise InvalidArgumentError(f"api must be 'openai', 'responses' or 'anthropic', not {api!r}")


# -- the memory browser: one self-contained page over http.server, loopback only --------------------------

_BROWSER_CSS = """
:root{--fg:#1d232a;--muted:#5f6b77;--line:#d9dee3;--bg:#fbfbfc;--accent:#3457a5;--warn:#a5343a;--ok:#2c7a4b}
*{box-sizing:border-box}body{margin:0;font:15px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;color:var(--fg);background:var(--bg)}
header{padding:.8rem 1.2rem;border-bottom:1px solid var(--line);background:#fff;display:flex;gap:1rem;align-items:baseline;flex-wrap:wrap}
header h1{font-size:1.1rem;margin:0}header a{color:inherit;text-decoration:none}main{padding:1rem 1.2rem;max-width:70rem}
form.filters{display:flex;flex-wrap:wrap;gap:.5rem;margin-bottom:1rem}form.filters input,form.filters select{padding:.35rem .5rem;border:1px solid var(--line);border-radius:4px;font:inherit}
form.filters input[name=q]{flex:1 1 18rem}button{font:inherit;padding:.35rem .8rem;border:1px solid var(--accent);background:var(--accent);color:#fff;border-radius:4px;cursor:pointer}
button.danger{background:var(--warn);border-color:var(--warn)}table{border-collapse:collapse;width:100%;background:#fff}
th,td{text-align:left;vertical-align:top;padding:.45rem .55rem;border-bottom:1px solid var(--line)}th{font-size:.8rem;color:var(--muted);font-weight:600}
.kref,code{font:12px/1.4 ui-monospace,Menlo,Consolas,monospace;word-break:break-all}.muted{color:var(--muted)}
.badge{display:inline-block;padding:0 .4rem;border-radius:3px;font-size:.75rem;border:1px solid var(--line);margin-right:.2rem;white-space:nowrap}
.ev-official{border-color:var(--ok);color:var(--ok)}.ev-corroborated{border-color:var(--accent);color:var(--accent)}.ev-unverified{border-color:var(--warn);color:var(--warn)}
.mark-deprecated{background:#eee;color:#555}.mark-contested{background:#fbeaea;color:var(--warn);border-color:var(--warn)}
.content{white-space:pre-wrap;overflow-wrap:anywhere;background:#fff;border:1px solid var(--line);padding:.6rem;border-radius:4px}
section{margin:1.4rem 0}h2{font-size:1rem;margin:.2rem 0 .6rem}.revision{border-left:3px solid var(--line);padding:.2rem 0 .2rem .8rem;margin:.6rem 0}
.revision.current{border-left-color:var(--accent)}.revision.later{opacity:.55}.error{border:1px solid var(--warn);background:#fdf3f3;padding:.8rem;border-radius:4px}
.flash{border:1px solid var(--ok);background:#f1f8f3;padding:.5rem .8rem;border-radius:4px;margin-bottom:1rem}nav.pages{margin:1rem 0;display:flex;gap:1rem}
.w-s{width:7rem}.w-m{width:9rem}.w-l{width:11rem}
form.inline{display:inline-flex;gap:.3rem;margin:.2rem .4rem .2rem 0}form.inline input{padding:.25rem .4rem;border:1px solid var(--line);border-radius:4px;font:inherit}
"""

# The page's only script: copy a kref, and ask before an erase. It runs under a per-response CSP nonce.
_BROWSER_JS = """
document.addEventListener('click',function(e){var t=e.target;if(t&&t.dataset&&t.dataset.copy){
if(navigator.clipboard){navigator.clipboard.writeText(t.dataset.copy)}t.textContent='copied';}});
document.addEventListener('submit',function(e){var f=e.target;if(f&&f.dataset&&f.dataset.confirm&&!window.confirm(f.dataset.confirm)){e.preventDefault()}});
"""



def _page(title: str, nonce: str, where: str, mode: str, body: str) -> str:
    """The one page: inline CSS and script (under the response's CSP nonce), no outside resources."""
    return ('<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width,initial-scale=1"><meta name="referrer" content="no-referrer">'
            f'<title>{title}</title><style nonce="{nonce}">{_BROWSER_CSS}</style></head>'
            f'<body><header><h1><a href="/">kumiho memory</a></h1><span class="muted">{where}</span>'
            f'<span class="muted" id="mode">{mode}</span></header><main id="main">{body}</main>'
            f'<script nonce="{nonce}">{_BROWSER_JS}</script></body></html>\n')


_LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
_BROWSER_WRITE_ROUTES = ("/tag", "/untag", "/deprecate", "/forget")
_MAX_QUERY_CHARS = 8192
_MAX_FORM_BYTES = 64 * 1024
_CONTROL_OR_NUL = dict.fromkeys([*range(0, 9), 11, 12, *range(14, 32), 127], "\ufffd")


def _html_escape(value: Any) -> str:
    """HTML-escape any value, quotes included; control characters become U+FFFD."""
    return html.escape(str(value).translate(_CONTROL_OR_NUL), quote=True)


def _html_text(value: Any) -> str:
    """User text in an isolating span, so right-to-left marks and overrides cannot reorder the page."""
    return f'<bdi dir="auto">{_html_escape(value)}</bdi>'


def _host_is_loopback(host_header: str) -> bool:
    host = host_header.strip().lower()
    if host.startswith("["):
        name = host[1:host.find("]")] if "]" in host else ""
    else:
        name = host.rsplit(":", 1)[0] if host.count(":") == 1 else host
    return name in _LOOPBACK_HOSTS or (name.startswith("127.") and name.replace(".", "").isdigit())


class _BadRequest(Exception):
    """A request the browser refuses with a page: carries the status and the message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


class BrowserServer:
    """A running memory browser (see ``MemoryBrowser.serve``): ``url``, ``shutdown()``, ``wait()``."""

    def __init__(self, httpd: Any, thread: threading.Thread) -> None:
        self._httpd, self._thread = httpd, thread
        host, port = httpd.server_address[:2]
        self.port = port
        self.url = f"http://{'[' + host + ']' if ':' in host else host}:{port}/"

    def wait(self, timeout: float | None = None) -> None:
        """Block until the server stops (or ``timeout`` seconds pass)."""
        self._thread.join(timeout)

    def shutdown(self) -> None:
        """Stop serving and release the port; safe to call twice."""
        if self._thread.is_alive():
            self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()

    def __enter__(self) -> "BrowserServer":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.shutdown()


class MemoryBrowser:
    """A local, read-only-by-default web page over a ``Memory``: list, search, and each memory's whole story.

    ``handle`` is the whole application, a pure function of the request (no sockets), so it can be tested
    and embedded; ``serve`` puts it behind ``http.server`` on a loopback address.

    Args:
        memory: the memory to browse; the caller keeps ownership.
        allow_writes: show tag, untag, deprecate and forget buttons. Every write is a POST that must carry
            this run's token (printed nowhere, embedded in the forms), come from a loopback origin and name
            a loopback Host, so another site cannot drive it (CSRF, DNS rebinding).
        token: the per-run token (default a fresh random one).
        page_size: memories per page by default.
    """

    def __init__(self, memory: Memory, *, allow_writes: bool = False, token: str | None = None,
                 page_size: int = 50) -> None:
        _page_bounds(page_size, 0)
        self.memory = memory
        self.allow_writes = bool(allow_writes)
        self.token = token or secrets.token_urlsafe(24)
        self.page_size = page_size

    # -- the application -----------------------------------------------------------------------------------

    def handle(self, method: str, path: str, query: str = "", form: Mapping[str, str] | None = None,
               headers: Mapping[str, str] | None = None) -> tuple[int, list[tuple[str, str]], bytes]:
        """Answer one request.

        Args:
            method: ``GET``, ``HEAD`` or ``POST``. path: the URL path (a ``?query`` on it is split off).
            query: the raw query string. form: a POST's decoded form fields.
            headers: the request headers (any case); ``Host`` must name a loopback address.

        Returns:
            ``(status, headers, body)``: an HTML page for every outcome, errors included (never a traceback).
        """
        nonce = secrets.token_urlsafe(12)
        method = str(method).upper()
        back = '<p><a href="/">Back to the list</a></p>'
        try:
            lowered = {str(name).lower(): str(value) for name, value in (headers or {}).items()}
            if "?" in path:
                path, _, extra = path.partition("?")
                query = query or extra
            if len(query) > _MAX_QUERY_CHARS or len(path) > 1024:
                raise _BadRequest(414, "That address is too long.")
            if not _host_is_loopback(lowered.get("host", "")):
                raise _BadRequest(421, "This memory browser answers only to a loopback address "
                                       "(127.0.0.1 or localhost).")
            params = self._params(query)
            if method == "POST":
                if path not in _BROWSER_WRITE_ROUTES:
                    raise _BadRequest(405 if path in ("/", "/memory") else 404, "There is no such action here.")
                location = self._write(path, dict(form or {}), lowered)
                return 303, self._headers(nonce, "text/plain; charset=utf-8") + [("Location", location)], b""
            if method not in ("GET", "HEAD"):
                raise _BadRequest(405, f"Method {method[:20]!r} is not served here.")
            if path == "/":
                status, title, body = 200, "memories", self._list_page(params)
            elif path == "/memory":
                status, title, body = 200, "memory", self._memory_page(params)
            elif path == "/favicon.ico":
                return 204, self._headers(nonce, "text/plain; charset=utf-8"), b""
            elif path in _BROWSER_WRITE_ROUTES:
                raise _BadRequest(405, "Changes are made with the buttons on a memory's page.")
            else:
                raise _BadRequest(404, "There is no such page here.")
        except _BadRequest as refusal:
            status, title = refusal.status, "refused"
            body = f'<div class="error" id="error"><strong>{status}</strong> {_html_escape(refusal.message)}</div>{back}'
        except NotFoundError as exc:
            status, title = 404, "not found"
            body = f'<div class="error" id="error"><strong>Not found.</strong> {_html_escape(exc)}</div>{back}'
        except KumihoMemoryError as exc:
            status, title = 400, "bad request"
            body = (f'<div class="error" id="error"><strong>That request cannot be answered.</strong> '
                    f'{_html_escape(exc)}</div>{back}')
        except Exception as exc:  # the page boundary: a bug gives an error page, never a traceback
            status, title = 500, "error"
            body = (f'<div class="error" id="error"><strong>Internal error</strong> '
                    f'({_html_escape(type(exc).__name__)}).</div>{back}')
        page = _page(_html_escape(title), nonce, _html_escape(self.memory.project),
                     "writes allowed" if self.allow_writes else "read-only", body)
        return status, self._headers(nonce, "text/html; charset=utf-8"), b"" if method == "HEAD" else page.encode("utf-8")

    def serve(self, host: str = "127.0.0.1", port: int = 0) -> BrowserServer:
        """Serve ``handle`` on ``host:port`` in a background thread (port 0 picks a free one).

        Raises:
            InvalidArgumentError: ``host`` is not a loopback address, or the port is out of range.
            StoreError: the port cannot be bound.
        """
        import http.server

        if host not in _LOOPBACK_HOSTS and not (host.startswith("127.") and host.replace(".", "").isdigit()):
            raise InvalidArgumentError(f"the memory browser serves only on a loopback address, not {host!r}")
        if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
            raise InvalidArgumentError(f"port must be 0..65535, not {port!r}")
        browser = self

        class Handler(http.server.BaseHTTPRequestHandler):
            server_version = "kumiho-memory-browser"
            sys_version = ""
            timeout = 30

            def _answer(self, method: str) -> None:
                path, _, query = self.path.partition("?")
                form: dict[str, str] = {}
                if method == "POST":
                    try:
                        length = int(self.headers.get("Content-Length") or 0)
                    except ValueError:
                        length = -1
                    if not 0 <= length <= _MAX_FORM_BYTES:
                        self._send(413, [("Content-Type", "text/plain")], b"form too large")
                        return
                    raw = self.rfile.read(length).decode("utf-8", "replace")
                    try:
                        form = dict(urllib.parse.parse_qsl(raw, keep_blank_values=True, max_num_fields=20))
                    except ValueError:
                        form = {}
                status, headers, body = browser.handle(method, path, query, form, dict(self.headers.items()))
                self._send(status, headers, body)

            def _send(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
                self.send_response(status)
                for name, value in headers:
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                self._answer("GET")

            def do_HEAD(self) -> None:
                self._answer("HEAD")

            def do_POST(self) -> None:
                self._answer("POST")

            def log_message(self, format: str, *args: Any) -> None:   # quiet: the CLI prints the URL
                return

        class Server(http.server.ThreadingHTTPServer):
            daemon_threads = True
            address_family = __import__("socket").AF_INET6 if ":" in host else __import__("socket").AF_INET

        try:
            httpd = Server((host, port), Handler)
        except OSError as exc:
            raise StoreError(f"cannot serve on {host}:{port}: {exc}") from exc
        thread = threading.Thread(target=httpd.serve_forever, name="kumiho-memory-browser", daemon=True)
        thread.start()
        return BrowserServer(httpd, thread)

    # -- requests --------------------------------------------------------------------------------------------

    @staticmethod
    def _params(query: str) -> dict[str, str]:
        try:
            pairs = urllib.parse.parse_qsl(query, keep_blank_values=True, max_num_fields=30, errors="replace")
        except ValueError:
            raise _BadRequest(400, "That address has too many parameters.") from None
        params: dict[str, str] = {}
        for name, value in pairs:
            if name in params:
                raise _BadRequest(400, f"The parameter {name!r:.40} is given twice.")
            params[name] = value
        return params

    @staticmethod
    def _number(params: Mapping[str, str], name: str, default: int) -> int:
        text = params.get(name, "").strip()
        if not text:
            return default
        if not text.isascii() or not text.isdigit() or len(text) > 10:
            raise _BadRequest(400, f"{name} must be a whole number, not {text!r:.40}.")
        return int(text)

    def _headers(self, nonce: str, content_type: str) -> list[tuple[str, str]]:
        policy = (f"default-src 'none'; style-src 'nonce-{nonce}'; script-src 'nonce-{nonce}'; img-src 'self'; "
                  f"form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
        return [("Content-Type", content_type), ("Content-Security-Policy", policy),
                ("X-Content-Type-Options", "nosniff"), ("X-Frame-Options", "DENY"),
                ("Referrer-Policy", "no-referrer"), ("Cache-Control", "no-store"),
                ("Cross-Origin-Resource-Policy", "same-origin")]

    def _write(self, path: str, form: dict[str, str], headers: Mapping[str, str]) -> str:
        """Do one guarded write and return where to go next."""
        if not self.allow_writes:
            raise _BadRequest(403, "This browser is read-only; start it with --allow-writes to change memories.")
        origin = headers.get("origin")
        if origin is not None and origin != "null":
            parsed = urllib.parse.urlsplit(origin)
            if parsed.scheme != "http" or not _host_is_loopback(parsed.netloc):
                raise _BadRequest(403, "Changes are accepted only from this browser's own pages.")
        if headers.get("sec-fetch-site", "same-origin") not in ("same-origin", "none"):
            raise _BadRequest(403, "Changes are accepted only from this browser's own pages.")
        if not secrets.compare_digest(form.get("token", "").encode("utf-8", "replace"), self.token.encode("utf-8")):
            raise _BadRequest(403, "This form is stale or did not come from this browser (reload the page).")
        kref = form.get("kref", "")
        Kref.parse(kref)
        item = self.memory.get(kref)["item_kref"]
        back = "/memory?" + urllib.parse.urlencode({"kref": item})
        if path == "/tag":
            tagged = self.memory.tag(kref, form.get("tag", ""))
            return back + "&" + urllib.parse.urlencode({"done": f"tagged {tagged['kref']} {form.get('tag', '')}"})
        if path == "/untag":
            removed = self.memory.untag(kref, form.get("tag", ""))
            return back + "&" + urllib.parse.urlencode({"done": "untagged" if removed else "that revision did not carry the tag"})
        if path == "/deprecate":
            restore = form.get("undo") == "1"
            self.memory.deprecate(kref, not restore)
            return back + "&" + urllib.parse.urlencode({"done": "restored" if restore else "deprecated"})
        if form.get("confirm") != "yes":
            raise _BadRequest(400, "Forgetting needs confirm=yes.")
        report = self.memory.forget(kref)
        return "/?" + urllib.parse.urlencode({"done": f"forgot {report['kref']}: {report['revisions']} revision(s)"})

    # -- pages -----------------------------------------------------------------------------------------------

    def _filters(self, params: Mapping[str, str]) -> dict[str, Any]:
        def text(name: str, most: int = 200) -> str | None:
            value = params.get(name, "").strip()
            if len(value) > most:
                raise _BadRequest(400, f"{name} is longer than {most} characters.")
            return value or None
        filters = {"q": text("q", 2000), "space": text("space"), "kind": text("kind"), "tag": text("tag"),
                   "evidence": text("evidence"), "as_of": text("as_of", 64)}
        if filters["space"] is not None:
            filters["space"] = normalize_space(filters["space"])
        if filters["kind"] is not None:
            _check_pattern(filters["kind"], KIND_PATTERN, "kind", InvalidArgumentError)
        if filters["tag"] is not None:
            validate_tag(filters["tag"])
        if filters["evidence"] is not None and filters["evidence"] not in EVIDENCE_LEVELS:
            raise _BadRequest(400, f"evidence must be one of {', '.join(EVIDENCE_LEVELS)}.")
        _instant(filters["as_of"])
        filters["deprecated"] = params.get("deprecated") == "1"
        return filters

    def _filter_form(self, filters: Mapping[str, Any]) -> str:
        def field(name: str, label: str, width: str) -> str:
            return (f'<input name="{name}" placeholder="{label}" aria-label="{label}" class="w-{width}" '
                    f'value="{_html_escape(filters.get(name) or "")}">')
        options = "".join(f'<option value="{level}"{" selected" if filters.get("evidence") == level else ""}>{level}</option>'
                          for level in EVIDENCE_LEVELS)
        checked = " checked" if filters.get("deprecated") else ""
        return ('<form class="filters" method="get" action="/" role="search">'
                f'<input name="q" placeholder="search (recall)" aria-label="search" value="{_html_escape(filters.get("q") or "")}">'
                f'{field("space", "space", "m")}{field("kind", "kind", "s")}{field("tag", "tag", "s")}'
                f'<select name="evidence" aria-label="evidence"><option value="">any evidence</option>{options}</select>'
                f'{field("as_of", "as of (ISO time)", "l")}'
                f'<label class="muted"><input type="checkbox" name="deprecated" value="1"{checked}> deprecated</label>'
                '<button type="submit">Show</button></form>')

    @staticmethod
    def _badges(memory: Mapping[str, Any]) -> str:
        level = memory.get("evidence_level")
        parts = [f'<span class="badge ev-{_html_escape(level)}">{_html_escape(level)}</span>'] if level else []
        if memory.get("deprecated"):
            parts.append('<span class="badge mark-deprecated">deprecated</span>')
        if memory.get("contested") or memory.get("contested_by"):
            parts.append('<span class="badge mark-contested">contested</span>')
        if memory.get("grounding_stale"):
            parts.append('<span class="badge mark-contested">stale grounding</span>')
        return "".join(parts)

    @staticmethod
    def _memory_link(item_kref: str, label: str, as_of: str | None = None) -> str:
        params = {"kref": item_kref, **({"as_of": as_of} if as_of else {})}
        return f'<a href="/memory?{_html_escape(urllib.parse.urlencode(params))}">{_html_text(label)}</a>'

    def _list_page(self, params: Mapping[str, str]) -> str:
        filters = self._filters(params)
        limit = self._number(params, "limit", self.page_size)
        offset = self._number(params, "offset", 0)
        if not 1 <= limit <= LIST_PAGE_LIMIT:
            raise _BadRequest(400, f"limit must be from 1 to {LIST_PAGE_LIMIT}.")
        parts = []
        if params.get("done"):
            parts.append(f'<div class="flash">{_html_text(params["done"][:300])}</div>')
        parts.append(self._filter_form(filters))
        if filters["q"]:
            rows, next_offset, note = self._search_rows(filters, limit, offset)
            heading = f'Search results for {_html_text(filters["q"])}'
        else:
            listed = list_memories(self.memory, space=filters["space"], kind=filters["kind"], tag=filters["tag"],
                                   evidence=filters["evidence"], include_deprecated=filters["deprecated"],
                                   as_of=filters["as_of"], limit=limit, offset=offset)
            rows, next_offset = listed["memories"], listed["next_offset"]
            note = f'{listed["total_items"]} item(s); examined {listed["scanned"]} from #{offset + 1}'
            heading = "Memories" + (f' as of {_html_text(filters["as_of"])}' if filters["as_of"] else "")
        parts.append(f'<h2 id="results-heading">{heading}</h2><p class="muted" id="results-note">{_html_escape(note)}</p>')
        if not rows:
            parts.append('<p id="empty">No memories match.</p>')
        else:
            score_head = "<th>score</th>" if filters["q"] else ""
            body = []
            for row in rows:
                score = f'<td class="score">{row["score"]:.3f}<br><span class="muted">base {row.get("base_score", row["score"]):.3f}</span></td>' \
                    if filters["q"] else ""
                excerpt = row["content"][:240] + ("…" if len(row["content"]) > 240 else "")
                tags = "".join(f'<span class="badge">{_html_escape(tag)}</span>' for tag in row["tags"])
                body.append(f'<tr class="memory-row">{score}<td>{self._memory_link(row["item_kref"], row["title"] or "(untitled)", filters["as_of"])}'
                            f' {self._badges(row)}<div class="muted">{_html_text(excerpt)}</div></td>'
                            f'<td>{_html_text(row["space"] or "(root)")}<br><span class="muted">{_html_escape(row["kind"])}</span></td>'
                            f'<td>r{_html_escape(row["revision"])}{" of " + _html_escape(row["revision_count"]) if row.get("revision_count") else ""}</td>'
                            f'<td>{tags}</td><td class="muted">{_html_escape(row["updated_at"])}</td></tr>')
            parts.append(f'<table id="memories"><thead><tr>{score_head}<th>memory</th><th>space / kind</th><th>revision</th>'
                         f'<th>tags</th><th>updated</th></tr></thead><tbody>{"".join(body)}</tbody></table>')
        links = []
        kept = {name: value for name, value in params.items() if name not in ("offset", "done") and value}
        if offset > 0:
            links.append(f'<a rel="prev" href="/?{_html_escape(urllib.parse.urlencode({**kept, "offset": max(0, offset - limit)}))}">← newer</a>')
        if next_offset is not None:
            links.append(f'<a rel="next" href="/?{_html_escape(urllib.parse.urlencode({**kept, "offset": next_offset}))}">more →</a>')
        if links:
            parts.append(f'<nav class="pages">{"".join(links)}</nav>')
        return "".join(parts)

    def _search_rows(self, filters: Mapping[str, Any], limit: int, offset: int) -> tuple[list[dict[str, Any]], int | None, str]:
        wanted = offset + limit
        if wanted > MAX_RECALL_LIMIT:
            raise _BadRequest(400, f"Search pages reach as far as result {MAX_RECALL_LIMIT}; narrow the search.")
        narrowed = filters["kind"] or filters["tag"] or filters["evidence"]
        pool = min(MAX_RECALL_LIMIT, wanted * 4 if narrowed else wanted + 1)
        hits = self.memory.recall(filters["q"], limit=pool, space=filters["space"], as_of=filters["as_of"])
        kept = []
        for hit in hits:
            level = hit.get("evidence_level") or parse_evidence(hit["metadata"], hit["tags"])
            if (filters["kind"] and hit["kind"] != filters["kind"]) or (filters["tag"] and filters["tag"] not in hit["tags"]) \
                    or (filters["evidence"] and level != filters["evidence"]):
                continue
            kept.append({**hit, "evidence_level": level, "revision_count": None, "updated_at": hit["created_at"]})
        page = kept[offset:wanted]
        more = len(kept) > wanted and wanted < MAX_RECALL_LIMIT
        return page, wanted if more else None, f"{len(page)} result(s) on this page, best first; scores from recall"

    def _memory_page(self, params: Mapping[str, str]) -> str:
        kref = params.get("kref", "").strip()
        if not kref:
            raise _BadRequest(400, "Which memory? This page needs ?kref=kref://...")
        if len(kref) > 2048:
            raise _BadRequest(400, "That kref is too long.")
        Kref.parse(kref)
        as_of = params.get("as_of", "").strip() or None
        story = describe_memory(self.memory, kref, as_of=as_of)
        current = story["current"]
        shown = story["current_at_as_of"] if as_of else current
        parts = []
        if params.get("done"):
            parts.append(f'<div class="flash">{_html_text(params["done"][:300])}</div>')
        badges = self._badges({**story, "contested": bool(story["contested_by"]), "deprecated": story["deprecated"]})
        parts.append(f'<h2 id="memory-title">{_html_text(current["title"] or "(untitled)")} {badges}</h2>'
                     f'<p><span class="kref" id="item-kref">{_html_escape(story["item_kref"])}</span> '
                     f'<button type="button" data-copy="{_html_escape(story["item_kref"])}">copy kref</button></p>'
                     f'<p class="muted">space {_html_text(story["space"] or "(root)")} · kind {_html_escape(story["kind"])} · '
                     f'{story["revision_count"]} revision(s) · evidence {_html_escape(story["evidence_level"] or "ungraded")}</p>')
        parts.append('<form class="filters" method="get" action="/memory">'
                     f'<input type="hidden" name="kref" value="{_html_escape(story["item_kref"])}">'
                     f'<input name="as_of" placeholder="as of (ISO time)" aria-label="as of" value="{_html_escape(as_of or "")}">'
                     '<button type="submit">View as of</button>'
                     + (f' <a href="/memory?{_html_escape(urllib.parse.urlencode({"kref": story["item_kref"]}))}">now</a>' if as_of else "")
                     + '</form>')
        if as_of:
            if shown is None:
                parts.append(f'<p class="error" id="as-of-view">This memory did not exist yet at {_html_escape(story["as_of"])}.</p>')
            else:
                parts.append(f'<section id="as-of-view"><h2>Current at {_html_escape(story["as_of"])}: r{shown["revision"]}</h2>'
                             f'<div class="content">{_html_text(shown["content"][:100_000])}</div></section>')
        parts.append(f'<section id="current"><h2>Current: r{current["revision"]}</h2>'
                     f'<div class="content">{_html_text(current["content"][:100_000])}</div></section>')
        chain = []
        if story["revisions_omitted"]:
            chain.append(f'<p class="muted">{story["revisions_omitted"]} older revision(s) not shown.</p>')
        deprecated_mark = '<span class="badge mark-deprecated">deprecated</span>'
        for revision in reversed(story["revisions"]):
            classes = "revision" + (" current" if revision["kref"] == current["kref"] else "") + \
                (" later" if revision["after_as_of"] else "")
            supersedes = "".join(f' <span class="badge">SUPERSEDES r{_html_escape(target.rpartition("=")[2])}</span>'
                                 for target in revision["supersedes"])
            artifacts = "".join(f'<li><code>{_html_escape(a["name"])}</code> → <span class="kref">{_html_escape(a["location"])}</span></li>'
                                for a in revision["artifacts"])
            tags = "".join(f'<span class="badge">{_html_escape(tag)}</span>' for tag in revision["tags"])
            chain.append(f'<div class="{classes}" id="r{revision["revision"]}"><strong>r{revision["revision"]}</strong>'
                         f'{supersedes} {tags} {deprecated_mark if revision["deprecated"] else ""}'
                         f' <span class="muted">{_html_escape(revision["created_at"])}</span>'
                         f'<div>{_html_text(revision["title"])}</div><div class="content">{_html_text(revision["content"][:20_000])}</div>'
                         + (f'<ul class="artifacts">{artifacts}</ul>' if artifacts else "")
                         + self._revision_actions(revision) + '</div>')
        parts.append(f'<section id="chain"><h2>Revision chain (SUPERSEDES), newest first</h2>{"".join(chain)}</section>')
        rows = []
        for tag, entry in sorted(story["tags"].items()):
            moves = " → ".join(f'{"r" + str(move["revision"]) if move["revision"] is not None else "removed"} '
                               f'<span class="muted">({_html_escape(move["at"])})</span>' for move in entry["history"])
            now = entry["now"].rpartition("=")[2] if entry["now"] else None
            then = ""
            if as_of:
                then = f'<td>{"r" + _html_escape(entry["at_as_of"].rpartition("=")[2]) if entry["at_as_of"] else "-"}</td>'
            rows.append(f'<tr class="tag-row"><td><span class="badge">{_html_escape(tag)}</span></td>'
                        f'<td>{"r" + _html_escape(now) if now else "removed"}</td>{then}<td>{moves}</td></tr>')
        then_head = "<th>at as_of</th>" if as_of else ""
        parts.append(f'<section id="tags"><h2>Tags and where they pointed over time</h2>'
                     f'<table><thead><tr><th>tag</th><th>now</th>{then_head}<th>history</th></tr></thead>'
                     f'<tbody>{"".join(rows)}</tbody></table></section>')
        for title, section, edges, other_key in (("Edges out", "edges-out", story["edges_out"], "target_kref"),
                                                 ("Edges in", "edges-in", story["edges_in"], "source_kref")):
            items = []
            for edge in edges:
                other = edge[other_key]
                mark = " mark-contested" if edge["edge_type"] == CONTRADICTS else ""
                items.append(f'<li><span class="badge{mark}">{_html_escape(edge["edge_type"])}</span> '
                             f'{self._memory_link(other.split("?")[0], edge.get("other_title") or other)} '
                             f'<span class="kref muted">{_html_escape(other)}</span> '
                             f'<span class="muted">{_html_escape(edge["created_at"])}</span></li>')
            parts.append(f'<section id="{section}"><h2>{title}</h2>'
                         + (f'<ul>{"".join(items)}</ul>' if items else '<p class="muted">none</p>') + '</section>')
        if story["contested_by"] or story["contradicts"]:
            listed = "".join(f'<li>contested by <span class="kref">{_html_escape(k)}</span></li>' for k in story["contested_by"]) + \
                "".join(f'<li>contradicts <span class="kref">{_html_escape(k)}</span></li>' for k in story["contradicts"])
            parts.append(f'<section id="contradictions"><h2>Contradictions</h2><ul>{listed}</ul></section>')
        if self.allow_writes:
            parts.append(self._item_actions(story))
        return "".join(parts)

    def _hidden(self, kref: str) -> str:
        return (f'<input type="hidden" name="token" value="{_html_escape(self.token)}">'
                f'<input type="hidden" name="kref" value="{_html_escape(kref)}">')

    def _revision_actions(self, revision: Mapping[str, Any]) -> str:
        if not self.allow_writes:
            return ""
        return (f'<form class="inline" method="post" action="/tag">{self._hidden(revision["kref"])}'
                '<input name="tag" placeholder="tag" aria-label="tag" required><button type="submit">tag</button></form>'
                f'<form class="inline" method="post" action="/untag">{self._hidden(revision["kref"])}'
                '<input name="tag" placeholder="tag" aria-label="untag" required><button type="submit">untag</button></form>')

    def _item_actions(self, story: Mapping[str, Any]) -> str:
        undo = '<input type="hidden" name="undo" value="1">' if story["deprecated"] else ""
        word = "restore" if story["deprecated"] else "deprecate"
        return (f'<section id="actions"><h2>Change</h2>'
                f'<form class="inline" method="post" action="/deprecate">{self._hidden(story["item_kref"])}{undo}'
                f'<button type="submit">{word}</button></form>'
                f'<form class="inline" method="post" action="/forget" data-confirm="Erase this memory and all its revisions for good?">'
                f'{self._hidden(story["item_kref"])}<input type="hidden" name="confirm" value="yes">'
                '<button class="danger" type="submit">forget</button></form></section>')


# -- LangGraph: a BaseStore kept in the memory graph --------------------------------------------------------
#
# Namespace ("users", "u1") is space users/u1 (under an optional root space); a label that is not a valid
# space segment is stored as "__<slug>-<hash>" and read back from the item's metadata. Key k is the item's
# supersession key "langgraph:k", so a put with the same key revises the same item and its history is kept.

_STORE_KEY_PREFIX = "langgraph:"
_STORE_METADATA = "langgraph"


def _store_segment(label: str) -> str:
    """The space segment for one namespace label (reversible when the label is a valid segment)."""
    if SEGMENT_PATTERN.match(label) and not label.startswith("__") and ".." not in label:
        return label
    digest = hashlib.sha256(label.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return f"__{slugify(label, 40, fallback='x')}-{digest}"


def _store_text(value: Mapping[str, Any], key: str, index: Any) -> str:
    """The text recall indexes for a stored value: its string leaves (or those at ``index`` paths)."""
    lines: list[str] = []

    def walk(node: Any, path: str) -> None:
        if isinstance(node, Mapping):
            for name, child in node.items():
                walk(child, f"{path}.{name}" if path else str(name))
        elif isinstance(node, (list, tuple)):
            for child in node:
                walk(child, path)
        elif isinstance(node, str):
            lines.append(f"{path}: {node}" if path else node)
        elif node is not None:
            lines.append(f"{path}: {json.dumps(node)}" if path else json.dumps(node))

    if isinstance(index, list):
        for path in index:
            node: Any = value
            for part in str(path).replace("[*]", "").split("."):
                node = node.get(part) if isinstance(node, Mapping) else None
            walk(node, str(path))
    elif index is not False:
        walk(value, "")
    return "\n".join(lines)[:MAX_CONTENT_CHARS] or key


def _filter_matches(value: Any, condition: Any) -> bool:
    """LangGraph's filter semantics: equality (nested mappings field by field), or ``$eq $ne $gt $gte $lt
    $lte`` operators."""
    if isinstance(condition, Mapping):
        if any(str(name).startswith("$") for name in condition):
            for operator_name, expected in condition.items():
                try:
                    if operator_name == "$eq":
                        ok = value == expected
                    elif operator_name == "$ne":
                        ok = value != expected
                    elif operator_name in ("$gt", "$gte", "$lt", "$lte"):
                        left, right = float(value), float(expected)
                        ok = {"$gt": left > right, "$gte": left >= right, "$lt": left < right,
                              "$lte": left <= right}[operator_name]
                    else:
                        raise InvalidArgumentError(f"unsupported filter operator {operator_name!r}")
                except (TypeError, ValueError) as exc:
                    if isinstance(exc, InvalidArgumentError):
                        raise
                    return False
                if not ok:
                    return False
            return True
        return isinstance(value, Mapping) and all(_filter_matches(value.get(name), wanted)
                                                  for name, wanted in condition.items())
    if isinstance(condition, (list, tuple)):
        return isinstance(value, (list, tuple)) and len(value) == len(condition) and \
            all(_filter_matches(left, right) for left, right in zip(value, condition))
    return value == condition


def _namespace_matches(namespace: tuple[str, ...], condition: Any) -> bool:
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    pairs = zip(namespace, path) if condition.match_type == "prefix" else zip(reversed(namespace), reversed(path))
    return all(wanted == "*" or label == wanted for label, wanted in pairs)


@functools.lru_cache(maxsize=None)
def _langgraph_store_class(base: Any) -> type:
    """Build the ``BaseStore`` subclass once per imported ``langgraph.store.base`` module."""

    class KumihoMemoryStore(base.BaseStore):
        """LangGraph's ``BaseStore`` over a kumiho ``Memory``: namespaces are spaces, keys are supersession
        keys (a put revises the item, so its history is kept), search runs recall with its scores, delete
        forgets. TTL is not supported (``supports_ttl = False``): a memory stays until deleted."""

        supports_ttl = False

        def __init__(self, memory: Memory, *, space: str | None = None, kind: str = "memory") -> None:
            self.memory = memory
            self.root = normalize_space(space) if space else ""
            self.kind = _check_pattern(kind, KIND_PATTERN, "kind", InvalidArgumentError)

        def __repr__(self) -> str:
            return f"KumihoMemoryStore({self.memory!r}, space={self.root!r})"

        # -- the two abstract methods -------------------------------------------------------------------

        def batch(self, ops: Iterable[Any]) -> list[Any]:
            """Run the operations in order (a get after a put in the same batch sees the put)."""
            results = []
            for op in ops:
                if isinstance(op, base.GetOp):
                    results.append(self._get(tuple(op.namespace), str(op.key)))
                elif isinstance(op, base.PutOp):
                    if op.value is None:
                        self._delete(tuple(op.namespace), str(op.key))
                    else:
                        if getattr(op, "ttl", None) is not None:
                            raise NotImplementedError("TTL is not supported by KumihoMemoryStore; "
                                                      "a memory stays until it is deleted")
                        self._put(tuple(op.namespace), str(op.key), op.value, op.index)
                    results.append(None)
                elif isinstance(op, base.SearchOp):
                    results.append(self._search(tuple(op.namespace_prefix), op.query, op.filter, op.limit, op.offset))
                elif isinstance(op, base.ListNamespacesOp):
                    results.append(self._list_namespaces(op.match_conditions, op.max_depth, op.limit, op.offset))
                else:
                    raise InvalidArgumentError(f"unknown store operation {type(op).__name__}")
            return results

        async def abatch(self, ops: Iterable[Any]) -> list[Any]:
            """``batch`` in a worker thread (the store's I/O is blocking)."""
            return await asyncio.to_thread(self.batch, list(ops))

        # -- operations ----------------------------------------------------------------------------------

        def _space(self, namespace: tuple[str, ...]) -> str:
            segments = [_store_segment(label) for label in namespace]
            return "/".join(([self.root] if self.root else []) + segments)

        def _held(self, namespace: tuple[str, ...], key: str, *, include_deprecated: bool) -> dict[str, Any] | None:
            space = self._space(namespace)
            for item in self.memory.items(space=space, include_deprecated=include_deprecated):
                if item["space"] == space and item["key"] == _STORE_KEY_PREFIX + key:
                    return item
            return None

        @staticmethod
        def _item(created_at: str, revision: Mapping[str, Any], *, search: bool = False,
                  score: float | None = None) -> Any:
            stored = revision["metadata"].get(_STORE_METADATA) or {}
            value = stored.get("value")
            arguments = dict(namespace=tuple(stored.get("namespace") or ()), key=str(stored.get("key")),
                             value=json.loads(canonical_json(value)) if isinstance(value, Mapping) else {},
                             created_at=parse_instant(created_at), updated_at=parse_instant(revision["created_at"]))
            return base.SearchItem(**arguments, score=score) if search else base.Item(**arguments)

        def _get(self, namespace: tuple[str, ...], key: str) -> Any:
            item = self._held(namespace, key, include_deprecated=False)
            if item is None:
                return None
            revision = self.memory.get(item["item_kref"])
            stored = revision["metadata"].get(_STORE_METADATA) or {}
            if tuple(stored.get("namespace") or ()) != namespace:
                return None
            return self._item(item["created_at"], revision)

        def _put(self, namespace: tuple[str, ...], key: str, value: Mapping[str, Any], index: Any) -> None:
            if not namespace:
                raise InvalidArgumentError("a namespace needs at least one label")
            if not isinstance(value, Mapping):
                raise InvalidArgumentError(f"a stored value is a mapping, not {type(value).__name__}")
            if len(key) > 512 - len(_STORE_KEY_PREFIX) or not key:
                raise InvalidArgumentError(f"a store key is 1 to {512 - len(_STORE_KEY_PREFIX)} characters")
            plain = json.loads(canonical_json(dict(value)))
            stored = {"namespace": list(namespace), "key": key, "value": plain,
                      "index": index if isinstance(index, (list, bool)) else None}
            text = _store_text(plain, key, index)
            title = key if len(key) <= MAX_TITLE_CHARS else key[:MAX_TITLE_CHARS]
            held = self._held(namespace, key, include_deprecated=True)
            if held is None:
                self.memory.remember(text, space=self._space(namespace), kind=self.kind, title=title,
                                     metadata={_STORE_METADATA: stored}, key=_STORE_KEY_PREFIX + key)
                return
            current = self.memory.get(held["item_kref"])
            if current["metadata"].get(_STORE_METADATA) != stored:
                self.memory.remember(text, title=title, metadata={_STORE_METADATA: stored}, item=held["item_kref"])
            if held["deprecated"]:
                self.memory.deprecate(held["item_kref"], False)

        def _delete(self, namespace: tuple[str, ...], key: str) -> None:
            held = self._held(namespace, key, include_deprecated=True)
            if held is not None:
                self.memory.forget(held["item_kref"])

        def _store_items(self, namespace_prefix: tuple[str, ...]) -> list[dict[str, Any]]:
            """Live items written by a store under the prefix, oldest first."""
            space = self._space(namespace_prefix)
            found = [item for item in self.memory.items(space=space or None)
                     if (item["key"] or "").startswith(_STORE_KEY_PREFIX)
                     and (not space or item["space"] == space or item["space"].startswith(space + "/"))]
            return sorted(found, key=lambda item: (item["created_at"], item["item_kref"]))

        def _search(self, namespace_prefix: tuple[str, ...], query: str | None, condition: Any, limit: int,
                    offset: int) -> list[Any]:
            if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
                raise InvalidArgumentError(f"limit must be a whole number >= 0, not {limit!r}")
            if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
                raise InvalidArgumentError(f"offset must be a whole number >= 0, not {offset!r}")
            if limit == 0:
                return []

            def wanted(revision: Mapping[str, Any]) -> bool:
                stored = revision["metadata"].get(_STORE_METADATA)
                if not isinstance(stored, Mapping):
                    return False
                if tuple(stored.get("namespace") or ())[:len(namespace_prefix)] != namespace_prefix:
                    return False
                return not condition or all(_filter_matches((stored.get("value") or {}).get(name), expected)
                                            for name, expected in condition.items())
            if query:
                return self._recalled(namespace_prefix, query, wanted, limit, offset)
            kept = []
            for item in self._store_items(namespace_prefix):
                if not condition and len(kept) < offset:     # unfiltered: skip without reading the revision
                    kept.append(None)
                    continue
                revision = self.memory.get(item["item_kref"])
                if wanted(revision):
                    kept.append((item, revision))
                if len(kept) >= offset + limit:
                    break
            return [self._item(item["created_at"], revision, search=True)
                    for item, revision in filter(None, kept[offset:offset + limit])]

        def _recalled(self, namespace_prefix: tuple[str, ...], query: str, wanted: Callable[[Mapping[str, Any]], bool],
                      limit: int, offset: int) -> list[Any]:
            space = self._space(namespace_prefix) or None
            pool = min(MAX_RECALL_LIMIT, offset + limit + 5)
            while True:
                hits = self.memory.recall(query, limit=pool, space=space, follow_edges=False)
                found, seen = [], set()
                for hit in hits:
                    if hit["item_kref"] in seen:
                        continue
                    seen.add(hit["item_kref"])
                    latest = self.memory.get(hit["item_kref"])
                    stored = latest["metadata"].get(_STORE_METADATA) or {}
                    if stored.get("index") is False or not wanted(latest):
                        continue
                    found.append((hit, latest))
                if len(found) >= offset + limit or len(hits) < pool or pool >= MAX_RECALL_LIMIT:
                    break
                pool = min(MAX_RECALL_LIMIT, pool * 4)
            page = found[offset:offset + limit]
            return [self._item(self._created(hit["item_kref"]), latest, search=True, score=float(hit["score"]))
                    for hit, latest in page]

        def _created(self, item_kref: str) -> str:
            return self.memory.history(item_kref)[0]["created_at"]

        def _list_namespaces(self, conditions: Any, max_depth: int | None, limit: int, offset: int) -> list[tuple[str, ...]]:
            namespaces: set[tuple[str, ...]] = set()
            decoded: dict[str, tuple[str, ...] | None] = {}
            root = self.root
            for item in self._store_items(()):
                space = item["space"]
                if space not in decoded:
                    relative = space[len(root) + 1:] if root else space
                    labels = tuple(relative.split("/")) if relative else ()
                    if any(label.startswith("__") for label in labels):
                        stored = self.memory.get(item["item_kref"])["metadata"].get(_STORE_METADATA) or {}
                        labels = tuple(stored.get("namespace") or ())
                    decoded[space] = labels or None
                if decoded[space]:
                    namespaces.add(decoded[space])
            chosen = [namespace for namespace in namespaces
                      if all(_namespace_matches(namespace, condition) for condition in conditions or ())]
            if max_depth is not None:
                chosen = list({namespace[:max_depth] for namespace in chosen})
            return sorted(chosen)[offset:offset + limit]

    return KumihoMemoryStore


def langgraph_store(memory: Memory | None = None, **options: Any) -> Any:
    """A LangGraph ``BaseStore`` kept in ``memory``: use it as ``graph.compile(store=...)``.

    Namespaces are spaces (``("users", "u1")`` is space ``users/u1``, under ``space=`` when given); ``put``
    with a key the namespace already holds adds a revision to the same item, so every earlier value stays in
    its history (``memory.history``); ``get`` reads the latest; ``search(prefix, query=...)`` runs recall and
    returns its scores (without a query: oldest first, with LangGraph's ``filter`` on the value); ``delete``
    forgets the item; ``list_namespaces`` and the async methods work as LangGraph documents them. TTL is not
    supported (``supports_ttl`` is False): a stored memory stays until it is deleted.

    Args:
        memory: the memory to keep the store in; default ``default_memory()``.
        options: ``space`` (a root space for every namespace), ``kind`` (item kind, default ``memory``).

    Raises:
        BackendUnavailableError: LangGraph is not installed (``pip install langgraph``).
    """
    base = _require("langgraph.store.base", extra="langgraph")
    return _langgraph_store_class(base)(memory if memory is not None else default_memory(), **options)


# -- OpenAI Agents SDK: a Session kept in working memory -----------------------------------------------------
#
# Each SDK item is one working-memory message: role from the item (function calls and their outputs are
# "tool"), content its text (so consolidation and recall read it), and the item itself in the message's
# metadata so get_items gives back exactly what was added (credentials cut out of its text fields first,
# as from every message).

_AGENT_ITEM = "agents_item"
_AGENT_TEXT_FIELDS = frozenset({"content", "text", "output", "arguments", "refusal"})


def _agent_item_text(item: Mapping[str, Any]) -> str:
    """The readable text of an SDK item (a message's text parts, a call's name and arguments, an output)."""
    kind = item.get("type")
    if kind == "function_call":
        return f"{item.get('name', 'function')}({item.get('arguments', '')})"
    parts: list[str] = []

    def collect(node: Any) -> None:
        if isinstance(node, str):
            parts.append(node)
        elif isinstance(node, Mapping):
            for field in ("text", "refusal", "output", "content", "summary"):
                if field in node:
                    collect(node[field])
        elif isinstance(node, (list, tuple)):
            for child in node:
                collect(child)
    collect(item.get("content") if "content" in item else item)
    return "\n".join(part for part in parts if part)


def _agent_item_role(item: Mapping[str, Any]) -> str:
    role = item.get("role")
    if role in MESSAGE_ROLES:
        return role
    if role == "developer":
        return "system"
    if str(item.get("type", "")).endswith(("_call", "_call_output")) or item.get("type") == "function_call_output":
        return "tool"
    return "assistant"


def _redacted_item(node: Any, redactor: PIIRedactor, field: str | None = None) -> Any:
    """A copy of an SDK item with credentials cut out of its text fields (ids and types are left alone)."""
    if isinstance(node, Mapping):
        return {name: _redacted_item(child, redactor, name) for name, child in node.items()}
    if isinstance(node, list):
        return [_redacted_item(child, redactor, field) for child in node]
    if isinstance(node, str) and field in _AGENT_TEXT_FIELDS:
        return redactor.strip_credentials(node)
    return node


@functools.lru_cache(maxsize=None)
def _agents_session_class(session_module: Any) -> type:
    """Build the ``SessionABC`` subclass once per imported ``agents.memory.session`` module."""

    class KumihoAgentsSession(session_module.SessionABC):
        """An OpenAI Agents SDK session kept in kumiho working memory (the store file's buffer by default),
        so a reopened session keeps its items and ``consolidate()`` turns it into long-term memory."""

        def __init__(self, session_id: str, memory: Memory, *, buffer: WorkingMemoryBuffer | None = None,
                     user_id: str | None = None, context: str | None = None, ttl_seconds: int | None = None,
                     session_settings: Any = None) -> None:
            self.session_id = _wm_identifier(session_id, "session_id")
            self.memory = memory
            self.session_settings = session_settings
            self._owns_buffer = buffer is None
            if buffer is None:
                path = getattr(memory.backend, "path", None)
                options = {} if ttl_seconds is None else {"default_ttl": ttl_seconds}
                buffer = InProcessBuffer(None if path in (None, ":memory:") else path, **options)
            self.buffer = buffer
            self.user_id, self.context = user_id, context
            self._redactor = PIIRedactor()

        def __repr__(self) -> str:
            return f"KumihoAgentsSession({self.session_id!r}, {self.buffer!r})"

        async def get_items(self, limit: int | None = None) -> list[Any]:
            """The session's items oldest first; with ``limit``, the latest ``limit`` of them."""
            if limit is None and self.session_settings is not None:
                limit = getattr(self.session_settings, "limit", None)
            if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)):
                raise InvalidArgumentError(f"limit must be a whole number or None, not {limit!r}")
            if limit is not None and limit < 0:
                limit = None                       # as the SDK's SQLiteSession: a negative limit is no limit
            if limit == 0:
                return []
            window = await self.buffer.get_messages(project=self.memory.project, session_id=self.session_id,
                                                    limit=limit if limit is not None else 1000)
            while limit is None and window["message_count"] > len(window["messages"]):
                window = await self.buffer.get_messages(project=self.memory.project, session_id=self.session_id,
                                                        limit=window["message_count"] + 100)
            return [self._item(message) for message in window["messages"]]

        async def add_items(self, items: list[Any]) -> None:
            """Append items to the session (each at most 64 KiB as JSON)."""
            for item in items:
                try:
                    plain = json.loads(canonical_json(dict(item)))
                except (TypeError, ValueError) as exc:
                    raise InvalidArgumentError(f"a session item must be a JSON object: {exc}") from None
                redacted = _redacted_item(plain, self._redactor)
                text = _agent_item_text(redacted)
                if len(text.encode("utf-8")) > MAX_MESSAGE_BYTES:     # the item itself keeps all of it
                    text = text.encode("utf-8")[:MAX_MESSAGE_BYTES].decode("utf-8", "ignore")
                added = await self.buffer.add_message(project=self.memory.project, session_id=self.session_id,
                                                      role=_agent_item_role(redacted), content=text,
                                                      metadata={_AGENT_ITEM: redacted, "channel": "openai-agents"})
                if added["message_count"] == 1 and (self.user_id or self.context):
                    meta = {name: value for name, value in (("user_id", self.user_id), ("context", self.context))
                            if value}
                    await self.buffer.set_session_metadata(project=self.memory.project, session_id=self.session_id,
                                                           metadata=meta)

        async def pop_item(self) -> Any | None:
            """Remove and return the newest item, or None when the session is empty."""
            message = await self.buffer.pop_message(project=self.memory.project, session_id=self.session_id)
            return None if message is None else self._item(message)

        async def clear_session(self) -> None:
            """Remove every item of the session."""
            await self.buffer.clear_session(project=self.memory.project, session_id=self.session_id)

        async def consolidate(self, **options: Any) -> dict[str, Any]:
            """Turn the session into one long-term memory, as ``UniversalMemoryManager.consolidate_session``
            does for any working-memory session (options pass through: ``space_path``, ``summary``, ...)."""
            manager = UniversalMemoryManager(memory=self.memory, redis_buffer=self.buffer)
            return await manager.consolidate_session(session_id=self.session_id, **options)

        async def aclose(self) -> None:
            """Release the buffer this session opened (a buffer passed in stays open)."""
            if self._owns_buffer:
                await self.buffer.close()

        def close(self) -> None:
            """``aclose`` for synchronous code (not from inside a running event loop)."""
            if self._owns_buffer:
                asyncio.run(self.buffer.close())

        @staticmethod
        def _item(message: Mapping[str, Any]) -> Any:
            stored = (message.get("metadata") or {}).get(_AGENT_ITEM)
            if isinstance(stored, Mapping):
                return dict(stored)
            return {"role": message["role"], "content": message["content"]}   # a message added by other code

    return KumihoAgentsSession


def agents_session(session_id: str, memory: Memory | None = None, **options: Any) -> Any:
    """An OpenAI Agents SDK session (``SessionABC``) kept in kumiho working memory.

    Use it as ``Runner.run(agent, text, session=agents_session("chat-1", memory))``. Items are kept in the
    working-memory buffer of the memory's store file (so a reopened session keeps them; an in-memory
    ``Memory`` gets an in-memory buffer), one message per item, and ``await session.consolidate()`` (or
    ``UniversalMemoryManager.consolidate_session(session_id=...)`` over the same buffer) turns the session
    into a long-term memory like any working-memory session. Like every session, it expires after the
    buffer's TTL without use (``ttl_seconds=``, default ``KUMIHO_WORKING_MEMORY_TTL``'s 3600 s).

    Args:
        session_id: the session (1-256 characters, no spaces).
        memory: the memory; default ``default_memory()``.
        options: ``buffer`` (a ``WorkingMemoryBuffer``, e.g. a manager's ``RedisMemoryBuffer``),
            ``user_id`` and ``context`` (recorded for consolidation), ``ttl_seconds``, ``session_settings``.

    Raises:
        BackendUnavailableError: the Agents SDK is not installed (``pip install openai-agents``).
    """
    module = _require("agents.memory.session", extra="agents", package="openai-agents")
    return _agents_session_class(module)(session_id, memory if memory is not None else default_memory(), **options)


# ==========================================================================================================
# 16. CLI
# ==========================================================================================================

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_NOT_FOUND = 0, 1, 2, 3

_CLI_EPILOG = """\
exit codes: 0 ok, 1 error, 2 bad usage, 3 not found.
environment: KUMIHO_MEMORY_PATH (store file), KUMIHO_MEMORY_PROJECT, KUMIHO_MEMORY_BUSY_TIMEOUT,
  KUMIHO_REDIS_URL / REDIS_URL (working memory on Redis), KUMIHO_WORKING_MEMORY_TTL.
examples:
  kumiho-memory remember "The user prefers dark mode" --space prefs --key ui.theme
  kumiho-memory recall "dark mode" --json
  kumiho-memory export > backup.jsonl && kumiho-memory --db copy.db import backup.jsonl
"""


def _progress_reporter(label: str, stream: IO[str] | None = None) -> Callable[[int], None] | None:
    """A progress callback that redraws ``label N`` on a terminal's stderr every 500 records, else None."""
    stream = stream or sys.stderr
    if not stream.isatty():
        return None

    def report(count: int) -> None:
        if count % 500 == 0:
            stream.write(f"\r{label} {count}")
            stream.flush()
    return report


def _metadata_argument(text: str | None) -> dict[str, Any] | None:
    if text is None:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidArgumentError(f"--metadata is not JSON: {exc.msg}") from exc
    if not isinstance(value, dict):
        raise InvalidArgumentError("--metadata must be a JSON object")
    return value


def _format_revision(result: Mapping[str, Any]) -> str:
    lines = [f"{result['kref']}", f"  title:      {result['title']}", f"  created_at: {result['created_at']}",
             f"  tags:       {', '.join(result['tags']) or '-'}"]
    if result.get("deprecated"):
        lines.append("  deprecated: yes")
    if result.get("metadata"):
        lines.append(f"  metadata:   {canonical_json(result['metadata'])}")
    if "score" in result:
        lines.append(f"  score:      {result['score']:.4f}")
    lines.append("")
    lines.extend("  " + line for line in result["content"].splitlines())
    return "\n".join(lines)


def _format_edge(edge: Mapping[str, Any]) -> str:
    return f"{edge['source_kref']} -[{edge['edge_type']}]-> {edge['target_kref']}"


def _cmd_remember(memory: Memory, args: argparse.Namespace) -> tuple[Any, str]:
    content = sys.stdin.read() if args.content == "-" else args.content
    kref = memory.remember(content, space=args.space, title=args.title, kind=args.kind,
                           metadata=_metadata_argument(args.metadata), tags=args.tag or None, item=args.item,
                           key=args.key, evidence_level=args.evidence_level, source=args.source)
    return {"kref": kref}, kref


def _json_argument(text: str | None, flag: str) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidArgumentError(f"{flag} is not JSON: {exc.msg}") from exc


def _cmd_recall(memory: Memory, args: argparse.Namespace) -> tuple[Any, str]:
    options = dict(limit=args.limit, space_paths=args.space, memory_types=args.type,
                   where=_json_argument(args.where, "--where"), min_score=args.min_score, as_of=args.as_of,
                   include_superseded=args.history)
    if args.context:
        engaged = memory.engage(args.query, **options)
        return engaged, engaged["context"] or "(no memories match)"
    results = memory.recall(args.query, **options)
    text = "\n".join(f"{hit['score']:8.3f}  {hit['kref']}\n          {hit['title']}" for hit in results)
    return results, text or "(no memories match)"


def _cmd_get(memory: Memory, args: argparse.Namespace) -> tuple[Any, str]:
    result = memory.get(args.kref)
    return result, _format_revision(result)


def _cmd_history(memory: Memory, args: argparse.Namespace) -> tuple[Any, str]:
    results = memory.history(args.kref)
    text = "\n".join(f"r{r['revision']:<4} {r['created_at']}  [{', '.join(r['tags'])}]"
                     f"{' (deprecated)' if r['deprecated'] else ''}  {r['title']}" for r in results)
    return results, text


def _cmd_tag(memory: Memory, args: argparse.Namespace) -> tuple[Any, str]:
    result = memory.tag(args.kref, args.tag)
    return result, f"{args.tag} -> {result['kref']}"


def _cmd_untag(memory: Memory, args: argparse.Namespace) -> tuple[Any, str]:
    removed = memory.untag(args.kref, args.tag)
    return {"removed": removed}, f"removed {args.tag}" if removed else f"{args.kref} did not carry {args.tag}"


def _cmd_link(memory: Memory, args: argparse.Namespace) -> tuple[Any, str]:
    edge = memory.link(args.source, args.target, args.edge_type, _metadata_argument(args.metadata))
    return edge, _format_edge(edge)


def _cmd_edges(memory: Memory, args: argparse.Namespace) -> tuple[Any, str]:
    results = memory.edges(args.kref, direction=args.direction, edge_type=args.type)
    return results, "\n".join(_format_edge(edge) for edge in results) or "(no edges)"


def _cmd_deprecate(memory: Memory, args: argparse.Namespace) -> tuple[Any, str]:
    memory.deprecate(args.kref, not args.undo)
    word = "restored" if args.undo else "deprecated"
    return {"kref": args.kref, "deprecated": not args.undo}, f"{word} {args.kref}"


def _cmd_forget(memory: Memory, args: argparse.Namespace) -> tuple[Any, str]:
    report = memory.forget(args.kref)
    return report, (f"forgot {report['kref']}: {report['revisions']} revision(s), {report['edges']} edge(s)"
                    + ("" if report["scrubbed"] else " (WAL scrub deferred: another process is reading)"))


def _cmd_stats(memory: Memory, args: argparse.Namespace) -> tuple[Any, str]:
    result = memory.stats()
    return result, "\n".join(f"{key:22} {value}" for key, value in result.items())


def _cmd_export(memory: Memory, args: argparse.Namespace) -> tuple[Any, str | None]:
    if args.format == "mermaid":
        if not args.item:
            raise InvalidArgumentError("--format mermaid needs --item KREF (the item to draw)")
        text = memory.mermaid(args.item)
        if args.output:
            _write_text_file(args.output, text)
            return {"output": args.output}, None
        return {"mermaid": text}, text.rstrip("\n")
    progress = _progress_reporter("exported")
    if args.output:
        temporary = _unique_temporary(args.output)
        try:
            with open(temporary, "w", encoding="utf-8", newline="\n") as stream:
                count = memory.export_jsonl(stream, progress=progress)
            os.replace(temporary, args.output)
        except OSError as exc:
            raise StoreError(f"cannot write {args.output!r}: {exc}") from exc
    else:
        count = memory.export_jsonl(sys.stdout, progress=progress)
    if progress is not None:
        sys.stderr.write(f"\rexported {count} records\n")
    return {"records": count, "output": args.output}, None


def _write_text_file(path: str, text: str) -> None:
    try:
        with open(path, "w", encoding="utf-8", newline="\n") as stream:
            stream.write(text)
    except OSError as exc:
        raise StoreError(f"cannot write {path!r}: {exc}") from exc


def _cmd_import(memory: Memory, args: argparse.Namespace) -> tuple[Any, str]:
    progress = _progress_reporter("imported")
    if args.file == "-":
        counts = memory.import_jsonl(sys.stdin, progress=progress)
    else:
        try:
            with open(args.file, encoding="utf-8") as stream:
                counts = memory.import_jsonl(stream, progress=progress)
        except (OSError, UnicodeDecodeError) as exc:
            raise StoreError(f"cannot read {args.file!r}: {exc}") from exc
    if progress is not None:
        sys.stderr.write("\r")
    return counts, f"imported {counts['records']} records ({counts['added']} added, {counts['skipped']} skipped)"


def _manager(memory: Memory) -> "UniversalMemoryManager":
    """The manager the chat commands use: Redis when KUMIHO_REDIS_URL/REDIS_URL is set, else the buffer kept
    in the store file."""
    config = WorkingMemoryConfig.from_env()
    redis_url = getattr(config, "redis_url", None)
    return UniversalMemoryManager(memory=memory, redis_url=redis_url)


def _run_manager(memory: Memory, work: Callable[["UniversalMemoryManager"], Any]) -> Any:
    async def run() -> Any:
        manager = _manager(memory)
        try:
            return await work(manager)
        finally:
            await manager.buffer.close()
    return asyncio.run(run())


def _cmd_chat(memory: Memory, args: argparse.Namespace) -> tuple[Any, str]:
    if args.action == "add":
        if not args.message:
            raise InvalidArgumentError("chat add needs a message (or '-' to read standard input)")
        text = sys.stdin.read() if args.message == "-" else args.message

        async def add(manager: UniversalMemoryManager) -> Any:
            return await manager.buffer.add_message(project=memory.project, session_id=args.session, role=args.role,
                                                    content=manager.pii.strip_credentials(text), metadata={})
        result = _run_manager(memory, add)
        return {"success": True, **result}, f"{result['message_id']} ({result['message_count']} in session)"
    if args.action == "get":
        async def get(manager: UniversalMemoryManager) -> Any:
            return await manager.buffer.get_messages(project=memory.project, session_id=args.session, limit=args.limit)
        result = _run_manager(memory, get)
        text = "\n".join(f"[{m['timestamp']}] {m['role']}: {m['content']}" for m in result["messages"])
        return {**result, "session_id": args.session}, text or "(no messages)"

    async def clear(manager: UniversalMemoryManager) -> Any:
        return await manager.buffer.clear_session(project=memory.project, session_id=args.session)
    cleared = _run_manager(memory, clear)
    return {"success": True, "cleared_count": cleared}, f"cleared {cleared} message(s)"


def _cmd_consolidate(memory: Memory, args: argparse.Namespace) -> tuple[Any, str]:
    async def consolidate(manager: UniversalMemoryManager) -> Any:
        return await manager.consolidate_session(session_id=args.session, space_path=args.space, summary=args.summary,
                                                 evidence_level=args.evidence_level, source=args.source)
    result = _run_manager(memory, consolidate)
    if not result.get("success"):
        raise KumihoMemoryError(result.get("error", "consolidation failed"))   # a state, not a usage error
    stored = result["store_result"]
    where = stored.get("revision_kref") or f"queued ({stored.get('queue_id')})"
    return result, f"consolidated {args.session} -> {where}"


def _cmd_profile(memory: Any, args: argparse.Namespace) -> tuple[Any, str]:
    """``kumiho-memory profile [--dry-run] [--window-days N]``: classify every space."""
    result = SpaceProfiler(memory, window_days=args.window_days, dry_run=args.dry_run).run_sync()
    lines = []
    for space, profile in result["profiles"].items():
        if profile["empty"]:
            lines.append(f"{'(empty)':15} {space or '(root)'}")
            continue
        scores = profile["scores"]
        pin = " (pinned)" if profile["pinned"] else ""
        lines.append(f"{profile['label']:15} {space or '(root)'}{pin}  churn {scores['churn']:.4f}  "
                     f"evidence {scores['evidence']:.4f}  stability {scores['stability']:.4f}")
    lines.extend(f"drift: {d['space_path'] or '(root)'} {d['from']} -> {d['to']}{' (pinned)' if d['pinned'] else ''}"
                 for d in result["drift"])
    lines.extend(f"error: {e['space_path'] or '(root)'}: {e['error']}" for e in result["errors"])
    summary = f"{result['spaces_profiled']} space(s) profiled" + (" (dry run, nothing stored)" if result["dry_run"] else "")
    return result, "\n".join(lines + [summary])


def _cmd_ingest_skill(memory: Any, args: argparse.Namespace) -> tuple[Any, str]:
    """``kumiho-memory ingest-skill PATH [--batch] [--evidence-level L] [--dry-run] [--clear-quarantine KREF]``."""
    if args.clear_quarantine:
        result = clear_quarantine(memory, args.clear_quarantine)
        return {"success": True, **result}, f"published {result['revision_kref']}"
    if args.list:
        listed = list_skills(memory, space=args.space)
        text = "\n".join(f"{'quarantined' if s['quarantined'] else 'ok':12} {s['item_name']}  {s['revision_kref']}"
                         for s in listed)
        return {"success": True, "skills": listed}, text or "(no skills)"
    if not args.path:
        raise InvalidArgumentError("ingest-skill needs a PATH (or --clear-quarantine KREF, or --list)")
    if args.batch:
        results = ingest_batch(memory, args.path, space=args.space, tags=args.tags, dry_run=args.dry_run,
                               evidence_level=args.evidence_level)
    else:
        if os.path.isdir(args.path):
            raise InvalidArgumentError(f"{args.path!r} is a folder: add --batch to ingest every *.md in it")
        parsed = parse_skill(args.path)
        if _is_skill_file(parsed) and args.item_name is None:
            results = ingest_skill(memory, args.path, space=args.space, section_filter=args.section,
                                   dry_run=args.dry_run, evidence_level=args.evidence_level)
        else:
            if args.section:
                raise InvalidArgumentError("--section applies to a SKILL.md (a file with a frontmatter name)")
            results = [ingest_file(memory, args.path, item_name=args.item_name, space=args.space, tags=args.tags,
                                   dry_run=args.dry_run, evidence_level=args.evidence_level)]
    lines = []
    for result in results:
        state = "unchanged" if not result.changed else ("quarantined" if result.quarantined else "published")
        where = result.revision_kref or ("(dry run)" if result.changed else "-")
        lines.append(f"{state:12} {result.item_name}  {where}")
        lines.extend(f"             ! {reason}" for reason in result.quarantine_reasons if result.changed)
    payload = {"success": True, "dry_run": args.dry_run, "results": [result.to_dict() for result in results],
               "written": sum(result.changed for result in results) if not args.dry_run else 0,
               "quarantined": sum(result.quarantined for result in results)}
    return payload, "\n".join(lines) or "(no sections to ingest)"


def _cmd_dream(memory: Memory, args: argparse.Namespace) -> tuple[Any, str]:
    """``kumiho-memory dream``: one Dream State run (heuristics; reports each action with its reason)."""
    progress = None
    if sys.stderr.isatty() or getattr(args, "progress", False):
        def progress(done: int, total: int) -> None:
            print(f"dream: batch {done}/{total}", file=sys.stderr, flush=True)
    options: dict[str, Any] = {"dry_run": args.dry_run, "max_deprecation_ratio": args.max_deprecation_ratio,
                               "allow_published_deprecation": args.allow_published_deprecation,
                               "batch_size": args.batch_size, "progress": progress,
                               "report_dir": args.report_dir}
    if args.policy is not None:
        options["extra_instructions"] = args.policy
    result = DreamState.from_env(memory, **options).run_sync()
    return result, result["report"]


def _cmd_list(memory: Memory, args: argparse.Namespace) -> tuple[Any, str]:
    """``kumiho-memory list [--space S] [--kind K] [--tag T] [--evidence L] [--deprecated] [--as-of T]
    [--limit N] [--offset N]``."""
    listed = list_memories(memory, space=args.space, kind=args.kind, tag=args.tag, evidence=args.evidence,
                           include_deprecated=args.deprecated, as_of=args.as_of, limit=args.limit,
                           offset=args.offset)
    lines = []
    for row in listed["memories"]:
        marks = [mark for mark, on in (("deprecated", row["deprecated"]), ("contested", row["contested"])) if on]
        level = row["evidence_level"] or "-"
        lines.append(f"{row['kref']}\n  {row['title']}\n  space {row['space'] or '(root)'}  kind {row['kind']}  "
                     f"r{row['revision']}/{row['revision_count']}  evidence {level}  "
                     f"tags [{', '.join(row['tags'])}]" + (f"  ({', '.join(marks)})" if marks else ""))
    footer = f"{len(listed['memories'])} shown of {listed['total_items']} item(s)"
    if listed["next_offset"] is not None:
        footer += f"; next page: --offset {listed['next_offset']}"
    return listed, "\n".join(lines + [footer]) if lines else footer.replace("0 shown", "no memories")


def _cmd_show(memory: Memory, args: argparse.Namespace) -> tuple[Any, str]:
    """``kumiho-memory show KREF [--as-of T]``: the whole chain of one memory."""
    story = describe_memory(memory, args.kref, as_of=args.as_of)
    current = story["current"]
    lines = [story["item_kref"], f"  title:    {current['title']}", f"  space:    {story['space'] or '(root)'}",
             f"  kind:     {story['kind']}", f"  evidence: {story['evidence_level'] or '-'}",
             f"  current:  r{current['revision']}" + ("  (deprecated)" if story["deprecated"] else "")]
    if story["as_of"]:
        then = story["current_at_as_of"]
        lines.append(f"  as of {story['as_of']}: " + (f"r{then['revision']}" if then else "did not exist yet"))
    lines.append(f"revisions ({story['revision_count']}, newest first):")
    if story["revisions_omitted"]:
        lines.append(f"  ... {story['revisions_omitted']} older revision(s) not shown")
    for revision in reversed(story["revisions"]):
        supersedes = "".join(f" SUPERSEDES r{target.rpartition('=')[2]}" for target in revision["supersedes"])
        lines.append(f"  r{revision['revision']:<4} {revision['created_at']}  [{', '.join(revision['tags'])}]"
                     f"{supersedes}{' (deprecated)' if revision['deprecated'] else ''}  {revision['title']}")
        lines.extend(f"        artifact {a['name']}: {a['location']}" for a in revision["artifacts"])
    lines.append("tags:")
    for tag, entry in sorted(story["tags"].items()):
        moves = " -> ".join(f"{'r' + str(m['revision']) if m['revision'] is not None else 'removed'} ({m['at']})"
                            for m in entry["history"])
        lines.append(f"  {tag}: {moves}")
    for title, edges, other in (("edges out", story["edges_out"], "target_kref"), ("edges in", story["edges_in"], "source_kref")):
        lines.append(f"{title}:" + ("" if edges else " none"))
        lines.extend(f"  {edge['edge_type']} {edge[other]}  {edge.get('other_title') or ''}".rstrip() for edge in edges)
    lines.append("")
    lines.extend("  " + line for line in current["content"].splitlines())
    return story, "\n".join(lines)


def _cmd_ui(memory: Memory, args: argparse.Namespace) -> tuple[Any, str | None]:
    """``kumiho-memory ui [--port N] [--allow-writes]``: serve the memory browser until interrupted."""
    browser = MemoryBrowser(memory, allow_writes=args.allow_writes)
    server = browser.serve("127.0.0.1", args.port)
    print(f"kumiho-memory: browsing {memory!r} at {server.url} "
          f"({'writes allowed' if args.allow_writes else 'read-only'}; Ctrl-C stops)", file=sys.stderr, flush=True)
    try:
        server.wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.shutdown()
    return {"url": server.url, "stopped": True}, None


def _add_integration_commands(command: Callable[[str, Callable[..., Any], str], argparse.ArgumentParser]) -> None:
    """Add ``list``, ``show`` and ``ui`` to the CLI; ``command`` is ``build_cli_parser``'s own helper."""
    sub = command("list", _cmd_list, "list memories with their current revision, tags, evidence and marks")
    sub.add_argument("--space", help="only this space and below")
    sub.add_argument("--kind", help="only items of this kind")
    sub.add_argument("--tag", help="only memories whose current revision carries this tag")
    sub.add_argument("--evidence", choices=EVIDENCE_LEVELS, help="only this evidence grade")
    sub.add_argument("--deprecated", action="store_true", help="include deprecated items (marked)")
    sub.add_argument("--as-of", metavar="TIME", help="list what existed then, as it stood then (ISO 8601)")
    sub.add_argument("--limit", type=int, default=50, help=f"memories per page (1-{LIST_PAGE_LIMIT}, default 50)")
    sub.add_argument("--offset", type=int, default=0, help="where the page starts (see the footer for the next)")
    sub = command("show", _cmd_show, "show one memory's whole chain: revisions, tag history, edges, artifacts")
    sub.add_argument("kref", help="any kref of the item")
    sub.add_argument("--as-of", metavar="TIME", help="also say what was current then (ISO 8601)")
    sub = command("ui", _cmd_ui, "browse memories in a local web page (127.0.0.1, read-only by default)")
    sub.add_argument("--port", type=int, default=8765, help="port on 127.0.0.1 (default 8765; 0 picks a free one)")
    sub.add_argument("--allow-writes", action="store_true",
                     help="enable the tag, deprecate and forget buttons (guarded by a per-run token)")


def build_cli_parser() -> argparse.ArgumentParser:
    """The ``kumiho-memory`` argument parser (global options work before or after the command)."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--db", metavar="PATH", default=argparse.SUPPRESS,
                        help="store file (default $KUMIHO_MEMORY_PATH, else a per-user file)")
    common.add_argument("--project", default=argparse.SUPPRESS, help=f"project (default {DEFAULT_PROJECT})")
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                        help="print machine-readable JSON")
    parser = argparse.ArgumentParser(
        prog="kumiho-memory", parents=[common], epilog=_CLI_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Long-term memory for AI agents: a versioned memory graph in one file.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def command(name: str, handler: Callable[..., Any], summary: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, parents=[common], help=summary, description=summary)
        sub.set_defaults(handler=handler)
        return sub

    sub = command("remember", _cmd_remember, "store a memory; prints its revision kref")
    sub.add_argument("content", help="the text to remember ('-' reads standard input)")
    sub.add_argument("--space", default="notes", help="space path (default notes)")
    sub.add_argument("--title")
    sub.add_argument("--kind", default="memory", help="item kind for a new item (default memory)")
    sub.add_argument("--key", help="supersession key: revise the item holding it")
    sub.add_argument("--item", metavar="KREF", help="add the revision to this item")
    sub.add_argument("--tag", action="append", help="tag the new revision (repeatable)")
    sub.add_argument("--metadata", metavar="JSON", help="a JSON object")
    sub.add_argument("--evidence-level", choices=EVIDENCE_LEVELS)
    sub.add_argument("--source")
    sub = command("recall", _cmd_recall, "find the memories that best match a query")
    sub.add_argument("query")
    sub.add_argument("--limit", type=int, default=5)
    sub.add_argument("--space", action="append", help="only this space and below (repeatable)")
    sub.add_argument("--type", action="append", help="only this memory type (repeatable)")
    sub.add_argument("--where", metavar="JSON", help='metadata filter, e.g. \'{"speaker": "Ann"}\'')
    sub.add_argument("--min-score", type=float)
    sub.add_argument("--as-of", metavar="TIME", help="recall what was current then (ISO 8601)")
    sub.add_argument("--history", action="store_true", help="include older and superseded revisions")
    sub.add_argument("--context", action="store_true", help="print the prompt context instead of a list")
    command("get", _cmd_get, "show one revision (any kref form)").add_argument("kref")
    command("history", _cmd_history, "list an item's revisions, oldest first").add_argument("kref")
    for name, handler, summary in (("tag", _cmd_tag, "point a tag at a revision"),
                                   ("untag", _cmd_untag, "remove a tag from a revision")):
        sub = command(name, handler, summary)
        sub.add_argument("kref")
        sub.add_argument("tag")
    sub = command("link", _cmd_link, "create a typed edge between two revisions")
    sub.add_argument("source")
    sub.add_argument("target")
    sub.add_argument("edge_type", metavar="EDGE_TYPE", help=f"e.g. {', '.join(EDGE_TYPES[:4])}, ...")
    sub.add_argument("--metadata", metavar="JSON")
    sub = command("edges", _cmd_edges, "list the edges of a revision or item")
    sub.add_argument("kref")
    sub.add_argument("--direction", choices=EDGE_DIRECTIONS, default="both")
    sub.add_argument("--type", metavar="EDGE_TYPE")
    sub = command("deprecate", _cmd_deprecate, "soft-retire an item or revision (--undo restores)")
    sub.add_argument("kref")
    sub.add_argument("--undo", action="store_true")
    command("forget", _cmd_forget, "erase an item or revision for good").add_argument("kref")
    command("stats", _cmd_stats, "counts for the project")
    sub = command("chat", _cmd_chat, "working memory: add a message to a session, show it, or clear it")
    sub.add_argument("action", choices=("add", "get", "clear"))
    sub.add_argument("session", help="the session id")
    sub.add_argument("message", nargs="?", help="the message (add; '-' reads standard input)")
    sub.add_argument("--role", default="user", choices=MESSAGE_ROLES)
    sub.add_argument("--limit", type=int, default=50)
    sub = command("consolidate", _cmd_consolidate, "turn a session's working memory into a long-term memory")
    sub.add_argument("session")
    sub.add_argument("--space", help="space for the memory (default context/user from the session)")
    sub.add_argument("--summary", help="use this summary instead of summarizing")
    sub.add_argument("--evidence-level", choices=EVIDENCE_LEVELS)
    sub.add_argument("--source")
    sub = command("export", _cmd_export, "write the store as JSON lines, or an item as Mermaid")
    sub.add_argument("--format", choices=("jsonl", "mermaid"), default="jsonl")
    sub.add_argument("--item", metavar="KREF", help="the item to draw (mermaid)")
    sub.add_argument("--output", "-o", metavar="FILE", help="write here instead of standard output")
    sub = command("import", _cmd_import, "load a JSON-lines export (atomically)")
    sub.add_argument("file", help="the export file ('-' reads standard input)")
    sub = command("dream", _cmd_dream, "Dream State: tidy memory (duplicates, leftovers) behind hard guardrails")
    sub.add_argument("--dry-run", action="store_true", help="report what would change; change nothing")
    sub.add_argument("--policy", metavar="TEXT", help="deployment policy (default $KUMIHO_DREAM_EXTRA_INSTRUCTIONS)")
    sub.add_argument("--max-deprecation-ratio", type=float, default=0.5, metavar="R",
                     help="at most this share of the assessed memories is deprecated per run (0.1-0.9)")
    sub.add_argument("--allow-published-deprecation", action="store_true",
                     help="let published memories be deprecated too")
    sub.add_argument("--batch-size", type=int, default=20, metavar="N", help="memories per batch (default 20)")
    sub.add_argument("--report-dir", metavar="DIR", help="also write the Markdown report into DIR")
    sub.add_argument("--progress", action="store_true", help="print progress on stderr even when not a terminal")
    sub = command("profile", _cmd_profile, "classify each space as canonical, working or correspondence knowledge")
    sub.add_argument("--window-days", type=int, default=30, metavar="N",
                     help="days of history for the revision rate (default 30)")
    sub.add_argument("--dry-run", action="store_true", help="classify and report; store no profiles")
    sub = command("ingest-skill", _cmd_ingest_skill,
                  "version a SKILL.md by ## section (or a whole Markdown doc), safety-scanned")
    sub.add_argument("path", nargs="?", help="the file, or with --batch the folder")
    sub.add_argument("--batch", action="store_true", help="ingest every *.md and */SKILL.md in the folder PATH")
    sub.add_argument("--space", default="Skills", help="space for the skill items (default Skills)")
    sub.add_argument("--section", action="append", metavar="SLUG", help="only this section (repeatable)")
    sub.add_argument("--item-name", metavar="NAME", help="ingest PATH whole under this item name")
    sub.add_argument("--tags", nargs="+", metavar="TAG", help="tags for whole documents")
    sub.add_argument("--evidence-level", choices=EVIDENCE_LEVELS)
    sub.add_argument("--dry-run", action="store_true", help="report what would change; write nothing")
    sub.add_argument("--clear-quarantine", metavar="KREF", help="publish a quarantined revision after review")
    sub.add_argument("--list", action="store_true", help="list the skills in --space and their state")
    _add_integration_commands(command)
    return parser


def _cli_store_path(db: str | None, configured: str | None) -> str | None:
    """The store file the CLI opens: ``--db``, else ``$KUMIHO_MEMORY_PATH``, else the per-user default.

    A path someone typed must name a file in a folder that exists: a typo in a folder name would otherwise
    create an empty store there and look like lost data. The per-user default creates its own folder.

    Raises:
        InvalidArgumentError: an empty path, or one whose folder does not exist.
    """
    if db is not None and not db.strip():
        raise InvalidArgumentError("--db needs a file path, not an empty string")
    path = db if db is not None else configured
    typed = db is not None or (path is not None and path != default_store_path())
    if path and typed:
        folder = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(folder):
            where = "--db" if db is not None else "KUMIHO_MEMORY_PATH"
            raise InvalidArgumentError(f"{where} {path!r}: the folder {folder!r} does not exist (create it first; "
                                       "a new store file is made in an existing folder)")
    return path


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``kumiho-memory`` command line; return the exit code (see ``--help``)."""
    parser = build_cli_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits on --help, --version and usage errors
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    as_json = getattr(args, "json", False)
    try:
        config = MemoryConfig.from_env()
        path = _cli_store_path(getattr(args, "db", None), config.path)
        project = getattr(args, "project", None) or config.project
        if config.backend == "kumiho" and not getattr(args, "db", None):
            opened = Memory.from_config(dataclasses.replace(config, project=project))   # --db forces the file
        else:
            opened = Memory(path, project=project, busy_timeout=config.busy_timeout)
        with opened as memory:
            result, text = args.handler(memory, args)
        if as_json and not (args.command == "export" and result.get("output") is None
                            and args.format == "jsonl"):
            print(json.dumps(result, ensure_ascii=False, indent=2))
        elif text is not None:
            print(text)
        if isinstance(result, dict) and result.get("success") is False:
            return EXIT_ERROR
        return EXIT_OK
    except NotFoundError as exc:
        print(f"kumiho-memory: not found: {exc}", file=sys.stderr)
        return EXIT_NOT_FOUND
    except ImportFormatError as exc:          # a damaged file is an error in the data, not in the command
        print(f"kumiho-memory: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except InvalidArgumentError as exc:       # bad input (a limit, a kref, a JSON option): a usage error
        print(f"kumiho-memory: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KumihoMemoryError as exc:
        print(f"kumiho-memory: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("kumiho-memory: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        with contextlib.suppress(OSError):
            sys.stdout = open(os.devnull, "w")  # keep the interpreter from complaining at exit
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
