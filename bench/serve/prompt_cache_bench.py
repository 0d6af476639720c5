#!/usr/bin/env python3
"""The server's prompt cache on a multi-turn conversation, against `serve --no-prompt-cache`.

A chat client sends the whole transcript every turn: the previous prompt, the reply and a
new user message. With the prompt cache the slot that ran the previous turn keeps its keys
and values, and the new prompt skips the whole --prefill-chunk chunks it shares with it;
while the server is idle (the user reading and typing: --pause seconds here) the slot also
runs the reply's whole chunks as prompt chunks, so the next turn skips those too.
Each round starts one server per mode (--parallel 1), alternating, and runs the same
conversation through both (greedy, streamed): per turn the prompt tokens, the tokens the
cache kept (usage.prompt_tokens_details.cached_tokens) and the time to the first token.
The replies must be the same text in both modes (the cache changes no result); the exit
status is 1 where they differ or a request failed.

  python3 bench/serve/prompt_cache_bench.py --binary build/gpt-vk \\
      --server-args "--config /tmp/gptvk-bench/gpt2-small-f16.toml"   # bench/make_random_model.py
"""
import argparse
import http.client
import json
import signal
import statistics
import sys
import time
import urllib.parse

from serve_load import start_server

# The user's messages, one a turn (public-domain prose: Pride and Prejudice, chapter 1).
MESSAGES = [
    "It is a truth universally acknowledged, that a single man in possession of a good fortune, must be in "
    "want of a wife. However little known the feelings or views of such a man may be on his first entering "
    "a neighbourhood, this truth is so well fixed in the minds of the surrounding families, that he is "
    "considered the rightful property of some one or other of their daughters.",
    "My dear Mr. Bennet, said his lady to him one day, have you heard that Netherfield Park is let at last? "
    "Mr. Bennet replied that he had not. But it is, returned she; for Mrs. Long has just been here, and she "
    "told me all about it. Mr. Bennet made no answer. Do you not want to know who has taken it?",
    "You want to tell me, and I have no objection to hearing it. This was invitation enough. Why, my dear, "
    "you must know, Mrs. Long says that Netherfield is taken by a young man of large fortune from the north "
    "of England; that he came down on Monday in a chaise and four to see the place.",
    "What is his name? Bingley. Is he married or single? Oh! Single, my dear, to be sure! A single man of "
    "large fortune; four or five thousand a year. What a fine thing for our girls! How so? How can it "
    "affect them? My dear Mr. Bennet, replied his wife, how can you be so tiresome!",
    "You must know that I am thinking of his marrying one of them. Is that his design in settling here? "
    "Design! Nonsense, how can you talk so! But it is very likely that he may fall in love with one of "
    "them, and therefore you must visit him as soon as he comes.",
    "I see no occasion for that. You and the girls may go, or you may send them by themselves, which "
    "perhaps will be still better, for as you are as handsome as any of them, Mr. Bingley may like you the "
    "best of the party. My dear, you flatter me.",
]


def stream_completion(url, prompt, max_tokens, timeout):
    """One greedy streamed completion: (ttft_s, text, usage) or None when it failed."""
    u = urllib.parse.urlparse(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
    body = {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "stream": True,
            "stream_options": {"include_usage": True}}
    t0 = time.perf_counter()
    conn.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
    resp = conn.getresponse()
    if resp.status != 200:
        print(f"prompt_cache_bench: HTTP {resp.status}: {resp.read()[:200]!r}", file=sys.stderr)
        conn.close()
        return None
    ttft, text, usage, done = None, "", None, False
    for raw in resp:
        line = raw.decode("utf-8", "replace").strip()
        if line == "data: [DONE]":
            done = True
            break
        if not line.startswith("data: "):
            continue
        event = json.loads(line[6:])
        if event.get("usage"):
            usage = event["usage"]
        for choice in event.get("choices", []):
            if choice.get("text"):
                ttft = ttft if ttft is not None else time.perf_counter() - t0
                text += choice["text"]
    conn.close()
    return (ttft, text, usage) if done and usage else None


def conversation(url, args):
    """Per turn: (prompt tokens, cached tokens, ttft_s, reply)."""
    transcript, turns = "", []
    for message in MESSAGES[:args.turns]:
        transcript += f"User: {message}\nAssistant:"
        out = stream_completion(url, transcript, args.max_tokens, args.timeout)
        if out is None:
            return None
        ttft, reply, usage = out
        turns.append((usage["prompt_tokens"], usage["prompt_tokens_details"]["cached_tokens"], ttft, reply))
        transcript += reply + "\n"
        time.sleep(args.pause)
    return turns


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", required=True, help="gpt-vk binary (started as `serve` on a free port)")
    ap.add_argument("--server-args", default="", help='more flags for gpt-vk serve, e.g. --server-args="--config CFG.toml"')
    ap.add_argument("--turns", type=int, default=len(MESSAGES), help=f"at most {len(MESSAGES)}")
    ap.add_argument("--max-tokens", type=int, default=32, help="reply tokens a turn")
    ap.add_argument("--rounds", type=int, default=2, help="alternating rounds of both modes")
    ap.add_argument("--pause", type=float, default=1.0, help="seconds between a reply and the next turn")
    ap.add_argument("--timeout", type=float, default=300)
    args = ap.parse_args()
    if min(args.rounds, args.turns, args.max_tokens) < 1 or args.turns > len(MESSAGES):
        ap.error(f"--rounds, --turns and --max-tokens must be at least 1, --turns at most {len(MESSAGES)}")
    modes = {"prompt cache": [], "--no-prompt-cache": ["--no-prompt-cache"]}
    runs = {m: [] for m in modes}
    for _ in range(args.rounds):
        for mode, flags in modes.items():
            proc, url = start_server(args.binary, 1, args.server_args.split() + flags)
            try:
                stream_completion(url, "Warm-up", 2, args.timeout)  # the first request compiles pipelines
                turns = conversation(url, args)
            finally:
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout=60)
            if turns is None:
                sys.exit("prompt_cache_bench: a request failed")
            runs[mode].append(turns)
    replies = {tuple(t[3] for t in turns) for mode in runs for turns in runs[mode]}
    same = len(replies) == 1
    print(f"{args.rounds} rounds, {args.max_tokens} tokens a reply, {args.pause} s pauses; "
          "TTFT medians over the rounds (ms)")
    print("| turn | prompt tokens | cached | TTFT, prompt cache | TTFT, --no-prompt-cache | ratio |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: |")
    cached_runs, plain_runs = runs["prompt cache"], runs["--no-prompt-cache"]
    for i in range(len(cached_runs[0])):
        with_cache = statistics.median(r[i][2] for r in cached_runs) * 1e3
        without = statistics.median(r[i][2] for r in plain_runs) * 1e3
        print(f"| {i + 1} | {cached_runs[0][i][0]} | {cached_runs[0][i][1]} | {with_cache:.0f} | {without:.0f} | "
              f"{without / with_cache:.2f}x |")
    total = [sum(t[2] for t in r) for r in cached_runs], [sum(t[2] for t in r) for r in plain_runs]
    print(f"all turns: {statistics.median(total[0]):.2f} s against {statistics.median(total[1]):.2f} s; "
          f"replies {'the same' if same else 'DIFFERENT'} in both modes")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
