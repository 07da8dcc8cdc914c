"""The file is easy to live in (issue 21): its map, its layering around ``Memory``, and the size and order of
what is inside it, checked on the source itself (the written line length is checked in ``test_module.py``)."""

from __future__ import annotations

import ast
import os
import re

import kumiho_memory as km

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCE_PATH = os.path.join(ROOT, "kumiho_memory.py")
with open(SOURCE_PATH, encoding="utf-8") as _stream:
    SOURCE = _stream.read()
TREE = ast.parse(SOURCE)
LINES = SOURCE.split("\n")
BANNER = re.compile(r"^# (\d+)\. (.+)$")
CONSTRUCTORS = {"__init__", "__new__", "__post_init__", "__init_subclass__"}


def banners() -> list[tuple[int, int, str]]:
    """``(line, number, title)`` of every section banner."""
    return [(index + 1, int(match.group(1)), match.group(2)) for index, line in enumerate(LINES)
            for match in [BANNER.match(line)] if match]


def section_of(line: int) -> int:
    return max((number for start, number, _ in banners() if line >= start), default=0)


def functions() -> list[tuple[str, ast.AST]]:
    """Every function and method in the module, with a dotted name."""
    found = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                found.append((prefix + child.name, child))
                visit(child, prefix + child.name + ".")
            elif isinstance(child, ast.ClassDef):
                visit(child, prefix + child.name + ".")
            else:
                visit(child, prefix)
    visit(TREE, "")
    return found


def length(node: ast.AST) -> int:
    """Lines from the first decorator to the end."""
    first = min([node.lineno] + [decorator.lineno for decorator in getattr(node, "decorator_list", [])])
    return node.end_lineno - first + 1


def test_the_module_docstring_map_names_every_section_in_order():
    listed = [(int(match.group(1)), match.group(2).lower()) for line in (km.__doc__ or "").split("\n")
              for match in [re.match(r"^\s+(\d+)\. (.+?)\s{2,}", line)] if match]
    found = banners()
    assert [number for number, _ in listed] == [number for _, number, _ in found] == \
        list(range(1, len(found) + 1))
    for (number, words), (_, _, title) in zip(listed, found):
        # each entry of the map names its banner: "storage" / "8. Storage: the graph-backend interface..."
        head = re.split(r"[:,]", title)[0].lower()
        assert words.split()[0].rstrip(",") in head or head.split()[0] in words, (number, words, title)


def test_memory_comes_before_everything_built_on_it():
    memory_section = section_of(next(node.lineno for node in TREE.body
                                     if isinstance(node, ast.ClassDef) and node.name == "Memory"))
    users = sorted({section_of(node.lineno) for node in TREE.body for sub in ast.walk(node)
                    if isinstance(sub, ast.Name) and sub.id == "Memory"
                    and not (isinstance(node, ast.ClassDef) and node.name == "Memory")})
    assert users and min(users) >= memory_section, users


def test_no_feature_takes_an_untyped_memory():
    untyped = []
    for name, node in functions():
        arguments = node.args.posonlyargs + node.args.args + node.args.kwonlyargs
        for argument in arguments:
            if argument.arg == "memory" and (argument.annotation is None or ast.unparse(argument.annotation)
                                             in ("Any", "typing.Any", "object")):
                untyped.append(name)
    assert untyped == []


def test_nothing_outside_memory_reads_its_private_parts():
    memory_class = next(node for node in TREE.body if isinstance(node, ast.ClassDef) and node.name == "Memory")
    inside = {id(sub) for sub in ast.walk(memory_class)}
    reads = []
    for sub in ast.walk(TREE):
        if isinstance(sub, ast.Attribute) and id(sub) not in inside and sub.attr.startswith("_") \
                and not sub.attr.startswith("__"):
            owner = sub.value
            owner_name = owner.id if isinstance(owner, ast.Name) else owner.attr \
                if isinstance(owner, ast.Attribute) else None
            if owner_name == "memory":
                reads.append((sub.lineno, ast.unparse(sub)))
    assert reads == []


def test_no_function_is_over_a_hundred_lines_and_recall_over_seventy():
    long = [(name, length(node)) for name, node in functions() if length(node) > 100]
    assert long == []
    recall = dict(functions())["Memory.recall"]
    assert length(recall) <= 70


def test_inside_a_class_public_methods_come_first_and_helpers_after():
    """Within each run of methods (a class-level comment banner or statement starts a new run): constructors,
    then public methods, then the private helpers."""
    misplaced = []

    def rank(name: str) -> int:
        if name in CONSTRUCTORS:
            return 0
        return 2 if name.startswith("_") and not name.endswith("__") else 1
    for cls in ast.walk(TREE):
        if not isinstance(cls, ast.ClassDef):
            continue
        previous_rank, previous_end = 0, None
        for node in cls.body:
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                previous_rank, previous_end = 0, None
                continue
            start = min([node.lineno] + [decorator.lineno for decorator in node.decorator_list]) - 1
            while start > 0 and LINES[start - 1].strip().startswith("#") and \
                    not LINES[start - 1].strip().startswith("# --"):
                start -= 1            # a comment right above a method belongs to it
            if previous_end is not None and any(line.strip() for line in LINES[previous_end:start]):
                previous_rank = 0     # a banner or a comment of its own starts a new run
            if rank(node.name) < previous_rank:
                misplaced.append(f"{cls.name}.{node.name} (line {node.lineno})")
            previous_rank, previous_end = max(previous_rank, rank(node.name)), node.end_lineno
    assert misplaced == []
