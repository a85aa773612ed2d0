"""Minimal reader for R lazy-load databases (.rdb), enough to pull character vectors.

Owns: decoding the Jane Austen novels that Debian's r-cran-janeaustenr ships as R data
(no R installation needed for data preparation). Supports the XDR serialization subset
those objects use: character/int/logical/real/list vectors, pairlists, symbols, refs.
"""
import struct
import zlib

NILVALUE, REFSXP = 254, 255
SYMSXP, LISTSXP, CHARSXP, LGLSXP, INTSXP, REALSXP, STRSXP, VECSXP = 1, 2, 9, 10, 13, 14, 16, 19
SPECIALS = {254, 253, 252, 251, 250, 249, 248, 247, 246, 245, 244, 243, 242, 241}


class RReader:
    def __init__(self, buf, where):
        self.b, self.o, self.where, self.refs = buf, 0, where, []

    def fail(self, msg):
        raise ValueError(f"{self.where}: offset {self.o}: {msg}")

    def i32(self):
        if self.o + 4 > len(self.b):
            self.fail("truncated integer")
        v = struct.unpack_from(">i", self.b, self.o)[0]
        self.o += 4
        return v

    def header(self):
        if self.b[:2] != b"X\n":
            self.fail("not an XDR R serialization (expected 'X\\n')")
        self.o = 2
        version = self.i32()
        self.i32(), self.i32()
        if version == 3:
            n = self.i32()
            self.o += n
        elif version != 2:
            self.fail(f"unsupported serialization version {version}")

    def item(self):
        flags = self.i32()
        t, has_attr, has_tag = flags & 0xFF, flags & (1 << 9), flags & (1 << 10)
        if t == REFSXP:
            idx = flags >> 8 or self.i32()
            return self.refs[idx - 1]
        if t in SPECIALS:
            return None
        if t == SYMSXP:
            name = self.item()
            self.refs.append(name)
            return name
        if t == LISTSXP:
            out = []
            while True:
                if has_attr:
                    self.item()
                tag = self.item() if has_tag else None
                out.append((tag, self.item()))
                flags = self.i32()
                t, has_attr, has_tag = flags & 0xFF, flags & (1 << 9), flags & (1 << 10)
                if t == NILVALUE:
                    return out
                if t != LISTSXP:
                    self.o -= 4
                    out.append((None, self.item()))
                    return out
        if t == CHARSXP:
            n = self.i32()
            if n == -1:
                return None
            s = self.b[self.o:self.o + n].decode("utf-8", "replace")
            self.o += n
            return s
        if t in (LGLSXP, INTSXP, REALSXP, STRSXP, VECSXP):
            n = self.i32()
            if t in (LGLSXP, INTSXP):
                v = struct.unpack_from(f">{n}i", self.b, self.o)
                self.o += 4 * n
            elif t == REALSXP:
                v = struct.unpack_from(f">{n}d", self.b, self.o)
                self.o += 8 * n
            else:
                v = [self.item() for _ in range(n)]
            if has_attr:
                self.item()
            return list(v)
        self.fail(f"unsupported R type {t}")


def read_rdb_objects(path):
    """Yields every object stored in an .rdb file (each: 4-byte length + zlib stream)."""
    data = open(path, "rb").read()
    off = 0
    while off < len(data):
        if off + 4 > len(data):
            raise ValueError(f"{path}: offset {off}: truncated entry header")
        want = struct.unpack_from(">I", data, off)[0]
        d = zlib.decompressobj()
        raw = d.decompress(data[off + 4:])
        if len(raw) != want:
            raise ValueError(f"{path}: offset {off}: inflated {len(raw)} bytes, header says {want}")
        r = RReader(raw, f"{path}@{off}")
        r.header()
        yield r.item()
        off = len(data) - len(d.unused_data)
