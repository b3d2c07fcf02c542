"""Bad launches and bad sources: the GPU's error codes with clear messages, raised
through C10_MUSA_KERNEL_LAUNCH_CHECK (musaGetLastError); the process stays usable."""
import pytest
import torch


def _host():
    return torch.musa.get_driver_name() == "host"


def test_too_many_threads_per_block(ext):
    x = torch.randn(4, 100, device="musa")
    with pytest.raises(RuntimeError, match=r"invalid argument") as info:  # what the H200 (CUDA 13) says
        ext.row_sum(x, 2048, 0)
    if _host():
        assert "musaErrorInvalidValue" in str(info.value)
        assert "kernel 'row_sum_kernel'" in str(info.value) and "2048 threads per block" in str(info.value)
    torch.testing.assert_close(ext.row_sum(x, 128, 0), x.sum(1), rtol=1e-5, atol=1e-4)  # still usable


def test_too_much_dynamic_shared_memory(ext):
    x = torch.randn(4, 100, device="musa")
    with pytest.raises(RuntimeError, match=r"invalid argument") as info:
        ext.row_sum(x, 128, 1 << 20)
    if _host():
        assert "musaErrorInvalidValue" in str(info.value) and "dynamic shared memory" in str(info.value)
    torch.testing.assert_close(ext.row_sum(x, 128, 0), x.sum(1), rtol=1e-5, atol=1e-4)


def test_last_error_is_cleared_after_the_check(ext):
    x = torch.randn(2, 8, device="musa")
    with pytest.raises(RuntimeError):
        ext.row_sum(x, 4096, 0)
    # The check consumed the error: the next launches see a clean state.
    torch.testing.assert_close(ext.softmax(x), torch.softmax(x, 1))


def test_divergent_barrier_is_a_kernel_fault_on_the_host(ext):
    if not _host():
        pytest.skip("a barrier only some threads reach is undefined on a GPU (it may hang)")
    x = torch.zeros(64, device="musa")
    with pytest.raises(RuntimeError, match=r"unspecified launch failure") as info:
        ext.divergent_barrier(x)
    msg = str(info.value)
    assert "musaErrorLaunchFailure" in msg and "divergent barrier" in msg and "divergent_barrier_kernel" in msg
    # The block's fibers were reset: a good kernel runs next, on the same thread.
    y = torch.randn(8, 300, device="musa")
    torch.testing.assert_close(ext.row_sum(y, 256, 0), y.sum(1), rtol=1e-5, atol=1e-4)


def test_illegal_address_on_the_host(ext):
    if not _host():
        pytest.skip("an illegal address is sticky on a GPU: the context would be lost")
    with pytest.raises(RuntimeError, match=r"an illegal memory access was encountered") as info:
        ext.illegal_write()
    msg = str(info.value)
    assert "musaErrorIllegalAddress" in msg and "illegal_write_kernel" in msg and "address" in msg
    # The process and the device stay usable, on every worker thread.
    x = torch.randn(64, 300, device="musa")
    torch.testing.assert_close(ext.row_sum(x, 256, 0), x.sum(1), rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(ext.softmax(x), torch.softmax(x, 1))
