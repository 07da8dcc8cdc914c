"""Probe: how fast the embedded store writes, reads, recalls and forgets, in memory and on disk.

Usage: python probes/store_basics.py [--memories N] [--queries Q]

Writes probes/results/store_basics.json. Each write on disk is one durable transaction (WAL, synchronous=FULL).
"""

from __future__ import annotations

import argparse
import os
import random
import tempfile

from _common import km, percentile, print_table, timed, write_results

WORDS = ("tea coffee mode dark light editor trip paris berlin meeting budget deadline python rust garden "
         "dog cat piano guitar novel painting marathon recipe pasta bread camera hiking beach museum "
         "project launch review design memory graph agent session user prefers likes visited planned").split()


def sentence(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 18)))


def measure(memory: km.Memory, memories: int, queries: int, seed: int) -> dict:
    rng = random.Random(seed)
    write_ms, krefs = [], []
    for index in range(memories):
        key = f"key-{index % 50}" if index % 10 == 0 else None
        kref, elapsed = timed(memory.remember, sentence(rng), space=f"space{index % 7}", key=key)
        write_ms.append(elapsed)
        krefs.append(kref)
    get_ms = [timed(memory.get, rng.choice(krefs))[1] for _ in range(queries)]
    recall_ms = [timed(memory.recall, " ".join(rng.sample(WORDS, 3)), limit=10)[1] for _ in range(queries)]
    forget_ms = [timed(memory.forget, krefs.pop(rng.randrange(len(krefs))).split("?")[0])[1]
                 for _ in range(min(20, len(krefs)))]
    return {
        "writes_per_second": round(1000.0 * len(write_ms) / sum(write_ms), 1),
        "write_p50_ms": round(percentile(write_ms, 0.5), 3), "write_p99_ms": round(percentile(write_ms, 0.99), 3),
        "get_p50_ms": round(percentile(get_ms, 0.5), 3),
        "recall_p50_ms": round(percentile(recall_ms, 0.5), 3),
        "recall_p95_ms": round(percentile(recall_ms, 0.95), 3),
        "forget_p50_ms": round(percentile(forget_ms, 0.5), 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=5000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    figures = {}
    with km.Memory(ids=km.SequentialIds()) as memory:
        figures["in_memory"] = measure(memory, args.memories, args.queries, args.seed)
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "probe.db")
        with km.Memory(path, ids=km.SequentialIds()) as memory:
            figures["on_disk"] = measure(memory, args.memories, args.queries, args.seed)
        figures["on_disk"]["file_bytes"] = os.path.getsize(path)
    rows = [(f"{where} {name}", value) for where, values in figures.items() for name, value in values.items()]
    print_table(rows)
    print("wrote", write_results("store_basics", vars(args), figures))


if __name__ == "__main__":
    main()
