"""The runner's stream of clock stamps (:mod:`kit.mnn.runner` states the protocol): parsed out of its stderr,
checked for form, turned into the samples of a timing run and compared with what ``timing.json`` says.

Why a stream: the candidate's library runs in the runner's address space, so whatever the runner keeps in its
memory while candidate code runs (its arrays of times, a forward's start time on the stack, the op clock) can be
edited without a system call (the corpus's ``scales_recorded_times`` scaled the recorded times by 0.25: ``ok``,
4.33x).  Each clock reading a sample is made of is written to stderr by the runner (one ``write`` system call
made by the instruction itself) before any candidate code runs again; once in the pipe it is out of reach.

Lines (``<ns>``: CLOCK_MONOTONIC in integer nanoseconds, lower-case hex; ``<i>``: the 1-based number of the
timed forward, decimal)::

    @mkbt F <i> <ns> <cpu>  timed forward i begins (the clock read, the line written, then the forward); <cpu>:
                        the runner's main thread's CPU time (CLOCK_THREAD_CPUTIME_ID), hex nanoseconds
    @mkbt b <ns> <T>    an op of (MNN) op type T begins, in the before-op callback: every op, whatever
                        ``--op-types`` says (the kit selects the timed types itself, below)
    @mkbt e <ns>        that op ends, in the after-op callback
    @mkbt E <i> <ns> <cpu>  timed forward i ends

Nothing here turns a finding into a record status: :func:`parse` raises :class:`StampError`, and the caller
(:meth:`kit.mnn.runcall.RunnerCall.finish`, through :func:`take_out` and :func:`samples`) keeps its message in the :class:`~kit.mnn.runresult.RunResult` for the
timing stage (:func:`kit.stages.timingrun.go_run`: ``clock_mismatch``).

Why every op, with its type: the runner's choice of the ops it times (``--op-types``) and its counts of the ops
run per type (``timing.json``'s ``op_types``, the proof that the candidate's kernel ran) are kept in its memory
too.  A candidate that edited both (its own op dropped from the selection, the counts kept plausible) would be
timed on nothing; with every op stamped the kit selects and counts from the stream, and the runner's own
selection and counts are only compared.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from kit.host import proc
from kit.mnn.runresult import Timing

#: what every stamp line starts with (MNN prints nothing like it)
PREFIX = "@mkbt"
_LINE = re.compile(r"@mkbt (?:([FE]) ([1-9][0-9]{0,8}) ([0-9a-f]{1,16})(?: ([0-9a-f]{1,16}))?|"
                   r"b ([0-9a-f]{1,16}) ([A-Za-z0-9_]{1,48})|e ([0-9a-f]{1,16}))")
#: allowed difference per time between timing.json (printed, rounded) and the stream, ms: 1 us
TOLERANCE_MS = 1e-3


class StampError(ValueError):
    """The stamp stream is missing, malformed or disagrees with ``timing.json``; the message says where."""


@dataclass(frozen=True)
class Stream:
    """What a timing run's stamps say, per timed forward (in order): ``total_ms`` (end - begin, ms) and
    ``op_ns`` (op type → the summed end - begin of its ops, integer ns) and ``op_counts`` (op type → ops run);
    ``cpu_ns``: the runner's main thread's CPU time (ns) at each forward's begin and end stamp (empty where the lines carry
    none)."""

    total_ms: list[float]
    op_ns: list[dict[str, int]]
    op_counts: list[dict[str, int]]
    cpu_ns: list[tuple[int, int]] = field(default_factory=list)

    def op_ms(self, selected: Sequence[str]) -> list[float]:
        """Per forward, the summed time (ms) of its ops of the ``selected`` types (``"*"``: every op)."""
        return [sum(ns for t, ns in f.items() if "*" in selected or t in selected) / 1e6 for f in self.op_ns]


def split(text: str) -> tuple[list[str], str]:
    """The stamp lines of ``text`` (every line that holds :data:`PREFIX` anywhere, in order) and the rest of it."""
    stamps, rest = [], []
    for line in text.splitlines(keepends=True):
        (stamps if PREFIX in line else rest).append(line)
    return [s.rstrip("\n") for s in stamps], "".join(rest)


class _Reader:
    """The state machine of :func:`parse`: one forward open at a time, one op open at a time inside it."""

    def __init__(self) -> None:
        self.total_ms: list[float] = []
        self.op_ns: list[dict[str, int]] = []
        self.op_counts: list[dict[str, int]] = []
        self.forward = 0  # the open forward's number (0: none open)
        self.begin = self.op_begin = self.last = -1
        self.op_type = ""
        self.cpu: list[int | None] = []  # the CPU field of every forward stamp, in order

    def take(self, no: int, kind: str, index: int, ns: int, op_type: str = "") -> None:
        where = f"stamp line {no} ({kind}" + (f" {index}" if kind in "FE" else "") + ")"
        problem = self._misplaced(kind, index)
        if problem:
            raise StampError(f"{where}: {problem}")
        if ns < self.last:
            raise StampError(f"{where}: the clock went back ({ns - self.last} ns), or the lines are out of order")
        self.last = ns
        if kind == "F":
            self.forward, self.begin = index, ns
            self.op_ns.append({})
            self.op_counts.append({})
        elif kind == "E":
            self.total_ms.append((ns - self.begin) / 1e6)
            self.forward = 0
        elif kind == "b":
            self.op_begin, self.op_type = ns, op_type
        else:
            times, counts = self.op_ns[-1], self.op_counts[-1]
            times[self.op_type] = times.get(self.op_type, 0) + ns - self.op_begin
            counts[self.op_type] = counts.get(self.op_type, 0) + 1
            self.op_begin = -1

    def _misplaced(self, kind: str, index: int) -> str:
        """Why a stamp of ``kind`` (forward ``index``) cannot come now, or ""."""
        if kind == "F" and (self.forward or index != len(self.total_ms) + 1):
            if self.forward:
                return f"forward {index} begins while forward {self.forward} is open (an end missing, or lines repeated)"
            return f"forward {index} begins, expected forward {len(self.total_ms) + 1}"
        if kind == "E" and (index != self.forward or self.op_begin >= 0):
            return f"forward {index} ends, but " + (f"an op of forward {index} is open" if index == self.forward
                                                    else f"the open forward is {self.forward or 'none'}")
        if kind == "b" and (not self.forward or self.op_begin >= 0):
            return "an op begins " + ("outside every forward" if not self.forward
                                      else "while another is open (a duplicated line?)")
        if kind == "e" and self.op_begin < 0:
            return "an op ends that did not begin (a duplicated line?)"
        return ""


def parse(lines: Sequence[str], iterations: int) -> Stream:
    """The :class:`Stream` of the stamp ``lines`` (:func:`split`) of a run with ``iterations`` timed forwards.

    Raises:
        StampError: a line not in the form above, a forward missing, repeated or out of order, an op stamp
            outside its forward or unpaired, a clock that goes back, forwards that ran different ops (the same
            model on the same shapes runs the same ops), or forwards that ran no op at all (every model runs
            one: a runner whose timing was switched off in its memory)."""
    reader = _Reader()
    for no, line in enumerate(lines, 1):
        m = _LINE.fullmatch(line)
        if m is None:
            raise StampError(f"stamp line {no} is malformed: {line[:80]!r} (forged, or cut by another write)")
        kind = m.group(1) or ("b" if m.group(5) else "e")
        ns = m.group(3) or m.group(5) or m.group(7)
        reader.take(no, kind, int(m.group(2) or 0), int(ns, 16), m.group(6) or "")
        if m.group(1):
            reader.cpu.append(int(m.group(4), 16) if m.group(4) else None)
    if reader.forward:
        raise StampError(f"forward {reader.forward} began but never ended in the stamp stream")
    if len(reader.total_ms) != iterations:
        raise StampError(f"the stamp stream holds {len(reader.total_ms)} timed forwards, expected {iterations}")
    counts = reader.op_counts
    if any(c != counts[0] for c in counts):
        i = next(k for k, c in enumerate(counts) if c != counts[0])
        raise StampError(f"forward {i + 1} ran the ops {_named(counts[i])} in the stamp stream, forward 1 "
                         f"{_named(counts[0])}")
    if counts and not counts[0]:
        raise StampError("the stamp stream holds no op at all per forward (every model runs one)")
    return Stream(reader.total_ms, reader.op_ns, counts, _cpu_pairs(reader.cpu))


def _cpu_pairs(cpu: list[int | None]) -> list[tuple[int, int]]:
    """The CPU times of the forward stamps as (begin, end) per forward; empty when no line carries one.

    Raises:
        StampError: some forward stamps carry one and others not, or the CPU time goes back."""
    if all(c is None for c in cpu):
        return []
    if any(c is None for c in cpu):
        raise StampError("some forward stamps carry the CPU time and others do not")
    known = [c for c in cpu if c is not None]
    if any(b < a for a, b in zip(known, known[1:])):
        raise StampError("the CPU time went back between two forward stamps")
    return list(zip(known[0::2], known[1::2]))


def _named(counts: Mapping[str, int]) -> str:
    return "{" + ", ".join(f"{t}: {n}" for t, n in sorted(counts.items())) + "}"


def compare(stream: Stream, op_ms: Sequence[float], total_ms: Sequence[float], op_types: Mapping[str, int],
            selected: Sequence[str]) -> None:
    """Check ``timing.json``'s arrays (``op_ms`` of the ``selected`` types, ``total_ms``; ms) and its op counts
    (``op_types``: type → ops per forward) against the stream: every time within :data:`TOLERANCE_MS` (print
    rounding), the counts equal.

    Raises:
        StampError: naming the first forward that disagrees, both values and their ratio."""
    streamed_op_ms = stream.op_ms(selected)
    for name, recorded, streamed in (("total_ms", total_ms, stream.total_ms), ("op_ms", op_ms, streamed_op_ms)):
        if len(recorded) != len(streamed):
            raise StampError(f"timing.json has {len(recorded)} {name}, the stamp stream {len(streamed)}")
        for i, (r, s) in enumerate(zip(recorded, streamed)):
            if abs(r - s) > TOLERANCE_MS + 1e-8 * abs(s):
                ratio = f" (recorded {r / s:.3g}x of what was streamed)" if s > 0 else ""
                raise StampError(f"forward {i + 1}: timing.json {name} {r:.6f} ms, the stamp stream {s:.6f} ms{ratio}")
    if stream.op_counts and dict(op_types) != stream.op_counts[0]:
        raise StampError(f"timing.json counts the ops {_named(op_types)} per forward, the stamp stream "
                         f"{_named(stream.op_counts[0])}")


def take_out(result: proc.ProcResult) -> tuple[proc.ProcResult, list[str] | str]:
    """``result`` with the stamp lines taken out of its stderr and stdout, and those lines (from stderr; from
    stdout where stderr has none: an old adb merges the two), or why they cannot be read (stamp lines on both)."""
    err_lines, err = split(result.stderr)
    out_lines, out = split(result.stdout)
    if err_lines and out_lines:
        lines: list[str] | str = f"{len(out_lines)} stamp lines on stdout besides those on stderr (forged)"
    else:
        lines = err_lines or out_lines
    if not err_lines and not out_lines:
        return result, lines
    return replace(result, stderr=err, stdout=out), lines


def samples(lines: list[str] | str, t: Timing, iterations: int, op_types: Sequence[str]
            ) -> tuple[list[float], list[float], dict[str, int], str, list[tuple[int, int]]]:
    """``op_ms`` (of the ``op_types`` selected), ``total_ms`` (ms), the op counts per forward (type → ops), the
    stamp error of a timing run and the main thread's CPU time at each forward's begin and end (ns,
    :attr:`Stream.cpu_ns`): the stream's where it is well formed and agrees with ``timing.json`` (``t``), else
    ``t``'s with the reason (and no CPU times).  The kit keeps the stamp lines apart from the rest of the output
    (:mod:`kit.host.proc.capture`): a stream cut at its cap ends in a note line holding :data:`PREFIX`, which
    is malformed."""
    try:
        if isinstance(lines, str):
            raise StampError(lines)
        stream = parse(lines, iterations)
        compare(stream, t.op_ms, t.total_ms, t.op_types, op_types)
    except StampError as e:
        return t.op_ms, t.total_ms, t.op_types, str(e), []
    counts = dict(stream.op_counts[0]) if stream.op_counts else {}
    return stream.op_ms(op_types), stream.total_ms, counts, "", stream.cpu_ns
