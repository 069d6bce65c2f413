"""The import graph of the packages, read with ast from the source files (nothing is imported).

Checks the layout rule of DESIGN.md: harness/ is the core and imports nothing from trainer/ or evals/ (they plug in
through the entry-point hook, harness.hooks), trainer and evals never import each other, and no module of the
packages takes part in an import loop. Every import counts, also those inside functions, except those under
``if TYPE_CHECKING:``.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("harness", "rewards", "sandbox", "trainer", "evals")
#: What each package must never import. (The demo runs the trainer and the evaluator through their commands.)
FORBIDDEN = {"harness": ("trainer", "evals"), "trainer": ("evals",), "evals": ("trainer",)}


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    return skip


def _imports(path: Path, module: str) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip, out = _type_checking_nodes(tree), set[str]()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            out.add(base)
            out.update(f"{base}.{a.name}" for a in node.names)  # `from pkg import submodule`
    return {m for m in out if m.split(".")[0] in PACKAGES}


def import_graph() -> dict[str, set[str]]:
    """Module -> the modules of the packages it imports (only names that are modules of the packages)."""
    files = {_module_name(p): p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")}
    graph = {}
    for module, path in files.items():
        targets = set()
        for name in _imports(path, module):
            while name and name not in files:  # `from pkg.mod import name` -> pkg.mod
                name = name.rpartition(".")[0]
            if name and name != module:
                targets.add(name)
        graph[module] = targets
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each an import loop."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _package_of(module: str) -> str:
    return module.split(".")[0]


def test_the_graph_is_read():  # the reader sees known edges, so the rules below check a real graph
    graph = import_graph()
    assert "harness.types" in graph["harness.registry"]
    assert "trainer.config" in graph["trainer.loop"]
    assert "harness.scoring" in graph["evals.runner"]


def test_no_package_imports_what_the_layout_forbids():
    bad = []
    for module, targets in import_graph().items():
        banned = FORBIDDEN.get(_package_of(module), ())
        bad += [f"{module} -> {t}" for t in sorted(targets) if _package_of(t) in banned]
    assert not bad, "imports the layout forbids (DESIGN.md):\n" + "\n".join(bad)


def test_no_import_loop():
    graph = {m: {t for t in ts if not t.startswith(m + ".")} for m, ts in import_graph().items()}
    # a package importing its own submodules in __init__ is not a loop; a submodule importing the package back is
    loops = _cycles(graph)
    assert not loops, "import loops:\n" + "\n".join(" <-> ".join(c) for c in loops)


def test_the_checks_catch_a_loop_and_a_forbidden_edge():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _package_of("trainer.loop") in FORBIDDEN["harness"]
