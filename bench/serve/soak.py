#!/usr/bin/env python3
"""Soak test for `gpt-vk serve`: many requests of every kind, watching the server's memory
and open files. Standard library only; Linux (reads /proc/PID).

Sends --requests requests in waves of --concurrency at once, cycling through five kinds:
a plain completion, a streamed one, a chat completion, n = 3 with logprobs, and a stream
the client hangs up on after its first bytes. Every --report requests it prints the
server's resident memory (VmRSS) and open file descriptors. A server that keeps something
per request (a slot, a buffer, a connection) shows it here long before a user would.

It fails (exit 1) if any request was not answered 200 (a hung-up stream's status line comes
before the client goes), if the server exits before the end, if the resident
memory at the end is more than --rss-growth MiB above the level after the first 10% of the
requests (the warm-up: pipelines compiled, slots and graphs made), or if the server holds
more file descriptors at the end than at that point.

  python3 bench/serve/soak.py --binary build/gpt-vk --requests 2000
  python3 bench/serve/soak.py --binary build/gpt-vk --server-args "--config CFG.toml"
"""
import argparse
import http.client
import json
import os
import signal
import sys
import threading
import time

from serve_load import start_server

KINDS = ("plain", "stream", "chat", "n3_logprobs", "hang_up")


def request_body(i, kind):
    """The path and body of request i; each has its own prompt and seed."""
    body = {"prompt": f"Request {i} of the soak test", "max_tokens": 8, "seed": i}
    if kind == "stream":
        body["stream"] = True
    elif kind == "chat":
        return "/v1/chat/completions", {"messages": [{"role": "user", "content": f"hello {i}"}], "max_tokens": 8}
    elif kind == "n3_logprobs":
        body.update(n=3, logprobs=3)
    elif kind == "hang_up":
        body.update(stream=True, max_tokens=64)
    return "/v1/completions", body


def one_request(host, port, i, timeout):
    """Sends request i; returns True when it was answered as its kind should be."""
    kind = KINDS[i % len(KINDS)]
    path, body = request_body(i, kind)
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        resp = conn.getresponse()
        if kind == "hang_up":
            resp.read(50)  # the first event's bytes, then the client goes away
            return resp.status == 200
        resp.read()
        return resp.status == 200
    except (OSError, http.client.HTTPException):  # refused, reset, a stream cut short
        return False
    finally:
        conn.close()


def server_state(proc):
    """(resident MiB, open file descriptors) of the server process; exits if it has ended."""
    if proc.poll() is not None:
        sys.exit(f"soak: the server exited with {proc.returncode} before the end of the test")
    pid = proc.pid
    with open(f"/proc/{pid}/status") as f:
        rss_kib = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
    return rss_kib / 1024, len(os.listdir(f"/proc/{pid}/fd"))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", required=True, help="gpt-vk binary: `serve` is started on a free port")
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--concurrency", type=int, default=40, help="requests in flight at once")
    ap.add_argument("--parallel", type=int, default=4, help="the server's --parallel")
    ap.add_argument("--report", type=int, default=200, help="print the server's state every N requests")
    ap.add_argument("--rss-growth", type=float, default=32, help="MiB the memory may grow after the warm-up")
    ap.add_argument("--timeout", type=float, default=120)
    ap.add_argument("--server-args", default="", help='more flags for gpt-vk serve, e.g. --server-args="--config CFG.toml"')
    args = ap.parse_args()
    if min(args.requests, args.concurrency, args.parallel, args.report) < 1:
        ap.error("--requests, --concurrency, --parallel and --report must be at least 1")
    proc, url = start_server(args.binary, args.parallel, args.server_args.split())
    host, port = url.split("//")[1].split(":")
    failures, warm, next_report, t0 = 0, None, args.report, time.time()
    try:
        print(f"requests | seconds | failed | resident MiB | open fds   (server pid {proc.pid})")
        for start in range(0, args.requests, args.concurrency):
            ids = range(start, min(start + args.concurrency, args.requests))
            ok = [False] * len(ids)

            def run(k, i):
                ok[k] = one_request(host, int(port), i, args.timeout)

            threads = [threading.Thread(target=run, args=(k, i)) for k, i in enumerate(ids)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            failures += ok.count(False)
            done = ids[-1] + 1
            if warm is None and done >= args.requests // 10:
                warm = server_state(proc)
            if done >= next_report or done == args.requests:
                next_report += args.report
                rss, fds = server_state(proc)
                print(f"{done} | {time.time() - t0:.0f} | {failures} | {rss:.0f} | {fds}", flush=True)
        # A hung-up stream's connection closes when the server next writes to it: give the
        # last wave's a few seconds before counting descriptors.
        deadline = time.time() + 10
        while server_state(proc)[1] > warm[1] and time.time() < deadline:
            time.sleep(0.2)
        rss, fds = server_state(proc)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)
    grew = rss - warm[0]
    print(f"after the warm-up: resident memory {warm[0]:.0f} -> {rss:.0f} MiB ({grew:+.0f}), "
          f"open fds {warm[1]} -> {fds}; {failures} failed requests; server exit {proc.returncode}")
    bad = failures > 0 or grew > args.rss_growth or fds > warm[1] or proc.returncode != 0
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
