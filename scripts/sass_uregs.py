#!/usr/bin/env python3
"""Flags SASS that reads a uniform register no instruction of the kernel writes,
as a memory descriptor (desc[URn]) or an address part ([Rm+URn]): the sign of the
ptxas 13.0 defect that turned a hinted cp.async into an illegal instruction
(docs/LOWERING.md, "L2 cache policies"). Input: `nvdisasm -c` or `cuobjdump -sass`
text, one file per kernel. Prints one line per file; exits 1 if any is flagged.
  python3 scripts/sass_uregs.py K1.sass [K2.sass ...]
  python3 scripts/sass_uregs.py --self-test   (CI: flags the defect's shape, passes a sound one)"""
import re
import sys

INSN = re.compile(r"\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)\s+([^;]*);")
# Registers a wide destination writes after the one it names.
WIDTH = ((".128", 3), (".64", 1), (".WIDE", 1))


def unwritten(text):
    written, read = set(), set()
    for line in text.splitlines():
        m = INSN.search(line)
        if not m:
            continue
        dst = m.group(2).split(",")[0].strip()
        if not dst.startswith("["):
            for r in map(int, re.findall(r"\bUR(\d+)\b", dst)):
                written.add(r)
                extra = next((n for w, n in WIDTH if w in m.group(1)), 0)
                written.update(range(r + 1, r + 1 + extra))
        read.update(("desc", int(r)) for r in re.findall(r"desc\[UR(\d+)\]", m.group(2)))
        read.update(("addr", int(r)) for r in re.findall(r"\[R\d+\+UR(\d+)", m.group(2)))
    return sorted(x for x in read if x[1] not in written)


# The defect's shape (UR0, UR1 read, never written) and a sound kernel's (the
# descriptor pair written by ULDC.64, a 64-bit write), in nvdisasm's format.
BAD = """
        /*05a0*/                   @!PT LDS RZ, [RZ] ;
        /*05b0*/                   @P0 LDGSTS.E.BYPASS.128 [R0+UR0], desc[UR1][R4.64] ;
        /*05c0*/                   @P0 LDGSTS.E.BYPASS.128 [R0+UR0+0x400], desc[UR1][R6.64] ;
"""
GOOD = """
        /*0350*/                   ULDC.64 UR32, c[0x0][0x208] ;
        /*0360*/                   S2UR UR4, SR_CgaCtaId ;
        /*0560*/              @P0 LDGSTS.E.BYPASS.128 [R13+UR4], desc[UR32][R8.64] ;
        /*0570*/                   STG.E.128 desc[UR32][R18.64], R12 ;
"""


def self_test():
    ok = unwritten(BAD) == [("addr", 0), ("desc", 1)] and unwritten(GOOD) == []
    print("sass_uregs self-test:", "ok" if ok else "FAILED")
    return 0 if ok else 1


def main(paths):
    bad = 0
    for p in paths:
        u = unwritten(open(p).read())
        bad += bool(u)
        print(f"{p}: " + (", ".join(f"{k} UR{r}" for k, r in u) + " never written" if u else "ok"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(self_test() if sys.argv[1:] == ["--self-test"] else main(sys.argv[1:]))
