"""A small in-memory stand-in for the Kumiho graph server, for tests: a gRPC servicer of ours built on the
SDK's own generated stubs (``kumiho.proto.kumiho_pb2*``), serving on a loopback port.

It implements the RPCs ``KumihoBackend`` calls, with the server's documented semantics (SDK docstrings and
the graph-surface notes in /work/shared/reference): projects with a root space ``/Project``; nestable spaces;
items ``name.kind`` (kind ``bundle`` reserved) unique per space; revisions numbered from 1 by the server
(numbers are never reused), ``latest`` managed by the server; tags unique per item (tagging again moves the
tag), with a history that ``ResolveKref(tag, time)`` reads; revision -> revision edges with a type
``^[A-Z][A-Z0-9_]{0,49}$``; deprecation flags; forced deletes; artifacts; single-key attributes (entries of an
entity's metadata map); and ``Search`` returning scored items. Everything else answers UNIMPLEMENTED.

What it does not try to be: Neo4j, a real full-text index (search is word-prefix matching, scored by the
share of query words found), multi-tenancy, events or bundles.

``time`` in ``ResolveKref`` is accepted as the SDK's ``YYYYMMDDHHMM`` and as ISO 8601.

Usage::

    server = StandIn(token="secret", clock=clock.now)
    address = server.start()          # "127.0.0.1:PORT"
    ...
    server.stop(); server.restart()   # same port, same data
"""

from __future__ import annotations

import datetime as _dt
import re
import threading
from concurrent import futures
from typing import Any, Callable

import grpc
from kumiho.proto import kumiho_pb2 as pb
from kumiho.proto import kumiho_pb2_grpc as pb_grpc

UTC = _dt.timezone.utc
EDGE_TYPE = re.compile(r"^[A-Z][A-Z0-9_]{0,49}$")
NAME = re.compile(r"^[\w][\w.-]*$")
WORD = re.compile(r"[0-9a-z]+")


class _Abort(Exception):
    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(details)
        self.code, self.details = code, details


def _fail(code: grpc.StatusCode, details: str) -> None:
    raise _Abort(code, details)


def _parse_time(text: str) -> _dt.datetime:
    if re.fullmatch(r"\d{12}", text):
        return _dt.datetime.strptime(text, "%Y%m%d%H%M").replace(tzinfo=UTC)
    try:
        moment = _dt.datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith("Z") else text)
    except ValueError:
        _fail(grpc.StatusCode.INVALID_ARGUMENT, f"time must be YYYYMMDDHHMM or ISO 8601, not {text!r}")
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).astimezone(UTC)


def _split_kref(uri: str) -> tuple[str, dict[str, str]]:
    """``kref://path?r=1&a=x`` -> (``path``, {r: 1, a: x})."""
    if not uri.startswith("kref://"):
        _fail(grpc.StatusCode.INVALID_ARGUMENT, f"not a kref: {uri!r}")
    body, _, query = uri[len("kref://"):].partition("?")
    params = dict(pair.partition("=")[::2] for pair in query.split("&") if pair)
    if ".." in body or not body or any(not part for part in body.split("/")):
        _fail(grpc.StatusCode.INVALID_ARGUMENT, f"malformed kref: {uri!r}")
    return body, params


class _Item:
    def __init__(self, space: str, name: str, kind: str, created_at: _dt.datetime) -> None:
        self.space, self.name, self.kind, self.created_at = space, name, kind, created_at
        self.metadata: dict[str, str] = {}
        self.deprecated = False
        self.last_number = 0
        self.revisions: dict[int, dict[str, Any]] = {}
        self.tags: dict[str, int] = {}
        self.tag_events: list[tuple[str, int | None, _dt.datetime]] = []

    @property
    def uri(self) -> str:
        return f"kref://{self.space.lstrip('/')}/{self.name}.{self.kind}"


class StandInServicer(pb_grpc.KumihoServiceServicer):
    """The in-memory graph; every handler runs under one lock."""

    def __init__(self, clock: Callable[[], _dt.datetime] | None = None,
                 peek: Callable[[], _dt.datetime] | None = None) -> None:
        self.clock = clock or (lambda: _dt.datetime.now(UTC))
        self.peek = peek or self.clock
        self.lock = threading.RLock()
        self.projects: dict[str, dict[str, Any]] = {}
        self.spaces: dict[str, dict[str, Any]] = {}          # "/Proj/a" -> {created_at, metadata}
        self.items: dict[str, _Item] = {}                    # item uri -> item
        self.edges: list[dict[str, Any]] = []
        self.calls: dict[str, int] = {}
        self.fail_after: dict[str, int] = {}                 # method -> calls to let through before one fails

    # -- helpers ------------------------------------------------------------------------------------------

    def _now(self) -> _dt.datetime:
        """The time of a revision, tag move, edge or artifact (reads the clock)."""
        return self.clock().astimezone(UTC)

    def _container_now(self) -> _dt.datetime:
        """The time of a new project, space or item: ``peek`` (which need not move a test clock)."""
        return self.peek().astimezone(UTC)

    @staticmethod
    def _stamp(moment: _dt.datetime) -> str:
        return moment.isoformat()              # "+00:00", as a server might: clients must normalize

    def _item(self, uri: str) -> _Item:
        body, _ = _split_kref(uri)
        item = self.items.get("kref://" + body)
        if item is None:
            _fail(grpc.StatusCode.NOT_FOUND, f"item not found: kref://{body}")
        return item

    def _revision(self, uri: str) -> tuple[_Item, dict[str, Any]]:
        item = self._item(uri)
        _, params = _split_kref(uri)
        raw = params.get("r", "1")                           # the documented default: missing r means 1
        if not raw.isdigit() or int(raw) not in item.revisions:
            _fail(grpc.StatusCode.NOT_FOUND, f"revision not found: {uri}")
        return item, item.revisions[int(raw)]

    def _latest(self, item: _Item) -> int | None:
        return max(item.revisions) if item.revisions else None

    def _rev_pb(self, item: _Item, rev: dict[str, Any]) -> pb.RevisionResponse:
        number = rev["number"]
        tags = sorted(tag for tag, n in item.tags.items() if n == number)
        latest = number == self._latest(item)
        return pb.RevisionResponse(
            kref=pb.Kref(uri=f"{item.uri}?r={number}"), item_kref=pb.Kref(uri=item.uri), number=number,
            tags=tags + (["latest"] if latest else []), metadata=rev["metadata"],
            created_at=self._stamp(rev["created_at"]), modified_at=self._stamp(rev["created_at"]),
            author="standin", deprecated=rev["deprecated"], published="published" in tags, latest=latest,
            username="standin", name=f"{item.name}.{item.kind}")

    def _item_pb(self, item: _Item) -> pb.ItemResponse:
        return pb.ItemResponse(kref=pb.Kref(uri=item.uri), name=f"{item.name}.{item.kind}", item_name=item.name,
                               kind=item.kind, created_at=self._stamp(item.created_at),
                               modified_at=self._stamp(item.created_at), author="standin",
                               metadata=item.metadata, deprecated=item.deprecated, username="standin")

    def _space_pb(self, path: str) -> pb.SpaceResponse:
        space = self.spaces[path]
        return pb.SpaceResponse(path=path, created_at=self._stamp(space["created_at"]),
                                modified_at=self._stamp(space["created_at"]), author="standin",
                                metadata=space["metadata"], username="standin", name=path.rsplit("/", 1)[-1],
                                type="root" if path.count("/") == 1 else "sub")

    def _artifact_pb(self, item: _Item, number: int, art: dict[str, Any]) -> pb.ArtifactResponse:
        rev_uri = f"{item.uri}?r={number}"
        return pb.ArtifactResponse(kref=pb.Kref(uri=f"{rev_uri}&a={art['name']}"), location=art["location"],
                                   revision_kref=pb.Kref(uri=rev_uri), item_kref=pb.Kref(uri=item.uri),
                                   created_at=self._stamp(art["created_at"]),
                                   modified_at=self._stamp(art["created_at"]), author="standin",
                                   metadata=art["metadata"], deprecated=False, username="standin",
                                   name=art["name"])

    def _edge_pb(self, edge: dict[str, Any]) -> pb.Edge:
        return pb.Edge(source_kref=pb.Kref(uri=edge["source"]), target_kref=pb.Kref(uri=edge["target"]),
                       edge_type=edge["type"], metadata=edge["metadata"],
                       created_at=self._stamp(edge["created_at"]), author="standin", username="standin")

    def _entity_metadata(self, uri: str) -> dict[str, str]:
        """The metadata map an attribute call addresses: a revision, an item, or a space (or project)."""
        body, params = _split_kref(uri)
        last = body.rsplit("/", 1)[-1]
        if "." in last and "/" in body:
            if "r" in params:
                return self._revision(uri)[1]["metadata"]
            return self._item(uri).metadata
        path = "/" + body
        if path not in self.spaces:
            _fail(grpc.StatusCode.NOT_FOUND, f"space not found: {path}")
        return self.spaces[path]["metadata"]

    @staticmethod
    def _page(rows: list[Any],
              pagination: pb.PaginationRequest | None) -> tuple[list[Any], pb.PaginationResponse | None]:
        if pagination is None or not pagination.page_size:
            return rows, None
        start = int(pagination.cursor or 0)
        end = start + pagination.page_size
        more = end < len(rows)
        return rows[start:end], pb.PaginationResponse(next_cursor=str(end) if more else "", has_more=more,
                                                      total_count=len(rows))

    # -- projects and spaces ------------------------------------------------------------------------------

    def CreateProject(self, request, context):
        if not NAME.match(request.name):
            _fail(grpc.StatusCode.INVALID_ARGUMENT, f"bad project name {request.name!r}")
        if request.name in self.projects:
            _fail(grpc.StatusCode.ALREADY_EXISTS, f"project {request.name} exists")
        now = self._container_now()
        self.projects[request.name] = {"created_at": now, "description": request.description,
                                       "metadata": dict(request.metadata)}
        self.spaces["/" + request.name] = {"created_at": now, "metadata": {}}
        return self._project_pb(request.name)

    def _project_pb(self, name: str) -> pb.ProjectResponse:
        project = self.projects[name]
        return pb.ProjectResponse(project_id=f"id-{name}", name=name, description=project["description"],
                                  created_at=self._stamp(project["created_at"]),
                                  updated_at=self._stamp(project["created_at"]), metadata=project["metadata"])

    def GetProjects(self, request, context):
        return pb.GetProjectsResponse(projects=[self._project_pb(name) for name in sorted(self.projects)])

    def CreateSpace(self, request, context):
        parent = "/" + request.parent_path.strip("/")
        if parent not in self.spaces:
            _fail(grpc.StatusCode.NOT_FOUND, f"parent space not found: {parent}")
        if not NAME.match(request.space_name) or "." in request.space_name:
            _fail(grpc.StatusCode.INVALID_ARGUMENT, f"bad space name {request.space_name!r}")
        path = f"{parent}/{request.space_name}"
        if path in self.spaces:
            if request.exists_error:
                _fail(grpc.StatusCode.ALREADY_EXISTS, f"space exists: {path}")
        else:
            self.spaces[path] = {"created_at": self._container_now(), "metadata": dict(request.metadata)}
        return self._space_pb(path)

    def GetSpace(self, request, context):
        text = request.path_or_kref
        path = "/" + (text[len("kref://"):] if text.startswith("kref://") else text).strip("/")
        if path not in self.spaces:
            _fail(grpc.StatusCode.NOT_FOUND, f"space not found: {path}")
        return self._space_pb(path)

    def GetChildSpaces(self, request, context):
        parent = "/" + request.parent_path.strip("/")
        if parent not in self.spaces:
            _fail(grpc.StatusCode.NOT_FOUND, f"space not found: {parent}")
        children = sorted(path for path in self.spaces if path.startswith(parent + "/")
                          and (request.recursive or "/" not in path[len(parent) + 1:]))
        page, pagination = self._page(children, request.pagination if request.HasField("pagination") else None)
        return pb.GetChildSpacesResponse(spaces=[self._space_pb(path) for path in page], pagination=pagination)

    # -- items --------------------------------------------------------------------------------------------

    def CreateItem(self, request, context):
        parent = "/" + request.parent_path.strip("/")
        if parent not in self.spaces:
            _fail(grpc.StatusCode.NOT_FOUND, f"space not found: {parent}")
        if request.kind.lower() == "bundle":
            _fail(grpc.StatusCode.INVALID_ARGUMENT, "kind 'bundle' is reserved")
        if not NAME.match(request.item_name) or not NAME.match(request.kind):
            _fail(grpc.StatusCode.INVALID_ARGUMENT, "bad item name or kind")
        item = _Item(parent, request.item_name, request.kind, self._container_now())
        if item.uri in self.items:
            if request.exists_error:
                _fail(grpc.StatusCode.ALREADY_EXISTS, f"item exists: {item.uri}")
            return self._item_pb(self.items[item.uri])
        self.items[item.uri] = item
        return self._item_pb(item)

    def GetItem(self, request, context):
        parent = "/" + request.parent_path.strip("/")
        uri = f"kref://{parent.lstrip('/')}/{request.item_name}.{request.kind}"
        return self._item_pb(self._item(uri))

    def GetItems(self, request, context):
        parent = "/" + request.parent_path.strip("/")
        if parent not in self.spaces:
            _fail(grpc.StatusCode.NOT_FOUND, f"space not found: {parent}")
        rows = sorted((item for item in self.items.values() if item.space == parent
                       and (not request.kind_filter or item.kind == request.kind_filter)
                       and (not request.item_name_filter or request.item_name_filter in item.name)
                       and (request.include_deprecated or not item.deprecated)), key=lambda i: (i.name, i.kind))
        page, pagination = self._page(rows, request.pagination if request.HasField("pagination") else None)
        return pb.GetItemsResponse(items=[self._item_pb(item) for item in page], pagination=pagination)

    def UpdateItemMetadata(self, request, context):
        item = self._item(request.kref.uri)
        item.metadata.update(request.metadata)
        return self._item_pb(item)

    def DeleteItem(self, request, context):
        item = self._item(request.kref.uri)
        if item.revisions and not request.force:
            _fail(grpc.StatusCode.FAILED_PRECONDITION, "item has revisions; delete with force")
        del self.items[item.uri]
        prefix = item.uri + "?"
        self.edges = [e for e in self.edges if not (e["source"].startswith(prefix) or e["target"].startswith(prefix))]
        return pb.StatusResponse(success=True, message="deleted")

    def SetDeprecated(self, request, context):
        body, params = _split_kref(request.kref.uri)
        if "r" in params:
            self._revision(request.kref.uri)[1]["deprecated"] = request.deprecated
        else:
            self._item(request.kref.uri).deprecated = request.deprecated
        return pb.StatusResponse(success=True)

    # -- revisions ----------------------------------------------------------------------------------------

    def CreateRevision(self, request, context):
        item = self._item(request.item_kref.uri)
        number = request.number or item.last_number + 1
        if number in item.revisions:
            _fail(grpc.StatusCode.ALREADY_EXISTS, f"revision {number} exists")
        item.last_number = max(item.last_number, number)
        rev = {"number": number, "metadata": dict(request.metadata), "created_at": self._now(),
               "deprecated": False, "artifacts": {}}
        item.revisions[number] = rev
        return self._rev_pb(item, rev)

    def UpdateRevisionMetadata(self, request, context):
        item, rev = self._revision(request.kref.uri)
        rev["metadata"].update(request.metadata)
        return self._rev_pb(item, rev)

    def GetRevision(self, request, context):
        return self._rev_pb(*self._revision(request.kref.uri))

    def GetRevisions(self, request, context):
        item = self._item(request.item_kref.uri)
        return pb.GetRevisionsResponse(revisions=[self._rev_pb(item, item.revisions[n])
                                                  for n in sorted(item.revisions)])

    def BatchGetRevisions(self, request, context):
        """Revisions by kref, or (item_krefs + tag) the revision each item's tag points at (``latest``: the
        newest); what is not there is listed in ``not_found``."""
        found, missing = [], []
        for kref in request.revision_krefs:
            try:
                found.append(self._rev_pb(*self._revision(kref.uri)))
            except _Abort:
                missing.append(kref.uri)
        for kref in request.item_krefs:
            item = self.items.get(kref.uri)
            number = None if item is None else (self._latest(item) if request.tag == "latest"
                                                 else item.tags.get(request.tag))
            if number is None:
                missing.append(kref.uri)
            else:
                found.append(self._rev_pb(item, item.revisions[number]))
        return pb.BatchGetRevisionsResponse(revisions=found, not_found=missing,
                                            requested_count=len(request.revision_krefs) + len(request.item_krefs),
                                            found_count=len(found))

    def PeekNextRevision(self, request, context):
        return pb.PeekNextRevisionResponse(number=self._item(request.item_kref.uri).last_number + 1)

    def ResolveKref(self, request, context):
        item = self._item(request.kref)
        _, params = _split_kref(request.kref)
        if "r" in params:
            return self._rev_pb(*self._revision(request.kref))
        tag = request.tag or "latest"
        moment = _parse_time(request.time) if request.time else None
        number: int | None
        if tag == "latest":
            alive = [n for n, rev in item.revisions.items() if moment is None or rev["created_at"] <= moment]
            number = max(alive) if alive else None
        elif moment is None:
            number = item.tags.get(tag)
        else:
            number = None
            for event_tag, event_number, at in item.tag_events:
                if event_tag == tag and at <= moment:
                    number = event_number
        if number is None or number not in item.revisions:
            _fail(grpc.StatusCode.NOT_FOUND, f"no revision for {request.kref} tag={tag} time={request.time}")
        return self._rev_pb(item, item.revisions[number])

    def DeleteRevision(self, request, context):
        item, rev = self._revision(request.kref.uri)
        number = rev["number"]
        del item.revisions[number]
        for tag in [t for t, n in item.tags.items() if n == number]:
            del item.tags[tag]
        item.tag_events = [(t, None if n == number else n, at) for t, n, at in item.tag_events]
        uri = f"{item.uri}?r={number}"
        self.edges = [e for e in self.edges if uri not in (e["source"], e["target"])]
        return pb.StatusResponse(success=True)

    # -- tags ---------------------------------------------------------------------------------------------

    def TagRevision(self, request, context):
        if request.tag == "latest":
            _fail(grpc.StatusCode.INVALID_ARGUMENT, "'latest' is managed by the server")
        item, rev = self._revision(request.kref.uri)
        if item.tags.get(request.tag) != rev["number"]:
            item.tags[request.tag] = rev["number"]
            item.tag_events.append((request.tag, rev["number"], self._now()))
        return pb.StatusResponse(success=True)

    def UnTagRevision(self, request, context):
        item, rev = self._revision(request.kref.uri)
        if item.tags.get(request.tag) != rev["number"]:
            _fail(grpc.StatusCode.NOT_FOUND, f"revision does not carry tag {request.tag!r}")
        del item.tags[request.tag]
        item.tag_events.append((request.tag, None, self._now()))
        return pb.StatusResponse(success=True)

    def HasTag(self, request, context):
        item, rev = self._revision(request.kref.uri)
        return pb.HasTagResponse(has_tag=item.tags.get(request.tag) == rev["number"])

    def WasTagged(self, request, context):
        item, rev = self._revision(request.kref.uri)
        return pb.WasTaggedResponse(was_tagged=any(t == request.tag and n == rev["number"]
                                                   for t, n, _ in item.tag_events))

    # -- artifacts ----------------------------------------------------------------------------------------

    def CreateArtifact(self, request, context):
        item, rev = self._revision(request.revision_kref.uri)
        existing = rev["artifacts"].get(request.name)
        if existing is not None:
            if request.exists_error:
                _fail(grpc.StatusCode.ALREADY_EXISTS, f"artifact {request.name} exists")
            return self._artifact_pb(item, rev["number"], existing)
        art = {"name": request.name, "location": request.location, "metadata": dict(request.metadata),
               "created_at": self._now()}
        rev["artifacts"][request.name] = art
        return self._artifact_pb(item, rev["number"], art)

    def GetArtifact(self, request, context):
        item, rev = self._revision(request.revision_kref.uri)
        if request.name not in rev["artifacts"]:
            _fail(grpc.StatusCode.NOT_FOUND, f"artifact not found: {request.name}")
        return self._artifact_pb(item, rev["number"], rev["artifacts"][request.name])

    def GetArtifacts(self, request, context):
        item, rev = self._revision(request.revision_kref.uri)
        return pb.GetArtifactsResponse(artifacts=[self._artifact_pb(item, rev["number"], rev["artifacts"][name])
                                                  for name in sorted(rev["artifacts"])])

    def DeleteArtifact(self, request, context):
        uri = request.kref.uri
        item, rev = self._revision(uri)
        name = _split_kref(uri)[1].get("a", "")
        if rev["artifacts"].pop(name, None) is None:
            _fail(grpc.StatusCode.NOT_FOUND, f"artifact not found: {name}")
        return pb.StatusResponse(success=True)

    # -- attributes ---------------------------------------------------------------------------------------

    def SetAttribute(self, request, context):
        if not request.key:
            _fail(grpc.StatusCode.INVALID_ARGUMENT, "attribute key is empty")
        self._entity_metadata(request.kref.uri)[request.key] = request.value
        return pb.StatusResponse(success=True)

    def GetAttribute(self, request, context):
        metadata = self._entity_metadata(request.kref.uri)
        return pb.GetAttributeResponse(key=request.key, value=metadata.get(request.key, ""),
                                       exists=request.key in metadata)

    def DeleteAttribute(self, request, context):
        metadata = self._entity_metadata(request.kref.uri)
        return pb.StatusResponse(success=metadata.pop(request.key, None) is not None)

    # -- edges --------------------------------------------------------------------------------------------

    def CreateEdge(self, request, context):
        if not EDGE_TYPE.match(request.edge_type):
            _fail(grpc.StatusCode.INVALID_ARGUMENT, f"bad edge type {request.edge_type!r}")
        source_item, source = self._revision(request.source_revision_kref.uri)
        target_item, target = self._revision(request.target_revision_kref.uri)
        source_uri = f"{source_item.uri}?r={source['number']}"
        target_uri = f"{target_item.uri}?r={target['number']}"
        for edge in self.edges:
            if (edge["source"], edge["target"], edge["type"]) == (source_uri, target_uri, request.edge_type):
                if request.exists_error:
                    _fail(grpc.StatusCode.ALREADY_EXISTS, "edge exists")
                return pb.StatusResponse(success=True, message="exists")
        self.edges.append({"source": source_uri, "target": target_uri, "type": request.edge_type,
                           "metadata": dict(request.metadata), "created_at": self._now()})
        return pb.StatusResponse(success=True, message="created")

    def GetEdges(self, request, context):
        item, rev = self._revision(request.kref.uri)
        uri = f"{item.uri}?r={rev['number']}"
        direction = request.direction
        rows = [e for e in self.edges
                if ((direction in (pb.OUTGOING, pb.BOTH) and e["source"] == uri)
                    or (direction in (pb.INCOMING, pb.BOTH) and e["target"] == uri))
                and (not request.edge_type_filter or e["type"] == request.edge_type_filter)]
        page, pagination = self._page(rows, request.pagination if request.HasField("pagination") else None)
        return pb.GetEdgesResponse(edges=[self._edge_pb(e) for e in page], pagination=pagination)

    def DeleteEdge(self, request, context):
        key = (request.source_kref.uri, request.target_kref.uri, request.edge_type)
        before = len(self.edges)
        self.edges = [e for e in self.edges if (e["source"], e["target"], e["type"]) != key]
        if len(self.edges) == before:
            _fail(grpc.StatusCode.NOT_FOUND, "edge not found")
        return pb.StatusResponse(success=True)

    # -- search -------------------------------------------------------------------------------------------

    def Search(self, request, context):
        words = WORD.findall(request.query.lower())
        prefix = request.context_filter.strip("/")
        results = []
        for item in self.items.values():
            path = item.space.lstrip("/")
            if prefix and not (path == prefix or path.startswith(prefix + "/")):
                continue
            if request.kind_filter and item.kind != request.kind_filter:
                continue
            if item.deprecated and not request.include_deprecated:
                continue
            fields = {"name": set(WORD.findall(f"{item.name} {item.kind}".lower()))}
            if request.include_revision_metadata:
                text = " ".join(" ".join(list(rev["metadata"].values())) for rev in item.revisions.values()
                                if request.include_deprecated or not rev["deprecated"])
                fields["revision_metadata"] = set(WORD.findall(text.lower())) | set(item.tags)
            matched, found = set(), 0
            for word in words:
                hit = False
                for field, vocabulary in fields.items():
                    if any(v.startswith(word) or (len(v) >= 4 and word.startswith(v)) for v in vocabulary):
                        matched.add(field)
                        hit = True
                found += hit
            score = found / len(words) if words else 0.0
            if found and score >= request.min_score:
                results.append(pb.SearchResult(item=self._item_pb(item), score=score, matched_in=sorted(matched)))
        results.sort(key=lambda r: (-r.score, r.item.kref.uri))
        page_size = (request.pagination.page_size if request.HasField("pagination") and request.pagination.page_size
                     else 100)
        start = int(request.pagination.cursor or 0) if request.HasField("pagination") else 0
        page = results[start:start + page_size]
        more = start + page_size < len(results)
        return pb.SearchResponse(results=page, search_mode="fulltext",
                                 pagination=pb.PaginationResponse(next_cursor=str(start + page_size) if more else "",
                                                                  has_more=more, total_count=len(results)))


class _Guard(grpc.ServerInterceptor):
    """Checks ``authorization: Bearer <token>`` (when a token is configured), serializes handlers, counts
    calls, and turns ``_Abort`` into a gRPC status."""

    def __init__(self, servicer: StandInServicer, token: str | None) -> None:
        self.servicer, self.token = servicer, token

    def intercept_service(self, continuation, handler_call_details):
        handler = continuation(handler_call_details)
        if handler is None or handler.unary_unary is None:
            return handler
        method = handler_call_details.method.rsplit("/", 1)[-1]
        metadata = dict(handler_call_details.invocation_metadata or ())
        inner = handler.unary_unary

        def run(request, context):
            if self.token is not None and metadata.get("authorization") != f"Bearer {self.token}":
                context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or wrong bearer token")
            with self.servicer.lock:
                self.servicer.calls[method] = self.servicer.calls.get(method, 0) + 1
                failing = self.servicer.fail_after.get(method)
                if failing is not None:              # fault injection: let N calls through, then fail one
                    if failing <= 0:
                        del self.servicer.fail_after[method]
                        context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"injected failure of {method}")
                    self.servicer.fail_after[method] = failing - 1
                try:
                    return inner(request, context)
                except _Abort as exc:
                    error = exc
            context.abort(error.code, error.details)

        return grpc.unary_unary_rpc_method_handler(run, request_deserializer=handler.request_deserializer,
                                                   response_serializer=handler.response_serializer)


class StandIn:
    """Start, stop and restart the stand-in on a loopback port; the data outlives a restart."""

    def __init__(self, *, token: str | None = None, clock: Callable[[], _dt.datetime] | None = None,
                 peek: Callable[[], _dt.datetime] | None = None) -> None:
        self.servicer = StandInServicer(clock, peek)
        self.token = token
        self.port = 0
        self._server: grpc.Server | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, port: int | None = None) -> str:
        """Serve on 127.0.0.1 (port 0 picks a free one; a restart reuses the last port)."""
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4),
                             interceptors=[_Guard(self.servicer, self.token)])
        pb_grpc.add_KumihoServiceServicer_to_server(self.servicer, server)
        bound = server.add_insecure_port(f"127.0.0.1:{self.port if port is None else port}")
        if not bound:
            raise RuntimeError("the stand-in could not bind its port")
        self.port = bound
        server.start()
        self._server = server
        return self.address

    def stop(self) -> None:
        """Stop serving now (calls in flight are cancelled)."""
        if self._server is not None:
            self._server.stop(grace=None).wait()
            self._server = None

    def restart(self) -> str:
        """Serve again on the same port with the same data."""
        self.stop()
        return self.start(self.port)

    @property
    def running(self) -> bool:
        return self._server is not None

    def __enter__(self) -> "StandIn":
        self.start()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.stop()
