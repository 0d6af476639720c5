"""Extracts Jane Austen's six novels as plain text from Debian's r-cran-janeaustenr.

The training corpus of the bundled default model. Why this source: the novels are in
the public domain (first published 1811-1818; the package takes them from Project
Gutenberg) and the Debian package (MIT) is reachable with apt from every machine of
the project, without installing R: `apt-get download` fetches the .deb, `dpkg-deb -x`
unpacks it, and the R lazy-load database that holds the texts is read here with a
small reader of R's XDR serialization format (only the node types these files use).

Usage: python3 tools/austen_corpus.py OUT.txt   (downloads into a temporary folder)
"""
import argparse
import glob
import os
import struct
import subprocess
import tempfile
import zlib
import gzip

DEB_PACKAGE = "r-cran-janeaustenr"
# Book order in the output; each book is a character vector of lines in the package.
BOOKS = ["sensesensibility", "prideprejudice", "mansfieldpark", "emma",
         "northangerabbey", "persuasion"]

# R SEXP type codes (R Internals, "Serialization formats").
NILVALUE_SXP, REFSXP, GLOBALENV_SXP, EMPTYENV_SXP, BASEENV_SXP = 254, 255, 253, 242, 241
SYMSXP, LISTSXP, CHARSXP, LGLSXP, INTSXP, REALSXP, STRSXP, VECSXP = 1, 2, 9, 10, 13, 14, 16, 19
NA_STRING_LEN = -1


class RReader:
    """Reads one XDR-serialized R object (format 'X\\n', versions 2 and 3)."""

    def __init__(self, data: bytes):
        self.d, self.p, self.refs = data, 0, []
        if self.d[:2] != b"X\n":
            raise ValueError("not an XDR R serialization")
        self.p = 2
        version = self.int()
        self.int(), self.int()  # writer R version, minimal reader version
        if version == 3:
            n = self.int()
            self.p += n  # native encoding name
        elif version != 2:
            raise ValueError(f"unsupported R serialization version {version}")

    def int(self) -> int:
        (v,) = struct.unpack_from(">i", self.d, self.p)
        self.p += 4
        return v

    def read(self):
        flags = self.int()
        t = flags & 0xFF
        has_attr, has_tag = bool(flags & (1 << 9)), bool(flags & (1 << 10))
        if t in (NILVALUE_SXP, GLOBALENV_SXP, EMPTYENV_SXP, BASEENV_SXP):
            return None
        if t == REFSXP:
            return self.refs[(flags >> 8) - 1]
        if t == SYMSXP:
            name = self.read()  # a CHARSXP
            self.refs.append(name)
            return name
        if t == CHARSXP:
            n = self.int()
            if n == NA_STRING_LEN:
                return None
            s = self.d[self.p:self.p + n].decode("utf-8", errors="replace")
            self.p += n
            return s
        if t == LISTSXP:  # pairlist: returned as a dict tag -> value
            out = {}
            while t == LISTSXP:
                if has_attr:
                    self.read()
                tag = self.read() if has_tag else None
                out[tag] = self.read()
                flags = self.int()
                t = flags & 0xFF
                has_attr, has_tag = bool(flags & (1 << 9)), bool(flags & (1 << 10))
            if t != NILVALUE_SXP:
                raise ValueError("unterminated pairlist")
            return out
        n = self.int()
        if t in (LGLSXP, INTSXP):
            v = list(struct.unpack_from(f">{n}i", self.d, self.p))
            self.p += 4 * n
        elif t == REALSXP:
            v = list(struct.unpack_from(f">{n}d", self.d, self.p))
            self.p += 8 * n
        elif t in (STRSXP, VECSXP):
            v = [self.read() for _ in range(n)]
        else:
            raise ValueError(f"unsupported R type {t}")
        if has_attr:
            attrs = self.read()
            names = attrs.get("names") if isinstance(attrs, dict) else None
            if t == VECSXP and names:
                return dict(zip(names, v))
        return v


def read_lazyload_db(data_dir: str) -> dict:
    """Returns {name: object} of an R package's data/Rdata.{rdx,rdb} lazy-load database."""
    with open(os.path.join(data_dir, "Rdata.rdx"), "rb") as f:
        index = RReader(gzip.decompress(f.read())).read()
    with open(os.path.join(data_dir, "Rdata.rdb"), "rb") as f:
        rdb = f.read()
    out = {}
    for name, (offset, length) in index["variables"].items():
        blob = rdb[int(offset):int(offset) + int(length)]
        # zlib-compressed entry: 4-byte big-endian uncompressed size, then the stream.
        out[name] = RReader(zlib.decompress(blob[4:])).read()
    return out


def extract_text(out_path: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(["apt-get", "download", DEB_PACKAGE], cwd=tmp, check=True,
                       stdout=subprocess.DEVNULL)
        deb = glob.glob(os.path.join(tmp, f"{DEB_PACKAGE}_*.deb"))[0]
        subprocess.run(["dpkg-deb", "-x", deb, os.path.join(tmp, "x")], check=True)
        data_dir = os.path.join(tmp, "x/usr/lib/R/site-library/janeaustenr/data")
        objects = read_lazyload_db(data_dir)
    books = []
    for name in BOOKS:
        lines = [line if line is not None else "" for line in objects[name]]
        books.append("\n".join(lines).strip() + "\n")
    with open(out_path, "w", encoding="utf-8") as f:
        f.write("\n\n".join(books))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", metavar="OUT.txt", help="where the corpus goes")
    extract_text(parser.parse_args().out)
