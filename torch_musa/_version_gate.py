"""The one place Python-side torch-version differences are decided."""
import torch

SUPPORTED = ((2, 11), (2, 12), (2, 13), (2, 14), (2, 15))


def torch_version():
    major, minor = torch.__version__.split("+")[0].split(".")[:2]
    return int(major), int(minor)


def check():
    """Raises ImportError naming the supported versions when torch is not one of them."""
    version = torch_version()
    if version not in SUPPORTED:
        names = ", ".join(f"{a}.{b}" for a, b in SUPPORTED)
        raise ImportError(
            f"torch_musa supports torch {names}; the installed torch is {torch.__version__}. "
            f"Install a supported torch (e.g. pip install torch==2.13.0) and rebuild torch_musa."
        )
    return version


def check_build():
    """Raises ImportError when the compiled extension was built for another torch than the installed one."""
    try:
        from . import _build_info
    except ImportError:  # a build older than this check: the extension load reports mismatches
        return
    installed = torch.__version__.split("+")[0]
    if _build_info.TORCH_VERSION != installed:
        raise ImportError(
            f"this torch_musa was built for torch {_build_info.TORCH_VERSION}, but torch {installed} is installed: "
            f"install torch=={_build_info.TORCH_VERSION}, or rebuild torch_musa against this torch "
            f"(pip install --no-build-isolation -e . in its source tree, or a wheel made with this torch)"
        )


# torch.cuda's graph API that torch 2.14 added and MUSA Graph does not provide yet (conditional
# nodes, dot and graph-data export of CUDA's own graph objects), and 2.15's kernel annotations.
# Using one on musa raises an error naming it; the README's known limits list them. (The
# lifecycle hooks, retain_object, pools and the split capture_end are provided on every torch.)
_CUDA_GRAPH_API_SINCE_2_14 = (
    {"export_dot", "export_graph_data"},
    {"begin_capture_to_if_node", "begin_capture_to_while_node", "end_capture_to_conditional_node",
     "set_conditional_handle_for_current_node", "get_currently_capturing_graph"},
    set(),
)
_CUDA_GRAPH_PARAMS_SINCE_2_15 = {"annotation_config"}


def cuda_graph_api_not_mirrored():
    """(module functions, CUDAGraph methods, torch.cuda.graph parameters) of the installed torch's
    torch.cuda graph API that torch.musa does not mirror yet."""
    if torch_version() < (2, 14):
        return set(), set(), set()
    funcs, methods, params = (set(s) for s in _CUDA_GRAPH_API_SINCE_2_14)
    if torch_version() >= (2, 15):
        params |= _CUDA_GRAPH_PARAMS_SINCE_2_15
    return funcs, methods, params


def unsupported_graph_api(owner: str, name: str):
    """The error for a torch.cuda graph API name torch.musa does not provide yet, or None."""
    modules, methods, _ = _CUDA_GRAPH_API_SINCE_2_14
    if name in (methods if owner == "MUSAGraph" else modules):
        return AttributeError(
            f"{owner}.{name}: torch.cuda's graph API gained it in torch 2.14 and torch_musa does not provide "
            f"it yet (torch {torch.__version__}); capture with capture_begin/capture_end or torch.musa.graph, "
            f"and use debug_dump() to inspect a graph"
        )
    return None


def split_group_on_musa() -> bool:
    """torch.distributed.split_group() finds the parent's backend through torch.accelerator from 2.13;
    torch 2.11 asks for the "cuda" backend by name, so mccl groups cannot be split there."""
    return torch_version() >= (2, 13)


def dcp_saves_musa_tensors() -> bool:
    """torch.distributed.checkpoint's file writer copies accelerator tensors to the CPU through
    torch.accelerator from 2.13; torch 2.11's writer moves only CUDA tensors (save .cpu() state there)."""
    return torch_version() >= (2, 13)


def accelerator_graph_available() -> bool:
    """torch.accelerator.Graph (ATen's backend-neutral graph interface, which torch_musa implements in C++
    for torch 2.12 and later)."""
    import torch.accelerator

    return torch_version() >= (2, 12) and hasattr(torch.accelerator, "Graph")


def profiler_anti_patterns_available() -> bool:
    """torch.profiler._pattern_matcher and torch.profiler._utils.BasicEvaluation (TorchTidy's
    anti-patterns and launch-queue evaluation, which torch_musa.profiler adapts to musa) exist up to
    torch 2.14; torch 2.15 removed them."""
    import importlib.util

    return importlib.util.find_spec("torch.profiler._pattern_matcher") is not None


def autocast_runs_rms_norm_in_float32():
    """torch 2.12 put rms_norm on autocast's float32 list (for cuda and musa alike); before it,
    rms_norm under autocast keeps its input's dtype."""
    return torch_version() >= (2, 12)


def inductor_writes_size_asserts_as_text() -> bool:
    """Whether Inductor's Python wrapper writes an op's output size assert as a text line
    (``writeline("assert_size_stride(...)")``, older torch) rather than through
    ``write_assert_size_stride`` (added in a later torch)."""
    from torch._inductor.codegen.wrapper import PythonWrapperCodegen

    return not hasattr(PythonWrapperCodegen, "write_assert_size_stride")
