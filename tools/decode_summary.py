#!/usr/bin/env python3
"""One line a row of a GPU decode command's JSON output, for its summary.txt: the lab's
`bench --case decode` rows (tokens/s, us a step, weight GB/s and % of the copy bandwidth, the
per-kernel times), the bandwidth row, the PyTorch peer's rows and sparse24_lab's.
Used by tools/decode_gpu_check.sh and tools/decode_ab_check.sh.

  python3 tools/decode_summary.py FILE.jsonl [LABEL]    (LABEL, e.g. the module A or B, starts each row)
"""
import json
import sys


def row(r, f, label):
    if r.get("case") == "bandwidth":
        return f"{f.split('/')[-1]}: copy {r.get('copy_bytes_per_s', r.get('copy_gb_per_s', 0) * 1e9) / 1e9:.0f} GB/s"
    if "error" in r:
        return f"  {label}{r.get('model', r.get('shape'))} {r.get('format', '')} b={r.get('batch', '')}: ERROR {r['error']}"
    if r.get("case") == "sparse24":
        return (f"  {r['shape']:<12} n={r['n']:<5} dense={r['dense_us']:8.1f}us sparse={r['sparse_us']:8.1f}us "
                f"speedup={r['speedup']:.2f} tflops d/s={r['dense_tflops']:.0f}/{r['sparse_tflops_dense_equiv']:.0f} "
                f"rel_diff={r['max_rel_diff']:.2g}")
    if "preset" in r:  # the PyTorch peer
        return (f"  peer {r['preset']} {r['mode']:<11} b={r['batch']:<3} tok/s={r['tokens_per_s']:9.0f} "
                f"weightGB/s={r.get('weight_gb_per_s', 0):6.0f}")
    ks = " ".join(f"{n}={v:.0f}" for n, v in r.get("kernel_us", {}).items())
    line = (f"  {label}{r['model'][:5]} {r['format']:<12} b={r.get('batch', 1):<3} graph={int(r['cuda_graph'])} "
            f"one={int(r['one_kernel'])} tok/s={r['tokens_per_s']:9.0f} us/step={r.get('us_per_step', 0):6.0f} "
            f"weightGB/s={r['weight_bytes_per_s'] / 1e9:6.0f} ceil%={100 * r['weight_bytes_per_s'] / r['copy_bytes_per_s']:5.1f} "
            f"dev_us={r.get('device_us_per_step', 0):.0f} prep_s={r.get('prepare_s', 0):.1f} | us: {ks}")
    g = r.get("kernel_gb_per_s", {})
    if g:
        line += "\n      GB/s: " + " ".join(f"{n}={v:.0f}" for n, v in g.items())
    return line


def main(f, label=""):
    label = label + " " if label else ""
    for line in open(f):
        line = line.strip()
        if line.startswith("{"):
            print(row(json.loads(line), f, label))


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    main(*sys.argv[1:])
