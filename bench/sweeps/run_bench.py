#!/usr/bin/python3
"""The throughput sweep of gpt-vk against PyTorch on the same weights (issue 7).

For each shape x device dtype x context it runs `gpt-vk bench` and, right after it,
bench/peers/torch_reference.py on the same random-weights model (written by
bench/make_random_model.py into a scratch directory), then measures gpt-vk's
start-to-first-token and peak memory (bench/sweeps/startup_bench.py). It writes
bench/results/latest.md (machine, known baselines, the table), latest.png (tokens/s
against context) and latest.json (everything measured). The report is rewritten after
every context, so an interrupted sweep still leaves the rows done so far.

Usage:
  bench/sweeps/run_bench.py                 full sweep: tiny, gpt2-small, gpt2-medium x f32, f16 x
                                     contexts 128, 256, 512, 1024, 5 repeats; takes hours on a
                                     2-core machine (PyTorch and gpt-vk prefill of gpt2-medium at
                                     1024 tokens are the slow part)
  bench/sweeps/run_bench.py --quick         tiny and gpt2-small, contexts 128 and 512, 3 repeats
  bench/sweeps/run_bench.py --shapes tiny --contexts 128 --repeats 1 --no-startup   a smoke test
Any explicit option overrides what --quick sets. gpt-vk is ./build/gpt-vk unless --gptvk
says otherwise. Each command is limited to --timeout seconds (an hour, 10 minutes with --quick:
gpt2-medium f32 at 1024 tokens runs ~25 minutes on a busy 2-core machine); one that fails or runs
over shows as "failed" in the table with its cause listed below it.

--llama-cpp (off by default; needs `npm install` in bench/llama_cpp, see bench/llama_cpp/README.md)
also runs llama.cpp's Vulkan and CPU backends (bench/llama_cpp/bench.mjs) on a GGUF of the
same weights for the f32 and f16 rows at context 128, right after PyTorch, and adds a table
with gpt-vk / llama.cpp ratios:
  bench/sweeps/run_bench.py --shapes gpt2-small --contexts 128 --no-startup --llama-cpp
"""
import argparse
import datetime
import json
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.dirname(HERE)
ROOT = os.path.dirname(BENCH)
sys.path.insert(0, HERE)
sys.path.insert(0, BENCH)  # bench_proc, make_random_model
import bench_proc  # noqa: E402
import bench_report  # noqa: E402
import make_random_model  # noqa: E402
import startup_bench  # noqa: E402

LLAMA_DIR = os.path.join(BENCH, "llama_cpp")

PYTHON = "/usr/bin/python3"  # the interpreter with torch
TORCH_REFERENCE = os.path.join(BENCH, "peers", "torch_reference.py")
FULL = {"shapes": "tiny,gpt2-small,gpt2-medium", "dtypes": "f32,f16", "contexts": "128,256,512,1024", "repeats": 5,
        "timeout": 3600}
QUICK = {"shapes": "tiny,gpt2-small", "dtypes": "f32,f16", "contexts": "128,512", "repeats": 3, "timeout": 600}
STARTUP_SHAPE = "gpt2-small"
LLAMA_CONTEXT = 128  # the prompt length of the llama.cpp rows (its Vulkan decode is slow on lavapipe)
LLAMA_DTYPES = ("f32", "f16")  # GGUF weight types to_gguf.py writes
LLAMA_BACKENDS = ("vulkan", "cpu")


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def machine_info():
    cpu = "unknown CPU"
    mem_kib = 0
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), cpu)
        with open("/proc/meminfo") as f:
            mem_kib = next((int(l.split()[1]) for l in f if l.startswith("MemTotal")), 0)
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "mem_gib": mem_kib / 2**20, "kernel": platform.release()}


def git_commit():
    try:
        return subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def torch_version():
    try:
        return subprocess.run([PYTHON, "-c", "import torch; print(torch.__version__)"], capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "not available"


# The BLAS library PyTorch's matmul loads: Debian's python3-torch takes whichever libblas.so.3
# the alternatives system selects, and the reference BLAS a fresh machine gets made PyTorch's
# prefill ~24x slower than OpenBLAS (bench/README.md), which would make every ratio a lie.
BLAS_PROBE = """
import torch
torch.ones(64, 64) @ torch.ones(64, 64)
print(sorted({l.split()[-1] for l in open('/proc/self/maps') if 'blas' in l.lower() and '/' in l})[0])
"""


def torch_blas():
    try:
        return subprocess.run([PYTHON, "-c", BLAS_PROBE], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError, IndexError):
        return "not found"


def measure(cmd, timeout_s):
    """Runs one benchmark command; returns the result dict of a table cell."""
    o = bench_proc.run(cmd, timeout_s, log=log)
    side = {"rss_mib": o.max_rss_kib / 1024 if o.max_rss_kib else None, "wall_s": o.wall_s, "error": o.error}
    if not o.error:
        try:
            side["prefill"], side["decode"] = o.rates()
        except ValueError as e:
            side["error"] = str(e)
    if side["error"]:
        log(f"  failed: {side['error']}")
    else:
        log(f"  prefill {side['prefill']:.1f} tok/s, decode {side['decode']:.2f} tok/s")
    side["stderr_tail"] = "\n".join(o.stderr.strip().splitlines()[-4:])
    return side


def same_model_check(args, config):
    """PyTorch's logits against `gpt-vk forward` on the f32 config: the one-line verdict."""
    log("same-model check: PyTorch against gpt-vk forward")
    o = bench_proc.run([PYTHON, TORCH_REFERENCE, "--config", config, "--threads", str(args.torch_threads),
                        "--check-gptvk", args.gptvk, "--check-only"], args.timeout, log=log)
    m = re.search(r"check vs gpt-vk forward: (.*)", o.stderr)
    verdict = m.group(1) if m else "no result"
    if o.error:
        verdict += f"; FAILED: {o.error}"
    log(f"  {verdict}")
    return verdict


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="tiny + gpt2-small, contexts 128,512, 3 repeats")
    ap.add_argument("--shapes", help=f"comma-separated (default {FULL['shapes']})")
    ap.add_argument("--dtypes", help=f"device dtypes of gpt-vk (default {FULL['dtypes']})")
    ap.add_argument("--contexts", help=f"prompt lengths = decode depths (default {FULL['contexts']})")
    ap.add_argument("--repeats", type=int, help=f"measured runs after the warm-up (default {FULL['repeats']})")
    ap.add_argument("--gen-tokens", type=int, default=32, help="decode steps per run (default 32)")
    ap.add_argument("--gptvk", default=os.path.join(ROOT, "build", "gpt-vk"), help="the gpt-vk binary")
    ap.add_argument("--models-dir", default=make_random_model.DEFAULT_OUT, help="scratch dir for the models")
    ap.add_argument("--results-dir", default=os.path.join(BENCH, "results"))
    ap.add_argument("--torch-threads", type=int, default=2)
    ap.add_argument("--torch-dtype", choices=("f32", "f16", "bf16"), default="f32")
    ap.add_argument("--no-torch", action="store_true", help="gpt-vk only")
    ap.add_argument("--no-startup", action="store_true", help="skip start-to-first-token and peak memory")
    ap.add_argument("--startup-repeats", type=int, default=3)
    ap.add_argument("--timeout", type=int, help="seconds per command (default 3600; 600 with --quick)")
    ap.add_argument("--llama-cpp", action="store_true",
                    help=f"also llama.cpp Vulkan and CPU on the {'/'.join(LLAMA_DTYPES)} rows at context {LLAMA_CONTEXT}")
    args = ap.parse_args()
    preset = QUICK if args.quick else FULL
    for key, value in preset.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    args.shapes = [s for s in args.shapes.split(",") if s]
    args.dtypes = [d for d in args.dtypes.split(",") if d]
    args.contexts = [int(c) for c in args.contexts.split(",") if c]
    unknown = [s for s in args.shapes if s not in make_random_model.SHAPES]
    if unknown:
        ap.error(f"unknown shape(s) {', '.join(unknown)}; known: {', '.join(make_random_model.SHAPES)}")
    bad = [d for d in args.dtypes if d not in make_random_model.DEVICE_DTYPES]
    if bad:
        ap.error(f"unknown dtype(s) {', '.join(bad)}")
    if args.repeats < 1 or args.gen_tokens < 1 or any(c < 1 for c in args.contexts):
        ap.error("--repeats, --gen-tokens and contexts must be positive")
    if not os.access(args.gptvk, os.X_OK):
        ap.error(f"{args.gptvk} is not an executable: build gpt-vk first or pass --gptvk")
    installed = os.path.isdir(os.path.join(LLAMA_DIR, "node_modules", "node-llama-cpp"))
    if args.llama_cpp and not (shutil.which("node") and installed):
        raise SystemExit("run_bench: --llama-cpp needs node and node-llama-cpp: "
                         "cd bench/llama_cpp && npm install --omit=optional --ignore-scripts")
    return args


def llama_cpp_rows(args, shape, rows):
    """llama.cpp's Vulkan and CPU backends on the GGUF of each f32/f16 row's weights, added to
    the row as "llama_vulkan" and "llama_cpu" (same prompt, decode steps and repeats)."""
    sys.path.insert(0, LLAMA_DIR)
    import to_gguf  # here, not at the top: the default sweep does not touch bench/llama_cpp
    for r in rows:
        if r["dtype"] not in LLAMA_DTYPES:
            continue
        gguf = to_gguf.write_gguf(args.models_dir, shape, r["dtype"], log=log)
        for backend in LLAMA_BACKENDS:
            log(f"{shape} {r['dtype']} context {r['context']}: llama.cpp {backend}")
            load = bench_proc.load_average()  # llama.cpp's threads spin: it suffers most from a busy machine
            cmd = ["node", os.path.join(LLAMA_DIR, "bench.mjs"), "--model", gguf, "--backend", backend,
                   "--prompt-tokens", str(r["prompt_tokens"]), "--gen-tokens", str(args.gen_tokens),
                   "--repeats", str(args.repeats), "--threads", str(args.torch_threads)]
            r["llama_" + backend] = dict(measure(cmd, args.timeout), load=load)


def llama_cpp_check(args, shape):
    """llama.cpp's greedy picks and probabilities against `gpt-vk forward` (f32): the verdict."""
    log(f"same-model check: llama.cpp against gpt-vk forward ({shape})")
    o = bench_proc.run([PYTHON, os.path.join(LLAMA_DIR, "check_same_model.py"), "--models-dir", args.models_dir,
                        "--shape", shape, "--gptvk", args.gptvk], args.timeout, log=log)
    verdict = (o.stdout.strip().splitlines() or ["no result"])[-1]
    if o.error:
        verdict += f"; FAILED: {o.error}"
    log(f"  {verdict}")
    return verdict


def write_results(results, results_dir):
    os.makedirs(results_dir, exist_ok=True)
    with open(os.path.join(results_dir, "latest.json"), "w") as f:
        json.dump(results, f, indent=1)
    with open(os.path.join(results_dir, "latest.md"), "w") as f:
        f.write(bench_report.markdown(results))
    if results["rows"]:
        bench_report.plot(results, os.path.join(results_dir, "latest.png"))


def main():
    args = parse_args()
    t_start = time.time()
    try:  # the plot is written at every checkpoint: fail now, not after the first measurements
        import matplotlib  # noqa: F401
    except ImportError:
        raise SystemExit("run_bench: matplotlib is missing (apt-get install python3-matplotlib)")
    torch_ver = torch_version()  # one interpreter start that imports torch, not two
    have_torch = torch_ver != "not available"
    if not args.no_torch and not have_torch:
        raise SystemExit(f"run_bench: PyTorch is missing ({PYTHON} cannot import torch): "
                         "apt-get install python3-torch, or give --no-torch for gpt-vk alone")
    blas = None if args.no_torch else torch_blas()
    if blas is not None and "openblas" not in blas:
        log(f"warning: PyTorch runs on {blas}, not OpenBLAS: its figures will be far too slow "
            "(apt-get install libopenblas0-pthread)")
    devices = subprocess.run([args.gptvk, "devices", "-v"], capture_output=True, text=True)
    if devices.returncode != 0:
        raise SystemExit(f"run_bench: `{args.gptvk} devices -v` failed: {devices.stderr.strip()}")
    results = {
        "meta": {
            "date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
            "command": "bench/sweeps/run_bench.py " + " ".join(shlex.quote(a) for a in sys.argv[1:]),
            "commit": git_commit(), "machine": machine_info(), "devices": devices.stdout,
            "device_name": bench_proc.device_name(devices.stdout), "gptvk": args.gptvk, "torch_version": torch_ver,
            "torch_blas": blas,
            "torch_threads": args.torch_threads, "torch_dtype": args.torch_dtype,
            "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", "PASSIVE"),
            "python": platform.python_version(), "repeats": args.repeats, "gen_tokens": args.gen_tokens,
            "load_start": bench_proc.load_average(), "load_end": None, "elapsed_s": 0.0,
        },
        "rows": [], "correctness": {}, "startup": None,
    }
    os.makedirs(args.models_dir, exist_ok=True)
    configs = {}
    if not have_torch:
        # `gpt-vk bench` makes random weights for a config whose file is absent; start-up
        # (`generate`) needs a real file, so it is left out.
        log("no PyTorch to write the random weights: gpt-vk bench makes its own; no start-up measurement")
        args.no_startup = True
    for shape in dict.fromkeys(args.shapes + ([] if args.no_startup else [STARTUP_SHAPE])):
        configs[shape] = make_random_model.write_model(args.models_dir, shape, 1234, log=log, weights=have_torch)

    def checkpoint():
        results["meta"]["load_end"] = bench_proc.load_average()
        results["meta"]["elapsed_s"] = time.time() - t_start
        write_results(results, args.results_dir)

    for shape in args.shapes:
        ctx_len = make_random_model.shape_dims(shape)["context_length"]
        if not args.no_torch:
            results["correctness"][shape] = same_model_check(args, configs[shape]["f32"])
        for context in args.contexts:
            prompt = min(context, ctx_len - args.gen_tokens)
            load = bench_proc.load_average()
            rows = []
            for dtype in args.dtypes:
                log(f"{shape} {dtype} context {context}: gpt-vk")
                cmd = [args.gptvk, "bench", "--config", configs[shape][dtype], "--prompt-tokens", str(prompt),
                       "--gen-tokens", str(args.gen_tokens), "--repeats", str(args.repeats)]
                rows.append({"shape": shape, "dtype": dtype, "context": context, "prompt_tokens": prompt,
                             "load": load, "gptvk": measure(cmd, args.timeout), "torch": None})
            if not args.no_torch:
                log(f"{shape} context {context}: PyTorch {args.torch_dtype}")
                cmd = [PYTHON, TORCH_REFERENCE, "--config", configs[shape]["f32"],
                       "--prompt-tokens", str(prompt), "--gen-tokens", str(args.gen_tokens),
                       "--repeats", str(args.repeats), "--threads", str(args.torch_threads),
                       "--dtype", args.torch_dtype]
                side = measure(cmd, args.timeout)
                for r in rows:
                    r["torch"] = side
            if args.llama_cpp and context == LLAMA_CONTEXT:
                if shape not in results.setdefault("llama_cpp_check", {}):
                    results["llama_cpp_check"][shape] = llama_cpp_check(args, shape)
                llama_cpp_rows(args, shape, rows)
            results["rows"] += rows
            checkpoint()

    if not args.no_startup:
        log(f"start-to-first-token: {STARTUP_SHAPE} f16")
        cfg = configs[STARTUP_SHAPE]["f16"]
        runs = startup_bench.measure(args.gptvk, cfg, args.startup_repeats, timeout_s=args.timeout, log=log)
        results["startup"] = {"config": cfg, "shape": STARTUP_SHAPE, "repeats": args.startup_repeats,
                              "prompt": startup_bench.PROMPT,
                              "runs": runs, "error": runs["error"], "summary": startup_bench.summary(runs)}
        for kind, s in results["startup"]["summary"].items():
            log(f"  {kind}: {s['wall_s']:.2f} s, peak RSS {s['max_rss_mib']:.0f} MiB")
    checkpoint()
    log(f"wrote {os.path.join(args.results_dir, 'latest.md')} ({(time.time() - t_start) / 60:.1f} min)")


if __name__ == "__main__":
    main()
