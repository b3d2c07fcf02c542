"""Runs one side of a native-vs-musa benchmark in a fresh child process and returns its JSON.

The native side never loads torch_musa (TORCH_DEVICE_BACKEND_AUTOLOAD=0): once a PrivateUse1
backend is registered, native CUDA backward fails in that process (pytorch/pytorch#161129).
The child prints its result as JSON on its last line.
"""
import json
import os
import subprocess
import sys


def run_side(script, side, argv, musa_driver=None, timeout=None):
    env = dict(os.environ)
    if side == "native":
        env["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
    elif musa_driver:
        env.setdefault("TORCH_MUSA_DRIVER", musa_driver)
    child = subprocess.run([sys.executable, script, "--side", side] + list(argv), env=env,
                           capture_output=True, text=True, timeout=timeout)
    if child.returncode != 0:
        sys.exit(f"{side} side failed:\n{child.stderr[-3000:]}")
    return json.loads(child.stdout.strip().splitlines()[-1])
