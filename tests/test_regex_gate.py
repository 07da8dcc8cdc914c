"""The literal gate in front of the relation registry's regexes: ``_required_literals`` reads off a pattern the
strings one of which every match holds, and ``belief_relations`` runs a relation's regex only on a text holding
one. A gate that named a string some match lacks would lose a relation silently, so the reading is checked
against ``re`` itself on random patterns and texts, and the registry's answers with the gate against its
answers without it."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import kumiho_memory as km

PROPERTY = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("pattern, needs", [
    (r"\b(?:dog|dogs|puppy)\b", ("dog", "dogs", "puppy")),
    (r"\bfoo(?:bar|baz)?\d", ("foo",)),
    (r"x{0,3}yz", ("yz",)),
    (r"(?:ab|cd)+ efgh", (" efgh",)),
    (r"(?<!\bnot )works?(?= for\b)", ("work",)),
    (r"(?:my|our) (?:gp|doctor) is", ("doctor", "gp")),      # a stopword says nothing: the nouns are asked for
    (r"[a-z]+\d*", None),                    # classes and repeats alone: nothing can be named
    (r"a*|bcd", None),                       # one alternative needs nothing
    (r"(?i)dog", None),                      # ignored case: the text's case is not the pattern's
    (r"(?i:dog)s", ("s",)),
])
def test_what_a_pattern_needs(pattern, needs):
    assert km._required_literals(pattern) == needs


_PIECES = st.sampled_from([
    "a", "b", "ab", "ba", "abc", "x", " ", r"\b", r"\d", r"\w+", "[ab]", "[^a]", ".", r"\s", "(?=a)", "(?!b)",
    "(?<=a)", "(?<!b)", "^", "$",
])


@st.composite
def _patterns(draw, depth=0):
    parts = []
    for _ in range(draw(st.integers(1, 4))):
        choice = draw(st.integers(0, 5 if depth < 2 else 1))
        if choice <= 1:
            part = draw(_PIECES)
        elif choice == 2:
            part = "(?:" + "|".join(draw(st.lists(_patterns(depth + 1), min_size=1, max_size=3))) + ")"
        elif choice == 3:
            part = "(" + draw(_patterns(depth + 1)) + ")"
        else:
            part = "(?:" + draw(_patterns(depth + 1)) + ")" + draw(st.sampled_from(["?", "*", "+", "{2}", "{0,2}",
                                                                                   "{1,3}", "+?", "*?"]))
        parts.append(part)
    return "".join(parts)


@PROPERTY
@given(_patterns(), st.text(alphabet="abcx 1é\n", max_size=14))
@example(r"(?:ab)+c", "ababc")
@example(r"a\bb", "ab")
def test_every_match_holds_a_needed_string(pattern, text):
    try:
        compiled = re.compile(pattern)
    except re.error:
        return
    needs = km._required_literals(pattern)
    if needs is not None and compiled.search(text):
        assert any(need in text for need in needs), (pattern, text, needs)


_WORDS = st.sampled_from(sorted({word for pattern in km.BELIEF_RELATIONS.values()
                                 for word in re.findall(r"[a-z][a-z' -]{1,14}", pattern)} |
                                {"i", "my", "she's", "he is", "the", "work", "working", "moved", "to", "30", "4",
                                 "kg", "mg", "50k", ".", ",", "!", "'s", "years old", "pinboard"}))


@PROPERTY
@given(st.lists(_WORDS, max_size=12).map(" ".join))
@example("i moved to the leeds office and work at vantara")
@example("she's 30 and lives in porto")
def test_the_gated_registry_finds_what_its_regexes_find(text):
    lowered = text.casefold()
    expected = {name for name, pattern in km.BELIEF_RELATIONS.items() if re.search(pattern, lowered)}
    assert km._named_relations(lowered) == expected
    assert {name for name, pattern in km._COMPILED_RELATIONS.items() if pattern.search(lowered)} == expected


def test_a_text_naming_no_relation_runs_no_regex_of_its_own():
    by_gram, short, always = km._relation_gate()
    assert not always and by_gram and short          # every registry pattern needs some literal
    assert km._named_relations("thanks, that sounds lovely, see you tomorrow") == set()
