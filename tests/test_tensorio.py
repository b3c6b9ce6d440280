"""Tensor directories (manifest.txt + raw .bin files): round trips and clear errors."""

from __future__ import annotations

import os

import numpy as np
import pytest

from kit.mnn import tensorio
from kit.mnn.tensorio import TensorIOError, read_manifest, read_tensors, to_wire, write_tensors


def test_round_trip_keeps_order_dtype_shape_and_values(tmp_path):
    rng = np.random.default_rng(0)
    tensors = {
        "x": rng.standard_normal((2, 3, 4)).astype(np.float32),
        "idx": rng.integers(-5, 5, size=(7,)).astype(np.int32),
        "scalar": np.array(3.5, dtype=np.float32),
        "empty": np.zeros((0, 4), dtype=np.float32),
        "b.1:z-y": np.arange(6, dtype=np.int32).reshape(3, 2),
    }
    write_tensors(tmp_path, tensors)
    back = read_tensors(tmp_path)
    assert list(back) == list(tensors)
    for name, a in tensors.items():
        assert back[name].dtype == a.dtype
        assert back[name].shape == a.shape
        np.testing.assert_array_equal(back[name], a)
        assert back[name].flags.writeable and back[name].nbytes == a.nbytes  # the buffer read into, cut to size


def test_manifest_format_and_raw_little_endian_bytes(tmp_path):
    write_tensors(tmp_path, {"a": np.array([[1.0, 2.0]], dtype=np.float32), "s": np.array(7, dtype=np.int32)})
    assert (tmp_path / "manifest.txt").read_text() == "a float32 2 1 2\ns int32 0\n"
    assert (tmp_path / "a.bin").read_bytes() == np.array([1.0, 2.0], dtype="<f4").tobytes()
    assert (tmp_path / "s.bin").read_bytes() == b"\x07\x00\x00\x00"


def test_non_contiguous_and_big_endian_arrays_are_written_in_c_order(tmp_path):
    a = np.arange(12, dtype=np.float32).reshape(3, 4).T  # Fortran-ordered view
    b = np.arange(4, dtype=">i4")
    write_tensors(tmp_path, {"a": a, "b": b})
    back = read_tensors(tmp_path)
    np.testing.assert_array_equal(back["a"], a)
    np.testing.assert_array_equal(back["b"], b)
    assert back["b"].dtype == np.int32


def test_write_refuses_other_dtypes_and_bad_names(tmp_path):
    with pytest.raises(TensorIOError, match="'x'.*int64"):
        write_tensors(tmp_path, {"x": np.zeros(3, dtype=np.int64)})
    with pytest.raises(TensorIOError, match="float64"):
        write_tensors(tmp_path, {"x": np.zeros(3)})
    for bad in ("a/b", "a b", "", ".hidden", "../x"):
        with pytest.raises(TensorIOError, match="cannot be used as a file name"):
            write_tensors(tmp_path, {bad: np.zeros(1, dtype=np.float32)})


def test_to_wire_casts_ints_and_bools_and_checks_range():
    assert to_wire("a", np.array([1, -2], dtype=np.int64)).dtype == np.int32
    np.testing.assert_array_equal(to_wire("b", np.array([True, False])), np.array([1, 0], dtype=np.int32))
    f = np.ones(2, dtype=np.float32)
    assert to_wire("f", f) is f
    with pytest.raises(TensorIOError, match="'big'.*int32"):
        to_wire("big", np.array([2**31], dtype=np.int64))
    with pytest.raises(TensorIOError, match="float16"):
        to_wire("h", np.ones(2, dtype=np.float16))


@pytest.mark.parametrize(
    ("manifest", "message"),
    [
        ("x float32\n", "expected 'name dtype ndim"),
        ("x float64 1 3\n", "dtype 'float64'"),
        ("x float32 2 3\n", "ndim 2 but 1 dims"),
        ("x float32 one 3\n", "must be integers"),
        ("x float32 1 -3\n", "negative dimension"),
        ("x float32 1 3\nx float32 1 3\n", "listed twice"),
        ("a/b float32 1 3\n", "cannot be used as a file name"),
    ],
)
def test_bad_manifest_names_file_and_line(tmp_path, manifest, message):
    (tmp_path / "x.bin").write_bytes(b"\0" * 12)
    lines = manifest.splitlines()
    (tmp_path / "manifest.txt").write_text("\n" + manifest)  # a blank first line: errors are on line >= 2
    with pytest.raises(TensorIOError, match=message) as info:
        read_tensors(tmp_path)
    expected_line = 2 if "twice" not in message else 1 + len(lines)
    assert f"{tmp_path / 'manifest.txt'}:{expected_line}:" in str(info.value)


def test_missing_manifest_and_data_errors_name_the_file(tmp_path):
    with pytest.raises(TensorIOError, match="manifest.txt: cannot read manifest"):
        read_manifest(tmp_path)
    (tmp_path / "manifest.txt").write_text("x float32 1 3\n")
    with pytest.raises(TensorIOError, match=r"x\.bin: cannot read tensor data"):
        read_tensors(tmp_path)
    (tmp_path / "x.bin").write_bytes(b"\0" * 8)
    with pytest.raises(TensorIOError, match=r"x\.bin: 8 bytes, manifest shape \[3\] float32 needs 12"):
        read_tensors(tmp_path)


def test_error_is_a_value_error():
    assert issubclass(tensorio.TensorIOError, ValueError)


# -- a runner's output directory is written by candidate code: what it may have planted there ----------------


def _one(tmp_path):
    write_tensors(tmp_path, {"y": np.arange(4, dtype=np.int32)})
    return tmp_path


def test_a_tensor_linked_to_dev_zero_is_refused_unread(tmp_path):
    """The reviewer's plant: y.bin -> /dev/zero made Path.read_bytes() read until memory ran out."""
    d = _one(tmp_path)
    (d / "y.bin").unlink()
    (d / "y.bin").symlink_to("/dev/zero")
    with pytest.raises(tensorio.PlantedFileError, match=r"y\.bin: a symbolic link, not a regular file"):
        read_tensors(d)


def test_a_linked_manifest_is_refused_so_no_host_file_reaches_a_message(tmp_path):
    secret = tmp_path / "host-secret.txt"
    secret.write_text("mkb-host-secret line\n")
    d = _one(tmp_path / "out")
    (d / "manifest.txt").unlink()
    (d / "manifest.txt").symlink_to(secret)
    with pytest.raises(tensorio.PlantedFileError) as info:
        read_tensors(d)
    assert "mkb-host-secret" not in str(info.value)
    with pytest.raises(tensorio.PlantedFileError):
        read_manifest(d)


def test_a_fifo_is_refused_without_blocking(tmp_path):
    d = _one(tmp_path)
    (d / "y.bin").unlink()
    os.mkfifo(d / "y.bin")  # no writer: an open without O_NONBLOCK would wait for ever
    with pytest.raises(tensorio.PlantedFileError, match="a FIFO, not a regular file"):
        read_tensors(d)


def test_a_linked_directory_below_the_root_is_refused(tmp_path):
    """out/checked/0/out -> elsewhere: with ``root`` every directory from the root down must be real."""
    elsewhere = _one(tmp_path / "elsewhere")
    root = tmp_path / "out"
    (root / "checked" / "0").mkdir(parents=True)
    (root / "checked" / "0" / "out").symlink_to(elsewhere)
    with pytest.raises(tensorio.PlantedFileError, match="not a directory"):
        read_tensors(root / "checked" / "0" / "out", root=root)
    (root / "checked" / "0" / "out").unlink()
    (root / "checked" / "0").rmdir()
    (root / "checked" / "0").symlink_to(elsewhere.parent)  # a link higher up
    with pytest.raises(tensorio.PlantedFileError):
        read_tensors(root / "checked" / "0" / "elsewhere", root=root)
    assert list(read_tensors(elsewhere)) == ["y"]  # the same directory, read as itself: fine


def test_a_manifest_that_claims_more_than_its_file_holds_costs_no_more_memory_than_the_file(tmp_path):
    """A planted manifest may claim 2 GB for a 16-byte file (the runner's output directory is the candidate's to
    write): refused as too short, with no buffer of the claimed size allocated first."""
    import tracemalloc  # noqa: PLC0415

    d = _one(tmp_path)
    (d / "manifest.txt").write_text("y float32 1 536870911\n")  # 2 GB claimed, y.bin holds 16 bytes
    tracemalloc.start()
    try:
        with pytest.raises(TensorIOError, match=r"y\.bin: 16 bytes, manifest shape \[536870911\] float32 needs"):
            read_tensors(d)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 << 20, peak  # the claimed 2 GB was allocated before the size check


def test_sizes_are_bounded_by_the_manifest_and_the_caps(tmp_path):
    d = _one(tmp_path)
    with open(d / "y.bin", "ab") as f:  # longer than its shape: refused after reading one byte more
        f.truncate(1 << 30)  # sparse: 1 GiB on paper
    with pytest.raises(TensorIOError, match=r"y\.bin: more bytes, manifest shape \[4\] int32 needs 16"):
        read_tensors(d)
    (d / "manifest.txt").write_text("y int32 3 65536 65536 65536\n")  # 2**50 bytes claimed
    with pytest.raises(tensorio.PlantedFileError, match="more than any tensor holds"):
        read_tensors(d)
    (d / "manifest.txt").write_bytes(b"#" * (tensorio.MAX_MANIFEST_BYTES + 1))
    with pytest.raises(tensorio.PlantedFileError, match="more than the"):
        read_tensors(d)
    with pytest.raises(tensorio.PlantedFileError, match="more than the"):
        read_manifest(d)


def test_read_regular_bounds_and_refuses_links(tmp_path):
    (tmp_path / "t.json").write_text("{}")
    assert tensorio.read_regular(tmp_path / "t.json", 10) == b"{}"
    with pytest.raises(tensorio.PlantedFileError, match="more than the 1 bytes"):
        tensorio.read_regular(tmp_path / "t.json", 1)
    (tmp_path / "z.json").symlink_to("/dev/zero")
    with pytest.raises(tensorio.PlantedFileError, match="symbolic link"):
        tensorio.read_regular(tmp_path / "z.json", 1 << 20)
