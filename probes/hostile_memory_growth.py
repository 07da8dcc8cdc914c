"""Memory use over many recalls (issue 15): N recalls (default 100,000) on a store of M memories, with the
traced Python memory (tracemalloc) and the RSS sampled every 10,000 calls. A store that does not leak stays
flat after the first samples. Prints one JSON object; writes nothing to probes/results.

    python probes/hostile_memory_growth.py [--recalls 100000] [--memories 5000] [--file PATH] [--no-trace]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
import tracemalloc

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import kumiho_memory as km  # noqa: E402

QUERIES = ["dark mode", "what did Ann say about Lisbon", "3 days ago", "in May 2023", "last week", "billing roadmap",
           "ferry 07:30", "who is the CEO", "yesterday's meeting", "invoice rounding", "3000 years ago"]


def rss_kb() -> int:
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--recalls", type=int, default=100_000)
    parser.add_argument("--memories", type=int, default=5_000)
    parser.add_argument("--file", help="use a file store here (default: a temporary file)")
    parser.add_argument("--no-trace", action="store_true", help="RSS only (tracemalloc slows recall down)")
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="kumiho-growth-")
    path = args.file or os.path.join(folder, "growth.db")
    memory = km.Memory(path)
    for index in range(args.memories):
        memory.remember(f"Memory {index}: {QUERIES[index % len(QUERIES)]} note {index % 97} in space {index % 7}",
                        space=f"s{index % 7}", metadata={"speaker": ["ann", "bob", "cy"][index % 3],
                                                          "event_date": f"2023-05-{1 + index % 28:02d}"})
    for query in QUERIES:
        memory.recall(query, limit=10)
    if not args.no_trace:
        tracemalloc.start()
    samples, started = [], time.monotonic()
    for call in range(args.recalls):
        query = f"{QUERIES[call % len(QUERIES)]} {call % 50}"
        try:
            memory.recall(query, limit=10, where={"speaker": "ann"} if call % 2 else None)
        except km.KumihoMemoryError:
            pass
        except (ValueError, OverflowError):            # issue 15 item 5, before the fix
            pass
        if call % 10_000 == 0 or call == args.recalls - 1:
            traced = tracemalloc.get_traced_memory()[0] if not args.no_trace else None
            samples.append({"calls": call + 1, "traced_bytes": traced, "rss_kb": rss_kb(),
                            "seconds": round(time.monotonic() - started, 1)})
    memory.close()
    first, last = samples[1] if len(samples) > 1 else samples[0], samples[-1]
    growth = None if first["traced_bytes"] is None else last["traced_bytes"] - first["traced_bytes"]
    print(json.dumps({"recalls": args.recalls, "memories": args.memories, "samples": samples,
                      "traced_growth_after_first_sample": growth,
                      "rss_growth_kb_after_first_sample": last["rss_kb"] - first["rss_kb"]}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
