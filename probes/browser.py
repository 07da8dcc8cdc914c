"""How fast the memory browser answers on a large store: the list page, a search, a memory's page.

Usage: python probes/browser.py [--memories N] [--db PATH]

Builds (or reuses) a file store of N synthetic memories and times each route through ``MemoryBrowser.handle``
(the page the HTTP server sends, without the socket), writing probes/results/browser.json.
"""

from __future__ import annotations

import argparse
import os
import random
import tempfile
import time

from _common import km, percentile, print_table, write_results

WORDS = ("harbor lantern meadow falcon quill cobalt thistle saffron juniper pebble walrus orchid tundra "
         "zephyr gallop velvet marmot fjord amber quokka river garden invoice planner deploy budget").split()


def build(path: str, count: int) -> float:
    started = time.perf_counter()
    rng = random.Random(20)
    with km.Memory(path) as memory:
        for index in range(count):
            text = " ".join(rng.choice(WORDS) for _ in range(12)) + f" note {index}"
            memory.remember(text, space=f"space{index % 20}", tags=["published"] if index % 3 == 0 else None)
    return time.perf_counter() - started


def timed_route(browser: km.MemoryBrowser, path: str, query: str, repeats: int) -> dict:
    times, status = [], None
    for _ in range(repeats):
        started = time.perf_counter()
        status, _headers, _body = browser.handle("GET", path, query, None, {"Host": "127.0.0.1"})
        times.append((time.perf_counter() - started) * 1000.0)
    return {"status": status, "p50_ms": round(percentile(times, 0.5), 2), "max_ms": round(max(times), 2)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--db", help="a store to reuse (built when missing)")
    args = parser.parse_args()
    path = args.db or os.path.join(tempfile.mkdtemp(), "browser.db")
    build_s = build(path, args.memories) if not os.path.exists(path) else 0.0
    with km.Memory(path) as memory:
        browser = km.MemoryBrowser(memory)
        first = km.list_memories(memory, limit=1)["memories"][0]["item_kref"]
        routes = {"list (first page)": ("/", ""), "list (page 50)": ("/", "offset=2500"),
                  "list by tag": ("/", "tag=published"), "search": ("/", "q=harbor+lantern+invoice"),
                  "memory page": ("/memory", f"kref={first}")}
        figures = {name: timed_route(browser, route, query, 5) for name, (route, query) in routes.items()}
    rows = [(name, f"{f['p50_ms']} ms p50, {f['max_ms']} ms max (HTTP {f['status']})") for name, f in figures.items()]
    print_table([("memories", args.memories), ("build s", round(build_s, 1))] + rows)
    print("written",
          write_results("browser", {"memories": args.memories}, {"routes": figures, "build_s": round(build_s, 1)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
