"""The rules of the house (docs/architecture.md), checked on the code: packages by layer, imports only downwards,
no import cycle, no module at the top but cli.py, one class per name, few parameters, and the page's layer table
current."""

from __future__ import annotations

import ast
from collections import defaultdict

import archgraph

#: functions that build data (the built-in suite's task definitions: one keyword per field of a task), exempt
#: from the parameter limit like a dataclass's constructor
DATA_CONSTRUCTORS = {"kit/suite/defs_elementwise.py", "kit/suite/defs_tensor.py", "kit/suite/defs_window.py"}
#: the most parameters a function takes (self and cls not counted; *args and **kwargs count one each)
MAX_PARAMS = 7


def test_every_package_has_a_layer_and_imports_only_downwards():
    graph = archgraph.imports()
    packages = {archgraph.package(m) for m in graph if m != "kit"}
    assert packages - set(archgraph.LAYER_OF) == set(), "a package no layer names: add it to archgraph.LAYERS"
    assert archgraph.up_imports(graph) == []


def test_no_import_cycle():
    assert archgraph.cycles(archgraph.imports()) == []


def test_no_module_at_the_top_but_cli():
    top = sorted(p.name for p in archgraph.KIT.glob("*.py"))
    assert top == ["__init__.py", "cli.py"]


def test_no_two_classes_of_one_name():
    where = defaultdict(list)
    for name, path in archgraph.modules().items():
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef):
                where[node.name].append(name)
    assert {k: v for k, v in where.items() if len(v) > 1} == {}


def _params(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    a = fn.args
    names = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs]
    if names and names[0] in ("self", "cls"):
        names = names[1:]
    return len(names) + (a.vararg is not None) + (a.kwarg is not None)


def test_functions_take_few_parameters():
    over = []
    for path in archgraph.modules().values():
        rel = path.relative_to(archgraph.ROOT).as_posix()
        if rel in DATA_CONSTRUCTORS:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and _params(node) > MAX_PARAMS:
                over.append(f"{rel} {node.name}")
    assert sorted(over) == [], "a function over the limit: pass a typed record instead"


def test_the_layer_table_of_docs_architecture_is_current():
    text = archgraph.DOC.read_text()
    assert archgraph.BEGIN in text and archgraph.END in text
    table = text.split(archgraph.BEGIN, 1)[1].split(archgraph.END, 1)[0].strip()
    assert table == archgraph.layer_table().strip(), "run: python tests/archgraph.py --write"
