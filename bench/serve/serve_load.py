#!/usr/bin/env python3
"""Load test for `gpt-vk serve`: N concurrent streaming clients, standard library only.

Each client sends --requests streamed /v1/completions one after another (its own seed each)
and times them: time to first token (request sent -> first event with text), the gaps
between later events (inter-token latency) and the tokens made (usage.completion_tokens,
via stream_options.include_usage). Prints one markdown row per client count: aggregate
tok/s (all tokens / wall time of the round), p50/p90 TTFT and inter-token latency, and
whether every response was complete (ended with data: [DONE] and finish_reason set).
With --long-prompt N, one more request with an N-token prompt (and max_tokens 1) arrives in
each round once the clients stream: the clients' longest inter-token gap then shows how long
its prefill holds up the running streams (serve --prefill-chunk bounds that to a chunk).
Every client sends the same prompt (the server runs prompts arriving together once, each
sequence sampling with its own seed); --distinct-prompts ends client c's with " c" instead.
A prompt that ran before is an exact hit of the server's prompt cache (its first token is
drawn from the logits kept from that run); --fresh-prompts adds the round and request number
to every prompt, so that no request repeats an earlier one's and each round's first prompts
run: what concurrency costs when the cache cannot help.

  python3 bench/serve/serve_load.py --binary build/gpt-vk --clients 1,16   # starts the server
  python3 bench/serve/serve_load.py --url http://127.0.0.1:8080 --clients 4
  python3 bench/serve/serve_load.py --binary build/gpt-vk --clients 4 --long-prompt 900 \\
      --server-args "--config CFG.toml --prefill-chunk 128"
"""
import argparse
import http.client
import json
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse


def percentile(values, p):
    if not values:
        return float("nan")
    s = sorted(values)
    k = (len(s) - 1) * p / 100
    lo, hi = int(k), min(int(k) + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def start_server(binary, parallel, extra, wait_s=120):
    """Starts `binary serve` on a free port; returns (process, url) once it listens. Exits
    with the server's own last words when it ends or stays silent for wait_s seconds."""
    try:
        proc = subprocess.Popen([binary, "serve", "--port", "0", "--parallel", str(parallel)] + extra,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    except OSError as e:
        sys.exit(f"serve: cannot start {binary}: {e}")
    lines, url, settled = [], [], threading.Event()  # settled: listening, or stderr ended

    def drain():  # reads stderr to the end, so the server never blocks on a full pipe
        for line in proc.stderr:
            if not settled.is_set():
                lines.append(line)
                m = re.search(r"listening on (http://\S+)", line)
                if m:
                    url.append(m.group(1))
                    settled.set()
        settled.set()  # end of stderr: the server exited

    threading.Thread(target=drain, daemon=True).start()
    ended_or_listening = settled.wait(wait_s)  # read before the kill below ends stderr too
    if url:
        return proc, url[0]
    proc.kill()
    proc.wait()
    said = "".join(lines[-5:]).strip() or "nothing on stderr"
    why = f"exited with {proc.returncode}" if ended_or_listening else f"not listening after {wait_s:.0f} s"
    sys.exit(f"serve: the server did not start ({binary} {why}): {said}")


def one_request(url, body, timeout):
    """Streams one completion; returns (ttft_s, [gaps_s], tokens, complete). A request that
    fails (refused, HTTP error, broken stream) is incomplete, its reason on stderr."""
    try:
        return stream_completion(url, body, timeout)
    except (OSError, http.client.HTTPException, ValueError) as e:
        print(f"serve_load: request failed: {e}", file=sys.stderr)
        return None, [], 0, False


def stream_completion(url, body, timeout):
    u = urllib.parse.urlparse(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
    t0 = time.perf_counter()
    conn.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
    resp = conn.getresponse()
    if resp.status != 200:
        reason = resp.read()[:200]
        conn.close()
        raise ValueError(f"HTTP {resp.status}: {reason!r}")
    ttft, last, gaps, tokens, finished, done = None, None, [], 0, False, False
    for raw in resp:  # one line at a time: "data: {...}", blank lines between events
        line = raw.decode("utf-8", "replace").strip()
        if not line.startswith("data: "):
            continue
        if line == "data: [DONE]":
            done = True
            break
        event = json.loads(line[6:])
        now = time.perf_counter()
        if event.get("usage"):
            tokens = event["usage"]["completion_tokens"]
        for choice in event.get("choices", []):
            if choice.get("finish_reason"):
                finished = True
            if choice.get("text"):
                if ttft is None:
                    ttft = now - t0
                else:
                    gaps.append(now - last)
                last = now
    conn.close()
    return ttft, gaps, tokens, done and finished


ROUNDS = iter(range(1 << 30))  # rounds run so far, for --fresh-prompts


def run_round(url, clients, requests, args, long_prompt=True):
    results, lock = [], threading.Lock()
    round_no = next(ROUNDS)

    def client(c):
        for r in range(requests):
            prompt = f"{args.prompt} ({round_no}.{r})" if args.fresh_prompts else args.prompt
            prompt = f"{prompt} {c}" if args.distinct_prompts else prompt
            body = {"prompt": prompt, "max_tokens": args.max_tokens, "temperature": 0.8,
                    "seed": c * 1000 + r, "stream": True, "stream_options": {"include_usage": True}}
            out = one_request(url, body, args.timeout)
            with lock:
                results.append(out)

    threads = [threading.Thread(target=client, args=(c,)) for c in range(clients)]
    if args.long_prompt and long_prompt:
        def long_request():
            time.sleep(args.long_delay)  # the clients stream by then
            # Its first token differs from every earlier round's, so no cached prefix helps.
            prompt = [1000 + round_no] + [464] * (args.long_prompt - 1)
            body = {"prompt": prompt, "max_tokens": 1, "stream": True}
            ttft, _, _, complete = one_request(url, body, args.timeout)
            first = f"first token after {ttft:.2f} s" if ttft is not None else "no token"
            print(f"long prompt: {args.long_prompt} tokens, {first}, "
                  f"{'complete' if complete else 'INCOMPLETE'}", file=sys.stderr)
        threads.append(threading.Thread(target=long_request))
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    ttfts = [r[0] for r in results if r[0] is not None]
    gaps = [g for r in results for g in r[1]]
    tokens = sum(r[2] for r in results)
    complete = sum(1 for r in results if r[3])
    return {
        "clients": clients, "requests": clients * requests, "complete": complete, "tokens": tokens,
        "tok_s": tokens / wall if wall > 0 else 0,
        "ttft_p50": percentile(ttfts, 50) * 1e3, "ttft_p90": percentile(ttfts, 90) * 1e3,
        "itl_p50": percentile(gaps, 50) * 1e3, "itl_p90": percentile(gaps, 90) * 1e3,
        "itl_max": max(gaps) * 1e3 if gaps else float("nan"),
        "ttft_median": statistics.median(ttfts) * 1e3 if ttfts else float("nan"),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", help="gpt-vk binary: start `serve` on a free port (--parallel = most clients)")
    ap.add_argument("--url", help="a running server instead, e.g. http://127.0.0.1:8080")
    ap.add_argument("--clients", default="1,16", help="comma-separated client counts, one round each")
    ap.add_argument("--requests", type=int, default=3, help="requests per client per round")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--prompt", default="It is a truth universally acknowledged, that a single man in possession")
    ap.add_argument("--distinct-prompts", action="store_true", help="each client's prompt its own (ends with its number)")
    ap.add_argument("--fresh-prompts", action="store_true",
                    help="no prompt repeats an earlier request's (each ends with its round and request number)")
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--long-prompt", type=int, default=0, help="tokens of one long prompt arriving in each round")
    ap.add_argument("--long-delay", type=float, default=1.0, help="seconds into the round the long prompt arrives")
    ap.add_argument("--server-args", default="",
                    help='more flags for gpt-vk serve (with --binary); write --server-args="--flag ..." when they begin with -')
    args = ap.parse_args()
    try:
        counts = [int(c) for c in args.clients.split(",")]
    except ValueError:
        ap.error(f"--clients takes whole numbers separated by commas, not {args.clients!r}")
    if min(counts) < 1 or args.requests < 1 or args.max_tokens < 1:
        ap.error("--clients, --requests and --max-tokens must be at least 1")
    if bool(args.binary) == bool(args.url):
        ap.error("give exactly one of --binary and --url")
    proc = None
    url = args.url
    if args.binary:
        proc, url = start_server(args.binary, max(counts) + (1 if args.long_prompt else 0), args.server_args.split())
    try:
        run_round(url, 1, 1, args, long_prompt=False)  # warm-up: the first request compiles pipelines
        rows = [run_round(url, n, args.requests, args) for n in counts]
    finally:
        if proc:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)
    print(f"max_tokens {args.max_tokens}, {args.requests} requests per client, "
          f"{'distinct prompts' if args.distinct_prompts else 'one prompt'}"
          f"{', fresh each request' if args.fresh_prompts else ''}, url {url}")
    print("| clients | requests (complete) | tokens | aggregate tok/s | TTFT p50 / p90 (ms) "
          "| inter-token p50 / p90 / max (ms) |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        print(f"| {r['clients']} | {r['requests']} ({r['complete']}) | {r['tokens']} | {r['tok_s']:.1f} | "
              f"{r['ttft_p50']:.1f} / {r['ttft_p90']:.1f} | "
              f"{r['itl_p50']:.1f} / {r['itl_p90']:.1f} / {r['itl_max']:.1f} |")
    if len(rows) > 1 and rows[0]["clients"] == 1:
        ratio = rows[-1]["ttft_median"] / rows[0]["ttft_median"]
        print(f"median TTFT with {rows[-1]['clients']} clients = {ratio:.2f}x that of 1 client (target: at most 2x)")
    return 0 if all(r["complete"] == r["requests"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
