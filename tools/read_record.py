#!/usr/bin/env python3
"""tools/read_record.py RUN_DIR: every step of a run record as one JSON object a line, as
load_run (core/train/run_reader.cpp) reads it: steps.bin's rows (core/train/step_columns.h:
"TLSTEPS1", a JSON header naming the columns, then blocks of u32 magic, rows, payload bytes,
CRC-32 and a zlib payload of byte-shuffled little-endian columns) merged with metrics.jsonl's
lines, the slow fields carried forward. A record without steps.bin is its lines alone. A torn
last block or line is dropped; python3 only (struct, zlib). Import it for steps(dir)."""
import json, math, struct, sys, zlib

SLOW = ["precision", "mem", "mem_peak", "mem_predicted", "device_used_bytes", "device_total_bytes",
        "runtime_context_bytes", "loss_scale", "skipped_steps", "lr"]
FMT = {"u32": "<I", "f32": "<f", "f64": "<d"}


def step_rows(path):
    try:
        b = open(path, "rb").read()
    except FileNotFoundError:
        return []
    if b[:8] != b"TLSTEPS1":
        return []
    n = struct.unpack_from("<I", b, 8)[0]
    cols = json.loads(b[12:12 + n])["columns"]
    pos, rows = 16 + n, []
    while pos + 16 <= len(b):
        _, count, size, crc = struct.unpack_from("<IIII", b, pos)
        payload = b[pos + 16:pos + 16 + size]
        pos += 16 + size
        if len(payload) < size:
            break  # torn
        if zlib.crc32(payload) != crc:
            continue
        raw, at, block = zlib.decompress(payload), 0, [dict() for _ in range(count)]
        for name, kind in cols:
            w = struct.calcsize(FMT[kind])
            for i in range(count):
                v = struct.unpack(FMT[kind], bytes(raw[at + k * count + i] for k in range(w)))[0]
                if not (isinstance(v, float) and math.isnan(v)) and not (name == "mfu" and v == 0):
                    block[i][name] = v
            at += w * count
        rows += block
    return rows


def steps(d):
    lines = []
    for text in open(d + "/metrics.jsonl").read().split("\n")[:-1]:
        lines.append(json.loads(text))
    carried, by_step = {}, {}
    for m in lines:
        carried.update({k: m[k] for k in SLOW if k in m})
        by_step[m["step"]] = {**carried, **m}
    out, slow, pending = [], {}, sorted(by_step)
    for r in step_rows(d + "/steps.bin"):
        while pending and pending[0] < r["step"]:  # lines of steps steps.bin lacks (an older record)
            out.append(by_step.pop(pending.pop(0)))
            slow = {k: v for k, v in out[-1].items() if k in SLOW}
        if out and out[-1]["step"] >= r["step"]:
            continue
        line = by_step.pop(pending.pop(0)) if pending and pending[0] == r["step"] else slow
        out.append({**line, **r})
        slow = {k: v for k, v in out[-1].items() if k in SLOW}
    return out + [by_step[k] for k in pending]


if __name__ == "__main__":
    for m in steps(sys.argv[1]):
        print(json.dumps(m, sort_keys=True))
