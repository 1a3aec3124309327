#!/usr/bin/env python3
"""The peer line of `fusekit bench attention`: PyTorch SDPA with the cuDNN backend and the
FlashAttention-2 backend, on the same cases (B·S = 16384 tokens, H·D = 2048, bf16 or f16),
timed as bench/harness.cpp times the fusekit rungs: CUDA events around each run, L2 flushed by a
read and the GPU held before every run, at least --runs runs and --min-ms of GPU time, the median. Prints TFLOP/s
per case (FLOPs = 4·B·H·S²·D, halved when causal) and writes one JSON object per case and backend.
Needs a GPU and PyTorch; nothing in the build or CI depends on it.

NOTE: the GPU sleeps before each run's start event, so that the host's dispatch of the SDPA call
(the backend context, PyTorch's and cuDNN's launch path) is not timed as idle GPU time.

With --varlen, the case of `fusekit bench attention --varlen`: the same 16384 tokens as sequences
of mixed lengths (VARLEN_LENGTHS, as kVarlenLengths in bench/attention.hpp) packed [T, H, D];
cudnn runs one SDPA call per sequence, flash2 one varlen call (torch.nn.attention.varlen).

usage: attention_peer.py [--seqlen S ...] [--head-dim D ...] [--causal | --both-masks]
                         [--varlen] [--dtype bf16|f16] [--backend NAME ...] [--runs N]
                         [--min-ms MS] [--json FILE]
"""
import argparse
import inspect
import json
import statistics

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.functional import scaled_dot_product_attention

TOKENS = 16384
MODEL_WIDTH = 2048
WARMUP_RUNS = 3
L2_FLUSH_BYTES = 2 * 64 * 2**20  # twice an H200's 60 MB L2, rounded up
# The GPU's sleep before a run's start event: the hold of bench/harness.cpp (kBenchHoldCycles in
# fusekit/gpu_hold.hpp, ~0.2 ms at 2 GHz), so that both sides idle alike between runs.
HOST_DISPATCH_CYCLES = 400_000
BACKENDS = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash2": SDPBackend.FLASH_ATTENTION}
# kVarlenLengths of bench/attention.hpp: 16384 tokens in nine sequences.
VARLEN_LENGTHS = [4096, 2048, 3072, 1024, 1536, 512, 2500, 1000, 596]


def flops(batch, heads, seqlen, head_dim, causal):
    full = 4.0 * batch * heads * seqlen * seqlen * head_dim
    return full / 2 if causal else full


def sdpa_run(backend, q, k, v, causal):
    """One SDPA call on q, k, v [B, H, S, D] with BACKEND: a callable."""
    def run():
        with sdpa_kernel(backend):
            return scaled_dot_product_attention(q, k, v, is_causal=causal)
    return run


def varlen_run(name, q, k, v, causal):
    """One run of the varlen case on q, k, v packed [T, H, D]: a callable, for backend NAME."""
    offsets = [0]
    for n in VARLEN_LENGTHS:
        offsets.append(offsets[-1] + n)
    if name == "cudnn":  # one SDPA call per sequence, each a [1, H, L, D] view of the packed tensors
        views = [tuple(t[a:b].unsqueeze(0).transpose(1, 2) for t in (q, k, v))
                 for a, b in zip(offsets[:-1], offsets[1:])]

        def run():
            with sdpa_kernel(BACKENDS["cudnn"]):
                for qs, ks, vs in views:
                    scaled_dot_product_attention(qs, ks, vs, is_causal=causal)
        return run
    from torch.nn.attention.varlen import varlen_attn
    cu = torch.tensor(offsets, dtype=torch.int32, device="cuda")
    longest = max(VARLEN_LENGTHS)
    # The causal argument changed between PyTorch releases: is_causal, later window_size=(-1, 0).
    if "is_causal" in inspect.signature(varlen_attn).parameters:
        mask = {"is_causal": causal}
    else:
        mask = {"window_size": (-1, 0) if causal else (-1, -1)}
    return lambda: varlen_attn(q, k, v, cu, cu, longest, longest, **mask)


def measure(entry, make_run, total_flops, args, flush, errors=(RuntimeError,)):
    """Times the run that make_run() returns into ENTRY (ms, tflops) and prints the case's line; a
    backend that does not take the case (one of ERRORS) gets its error's first line instead."""
    case, name = entry["case"], entry["backend"]
    try:
        ms = time_run(make_run(), args.runs, args.min_ms, flush)
        entry.update(ms=ms, tflops=total_flops / ms / 1e9)
        print(f"{case:<32} {name:<8} {ms:>9.3f} {entry['tflops']:>9.1f}")
    except errors as e:
        entry["error"] = str(e).splitlines()[0]
        print(f"{case:<32} {name:<8} {'n/a':>9} {'':>9}  {entry['error'][:60]}")
    return entry


def time_run(run, runs, min_ms, flush):
    for _ in range(WARMUP_RUNS):
        run()
    times = []
    while len(times) < runs or sum(times) < min_ms:
        flush.sum()  # a read: a written flush leaves dirty lines that the timed run writes back
        torch.cuda._sleep(HOST_DISPATCH_CYCLES)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        run()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seqlen", type=int, nargs="+", default=[512, 1024, 2048, 4096, 8192, 16384])
    parser.add_argument("--head-dim", type=int, nargs="+", default=[64, 128, 256])
    masks = parser.add_mutually_exclusive_group()
    masks.add_argument("--causal", action="store_true", help="causal cases only")
    masks.add_argument("--both-masks", action="store_true", help="non-causal and causal cases")
    parser.add_argument("--varlen", action="store_true", help="the mixed-length case (ignores --seqlen)")
    parser.add_argument("--dtype", choices=["bf16", "f16"], default="bf16")
    parser.add_argument("--backend", nargs="+", choices=list(BACKENDS), default=list(BACKENDS))
    parser.add_argument("--runs", type=int, default=20, help="minimum timed runs (as fusekit bench)")
    parser.add_argument("--min-ms", type=float, default=200.0, help="minimum timed GPU ms (as fusekit bench)")
    parser.add_argument("--json", help="write the results to FILE (a JSON list)")
    args = parser.parse_args()

    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float16
    causal_cases = [False, True] if args.both_masks else [args.causal]
    flush = torch.empty(L2_FLUSH_BYTES, dtype=torch.uint8, device="cuda")
    results = []
    print(f"{torch.cuda.get_device_name()}  torch {torch.__version__}  cuDNN {torch.backends.cudnn.version()}")
    print(f"{'case':<32} {'backend':<8} {'ms':>9} {'TFLOP/s':>9}")
    for head_dim in args.head_dim:
        for causal in causal_cases:
            if args.varlen:
                results += varlen_case(args, dtype, head_dim, causal, flush)
                continue
            for seqlen in args.seqlen:
                batch, heads = TOKENS // seqlen, MODEL_WIDTH // head_dim
                # SDPA takes [B, H, S, D]; a BSHD tensor transposed, as a model passes it.
                shape = (batch, seqlen, heads, head_dim)
                # The inputs of bench/attention.cpp: Q and K uniform in [-2, 2], V in [-1, 1].
                q, k, v = (torch.empty(shape, dtype=dtype, device="cuda").uniform_(-r, r).transpose(1, 2)
                           for r in (2, 2, 1))
                case = f"B{batch} S{seqlen} H{heads} D{head_dim}{' causal' if causal else ''}"
                for name in args.backend:
                    entry = {"case": case, "backend": name, "batch": batch, "seqlen": seqlen, "heads": heads,
                             "head_dim": head_dim, "causal": causal, "dtype": args.dtype}
                    results.append(measure(entry, lambda: sdpa_run(BACKENDS[name], q, k, v, causal),
                                           flops(batch, heads, seqlen, head_dim, causal), args, flush))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


def varlen_case(args, dtype, head_dim, causal, flush):
    heads = MODEL_WIDTH // head_dim
    q, k, v = (torch.empty((TOKENS, heads, head_dim), dtype=dtype, device="cuda").uniform_(-r, r)
               for r in (2, 2, 1))
    total = sum(flops(1, heads, n, head_dim, causal) for n in VARLEN_LENGTHS)
    case = f"varlen T{TOKENS} H{heads} D{head_dim}{' causal' if causal else ''}"
    results = []
    for name in args.backend:
        entry = {"case": case, "backend": name, "varlen": VARLEN_LENGTHS, "heads": heads,
                 "head_dim": head_dim, "causal": causal, "dtype": args.dtype}
        # A PyTorch release without varlen_attn, or with other arguments, is an error line too.
        results.append(measure(entry, lambda: varlen_run(name, q, k, v, causal), total, args, flush,
                               errors=(RuntimeError, ImportError, TypeError)))
    return results


if __name__ == "__main__":
    main()
