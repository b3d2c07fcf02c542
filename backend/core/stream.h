// musa streams as c10::Streams: a fixed pool per device and priority (like
// CUDA's), the default stream as id 0, and a per-thread current stream.
#pragma once

#include <c10/core/Stream.h>
#include <musa/runtime.h>

namespace torch_musa {

c10::Stream default_stream(c10::DeviceIndex device);
c10::Stream current_stream(c10::DeviceIndex device);
// Makes `stream` current on its device for this thread; returns the previous one.
c10::Stream exchange_stream(c10::Stream stream);
// A stream from the pool; priority 0 is normal, negative is higher.
c10::Stream stream_from_pool(c10::DeviceIndex device, int priority);
// The runtime handle behind a c10::Stream of the musa device.
musaStream_t native_stream(const c10::Stream& stream);
int stream_priority(const c10::Stream& stream);

}  // namespace torch_musa
