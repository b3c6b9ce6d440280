"""Compiler and linker diagnostics parsed from real g++ output."""

from __future__ import annotations

from kit.host import proc
from kit.mnn.build import parse_diagnostics


def test_gcc_errors_with_context(tmp_path):
    src = tmp_path / "src"
    (src / "source").mkdir(parents=True)
    bad = src / "source" / "CPUBad.cpp"
    bad.write_text("#include <vector>\nint f() {\n  std::vektor<int> v;\n  return undefined_thing;\n}\n")
    res = proc.run(["g++", "-c", bad, "-o", tmp_path / "x.o"], cwd=tmp_path, timeout_s=60)
    assert not res.ok
    diags = parse_diagnostics(res.output, src)
    errors = [d for d in diags if d.severity == "error"]
    assert len(errors) >= 2
    assert errors[0].file == "source/CPUBad.cpp"
    assert errors[0].line == 3 and errors[0].column is not None
    assert "vektor" in errors[0].message
    assert "std::vektor" in errors[0].context  # the source excerpt follows the message
    assert any(d.line == 4 and "undefined_thing" in d.message for d in errors)


def test_linker_undefined_reference(tmp_path):
    main = tmp_path / "main.cpp"
    main.write_text("void ___CPUArgMaxCreator__OpType_ArgMax__();\nint main() { ___CPUArgMaxCreator__OpType_ArgMax__(); }\n")
    res = proc.run(["g++", main, "-o", tmp_path / "a.out"], cwd=tmp_path, timeout_s=60)
    assert not res.ok
    diags = parse_diagnostics(res.output, tmp_path)
    linker = [d for d in diags if d.severity == "linker"]
    assert linker and "undefined reference" in linker[0].message
    assert "CPUArgMaxCreator" in linker[0].message


def test_clean_log_has_no_diagnostics(tmp_path):
    assert parse_diagnostics("[1/2] Building CXX object x.o\n[2/2] Linking CXX shared library libMNN.so\n", tmp_path) == []
