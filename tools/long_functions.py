#!/usr/bin/env python3
"""tools/long_functions.py [LIMIT] [DIR...]: functions (and lambdas at statement level) longer than
LIMIT lines (default 120) in C++/CUDA sources, found by brace matching from a line that opens a
definition. A reviewer's aid, not a parser: it reads `name(...) {` ... matching `}`."""
import re, sys, pathlib

limit = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else 120
dirs = [a for a in sys.argv[1:] if not a.isdigit()] or ["core", "app"]
head = re.compile(r"^\s*[\w:<>,~*&\s\[\]]*\b([~\w:]+)\s*\([^;]*\)\s*(const)?\s*(override)?\s*(noexcept)?\s*(->\s*[\w:<>]+)?\s*\{\s*$")
found = 0
for d in dirs:
    for p in sorted(pathlib.Path(d).rglob("*")):
        if p.suffix not in {".cpp", ".h", ".cu", ".cuh"}:
            continue
        lines = p.read_text(errors="replace").splitlines()
        i = 0
        while i < len(lines):
            m = head.match(lines[i])
            if m and not re.match(r"^\s*(if|for|while|switch|catch|else)\b", lines[i]):
                depth, j = 0, i
                while j < len(lines):
                    depth += lines[j].count("{") - lines[j].count("}")
                    if depth <= 0 and j > i or (depth == 0 and j == i and "}" in lines[j]):
                        break
                    j += 1
                n = j - i + 1
                if n > limit:
                    print(f"{p}:{i+1}: {m.group(1)} {n} lines")
                    found += 1
                i = j + 1 if n > 1 else i + 1
            else:
                i += 1
sys.exit(1 if found else 0)
