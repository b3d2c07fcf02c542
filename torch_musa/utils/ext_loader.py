"""``torch_musa.utils.ext_loader``: loads a torch_musa extension module by name and checks the
functions a caller needs are there (``load_ext("_ext", ["multi_tensor_l2norm"])``)."""
import importlib


def load_ext(name, funcs=None):
    """The module ``torch_musa.<name>``; ``funcs`` (a name or a list) must all be attributes of it."""
    funcs = [] if funcs is None else [funcs] if isinstance(funcs, str) else list(funcs)
    try:
        ext = importlib.import_module(f"torch_musa.{name}")
    except ModuleNotFoundError as e:
        if e.name != f"torch_musa.{name}":
            raise
        raise ImportError(f"torch_musa has no extension module {name!r}; the extension is "
                          "torch_musa._ext (load_ext('_ext', [...]))") from None
    missing = [f for f in funcs if not hasattr(ext, f)]
    if missing:
        raise AttributeError(f"torch_musa.{name} lacks {', '.join(missing)}")
    return ext
