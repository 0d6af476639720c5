"""Resuming tools/train_default_model.py from its checkpoint, and describing the runs.

A resumed run loads the model (and the optimizer state, where the checkpoint has one)
from --work/checkpoint.pt, trains for --minutes more on a fresh warmup + cosine
schedule from --lr, and keeps the step/token/minute counters cumulative, so that
reference.json and README.md report the totals of all runs. Each run is recorded in
train_stats.json["runs"] so the README can say how the weights were made.
"""
import json
import os

import torch

FRESH_LR = 2e-3   # --lr default of a run from scratch
RESUME_LR = 1e-3  # --lr default of a resumed run: the model is past the steep start


def first_run_record(stats: dict) -> dict:
    """Checkpoints written before runs were recorded came from one run from scratch
    with the script's defaults of the time (lr 2e-3)."""
    return {"resumed": False, "minutes": stats["train_minutes"], "steps": stats["steps"],
            "tokens": stats["train_tokens"], "lr": FRESH_LR}


def load_resume_state(model, checkpoint: str, stats_path: str):
    """Loads the checkpoint's weights into model; returns (prior_stats, optimizer_state
    or None when the checkpoint holds only the weights)."""
    ckpt = torch.load(checkpoint)
    model.load_state_dict(ckpt["model"])
    with open(stats_path) as f:
        prior = json.load(f)
    if ckpt.get("step", prior["steps"]) != prior["steps"]:
        raise SystemExit(f"{checkpoint} is at step {ckpt['step']} but {stats_path} "
                         f"says {prior['steps']}: they are not from the same run")
    prior.setdefault("runs", [first_run_record(prior)])
    return prior, ckpt.get("optimizer")


def save_checkpoint(path: str, model, opt, step: int, tokens: int, minutes: float) -> None:
    """Writes to a temporary file first so an interrupted save keeps the old one."""
    tmp = path + ".tmp"
    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "step": step,
                "tokens": tokens, "minutes": minutes}, tmp)
    os.replace(tmp, path)


def training_summary(stats: dict, args) -> str:
    """The README's training row: the cumulative totals, then each run."""
    runs = stats.get("runs") or [first_run_record(stats)]
    parts = []
    for r in runs:
        how = ("resumed from the checkpoint with a fresh AdamW state, " if r["resumed"]
               and not r.get("optimizer_state") else "resumed with its AdamW state, "
               if r["resumed"] else "from scratch, ")
        parts.append(f"{how}{r['tokens']} tokens in {r['minutes']} min at lr {r['lr']:g} "
                     f"(warmup, cosine to lr/10)")
    return "; then ".join(parts)


def recreate_commands(stats: dict) -> str:
    runs = stats.get("runs") or [first_run_record(stats)]
    lines = []
    for r in runs:
        extra = f" --resume --lr {r['lr']:g}" if r["resumed"] else ""
        lines.append(f"    nice -n 10 /usr/bin/python3 tools/train_default_model.py"
                     f"{extra} --minutes {r['minutes']:g}")
    return "\n".join(lines)
