#include "core/stream.h"

#include <c10/util/CallOnce.h>

#include <array>
#include <atomic>
#include <deque>
#include <string>
#include <mutex>
#include <vector>

#include "core/device.h"
#include "core/musa_check.h"

namespace torch_musa {
namespace {

constexpr int kStreamsPerPool = 32;
constexpr int kPriorityLevels = 3;  // priorities 0, -1, -2
constexpr int kMaxDevices = 64;

// Stream ids: 0 is the device's default stream; 1 + level*32 + i is entry i
// of the pool for priority level `level`; kFirstExternal + i is external stream i.
constexpr c10::StreamId kFirstExternal = 1 + kPriorityLevels * kStreamsPerPool;
struct DevicePools {
  // c10's flag: once done, asking costs one atomic load (std::call_once writes thread-locals on
  // every call, and the pools are asked for on every op).
  c10::once_flag once;
  std::array<std::array<musaStream_t, kStreamsPerPool>, kPriorityLevels> streams{};
  std::array<std::atomic<uint32_t>, kPriorityLevels> next{};
  musaStream_t default_stream = nullptr;
  std::mutex external_mu;
  std::deque<std::pair<void*, musaStream_t>> external;  // raw handle given -> runtime stream
};

DevicePools& pools(c10::DeviceIndex device) {
  static std::array<DevicePools, kMaxDevices> all;
  // Made pools had their index checked; asked on every op (the allocator's current stream).
  if (C10_LIKELY(device >= 0 && device < kMaxDevices && all[device].once.test_once())) return all[device];
  check_device_index(device);
  DevicePools& p = all[device];
  c10::call_once(p.once, [&] {
    DeviceScope scope(device);
    MUSA_CHECK(musaGetDefaultStream(device, &p.default_stream));
    int least = 0, greatest = 0;
    MUSA_CHECK(musaDeviceGetStreamPriorityRange(&least, &greatest));
    for (int level = 0; level < kPriorityLevels; ++level) {
      for (int i = 0; i < kStreamsPerPool; ++i) {
        MUSA_CHECK(musaStreamCreateWithPriority(&p.streams[level][i], musaStreamNonBlocking,
                                                std::max(-level, greatest)));
      }
    }
  });
  return p;
}

thread_local std::array<c10::StreamId, kMaxDevices> t_current{};  // all default (0)

c10::Stream make(c10::DeviceIndex device, c10::StreamId id) {
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(c10::DeviceType::PrivateUse1, device), id);
}

}  // namespace

c10::Stream default_stream(c10::DeviceIndex device) {
  check_device_index(device);
  return make(device, 0);
}

c10::Stream current_stream(c10::DeviceIndex device) {
  if (device < 0) device = current_device();
  check_device_index(device);
  return make(device, t_current[device]);
}

c10::Stream exchange_stream(c10::Stream stream) {
  auto device = stream.device_index();
  check_device_index(device);
  auto prev = make(device, t_current[device]);
  t_current[device] = stream.id();
  return prev;
}

c10::Stream stream_from_pool(c10::DeviceIndex device, int priority) {
  if (device < 0) device = current_device();
  int level = std::min(std::max(-priority, 0), kPriorityLevels - 1);
  auto& p = pools(device);
  uint32_t i = p.next[level]++ % kStreamsPerPool;
  return make(device, 1 + level * kStreamsPerPool + static_cast<c10::StreamId>(i));
}

musaStream_t native_stream(const c10::Stream& stream) {
  auto& p = pools(stream.device_index());
  auto id = stream.id();
  if (id == 0) return p.default_stream;
  if (id >= kFirstExternal) {
    std::lock_guard<std::mutex> g(p.external_mu);
    TORCH_CHECK(static_cast<size_t>(id - kFirstExternal) < p.external.size(), "invalid musa stream id ", id);
    return p.external[id - kFirstExternal].second;
  }
  TORCH_CHECK(id > 0, "invalid musa stream id ", id);
  auto idx = id - 1;
  return p.streams[idx / kStreamsPerPool][idx % kStreamsPerPool];
}

musaStream_t current_native_stream(c10::DeviceIndex device) {
  auto& p = pools(device);  // checks the index
  c10::StreamId id = t_current[device];
  return id == 0 ? p.default_stream : native_stream(make(device, id));
}

void* user_stream_handle(const c10::Stream& stream) {
  musaStream_t s = native_stream(stream);
  void* native = nullptr;
  MUSA_CHECK(musaStreamGetNativeHandle(s, &native));
  if (native != nullptr) return native;
  return stream.id() == 0 ? nullptr : static_cast<void*>(s);
}

int stream_priority(const c10::Stream& stream) {
  if (stream.id() == 0) return 0;
  if (stream.id() >= kFirstExternal) {
    int priority = 0;
    MUSA_CHECK(musaStreamGetPriority(native_stream(stream), &priority));
    return priority;
  }
  return -static_cast<int>((stream.id() - 1) / kStreamsPerPool);
}

c10::Stream external_stream(c10::DeviceIndex device, void* raw) {
  if (device < 0) device = current_device();
  auto& p = pools(device);
  if (raw == nullptr) {
    // 0 is the host driver's default stream handle (as CUDA's); the cuda driver's default
    // musa stream is a stream of its own, so there 0 would be CUDA's legacy stream.
    void* native = nullptr;
    MUSA_CHECK(musaStreamGetNativeHandle(p.default_stream, &native));
    TORCH_CHECK(native == nullptr,
                "ExternalStream: the stream handle is 0 (null, CUDA's legacy default stream), which musa "
                "does not run on; for musa's default stream use torch.musa.default_stream()");
    return make(device, 0);
  }
  // A torch_musa stream's own handle (runtime or native) is that stream.
  auto is_handle_of = [raw](musaStream_t s) {
    void* native = nullptr;
    return static_cast<void*>(s) == raw || (musaStreamGetNativeHandle(s, &native) == musaSuccess && native == raw);
  };
  if (is_handle_of(p.default_stream)) return make(device, 0);
  for (int level = 0; level < kPriorityLevels; ++level)
    for (int i = 0; i < kStreamsPerPool; ++i)
      if (is_handle_of(p.streams[level][i])) return make(device, 1 + level * kStreamsPerPool + i);
  std::lock_guard<std::mutex> g(p.external_mu);
  for (size_t i = 0; i < p.external.size(); ++i)
    if (p.external[i].first == raw) return make(device, kFirstExternal + static_cast<c10::StreamId>(i));
  musaStream_t s = nullptr;
  if (musaStreamValidate(static_cast<musaStream_t>(raw)) == musaSuccess) {
    s = static_cast<musaStream_t>(raw);  // made by musaStreamCreate outside torch_musa
    int on = -1;
    MUSA_CHECK(musaStreamGetDevice(s, &on));
    TORCH_CHECK(on == device, "ExternalStream: the stream belongs to musa device ", on, ", not ", static_cast<int>(device),
                ": pass device=", on);
  } else {
    DeviceScope scope(device);
    musaError_t err = musaStreamCreateFromNative(&s, raw);
    std::string why = err == musaSuccess ? "" : musaGetLastErrorMessage();
    (void)musaGetLastError();  // handled here: later musaGetLastError calls must not see it
    if (err == musaErrorNotSupported)
      TORCH_CHECK(false, "ExternalStream: ", reinterpret_cast<uintptr_t>(raw),
                  " is not a live musa stream handle. On the host driver pass a musaStream_t made by "
                  "musaStreamCreate (or Stream.musa_stream), and keep that stream alive while it is used");
    TORCH_CHECK(err == musaSuccess, "ExternalStream: cannot wrap the stream handle ", reinterpret_cast<uintptr_t>(raw),
                " (", why, "): pass a live stream of musa device ", static_cast<int>(device),
                " (Stream.musa_stream, or a cudaStream_t of its GPU on the cuda driver)");
  }
  p.external.emplace_back(raw, s);
  return make(device, kFirstExternal + static_cast<c10::StreamId>(p.external.size() - 1));
}

}  // namespace torch_musa
