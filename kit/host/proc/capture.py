"""One output stream of a command, kept within a bound as it is read: :class:`Capture`.

Why: the kit kept all a command printed and then copied it to decode it; a candidate's runner that printed
1 GiB took the kit's process to 2.3 GB.  Now a stream holds at most its head and tail (``limit`` bytes in all),
the lines holding ``marker`` (a timing run's clock stamps, :mod:`kit.mnn.stamps`) up to ``keep_bytes``, and one
line being assembled (at most :data:`MAX_LINE` bytes), whatever the command prints.
"""

from __future__ import annotations

#: bytes of a line held while its end is awaited; a longer line is no marker line the kit wants whole (a stamp
#: is under 100 bytes): it goes to the head and tail, and a marker in it is kept as a note (:meth:`Capture.feed`)
MAX_LINE = 4096


class Capture:
    """What the kit keeps of one stream: the first ``limit // 4`` and the last ``limit - limit // 4`` bytes of
    it, and, with ``marker``, every complete line holding ``marker`` (up to ``keep_bytes`` of such lines, in
    order), taken out of the rest.  Memory: at most ``limit + keep_bytes + MAX_LINE`` bytes and one read chunk."""

    def __init__(self, limit: int, marker: bytes = b"", keep_bytes: int = 0) -> None:
        self.limit, self.marker, self.keep_bytes = limit, marker, keep_bytes
        self.head = bytearray()
        self.tail = bytearray()
        self.cut = 0  # bytes of the rest left out between head and tail
        self.kept: list[bytes] = []
        self.kept_size = 0
        self.kept_lost = 0  # bytes of marker lines beyond keep_bytes
        self.pending = b""  # the line being assembled (marker mode)
        self.overlong = False  # inside a line longer than MAX_LINE
        self.overlong_marked = False
        self._overlap = b""  # the end of an overlong line's last piece (a marker split across two reads)

    def feed(self, data: bytes) -> None:
        """Take the next ``data`` read from the stream."""
        if not self.marker:
            self._rest(data)
            return
        buf = self.pending + data if self.pending else data
        self.pending = b""
        pos = self._end_overlong(buf) if self.overlong else 0
        marker = self.marker
        while pos < len(buf):
            i = buf.find(marker, pos)
            if i < 0:
                break
            nl = buf.rfind(b"\n", pos, i)
            start = pos if nl < 0 else nl + 1
            end = buf.find(b"\n", i)
            if end < 0:
                break  # an incomplete line: assembled below
            self._rest(buf[pos:start])
            self._keep(buf[start:end + 1])
            pos = end + 1
        nl = buf.rfind(b"\n", pos)
        if nl >= 0:
            self._rest(buf[pos:nl + 1])
            pos = nl + 1
        left = buf[pos:]
        if len(left) > MAX_LINE:
            self.overlong, self.overlong_marked = True, marker in left
            self._overlap = left[-(len(marker) - 1):] if len(marker) > 1 else b""
            self._rest(left)
        else:
            self.pending = left

    def _end_overlong(self, buf: bytes) -> int:
        """In an overlong line: pass its rest on up to its end; returns where the next line starts."""
        nl = buf.find(b"\n")
        piece = buf if nl < 0 else buf[:nl + 1]
        self.overlong_marked = self.overlong_marked or self.marker in self._overlap + piece
        self._rest(piece)
        if nl < 0:
            tail = self._overlap + piece
            self._overlap = tail[-(len(self.marker) - 1):] if len(self.marker) > 1 else b""
            return len(buf)
        if self.overlong_marked:
            self._keep(self.marker + b" [a line of more than %d bytes holding this text: left out]\n" % MAX_LINE)
        self.overlong = self.overlong_marked = False
        return nl + 1

    def _keep(self, line: bytes) -> None:
        if self.kept_size + len(line) > self.keep_bytes:
            self.kept_lost += len(line)
            return
        self.kept.append(line)
        self.kept_size += len(line)

    def _rest(self, data: bytes) -> None:
        if not data:
            return
        room = self.limit // 4 - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        keep = self.limit - self.limit // 4
        if not data or keep <= 0:
            self.cut += len(data)
            return
        if len(data) >= keep:
            self.cut += len(self.tail) + len(data) - keep
            self.tail = bytearray(data[-keep:])
            return
        self.tail += data
        if len(self.tail) > keep:
            self.cut += len(self.tail) - keep
            del self.tail[: len(self.tail) - keep]

    def text(self) -> tuple[str, bool]:
        """The stream as kept, decoded (UTF-8, replacement): the marker lines first, in order (a note line
        holding the marker where some were left out), then the head, a note where bytes were left out
        ("[... N bytes left out ...]") and the tail; and whether anything was left out."""
        if self.pending:
            line, self.pending = self.pending, b""
            if self.marker in line:
                self._keep(line + b"\n")
            else:
                self._rest(line)
        if self.overlong and self.overlong_marked:
            self._keep(self.marker + b" [a line of more than %d bytes holding this text: left out]\n" % MAX_LINE)
            self.overlong = self.overlong_marked = False
        kept = b"".join(self.kept)
        if self.kept_lost:
            kept += self.marker + b" [%d bytes of lines holding this text left out: the kit keeps %d]\n" % (
                self.kept_lost, self.keep_bytes)
        middle = f"\n[... {self.cut} bytes left out ...]\n" if self.cut else ""
        text = (kept.decode("utf-8", "replace") + self.head.decode("utf-8", "replace") + middle
                + self.tail.decode("utf-8", "replace"))
        return text, bool(self.cut or self.kept_lost)
