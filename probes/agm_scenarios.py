"""Probe: the 49 AGM compliance scenarios with the store deciding, on every backend we have.

Usage: python probes/agm_scenarios.py [--backends embedded,file,kumiho] [--json]

The scenarios (tests/data/agm_scenarios.txt) follow the published Kumiho AGM compliance evaluation: seven
postulates in five categories, each a few beliefs, edges, operations and checks. Here every belief is filed as
a user would file it with this library: ``remember("The value of <key> is <value>", stack=True)`` in the
scenario's own space (no key, no item: the store decides whether it is a new belief), a revision is
``revise(<item kref>, "The value of <key> is <new value>")``, a contraction ``deprecate(<item kref>)`` and a
restore ``deprecate(<item kref>, False)``. A check reads the item's current revision (its statement's value),
its revision count (``history``), the space's item count (``items``), its deprecated flag and its edges.

Four ways of writing are run: ``text`` (the statement alone), ``titled`` (also ``title="<key> = <value>"``
and metadata ``belief_key``/``belief_value``, as the published suite's adapter writes its revisions; the value
is then read from the metadata), ``setting`` (the statement written ``<key> = <value>``) and ``spaced`` (the
key's underscores written as spaces, "The value of user name is alice"). Backends:
``embedded`` (in memory), ``file`` (a SQLite file store, reopened before the checks) and ``kumiho`` (the
real ``kumiho`` SDK over loopback gRPC to tests/kumiho_standin.py; skipped with the reason when the SDK is
not installed).

Writes probes/results/agm_scenarios.json: passed scenarios per backend and way of writing, per postulate, and
every failed check with what was found.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
from typing import Any, Callable

from _common import ROOT, km, print_table, write_results

SCENARIOS_FILE = os.path.join(ROOT, "tests", "data", "agm_scenarios.txt")
POSTULATES = {"k2": "K*2 success", "k3": "K*3 inclusion", "k4": "K*4 vacuity", "k5": "K*5 consistency",
              "k6": "K*6 extensionality", "rel": "relevance", "cr": "core-retainment"}
WAYS = ("text", "titled", "setting", "spaced")
STATEMENT = re.compile(r"The value of (\S+) is (.*)", re.S)
SETTING = re.compile(r"(\S+) = (.*)", re.S)
SPACED = re.compile(r"The value of (.+?) is (.*)", re.S)


def load_scenarios(path: str = SCENARIOS_FILE) -> list[dict[str, Any]]:
    """The scenario lines as ``{id, postulate, category, beliefs, edges, operations, checks}``."""
    def listed(field: str) -> list[str]:
        return [part.strip() for part in field.split(";") if part.strip()]
    scenarios = []
    with open(path, encoding="utf-8") as stream:
        for line in stream:
            if not line.strip() or line.startswith("#"):
                continue
            name, beliefs, edges, operations, checks = (part.strip() for part in line.split("|"))
            prefix, category = name.split("_")[0], name.split("_")[1]
            scenarios.append({"id": name, "postulate": POSTULATES[prefix], "category": category,
                              "beliefs": [tuple(pair.split("=", 1)) for pair in listed(beliefs)],
                              "edges": listed(edges), "operations": listed(operations), "checks": listed(checks)})
    return scenarios


def statement(key: str, value: str, way: str = "text") -> str:
    """How a belief is written: ``The value of <key> is <value>``, ``<key> = <value>`` (way ``setting``), or
    the first with the key's underscores written as spaces (way ``spaced``: "The value of user name is alice")."""
    if way == "setting":
        return f"{key} = {value}"
    return f"The value of {key.replace('_', ' ') if way == 'spaced' else key} is {value}"


def run_scenario(memory: km.Memory, scenario: dict[str, Any], way: str,
                 reopen: Callable[[km.Memory], km.Memory] | None = None) -> tuple[km.Memory, dict[str, Any]]:
    """Run one scenario in its own space; returns (the memory, possibly reopened, and
    ``{passed, failures, notes}``): a failure names the check and what was found, a note an outcome that was
    not the expected one (a revise that did not revise, a new belief stacked onto another)."""
    space = "agm/" + scenario["id"].replace("_", "-")
    items: dict[str, str] = {}
    notes: list[str] = []

    def options(key: str, value: str) -> dict[str, Any]:
        if way == "titled":
            return {"title": f"{key} = {value}", "metadata": {"belief_key": key, "belief_value": value}}
        return {}

    def file(key: str, value: str) -> None:
        kref = memory.remember(statement(key, value, way), space=space, stack=True, **options(key, value))
        item = str(km.Kref.parse(kref).item_kref())
        if item in items.values():
            notes.append(f"{key} was filed onto the item of {[k for k, v in items.items() if v == item]}")
        items[key] = item

    def revise(key: str, value: str) -> None:
        outcome = memory.revise(items[key], statement(key, value, way), **options(key, value))
        if outcome["outcome"] != "revised" or str(km.Kref.parse(outcome["kref"]).item_kref()) != items[key]:
            notes.append(f"revise {key}={value}: {outcome['outcome']} ({outcome.get('reason', '')})")

    for key, value in scenario["beliefs"]:
        file(key, value)
    for edge in scenario["edges"]:
        ends, edge_type = edge.split(":")
        source, target = ends.split(">")
        memory.link(items[source], items[target], edge_type)
    for operation in scenario["operations"]:
        verb, rest = operation.split(" ", 1)
        if verb in ("revise", "expand"):
            key, value = rest.split("=", 1)
            (revise if verb == "revise" else file)(key, value)
        else:
            memory.deprecate(items[rest], verb == "contract")
    if reopen is not None:
        memory = reopen(memory)

    def value(key: str) -> str:
        held = memory.get(items[key])
        if way == "titled" and "belief_value" in held["metadata"]:
            return held["metadata"]["belief_value"]
        said = {"setting": SETTING, "spaced": SPACED}.get(way, STATEMENT).fullmatch(held["content"])
        return said.group(2) if said else held["content"]

    failures = []
    for check in scenario["checks"]:
        verb, rest = check.split(" ", 1)
        if verb in ("value", "not"):
            key, expected = rest.split("=", 1)
            found: Any = value(key)
            passed = (found == expected) if verb == "value" else (found != expected)
        elif verb == "revs":
            key, expected = rest.split("=", 1)
            found = len(memory.history(items[key]))
            passed = found == int(expected)
        elif verb == "items":
            found = len(memory.items(space=space, include_deprecated=True))
            passed = found == int(rest)
        elif verb in ("active", "deprecated"):
            found = "deprecated" if memory.get(items[rest])["deprecated"] else "active"
            passed = found == verb
        elif verb == "edge":
            key = rest.split(":")[0]
            found = [edge["edge_type"] for edge in memory.edges(memory.get(items[key])["kref"])]
            passed = bool(found)
        elif verb == "noedge":
            (source, target), _ = rest.split(":")[0].split(">"), rest.split(":")[1]
            found = [edge["target_kref"] for edge in memory.edges(memory.get(items[source])["kref"],
                                                                  direction="outgoing")]
            passed = not any(kref.startswith(items[target] + "?") or kref == items[target] for kref in found)
        else:
            raise ValueError(f"unknown check {check!r} in {scenario['id']}")
        if not passed:
            failures.append(f"{check} (found {found!r})")
    return memory, {"passed": not failures, "failures": failures, "notes": notes}


def run_backend(backend: str, scenarios: list[dict[str, Any]], way: str) -> dict[str, Any]:
    """Every scenario on one backend, one way of writing: ``{passed, total, by_postulate, failed}``."""
    results: dict[str, dict[str, Any]] = {}
    if backend == "kumiho":
        sys.path.insert(0, os.path.join(ROOT, "tests"))
        from kumiho_standin import StandIn     # needs the kumiho SDK (and grpc)
        server = StandIn(token="agm-token")
        server.start()
        try:
            memory = km.Memory(backend=km.KumihoBackend(server.address, token="agm-token", retries=0))
            for scenario in scenarios:
                memory, results[scenario["id"]] = run_scenario(memory, scenario, way)
            memory.close()
        finally:
            server.stop()
    elif backend == "file":
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "agm.db")

            def reopen(memory: km.Memory) -> km.Memory:
                memory.close()
                return km.Memory(path)
            memory = km.Memory(path)
            for scenario in scenarios:
                memory, results[scenario["id"]] = run_scenario(memory, scenario, way, reopen)
            memory.close()
    else:
        memory = km.Memory()
        for scenario in scenarios:
            memory, results[scenario["id"]] = run_scenario(memory, scenario, way)
        memory.close()
    by_postulate: dict[str, list[int]] = {}
    for scenario in scenarios:
        tally = by_postulate.setdefault(scenario["postulate"], [0, 0])
        tally[0] += results[scenario["id"]]["passed"]
        tally[1] += 1
    return {"passed": sum(result["passed"] for result in results.values()), "total": len(scenarios),
            "by_postulate": {name: f"{passed}/{total}" for name, (passed, total) in by_postulate.items()},
            "failed": {name: result for name, result in results.items() if not result["passed"]},
            "notes": {name: result["notes"] for name, result in results.items() if result["notes"]}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", default="embedded,file,kumiho",
                        help="comma-separated: embedded, file, kumiho (default all)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    backends = [name.strip() for name in args.backends.split(",") if name.strip()]
    unknown = set(backends) - {"embedded", "file", "kumiho"}
    if unknown:
        parser.error(f"unknown backend(s): {', '.join(sorted(unknown))}")
    scenarios = load_scenarios()
    figures: dict[str, Any] = {"scenarios": len(scenarios)}
    for backend in backends:
        for way in WAYS:
            try:
                figures[f"{backend}/{way}"] = run_backend(backend, scenarios, way)
            except ImportError as exc:
                figures[f"{backend}/{way}"] = {"skipped": f"{exc}: pip install 'kumiho>=0.14,<0.15'"}
            print(f"{backend}/{way}: {figures[f'{backend}/{way}'].get('passed', 'skipped')}", file=sys.stderr)
    path = write_results("agm_scenarios", vars(args), figures)
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        rows = []
        for name, result in figures.items():
            if name == "scenarios":
                continue
            if "skipped" in result:
                rows.append((name, f"skipped: {result['skipped']}"))
                continue
            tallies = "  ".join(f"{postulate} {tally}" for postulate, tally in result["by_postulate"].items())
            rows.append((name, f"{result['passed']}/{result['total']}  {tallies}"))
            for failed, detail in result["failed"].items():
                rows.append(("  failed " + failed, "; ".join(detail["failures"] + detail["notes"])))
        print_table(rows)
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
