"""The corpus built through musa_extension.load_inline, into the current directory
(run as a process by conftest.py: `python -m tests.extensions.build_inline`)."""
import os
from pathlib import Path

CORPUS = Path(__file__).resolve().parent / "corpus"
FUNCTIONS = ["axpy", "row_sum", "softmax", "histogram", "vote", "divergent_barrier", "illegal_write", "atomics", "scan",
             "current_stream_handle"]


def main():
    from torch_musa.utils.musa_extension import load_inline

    # load_inline takes source text: the kernels' shared header goes in inline.
    common = (CORPUS / "corpus_common.muh").read_text().replace("#pragma once", "")
    kernels = (CORPUS / "kernels.mu").read_text().replace('#include "corpus_common.muh"', common)
    load_inline("musa_corpus_inline", (CORPUS / "bindings.inc").read_text(), musa_sources=kernels,
                functions=FUNCTIONS, extra_cflags=["-O2"], build_directory=os.getcwd())


if __name__ == "__main__":
    main()
