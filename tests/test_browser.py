"""The memory browser: its pure request handler, every route over real HTTP with hostile input, and the page
rendered by a real headless Chromium (Debian's ``chromium``; skipped with the reason when it is missing, except
under CI, where .ci/run installs it and its absence fails)."""

from __future__ import annotations

import http.client
import os
import re
import shutil
import struct
import subprocess
import urllib.parse
import zlib

import pytest

import kumiho_memory as km

HOSTILE = "<script>alert('x')</script> \"quoted\" & 'single' \u202eevil\u202c \u200f rtl \x07bell"
CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else None)
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


@pytest.fixture
def memory():
    with km.Memory() as opened:
        first = opened.remember("The user prefers dark mode " + HOSTILE, space="prefs", key="ui.theme",
                                source="chat", title="Theme " + HOSTILE)
        opened.tag(first, "published")
        second = opened.remember("The user switched to light mode", space="prefs", key="ui.theme")
        opened.tag(second, "approved")
        opened.tag(first, "approved")                              # approved moved back: two events
        note = opened.remember("Bright screens strain the user's eyes at night", space="health",
                               evidence_level="official")
        opened.link(second, note, "DERIVED_FROM")
        opened.add_artifact(second, "transcript", "/tmp/chat-<1>.txt")
        claim = opened.remember("Bright screens never strain anyone's eyes " + HOSTILE, space="health",
                                item=None, source="forum")
        opened.link(claim, note, km.CONTRADICTS)
        yield opened


@pytest.fixture
def item_kref(memory):
    return next(item["item_kref"] for item in memory.items(space="prefs"))


def get(browser, path, query="", host="127.0.0.1:8765"):
    status, headers, body = browser.handle("GET", path, query, headers={"Host": host})
    return status, dict(headers), body.decode("utf-8")


# -- the pure handler -------------------------------------------------------------------------------------------

def test_the_list_shows_memories_with_badges_and_escapes_everything(memory):
    status, headers, page = get(km.MemoryBrowser(memory), "/")
    assert status == 200 and headers["Content-Type"].startswith("text/html")
    assert "<script>alert" not in page and "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in page
    assert "\x07" not in page and "<bdi dir=\"auto\">" in page
    assert page.count('class="memory-row"') == 3
    assert "official" in page and "contested" in page
    assert "default-src 'none'" in headers["Content-Security-Policy"] and headers["X-Frame-Options"] == "DENY"
    assert not re.search(r'(src|href)="(https?:)?//', page)


def test_search_runs_recall_and_shows_scores(memory):
    status, _, page = get(km.MemoryBrowser(memory), "/", "q=" + urllib.parse.quote("bright screens eyes"))
    assert status == 200 and "Search results" in page and 'class="score"' in page
    assert re.search(r'class="score">1\.\d{3}', page)                 # best first, normalized to 1.0 (+evidence)
    status, _, page = get(km.MemoryBrowser(memory), "/", "q=light+mode&space=health")
    assert "No memories match" in page


def test_filters_by_space_kind_tag_and_evidence(memory):
    browser = km.MemoryBrowser(memory)
    assert get(browser, "/", "space=health")[2].count('class="memory-row"') == 2
    assert get(browser, "/", "tag=approved")[2].count('class="memory-row"') == 0     # approved is back on r1
    assert get(browser, "/", "tag=published")[2].count('class="memory-row"') == 1
    assert get(browser, "/", "evidence=official")[2].count('class="memory-row"') == 1
    assert get(browser, "/", "kind=memory&limit=1")[2].count('class="memory-row"') == 1
    assert 'rel="next"' in get(browser, "/", "limit=1")[2]


def test_a_memory_page_shows_the_chain_tags_over_time_edges_and_artifacts(memory, item_kref):
    status, _, page = get(km.MemoryBrowser(memory), "/memory", urllib.parse.urlencode({"kref": item_kref}))
    assert status == 200
    assert 'id="r2"' in page and 'id="r1"' in page and "SUPERSEDES r1" in page
    tags = page[page.index('id="tags"'):page.index('id="edges-out"')]
    assert "approved" in tags and "r2" in tags and "r1" in tags and "published" in tags
    assert "DERIVED_FROM" in page and "transcript" in page and "/tmp/chat-&lt;1&gt;.txt" in page
    assert "<script>alert" not in page


def test_the_point_in_time_view(memory, item_kref):
    first = memory.history(item_kref)[0]["created_at"]
    query = urllib.parse.urlencode({"kref": item_kref, "as_of": first})
    status, _, page = get(km.MemoryBrowser(memory), "/memory", query)
    assert status == 200 and 'id="as-of-view"' in page and "Current at" in page and ": r1</h2>" in page
    query = urllib.parse.urlencode({"kref": item_kref, "as_of": "2000-01-01T00:00:00Z"})
    assert "did not exist yet" in get(km.MemoryBrowser(memory), "/memory", query)[2]
    assert get(km.MemoryBrowser(memory), "/",
               urllib.parse.urlencode({"as_of": "2000-01-01"}))[2].count("memory-row") == 0


HOSTILE_QUERIES = [
    "", "q=", "q=%00", "q=%ff%fe%fd", "q=" + "x" * 3000, "q=<script>", "limit=0", "limit=-5", "limit=abc",
    "limit=99999999999", "offset=-1", "offset=1e9", "limit=201", "space=../etc", "space=%2F%2F", "kind=a b",
    "tag=<b>", "evidence=gold", "as_of=yesterday", "as_of=9999-99-99", "as_of=" + "1" * 100, "q=a&q=b",
    "&&&&", "=x", "%", "q=%E2%80%AEevil", "deprecated=1", "offset=5000&limit=200", "q=x&offset=990&limit=20",
    "a=" + "&a=".join(["1"] * 40), "x" * 9000,
]
MEMORY_QUERIES = [
    "", "kref=", "kref=nonsense", "kref=kref://", "kref=kref://CognitiveMemory/../x.memory", "kref=%00",
    "kref=kref://Other/notes/x.memory", "kref=kref://CognitiveMemory/prefs/missing.memory",
    "kref=kref://CognitiveMemory/prefs/x.memory?r=abc", "kref=" + "k" * 3000, "as_of=garbage",
]


def test_hostile_query_strings_get_a_clear_page_never_a_traceback(memory, item_kref):
    browser = km.MemoryBrowser(memory)
    for path, queries in (("/", HOSTILE_QUERIES), ("/memory", MEMORY_QUERIES + [
            urllib.parse.urlencode({"kref": item_kref, "as_of": "not a time"})])):
        for query in queries:
            status, headers, page = get(browser, path, query)
            assert status in (200, 400, 404, 414), (path, query, status)
            assert "Traceback" not in page and headers["Content-Type"].startswith("text/html"), (path, query)
            if status != 200:
                assert 'id="error"' in page, (path, query)


def test_unknown_routes_methods_and_hosts_are_refused(memory):
    browser = km.MemoryBrowser(memory)
    assert get(browser, "/nope")[0] == 404
    assert get(browser, "/../../etc/passwd")[0] == 404
    assert get(browser, "/tag")[0] == 405
    assert get(browser, "/favicon.ico")[0] == 204
    assert browser.handle("DELETE", "/", headers={"Host": "localhost"})[0] == 405
    for host in ("evil.example", "evil.example:8765", "127.0.0.1.evil.example", "", "localhost.evil", "10.0.0.1"):
        assert get(browser, "/", host=host)[0] == 421, host
    for host in ("localhost", "localhost:1", "127.0.0.1", "[::1]:8765", "127.0.0.2:80"):
        assert get(browser, "/", host=host)[0] == 200, host


def test_writes_need_allow_writes_the_token_and_a_loopback_origin(memory, item_kref):
    kref = memory.get(item_kref)["kref"]
    readonly = km.MemoryBrowser(memory)
    assert readonly.handle("POST", "/tag", form={"token": readonly.token, "kref": kref, "tag": "x"},
                           headers={"Host": "localhost"})[0] == 403
    assert 'action="/tag"' not in get(readonly, "/memory", urllib.parse.urlencode({"kref": item_kref}))[2]
    browser = km.MemoryBrowser(memory, allow_writes=True)
    page = get(browser, "/memory", urllib.parse.urlencode({"kref": item_kref}))[2]
    assert f'value="{browser.token}"' in page and 'action="/forget"' in page
    host = {"Host": "127.0.0.1:8765"}
    assert browser.handle("POST", "/tag", form={"kref": kref, "tag": "x"}, headers=host)[0] == 403
    assert browser.handle("POST", "/tag", form={"token": "guess", "kref": kref, "tag": "x"}, headers=host)[0] == 403
    assert browser.handle("POST", "/tag", form={"token": browser.token, "kref": kref, "tag": "x"},
                          headers={**host, "Origin": "http://evil.example"})[0] == 403
    assert browser.handle("POST", "/tag", form={"token": browser.token, "kref": kref, "tag": "x"},
                          headers={**host, "Sec-Fetch-Site": "cross-site"})[0] == 403
    assert browser.handle("POST", "/tag", form={"token": browser.token, "kref": kref, "tag": "x"},
                          headers={"Host": "evil.example"})[0] == 421
    assert "x" not in memory.get(kref)["tags"]
    status, headers, _ = browser.handle("POST", "/tag", form={"token": browser.token, "kref": kref, "tag": "reviewed"},
                                        headers={**host, "Origin": "http://127.0.0.1:8765"})
    assert status == 303 and dict(headers)["Location"].startswith("/memory?")
    assert "reviewed" in memory.get(kref)["tags"]
    assert browser.handle("POST", "/tag", form={"token": browser.token, "kref": kref, "tag": "bad tag!"},
                          headers=host)[0] == 400
    assert browser.handle("POST", "/untag", form={"token": browser.token, "kref": kref, "tag": "reviewed"},
                          headers=host)[0] == 303
    assert browser.handle("POST", "/deprecate", form={"token": browser.token, "kref": item_kref},
                          headers=host)[0] == 303
    assert memory.get(item_kref)["deprecated"]
    assert browser.handle("POST", "/deprecate", form={"token": browser.token, "kref": item_kref, "undo": "1"},
                          headers=host)[0] == 303
    assert not memory.get(item_kref)["deprecated"]
    assert browser.handle("POST", "/forget", form={"token": browser.token, "kref": item_kref}, headers=host)[0] == 400
    status, headers, _ = browser.handle("POST", "/forget", form={"token": browser.token, "kref": item_kref,
                                                                 "confirm": "yes"}, headers=host)
    assert status == 303 and dict(headers)["Location"].startswith("/?")
    with pytest.raises(km.NotFoundError):
        memory.get(item_kref)


def test_serve_refuses_a_non_loopback_address(memory):
    with pytest.raises(km.InvalidArgumentError):
        km.MemoryBrowser(memory).serve("0.0.0.0", 0)


# -- over real HTTP ---------------------------------------------------------------------------------------------

def request(server, method, target, body=None, headers=None):
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        connection.request(method, target, body=body, headers=headers or {})
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read().decode("utf-8", "replace")
    finally:
        connection.close()


def test_every_route_over_http_with_hostile_query_strings(memory, item_kref):
    browser = km.MemoryBrowser(memory, allow_writes=True)
    with browser.serve() as server:
        for query in HOSTILE_QUERIES:
            status, headers, page = request(server, "GET", "/?" + urllib.parse.quote(query, safe="=&%"))
            assert status in (200, 400, 414), (query, status)
            assert "Traceback" not in page and headers["Content-Type"].startswith("text/html")
        for query in MEMORY_QUERIES:
            status, _, page = request(server, "GET", "/memory?" + urllib.parse.quote(query, safe="=&%"))
            assert status in (200, 400, 404, 414) and "Traceback" not in page, query
        assert request(server, "GET", "/memory?" + urllib.parse.urlencode({"kref": item_kref}))[0] == 200
        assert request(server, "HEAD", "/")[0] == 200
        assert request(server, "GET", "/favicon.ico")[0] == 204
        assert request(server, "GET", "/missing")[0] == 404
        assert request(server, "GET", "/", headers={"Host": "rebound.example"})[0] == 421
        assert request(server, "PUT", "/")[0] in (405, 501)
        form = urllib.parse.urlencode({"token": browser.token, "kref": item_kref, "tag": "viahttp"})
        typed = {"Content-Type": "application/x-www-form-urlencoded"}
        status, headers, _ = request(server, "POST", "/tag", form, typed)
        assert status == 303 and "viahttp" in memory.get(item_kref)["tags"]
        assert request(server, "POST", "/tag", urllib.parse.urlencode({"kref": item_kref, "tag": "t"}), typed)[0] == 403
        assert request(server, "POST", "/tag", "x" * (70 * 1024), typed)[0] == 413
        assert request(server, "POST", "/tag", "%ff%00=&&&", typed)[0] == 403
        assert request(server, "POST", "/nowhere", form, typed)[0] == 404


# -- in a real headless Chromium ----------------------------------------------------------------------------------

needs_chromium = pytest.mark.skipif(
    CHROMIUM is None and not IN_CI,
    reason="chromium is not installed (Debian: apt-get install -y chromium); CI installs it and runs these")


def chromium(tmp_path, *arguments):
    if CHROMIUM is None:
        pytest.fail("chromium is missing (CI must install it: apt-get install -y chromium)")
    profile = tmp_path / f"profile-{len(list(tmp_path.iterdir()))}"
    command = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
               "--disable-background-networking", "--disable-component-update", "--disable-sync",
               "--disable-dev-shm-usage", f"--user-data-dir={profile}", *arguments]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def png_pixels_vary(path) -> bool:
    """Whether a PNG's decoded scanlines hold more than one distinct byte value (the page is not blank)."""
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    position, compressed = 8, b""
    while position < len(data):
        length, kind = struct.unpack(">I4s", data[position:position + 8])
        if kind == b"IDAT":
            compressed += data[position + 8:position + 8 + length]
        position += 12 + length
    raw = zlib.decompress(compressed)
    return len(set(raw[1:4096 * 16])) > 8


@needs_chromium
def test_the_pages_render_in_headless_chromium(memory, item_kref, tmp_path):
    with km.MemoryBrowser(memory).serve() as server:
        listed = chromium(tmp_path, "--dump-dom", server.url)
        assert listed.count('class="memory-row"') == 3 and 'id="memories"' in listed
        assert "<script>alert" not in listed
        searched = chromium(tmp_path, "--dump-dom", server.url + "?q=" + urllib.parse.quote("bright screens"))
        assert "Search results" in searched and 'class="score"' in searched
        page_url = server.url + "memory?" + urllib.parse.urlencode({"kref": item_kref})
        shown = chromium(tmp_path, "--dump-dom", page_url)
        assert 'id="chain"' in shown and 'id="r2"' in shown and 'id="r1"' in shown and "SUPERSEDES r1" in shown
        assert 'class="tag-row"' in shown and "approved" in shown
        shot = tmp_path / "memory.png"
        chromium(tmp_path, f"--screenshot={shot}", "--window-size=1200,900", page_url)
        assert shot.stat().st_size > 5000 and png_pixels_vary(shot)
