#!/usr/bin/env python3
"""Markdown tables for BENCHMARKS.md from one GPU command's output (tools/gpu_check.sh):
the lab's `bench --case char-*` JSON lines next to the PyTorch peer's, as ratios.

  python3 tools/bench_tables.py OUT_DIR      (OUT_DIR holds bench_char_lab.jsonl, bench_char_peer.txt)
"""
import json, sys, os


def lines(path):
    out = []
    for l in open(path):
        l = l.strip()
        if l.startswith("{"):
            try:
                out.append(json.loads(l))
            except ValueError:
                pass
    return out


def main(d):
    lab = {(r["case"], r["mode"]): r for r in lines(os.path.join(d, "bench_char_lab.jsonl"))}
    peer = {(r["case"], r["mode"]): r for r in lines(os.path.join(d, "bench_char_peer.txt"))}
    peak_tflops = 989.0
    print("| case | mode | lab ms/step | PyTorch ms/step (mode) | speed ratio | lab tokens/s | lab MFU | lab peak MiB | PyTorch peak MiB |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for (case, mode), r in sorted(lab.items()):
        ref_mode = {"bf16": "bf16-compile", "bf16-ckpt": "bf16-ckpt"}.get(mode, mode)
        p = peer.get((case, ref_mode))
        ratio = f"**{p['ms_per_step'] / r['ms_per_step']:.2f}x**" if p else "-"
        pm = f"{p['ms_per_step']:.2f} ({ref_mode})" if p else "-"
        mfu = f"{100 * r['model_tflops'] / peak_tflops:.1f} %"
        print(f"| {case} | {mode} | {r['ms_per_step']:.2f} | {pm} | {ratio} | {r['tokens_per_s']:,.0f} | {mfu} | "
              f"{r['peak_mib']:.0f} | {p['peak_mib']:.0f} |" if p else
              f"| {case} | {mode} | {r['ms_per_step']:.2f} | - | - | {r['tokens_per_s']:,.0f} | {mfu} | {r['peak_mib']:.0f} | - |")
    print()
    print("PyTorch eager bf16 in the same command:",
          ", ".join(f"{c} {peer[(c, 'bf16')]['ms_per_step']:.2f} ms ({peer[(c, 'bf16')]['peak_mib']:.0f} MiB)"
                    for c in ("char-small", "char-gpt2") if (c, "bf16") in peer))
    for c in ("char-small", "char-gpt2"):
        if (c, "bf16") in lab and (c, "bf16-ckpt") in lab:
            print(f"{c}: checkpointing every block costs {lab[(c, 'bf16-ckpt')]['ms_per_step'] / lab[(c, 'bf16')]['ms_per_step']:.2f}x "
                  f"the step time without it")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else ".")
