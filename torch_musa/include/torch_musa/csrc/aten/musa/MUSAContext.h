// ATen's CUDAContext.h for musa: streams, guards, error checks and device properties.
#pragma once

#include <c10/util/Exception.h>

#include <memory>
#include <mutex>
#include <vector>

#include "torch_musa/csrc/core/MUSAException.h"
#include "torch_musa/csrc/core/MUSAGuard.h"
#include "torch_musa/csrc/core/MUSAStream.h"

namespace at::musa {

inline musaDeviceProp* getDeviceProperties(c10::DeviceIndex device) {
  static std::mutex mu;
  static std::vector<std::unique_ptr<musaDeviceProp>> props;
  std::lock_guard<std::mutex> g(mu);
  if (device < 0) device = c10::musa::detail::device_of(-1).index();
  if (props.size() <= static_cast<size_t>(device)) props.resize(device + 1);
  if (!props[device]) {
    auto p = std::make_unique<musaDeviceProp>();
    C10_MUSA_CHECK(musaGetDeviceProperties(p.get(), device));
    props[device] = std::move(p);
  }
  return props[device].get();
}
inline musaDeviceProp* getCurrentDeviceProperties() { return getDeviceProperties(-1); }
inline int warp_size() { return getCurrentDeviceProperties()->warpSize; }

}  // namespace at::musa
