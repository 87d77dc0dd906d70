"""The SKILL.md front-matter parser: what it reads, what it refuses, and that it is total."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vikingbot.skills.frontmatter import MAX_CHARS, split

CASES = [
    ("name: a\ndescription: Does a thing.", {"name": "a", "description": "Does a thing."}),
    ("name: a # a comment", {"name": "a"}),
    ("description: 'It''s quoted' # c", {"description": "It's quoted"}),
    ('description: "tab\\there \\u00e9"', {"description": "tab\there é"}),
    ('description: "lone \\ud800"', {"description": "lone \\ud800"}),
    ("description: first\n  second\n  third", {"description": "first second third"}),
    (
        "description: >-\n  folded\n  lines\n\n  para\nname: x",
        {"description": "folded lines\npara", "name": "x"},
    ),
    ("description: |\n  kept\n  lines\n", {"description": "kept\nlines\n"}),
    ("description: Use when: the user asks", {"description": "Use when: the user asks"}),
    ("allowed-tools: [Read, Grep]", {"allowed-tools": "[Read, Grep]"}),
    ("metadata:\n  author: me\n  version: '1'", {"metadata": "author: me\nversion: '1'"}),
    ("# only a comment\n\nname: a", {"name": "a"}),
]


@pytest.mark.parametrize(("inner", "fields"), CASES)
def test_what_it_reads(inner: str, fields: dict[str, str]) -> None:
    fm = split(f"---\n{inner}\n---\n# Body\n")
    assert fm.problems == []
    assert fm.fields == fields
    assert fm.body == "# Body\n"


PROBLEMS = [
    ("name: &a x", "front matter line 2: an anchor"),
    ("name: *a", "front matter line 2: an alias"),
    ("name: !!str x", "front matter line 2: a tag"),
    ("description: 'never closed", "front matter line 2: a '-quoted value must close"),
    ("tools: [a,\n  b]", "front matter line 2: a list or map written with [ must close"),
    ("just some words", "front matter line 2: expected 'key: value'"),
    ("name: a\nname: b", "front matter line 3: name: is given twice"),
    ("name:x", "front matter line 2: expected 'key: value'"),
    ("  indented: x", "front matter line 2: an indented line that belongs to no key"),
]


@pytest.mark.parametrize(("inner", "problem"), PROBLEMS)
def test_what_it_refuses_names_the_line(inner: str, problem: str) -> None:
    fm = split(f"---\n{inner}\n---\nbody")
    assert fm.problems and fm.problems[0].startswith(problem), fm.problems


def test_no_or_unclosed_front_matter_is_a_problem_and_the_text_is_the_body() -> None:
    assert split("# Just markdown\n").problems[0].startswith("no front matter")
    unclosed = split("---\nname: a\n")
    assert not unclosed.found and "not closed" in unclosed.problems[0]
    assert "not closed" in split("---\n" + "x: y\n" * 500 + "---\n").problems[0]


def test_crlf_and_the_body_line() -> None:
    fm = split("---\r\nname: a\r\n---\r\nbody\r\n")
    assert (fm.fields, fm.body, fm.body_line) == ({"name": "a"}, "body\r\n", 4)


PIECES = [*"-:#'\"|>[]{}&*!% \t\n\r\\uab01.", "---\n", "name: ", "description: ", "  ", "\\u"]
YAMLISH = st.lists(st.sampled_from(PIECES), max_size=200).map("".join)


@settings(max_examples=400, deadline=None)
@given(st.one_of(YAMLISH.map(lambda t: "---\n" + t), YAMLISH, st.text(max_size=300)))
def test_total_on_any_text(text: str) -> None:
    fm = split(text)
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in fm.fields.items())
    assert fm.found or fm.problems
    assert text.endswith(fm.body)


def test_linear_on_huge_hostile_input() -> None:
    hostile = "---\n" + ("description: " + "'" * 10_000 + "\n") * 200 + "---\n"
    start = time.perf_counter()
    fm = split(hostile)
    assert time.perf_counter() - start < 1.0
    assert fm.problems  # capped at MAX_CHARS: never closed within the cap
    assert len(hostile) > 10 * MAX_CHARS
