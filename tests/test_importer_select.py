"""Selecting files of the paper's pinned folder (``mkb tasks import --official DIR --only ... / --per-category N``):
which files a selection picks, an unknown name refused by name, and every selected file still checked against
its pinned sha256.  A folder of our own stands in for the checkout (the real one: tests/test_official_mnn.py)."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import pytest

from kit.cli import main
from kit.suite.importer.official import PinError, Pins, load_pins, official_sources, select


def _pins(tmp_path: Path, per_cat: dict[str, int]) -> Pins:
    """A checkout of our own under ``tmp_path``: ``per_cat[C]`` files ``C/Op<i>.py``, and pins matching it."""
    files = {}
    for cat, n in per_cat.items():
        (tmp_path / cat).mkdir()
        for i in range(n):
            text = f"# {cat} op {i}\n".encode()
            (tmp_path / cat / f"Op{i}.py").write_bytes(text)
            files[f"{cat}/Op{i}.py"] = hashlib.sha256(text).hexdigest()
    return Pins("o/r", "0" * 40, "d", "p_", files)


def test_per_category_spreads_over_each_category(tmp_path):
    pins = _pins(tmp_path, {"Unary": 5, "Binary": 4, "Others": 1})
    assert select(pins, per_category=1) == ["Binary/Op2.py", "Others/Op0.py", "Unary/Op2.py"]
    assert select(pins, per_category=2) == ["Binary/Op1.py", "Binary/Op3.py", "Others/Op0.py", "Unary/Op1.py",
                                            "Unary/Op3.py"]
    assert select(pins, per_category=9) == sorted(pins.files)
    assert select(pins) == sorted(pins.files)
    assert select(pins, only=["Unary/Op0", "Binary/Op0.py"], per_category=1) == [
        "Binary/Op0.py", "Binary/Op2.py", "Others/Op0.py", "Unary/Op0.py", "Unary/Op2.py"]
    with pytest.raises(ValueError, match="give 1 or more"):
        select(pins, per_category=0)


def test_the_real_pins_give_one_file_of_each_of_the_12_categories():
    chosen = select(load_pins(), per_category=1)
    assert len(chosen) == 12 and len({rel.split("/")[0] for rel in chosen}) == 12
    assert "Binary/Mul.py" in chosen  # the one tests/test_official_mnn.py evaluates


def test_an_unknown_name_is_refused_naming_it(tmp_path):
    pins = _pins(tmp_path, {"Unary": 3})
    with pytest.raises(ValueError, match=r"^not a file of the pinned set o/r@00000000:d: 'Unary/Op7' \(did you mean "
                                         r"Unary/Op\d.py, Unary/Op\d.py, Unary/Op\d.py\?\); 'Nope.py'$"):
        select(pins, only=["Unary/Op1", "Unary/Op7", "Nope.py"])


def test_only_the_selected_files_are_checked_and_each_one_is(tmp_path):
    pins = _pins(tmp_path, {"Unary": 3, "Binary": 2})
    (tmp_path / "Binary" / "Op0.py").unlink()  # a partial checkout: fine unless a selected file is missing
    (tmp_path / "Unary" / "Extra.py").write_text("# not pinned\n")
    srcs = official_sources(tmp_path, pins, ["Unary/Op1.py", "Binary/Op1.py"])
    assert [(s.name, s.category) for s in srcs] == [("Binary/Op1.py", "binary"), ("Unary/Op1.py", "unary")]
    assert srcs[0].upstream == "o/r@" + "0" * 40 + ":d/Binary/Op1.py"
    (tmp_path / "Unary" / "Op1.py").write_text("# changed\n")
    with pytest.raises(PinError, match=r"1 file\(s\)\): Unary/Op1.py: sha256 .* differs from the pinned"):
        official_sources(tmp_path, pins, ["Unary/Op1.py", "Binary/Op1.py"])
    with pytest.raises(PinError, match=r"Binary/Op0.py: missing"):
        official_sources(tmp_path, pins, ["Binary/Op0.py"])
    with pytest.raises(PinError, match="Unary/Extra.py: not in the pinned set"):
        official_sources(tmp_path, pins, ["Unary/Extra.py"])


def test_the_command_refuses_before_importing_anything(tmp_path, capsys):
    """Exit 2 and one line naming the problem; --out is never written."""
    (tmp_path / "Binary").mkdir()
    (tmp_path / "Binary" / "Mul.py").write_text("# not the paper's file\n")
    out = tmp_path / "out"
    cases = [
        (["--only", "Binary/Mull"], "'Binary/Mull' (did you mean Binary/Mul.py"),
        (["--only", "Binary/Mul.py"], "Binary/Mul.py: sha256"),  # the selected file's hash is checked
        (["--per-category", "0"], "--per-category 0: give 1 or more"),
    ]
    for extra, message in cases:
        assert main(["tasks", "import", "--official", str(tmp_path), *extra, "--out", str(out)]) == 2
        assert message in capsys.readouterr().err
    assert main(["tasks", "import", str(tmp_path), "--only", "Binary/Mul.py", "--out", str(out)]) == 2
    assert "add --official" in capsys.readouterr().err
    assert main(["tasks", "import", "--official", "--only", "Binary/Mul.py", str(tmp_path), "--out", str(out)]) == 2
    assert "a folder, not a pinned file; give the checkout before --only" in capsys.readouterr().err
    assert not out.exists()


def test_without_the_tasks_extra_the_import_says_so_once_before_any_file(tmp_path, monkeypatch, capsys):
    """``onnx_ir`` missing (simulated): one line naming the extra and the install command, exit 2, nothing
    written; torch is asked for only when a problem file (.py) is among the sources."""
    monkeypatch.setitem(sys.modules, "onnx_ir", None)  # import onnx_ir now fails, as where it is not installed
    for name in ("a.onnx", "b.onnx", "c.py"):
        (tmp_path / name).write_bytes(b"")
    out = tmp_path / "out"
    assert main(["tasks", "import", str(tmp_path / "a.onnx"), str(tmp_path / "b.onnx"), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install -e '.[tasks]'" in err and "onnx_ir" in err
    assert "torch" not in err.split("not installed")[0]
    monkeypatch.setitem(sys.modules, "torch", None)
    assert main(["tasks", "import", str(tmp_path), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "onnx_ir" in err and "torch" in err.split("not installed")[0]
    assert not out.exists()
