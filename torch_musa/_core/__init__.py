"""The device concept, as backend/core: device management (``device``), the device-monitoring
figures (``monitor``), autograd's device threads (``autograd_threads``), the legacy typed-tensor
constructors (``tensor_types``) and the ``musa`` storage location in torch.load (``serialization``).

Private: the public names live where torch.cuda has them (``torch.musa.device``,
``torch.musa.current_device``, ...); torch_musa.core holds MooreThreads' module paths.
Nothing is imported here, so importing one submodule loads no other.
"""
