"""The kit's architecture, read from its code: the packages by layer, the import graph, and the layer table of
docs/architecture.md.

Run ``python tests/archgraph.py --write`` after adding, moving or renaming a module: it rewrites the table
between the markers of docs/architecture.md (``tests/test_architecture.py`` fails while the page is stale).
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KIT = ROOT / "kit"
DOC = ROOT / "docs" / "architecture.md"
BEGIN, END = "<!-- layers:begin (tests/archgraph.py --write) -->", "<!-- layers:end -->"

#: the kit's packages, lowest layer first, with what each is for; a package imports only from its own layer and
#: the layers before it (``cli`` is the module ``kit/cli.py``, the only module at the top)
LAYERS: list[tuple[str, str]] = [
    ("results", "what a job yields: the record schema, the stages' outcomes, what a record may count for, Parquet "
                "shards and their on-disk schema"),
    ("host", "the machine the kit runs on: its facts, the build target, the sandbox, the one subprocess runner, the "
             "node's timing lock, shipped machine code, versions, progress bars"),
    ("settings", "the configuration: one TOML file, its sections, environment and CLI overrides; the TOML writer"),
    ("score", "CSR, FCR, fast_p, pass@k and their intervals; the summary line; the A/A noise floor"),
    ("images", "the pinned Docker images and a worker's container"),
    ("suite", "the task suite: task folders, their checks and audit, seeded inputs, ONNX Runtime references and the "
              "comparison with them, prompts, the importer"),
    ("candidates", "candidate sources: parsing answers, the allowlist, the native candidate"),
    ("generate", "answers from a model: the tasks' prompts sent to an OpenAI-compatible endpoint, written as a "
                 "JSONL candidate source"),
    ("baselines", "native times per hardware fingerprint (docs/scoring.md)"),
    ("mnn", "the MNN tree: workspaces, registering files, CMake/ninja, the converter, the kit's runner and its "
            "protocol, the native baseline"),
    ("devices", "timing on an adb device"),
    ("stages", "one stage each (build, screen, verify, timing): options in, outcome out"),
    ("job", "one job: its record, the stages in order (the one place an exception becomes a status), what a build "
            "or timing worker owns, the stages' options from the config, what travels between nodes"),
    ("run", "a run's jobs and their order, the run directory, provenance, the in-process executor"),
    ("dispatch", "the Ray executor (the only Ray code)"),
    ("report", "the HTML report"),
    ("outline", "the outline of a run (mkb eval, mkb check) and the A/A calibration"),
    ("bundle", "bundles: pack, validate, reproduce, compare"),
    ("serve", "mkb serve: verdicts over HTTP for agents and trainers (checks, queue, cache, journal, reward, tasks)"),
    ("bench", "benchmarks of the kit itself"),
    ("cli", "mkb, the command line"),
]
LAYER_OF = {name: i for i, (name, _) in enumerate(LAYERS)}


def modules() -> dict[str, Path]:
    """Dotted module name → file, for every module of the kit."""
    out = {}
    for p in sorted(KIT.rglob("*.py")):
        if "__pycache__" in p.parts:
            continue
        name = ".".join(p.relative_to(ROOT).with_suffix("").parts)
        out[name.removesuffix(".__init__")] = p
    return out


def _resolve(name: str, known: dict[str, Path]) -> str | None:
    parts = name.split(".")
    while parts:
        if ".".join(parts) in known:
            return ".".join(parts)
        parts.pop()
    return None


def imports() -> dict[str, set[str]]:
    """Module → the kit modules it imports (anywhere in the file: a function's late import counts too)."""
    known = modules()
    graph: dict[str, set[str]] = defaultdict(set)
    for name, path in known.items():
        for node in ast.walk(ast.parse(path.read_text())):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                targets = [f"{node.module}.{a.name}" for a in node.names]
            for t in targets:
                if t == "kit" or t.startswith("kit."):
                    r = _resolve(t, known)
                    if r is not None and r != name:
                        graph[name].add(r)
        graph.setdefault(name, set())
    return dict(graph)


def package(module: str) -> str:
    """The layer package of ``module`` (``kit.job.pipeline`` → ``job``; ``kit.cli`` → ``cli``)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import cycles of ``graph`` (its strongly connected components of more than one module; Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]
    sys.setrecursionlimit(10000)

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def up_imports(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """(importer, imported) pairs where a package imports from a higher layer (or from a package no layer names)."""
    bad = []
    for a, bs in sorted(graph.items()):
        for b in sorted(bs):
            pa, pb = package(a), package(b)
            if pa == pb or pb == "":
                continue
            if pa not in LAYER_OF or pb not in LAYER_OF or LAYER_OF[pb] > LAYER_OF[pa]:
                bad.append((a, b))
    return bad


def _summary(path: Path) -> str:
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    first = doc.split("\n\n")[0].replace("\n", " ").strip()
    return first.replace("|", "\\|")


def layer_table() -> str:
    """The Markdown table of docs/architecture.md: per layer (lowest first) its modules and their docstrings'
    first sentences."""
    by_pkg: dict[str, list[tuple[str, Path]]] = defaultdict(list)
    for name, path in modules().items():
        if name == "kit":
            continue
        by_pkg[package(name)].append((name, path))
    rows = ["| layer | package | module | what it is |", "|---|---|---|---|"]
    for i, (pkg, what) in enumerate(LAYERS):
        rows.append(f"| {i + 1} | **`{pkg}`** | | {what} |")
        for name, path in by_pkg.get(pkg, []):
            if name == f"kit.{pkg}" and pkg != "cli":
                continue
            rows.append(f"| | | `{name.removeprefix('kit.')}` | {_summary(path)} |")
    return "\n".join(rows) + "\n"


def write_doc() -> bool:
    """Rewrite the table of docs/architecture.md; True if it changed."""
    text = DOC.read_text()
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    new = f"{head}{BEGIN}\n{layer_table()}{END}{tail}"
    if new != text:
        DOC.write_text(new)
    return new != text


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        print("docs/architecture.md", "rewritten" if write_doc() else "already current")
    else:
        g = imports()
        for c in cycles(g):
            print("cycle:", " ".join(c))
        for a, b in up_imports(g):
            print(f"up: {a} -> {b}")
