#!/usr/bin/env python3
"""PyTorch's side of `trainlab-cli bench --case optim`: the optimizer step alone over the
parameter shapes of the lab's character GPT (nn/transformer.cpp: token and position embeddings,
per block two LayerNorms, qkv, proj, fc, out with biases, a final LayerNorm, an untied head; the
vocabulary of tinyshakespeare, 65), fp32 parameters with constant gradients 1e-3, as a PyTorch user
trains in bf16 autocast (fp32 parameters are the masters). One JSON line per optimizer:
torch.optim.AdamW(fused=True), and torch.optim.Adafactor where this PyTorch has it (2.5+).
bitsandbytes is not installed on the GPU machine: 8-bit AdamW's memory is compared with the
formula, its time with fused AdamW.

  python3 tools/optim_peer.py --preset gpt2 --steps 20 --warmup 3
"""
import argparse
import json
import time

import torch

PRESETS = {"tiny": (2, 128, 64), "small": (6, 384, 256), "gpt2": (12, 768, 1024)}  # layers, dim, context


def shapes(preset, vocab=65):
    layers, d, ctx = PRESETS[preset]
    out = [(vocab, d), (ctx, d)]
    for _ in range(layers):
        out += [(d,), (d,), (d,), (d,)]
        for o, i in ((3 * d, d), (d, d), (4 * d, d), (d, 4 * d)):
            out += [(o, i), (o,)]
    out += [(d,), (d,), (vocab, d)]
    return out


def bench(name, make, params, steps, warmup):
    opt = make(params)
    for _ in range(warmup + 1):
        opt.step()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(steps):
        opt.step()
    torch.cuda.synchronize()
    ms = (time.perf_counter() - t0) / steps * 1e3
    state = sum(t.numel() * t.element_size() for s in opt.state.values() for t in s.values()
                if torch.is_tensor(t) and t.dim() > 0)
    n = sum(p.numel() for p in params)
    print(json.dumps({"case": "optim", "mode": name, "peer": "torch " + torch.__version__, "params": n,
                      "ms_per_step": ms, "state_bytes": state, "state_bytes_per_param": state / n}))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--preset", default="gpt2", choices=sorted(PRESETS))
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    a = ap.parse_args()
    params = [torch.zeros(s, device="cuda", requires_grad=True) for s in shapes(a.preset)]
    for p in params:
        p.grad = torch.full_like(p, 1e-3)
    bench("torch-adamw-fused", lambda ps: torch.optim.AdamW(ps, lr=3e-4, fused=True), params, a.steps, a.warmup)
    if hasattr(torch.optim, "Adafactor"):
        bench("torch-adafactor", lambda ps: torch.optim.Adafactor(ps, lr=3e-4), params, a.steps, a.warmup)


if __name__ == "__main__":
    main()
