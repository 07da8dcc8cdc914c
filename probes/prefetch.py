"""Probe: anticipatory recall -- is the next agent's context ready before it asks, and never stale?

Usage: python probes/prefetch.py [--sessions 60] [--changed-sessions 50] [--warmup 15] [--latency-ms 25]
                                 [--work-ms 150] [--noise 0.1] [--memories-per-space 30]
                                 [--half-life-days 3] [--session-hours 6] [--revise-rate 0.3] [--seed 7]
                                 [--spare-probability P]

A simulated multi-agent pipeline over a store with eight topic spaces. Each session (one pipeline run) walks
a workflow: a planner, a coder, a reviewer and a releaser each engage memory once, with a query chosen
from two or three templates of the space the workflow sends them to. The workflow branches (e.g. the
coder reads ``architecture`` 80% of the time, ``api`` 20%), and with probability --noise a step goes to a
random space instead. Between steps the agent "works" for --work-ms (real sleeping: that is when the
background preparation runs). Sessions are --session-hours apart on a manual clock.

Recall cost: the store is the embedded SQLite engine with --latency-ms added to every search (a remote
backend's round trip); the prefetcher's own searches pay it too, on its thread. The change token (what
tells the prefetcher another process wrote) is read locally, as the embedded store does.

Phases: --sessions sessions of workflow A (the first --warmup are not scored), then --changed-sessions of
workflow B (the coder now goes to ``api`` first, the reviewer to ``tests``). During phase B, with probability
--revise-rate per session, a memory of the space the next step most likely reads is revised mid-session
(while its context may be prepared); every result served prepared is then compared with a fresh recall.

Figures:

  hit rate                 scored steps after a session's first step served prepared; also on the steps
                           whose predicted next state had p >= 0.6 (the issue's target: >= 0.7)
  blocking retrieval ms    time inside engage per handoff, with prefetching and without (the same sessions
                           replayed on a store without it); reduction (target >= 70%), overall and on
                           the steps whose predicted next state had p >= 0.6
  tokens per handoff       the context engage returned, against dumping the whole store into the prompt
  recovery                 hit rate in windows of 10 sessions after the workflow changes, and sessions
                           until it is back at >= 0.7
  stale served             prepared results that differed from a fresh recall (target 0)

The probe reports; it asserts nothing. Writes probes/results/prefetch.json.
"""

from __future__ import annotations

import argparse
import random
import time

from _common import km, print_table, write_results

SPACES = {
    "specs": ("requirement", "acceptance criteria", "user story", "scope", "stakeholder", "deadline"),
    "incidents": ("outage", "postmortem", "pager alert", "root cause", "rollback", "severity"),
    "architecture": ("service boundary", "message queue", "database schema", "cache layer", "event bus", "shard"),
    "api": ("endpoint", "request payload", "status code", "pagination", "rate limit", "versioning"),
    "code-style": ("naming convention", "type hints", "docstring", "formatter", "import order", "linter rule"),
    "tests": ("unit test", "fixture", "integration test", "coverage", "flaky test", "mock server"),
    "review": ("review checklist", "approval", "changelog entry", "reviewer comment", "nitpick", "sign-off"),
    "deploy": ("release train", "canary", "feature flag", "deployment window", "helm chart", "rollout"),
}
QUERIES = {
    "specs": ["requirement acceptance criteria for the user story", "scope and deadline of the feature",
              "stakeholder requirement notes"],
    "incidents": ["postmortem root cause of the outage", "pager alert severity and rollback"],
    "architecture": ["service boundary and message queue design", "database schema and cache layer",
                     "event bus shard layout"],
    "api": ["endpoint request payload and status code", "pagination and rate limit rules", "api versioning"],
    "code-style": ["naming convention and type hints", "docstring formatter and linter rule"],
    "tests": ["unit test fixture setup", "integration test coverage and flaky test", "mock server for tests"],
    "review": ["review checklist and approval", "changelog entry and reviewer comment sign-off"],
    "deploy": ["release train canary rollout", "feature flag deployment window", "helm chart rollout"],
}
# role -> {previous space (None = session start): [(next space, probability)]}
WORKFLOW_A = [
    ("planner", {None: [("specs", 0.85), ("incidents", 0.15)]}),
    ("coder", {"specs": [("architecture", 0.8), ("api", 0.2)], "incidents": [("architecture", 1.0)]}),
    ("reviewer", {"architecture": [("review", 0.85), ("code-style", 0.15)], "api": [("review", 1.0)]}),
    ("releaser", {"review": [("deploy", 0.9), ("tests", 0.1)], "code-style": [("deploy", 1.0)]}),
]
WORKFLOW_B = [
    ("planner", {None: [("specs", 0.85), ("incidents", 0.15)]}),
    ("coder", {"specs": [("api", 0.85), ("architecture", 0.15)], "incidents": [("api", 1.0)]}),
    ("reviewer", {"api": [("tests", 0.85), ("review", 0.15)], "architecture": [("tests", 1.0)]}),
    ("releaser", {"tests": [("deploy", 0.9), ("review", 0.1)], "review": [("deploy", 1.0)]}),
]


class RemoteLikeGraph(km.SQLiteGraph):
    """The embedded engine with a round trip's latency added to every search."""

    def __init__(self, latency_seconds: float, **options) -> None:
        super().__init__(**options)
        self.latency_seconds = latency_seconds

    def search(self, query):
        time.sleep(self.latency_seconds)
        return super().search(query)


def fill(memory: km.Memory, per_space: int, rng: random.Random) -> dict[str, list[str]]:
    krefs: dict[str, list[str]] = {}
    for space, words in SPACES.items():
        for number in range(per_space):
            picked = rng.sample(words, 3)
            text = f"Note {number} on {picked[0]}: keep the {picked[1]} aligned with the {picked[2]} ({space})."
            krefs.setdefault(space, []).append(memory.remember(text, space=space))
    return krefs


def plan_session(workflow, noise: float, rng: random.Random) -> list[tuple[str, str, str]]:
    """The steps of one session: [(role, space, query)]."""
    steps, previous = [], None
    for role, branches in workflow:
        choices = branches.get(previous) or [(rng.choice(list(SPACES)), 1.0)]
        space = rng.choices([s for s, _ in choices], weights=[p for _, p in choices])[0]
        if rng.random() < noise:
            space = rng.choice(list(SPACES))
        steps.append((role, space, rng.choice(QUERIES[space])))
        previous = space
    return steps


def likely_next(workflow, step_index: int, space: str) -> str | None:
    if step_index + 1 >= len(workflow):
        return None
    choices = workflow[step_index + 1][1].get(space)
    return max(choices, key=lambda pair: pair[1])[0] if choices else None


def run(args: argparse.Namespace) -> dict:
    rng = random.Random(args.seed)
    sessions = [(WORKFLOW_A, plan_session(WORKFLOW_A, args.noise, rng)) for _ in range(args.sessions)]
    sessions += [(WORKFLOW_B, plan_session(WORKFLOW_B, args.noise, rng)) for _ in range(args.changed_sessions)]
    revise_draws = [rng.random() < args.revise_rate for _ in sessions]
    latency = args.latency_ms / 1000.0
    config = km.PrefetchConfig(half_life_days=args.half_life_days, spare_probability=args.spare_probability)

    def open_memory(prefetch):
        clock = km.ManualClock("2026-01-01T00:00:00Z")
        memory = km.Memory(backend=RemoteLikeGraph(0.0, clock=clock), clock=clock, ids=km.SequentialIds(),
                           prefetch=prefetch)
        krefs = fill(memory, args.memories_per_space, random.Random(args.seed))
        memory.backend.latency_seconds = latency
        return memory, clock, krefs

    memory, clock, krefs = open_memory(config)
    dump_tokens = sum(len(item["content"]) // 4 + 1 for space in krefs.values() for item in map(memory.get, space))
    records, stale, revisions = [], 0, 0
    revise_rng = random.Random(args.seed + 1)
    for number, (workflow, steps) in enumerate(sessions):
        session = f"run-{number}"
        for index, (role, space, query) in enumerate(steps):
            start = time.perf_counter()
            result = memory.engage(query, session_id=session, agent=role)
            blocking = (time.perf_counter() - start) * 1000.0
            top_p = result["predictions"][0]["p"] if result["predictions"] else 0.0
            records.append({"session": number, "step": index, "space": space, "blocking_ms": blocking,
                            "hit": result["context_was_prefetched"], "tokens": result["approx_tokens"],
                            "predicted_top_p": top_p})
            if index:
                records[-1]["previous_top_p"] = records[-2]["predicted_top_p"]
            if result["context_was_prefetched"]:
                memory.backend.latency_seconds = 0.0
                fresh = memory.engage(query)
                memory.backend.latency_seconds = latency
                if fresh["context"] != result["context"] or fresh["source_krefs"] != result["source_krefs"]:
                    stale += 1
            if index == 0 and revise_draws[number] and workflow is WORKFLOW_B:
                target_space = likely_next(workflow, index, space) or space
                target = revise_rng.choice(krefs[target_space])
                item = memory.get(target)["item_kref"]
                memory.remember(f"Revised in session {number}: {memory.get(item)['content']}", item=item)
                revisions += 1
            time.sleep(args.work_ms / 1000.0)
        memory.end_session(session)
        clock.advance(hours=args.session_hours)
    stats = memory.prefetch_stats()
    memory.close()

    # the same sessions on a store without prefetching: blocking time is the recall itself
    plain, plain_clock, _ = open_memory(None)
    baseline = []
    for number, (_, steps) in enumerate(sessions[args.warmup:], args.warmup):
        for role, space, query in steps[1:]:
            start = time.perf_counter()
            plain.engage(query, session_id=f"run-{number}", agent=role)
            baseline.append((time.perf_counter() - start) * 1000.0)
        plain_clock.advance(hours=args.session_hours)
    plain.close()

    scored = [r for r in records if r["step"] > 0 and r["session"] >= args.warmup]
    phase_a = [r for r in scored if r["session"] < args.sessions]
    confident = [r for r in phase_a if r.get("previous_top_p", 0.0) >= 0.6]

    def rate(rows):
        return round(sum(r["hit"] for r in rows) / len(rows), 3) if rows else None

    windows, recovered_after = [], None
    for start in range(args.sessions, args.sessions + args.changed_sessions, 10):
        rows = [r for r in scored if start <= r["session"] < start + 10]
        windows.append(rate(rows))
        if recovered_after is None and rows and rate(rows) >= 0.7:
            recovered_after = start - args.sessions + 10
    with_prefetch = sum(r["blocking_ms"] for r in scored) / len(scored)
    without = sum(baseline) / len(baseline)
    return {
        "hit_rate": rate(scored), "hit_rate_workflow_a": rate(phase_a),
        "hit_rate_when_predicted_p_ge_0_6": rate(confident), "confident_steps": len(confident),
        "scored_steps": len(scored),
        "blocking_ms_per_handoff_with_prefetch": round(with_prefetch, 2),
        "blocking_ms_per_handoff_without": round(without, 2),
        "blocking_reduction": round(1 - with_prefetch / without, 3),
        "blocking_reduction_when_predicted_p_ge_0_6": round(
            1 - sum(r["blocking_ms"] for r in confident) / len(confident) / without, 3) if confident else None,
        "tokens_per_handoff": round(sum(r["tokens"] for r in scored) / len(scored), 1),
        "tokens_dump_everything": dump_tokens,
        "hit_rate_windows_after_change": windows, "sessions_to_recover_0_7": recovered_after,
        "revisions_mid_session": revisions, "stale_served": stale,
        "prefetch_stats": {k: v for k, v in stats.items() if k != "last_error"},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=60)
    parser.add_argument("--changed-sessions", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=15)
    parser.add_argument("--latency-ms", type=float, default=25.0)
    parser.add_argument("--work-ms", type=float, default=150.0)
    parser.add_argument("--noise", type=float, default=0.1)
    parser.add_argument("--memories-per-space", type=int, default=30)
    parser.add_argument("--half-life-days", type=float, default=3.0)
    parser.add_argument("--session-hours", type=float, default=6.0)
    parser.add_argument("--revise-rate", type=float, default=0.3)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--spare-probability", type=float, default=None,
                        help="also prepare branches down to this probability (writes prefetch_spare.json)")
    args = parser.parse_args()
    started = time.perf_counter()
    figures = run(args)
    figures["probe_seconds"] = round(time.perf_counter() - started, 1)
    print_table([(name, value) for name, value in figures.items() if name != "prefetch_stats"])
    name = "prefetch" if args.spare_probability is None else "prefetch_spare"
    print("wrote", write_results(name, vars(args), figures))


if __name__ == "__main__":
    main()
