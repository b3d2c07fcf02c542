"""Runs one side of a native-vs-musa benchmark in a fresh child process and returns its JSON.

The native side never loads torch_musa (TORCH_DEVICE_BACKEND_AUTOLOAD=0): once a PrivateUse1
backend is registered, native CUDA backward fails in that process (pytorch/pytorch#161129).
The child prints its result as JSON on its last line.
"""
import json
import os
import signal
import subprocess
import sys


def run_side(script, side, argv, musa_driver=None, timeout=None, extra_env=None):
    env = dict(os.environ, **(extra_env or {}))
    if side == "native":
        env["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
    elif musa_driver:
        env.setdefault("TORCH_MUSA_DRIVER", musa_driver)
    # -X faulthandler: a side that dies of a signal (a crash in native code) prints where it was
    child = subprocess.run([sys.executable, "-X", "faulthandler", script, "--side", side] + list(argv), env=env,
                           capture_output=True, text=True, timeout=timeout)
    if child.returncode != 0:
        sys.exit(f"{side} side failed{_died_of(child.returncode, child.stderr)}:\n{child.stderr[-3000:]}")
    return json.loads(child.stdout.strip().splitlines()[-1])


def _died_of(returncode, stderr):
    """' (killed by SIGSEGV in file:line function)' for a child a signal ended, else ''."""
    if returncode >= 0:
        return ""
    try:
        name = signal.Signals(-returncode).name
    except ValueError:
        name = f"signal {-returncode}"
    # faulthandler lists the other threads first, then "Current thread ...": the crashing one,
    # whose first "File ..." line is the innermost frame
    lines = stderr.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("Current thread")]
    innermost = lines[starts[-1] + 1].strip() if starts and starts[-1] + 1 < len(lines) else ""
    if innermost.startswith("File "):
        return f" (killed by {name} in {innermost[5:]})"
    return f" (killed by {name})"
