#!/usr/bin/python3
"""Turns the results of bench/sweeps/run_bench.py (a dict, also saved as JSON) into the markdown
report and the tokens/s-against-context plot.

Usage: bench_report.py [RESULTS_DIR]   rewrites latest.md and latest.png from latest.json
(default bench/results), e.g. after a change to the report's layout.
"""
import argparse
import json
import os
import sys

# The project's reference figures for GPT-2 small, not re-measured by a default run_bench.py
# (with --llama-cpp it measures llama.cpp here too, through npm's node-llama-cpp: bench/llama_cpp/).
# They are from a 2-core Zen 5 VM with ~48 GB/s of memory read bandwidth; 2-core Xeon VMs have
# ~22 GB/s (a two-thread AVX2 read loop), and Zen 5 VMs' bandwidth can move between 35 and
# 70 GB/s within an hour, so only ratios measured in one run compare. The roofline is f16
# weights of GPT-2 small (~248 MB) streamed once per decoded token.
KNOWN_BASELINES = [
    ("llama.cpp, Vulkan backend on lavapipe", "F16", "38", "3.7"),
    ("llama.cpp, Vulkan backend on lavapipe", "F32", "41", "4.0"),
    ("llama.cpp, native CPU backend", "F16", "1776", "149"),
    ("PyTorch 1.13 CPU with KV cache", "F32", "789", "32"),
    ("the seed scripts' generation loop (no KV cache)", "F32", "", "3.9"),
    ("roofline: f16 weights / 48 GB/s (the issue's machine)", "F16", "", "~194"),
    ("roofline: f16 weights / 22 GB/s (the 2-core Xeon VMs of earlier sessions)", "F16", "", "~88"),
]


def _num(x, digits=1):
    return "" if x is None else f"{x:.{digits}f}"


def _rate(side, key):
    """A throughput cell: the number, or the error that replaced it."""
    if side is None:
        return "not run"
    if side.get("error"):
        return "failed"
    v = side.get(key)
    return _num(v, 1 if v is not None and v >= 100 else 2)


def _ratio(row, key):
    g, t = row.get("gptvk") or {}, row.get("torch") or {}
    if g.get(key) and t.get(key) and not g.get("error") and not t.get("error"):
        return f"{g[key] / t[key]:.2f}x"
    return ""


def _context_cell(row):
    if row["prompt_tokens"] != row["context"]:
        return f"{row['context']} ({row['prompt_tokens']})"
    return str(row["context"])


def markdown(results):
    meta, rows = results["meta"], results["rows"]
    m = meta["machine"]
    out = [
        "# gpt-vk throughput against PyTorch",
        "",
        f"Written by `bench/sweeps/run_bench.py` on {meta['date']} (`{meta['command']}`), "
        f"gpt-vk at commit `{meta['commit']}` (the working tree may hold uncommitted changes), "
        f"{meta['elapsed_s'] / 60:.1f} minutes.",
        "",
        "## Machine",
        "",
        f"- CPU: {m['cpu']}, {m['cores']} cores, {m['mem_gib']:.0f} GiB memory; Linux {m['kernel']}",
        f"- PyTorch {meta['torch_version']} (BLAS: {meta.get('torch_blas') or 'not recorded'}), "
        f"{meta['torch_threads']} threads, computing in {meta['torch_dtype']}, "
        f"OMP_WAIT_POLICY={meta.get('omp_wait_policy', 'not recorded')} (idle OpenMP threads sleep instead of "
        f"spinning: spinning made PyTorch several times slower on this shared machine); Python {meta['python']}",
        f"- 1-minute load average {_num(meta['load_start'], 1)} at the start, {_num(meta['load_end'], 1)} at the end "
        f"(the machine is shared with builds and training runs: absolute numbers are noisy; the ratio "
        f"against PyTorch measured right after gpt-vk in the same sweep is what to compare)",
        "- `gpt-vk devices -v`:",
        "",
        "```",
        meta["devices"].strip(),
        "```",
        "",
        "## Known baselines (from issue 7, not re-measured here)",
        "",
        "Measured by issue 7 with GPT-2 small (124M) on a 2-core Zen 5 VM (~48 GB/s memory read "
        "bandwidth), not necessarily the machine below (the same kind or not: see its CPU); listed "
        "for context only.",
        "",
        "| engine | weights | prefill tok/s | decode tok/s |",
        "| --- | --- | ---: | ---: |",
    ]
    out += [f"| {e} | {w} | {p} | {d} |" for e, w, p, d in KNOWN_BASELINES]
    out += [
        "",
        "## This run",
        "",
        f"Models with deterministic random weights (`bench/make_random_model.py`, GPT-2 initialisation), "
        f"stored as F32; \"weights\" is the dtype gpt-vk keeps them in on the device. Each cell is the median "
        f"of {meta['repeats']} runs after a warm-up run: prefill of the prompt (random tokens) including the "
        f"greedy pick of the first new token, then {meta['gen_tokens']} greedy decode steps starting at a depth "
        f"equal to the prompt length. Where prompt + generated tokens would pass the 1024-token context the "
        f"prompt is shortened (shown in parentheses). PyTorch runs the same weights file with a KV cache "
        f"(`bench/peers/torch_reference.py`), always in {meta['torch_dtype']}, so the f32 and f16 rows of one shape "
        f"and context share one PyTorch measurement. Ratio = gpt-vk / PyTorch (above 1: gpt-vk is faster). "
        f"RSS is the peak resident memory of the whole process (weights, KV cache, and on lavapipe the "
        f"\"device\" memory).",
        "",
        "| shape | weights | context | gpt-vk prefill tok/s | gpt-vk decode tok/s | PyTorch prefill tok/s "
        "| PyTorch decode tok/s | prefill ratio | decode ratio | gpt-vk RSS MiB | PyTorch RSS MiB | load avg |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    errors = []
    for r in rows:
        g, t = r.get("gptvk"), r.get("torch")
        for name, side in (("gpt-vk", g), ("PyTorch", t)):
            if side and side.get("error"):
                errors.append(f"- {r['shape']} {r['dtype']} {r['context']}: {name}: {side['error']}")
        out.append(
            f"| {r['shape']} | {r['dtype']} | {_context_cell(r)} | {_rate(g, 'prefill')} | {_rate(g, 'decode')} "
            f"| {_rate(t, 'prefill')} | {_rate(t, 'decode')} | {_ratio(r, 'prefill')} | {_ratio(r, 'decode')} "
            f"| {_num((g or {}).get('rss_mib'), 0)} | {_num((t or {}).get('rss_mib'), 0)} | {_num(r.get('load'), 1)} |")
    if errors:
        out += ["", "Failures:", ""] + errors
    if results.get("correctness"):
        out += ["", "Same model check (PyTorch logits against `gpt-vk forward`, f32 weights, 10 tokens):", ""]
        out += [f"- {shape}: {line}" for shape, line in results["correctness"].items()]
    out += _llama_cpp_section(results)
    out += _startup_section(results.get("startup"))
    out += ["", "![tokens/s against context length](latest.png)", ""]
    return "\n".join(out)


def _llama_cpp_section(results):
    """The llama.cpp rows of `run_bench.py --llama-cpp` (none without it)."""
    rows = [r for r in results["rows"] if r.get("llama_vulkan") or r.get("llama_cpu")]
    if not rows:
        return []
    meta = results["meta"]

    def ratio(r, side, key):
        g, l = r.get("gptvk") or {}, r.get(side) or {}
        if g.get(key) and l.get(key) and not g.get("error") and not l.get("error"):
            return f"{g[key] / l[key]:.2f}x"
        return ""

    out = [
        "",
        "## llama.cpp on the same machine",
        "",
        f"llama.cpp through node-llama-cpp's prebuilt binaries (`bench/llama_cpp/bench.mjs`), run right after "
        f"PyTorch on a GGUF of the same weights (`bench/llama_cpp/to_gguf.py`: \"f16\" is what llama.cpp's "
        f"converter writes for F16, 2-D weights in F16 and norms, biases and position embeddings in F32; "
        f"\"f32\" is all F32), with the same protocol: median of {meta['repeats']} runs after a warm-up, "
        f"prefill including the first greedy pick, then {meta['gen_tokens']} greedy decode steps. Vulkan: "
        f"every layer offloaded to the Vulkan device; CPU: llama.cpp's own CPU backend, "
        f"{meta['torch_threads']} threads. Ratio = gpt-vk / llama.cpp (above 1: gpt-vk is faster). llama.cpp's "
        f"threads spin while they wait, so a busy machine (load average well above 0, taken as each run "
        f"started) slows it far more than gpt-vk.",
        "",
        "| shape | weights | context | gpt-vk prefill tok/s | gpt-vk decode tok/s | llama.cpp Vulkan prefill tok/s "
        "| llama.cpp Vulkan decode tok/s | prefill ratio | decode ratio | llama.cpp CPU prefill tok/s "
        "| llama.cpp CPU decode tok/s | prefill ratio | decode ratio | load avg Vulkan, CPU |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    errors, setups = [], {}
    for r in rows:
        g, v, c = r.get("gptvk"), r.get("llama_vulkan"), r.get("llama_cpu")
        for name, side in (("llama.cpp Vulkan", v), ("llama.cpp CPU", c)):
            if side and side.get("error"):
                errors.append(f"- {r['shape']} {r['dtype']} {r['context']}: {name}: {side['error']}")
            elif side:  # bench.mjs's summary line: version, device, offloaded layers, threads
                setups.update({l.strip(): None for l in side.get("stderr_tail", "").splitlines()
                               if l.startswith("llama.cpp ")})
        out.append(
            f"| {r['shape']} | {r['dtype']} | {_context_cell(r)} | {_rate(g, 'prefill')} | {_rate(g, 'decode')} "
            f"| {_rate(v, 'prefill')} | {_rate(v, 'decode')} | {ratio(r, 'llama_vulkan', 'prefill')} "
            f"| {ratio(r, 'llama_vulkan', 'decode')} | {_rate(c, 'prefill')} | {_rate(c, 'decode')} "
            f"| {ratio(r, 'llama_cpu', 'prefill')} | {ratio(r, 'llama_cpu', 'decode')} "
            f"| {_num((v or {}).get('load'), 1)}, {_num((c or {}).get('load'), 1)} |")
    if setups:
        out += ["", "Setups (from bench.mjs):", ""] + [f"- {s}" for s in setups]
    if errors:
        out += ["", "Failures:", ""] + errors
    if results.get("llama_cpp_check"):
        out += ["", "Same model check (llama.cpp's greedy picks against `gpt-vk forward`, f32 weights, "
                "bench/llama_cpp/check_same_model.py):", ""]
        out += [f"- {line}" for line in results["llama_cpp_check"].values()]
    return out


def _startup_section(st):
    if not st:
        return []
    out = [
        "",
        "## Start-to-first-token and peak memory of `gpt-vk generate`",
        "",
        f"`gpt-vk generate --config {os.path.basename(st['config'])} --prompt '{st.get('prompt', 'x')}' --max-tokens 1` "
        f"({st['shape']}, random weights, f16 on the device), timed from process launch to exit; median of "
        f"{st['repeats']}. Cold: gpt-vk's pipeline cache (`GPTVK_CACHE_DIR`) and the driver's shader cache "
        f"(`MESA_SHADER_CACHE_DIR`: lavapipe JIT-compiles each pipeline at its first dispatch and keeps the "
        f"machine code there) are a new empty directory; warm: the same directory again. Plain rows are "
        f"greedy (`--temperature 0`); \"sampling\" rows use `generate`'s default top-k/top-p, whose sampler "
        f"stages are compiled too. The model's and the sampler's pipelines compile while the weights load (GptModel::warm_up, ops::SamplerWarmUp). The weights file comes "
        f"from the OS page cache every time. \"load\" is the model-loading time gpt-vk reports on stderr.",
        "",
    ]
    if st.get("error"):
        return out + [f"Failed: {st['error']}"]
    out += ["| pipeline cache, decoding | start-to-first-token s | of which load s | peak RSS MiB |",
            "| --- | ---: | ---: | ---: |"]
    for kind, s in st["summary"].items():
        out.append(f"| {kind} | {s['wall_s']:.2f} | {_num(s['load_s'], 2)} | {_num(s['max_rss_mib'], 0)} |")
    return out


def plot(results, path):
    """Prefill and decode tokens/s against context length, one line per engine/shape/dtype."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, NullFormatter

    plain = FuncFormatter(lambda v, _: f"{v:g}")  # 200, not 2x10^2

    rows = results["rows"]
    shapes = list(dict.fromkeys(r["shape"] for r in rows))
    dtypes = list(dict.fromkeys(r["dtype"] for r in rows))
    colors = dict(zip(shapes, plt.rcParams["axes.prop_cycle"].by_key()["color"]))
    styles = dict(zip(dtypes, ["-", "--", "-.", ":"]))
    fig, axes = plt.subplots(1, 2, figsize=(13, 5.5))
    for ax, key, title in ((axes[0], "prefill", "prefill"), (axes[1], "decode", "decode (depth = context)")):
        for shape in shapes:
            for dtype in dtypes:
                pts = [(r["prompt_tokens"], r["gptvk"][key]) for r in rows if r["shape"] == shape
                       and r["dtype"] == dtype and r.get("gptvk") and not r["gptvk"].get("error")]
                if pts:
                    ax.plot(*zip(*pts), styles[dtype], marker="o", color=colors[shape],
                            label=f"gpt-vk {shape} {dtype}")
            # PyTorch is shared by the dtype rows: one line per shape
            seen = {}
            for r in rows:
                t = r.get("torch")
                if r["shape"] == shape and t and not t.get("error"):
                    seen.setdefault(r["prompt_tokens"], t[key])
            if seen:
                ax.plot(*zip(*sorted(seen.items())), ":", marker="s", color=colors[shape], alpha=0.7,
                        label=f"PyTorch {results['meta']['torch_dtype']} {shape}")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(plain)
        low, high = ax.get_ylim()
        # within one decade there are no major ticks to read: label the minor ones instead
        ax.yaxis.set_minor_formatter(plain if high / low < 10 else NullFormatter())
        contexts = sorted({r["prompt_tokens"] for r in rows})
        ax.set_xticks(contexts)
        ax.set_xticklabels([str(c) for c in contexts])
        ax.set_xlabel("context (prompt tokens)")
        ax.set_ylabel("tokens/s")
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
    axes[1].legend(fontsize=7, loc="best")
    fig.suptitle(f"gpt-vk on {results['meta']['device_name']} vs PyTorch CPU ({results['meta']['date']})")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results_dir", nargs="?", metavar="RESULTS_DIR",
                        default=os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "results"),
                        help="the folder of latest.json (default bench/results)")
    results_dir = parser.parse_args().results_dir
    try:  # both checked before latest.md is rewritten
        import matplotlib  # noqa: F401
        with open(os.path.join(results_dir, "latest.json")) as f:
            results = json.load(f)
    except ImportError:
        sys.exit("bench_report: matplotlib is missing (apt-get install python3-matplotlib)")
    except (OSError, ValueError) as e:
        sys.exit(f"bench_report: cannot read {results_dir}/latest.json: {e}")
    with open(os.path.join(results_dir, "latest.md"), "w") as f:
        f.write(markdown(results))
    if results["rows"]:
        plot(results, os.path.join(results_dir, "latest.png"))
    print(f"rewrote {results_dir}/latest.md and latest.png")


if __name__ == "__main__":
    main()
