"""kumiho_memory_mcp: the MCP server for ``kumiho_memory``, on the official ``mcp`` Python SDK.

Run it from an MCP client (Claude Desktop, Claude Code, Cursor, ...) as ``python kumiho_memory_mcp.py``; it
speaks MCP over stdio, or streamable HTTP with ``--http HOST:PORT``. It needs the ``mcp`` extra
(``pip install mcp``, or in a checkout ``pip install -e '.[mcp]'``); works with the SDK's 2.x ``MCPServer`` and 1.x
``FastMCP``.

Sections:

    1. header         imports, public names
    2. errors         the one mapping from our errors to MCP tool errors
    3. configuration  the environment variables ``main`` reads
    4. server         ``build_server(memory_manager)``: the tools, their descriptions and annotations
    5. CLI            ``main(argv=None) -> int``

Design rules: nothing runs at import (the SDK is imported inside ``build_server``); only public names of
``kumiho_memory`` are used; a bad argument gives a tool error that names the field, carries no traceback, and
writes nothing; every tool works on the embedded store with no LLM.
"""

# ==========================================================================================================
# 1. Header
# ==========================================================================================================

# No ``from __future__ import annotations``: the SDK reads the tools' annotations at registration, and the
# argument models they name are defined inside ``build_server`` (pydantic comes with the optional SDK).
import argparse
import asyncio
import contextlib
import functools
import inspect
import os
import sys
from typing import Any, Iterator, Mapping, Sequence

import kumiho_memory as km

__all__ = ["TOOL_NAMES", "ENVIRONMENT_VARIABLES", "tool_error_message", "build_server", "build_manager", "main"]

SERVER_NAME = "kumiho-memory"

TOOL_NAMES = (
    "kumiho_chat_add", "kumiho_chat_get", "kumiho_chat_clear",
    "kumiho_memory_ingest", "kumiho_memory_add_response", "kumiho_memory_consolidate", "kumiho_memory_recall",
    "kumiho_memory_discover_edges", "kumiho_memory_store_execution", "kumiho_memory_engage",
    "kumiho_memory_reflect",
    "kumiho_memory_get", "kumiho_memory_history", "kumiho_memory_tag", "kumiho_memory_link",
    "kumiho_memory_edges", "kumiho_memory_list", "kumiho_memory_forget", "kumiho_memory_dream_state",
    "kumiho_memory_space_profile",
)

CAPTURE_TYPES = ("decision", "preference", "fact", "correction", "architecture", "implementation", "synthesis",
                 "reflection", "summary", "skill")
# Captures of these types are worth linking to what they build on (the reference's rule for reflect).
EDGE_DISCOVERY_TYPES = ("decision", "architecture", "implementation", "synthesis", "reflection")
EXECUTION_STATUSES = ("done", "failed", "error", "blocked")
RECALL_MODES = ("summarized", "full")
MAX_CURRENT_CONTEXT_CHARS = 4000


# ==========================================================================================================
# 2. Errors
# ==========================================================================================================

class _FieldError(Exception):
    """Carries one of our errors and the tool argument it is about, up to the tool-error mapping."""

    def __init__(self, field: str, error: km.KumihoMemoryError) -> None:
        super().__init__(field, error)
        self.field, self.error = field, error


@contextlib.contextmanager
def _argument(field: str) -> Iterator[None]:
    """Attribute any of our errors raised inside the block to the tool argument ``field``."""
    try:
        yield
    except km.KumihoMemoryError as exc:
        raise _FieldError(field, exc) from None


def tool_error_message(error: km.KumihoMemoryError, field: str | None = None) -> str:
    """The text of the tool error an MCP client sees for one of our errors.

    Args:
        error: what ``kumiho_memory`` raised.
        field: the tool argument it is about, when known; prefixed unless the message already names it.

    Returns:
        ``"<ErrorClass>: <field>: <message>"``: one line of the error's own message, never a traceback.
    """
    text = " ".join(str(error).split()) or "failed"
    if field and field not in text:
        text = f"{field}: {text}"
    return f"{type(error).__name__}: {text}"


# ==========================================================================================================
# 3. Configuration
# ==========================================================================================================

# What ``main`` reads, on top of kumiho_memory.ENVIRONMENT_VARIABLES (path, project, Redis URL, TTL, ...):
ENVIRONMENT_VARIABLES = {
    "KUMIHO_MEMORY_PATH": "the store file (default: a per-user file, kumiho_memory.default_store_path())",
    "KUMIHO_MEMORY_PROJECT": "the project memories go to (default CognitiveMemory)",
    "KUMIHO_REDIS_URL": "Redis URL for working memory (else REDIS_URL; default: kept in the store file)",
    "KUMIHO_LLM_BASE_URL": "an OpenAI-compatible endpoint for summaries and edge discovery (default: none)",
    "KUMIHO_LLM_API_KEY": "its API key (else OPENAI_API_KEY)",
    "KUMIHO_LLM_MODEL": "its model (default gpt-4o-mini)",
    "KUMIHO_EMBED_BASE_URL": "an OpenAI-compatible /v1/embeddings endpoint for semantic recall (default: none, "
                             "keyword recall)",
    "KUMIHO_EMBED_API_KEY": "its API key (else OPENAI_API_KEY)",
    "KUMIHO_EMBED_MODEL": "its model (default text-embedding-3-small)",
    "KUMIHO_MEMORY_PREFETCH": "1 turns on anticipatory recall: engage calls with a session_id get the next "
                              "step's context prepared ahead of time (default off)",
    "KUMIHO_MEMORY_BACKEND": "sqlite (default) or kumiho: keep long-term memory on a Kumiho graph server",
    "KUMIHO_SERVER_ENDPOINT": "the Kumiho server, host:port (plain gRPC) or https://host (TLS)",
    "KUMIHO_AUTH_TOKEN": "its bearer token (never logged)",
    "KUMIHO_DREAM_EXTRA_INSTRUCTIONS": "deployment policy for kumiho_memory_dream_state (may only tighten)",
    "KUMIHO_DREAM_MIN_AGE_DAYS": "Dream State never deprecates a memory younger than this (default 7)",
}


def build_manager(environ: Mapping[str, str] | None = None) -> km.UniversalMemoryManager:
    """Open the memory (with its optional embedding endpoint), working memory and optional LLM the
    environment describes.

    Args:
        environ: the mapping to read; default ``os.environ``.

    Raises:
        InvalidArgumentError: a variable is malformed. StoreError: the store file cannot be used.
        BackendUnavailableError: Redis is configured but redis-py is not installed.
    """
    environ = os.environ if environ is None else environ
    config = km.MemoryConfig.from_env(environ)
    working = km.WorkingMemoryConfig.from_env(environ)
    embedder = None
    embed_url = environ.get("KUMIHO_EMBED_BASE_URL")
    if embed_url:
        embedder = km.OpenAICompatEmbeddingAdapter(
            embed_url, api_key=environ.get("KUMIHO_EMBED_API_KEY") or environ.get("OPENAI_API_KEY") or None,
            model=environ.get("KUMIHO_EMBED_MODEL") or "text-embedding-3-small")
    memory = km.Memory.from_config(config, embedder=embedder)
    try:
        buffer = working.open_buffer(config.path if config.backend == "sqlite" else None)
        adapter = None
        base_url = environ.get("KUMIHO_LLM_BASE_URL")
        if base_url:
            adapter = km.OpenAICompatAdapter(
                base_url, api_key=environ.get("KUMIHO_LLM_API_KEY") or environ.get("OPENAI_API_KEY") or None,
                model=environ.get("KUMIHO_LLM_MODEL") or "gpt-4o-mini")
        return km.UniversalMemoryManager(memory=memory, redis_buffer=buffer, llm_adapter=adapter,
                                         environ=environ)
    except BaseException:
        memory.close()
        raise


# ==========================================================================================================
# 4. Server
# ==========================================================================================================

def _sdk() -> tuple[Any, Any, Any]:
    """Import the MCP SDK: ``(server class, ToolAnnotations, ToolError)``, 2.x names first, then 1.x."""
    try:
        import mcp  # noqa: F401
    except ImportError as exc:
        raise km.BackendUnavailableError(
            "'mcp' is not installed; run: pip install mcp (in a checkout of kumiho_memory: "
            "pip install -e '.[mcp]')") from exc
    from mcp.types import ToolAnnotations
    try:
        from mcp.server.mcpserver import MCPServer as server_class
        from mcp.server.mcpserver.exceptions import ToolError
    except ImportError:
        from mcp.server.fastmcp import FastMCP as server_class
        from mcp.server.fastmcp.exceptions import ToolError
    return server_class, ToolAnnotations, ToolError


def _kref(value: str, field: str) -> str:
    """Check that ``value`` parses as a kref, naming ``field`` if not."""
    with _argument(field):
        km.Kref.parse(value)
    return value


INSTRUCTIONS = """\
Long-term memory for this conversation, kept in a local versioned graph.
Typical loop: kumiho_memory_engage (or _recall) before answering to bring back what is known;
kumiho_memory_ingest for each user message and kumiho_memory_add_response for each reply;
kumiho_memory_consolidate at the end of a session to turn it into one long-term memory;
kumiho_memory_reflect to store decisions, preferences and facts worth keeping.
Every memory is addressed by a kref (kref://project/space/name.kind?r=N); revisions are immutable."""


def build_server(memory_manager: km.UniversalMemoryManager) -> Any:
    """Build the MCP server whose tools act on ``memory_manager`` (and its ``memory``).

    Args:
        memory_manager: the manager to serve; the caller keeps ownership and closes it.

    Returns:
        An ``mcp`` ``MCPServer`` (SDK 2.x) or ``FastMCP`` (1.x) with the tools in ``TOOL_NAMES``; call
        ``run()`` on it.

    Raises:
        BackendUnavailableError: the ``mcp`` package is not installed.
    """
    server_class, ToolAnnotations, ToolError = _sdk()
    from typing import Annotated, Literal, Optional

    from pydantic import BaseModel, ConfigDict, Field, model_serializer, with_config
    from typing_extensions import TypedDict

    manager, memory = memory_manager, memory_manager.memory
    server = server_class(SERVER_NAME, instructions=INSTRUCTIONS)

    reading = ToolAnnotations(readOnlyHint=True, destructiveHint=False, idempotentHint=True, openWorldHint=False)
    adding = ToolAnnotations(readOnlyHint=False, destructiveHint=False, idempotentHint=False, openWorldHint=False)
    setting = ToolAnnotations(readOnlyHint=False, destructiveHint=False, idempotentHint=True, openWorldHint=False)
    erasing = ToolAnnotations(readOnlyHint=False, destructiveHint=True, idempotentHint=False, openWorldHint=False)
    clearing = ToolAnnotations(readOnlyHint=False, destructiveHint=True, idempotentHint=True, openWorldHint=False)

    descriptions = {entry["name"]: entry["description"] for entry in km.MEMORY_TOOLS}

    def tool(name: str, annotations: Any) -> Any:
        """Register ``fn`` as tool ``name`` with the table's description; our errors become tool errors."""
        def register(fn: Any) -> Any:
            @functools.wraps(fn)
            async def guarded(**arguments: Any) -> Any:
                try:
                    return await fn(**arguments)
                except _FieldError as exc:
                    raise ToolError(tool_error_message(exc.error, exc.field)) from None
                except km.KumihoMemoryError as exc:
                    raise ToolError(tool_error_message(exc)) from None

            # the description is the module's tool table's, so this server and km.MEMORY_TOOLS never drift
            server.add_tool(guarded, name=name, description=descriptions[name], annotations=annotations)
            return fn
        return register

    def run(function: Any, *args: Any, **kwargs: Any) -> Any:
        """Blocking store work, off the event loop (the manager does the same)."""
        return asyncio.to_thread(function, *args, **kwargs)

    async def session_for(session_id: str | None, user_id: str | None, context: str | None) -> tuple[str, str]:
        if session_id is not None:
            return session_id, "request"
        with _argument("user_id"):
            return await manager.resolve_session_id(user_id, context)

    def own_project(project: str | None) -> str:
        """Working memory of this server's project only: another project's sessions are not reachable."""
        if project is not None and project != manager.project:
            with _argument("project"):
                raise km.NotFoundError(f"this server serves project {manager.project!r}, not {project!r}")
        return manager.project

    async def existing(kref: str, field: str) -> dict[str, Any]:
        with _argument(field):
            return await run(memory.get, kref)

    # Argument types, each with the description the model reads.
    Project = Annotated[Optional[str], Field(description="Project of the working-memory session; only the server's "
                                                         "own project (the default) is reachable.")]
    SessionId = Annotated[Optional[str], Field(
        description="Working-memory session id. Omit to use the current session of user_id/context "
                    "(or the host's KUMIHO_SESSION_ID); the result says which session was used.")]
    UserId = Annotated[Optional[str],
                       Field(description="Who is talking; picks their current session when session_id is omitted.")]
    Context = Annotated[Optional[str], Field(description="Conversation context, e.g. 'personal' or 'work'.")]
    Evidence = Annotated[Optional[Literal[tuple(km.EVIDENCE_LEVELS)]], Field(
        description="How well established the content is: official (operator-confirmed), corroborated, "
                    "single_source or unverified. Omit when unsure.")]
    Source = Annotated[Optional[str], Field(description="Where the content came from (URL, document, person).")]
    Limit = Annotated[int, Field(ge=1, le=100, description="How many memories to return at most.")]
    MinScore = Annotated[Optional[float],
                         Field(ge=0.0, le=1.0, description="Drop results scoring below this (best is 1.0).")]
    SpacePaths = Annotated[Optional[list[str]], Field(description="Only memories in these spaces (and their "
                                                                  "sub-spaces), e.g. ['personal/alice'].")]
    MemoryTypes = Annotated[Optional[list[str]],
                            Field(description="Only these memory types, e.g. ['decision', 'preference'].")]
    GraphAugmented = Annotated[bool, Field(description="Also follow typed edges from the best hits (slower, broader).")]
    RecallMode = Annotated[Literal[RECALL_MODES],
                           Field(description="'summarized' (default) or 'full'; echoed in the result.")]
    AnyKref = Annotated[str, Field(description="A kref: kref://project/space/name.kind, optionally ?r=N (revision), "
                                               "?t=TAG (where a tag points) or ?t=TAG&time=ISO (where it pointed "
                                               "then).")]

    class Capture(BaseModel):
        """One thing worth remembering from this turn."""
        type: Literal[CAPTURE_TYPES] = Field(description="What kind of memory this is.")
        title: str = Field(min_length=1, max_length=500, description="A short title, one line.")
        content: str = Field(min_length=1, description="The memory itself, self-contained: who, what, why.")
        tags: Optional[list[str]] = Field(default=None, description="Extra tags.")
        space_hint: Optional[str] = Field(default=None, description="Space for it, e.g. 'projects/atlas'.")
        revises: Optional[str] = Field(default=None, description="Kref of an existing memory this corrects or updates; "
                                                                 "it gets a new revision.")
        event_date: Optional[str] = Field(default=None, description="ISO 8601 date the event happened; dropped (and "
                                                                    "reported) if unreadable.")
        origin: Optional[str] = Field(default=None, description="Who originated it, e.g. 'user' or 'assistant'.")
        decision_state: Optional[str] = Field(default=None,
                                              description="For decisions: 'proposed', 'accepted', 'rejected', ...")

    # Result types: what each tool returns, published as its output schema (and checked by the SDK). All are
    # open (extra keys allowed) since the module adds optional keys. Nested records are typing_extensions
    # TypedDicts (pydantic on 3.11); each tool's top-level result is a pydantic model, since SDK 1.x turns a
    # TypedDict result into a closed model that fills absent keys with null. ``Result`` omits optional fields
    # the tool did not set, so an absent key stays absent on the wire.
    Open = with_config(ConfigDict(extra="allow"))

    class Result(BaseModel):
        model_config = ConfigDict(extra="allow")

        @model_serializer(mode="wrap")
        def _omit_unset(self, handler: Any) -> Any:
            data = handler(self)
            unset = set(type(self).model_fields) - self.model_fields_set
            return {key: value for key, value in data.items() if key not in unset}
    Kref = Annotated[str, Field(description="A revision kref, kref://project/space/name.kind?r=N.")]
    SessionIdOut = Annotated[str, Field(description="The working-memory session used.")]
    SessionSource = Annotated[str, Field(
        description="Where session_id came from: request, host-env, active-pointer, generated or active_session.")]

    @Open
    class Message(TypedDict, total=False):
        """One working-memory message."""
        role: str
        content: str
        timestamp: Annotated[str, Field(description="ISO 8601 instant, UTC.")]
        metadata: dict[str, Any]

    @Open
    class MemoryRevision(TypedDict, total=False):
        """One revision of a long-term memory item."""
        kref: Kref
        item_kref: Annotated[str, Field(description="The item's kref (all its revisions), without ?r=N.")]
        revision: int
        space: str
        kind: str
        title: str
        content: str
        metadata: dict[str, Any]
        tags: list[str]
        created_at: str
        deprecated: bool

    @Open
    class MemoryResult(TypedDict, total=False):
        """One recalled memory: a revision plus how well it matched."""
        kref: Kref
        item_kref: str
        revision: int
        title: str
        content: str
        summary: str
        type: Annotated[str, Field(description="The memory type, e.g. decision, preference, fact, summary.")]
        score: Annotated[float, Field(description="Relevance, best is 1.0.")]
        base_score: float
        signals: dict[str, Any]
        metadata: dict[str, Any]
        tags: list[str]
        created_at: str
        space: str
        kind: str
        deprecated: bool
        sibling_count: int

    @Open
    class StoreResult(TypedDict, total=False):
        """Where a new long-term memory was stored."""
        revision_kref: Kref
        item_kref: str
        space_path: str

    @Open
    class EdgeRecord(TypedDict, total=False):
        """A typed edge between two memory revisions."""
        source_kref: str
        target_kref: str
        edge_type: str
        metadata: dict[str, Any]
        created_at: str

    @Open
    class DiscoveredEdge(TypedDict, total=False):
        """An edge created by edge discovery."""
        source: str
        target: str
        edge_type: str
        query: Annotated[str, Field(description="The question that found the target.")]
        score: float

    class RevisionResult(Result):
        """One revision of a long-term memory item."""
        kref: Kref
        item_kref: Annotated[str, Field(description="The item's kref (all its revisions), without ?r=N.")]
        revision: int
        space: str
        kind: str
        title: str
        content: str
        metadata: dict[str, Any]
        tags: list[str]
        created_at: str
        deprecated: bool

    class EdgeResult(Result):
        """A typed edge between two memory revisions."""
        source_kref: str
        target_kref: str
        edge_type: str
        metadata: Optional[dict[str, Any]] = None
        created_at: str

    class ChatAddResult(Result):
        success: bool
        message_id: str
        message_count: int
        created_bucket: bool
        session_id: SessionIdOut
        session_id_source: SessionSource

    class ChatGetResult(Result):
        messages: list[Message]
        session_id: SessionIdOut
        session_id_source: SessionSource
        message_count: int
        ttl_remaining: Annotated[Optional[int], Field(description="Seconds before the session expires.")]

    class ChatClearResult(Result):
        success: bool
        cleared_count: int

    class IngestResult(Result):
        session_id: SessionIdOut
        session_id_source: SessionSource
        working_memory: Annotated[list[Message], Field(description="The session's recent messages, oldest first.")]
        long_term_memory: Annotated[list[MemoryResult], Field(description="Recalled long-term memories, best first.")]
        should_consolidate: bool

    class AddResponseResult(Result):
        success: bool
        message_count: int
        created_bucket: bool
        session_id: SessionIdOut
        session_id_source: SessionSource

    class ConsolidateResult(Result):
        success: bool
        buffer_was_empty: Optional[bool] = None
        summary: Annotated[Any, Field(description="The summary stored (text or structured).")] = None
        store_result: Optional[StoreResult] = None
        error: Optional[str] = None
        session_id: SessionIdOut
        session_id_source: SessionSource

    class RecallResult(Result):
        results: Annotated[list[MemoryResult], Field(description="Matching memories, best first.")]
        count: int
        recall_mode: str
        backend_error: Optional[str] = None

    class EngageResult(Result):
        context: Annotated[str, Field(description="Prompt-ready text of what memory knows.")]
        results: list[MemoryResult]
        source_krefs: list[str]
        count: int
        recall_mode: str
        approx_tokens: int
        approx_payload_tokens: int
        context_was_prefetched: Annotated[bool,
                                          Field(description="Served from context prepared ahead of time.")] = False
        state: Annotated[Optional[str], Field(description="Where this recall landed (space, item or entity).")] = None
        predictions: Annotated[list[dict[str, Any]], Field(description="Likely next states [{state, p}].")] = []

    class DiscoverEdgesResult(Result):
        edges: list[DiscoveredEdge]
        count: int

    class StoreExecutionResult(Result):
        success: bool
        memory_type: Annotated[str, Field(description="'action', or 'error' when the run failed.")]
        store_result: StoreResult

    @Open
    class CaptureResult(TypedDict, total=False):
        index: int
        kref: Kref
        outcome: Annotated[str, Field(description="created, revised, or contradicts (an official belief).")]
        type: str

    @Open
    class DroppedEventDate(TypedDict, total=False):
        index: int
        event_date: str

    class ReflectResult(Result):
        buffered: bool
        captures_stored: int
        edges_discovered: int
        stored_krefs: list[str]
        created_bucket: bool
        capture_results: list[CaptureResult]
        dropped_event_dates: list[DroppedEventDate]

    class HistoryResult(Result):
        item_kref: str
        revisions: Annotated[list[MemoryRevision], Field(description="Every revision, oldest first.")]
        count: int

    class EdgesResult(Result):
        kref: str
        edges: list[EdgeRecord]
        count: int

    class ForgetResult(Result):
        kref: str
        items: int
        revisions: int
        edges: int
        scrubbed: Annotated[Optional[bool], Field(description="Whether the bytes were scrubbed from the store "
                                                              "file; null when the backend cannot say.")]

    class DreamStateResult(Result):
        success: bool
        dry_run: bool
        events_processed: int
        revisions_assessed: int
        deprecations_proposed: int
        deprecated: int
        tags_added: int
        metadata_updated: int
        edges_created: int
        guarded_skips: dict[str, int]
        errors: list[str]
        actions: Annotated[list[dict[str, Any]],
                           Field(description="Each action (or, dry run, proposal) with its reason.")]
        report: Annotated[str, Field(description="The run's Markdown report.")]
        report_kref: Optional[str]
        last_cursor: str | None

    class SpaceProfileResult(Result):
        success: bool
        spaces_profiled: int
        labels: dict[str, int]
        drift: list[dict[str, Any]]
        profiles: dict[str, dict[str, Any]]
        errors: list[dict[str, Any]]
        dry_run: bool

    # -- working memory -----------------------------------------------------------------------------------

    @tool("kumiho_chat_add", adding)
    async def chat_add(message: Annotated[str, Field(description="The message text.")],
                       role: Annotated[Literal["user", "assistant"], Field(description="Who said it.")] = "user",
                       session_id: SessionId = None, project: Project = None, user_id: UserId = None,
                       context: Context = None) -> ChatAddResult:
        """Append one message to a working-memory session (short-term, expires after an hour idle).

        Use kumiho_memory_ingest instead when you also want related long-term memories back.
        Returns {success, message_id, message_count, created_bucket, session_id, session_id_source}."""
        session_id, origin = await session_for(session_id, user_id, context)
        project = own_project(project)
        content = manager.pii.strip_credentials(message)   # a secret never reaches the store, not even its buffer
        added = await manager.buffer.add_message(project=project, session_id=session_id,
                                                 role=role, content=content, metadata={"channel": "mcp"})
        return {"success": True, **added, "session_id": session_id, "session_id_source": origin}

    @tool("kumiho_chat_get", reading)
    async def chat_get(session_id: SessionId = None,
                       limit: Annotated[int, Field(ge=0, le=1000, description="How many recent messages.")] = 50,
                       project: Project = None, user_id: UserId = None, context: Context = None) -> ChatGetResult:
        """Read the most recent messages of a working-memory session, oldest first.

        Returns {messages: [{role, content, timestamp, metadata}], session_id, message_count, ttl_remaining}."""
        session_id, origin = await session_for(session_id, user_id, context)
        window = await manager.buffer.get_messages(project=own_project(project), session_id=session_id,
                                                   limit=limit)
        return {**window, "session_id": session_id, "session_id_source": origin}

    @tool("kumiho_chat_clear", clearing)
    async def chat_clear(session_id: SessionId = None, project: Project = None, user_id: UserId = None,
                         context: Context = None) -> ChatClearResult:
        """Delete every message of a working-memory session (long-term memories are not touched).

        Returns {success, cleared_count}."""
        session_id, _origin = await session_for(session_id, user_id, context)
        cleared = await manager.buffer.clear_session(project=own_project(project), session_id=session_id)
        return {"success": True, "cleared_count": cleared}

    @tool("kumiho_memory_ingest", adding)
    async def ingest(user_id: Annotated[str, Field(description="Who sent the message, e.g. 'alice'.")],
                     message: Annotated[str, Field(description="The user's message, verbatim.")],
                     context: Annotated[str, Field(
                         description="Conversation context, e.g. 'personal' or 'work'.")] = "personal",
                     session_id: SessionId = None,
                     working_memory_limit: Annotated[int, Field(ge=0, le=1000,
                                                                description="Recent messages to return.")] = 10,
                     recall_limit: Annotated[int, Field(ge=1, le=100, description="Long-term memories to return.")] = 5,
                     evidence_level: Evidence = None, source: Source = None) -> IngestResult:
        """Record a user message in working memory and get back the session's recent messages plus the
        long-term memories it recalls. Call it for every user message; consolidate the session later.

        Returns {session_id, session_id_source, working_memory, long_term_memory, should_consolidate}."""
        return await manager.handle_user_message(
            user_id=user_id, message=message, channel="mcp", context=context, session_id=session_id,
            working_memory_limit=working_memory_limit, recall_limit=recall_limit,
            evidence_level=evidence_level, source=source)

    @tool("kumiho_memory_add_response", adding)
    async def add_response(response: Annotated[str, Field(description="Your reply, verbatim.")],
                           session_id: SessionId = None, user_id: UserId = None,
                           context: Context = None) -> AddResponseResult:
        """Record your (the assistant's) reply in the session's working memory, after kumiho_memory_ingest.

        Returns {success, message_count, created_bucket, session_id}."""
        session_id, origin = await session_for(session_id, user_id, context)
        added = await manager.add_assistant_response(session_id=session_id, response=response, channel="mcp")
        return {**added, "session_id": session_id, "session_id_source": origin}

    @tool("kumiho_memory_consolidate", adding)
    async def consolidate(session_id: SessionId = None, user_id: UserId = None, context: Context = None,
                          summary: Annotated[Optional[str | dict[str, Any]], Field(
                              description="Your summary of the session (text, or {type, title, summary, events, "
                                          "knowledge, classification}). Omit to have one made from the "
                                          "messages.")] = None,
                          implications: Annotated[Optional[list[str]], Field(
                              description="Short sentences on when this will matter later.")] = None,
                          space_path: Annotated[Optional[str], Field(
                              description="Space for the memory; default '<context>/<user_id>'.")] = None,
                          evidence_level: Evidence = None, source: Source = None) -> ConsolidateResult:
        """Turn a session's working memory into one long-term memory (summary + transcript), then clear the
        session. Call it when a conversation or task ends. Credentials are refused; PII is anonymized.

        Returns {success, buffer_was_empty, summary, store_result: {revision_kref, item_kref, space_path}},
        or {success: false, error} when the session is empty."""
        session_id, origin = await session_for(session_id, user_id, context)
        with _argument("space_path"):
            if space_path is not None:
                km.normalize_space(space_path)
        result = await manager.consolidate_session(
            session_id=session_id, space_path=space_path, user_id=user_id, context=context,
            evidence_level=evidence_level, source=source, summary=summary, implications=implications)
        return {**result, "session_id": session_id, "session_id_source": origin}

    # -- recall -------------------------------------------------------------------------------------------

    async def recalled(query: str, limit: int, min_score: float | None, space_paths: Sequence[str] | None,
                       memory_types: Sequence[str] | None, graph_augmented: bool) -> list[dict[str, Any]]:
        results = await manager.recall_memories(query, limit=limit, space_paths=space_paths,
                                                memory_types=memory_types, graph_augmented=graph_augmented)
        if min_score is not None:
            results = [result for result in results if result.get("score", 0.0) >= min_score]
        return results

    @tool("kumiho_memory_recall", reading)
    async def recall(query: Annotated[str, Field(description="What you want to remember, in plain words.")],
                     limit: Limit = 5, min_score: MinScore = None, space_paths: SpacePaths = None,
                     memory_types: MemoryTypes = None, graph_augmented: GraphAugmented = False,
                     recall_mode: RecallMode = "summarized") -> RecallResult:
        """Search long-term memory. Results are best first, each with kref, score, title, summary, type,
        space, created_at, tags and evidence. Use kumiho_memory_engage to get prompt-ready context instead.

        Returns {results, count, recall_mode}."""
        results = await recalled(query, limit, min_score, space_paths, memory_types, graph_augmented)
        return {"results": results, "count": len(results), "recall_mode": recall_mode}

    @tool("kumiho_memory_engage", reading)
    async def engage(query: Annotated[str, Field(description="The user's request or the topic at hand.")],
                     limit: Limit = 5, min_score: MinScore = None, space_paths: SpacePaths = None,
                     memory_types: MemoryTypes = None, graph_augmented: GraphAugmented = False,
                     recall_mode: RecallMode = "summarized",
                     session_id: Annotated[Optional[str], Field(description=
                         "Pipeline run or session this step belongs to; with KUMIHO_MEMORY_PREFETCH=1 the next "
                         "step's context is prepared ahead of time.")] = None,
                     agent: Annotated[Optional[str], Field(description="Who is asking (agent or user id).")] = None
                     ) -> EngageResult:
        """Recall and render what memory knows about the query as context to read before answering.
        Cite source_krefs when you store what you conclude (kumiho_memory_reflect).

        Returns {context, results, source_krefs, count, recall_mode, approx_tokens, approx_payload_tokens,
        context_was_prefetched, state, predictions: [{state, p}]}."""
        if session_id is not None and not graph_augmented:
            with _argument("session_id"):
                engaged = await run(memory.engage, query, session_id=session_id, agent=agent, limit=limit,
                                    min_score=min_score, space_paths=space_paths, memory_types=memory_types)
            results = [manager.shape_result(hit) for hit in engaged["results"]]
            return {"context": engaged["context"], "results": results, "source_krefs": engaged["source_krefs"],
                    "count": engaged["count"], "recall_mode": recall_mode, "approx_tokens": engaged["approx_tokens"],
                    "approx_payload_tokens": len(km.canonical_json(results)) // 4,
                    "context_was_prefetched": engaged["context_was_prefetched"], "state": engaged["state"],
                    "predictions": engaged["predictions"]}
        results = await recalled(query, limit, min_score, space_paths, memory_types, graph_augmented)
        context_text = manager.build_recalled_context(results, query)
        payload = km.canonical_json(results)
        return {"context": context_text, "results": results, "source_krefs": [r["kref"] for r in results],
                "count": len(results), "recall_mode": recall_mode, "approx_tokens": len(context_text) // 4,
                "approx_payload_tokens": len(payload) // 4, "context_was_prefetched": False, "state": None,
                "predictions": []}

    # -- writing long-term memory -------------------------------------------------------------------------

    @tool("kumiho_memory_discover_edges", adding)
    async def discover_edges(revision_kref: Annotated[str, Field(description="Kref of the memory to link from.")],
                             summary: Annotated[str, Field(description="What that memory says.")],
                             max_queries: Annotated[int, Field(ge=1, le=20)] = 5,
                             max_edges: Annotated[int, Field(ge=1, le=20)] = 3,
                             min_score: Annotated[float, Field(ge=0.0, le=1.0)] = 0.3,
                             edge_type: Annotated[str,
                                                  Field(description="Edge type, e.g. REFERENCED.")] = km.REFERENCED,
                             space_paths: SpacePaths = None) -> DiscoverEdgesResult:
        """Find memories related to a memory and link it to them with typed edges. Needs an LLM endpoint
        (KUMIHO_LLM_BASE_URL) to think of related questions; without one it finds nothing and writes nothing.

        Returns {edges: [{source, target, edge_type, query, score}], count}."""
        _kref(revision_kref, "revision_kref")
        with _argument("edge_type"):
            km.validate_edge_type(edge_type)
        await existing(revision_kref, "revision_kref")
        edges = await manager.discover_edges_post_consolidation(
            revision_kref, summary, max_queries=max_queries, max_edges=max_edges, min_score=min_score,
            edge_type=edge_type, space_paths=space_paths)
        return {"edges": edges, "count": len(edges)}

    @tool("kumiho_memory_store_execution", adding)
    async def store_execution(task: Annotated[str, Field(description="What was run or attempted.")],
                              status: Annotated[Literal[EXECUTION_STATUSES],
                                                Field(description="How it ended.")] = "done",
                              exit_code: Optional[int] = None,
                              duration_ms: Annotated[Optional[int], Field(ge=0)] = None,
                              stdout: Annotated[str,
                                                Field(description="Output worth keeping (last 2000 chars kept).")] = "",
                              stderr: Annotated[str,
                                                Field(description="Errors worth keeping (last 2000 chars kept).")] = "",
                              tools: Optional[list[str]] = None, topics: Optional[list[str]] = None,
                              space_hint: Annotated[str, Field(description="Sub-space under 'executions'.")] = ""
                              ) -> StoreExecutionResult:
        """Remember what a tool or command run did, so a later session can reuse what worked and avoid
        what failed. Stored as an 'action' memory, or 'error' when it failed.

        Returns {success, memory_type, store_result: {revision_kref, item_kref, space_path}}."""
        return await manager.store_tool_execution(task=task, status=status, exit_code=exit_code,
                                                  duration_ms=duration_ms, stdout=stdout, stderr=stderr,
                                                  tools=tools, topics=topics, space_hint=space_hint)

    @tool("kumiho_memory_reflect", adding)
    async def reflect(response: Annotated[str, Field(description="Your reply this turn, verbatim.")],
                      captures: Annotated[Optional[list[Capture]], Field(
                          description="What is worth keeping from this turn: decisions, preferences, facts, "
                                      "corrections. Each becomes its own long-term memory.")] = None,
                      session_id: SessionId = None,
                      source_krefs: Annotated[Optional[list[str]], Field(
                          description="Krefs of memories the captures derive from (from engage/recall).")] = None,
                      space_path: Annotated[Optional[str], Field(
                          description="Space for captures without a space_hint; default 'reflections/<type>'.")] = None,
                      discover_edges: Annotated[bool,
                                                Field(description="Link decisions and designs to related memories (by "
                                                                  "shared words, or by the LLM when one is "
                                                                  "configured).")] = True,
                      idempotency_prefix: Annotated[Optional[str], Field(
                          description="Makes retries safe: a capture with the same prefix and position is "
                                      "stored once.")] = None,
                      ) -> ReflectResult:
        """Record your reply and store what is worth remembering from it. A capture with `revises` updates
        that memory (new revision, SUPERSEDES edge); every capture gets DERIVED_FROM edges to source_krefs.
        Everything is checked before anything is written.

        Returns {buffered, captures_stored, edges_discovered, stored_krefs, created_bucket, capture_results,
        dropped_event_dates}."""
        captures = captures or []
        with _argument("response"):
            if not response.strip():
                raise km.InvalidArgumentError("response must not be empty")
        for index, source_kref in enumerate(source_krefs or []):
            _kref(source_kref, f"source_krefs[{index}]")
            await existing(source_kref, f"source_krefs[{index}]")
        if space_path is not None:
            with _argument("space_path"):
                km.normalize_space(space_path)
        if idempotency_prefix is not None:
            with _argument("idempotency_prefix"):
                if not idempotency_prefix.strip():
                    raise km.InvalidArgumentError("idempotency_prefix must not be empty")
        dropped, plans = [], []
        for index, capture in enumerate(captures):
            field = f"captures[{index}]"
            space = capture.space_hint or space_path or f"reflections/{capture.type}"
            with _argument(f"{field}.space_hint" if capture.space_hint else "space_path"):
                space = km.normalize_space(space)
            with _argument(f"{field}.tags"):
                for tag in capture.tags or []:
                    km.validate_tag(tag)
            if capture.revises is not None:
                _kref(capture.revises, f"{field}.revises")
                await existing(capture.revises, f"{field}.revises")
            metadata = {"memory_type": capture.type, "captured_by": "reflect"}
            for name in ("origin", "decision_state"):
                if getattr(capture, name):
                    metadata[name] = getattr(capture, name)
            if capture.event_date is not None:
                try:
                    km.parse_instant(capture.event_date)
                    metadata["event_date"] = capture.event_date
                except km.InvalidArgumentError:
                    dropped.append({"index": index, "event_date": capture.event_date})
            plans.append((capture, space, metadata))
        buffered, created_bucket = False, False
        if session_id is not None:
            added = await manager.add_assistant_response(session_id=session_id, response=response, channel="mcp")
            buffered, created_bucket = True, added["created_bucket"]
        capture_results, stored, edges_discovered = [], [], 0
        for index, (capture, space, metadata) in enumerate(plans):
            options = {"title": capture.title, "kind": capture.type, "metadata": metadata,
                       "tags": capture.tags or None}
            with _argument(f"captures[{index}]"):
                if capture.revises is not None:
                    # the caller says this supersedes that: a new revision of that item (SUPERSEDES edge),
                    # unless the store protects an official belief (then a new item that CONTRADICTS it)
                    target_item = km.Kref.parse(capture.revises).item_kref()
                    kref = await run(memory.remember, capture.content, item=str(target_item), **options)
                    how = "revised" if km.Kref.parse(kref).item_kref() == target_item else "contradicts"
                elif idempotency_prefix is not None:
                    kref = await run(memory.remember, capture.content, space=space,
                                     key=f"{idempotency_prefix}:{index}", **options)
                    how = "created"
                else:
                    # stacking (a restated belief becomes a new revision) only in a space the caller named
                    kref = await run(memory.remember, capture.content, space=space,
                                     stack=bool(capture.space_hint or space_path), **options)
                    how = "created"
                for source_kref in source_krefs or []:
                    await run(memory.link, kref, source_kref, km.DERIVED_FROM)
            if discover_edges and capture.type in EDGE_DISCOVERY_TYPES:
                edges_discovered += len(await manager.discover_edges_post_consolidation(kref, capture.content))
            stored.append(kref)
            capture_results.append({"index": index, "kref": kref, "outcome": how, "type": capture.type})
        return {"buffered": buffered, "captures_stored": len(stored), "edges_discovered": edges_discovered,
                "stored_krefs": stored, "created_bucket": created_bucket, "capture_results": capture_results,
                "dropped_event_dates": dropped}

    # -- revisions, tags and edges ------------------------------------------------------------------------

    @tool("kumiho_memory_get", reading)
    async def get(kref: AnyKref) -> RevisionResult:
        """Read one memory revision by any kref form: item kref (latest), ?r=N, ?t=TAG, ?t=TAG&time=ISO.

        Returns {kref, item_kref, revision, space, kind, title, content, metadata, tags, created_at,
        deprecated}."""
        _kref(kref, "kref")
        return await existing(kref, "kref")

    @tool("kumiho_memory_history", reading)
    async def history(item_kref: Annotated[str, Field(description="Kref of the item (any revision of it works).")]
                      ) -> HistoryResult:
        """List every revision of a memory item, oldest first, to see how a belief changed over time.

        Returns {item_kref, revisions, count}."""
        _kref(item_kref, "item_kref")
        with _argument("item_kref"):
            revisions = await run(memory.history, item_kref)
        return {"item_kref": item_kref.split("?")[0], "revisions": revisions, "count": len(revisions)}

    @tool("kumiho_memory_tag", setting)
    async def tag(kref: AnyKref,
                  tag: Annotated[str,
                                 Field(description="Tag name, e.g. 'published' or 'approved'.")]) -> RevisionResult:
        """Point a tag at a revision (moving it off the item's other revisions; every move is recorded, so
        ?t=TAG&time=ISO can read where it pointed before). 'latest' is maintained by the store.

        Returns the tagged revision, as kumiho_memory_get returns it."""
        _kref(kref, "kref")
        await existing(kref, "kref")
        with _argument("tag"):
            return await run(memory.tag, kref, tag)

    @tool("kumiho_memory_link", setting)
    async def link(source_kref: Annotated[str, Field(description="The memory the edge starts from.")],
                   target_kref: Annotated[str, Field(description="The memory the edge points to.")],
                   edge_type: Annotated[str, Field(
                       description="SUPPORTS, CONTRADICTS, DERIVED_FROM, DEPENDS_ON, REFERENCED, SUPERSEDES, ... "
                                   "or any UPPER_SNAKE name.")],
                   metadata: Annotated[Optional[dict[str, Any]],
                                       Field(description="Why the link holds, e.g. {reason}.")] = None,
                   ) -> EdgeResult:
        """Create a typed edge between two memory revisions (an item kref means its latest revision).
        Linking the same pair with the same type again returns the existing edge.

        Returns {source_kref, target_kref, edge_type, metadata, created_at}."""
        _kref(source_kref, "source_kref")
        _kref(target_kref, "target_kref")
        with _argument("edge_type"):
            km.validate_edge_type(edge_type)
        await existing(source_kref, "source_kref")
        await existing(target_kref, "target_kref")
        with _argument("metadata"):
            return await run(memory.link, source_kref, target_kref, edge_type, metadata)

    @tool("kumiho_memory_edges", reading)
    async def edges(kref: AnyKref,
                    direction: Annotated[Literal["outgoing", "incoming", "both"],
                                         Field(description="Which edges.")] = "both",
                    edge_type: Annotated[Optional[str],
                                         Field(description="Only edges of this type.")] = None) -> EdgesResult:
        """List the typed edges of a memory revision (or of all revisions of an item), oldest first.

        Returns {kref, edges: [{source_kref, target_kref, edge_type, metadata, created_at}], count}."""
        _kref(kref, "kref")
        if edge_type is not None:
            with _argument("edge_type"):
                km.validate_edge_type(edge_type)
        with _argument("kref"):
            found = await run(memory.edges, kref, direction=direction, edge_type=edge_type)
        return {"kref": kref, "edges": found, "count": len(found)}

    @Open
    class ListedMemory(TypedDict, total=False):
        """One item with its current revision (published, else latest)."""
        item_kref: str
        kref: Kref
        revision: int
        revision_count: int
        space: str
        kind: str
        key: Optional[str]
        title: str
        content: str
        tags: list[str]
        evidence_level: Annotated[Optional[str],
                                  Field(description="official, corroborated, single_source, unverified, or null.")]
        deprecated: bool
        contested: Annotated[bool, Field(description="A CONTRADICTS edge touches this memory.")]
        created_at: str
        updated_at: str

    class ListResult(Result):
        memories: Annotated[list[ListedMemory], Field(description="Newest first.")]
        total_items: int
        offset: int
        limit: int
        next_offset: Annotated[Optional[int], Field(description="Pass as offset for the next page; null at the end.")]
        scanned: int

    @tool("kumiho_memory_list", reading)
    async def list_memories(space: Annotated[Optional[str], Field(description="Only this space and the spaces under "
                                                                              "it, e.g. 'prefs'.")] = None,
                            kind: Annotated[Optional[str], Field(description="Only items of this kind, e.g. 'fact' or "
                                                                             "'decision'.")] = None,
                            tag: Annotated[Optional[str],
                                           Field(description="Only memories whose current revision carries this tag, "
                                                             "e.g. 'published'.")] = None,
                            evidence: Annotated[Optional[Literal[tuple(km.EVIDENCE_LEVELS)]],
                                                Field(description="Only this evidence grade.")] = None,
                            include_deprecated: Annotated[bool, Field(description="Also list deprecated memories "
                                                                                  "(marked).")] = False,
                            as_of: Annotated[Optional[str], Field(description="ISO 8601 time: list what existed then, "
                                                                              "as it stood then.")] = None,
                            limit: Annotated[int, Field(ge=1, le=200, description="Memories on this page.")] = 50,
                            offset: Annotated[int, Field(ge=0, description="Where the page starts (use next_offset "
                                                                           "from the previous page).")] = 0,
                            ) -> ListResult:
        """Browse long-term memory without a query: items newest first, each with its current revision, space,
        kind, tags, evidence grade and deprecated/contested marks. Use kumiho_memory_recall to search by meaning.

        Returns {memories: [{item_kref, kref, title, content, space, kind, tags, evidence_level, deprecated,
        contested, ...}], total_items, next_offset, ...}."""
        for field, value in (("space", space), ("kind", kind), ("tag", tag), ("as_of", as_of)):
            if value is not None:
                with _argument(field):
                    if field == "space":
                        km.normalize_space(value)
                    elif field == "tag":
                        km.validate_tag(value)
                    elif field == "as_of":
                        km.parse_instant(value)
        with _argument("kind" if kind is not None else "space"):
            return await run(km.list_memories, memory, space=space, kind=kind, tag=tag, evidence=evidence,
                             include_deprecated=include_deprecated, as_of=as_of, limit=limit, offset=offset)

    @tool("kumiho_memory_forget", erasing)
    async def forget(kref: Annotated[str, Field(
            description="An item kref (erases the item and all its revisions) or a revision kref (?r=N).")]
                     ) -> ForgetResult:
        """Erase a memory for good: its content, edges, tags and artifacts are removed from the store's bytes.
        Cannot be undone. Only when the user asks to forget something or it must not be kept.

        Returns {kref, items, revisions, edges, scrubbed}."""
        _kref(kref, "kref")
        with _argument("kref"):
            return await run(memory.forget, kref)

    # -- upkeep ------------------------------------------------------------------------------------------

    tidying = ToolAnnotations(readOnlyHint=False, destructiveHint=True, idempotentHint=False, openWorldHint=False)

    @tool("kumiho_memory_dream_state", tidying)
    async def dream_state(project: Project = None,
                          dry_run: Annotated[bool,
                                             Field(description="Report what would change; change nothing.")] = False,
                          batch_size: Annotated[int,
                                                Field(ge=1, le=200, description="Memories per assessment batch.")] = 20,
                          max_deprecation_ratio: Annotated[float, Field(ge=0.1, le=0.9, description=
                              "At most this share of the assessed memories is deprecated in one run.")] = 0.5,
                          allow_published_deprecation: Annotated[bool, Field(
                              description="Let published memories be deprecated too (off: they are "
                                          "protected).")] = False,
                          extra_instructions: Annotated[Optional[str], Field(
                              description="Deployment policy; it can only make the run more conservative.")] = None
                          ) -> DreamStateResult:
        """Tidy long-term memory between sessions (Dream State): deprecate duplicates and leftovers, tag and
        link related memories, behind hard guardrails (never official or published memories, never anything
        younger than the minimum age, a cap on how much one run may deprecate). Deprecation is soft and
        reversible. Uses the server's LLM endpoint when one is configured, else heuristics.

        Returns {success, dry_run, deprecated, actions: [{action, kref, reason}], report, report_kref, ...}."""
        own_project(project)
        options: dict[str, Any] = {"dry_run": dry_run, "batch_size": batch_size,
                                   "max_deprecation_ratio": max_deprecation_ratio,
                                   "allow_published_deprecation": allow_published_deprecation,
                                   "llm_adapter": manager.llm_adapter}
        if extra_instructions is not None:
            options["extra_instructions"] = extra_instructions
        dream = km.DreamState.from_env(memory, environ=getattr(manager, "environ", None), **options)
        return await run(dream.run_sync)

    @tool("kumiho_memory_space_profile", adding)
    async def space_profile(project: Project = None,
                            window_days: Annotated[int, Field(ge=1, le=3650, description="Days of history for the "
                                                                                         "revision rate.")] = 30,
                            dry_run: Annotated[bool,
                                               Field(description="Classify and report; store no profiles.")] = False
                            ) -> SpaceProfileResult:
        """Classify each space by how its knowledge behaves: canonical (stable, well-sourced), working
        (changing) or correspondence (claims that churn). Profiles are stored as versioned space-profile
        memories; a pinned label (space attribute space_class) that disagrees is reported as drift.

        Returns {success, spaces_profiled, labels, drift, profiles: {space: {label, scores, ...}}, errors}."""
        own_project(project)
        profiler = km.SpaceProfiler(memory, window_days=window_days, dry_run=dry_run)
        return await run(profiler.run_sync)

    return server


# ==========================================================================================================
# 5. CLI
# ==========================================================================================================

def _host_port(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, e.g. 127.0.0.1:8765, not {text!r}")
    return host.strip("[]"), int(port)


def _parser() -> argparse.ArgumentParser:
    variables = "\n".join(f"  {name:<22} {meaning}" for name, meaning in ENVIRONMENT_VARIABLES.items())
    parser = argparse.ArgumentParser(
        prog="kumiho_memory_mcp.py", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Serve kumiho_memory over MCP (stdio by default).",
        epilog=f"Environment:\n{variables}\n\nTools: {', '.join(TOOL_NAMES)}")
    parser.add_argument("--http", metavar="HOST:PORT", type=_host_port,
                        help="serve streamable HTTP at http://HOST:PORT/mcp instead of stdio")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the MCP server configured by the environment, over stdio or ``--http HOST:PORT``.

    Returns:
        0 after a clean shutdown; 2 when the configuration or the SDK is missing or wrong.
    """
    args = _parser().parse_args(argv)
    try:
        _sdk()
        manager = build_manager()
    except km.KumihoMemoryError as exc:
        print(f"kumiho_memory_mcp: {tool_error_message(exc)}", file=sys.stderr)
        return 2
    try:
        server = build_server(manager)
        if args.http is None:
            server.run("stdio")
        else:
            host, port = args.http
            if hasattr(server, "settings") and hasattr(server.settings, "host"):    # SDK 1.x: settings
                server.settings.host, server.settings.port = host, port
                server.run("streamable-http")
            else:
                server.run("streamable-http", host=host, port=port)
    except KeyboardInterrupt:
        pass
    finally:
        asyncio.run(manager.close())
        manager.memory.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
