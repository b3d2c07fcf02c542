// Page-locked host memory for fast, asynchronous host<->musa copies.
#pragma once

#include <c10/core/Allocator.h>

namespace torch_musa {
c10::Allocator* pinned_allocator();
}
