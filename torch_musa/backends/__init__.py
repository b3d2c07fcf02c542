"""torch.backends.* modules torch_musa programs use (``torch.backends.mudnn``)."""
