// Python bindings of the musa caching allocator beyond the basic statistics:
// nested stats with torch.cuda's keys, snapshots in torch.cuda's structure
// (with Python/C++ stacks from torch's CapturedTraceback), history recording,
// PYTORCH_MUSA_ALLOC_CONF at run time, private pools and raw allocations.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <c10/core/StorageImpl.h>
#include <torch/csrc/profiler/combined_traceback.h>
#include <torch/csrc/utils/pybind.h>

#include <deque>
#include <mutex>
#include <thread>
#include <unordered_set>
#include <vector>

#include "memory/allocator_config.h"
#include "memory/caching_allocator.h"
#include "memory/pinned_allocator.h"
#include "memory/pluggable_allocator.h"
#include "core/device.h"
#include "version_gates.h"

namespace py = pybind11;

namespace torch {
// torch/csrc/profiler/python/combined_traceback.h (that header needs nlohmann,
// which torch does not install).
TORCH_API std::vector<pybind11::object> py_symbolize(std::vector<CapturedTraceback*>& to_symbolize);
}  // namespace torch

namespace torch_musa::allocator {
namespace {

py::dict stat_dict(const c10::CachingAllocator::Stat& s) {
  py::dict d;
  d["current"] = s.current;
  d["peak"] = s.peak;
  d["allocated"] = s.allocated;
  d["freed"] = s.freed;
  return d;
}

py::dict stat_array_dict(const c10::CachingAllocator::StatArray& a) {
  py::dict d;
  const char* names[] = {"all", "small_pool", "large_pool"};
  for (size_t i = 0; i < 3; ++i) d[names[i]] = stat_dict(a[i]);
  return d;
}

py::dict duration_dict(const c10::CachingAllocator::DurationStat& s) {
  py::dict d;
  d["total"] = s.total;
  d["max"] = s.max;
  d["min"] = s.min;
  d["count"] = s.count;
  d["avg"] = s.count == 0 ? 0 : s.total / s.count;
  return d;
}

// The nesting of torch._C._cuda_hostMemoryStats: the pinned (page-locked host) cache.
template <class Stats>
py::dict host_stats_dict(const Stats& s) {
  py::dict d;
  if constexpr (!TorchMusaHostStatsHaveRequests<Stats>::value) {
    TORCH_CHECK(false, "torch.musa.host_memory_stats: torch ", TORCH_VERSION,
                " counts its pinned-memory cache without the statistics torch.cuda.host_memory_stats reports "
                "(active_requests, ...); use a newer torch");
  } else {
    d["num_host_alloc"] = s.num_host_alloc;
    d["num_host_free"] = s.num_host_free;
    d["allocations"] = stat_dict(s.allocations);
    d["allocated_bytes"] = stat_dict(s.allocated_bytes);
    d["active_requests"] = stat_dict(s.active_requests);
    d["active_bytes"] = stat_dict(s.active_bytes);
    d["host_alloc_time"] = duration_dict(s.host_alloc_time);
    d["host_free_time"] = duration_dict(s.host_free_time);
  }
  return d;
}

py::dict host_memory_stats() { return host_stats_dict(pinned_stats()); }

// The nesting of torch._C._cuda_memoryStats.
py::dict memory_stats(c10::DeviceIndex device) {
  auto s = device_stats(device);
  auto e = extra_stats(device);
  py::dict d;
  d["num_alloc_retries"] = s.num_alloc_retries;
  d["num_ooms"] = s.num_ooms;
  d["num_oom_rejections"] = e.num_oom_rejections;
  d["max_split_size"] = s.max_split_size;
  d["num_sync_all_streams"] = s.num_sync_all_streams;
  d["num_device_alloc"] = s.num_device_alloc;
  d["num_device_free"] = s.num_device_free;
  d["oversize_allocations"] = stat_dict(s.oversize_allocations);
  d["oversize_segments"] = stat_dict(s.oversize_segments);
  d["allocation"] = stat_array_dict(s.allocation);
  d["segment"] = stat_array_dict(s.segment);
  d["active"] = stat_array_dict(s.active);
  d["inactive_split"] = stat_array_dict(s.inactive_split);
  d["allocated_bytes"] = stat_array_dict(s.allocated_bytes);
  d["reserved_bytes"] = stat_array_dict(s.reserved_bytes);
  d["active_bytes"] = stat_array_dict(s.active_bytes);
  d["inactive_split_bytes"] = stat_array_dict(s.inactive_split_bytes);
  d["requested_bytes"] = stat_array_dict(s.requested_bytes);
  py::dict pools;
  for (auto& [id, arr] : e.reserved_by_private_pools) pools[py::make_tuple(id.first, id.second)] = stat_array_dict(arr);
  d["reserved_bytes_by_private_pools"] = pools;
  return d;
}

std::shared_ptr<c10::GatheredContext> gather_python(bool cpp) {
  return torch::CapturedTraceback::gather(/*python=*/true, /*script=*/true, cpp);
}

// Frames for every context, symbolized in one batch (GIL held).
class Frames {
 public:
  void add(const std::shared_ptr<c10::GatheredContext>& c) {
    auto* tb = dynamic_cast<torch::CapturedTraceback*>(c.get());
    if (tb && !index_.count(tb)) index_.emplace(tb, 0), order_.push_back(tb);
  }
  void symbolize() {
    if (order_.empty()) return;
    auto res = torch::py_symbolize(order_);
    for (size_t i = 0; i < order_.size(); ++i) index_[order_[i]] = i;
    results_ = std::move(res);
  }
  py::object get(const std::shared_ptr<c10::GatheredContext>& c) const {
    auto* tb = dynamic_cast<torch::CapturedTraceback*>(c.get());
    if (!tb) return py::list();
    auto it = index_.find(tb);
    return it == index_.end() ? py::object(py::list()) : results_[it->second];
  }

 private:
  std::unordered_map<torch::CapturedTraceback*, size_t> index_;
  std::vector<torch::CapturedTraceback*> order_;
  std::vector<py::object> results_;
};

py::dict settings_dict() {
  const auto& c = allocator_config();
  py::dict d;
  d["PYTORCH_MUSA_ALLOC_CONF"] = c.source;
  d["expandable_segments"] = c.expandable_segments;
  d["max_split_size"] = c.max_split_size == static_cast<size_t>(-1) ? -1 : static_cast<int64_t>(c.max_split_size);
  d["max_non_split_rounding"] = static_cast<int64_t>(c.max_non_split_rounding);
  d["garbage_collection_threshold"] = c.garbage_collection_threshold;
  py::dict div;
  for (size_t i = 0; i < c.roundup_power2_divisions.size(); ++i)
    div[py::int_(size_t(1) << i)] = c.roundup_power2_divisions[i];
  d["roundup_power2_divisions"] = div;
  d["cpu"] = c.cpu_unified ? "unified" : "native";
  return d;
}

py::dict snapshot_dict(py::object pool, bool include_traces) {
  c10::MempoolId_t id{0, 0};
  bool has_pool = !pool.is_none();
  if (has_pool) {
    auto t = pool.cast<py::tuple>();
    id = {t[0].cast<uint64_t>(), t[1].cast<uint64_t>()};
  }
  Snapshot s;
  {
    py::gil_scoped_release no_gil;
    s = snapshot(has_pool ? &id : nullptr, include_traces);
  }
  Frames frames;
  for (auto& seg : s.segments)
    for (auto& b : seg.blocks) frames.add(b.context);
  for (auto& tr : s.device_traces)
    for (auto& t : tr) frames.add(t.context);
  frames.symbolize();
  py::list segments;
  for (auto& seg : s.segments) {
    py::dict d;
    d["device"] = static_cast<int>(seg.device);
    d["address"] = seg.address;
    d["total_size"] = seg.total_size;
    d["allocated_size"] = seg.allocated_size;
    d["active_size"] = seg.active_size;
    d["requested_size"] = seg.requested_size;
    d["stream"] = reinterpret_cast<size_t>(seg.stream);
    d["segment_type"] = seg.is_large ? "large" : "small";
    d["segment_pool_id"] = py::make_tuple(seg.pool_id.first, seg.pool_id.second);
    d["is_expandable"] = seg.is_expandable;
    d["frames"] = py::list();
    py::list blocks;
    for (auto& b : seg.blocks) {
      py::dict bd;
      bd["address"] = b.address;
      bd["size"] = b.size;
      bd["requested_size"] = b.requested_size;
      bd["state"] = b.state;
      bd["frames"] = frames.get(b.context);
      blocks.append(bd);
    }
    d["blocks"] = blocks;
    segments.append(d);
  }
  py::list traces;
  for (auto& tr : s.device_traces) {
    py::list l;
    for (auto& t : tr) {
      py::dict d;
      d["action"] = trace_action_name(t.action);
      if (t.action == TraceAction::OOM) d["device_free"] = t.addr;
      d["addr"] = t.action == TraceAction::OOM ? 0 : t.addr;
      d["size"] = t.size;
      d["stream"] = reinterpret_cast<size_t>(t.stream);
      d["time_us"] = t.time_us;
      d["frames"] = frames.get(t.context);
      d["pool_id"] = py::make_tuple(t.pool_id.first, t.pool_id.second);
      d["compile_context"] = "N/A";
      d["user_metadata"] = "";
      l.append(d);
    }
    traces.append(l);
  }
  py::dict out;
  out["segments"] = segments;
  out["device_traces"] = traces;
  out["allocator_settings"] = settings_dict();
  out["external_annotations"] = py::list();
  return out;
}

int level(const py::object& o, std::initializer_list<const char*> names, const char* what) {
  if (o.is_none()) return 0;
  std::string v = o.cast<std::string>();
  int i = 1;
  std::string accepted = "None";
  for (const char* n : names) {
    if (v == n) return i;
    ++i;
    accepted += std::string(", '") + n + "'";
  }
  TORCH_CHECK(false, "_record_memory_history: unknown ", what, " '", v, "'; use one of: ", accepted);
}

c10::MempoolId_t pool_id(py::tuple t) { return {t[0].cast<uint64_t>(), t[1].cast<uint64_t>()}; }
c10::DeviceIndex dev(int d) {
  check_device_index(static_cast<c10::DeviceIndex>(d));
  return static_cast<c10::DeviceIndex>(d);
}

}  // namespace

void bind_unified(py::module& m);  // unified_allocator.cpp: cpu:unified

void bind_python(py::module& m) {
  m.def("_memory_stats_nested", [](int d) { return memory_stats(dev(d)); });
  m.def("_host_memory_stats_nested", &host_memory_stats);
  m.def("_caching_allocator_enable", &set_caching_enabled);
  m.def("_caching_allocator_is_enabled", &caching_enabled);
  m.def("_reset_accumulated_host_memory_stats", &reset_pinned_accumulated_stats);
  m.def("_reset_peak_host_memory_stats", &reset_pinned_peak_stats);
  m.def("_memory_snapshot", &snapshot_dict, py::arg("pool") = py::none(), py::arg("include_traces") = true);
  m.def("_record_memory_history",
        [](py::object enabled, py::object context, const std::string& stacks, size_t max_entries, bool clear) {
          int e = level(enabled, {"state", "all"}, "enabled value");
          int c = level(context, {"state", "alloc", "all"}, "context value");
          TORCH_CHECK(stacks == "python" || stacks == "all", "_record_memory_history: stacks must be 'python' or 'all'");
          if (e) torch::CapturedTraceback::gather(true, true, false);  // warm up the unwinder with the GIL held
          record_history(e, c, stacks == "all", max_entries, clear, &gather_python);
        });
  m.def("_set_allocator_settings", [](const std::string& s) { set_allocator_settings(s); });
  m.def("_replace_allocator_settings", [](const std::string& s) { replace_allocator_settings(s); });
  m.def("_allocator_settings", [] { return settings_dict(); });
  m.def("_allocator_env_conf", [] {  // (text, variable), or None where no variable is set
    EnvConf env = env_allocator_conf();
    return env.text == nullptr ? py::object(py::none()) : py::object(py::make_tuple(env.text, env.variable));
  });
  m.def("_get_memory_fraction", [](int d) { return get_memory_fraction(dev(d)); });
  py::class_<SegmentAllocator, std::shared_ptr<SegmentAllocator>>(m, "_MUSAPluggableAllocator")
      .def_property_readonly("description", [](const SegmentAllocator& a) { return a.description; });
  m.def("_load_pluggable_allocator", &load_segment_allocator);
  m.def("_mempool_create", [](int d, std::shared_ptr<SegmentAllocator> custom) {
    auto id = create_pool(dev(d), std::move(custom));
    return py::make_tuple(id.first, id.second);
  }, py::arg("device"), py::arg("allocator") = nullptr);
  m.def("_mempool_begin", [](int d, py::tuple id) { begin_allocate_to_pool(dev(d), pool_id(id)); });
  m.def("_mempool_end", [](int d, py::tuple id) { end_allocate_to_pool(dev(d), pool_id(id)); });
  m.def("_mempool_release", [](int d, py::tuple id) { release_pool(dev(d), pool_id(id)); });
  m.def("_mempool_retain", [](int d, py::tuple id) { retain_pool(dev(d), pool_id(id)); });
  m.def("_mempool_use_count", [](int d, py::tuple id) { return pool_use_count(dev(d), pool_id(id)); });
  m.def("_raw_alloc", [](size_t n) { return reinterpret_cast<size_t>(raw_alloc(n)); });
  m.def("_raw_delete", [](size_t p) { raw_delete(reinterpret_cast<void*>(p)); });
  // Test hook: `threads` C++ threads allocate and free small blocks at once, without the GIL, so
  // the device lock is contended. Returns (blocks handed out while live, allocated bytes after
  // minus before).
  m.def("_allocator_contention_check", [](int threads, int iters) {
    py::gil_scoped_release no_gil;
    c10::DeviceIndex d = current_device();
    auto allocated = [d] { return device_stats(d).allocated_bytes[0].current; };
    int64_t before = allocated();
    std::mutex mu;
    std::unordered_set<void*> live;
    int twice = 0;
    auto note = [&](void* p, bool alloc) {
      std::lock_guard<std::mutex> g(mu);
      if (!alloc) live.erase(p);
      else if (!live.insert(p).second) ++twice;
    };
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t)
      workers.emplace_back([&, t] {
        set_device(d);
        std::deque<c10::DataPtr> mine;
        for (int i = 0; i < iters; ++i) {
          mine.push_back(get()->allocate(512 * static_cast<size_t>(1 + (i + t) % 4)));
          note(mine.back().get(), true);
          if (mine.size() > 8 || i % 3 == 0) {
            note(mine.front().get(), false);  // before the block can be handed out again
            mine.pop_front();
          }
        }
        for (auto& p : mine) note(p.get(), false);
      });
    for (auto& w : workers) w.join();
    return std::make_tuple(twice, allocated() - before);
  });
  // Graph trees (torch_musa/_inductor/graph_trees.py): the storage hooks torch.cuda's graph trees
  // use, for musa memory. Storages are passed as StorageImpl addresses, as torch's are.
  auto storage = [](size_t p) { return reinterpret_cast<c10::StorageImpl*>(p); };
  m.def("_graph_tree_owns", [storage](size_t s) { return owns_data_ptr(storage(s)->data_ptr()); });
  m.def("_graph_tree_claim_storages", [storage](int d, py::tuple id, const std::vector<size_t>& storages) {
    for (size_t s : storages) {
      c10::StorageImpl* impl = storage(s);
      if (owns_data_ptr(impl->data_ptr())) continue;  // still the allocation its capture made
      void* ptr = impl->data_ptr().get();
      auto dp = claim_pool_range(dev(d), pool_id(id), ptr, impl->nbytes());
      TORCH_CHECK(dp.get() == ptr, "musa graph trees: a live output at ", ptr, " (", impl->nbytes(),
                  " bytes) is not free memory of the graphs' pool; call torch._dynamo.reset() and compile again");
      impl->set_data_ptr_noswap(std::move(dp));
    }
  });
  m.def("_graph_tree_free_and_disown", [storage](size_t s) {
    c10::StorageImpl* impl = storage(s);
    if (owns_data_ptr(impl->data_ptr())) free_and_disown(impl->mutable_data_ptr());
  });
  m.def("_graph_tree_storage_error", [storage](size_t s, std::string msg) {
    storage(s)->release_data_and_set_meta_custom_data_ptr_error_msg_(std::move(msg));
  });
  m.def("_graph_tree_tensor_error", [](const at::Tensor& t, std::string msg) {
    t.unsafeGetTensorImpl()->release_storage_and_set_meta_custom_data_ptr_error_msg_(std::move(msg));
  });
  bind_unified(m);
}

}  // namespace torch_musa::allocator
