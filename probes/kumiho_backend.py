"""Probe: per-operation latency (remember, get, recall, tag, link) on the embedded store and on the Kumiho
backend over loopback gRPC, side by side.

Usage: python probes/kumiho_backend.py [--memories N] [--queries Q]

The Kumiho side talks through the real ``kumiho`` SDK to the stand-in server of tests/kumiho_standin.py on
127.0.0.1 (an in-process gRPC server holding everything in memory), so its figures are the client's cost plus
gRPC on loopback: a lower bound for a real server, which adds Neo4j and the network. Needs the SDK
(``pip install 'kumiho>=0.14,<0.15'``). Writes probes/results/kumiho_backend.json.
"""

from __future__ import annotations

import argparse
import os
import random
import sys

from _common import ROOT, km, percentile, print_table, timed, write_results

sys.path.insert(0, os.path.join(ROOT, "tests"))

WORDS = ("tea coffee mode dark light editor trip paris berlin meeting budget deadline python rust garden "
         "dog cat piano guitar novel painting marathon recipe pasta bread camera hiking beach museum "
         "project launch review design memory graph agent session user prefers likes visited planned").split()


def sentence(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 18)))


def measure(memory: km.Memory, memories: int, queries: int, seed: int) -> dict:
    rng = random.Random(seed)
    figures: dict[str, list[float]] = {"remember": [], "get": [], "recall": [], "tag": [], "link": []}
    krefs = []
    for index in range(memories):
        kref, elapsed = timed(memory.remember, sentence(rng), space=f"space{index % 5}")
        figures["remember"].append(elapsed)
        krefs.append(kref)
    for index in range(queries):
        figures["get"].append(timed(memory.get, rng.choice(krefs))[1])
        figures["recall"].append(timed(memory.recall, " ".join(rng.sample(WORDS, 3)), limit=10)[1])
        figures["tag"].append(timed(memory.tag, rng.choice(krefs), f"probe{index % 4}")[1])
        source, target = rng.sample(krefs, 2)
        figures["link"].append(timed(memory.link, source, target, "RELATED_TO")[1])
    return {operation: {"p50_ms": round(percentile(values, 0.5), 3), "p99_ms": round(percentile(values, 0.99), 3),
                        "count": len(values)} for operation, values in figures.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=300)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    try:
        from kumiho_standin import StandIn
    except ImportError:
        print("the kumiho SDK is not installed: pip install 'kumiho>=0.14,<0.15'")
        return 1
    embedded = km.Memory(ids=km.SequentialIds())
    results = {"embedded": measure(embedded, args.memories, args.queries, args.seed)}
    embedded.close()
    server = StandIn(token="probe-token")
    server.start()
    try:
        memory = km.Memory(backend=km.KumihoBackend(server.address, token="probe-token", retries=0),
                           ids=km.SequentialIds())
        results["kumiho_loopback"] = measure(memory, args.memories, args.queries, args.seed)
        rpc_calls = dict(sorted(server.servicer.calls.items()))
        memory.close()
    finally:
        server.stop()
    rows = []
    for operation in results["embedded"]:
        local, remote = results["embedded"][operation], results["kumiho_loopback"][operation]
        rows.append((operation, f"embedded p50 {local['p50_ms']:8.3f} ms   kumiho p50 {remote['p50_ms']:8.3f} ms   "
                                f"(p99 {local['p99_ms']:.3f} / {remote['p99_ms']:.3f})"))
    print_table(rows)
    path = write_results("kumiho_backend", vars(args), {**results, "server_calls": rpc_calls})
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
