"""Probe: belief updates -- do corrections stick, do look-alikes stay apart, can it say what it believed at T?

Usage: python probes/belief_updates.py [--people 200] [--attributes 4] [--max-corrections 3]
                                       [--rephrase-rate 0.4] [--samples 400] [--limit 5] [--seed 7]
                                       [--names full|first] [--disk] [--phrasings design|heldout]

Writes probes/results/belief_updates.json. The stream is deterministic from --seed: --people people (a first
and a last name drawn from two pools, so first names repeat across people as they do in life), each with
--attributes of seven attributes (city, employer, favorite color, favorite food, favorite sport, dog's name,
car). Every (person, attribute) belief is stated once, then corrected 1..--max-corrections times to a new
value, and with probability --rephrase-rate after each statement restated in other words with the same
value (a rephrasing, not a correction). Every statement picks one of several phrasings at random, first
statements and corrections alike ("Alice Moreau works at Globex", "Actually, Alice Moreau now works at
Initech", "Update: Alice Moreau's employer is Initech", "Alice Moreau joined Initech"). The beliefs'
statements are interleaved at random, one a minute on a manual clock, so a belief's first statement is a
look-alike of what is already stored: the same person's other attributes, and the same attribute (often the
same value) of other people.

The same stream is written twice, into fresh stores, in the two modes of issue 5:

  keyed   remember(text, space="facts", key=f"{person}.{attribute}")
  stack   remember(text, space="facts", stack=True)       (no key: the module decides what each revises)

Figures, per mode:

  stale rate          share of beliefs where recall(question, limit=--limit) ranks a memory holding a
                      superseded value of that belief above the current value's memory, or returns a
                      superseded value without the current one. The question is a natural one ("Where does
                      Alice Moreau live?", "What is Alice Moreau's favorite color?"). Also reported: stale
                      in top-k (a superseded value anywhere in the results), current missing (the current
                      value not in the results: a retrieval miss, stale or not) and current top-1.
  unrelated stacks    share of first statements (a new belief, a look-alike of stored ones) that landed on
                      an item already holding another belief; broken down by the kind of look-alike stored
                      before it (same person / other attribute, same attribute and value / other person).
  mis-stacked         corrections and rephrasings that landed on another belief's item.
  missed revisions    corrections that created a new item instead of revising their belief's item.
  point-in-time       for --samples random (belief, instant T after its first statement): the best-ranked
                      memory of that belief in recall(question, as_of=T) holds the value true at T (misses
                      split into "wrong value" and "not found": no memory of that belief in the results);
                      and (second figure) get(item + "?t=latest&time=T") on the item the belief was first
                      stored in holds it.

Targets (issue 5): stale 0%, unrelated stacks 0%, point-in-time 100%. The probe reports; it asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import tempfile
import time

from _common import km, percentile, print_table, timed, write_results

FIRST_NAMES = ("Alice Bob Carol Dave Erin Frank Grace Heidi Ivan Judy Karl Laura Mallory Nina Oscar Peggy "
               "Quentin Rita Sam Trent Uma Victor Wendy Xavier Yara Zoe Liam Maya Noah Olga").split()
LAST_NAMES = ("Moreau Chen Okafor Silva Novak Larsen Haddad Kowalski Tanaka Rossi Byrne Schmidt Dubois "
              "Petrov Nguyen Alvarez Fischer Kaur Jensen Costa Ibrahim Weber Murphy Sato Varga").split()

# value pools are disjoint across attributes, so a text's value names one attribute
ATTRIBUTES = {
    "city": {
        "values": ("Paris Lyon London Leeds Berlin Munich Madrid Lisbon Rome Milan Vienna Prague Warsaw Oslo "
                   "Dublin Zurich Tokyo Osaka Toronto Chicago Boston Denver Austin Seattle Sydney Auckland "
                   "Nairobi Lagos Cairo Mumbai").split(),
        "state": ["{x} lives in {v}", "{x} is based in {v}", "{x}'s home is in {v}", "{x} lives in {v} now",
                  "{x} has an apartment in {v}"],
        "correct": ["{x} moved to {v}", "Actually, {x} now lives in {v}", "Update: {x} lives in {v} now",
                    "{x} relocated to {v} last month", "{x} doesn't live there anymore, they moved to {v}"],
        "ask": ["Where does {x} live?", "Which city does {x} live in?"],
    },
    "employer": {
        "values": ["Globex", "Initech", "Umbrella Corp", "Hooli", "Acme", "Stark Industries", "Wayne Enterprises",
                   "Cyberdyne", "Soylent", "Wonka Industries", "Tyrell Corp", "Aperture Labs", "Massive Dynamic",
                   "Pied Piper", "Vandelay Industries", "Dunder Mifflin", "Oscorp", "Gringotts", "Monarch Labs",
                   "Nakatomi Trading"],
        "state": ["{x} works at {v}", "{x} is employed by {v}", "{x}'s employer is {v}", "{x} has a job at {v}",
                  "{x} works for {v}"],
        "correct": ["Actually, {x} now works at {v}", "{x} joined {v}", "Update: {x}'s employer is {v}",
                    "{x} switched jobs and is at {v} now", "{x} left that job and started at {v}"],
        "ask": ["Where does {x} work?", "Who is {x}'s employer?"],
    },
    "color": {
        "values": "blue green red purple yellow orange teal black white pink turquoise maroon".split(),
        "state": ["{x}'s favorite color is {v}", "{x} loves the color {v}", "{x}'s favourite colour is {v}",
                  "{x} likes {v} more than any other color"],
        "correct": ["{x}'s favorite color is {v} now", "Actually, {x} prefers {v} these days",
                    "Correction: {x}'s favourite colour is {v}", "{x} changed their mind, their favorite color is {v}"],
        "ask": ["What is {x}'s favorite color?", "Which color does {x} like best?"],
    },
    "food": {
        "values": ["pasta", "sushi", "tacos", "ramen", "curry", "paella", "pizza", "dumplings", "falafel", "pho",
                   "lasagna", "risotto", "burritos", "pad thai", "moussaka", "goulash"],
        "state": ["{x}'s favorite food is {v}", "{x} loves eating {v}", "{x}'s favourite dish is {v}",
                  "{x} could eat {v} every day"],
        "correct": ["{x}'s favorite food is {v} now", "Actually, {x}'s favorite dish is {v}",
                    "Update: {x} likes {v} best these days", "{x} is obsessed with {v} now"],
        "ask": ["What is {x}'s favorite food?", "What does {x} like to eat most?"],
    },
    "sport": {
        "values": ["tennis", "football", "basketball", "cricket", "rugby", "swimming", "cycling", "climbing",
                   "volleyball", "badminton", "golf", "rowing", "fencing", "judo"],
        "state": ["{x}'s favorite sport is {v}", "{x} loves playing {v}", "{x} is really into {v}",
                  "{x} plays {v} every weekend"],
        "correct": ["{x}'s favorite sport is {v} now", "Actually, {x} gave that up for {v}",
                    "Update: {x} is into {v} these days", "{x} switched to {v}"],
        "ask": ["What is {x}'s favorite sport?", "Which sport does {x} play?"],
    },
    "pet": {
        "values": ["Rex", "Milo", "Biscuit", "Luna", "Pepper", "Rocky", "Daisy", "Bruno", "Coco", "Max", "Ziggy",
                   "Bella", "Oreo", "Nala", "Toby", "Hazel"],
        "state": ["{x} has a dog named {v}", "{x}'s dog is called {v}", "{x}'s dog's name is {v}",
                  "{x} walks their dog {v} every morning"],
        "correct": ["Sorry, {x}'s dog is actually called {v}", "Correction: {x}'s dog's name is {v}",
                    "{x} renamed the dog {v}", "Actually the dog {x} has is named {v}"],
        "ask": ["What is the name of {x}'s dog?", "What is {x}'s dog called?"],
    },
    "car": {
        "values": ["Toyota Corolla", "Honda Civic", "Volvo XC60", "Tesla Model 3", "Ford Focus", "Fiat Panda",
                   "Renault Clio", "Mazda MX-5", "Subaru Outback", "Skoda Octavia", "Kia Niro", "Mini Cooper",
                   "Peugeot 208", "Nissan Leaf"],
        "state": ["{x} drives a {v}", "{x}'s car is a {v}", "{x} owns a {v}", "{x} gets around in a {v}"],
        "correct": ["{x} sold the old car and now drives a {v}", "{x} bought a {v}",
                    "Update: {x}'s car is a {v} now", "Actually, {x} drives a {v} these days"],
        "ask": ["What car does {x} drive?", "What kind of car does {x} have?"],
    },
}


# Phrasings written after the relation registry (kumiho_memory.BELIEF_RELATIONS) was, and never used to tune
# it: --phrasings heldout states and corrects every belief with these instead, to show how the module does on
# wording it was not shaped on.
HELDOUT = {
    "city": {"state": ["{x} resides in {v}", "{x} calls {v} home", "{x} is living in {v}"],
             "correct": ["{x} has since moved to {v}", "{x} packed up and went to live in {v}",
                         "These days {x} lives in {v}", "{x} is now a resident of {v}"]},
    "employer": {"state": ["{x} is on the payroll at {v}", "{x} is an engineer at {v}", "{x} is working at {v}"],
                 "correct": ["{x} was hired by {v}", "{x} took a job with {v}", "{x} now works for {v}",
                             "{x} quit and went to {v}"]},
    "color": {"state": ["{x}'s best-loved colour is {v}", "The color {x} likes most is {v}"],
              "correct": ["{x} says {v} is their favorite color now", "{x}'s new favorite color is {v}",
                          "{x} has gone off it and prefers {v} now"]},
    "food": {"state": ["{x} always orders {v}", "{x}'s favorite meal is {v}"],
             "correct": ["{x}'s new favorite dish is {v}", "These days {x} would pick {v} over anything",
                         "{x} can't get enough of {v} lately"]},
    "sport": {"state": ["{x} spends weekends on {v}", "{x}'s sport is {v}"],
              "correct": ["{x} took up {v} instead", "{x} now spends weekends on {v}",
                          "{x}'s favourite sport these days is {v}"]},
    "pet": {"state": ["{x} owns a dog called {v}", "{x}'s puppy is named {v}"],
            "correct": ["{x}'s dog now answers to {v}", "{x} gave the dog a new name: {v}",
                        "It turns out {x}'s dog is named {v}"]},
    "car": {"state": ["{x} commutes in a {v}", "{x}'s vehicle is a {v}"],
            "correct": ["{x} traded in the car for a {v}", "{x} now drives a {v}", "{x} upgraded to a {v}"]},
}


# A first-person chat stream (issue 16): a user's messages (metadata speaker=user, user_id=ann), each belief
# stated, then corrected in other words; look-alike controls (other family members' and other people's facts)
# are stated first and must never be revised. FIRST_PERSON_HELDOUT was written once and never tuned on.
# (old statement, correction, question, new value)
FIRST_PERSON = [
    ("I live in Berlin.", "Actually I moved to Munich last month.", "Where do I live?", "Munich"),
    ("I work at Acme as a designer.", "I just started a new job at Globex.", "Where do I work?", "Globex"),
    ("I drive a Honda Civic.", "I sold the Civic and bought a Tesla.", "What car do I drive?", "Tesla"),
    ("I use vim for editing code.", "I switched from vim to VS Code.", "Which editor do I use for code?", "VS Code"),
    ("My daughter is 7 years old.", "My daughter just turned 8.", "How old is my daughter?", "8"),
    ("I prefer dark mode.", "I've gone back to light mode.", "Do I like dark mode or light mode?", "light"),
    ("My favourite band is Radiohead.", "These days my favourite band is Arcade Fire.", "What is my favourite band?",
     "Arcade Fire"),
    ("My phone is an iPhone 12.", "I replaced the iPhone with a Pixel 8.", "What phone do I have?", "Pixel"),
    ("I'm vegetarian.", "I've started eating meat again, so I'm no longer vegetarian.", "Am I vegetarian?", "meat"),
    ("I wake up at 6am.", "These days I get up at 7:30.", "When do I wake up?", "7:30"),
    ("My cat is named Tom.", "My cat is actually called Tommy.", "What is my cat called?", "Tommy"),
    ("I'm planning a trip to Japan in May.", "My trip is now to Korea instead.", "Where is my trip to?", "Korea"),
]
FIRST_PERSON_HELDOUT = [
    ("I'm based in Lisbon.", "I relocated to Porto in the spring.", "Which city am I based in?", "Porto"),
    ("I work for Initech.", "I got hired by Hooli last week.", "Who do I work for?", "Hooli"),
    ("My car is a Ford Focus.", "I traded the Focus in for a Kia Niro.", "What is my car?", "Niro"),
    ("I write code in Emacs.", "I've moved over to Neovim for writing code.", "What do I write code in?", "Neovim"),
    ("My niece is 10 years old.", "My niece turned 11 yesterday.", "How old is my niece?", "11"),  # (was "son":
    # a control already states the son's age, so that pair was a correction of the control, not a look-alike)
    ("I like the light theme.", "I'm using the dark theme now.", "Which theme do I use?", "dark"),
    ("My favorite film is Alien.", "My favourite film these days is Arrival.", "What is my favorite film?", "Arrival"),
    ("My laptop is a ThinkPad.", "I bought a MacBook to replace my laptop.", "What laptop do I use?", "MacBook"),
    ("I'm vegan.", "I'm no longer vegan, I eat fish now.", "Am I vegan?", "fish"),
    ("I go to bed at 11pm.", "My bedtime is midnight these days.", "When do I go to bed?", "midnight"),
    ("My dog is called Rex.", "We renamed our dog Max.", "What is my dog called?", "Max"),
    ("I'm flying to Rome for my vacation.", "My vacation is in Athens instead.", "Where is my vacation?", "Athens"),
]
FIRST_PERSON_CONTROLS = [
    "My son is 12 years old.", "My sister lives in Lisbon.", "My husband works at Initech.",
    "My brother drives a Volvo.", "My mother's favourite band is ABBA.", "My friend uses Emacs for editing code.",
    "Bob lives in Munich.", "My sister's cat is named Tom.",
]
FIRST_PERSON_META = {"speaker": "user", "user_id": "ann"}
# A third set, written from scratch in other words (issue 16, round 2) before any failure was looked at, frozen
# in a test data file and never tuned on: twenty pairs across home, work, role, manager, partner, family ages,
# pets, commute, phone, editor, diet, allergies, schedule, favourites, trips, health, with controls of its own.
FIRST_PERSON_FRESH_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "tests", "data",
                                       "first_person_fresh.json")


# A fourth, thirty pairs and eight controls (issue 16, round 3), written by someone who never read the module,
# its tests or its probes, and never tuned on: the measure of whether the rules carry over to other people's words.
FIRST_PERSON_FRESH2_FILE = os.path.join(os.path.dirname(FIRST_PERSON_FRESH_FILE), "first_person_fresh2.json")

# A fifth, thirty-six pairs and ten controls (issue 16, round 4), written by someone else who never read the
# module, its tests, its probes or the notes, while the rules were tuned on the sets above: never seen by the
# tuner, so the one clean measure of this round.
FIRST_PERSON_FRESH3_FILE = os.path.join(os.path.dirname(FIRST_PERSON_FRESH_FILE), "first_person_fresh3.json")

# Round 5 (issue 16): a training set of a hundred pairs in casual chat, with thirty controls and thirty
# distractors (new facts about the user that share words with a pair's), written blind and tuned on; and a
# sixth held-out set, forty pairs and twelve controls, written blind by someone else and never read by the tuner.
FIRST_PERSON_TRAIN_FILE = os.path.join(os.path.dirname(FIRST_PERSON_FRESH_FILE), "first_person_train.json")
FIRST_PERSON_FRESH4_FILE = os.path.join(os.path.dirname(FIRST_PERSON_FRESH_FILE), "first_person_fresh4.json")
# Round 6 (issue 16): forty-eight pairs, fourteen controls and fourteen distractors, written blind by someone
# who read nothing here, with pairs written apart (two pairs may state two homes), so it runs a pair per store
# (``run_first_person_isolated``); only its totals were read, and they were used once to drop a change.
FIRST_PERSON_FRESH5_FILE = os.path.join(os.path.dirname(FIRST_PERSON_FRESH_FILE), "first_person_fresh5.json")
# fresh6: fifty pairs, fifteen controls and fifteen distractors, written the same way after fresh5's totals had
# been used to drop one change; run once, on the round's final rules.
FIRST_PERSON_FRESH6_FILE = os.path.join(os.path.dirname(FIRST_PERSON_FRESH_FILE), "first_person_fresh6.json")
# fresh7 (round 9): forty pairs, twelve controls and twelve distractors, written by a helper before it read any
# code or set but fresh6's format; a pair per store; only totals read. In that round fresh3 and fresh4's
# failures were looked at to write rules: they are tuned on from then.
FIRST_PERSON_FRESH7_FILE = os.path.join(os.path.dirname(FIRST_PERSON_FRESH_FILE), "first_person_fresh7.json")
# fresh8 (round 11): forty-eight pairs, twelve controls and twelve distractors, written by a helper that read no
# code and no other set (only the format was given); a pair per store; only totals read. (In that round the
# first ten pairs of fresh7 were seen while its format was looked up; nothing was tuned on them.)
FIRST_PERSON_FRESH8_FILE = os.path.join(os.path.dirname(FIRST_PERSON_FRESH_FILE), "first_person_fresh8.json")
# fresh9 (round 14): forty-eight pairs, twelve controls and twelve distractors, written by a helper that read no
# code and no set (only the format was given); a pair per store. Its totals were read after the round's first two
# changes (the correction on the question's topic first, the well-known values), which moved none of them; then
# its failures were read and the "we" for "I" rule was written with them in view: tuned on from then.
FIRST_PERSON_FRESH9_FILE = os.path.join(os.path.dirname(FIRST_PERSON_FRESH_FILE), "first_person_fresh9.json")
# fresh10 (round 14, at its end): forty-eight pairs, twelve controls and twelve distractors, written by a helper
# that read no code and no set; a pair per store; only its totals were read, on the round's final rules and on
# 0.8.2's (25 missed, 2 wrong merges, 20 stale first, 20 current first).
FIRST_PERSON_FRESH10_FILE = os.path.join(os.path.dirname(FIRST_PERSON_FRESH_FILE), "first_person_fresh10.json")
# In 0.8.7 the misses of fresh7-10 and the issue-style sets 3, 5, 6 and 7 were read and tuned on. fresh11 (0.8.7,
# session 18): forty-eight pairs, twelve controls, twelve distractors, written by a helper that read no code and no
# set (only the format was given); a pair per store; only its totals were read, once, on 0.8.6 (28 missed, 3 wrong
# merges, 18 stale first, 25 current first) and on 0.8.7's final rules: the held-out figure.
FIRST_PERSON_FRESH11_FILE = os.path.join(os.path.dirname(FIRST_PERSON_FRESH_FILE), "first_person_fresh11.json")
# fresh12 and fresh13 (0.8.8, session 19): forty-eight pairs, ten controls and six distractors each, written by two
# helpers that read no code and no set. fresh12 was read and tuned on (its wrong merges: a past, a plan or one more
# of a kind revised by what holds now); fresh13 is held out: only its totals were read, on 0.8.7 (21 missed, 6
# wrong merges, 14 stale first, 28 current first) and on 0.8.8's rules.
FIRST_PERSON_FRESH12_FILE = os.path.join(os.path.dirname(FIRST_PERSON_FRESH_FILE), "first_person_fresh12.json")
FIRST_PERSON_FRESH13_FILE = os.path.join(os.path.dirname(FIRST_PERSON_FRESH_FILE), "first_person_fresh13.json")
# fresh14 (0.8.9, session 20): forty-eight pairs, ten controls and six distractors, written blind by a helper who read
# no code or data, after this round's rules were done; held out: only its totals were read, on 0.8.8 and on 0.8.9
# (without a judge: 22 missed, 5 wrong merges, 14 -> 13 stale first, 31 -> 32 current first; with a judge that is
# never wrong: 9 -> 3 missed). fresh13's pairs were seen in this round (a helper's generator file was printed), after
# its rules were written; nothing was tuned on them since.
FIRST_PERSON_FRESH14_FILE = os.path.join(os.path.dirname(FIRST_PERSON_FRESH_FILE), "first_person_fresh14.json")


# Five sets in the issue's own style (session 16), twelve pairs each, written blind by a helper who read no code:
# 1-3 the issue's twelve topics in other words, 4-5 other everyday topics. Sets 1, 2 and 4 were tuned on; 3 and 5
# are held out (only their totals were read), so their pairs are summed, never listed.
FIRST_PERSON_ISSUE_FILES = {number: os.path.join(os.path.dirname(FIRST_PERSON_FRESH_FILE),
                                                 f"first_person_issue{number}.json") for number in range(1, 8)}
# (6 and 7 were written at the end of the session, against the finished rules, and are held out the same way)
FIRST_PERSON_ISSUE_PARTS = (("issue_tuned", (1, 2, 4)), ("issue_blind", (3, 5)), ("issue_final", (6, 7)))
# Look-alikes a hostile reviewer wrote blind (session 16): 80 later messages that share words with an earlier one
# and sound like a change but correct nothing, and 40 true corrections in the same style, a pair per store.
FIRST_PERSON_LOOKALIKES_FILE = os.path.join(os.path.dirname(FIRST_PERSON_FRESH_FILE), "first_person_lookalikes.json")
# ... and a second reviewer's, in casual chat style (60 look-alikes, 40 corrections), written after those rules
FIRST_PERSON_LOOKALIKES2_FILE = os.path.join(os.path.dirname(FIRST_PERSON_FRESH_FILE), "first_person_lookalikes2.json")
# ... and a third set, on one-letter labels and settings ("Wing C", "key = value"), written in session 17
FIRST_PERSON_LOOKALIKES3_FILE = os.path.join(os.path.dirname(FIRST_PERSON_FRESH_FILE), "first_person_lookalikes3.json")


def run_first_person_sets(paths: list[str], *, limit: int) -> dict | None:
    """``run_first_person`` on each set (a store each), summed; only the totals (no pair is listed)."""
    total: dict = {}
    for path in paths:
        chosen = first_person_set(path)
        if chosen is None:
            return None
        result = run_first_person(limit=limit, **chosen)
        for field in ("pairs", "missed_corrections", "wrong_merges", "stale_first", "current_top1"):
            total[field] = total.get(field, 0) + result[field]
    total["sets"] = len(paths)
    return total


class PerfectJudge:
    """An LLM adapter that answers the belief judge as one that is never wrong would, for one pair at a time
    (``pair``: the earlier statement and its correction): yes to the pair's earlier statement, no to anything
    else. It measures what the rules put before a judge, not a model: how many corrections a judge could catch
    at best (``run_judge_ceiling``). A statement is the pair's when it holds most of its terms (the judge sees
    first person resolved: "Ann's mobile carrier is EE")."""

    def __init__(self) -> None:
        self.pair: tuple[str, str] = ("", "")
        self.asked = 0

    @staticmethod
    def _holds(text: str, wanted: str) -> bool:
        terms = set(km.tokenize(wanted))
        return len(set(km.tokenize(text)) & terms) >= 0.6 * len(terms)

    async def chat(self, *, messages: list, model: str = "", system: str = "", max_tokens: int = 1024,
                   json_mode: object = False) -> str:
        self.asked += 1
        question, (old, new) = json.loads(messages[-1]["content"]), self.pair
        if "earlier" in question:                        # BeliefJudge.pick: which earlier statement, if any
            found = [entry["n"] for entry in question["earlier"] if self._holds(entry["text"], old)]
            match = found[0] if found and self._holds(question["new"], new) else None
            return json.dumps({"match": match, "reason": "the pair's"})
        same = self._holds(question["stored"], old) and self._holds(question["new"], new)
        return json.dumps({"same_belief": same, "reason": "the pair's"})


def run_judge_ceiling(path: str | list[str]) -> dict | None:
    """A set's pairs (or several sets' together), each in a store of its own as ``run_first_person_isolated`` runs
    them, with a judge that is never wrong (``PerfectJudge``): how many corrections are still missed (the rules
    never put the right statement before the judge), for how many pairs the judge was asked about the correction
    at all, and what it costs: the questions asked of every statement stored (controls and distractors too)."""
    paths = [path] if isinstance(path, str) else path
    sets = [first_person_set(one) for one in paths]
    if any(chosen is None for chosen in sets):
        return None
    missed = asked = questions = statements = pairs = 0
    for chosen, (old, new, _, _) in ((chosen, pair) for chosen in sets for pair in chosen["pairs"]):
        pairs += 1
        judge = PerfectJudge()
        judge.pair = (old, new)
        memory = km.Memory(None, clock=km.ManualClock("2026-01-01T00:00:00Z", tick=60), ids=km.SequentialIds(),
                           llm=judge)

        def say(text: str) -> str:
            return memory.remember(text, space="chat", stack=True,
                                   metadata=dict(chosen["meta"])).split("?", 1)[0]
        for text in chosen["controls_texts"]:
            say(text)
        first = say(old)
        for text in chosen["distractors"]:
            say(text)
        before = judge.asked
        missed += say(new) != first
        asked += judge.asked > before
        questions += judge.asked
        statements += len(chosen["controls_texts"]) + len(chosen["distractors"]) + 2
        memory.close()
    return {"pairs": pairs, "missed_with_perfect_judge": missed, "judge_asked": asked,
            "questions_per_statement": round(questions / statements, 3) if statements else 0.0}


def run_lookalikes(path: str = FIRST_PERSON_LOOKALIKES_FILE) -> dict | None:
    """Each look-alike and each true correction in a store of its own, after the filler, stack=True: how many
    look-alikes land on the earlier message's item (wrong merges), how many corrections do (caught)."""
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as handle:
        data = json.load(handle)

    def merged(old: str, new: str) -> bool:
        memory = km.Memory(None, clock=km.ManualClock("2026-01-01T00:00:00Z", tick=60), ids=km.SequentialIds())
        for text in data["filler"]:
            memory.remember(text, space="chat", stack=True, metadata=dict(data["metadata"]))
        first = memory.remember(old, space="chat", stack=True, metadata=dict(data["metadata"])).split("?", 1)[0]
        second = memory.remember(new, space="chat", stack=True, metadata=dict(data["metadata"])).split("?", 1)[0]
        memory.close()
        return first == second
    return {"lookalikes": len(data["lookalikes"]), "wrong_merges": sum(merged(*pair) for pair in data["lookalikes"]),
            "corrections": len(data["corrections"]), "caught": sum(merged(*pair) for pair in data["corrections"])}


def first_person_fresh(path: str = FIRST_PERSON_FRESH_FILE) -> tuple[list[tuple[str, str, str, str]], list[str]]:
    """A frozen fresh set: (pairs, controls)."""
    with open(path, encoding="utf-8") as handle:
        data = json.load(handle)
    return [tuple(pair) for pair in data["pairs"]], list(data["controls"])


def first_person_set(path: str) -> dict | None:
    """A frozen set's arguments for ``run_first_person`` (pairs, controls, distractors, its speaker), or None
    when the file is absent."""
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as handle:
        data = json.load(handle)
    return {"pairs": [tuple(pair) for pair in data["pairs"]], "controls_texts": list(data["controls"]),
            "distractors": list(data.get("distractors", [])), "meta": dict(data.get("metadata") or FIRST_PERSON_META)}


def run_first_person(pairs: list[tuple[str, str, str, str]], *, limit: int,
                     controls_texts: list[str] | None = None, distractors: list[str] | None = None,
                     meta: dict | None = None) -> dict:
    """Controls, then every pair's first statement, then every correction, then the distractors (new facts
    that share words with a pair's), one a minute, all stack=True in one space; then each question. Figures:
    missed corrections (a new item instead of the pair's), wrong merges (a control revised, a distractor
    landing on an item, or a statement, first or correction, landing on another belief's item), stale first
    (the old statement ranked above the correction, or returned without it) and current top-1."""
    memory = km.Memory(None, clock=km.ManualClock("2026-01-01T00:00:00Z", tick=60), ids=km.SequentialIds())
    owner: dict[str, str] = {}

    def say(text: str, belief: str) -> str:
        item = memory.remember(text, space="chat", stack=True,
                               metadata=dict(meta or FIRST_PERSON_META)).split("?", 1)[0]
        owner.setdefault(item, belief)
        return item
    controls = {say(text, f"control {index}"): text
                for index, text in enumerate(FIRST_PERSON_CONTROLS if controls_texts is None else controls_texts)}
    first = [say(old, f"pair {index}") for index, (old, _, _, _) in enumerate(pairs)]
    # a pair's first statement landing on another pair's (or a control's) item is a wrong merge too
    missed, wrong, misses = 0, sum(owner[item] != f"pair {index}" for index, item in enumerate(first)), []
    for index, (_, new, _, _) in enumerate(pairs):
        item = say(new, f"pair {index}")
        missed += item != first[index]
        wrong += owner[item] != f"pair {index}"
        if item != first[index]:
            misses.append(new)
    for index, text in enumerate(distractors or []):
        wrong += owner[say(text, f"distractor {index}")] != f"distractor {index}"
    wrong += sum(memory.get(item)["content"] != text for item, text in controls.items())
    stale, top1, stale_examples = 0, 0, []
    for old, new, question, _ in pairs:
        found = [result["content"] for result in memory.recall(question, space="chat", limit=limit)]
        ranked = [text for text in found if text in (old, new)]
        is_stale = bool(ranked) and ranked[0] == old
        stale += is_stale
        top1 += bool(found) and found[0] == new
        if is_stale:
            stale_examples.append({"question": question, "returned": found})
    memory.close()
    return {"pairs": len(pairs), "missed_corrections": missed, "wrong_merges": wrong, "stale_first": stale,
            "current_top1": top1, "misses": misses, "stale_examples": stale_examples}


def run_first_person_isolated(pairs: list[tuple[str, str, str, str]], *, limit: int, controls_texts: list[str],
                              distractors: list[str], meta: dict) -> dict:
    """Each pair in a store of its own, for a set whose pairs are written apart (two pairs may state two
    homes): the controls, the pair's first statement, the distractors, then its correction, one a minute,
    stack=True; then its question. Figures as ``run_first_person``'s; a wrong merge is the first statement or
    a distractor landing on a control's or an earlier item, or the correction landing on a control's."""
    missed = wrong = stale = top1 = 0
    for old, new, question, _ in pairs:
        memory = km.Memory(None, clock=km.ManualClock("2026-01-01T00:00:00Z", tick=60), ids=km.SequentialIds())

        def say(text: str) -> str:
            return memory.remember(text, space="chat", stack=True, metadata=dict(meta)).split("?", 1)[0]
        seen = {say(text) for text in controls_texts}
        controls = set(seen)
        first = say(old)
        wrong += first in seen
        seen.add(first)
        for text in distractors:
            item = say(text)
            wrong += item in seen
            seen.add(item)
        item = say(new)
        missed += item != first
        wrong += item in controls
        found = [result["content"] for result in memory.recall(question, space="chat", limit=limit)]
        ranked = [text for text in found if text in (old, new)]
        stale += bool(ranked) and ranked[0] == old
        top1 += bool(found) and found[0] == new
        memory.close()
    return {"pairs": len(pairs), "missed_corrections": missed, "wrong_merges": wrong, "stale_first": stale,
            "current_top1": top1}


# -- the stream -------------------------------------------------------------------------------------------

def generate(people: int, attributes: int, max_corrections: int, rephrase_rate: float, seed: int,
             names_style: str = "full", phrasings: str = "design") -> dict:
    """Beliefs and an interleaved list of statements ``{belief, kind, value, text}``, in order."""
    rng = random.Random(seed)
    if names_style == "first":
        names = list(FIRST_NAMES)
    else:
        names = [f"{first} {last}" for first in FIRST_NAMES for last in LAST_NAMES]
    rng.shuffle(names)
    if people > len(names):
        raise SystemExit(f"--people is at most {len(names)}")
    beliefs, queues = [], []
    for person in names[:people]:
        for attribute in rng.sample(sorted(ATTRIBUTES), min(attributes, len(ATTRIBUTES))):
            spec = ATTRIBUTES[attribute] if phrasings == "design" else {**ATTRIBUTES[attribute], **HELDOUT[attribute]}
            belief = {"id": len(beliefs), "person": person, "attribute": attribute,
                      "question": rng.choice(spec["ask"]).format(x=person)}
            value, events, texts_used = rng.choice(spec["values"]), [], set()

            def say(kind: str, templates: list[str], value: str) -> None:
                choices = [t for t in templates if t.format(x=person, v=value) not in texts_used] or templates
                text = rng.choice(choices).format(x=person, v=value)
                texts_used.add(text)
                events.append({"belief": belief["id"], "kind": kind, "value": value, "text": text})

            say("state", spec["state"], value)
            for _ in range(rng.randint(1, max_corrections)):
                if rng.random() < rephrase_rate:
                    say("rephrase", spec["state"] + spec["correct"], value)
                value = rng.choice([v for v in spec["values"] if v != value])
                say("correct", spec["correct"], value)
            if rng.random() < rephrase_rate:
                say("rephrase", spec["state"] + spec["correct"], value)
            beliefs.append(belief)
            queues.append(events)
    stream = []
    pending = [index for index, queue in enumerate(queues) if queue]
    while pending:
        slot = rng.randrange(len(pending))
        stream.append(queues[pending[slot]].pop(0))
        if not queues[pending[slot]]:
            pending.pop(slot)
    return {"beliefs": beliefs, "stream": stream}


# -- one mode ---------------------------------------------------------------------------------------------

def run_mode(mode: str, data: dict, *, limit: int, samples: int, seed: int, path: str | None) -> dict:
    beliefs, stream = data["beliefs"], data["stream"]
    clock = km.ManualClock("2026-01-01T00:00:00Z")
    memory = km.Memory(path, clock=clock, ids=km.SequentialIds())
    text_of = {}                          # content -> (belief id, value)
    item_owner = {}                       # item kref -> belief id it was created for
    first_item = {}                       # belief id -> item of its first statement
    timeline = {b["id"]: [] for b in beliefs}    # belief id -> [(epoch, value)]
    seen_people_attr = set()              # (person, attribute) stated so far
    seen_attr_value = {}                  # (attribute, value) -> people who stated it so far
    write_ms = []
    first_total = first_stacked = 0
    lookalike = {"same person, other attribute": [0, 0], "same attribute and value, other person": [0, 0]}
    mis_stacked = corrections = missed_revisions = rephrasings = 0
    rephrase_outcomes = {"same item": 0, "new item": 0, "other belief's item": 0}
    for event in stream:
        belief = beliefs[event["belief"]]
        person, attribute, value = belief["person"], belief["attribute"], event["value"]
        clock.advance(60)
        now = clock.now().timestamp()
        text_of[event["text"]] = (belief["id"], value)
        if mode == "keyed":
            call = lambda: memory.remember(event["text"], space="facts", key=f"{person}.{attribute}")
        else:
            call = lambda: memory.remember(event["text"], space="facts", stack=True)
        kref, elapsed = timed(call)
        write_ms.append(elapsed)
        item = kref.split("?", 1)[0]
        is_new = item not in item_owner
        owner = item_owner.setdefault(item, belief["id"])
        timeline[belief["id"]].append((now, value))
        if event["kind"] == "state":
            first_item[belief["id"]] = item
            first_total += 1
            stacked = not is_new
            first_stacked += stacked
            kinds = []
            if any((person, other) in seen_people_attr for other in ATTRIBUTES if other != attribute):
                kinds.append("same person, other attribute")
            if seen_attr_value.get((attribute, value), set()) - {person}:
                kinds.append("same attribute and value, other person")
            for kind in kinds:
                lookalike[kind][0] += 1
                lookalike[kind][1] += stacked
            seen_people_attr.add((person, attribute))
        else:
            wrong = owner != belief["id"]
            mis_stacked += wrong
            if event["kind"] == "correct":
                corrections += 1
                missed_revisions += is_new
            else:
                rephrasings += 1
                rephrase_outcomes["other belief's item" if wrong else "new item" if is_new else "same item"] += 1
        seen_attr_value.setdefault((attribute, value), set()).add(person)

    # stale rate: recall the natural question, compare ranks of current and superseded values
    recall_ms, stale, stale_present, missing, top1 = [], 0, 0, 0, 0
    stale_examples = []
    for belief in beliefs:
        current = timeline[belief["id"]][-1][1]
        results, elapsed = timed(memory.recall, belief["question"], limit=limit)
        recall_ms.append(elapsed)
        ranked = [text_of[r["content"]][1] for r in results
                  if text_of.get(r["content"], (None,))[0] == belief["id"]]
        current_rank = ranked.index(current) if current in ranked else None
        stale_ranks = [i for i, v in enumerate(ranked) if v != current]
        is_stale = bool(stale_ranks) and (current_rank is None or stale_ranks[0] < current_rank)
        stale += is_stale
        stale_present += bool(stale_ranks)
        missing += current_rank is None
        top1 += bool(results) and text_of.get(results[0]["content"]) == (belief["id"], current)
        if is_stale and len(stale_examples) < 5:
            stale_examples.append({"question": belief["question"], "current": current,
                                   "returned": [r["content"] for r in results]})

    # point in time: a random belief, a random instant after its first statement
    rng = random.Random(seed + 1)
    end = clock.now().timestamp()
    as_of_ms, pit_recall_ok, pit_get_ok, pit_examples = [], 0, 0, []
    pit_wrong_value = pit_not_found = 0
    for _ in range(samples):
        belief = rng.choice(beliefs)
        events = timeline[belief["id"]]
        instant = rng.uniform(events[0][0], end + 60)
        truth = [value for when, value in events if when <= instant][-1]
        results, elapsed = timed(memory.recall, belief["question"], limit=limit, as_of=instant)
        as_of_ms.append(elapsed)
        about = [text_of[r["content"]][1] for r in results if text_of.get(r["content"], (None,))[0] == belief["id"]]
        ok = bool(about) and about[0] == truth
        pit_recall_ok += ok
        pit_wrong_value += bool(about) and not ok
        pit_not_found += not about
        if not ok and len(pit_examples) < 5:
            pit_examples.append({"question": belief["question"], "truth": truth, "returned_values": about})
        stamp = km.format_instant(km.parse_instant(instant))
        held = memory.get(f"{first_item[belief['id']]}?t=latest&time={stamp}")
        pit_get_ok += text_of.get(held["content"], (None, None))[1] == truth
    stats = memory.stats()
    memory.close()

    def share(part: int, whole: int) -> float:
        return round(100.0 * part / whole, 2) if whole else 0.0

    return {
        "statements": len(stream), "beliefs": len(beliefs), "corrections": corrections,
        "rephrasings": rephrasings, "items": stats["items"], "revisions": stats["revisions"],
        "stale_rate_pct": share(stale, len(beliefs)), "stale_beliefs": stale,
        "stale_in_top_k_pct": share(stale_present, len(beliefs)),
        "current_missing_pct": share(missing, len(beliefs)),
        "current_top1_pct": share(top1, len(beliefs)),
        "unrelated_stack_rate_pct": share(first_stacked, first_total), "unrelated_stacks": first_stacked,
        "first_statements": first_total,
        "unrelated_stack_by_lookalike": {kind: {"stacked": hit, "of": n, "pct": share(hit, n)}
                                         for kind, (n, hit) in lookalike.items()},
        "mis_stacked_updates_pct": share(mis_stacked, corrections + rephrasings), "mis_stacked_updates": mis_stacked,
        "missed_revisions_pct": share(missed_revisions, corrections), "missed_revisions": missed_revisions,
        "rephrasing_outcomes": rephrase_outcomes,
        "point_in_time_recall_pct": share(pit_recall_ok, samples),
        "point_in_time_recall_wrong_value_pct": share(pit_wrong_value, samples),
        "point_in_time_recall_not_found_pct": share(pit_not_found, samples),
        "point_in_time_get_pct": share(pit_get_ok, samples), "point_in_time_samples": samples,
        "write_p50_ms": round(percentile(write_ms, 0.5), 3), "write_p95_ms": round(percentile(write_ms, 0.95), 3),
        "write_total_s": round(sum(write_ms) / 1000.0, 2),
        "recall_p50_ms": round(percentile(recall_ms, 0.5), 3),
        "as_of_recall_p50_ms": round(percentile(as_of_ms, 0.5), 3) if as_of_ms else None,
        "examples": {"stale": stale_examples, "point_in_time_misses": pit_examples},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--people", type=int, default=200)
    parser.add_argument("--attributes", type=int, default=4, help="attributes per person (1-7)")
    parser.add_argument("--max-corrections", type=int, default=3)
    parser.add_argument("--rephrase-rate", type=float, default=0.4)
    parser.add_argument("--samples", type=int, default=400, help="point-in-time samples per mode")
    parser.add_argument("--limit", type=int, default=5, help="recall limit for the stale check")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--names", choices=("full", "first"), default="full",
                        help="full: 'First Last' names (default); first: first names only, at most 30 people")
    parser.add_argument("--disk", action="store_true", help="use a file store instead of an in-memory one")
    parser.add_argument("--phrasings", choices=("design", "heldout"), default="design",
                        help="design: the phrasings above (default); heldout: HELDOUT, never used for tuning "
                             "(writes belief_updates_heldout.json)")
    args = parser.parse_args()
    started = time.perf_counter()
    data = generate(args.people, args.attributes, args.max_corrections, args.rephrase_rate, args.seed, args.names,
                    args.phrasings)
    figures = {}
    with tempfile.TemporaryDirectory() as folder:
        for mode in ("keyed", "stack"):
            path = os.path.join(folder, f"{mode}.db") if args.disk else None
            figures[mode] = run_mode(mode, data, limit=args.limit, samples=args.samples, seed=args.seed, path=path)
    figures["elapsed_s"] = round(time.perf_counter() - started, 1)

    def pair(name: str, fmt=str) -> tuple[str, str]:
        return name, f"{fmt(figures['keyed'][name]):>12}  {fmt(figures['stack'][name]):>12}"

    pct = lambda value: f"{value:.2f}%"
    rows = [("figure", f"{'keyed':>12}  {'stack':>12}"),
            pair("statements"), pair("beliefs"), pair("corrections"), pair("rephrasings"), pair("items"),
            pair("revisions"),
            pair("stale_rate_pct", pct), pair("stale_beliefs"), pair("stale_in_top_k_pct", pct),
            pair("current_missing_pct", pct),
            pair("current_top1_pct", pct),
            pair("unrelated_stack_rate_pct", pct), pair("unrelated_stacks"), pair("first_statements")]
    for kind in figures["keyed"]["unrelated_stack_by_lookalike"]:
        keyed, stack = (figures[m]["unrelated_stack_by_lookalike"][kind] for m in ("keyed", "stack"))
        rows.append((f"  stacked after look-alike: {kind}",
                     f"{keyed['stacked']:>5}/{keyed['of']:<6}  {stack['stacked']:>5}/{stack['of']:<6}"))
    rows += [pair("mis_stacked_updates_pct", pct), pair("missed_revisions_pct", pct),
             ("rephrasings: same item / new item / other's item",
              "  ".join(f"{'/'.join(str(v) for v in figures[m]['rephrasing_outcomes'].values()):>12}"
                        for m in ("keyed", "stack"))),
             pair("point_in_time_recall_pct", pct), pair("point_in_time_recall_wrong_value_pct", pct),
             pair("point_in_time_recall_not_found_pct", pct), pair("point_in_time_get_pct", pct),
             pair("write_p50_ms"), pair("write_p95_ms"), pair("write_total_s"), pair("recall_p50_ms"),
             pair("as_of_recall_p50_ms"), ("elapsed_s", figures["elapsed_s"])]
    print_table(rows)
    fresh_pairs, fresh_controls = first_person_fresh()
    fresh2_pairs, fresh2_controls = first_person_fresh(FIRST_PERSON_FRESH2_FILE)
    fresh3_pairs, fresh3_controls = first_person_fresh(FIRST_PERSON_FRESH3_FILE)
    figures["first_person"] = {"design": run_first_person(FIRST_PERSON, limit=args.limit),
                               "heldout": run_first_person(FIRST_PERSON_HELDOUT, limit=args.limit),
                               "fresh": run_first_person(fresh_pairs, limit=args.limit, controls_texts=fresh_controls),
                               "fresh2": run_first_person(fresh2_pairs, limit=args.limit,
                                                          controls_texts=fresh2_controls),
                               "fresh3": run_first_person(fresh3_pairs, limit=args.limit,
                                                          controls_texts=fresh3_controls)}
    for part, path in (("train", FIRST_PERSON_TRAIN_FILE), ("fresh4", FIRST_PERSON_FRESH4_FILE)):
        chosen = first_person_set(path)
        if chosen is not None:
            figures["first_person"][part] = run_first_person(limit=args.limit, **chosen)
    for part, path in (("fresh5", FIRST_PERSON_FRESH5_FILE), ("fresh6", FIRST_PERSON_FRESH6_FILE),
                       ("fresh7", FIRST_PERSON_FRESH7_FILE), ("fresh8", FIRST_PERSON_FRESH8_FILE),
                       ("fresh9", FIRST_PERSON_FRESH9_FILE), ("fresh10", FIRST_PERSON_FRESH10_FILE),
                       ("fresh11", FIRST_PERSON_FRESH11_FILE), ("fresh12", FIRST_PERSON_FRESH12_FILE),
                       ("fresh13", FIRST_PERSON_FRESH13_FILE), ("fresh14", FIRST_PERSON_FRESH14_FILE)):
        chosen = first_person_set(path)
        if chosen is not None:
            figures["first_person"][part] = run_first_person_isolated(limit=args.limit, **chosen)
    for part, numbers in FIRST_PERSON_ISSUE_PARTS:
        summed = run_first_person_sets([FIRST_PERSON_ISSUE_FILES[number] for number in numbers], limit=args.limit)
        if summed is not None:
            figures["first_person"][part] = summed
    for part, path in (("first_person_lookalikes", FIRST_PERSON_LOOKALIKES_FILE),
                       ("first_person_lookalikes2", FIRST_PERSON_LOOKALIKES2_FILE),
                       ("first_person_lookalikes3", FIRST_PERSON_LOOKALIKES3_FILE)):
        lookalikes = run_lookalikes(path)
        if lookalikes is not None:
            figures[part] = lookalikes
            print(f"{part}: look-alikes merged {lookalikes['wrong_merges']}/{lookalikes['lookalikes']}; "
                  f"corrections caught {lookalikes['caught']}/{lookalikes['corrections']}")
    figures["judge_ceiling"] = {}
    for part, path in (("fresh10", FIRST_PERSON_FRESH10_FILE), ("fresh11", FIRST_PERSON_FRESH11_FILE),
                       ("fresh12", FIRST_PERSON_FRESH12_FILE), ("fresh13", FIRST_PERSON_FRESH13_FILE),
                       ("fresh14", FIRST_PERSON_FRESH14_FILE),
                       *((part, [FIRST_PERSON_ISSUE_FILES[number] for number in numbers])
                         for part, numbers in FIRST_PERSON_ISSUE_PARTS)):
        ceiling = run_judge_ceiling(path)
        if ceiling is not None:
            figures["judge_ceiling"][part] = ceiling
            print(f"{part} with a judge that is never wrong: {ceiling['missed_with_perfect_judge']}/"
                  f"{ceiling['pairs']} corrections missed (asked for {ceiling['judge_asked']}; "
                  f"{ceiling['questions_per_statement']} questions a statement)")
    parts = tuple(figures["first_person"])
    print_table([("first-person chat (stack=True): pairs", "  ".join(
        f"{figures['first_person'][part]['pairs']:>12}" for part in parts))] + [
        (figure, "  ".join(f"{figures['first_person'][part][figure]:>12}" for part in parts))
        for figure in ("missed_corrections", "wrong_merges", "stale_first", "current_top1")])
    name = "belief_updates" if args.phrasings == "design" else "belief_updates_heldout"
    print("wrote", write_results(name, vars(args), figures))


if __name__ == "__main__":
    main()
