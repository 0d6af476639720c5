#!/usr/bin/python3
"""Start-to-first-token and peak host memory of `gpt-vk generate`.

Times a whole process, `gpt-vk generate --config CFG --prompt PROMPT --max-tokens 1`, from
launch to exit (the first token is the last thing it does), with PROMPT a 9-token sentence
(a one-token prompt runs only the decode step's kernels and hid 3 s of a multi-token
prompt's cold start in earlier figures), greedy (`--temperature 0`) and
with generate's default sampling (top-k 40, top-p 0.95, whose sampler stages lavapipe must
also JIT-compile):
"cold" with every shader cache pointing at a new empty directory (gpt-vk's pipeline cache,
GPTVK_CACHE_DIR, and the driver's own: Mesa's MESA_SHADER_CACHE_DIR, where lavapipe keeps
the machine code it JIT-compiles at a pipeline's first dispatch, and NVIDIA's
__GL_SHADER_DISK_CACHE_PATH), "warm" right after with the same directory. The weights file is read from the OS page cache in
both cases after the first run (dropping it would disturb the other jobs on the machine),
so "cold" means a cold pipeline cache, not a cold disk. Peak memory is /usr/bin/time -v's
"Maximum resident set size" (on lavapipe device memory is host memory, so it includes the
weights on the "device").

Usage: startup_bench.py --config CFG [--gptvk BINARY] [--repeats R]
"""
import argparse
import os
import re
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench/: bench_proc
import bench_proc  # noqa: E402

PROMPT = "The quick brown fox jumps over the lazy dog"  # 9 GPT-2 tokens

LOAD_RE = re.compile(r"load ([0-9.]+) s")


# Kinds of run: cache state x decoding; greedy comes first, as the plain "cold" and "warm".
MODES = (("", ["--temperature", "0"]), (" sampling", []))
KINDS = [cache + mode for mode, _ in MODES for cache in ("cold", "warm")]


def measure(gptvk, config, repeats=3, timeout_s=300, log=None):
    """Returns {kind: [...]} for each of KINDS ("cold", "warm", "cold sampling", "warm
    sampling") of per-run dicts (wall_s, load_s, max_rss_kib), plus "error" when a run
    failed. Each repeat of each decoding mode uses its own new cache directory."""
    runs = {kind: [] for kind in KINDS}
    runs["error"] = None
    for _ in range(repeats):
        for mode, extra in MODES:
            cmd = [gptvk, "generate", "--config", config, "--prompt", PROMPT, "--max-tokens", "1", "--seed", "1"] + extra
            with tempfile.TemporaryDirectory(prefix="gptvk-cache-") as cache:
                for cache_state in ("cold", "warm"):
                    kind = cache_state + mode
                    env = {"GPTVK_CACHE_DIR": cache, "MESA_SHADER_CACHE_DIR": cache,
                           "__GL_SHADER_DISK_CACHE_PATH": cache}
                    o = bench_proc.run(cmd, timeout_s, env=env, log=log)
                    if o.error:
                        runs["error"] = f"{kind}: {o.error}"
                        return runs
                    m = LOAD_RE.search(o.stderr)
                    runs[kind].append({"wall_s": o.wall_s, "load_s": float(m.group(1)) if m else None,
                                       "max_rss_kib": o.max_rss_kib, "cache_files": len(os.listdir(cache))})
    return runs


def summary(runs):
    """Medians of wall and load time per kind, and the largest peak RSS seen."""
    out = {}
    for kind in KINDS:
        r = runs.get(kind) or []
        if not r:
            continue
        loads = [x["load_s"] for x in r if x["load_s"] is not None]
        rss = [x["max_rss_kib"] for x in r if x["max_rss_kib"] is not None]
        out[kind] = {"wall_s": statistics.median(x["wall_s"] for x in r),
                     "load_s": statistics.median(loads) if loads else None,
                     "max_rss_mib": max(rss) / 1024 if rss else None, "n": len(r)}
    return out


def main():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", required=True)
    ap.add_argument("--gptvk", default=os.path.join(root, "build", "gpt-vk"))
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    if args.repeats < 1:
        ap.error("--repeats must be at least 1")
    runs = measure(args.gptvk, args.config, args.repeats, log=lambda s: print(s, file=sys.stderr))
    if runs["error"]:
        raise SystemExit(f"startup_bench: {runs['error']}")
    for kind, s in summary(runs).items():
        load = f"{s['load_s']:.2f}" if s["load_s"] is not None else "?"
        rss = f"{s['max_rss_mib']:.0f}" if s["max_rss_mib"] is not None else "?"
        print(f"{kind}: start-to-first-token {s['wall_s']:.2f} s (load {load} s), peak RSS {rss} MiB, {s['n']} runs")


if __name__ == "__main__":
    main()
