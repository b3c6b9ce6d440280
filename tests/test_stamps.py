"""The stamp stream of a timing run (kit.mnn.stamps): its form, the samples rebuilt from it, its comparison with
timing.json; and the fixture engine's runner writing it (a real run)."""

from __future__ import annotations

import pytest

from kit.mnn import stamps


def _stream(forwards: list[list[tuple]], begin: int = 10_000_000_000, gap: int = 1_000) -> list[str]:
    """Stamp lines of forwards given as (op begin, op end[, op type]) offsets in ns from the forward's begin
    (type ArgMax unless given); each forward ends 500 ns after its last op (or its begin) and the next begins
    ``gap`` ns later."""
    lines, t = [], begin
    for i, ops in enumerate(forwards, 1):
        lines.append(f"@mkbt F {i} {t:x}")
        end = t
        for b, e, *kind in ops:
            lines += [f"@mkbt b {t + b:x} {kind[0] if kind else 'ArgMax'}", f"@mkbt e {t + e:x}"]
            end = t + e
        lines.append(f"@mkbt E {i} {end + 500:x}")
        t = end + 500 + gap
    return lines


def test_split_takes_every_line_with_the_prefix_out():
    text = "mnn says hi\n@mkbt F 1 a\nwarning: x @mkbt b 3 Cast\n@mkbt E 1 f\nlast"
    lines, rest = stamps.split(text)
    assert lines == ["@mkbt F 1 a", "warning: x @mkbt b 3 Cast", "@mkbt E 1 f"]
    assert rest == "mnn says hi\nlast"


def test_well_formed_stream_gives_the_samples():
    lines = _stream([[(100, 2_100), (3_000, 4_000, "Raster")], [(50, 1_050), (2_000, 2_500, "Raster")]])
    s = stamps.parse(lines, 2)
    assert s.total_ms == pytest.approx([4_500e-6, 3_000e-6])
    assert s.op_ms(("*",)) == pytest.approx([3_000e-6, 1_500e-6])
    assert s.op_ms(("ArgMax",)) == pytest.approx([2_000e-6, 1_000e-6])  # the kit selects, not the runner
    assert s.op_ms(("Softmax",)) == [0.0, 0.0]
    assert s.op_counts == [{"ArgMax": 1, "Raster": 1}] * 2


@pytest.mark.parametrize("edit, why", [
    (lambda ls: ls[:-1], "never ended"),                                   # the last forward's end missing
    (lambda ls: [x for x in ls if not x.startswith("@mkbt F 2")], "outside every forward"),  # a begin missing
    (lambda ls: [x for x in ls if not x.startswith("@mkbt E 1")], "forward 2 begins while forward 1 is open"),
    (lambda ls: ls + ls[-4:], "forward 2 begins, expected forward 3"),     # a forward repeated (forged lines)
    (lambda ls: ls[:2] + [ls[1]] + ls[2:], "while another is open"),        # an op begin duplicated
    (lambda ls: ls[:3] + [ls[2]] + ls[3:], "did not begin"),                # an op end duplicated
    (lambda ls: [ls[4], *ls[:4], *ls[5:]], "expected forward 1"),          # reordered
    (lambda ls: [*ls[:1], ls[2], ls[1], *ls[3:]], "did not begin"),         # an op's stamps swapped
    (lambda ls: ls[:4] + ["@mkbt b 2540be401 ArgMax", "@mkbt e 2540be402"] + ls[4:], "outside every forward"),
    (lambda ls: ls[:1] + ["@mkbt b 2540be3ff ArgMax"] + ls[1:], "went back"),  # an op before its forward began
    (lambda ls: [ls[0], ls[1].rsplit(" ", 1)[0], *ls[2:]], "malformed"),  # an op begin without its type
    (lambda ls: [ls[0], ls[1] + "/x", *ls[2:]], "malformed"),             # a type not of word characters
    (lambda ls: ls[:2] + ["@mkbt F 1"] + ls[2:], "malformed"),
    (lambda ls: ls[:2] + ["@mkbt F 1 2540be4\u00a000"] + ls[2:], "malformed"),
    (lambda ls: ls[:2] + ["junk@mkbt e 2540be500"] + ls[2:], "malformed"),  # cut by another write
    (lambda ls: ls[:2] + ["@mkbt e 2540BE500"] + ls[2:], "malformed"),      # upper case: not the runner's
])
def test_broken_streams_are_refused(edit, why):
    lines = _stream([[(100, 2_100)], [(50, 1_050)]])
    with pytest.raises(stamps.StampError, match=why):
        stamps.parse(edit(lines), 2)


def test_wrong_number_of_forwards_and_of_ops():
    with pytest.raises(stamps.StampError, match="holds 1 timed forwards, expected 2"):
        stamps.parse(_stream([[(1, 2)]]), 2)
    with pytest.raises(stamps.StampError, match=r"forward 2 ran the ops \{\} in the stamp stream, forward 1 "
                                                r"\{ArgMax: 1\}"):
        stamps.parse(_stream([[(1, 2)], []]), 2)
    with pytest.raises(stamps.StampError, match=r"forward 2 ran the ops \{Cast: 1\}"):
        stamps.parse(_stream([[(1, 2)], [(1, 2, "Cast")]]), 2)


def test_forged_stamps_of_a_faster_run_make_duplicates():
    """A candidate that prints a whole forged stream of its own beside the runner's: every forward twice."""
    real = _stream([[(100, 4_100)], [(100, 4_100)]])
    forged = _stream([[(100, 1_100)], [(100, 1_100)]], begin=10_000_000_000)
    mixed = [x for pair in zip(real, forged) for x in pair]
    with pytest.raises(stamps.StampError):
        stamps.parse(mixed, 2)
    with pytest.raises(stamps.StampError):
        stamps.parse(real + forged, 2)


def test_compare_names_the_forward_and_the_ratio():
    s = stamps.parse(_stream([[(0, 4_000_000)], [(0, 4_000_000)]]), 2)
    assert s.total_ms == pytest.approx([4.0005, 4.0005])
    stamps.compare(s, [4.0, 4.0], [4.0005, 4.0005], {"ArgMax": 1}, ("ArgMax",))
    stamps.compare(s, [4.0004, 4.0], [4.0005, 4.0005], {"ArgMax": 1}, ("*",))  # within 1 us: print rounding
    stamps.compare(s, [0.0, 0.0], [4.0005, 4.0005], {"ArgMax": 1}, ("Softmax",))  # a type the model does not run
    with pytest.raises(stamps.StampError, match=r"forward 2: timing.json op_ms 1\.000000 ms, the stamp stream "
                                                r"4\.000000 ms \(recorded 0\.25x of what was streamed\)"):
        stamps.compare(s, [4.0, 1.0], [4.0005, 4.0005], {"ArgMax": 1}, ("ArgMax",))
    with pytest.raises(stamps.StampError, match="forward 1: timing.json total_ms"):
        stamps.compare(s, [4.0, 4.0], [1.0, 4.0005], {"ArgMax": 1}, ("ArgMax",))
    with pytest.raises(stamps.StampError, match=r"timing.json counts the ops \{ArgMax: 1, Raster: 2\} per forward, "
                                                r"the stamp stream \{ArgMax: 1\}"):
        stamps.compare(s, [4.0, 4.0], [4.0005, 4.0005], {"ArgMax": 1, "Raster": 2}, ("*",))


def test_a_runner_whose_selection_and_counts_were_edited_is_timed_by_the_stream():
    """A candidate that drops its own op from the runner's selection in memory (timing.json's op_ms then counts
    only a cheap op) and keeps the counts plausible: the kit selects from the stream and sees the difference."""
    s = stamps.parse(_stream([[(0, 100, "Cast"), (200, 4_000_200)], [(0, 100, "Cast"), (200, 4_000_200)]]), 2)
    with pytest.raises(stamps.StampError, match=r"forward 1: timing.json op_ms 0\.000100 ms, the stamp stream "
                                                r"4\.000000 ms"):
        stamps.compare(s, [0.0001, 0.0001], s.total_ms, {"ArgMax": 1, "Cast": 1}, ("ArgMax",))


def test_a_forward_with_no_op_at_all_is_refused():
    """Every model runs an op; a stream of none means the runner's timing was switched off in its memory."""
    with pytest.raises(stamps.StampError, match="no op at all"):
        stamps.parse(_stream([[], []]), 2)


def _proc(stdout: str, stderr: str, truncated: bool = False):
    from kit.host.proc import ProcResult

    return ProcResult(("mkb_runner",), 0, stdout, stderr, 0.1, truncated=truncated)


def _timing(op_ms, total_ms):
    from kit.mnn.runresult import Timing

    return Timing(list(op_ms), list(total_ms), {"ArgMax": 1}, 10.0, [], 11.0)


def test_the_runner_result_takes_the_stamps_out_of_stderr_or_of_a_merged_stdout():
    lines = _stream([[(0, 4_000_000)]])
    res, got = stamps.take_out(_proc("mnn: hi\n", "warn\n" + "\n".join(lines) + "\n"))
    assert got == lines and res.stderr == "warn\n" and res.stdout == "mnn: hi\n"
    # an old adb merges stderr into stdout: the stamps are read there
    res, got = stamps.take_out(_proc("mnn: hi\n" + "\n".join(lines) + "\n", ""))
    assert got == lines and res.stdout == "mnn: hi\n"
    # stamps on both streams: the stdout ones are not the runner's
    _, got = stamps.take_out(_proc(lines[0] + "\n", "\n".join(lines) + "\n"))
    assert isinstance(got, str) and "on stdout" in got
    t = _timing([4.0], [4.0005])
    assert stamps.samples(lines, t, 1, ("ArgMax",))[2:4] == ({"ArgMax": 1}, "")
    # stamp lines beyond the kit's cap: the capture's note line holds the prefix and is malformed
    cut = [*lines, "@mkbt [123 bytes of lines holding this text left out: the kit keeps 16777216]"]
    assert "is malformed" in stamps.samples(cut, t, 1, ("ArgMax",))[3]
    op_ms, total_ms, _, why, _ = stamps.samples(lines, _timing([1.0], [4.0005]), 1, ("ArgMax",))
    assert "recorded 0.25x of what was streamed" in why and op_ms == [1.0]  # the failed run keeps timing.json's
