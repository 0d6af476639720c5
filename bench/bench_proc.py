"""Running one benchmark command: wall time, peak memory, the result line, and failures
that become table cells instead of stopping a long sweep."""
import os
import re
import shlex
import signal
import subprocess
import tempfile
import time

TIME_BIN = "/usr/bin/time"
RESULT_RE = re.compile(r"prefill_tok_s=([0-9.eE+-]+)\s+decode_tok_s=([0-9.eE+-]+)")


class Outcome:
    """What one command did. `error` is None on success, else a short cause for the table."""

    def __init__(self, stdout="", stderr="", wall_s=0.0, max_rss_kib=None, error=None):
        self.stdout, self.stderr = stdout, stderr
        self.wall_s, self.max_rss_kib, self.error = wall_s, max_rss_kib, error

    def rates(self):
        """(prefill tok/s, decode tok/s) from the last `prefill_tok_s=... decode_tok_s=...` line."""
        lines = [l for l in self.stdout.strip().splitlines() if l.strip()]
        m = RESULT_RE.fullmatch(lines[-1].strip()) if lines else None
        if not m:
            raise ValueError("no `prefill_tok_s=... decode_tok_s=...` last line")
        return float(m.group(1)), float(m.group(2))


def run(cmd, timeout_s, env=None, log=None):
    """Runs cmd under /usr/bin/time -v (for "Maximum resident set size") when available.
    Never raises for a failing command: the Outcome says what went wrong."""
    full_env = dict(os.environ, **(env or {}))
    with tempfile.NamedTemporaryFile("r", suffix=".time") as tf:
        wrapped = [TIME_BIN, "-v", "-o", tf.name] + cmd if os.access(TIME_BIN, os.X_OK) else cmd
        if log:
            log("$ " + shlex.join(cmd))
        t0 = time.perf_counter()
        # own process group, so a timeout ends the measured command too, not just `time`
        proc = subprocess.Popen(wrapped, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=full_env, start_new_session=True)
        try:
            stdout, stderr = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            stdout, stderr = proc.communicate()
            return Outcome(stdout, stderr, time.perf_counter() - t0, None, f"timeout {timeout_s} s")
        except BaseException:  # Ctrl-C: leave nothing running behind
            os.killpg(proc.pid, signal.SIGKILL)
            raise
        wall = time.perf_counter() - t0
        rss = None
        m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", tf.read())
        if m:
            rss = int(m.group(1))
    error = None
    if proc.returncode != 0:
        last = ([l for l in stderr.splitlines() if l.strip() and not l.startswith(("\t", "Command "))]
                or ["(no stderr)"])[-1]
        error = f"exit {proc.returncode}: {last.strip()[:120]}"
    return Outcome(stdout, stderr, wall, rss, error)


def load_average():
    """The 1-minute load average: how busy the shared machine was around a measurement."""
    try:
        return os.getloadavg()[0]
    except OSError:
        return None


def device_name(devices_text):
    """The chosen device's name from `gpt-vk devices -v`."""
    m = re.search(r"^chosen: \d+: (.+) \([^()]*\)\s*$", devices_text, re.M)
    if m:
        return m.group(1)
    first = devices_text.strip().splitlines()
    return first[0] if first else "unknown device"
