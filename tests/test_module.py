"""The module as a file users copy: stdlib-only import with no side effects, documented public names."""

from __future__ import annotations

import inspect
import contextlib
import io
import os
import re
import subprocess
import sys

import kumiho_memory as km

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# A child that imports the module under an audit hook and reports any file opened, env read, thread or
# socket started while importing it.
_AUDIT_CHILD = r"""
import sys, os
sys.path.insert(0, sys.argv[1])
events = []
watching = False
def hook(event, args):
    if not watching:
        return
    if event in ("open", "os.listdir", "os.scandir", "os.mkdir", "os.remove", "os.rename", "sqlite3.connect",
                 "socket.connect", "socket.bind", "subprocess.Popen", "_thread.start_new_thread",
                 "os.putenv", "os.unsetenv"):
        path = str(args[0]) if args else ""
        if event == "open" and (path.endswith((".py", ".pyc")) or "__pycache__" in path or path.endswith(".so")
                                or "/lib/python" in path):
            return  # the interpreter loading stdlib modules
        if event in ("os.listdir", "os.scandir") and (path in sys.path or path.startswith(sys.base_prefix)):
            return  # the import system scanning the module search path
        events.append((event, path))
sys.addaudithook(hook)
class Spy(dict):
    def __getitem__(self, key):
        events.append(("environ", key)); return super().__getitem__(key)
    def get(self, key, default=None):
        events.append(("environ", key)); return super().get(key, default)
os.environ = Spy(os.environ)
watching = True
import kumiho_memory
watching = False
print(repr(events))
"""


def test_imports_with_the_standard_library_alone():
    done = subprocess.run([sys.executable, "-I", "-S", "-c",
                           "import sys; sys.path.insert(0, '.'); import kumiho_memory; print('ok')"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


def test_import_does_nothing():
    done = subprocess.run([sys.executable, "-I", "-B", "-c", _AUDIT_CHILD, ROOT], capture_output=True, text=True,
                          timeout=60, env={"PATH": os.environ.get("PATH", "")})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", f"import had side effects: {done.stdout}"


def test_no_optional_package_is_imported_at_module_level():
    source = open(os.path.join(ROOT, "kumiho_memory.py"), encoding="utf-8").read()
    top_level_imports = re.findall(r"^(?:import|from) (\w+)", source, flags=re.M)
    for name in top_level_imports:
        assert name == "__future__" or name in sys.stdlib_module_names, f"non-stdlib import at top level: {name}"


def test_every_public_name_is_documented():
    missing = []
    for name in km.__all__:
        obj = getattr(km, name)
        if inspect.isclass(obj) or inspect.isfunction(obj):
            if not (obj.__doc__ or "").strip():
                missing.append(name)
            if inspect.isclass(obj):
                for attr, member in vars(obj).items():
                    if not attr.startswith("_") and inspect.isfunction(member) and not (member.__doc__ or "").strip():
                        missing.append(f"{name}.{attr}")
    assert missing == []


def test_all_names_exist_and_errors_subclass_builtins():
    for name in km.__all__:
        assert hasattr(km, name), name
    assert issubclass(km.InvalidKrefError, ValueError)
    assert issubclass(km.NotFoundError, KeyError)
    assert issubclass(km.BackendUnavailableError, ImportError)
    assert issubclass(km.StoreError, OSError)
    assert issubclass(km.StoreBusyError, TimeoutError)
    for name in km.__all__:
        obj = getattr(km, name)
        if inspect.isclass(obj) and issubclass(obj, Exception):
            assert issubclass(obj, km.KumihoMemoryError), name


def test_missing_optional_package_names_the_pip_line():
    try:
        km._require("surely_not_installed_package_xyz.sub", extra="redis", package="surely-not-xyz")
    except km.BackendUnavailableError as exc:
        # both lines work today: the package from PyPI, the extra from a checkout (the distribution of this
        # project is not on PyPI, so no hint may name it as if it were)
        assert "pip install 'surely-not-xyz'" in str(exc) and "pip install -e '.[redis]'" in str(exc)
        assert "kumiho-memory-onefile[" not in str(exc)
    else:  # pragma: no cover
        raise AssertionError("expected BackendUnavailableError")


def test_readme_documents_every_cli_command_and_the_ci_runs_its_test_command():
    readme = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    parser = km.build_cli_parser()
    commands = next(action for action in parser._actions if action.dest == "command").choices
    for command in commands:
        assert f"kumiho-memory {command}" in readme or f"kumiho_memory.py {command}" in readme, command
    ci = open(os.path.join(ROOT, ".ci", "run"), encoding="utf-8").read()
    match = re.search(r"<!-- test-command -->\s*```(?:bash|sh)?\n(.+?)\n```", readme, flags=re.S)
    assert match, "README must mark its test command with <!-- test-command -->"
    assert "test-command" in ci


def test_readme_figures_match_the_probe_results():
    """README numbers are generated from probes/results by probes/readme_figures.py and cannot drift."""
    done = subprocess.run([sys.executable, os.path.join(ROOT, "probes", "readme_figures.py"), "--check"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    readme = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    for name in ("locomo", "scale", "store"):
        assert f"<!-- figures:{name} -->\n|" in readme, f"figures block {name} is empty"


def test_readme_python_examples_run(tmp_path, monkeypatch):
    """Every complete Python example in the README runs as written (snippets using top-level await or
    bare recall lines are skipped)."""
    readme = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    blocks = re.findall(r"```python\n(.+?)```", readme, flags=re.S)
    runnable = []
    for block in blocks:
        if not block.lstrip().startswith(("from kumiho_memory", "import")):
            continue                       # a fragment that continues an earlier example
        try:
            runnable.append((block, compile(block, "README.md", "exec")))
        except SyntaxError as exc:
            assert "await" in str(exc), exc  # only top-level-await snippets may be skipped
    assert len(runnable) >= 2
    monkeypatch.chdir(tmp_path)
    checked = 0
    for block, code in runnable:
        output = io.StringIO()
        with contextlib.redirect_stdout(output):
            exec(code, {"__name__": "readme_example"})
        printed = output.getvalue().splitlines()
        # a ``print(...)  # -> TEXT (note)`` line promises that TEXT is printed (the note is for the reader)
        for expected in re.findall(r"^\s*print\(.*\)\s+# -> (.+?)(?:\s+\(.*\))?$", block, flags=re.M):
            assert expected in printed, f"README example promised {expected!r}, printed {printed!r}"
            printed = printed[printed.index(expected) + 1:]
            checked += 1
    assert checked >= 1, "no README example states what it prints (print(...)  # -> TEXT)"


def test_each_section_uses_only_the_sections_above_it():
    """The module reads like a book: no top-level definition refers to a name a later section defines."""
    import ast
    import re
    path = os.path.join(ROOT, "kumiho_memory.py")
    with open(path, encoding="utf-8") as stream:
        source = stream.read()
    starts = [(number + 1, int(match.group(1))) for number, line in enumerate(source.split("\n"))
              for match in [re.match(r"^# (\d+)\. ", line)] if match]
    assert [section for _, section in starts] == list(range(1, len(starts) + 1))

    def section_of(line: int) -> int:
        return max((section for start, section in starts if line >= start), default=0)
    tree = ast.parse(source)
    defined = {}
    for node in tree.body:
        names = [node.name] if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) else \
            [target.id for target in getattr(node, "targets", []) if isinstance(target, ast.Name)]
        for name in names:
            defined[name] = section_of(node.lineno)
    later = sorted({(section_of(node.lineno), sub.id) for node in tree.body for sub in ast.walk(node)
                    if isinstance(sub, ast.Name) and defined.get(sub.id, 0) > section_of(node.lineno)})
    assert later == [], later


def test_no_line_is_over_the_line_length_in_pyproject():
    """Every .py file at the top level, in probes/ and in tests/ keeps to ``[tool.ruff] line-length``."""
    import glob
    import pytest
    tomllib = pytest.importorskip("tomllib")
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as stream:
        limit = tomllib.load(stream)["tool"]["ruff"]["line-length"]
    paths = sorted(path for folder in ("", "probes", "tests")
                   for path in glob.glob(os.path.join(ROOT, folder, "*.py")))
    assert any(path.endswith("kumiho_memory.py") for path in paths)
    over = []
    for path in paths:
        with open(path, encoding="utf-8") as stream:
            for number, line in enumerate(stream.read().split("\n"), 1):
                if len(line) > limit:
                    over.append(f"{os.path.relpath(path, ROOT)}:{number} ({len(line)})")
    assert over == [], f"{len(over)} line(s) over {limit} characters:\n" + "\n".join(over)
