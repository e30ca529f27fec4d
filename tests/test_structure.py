"""The package's shape: an import graph without circles, one public face for the model package, and a command
line that no library module imports."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FILES = {**{p: "contextembed." + ".".join(p.relative_to(ROOT / "contextembed").with_suffix("").parts)
            for p in (ROOT / "contextembed").rglob("*.py")},
         **{p: "contextembed.modeling." + p.stem for p in (ROOT / "modeling").glob("*.py")}}
MODULES = {name.removesuffix(".__init__"): path for path, name in FILES.items()}


def imports(path: Path, module: str) -> set[str]:
    """Every contextembed module `path` imports, at the top or inside a function (relative imports resolved)."""
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            # `from package import submodule` needs the submodule; `from module import name` needs the module.
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
        else:
            continue
        found |= {n for n in names if n in MODULES}
    return found - {module}


GRAPH = {module: imports(path, module) for module, path in MODULES.items()}


def test_no_library_module_imports_the_command_line():
    offenders = {m for m, deps in GRAPH.items() if not m.startswith("contextembed.cli") and m != "contextembed.__main__"
                 and any(d.startswith("contextembed.cli") for d in deps)}
    assert not offenders


def test_the_model_package_is_imported_through_its_face_only():
    files = {"contextembed.modeling." + name for name in ("configuration_contextembed", "modeling_contextembed",
                                                           "processing_contextembed")}
    offenders = {m for m, deps in GRAPH.items() if not m.startswith("contextembed.modeling") and deps & files}
    assert not offenders


def test_the_import_graph_has_no_circle():
    # The root package is the facade that re-exports everything, so edges into it are left out.
    graph = {m: {d for d in deps if d != "contextembed"} for m, deps in GRAPH.items()}
    state: dict[str, int] = {}

    def visit(node, path):
        state[node] = 1
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == 1:
                raise AssertionError(" -> ".join(path[path.index(dep):] + [dep]))
            if dep not in state:
                visit(dep, path + [dep])
        state[node] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])


def test_the_graph_sees_the_imports():
    # The checks above prove something only if the parser finds imports: a few that must be there.
    assert "contextembed.cli.options" in GRAPH["contextembed.cli.corpus"]
    assert "contextembed.modeling" in GRAPH["contextembed.encoder"]
    model_files = {m for m in GRAPH if m.startswith("contextembed.modeling.")}
    assert len(model_files) == 6 and any(GRAPH[m] & model_files for m in model_files)  # the files import each other


def test_nothing_in_the_product_reads_research():
    """research/ holds records: the package, the benchmarks, the examples and the data builders never import or read it,
    and no test imports it."""
    offenders = []
    for folder in ("contextembed", "modeling", "tests", "bench", "examples", "data_builders"):
        strings_too = folder != "tests"  # a test may name research/ to check it stays out of the wheel
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                         else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
                strings = ([node.value] if strings_too and isinstance(node, ast.Constant) and isinstance(node.value, str)
                           else [])
                if any(n.split(".")[0] == "research" for n in names) or any(
                        s == "research" or s.startswith("research/") for s in strings):
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not offenders
