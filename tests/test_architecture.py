"""The shape of the code: small modules, short functions, imports that only go down.

Read from the source with ``ast`` (nothing is imported), so the checks are exact and fast.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.helpers import ROOT

PACKAGES = ("reward_service", "trainer_client")
MAX_MODULE_LINES = 400
MAX_MODULES_PER_FOLDER = 15
MAX_FUNCTION_LINES = 80


def _modules(packages: tuple[str, ...] = PACKAGES) -> dict[str, Path]:
    out = {}
    for pkg in packages:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            out[name] = path
    return out


MODULES = _modules()


@pytest.mark.parametrize("name", sorted(MODULES))
def test_module_is_small(name: str) -> None:
    lines = MODULES[name].read_text().count("\n")
    assert lines <= MAX_MODULE_LINES, f"{name}: {lines} lines"


BENCH = _modules(("bench",))


@pytest.mark.parametrize("name", sorted(BENCH))
def test_bench_module_is_small(name: str) -> None:
    """The benches keep the size rule too (issue 40); their long report functions are
    theirs to keep (only the packages' functions are held to MAX_FUNCTION_LINES)."""
    lines = BENCH[name].read_text().count("\n")
    assert lines <= MAX_MODULE_LINES, f"{name}: {lines} lines"


def test_no_function_is_long() -> None:
    long = []
    for name, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                n = (node.end_lineno or node.lineno) - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    long.append(f"{name}.{node.name}: {n} lines")
    assert not long, long


def test_no_folder_is_crowded() -> None:
    folders: dict[Path, int] = {}
    for path in MODULES.values():
        if path.name != "__init__.py":
            folders[path.parent] = folders.get(path.parent, 0) + 1
    crowded = {str(f.relative_to(ROOT)): n for f, n in folders.items() if n > MAX_MODULES_PER_FOLDER}
    assert not crowded, crowded


def _imports(name: str, path: Path, late: bool = False) -> set[str]:
    """Project modules ``name`` imports when it is loaded (not under TYPE_CHECKING, not
    inside functions: those are deliberate late imports, counted only with ``late``)."""
    tree = ast.parse(path.read_text())
    found: set[str] = set()
    is_pkg = path.name == "__init__.py"
    for node in tree.body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        for sub in ast.walk(node) if late or not isinstance(
                node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) else ():
            if isinstance(sub, ast.Import):
                found |= {a.name for a in sub.names}
            elif isinstance(sub, ast.ImportFrom):
                base = sub.module or ""
                if sub.level:
                    pkg = name.split(".") if is_pkg else name.split(".")[:-1]
                    pkg = pkg[: len(pkg) - sub.level + 1]
                    base = ".".join([*pkg, base] if base else pkg)
                found.add(base)
                found |= {f"{base}.{a.name}" for a in sub.names}
    return {m for m in found if m in MODULES and m != name}


def test_no_import_cycle() -> None:
    graph = {name: _imports(name, path) for name, path in MODULES.items()}
    # a package's __init__ that only re-exports its submodules is not a cycle with them
    for name in graph:
        graph[name] = {m for m in graph[name] if not (m.startswith(name + "."))}
    seen: dict[str, int] = {}  # 1: on the stack, 2: done
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(n: str) -> None:
        seen[n] = 1
        stack.append(n)
        for m in sorted(graph[n]):
            if seen.get(m) == 1:
                cycles.append([*stack[stack.index(m):], m])
            elif m not in seen:
                visit(m)
        stack.pop()
        seen[n] = 2

    for n in sorted(graph):
        if n not in seen:
            visit(n)
    assert not cycles, cycles


# --- the two sides of the process boundary --------------------------------------------------
# The server process reads requests; the zygote and the sandboxed workers read untrusted text
# with the scorers. What crosses between them is the frame protocol (``protocol``, the
# worker frames; ``control``, the zygote's records) and the scorers' metadata (names, statuses,
# rule labels: no math-verify). Every import counts here, late ones too: a late import still
# loads the module into the server process.
SERVER_MAY_USE = {"reward_service", "reward_service.settings", "reward_service.errors",
                  "reward_service.logs", "reward_service.lru", "reward_service.protocol",
                  "reward_service.control", "reward_service.scorers",
                  "reward_service.scorers.base", "reward_service.scorers.registry",
                  "reward_service.scorers.rule_labels"}
SERVER_SIDE = ("reward_service.server", "reward_service.cli", "reward_service.__main__")
SANDBOX_SIDE = ("reward_service.sandboxed", "reward_service.scorers")


def _side(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def _reach(start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        n = todo.pop()
        for m in _imports(n, MODULES[n], late=True):
            if m not in seen:
                seen.add(m)
                todo.append(m)
    return seen


@pytest.mark.parametrize("name", sorted(n for n in MODULES if _side(n, SERVER_SIDE)))
def test_server_process_loads_nothing_of_the_sandbox_side(name: str) -> None:
    loaded = {m for m in _reach(name) if not _side(m, SERVER_SIDE)}
    assert loaded <= SERVER_MAY_USE, sorted(loaded - SERVER_MAY_USE)


@pytest.mark.parametrize("name", sorted(n for n in MODULES if _side(n, SANDBOX_SIDE)))
def test_sandbox_side_loads_nothing_of_the_server(name: str) -> None:
    assert not {m for m in _reach(name) if _side(m, SERVER_SIDE)}


def test_library_patches_only_through_their_entry() -> None:
    entry = "reward_service.scorers.patches"
    wrong = {f"{n} -> {m}" for n, path in MODULES.items() if not _side(n, (entry,))
             for m in _imports(n, path, late=True) if m.startswith(entry + ".")}
    assert not wrong, sorted(wrong)


def test_the_guards_can_fail() -> None:
    """The rules above see what they guard: the server reaches the pool and the metadata; the
    zygote reaches the scorers and the patches' entry."""
    assert {"reward_service.server.pool", "reward_service.scorers.registry"} <= _reach(
        "reward_service.server.app")
    assert {"reward_service.scorers.impl", "reward_service.scorers.patches"} <= _reach(
        "reward_service.sandboxed.zygote")
