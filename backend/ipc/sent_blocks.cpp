#include "ipc/sent_blocks.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <c10/util/Exception.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <list>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace torch_musa::ipc {
namespace {

constexpr size_t kSlotsPerPage = 4096;
constexpr size_t kPageBytes = kSlotsPerPage * sizeof(int64_t);

int64_t* map_page(int fd) {
  void* p = mmap(nullptr, kPageBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  return p == MAP_FAILED ? nullptr : static_cast<int64_t*>(p);
}

struct Page {
  int fd = -1;
  int64_t inode = 0;
  int64_t* slots = nullptr;
  std::vector<int64_t> free;  // slot numbers not in use
};

struct Held {
  Page* page;
  int64_t slot;
  c10::Storage storage;
  musaEvent_t event;
};

class Sender {
 public:
  CounterSlot hold(c10::Storage storage, musaEvent_t event) {
    std::lock_guard<std::mutex> g(mu_);
    collect_locked();
    Page* page = page_with_free_slot();
    int64_t slot = page->free.back();
    page->free.pop_back();
    __atomic_store_n(&page->slots[slot], 1, __ATOMIC_RELEASE);
    held_.push_back({page, slot, std::move(storage), event});
    return {static_cast<int64_t>(getpid()), page->fd, page->inode, slot};
  }

  size_t collect() {
    std::lock_guard<std::mutex> g(mu_);
    collect_locked();
    return held_.size();
  }

 private:
  void collect_locked() {
    for (auto it = held_.begin(); it != held_.end();) {
      if (__atomic_load_n(&it->page->slots[it->slot], __ATOMIC_ACQUIRE) != 0) {
        ++it;
        continue;
      }
      if (it->event) (void)musaEventDestroy(it->event);
      it->page->free.push_back(it->slot);
      it = held_.erase(it);  // the storage goes back to the allocator here
    }
  }

  Page* page_with_free_slot() {
    for (auto& p : pages_)
      if (!p.free.empty()) return &p;
    Page p;
    p.fd = memfd_create("musa-ipc-refcounts", MFD_CLOEXEC);
    TORCH_CHECK(p.fd >= 0 && ftruncate(p.fd, kPageBytes) == 0,
                "sharing musa memory: could not make the reference-count page: ", strerror(errno));
    struct stat st {};
    fstat(p.fd, &st);
    p.inode = static_cast<int64_t>(st.st_ino);
    p.slots = map_page(p.fd);
    TORCH_CHECK(p.slots, "sharing musa memory: could not map the reference-count page: ", strerror(errno));
    for (int64_t s = kSlotsPerPage - 1; s >= 0; --s) p.free.push_back(s);
    pages_.push_back(std::move(p));
    return &pages_.back();
  }

  std::mutex mu_;
  std::list<Page> pages_;  // stable addresses
  std::list<Held> held_;
};

// Never destroyed: storages held for other processes must not be freed
// (punching the pages out of the file they still map) during exit.
Sender& sender() {
  static auto* s = new Sender();
  return *s;
}

// Receiver side: the senders' pages mapped here, by (pid, inode).
class Receiver {
 public:
  void release(const CounterSlot& c) {
    if (c.slot < 0 || c.slot >= static_cast<int64_t>(kSlotsPerPage)) return;
    int64_t* slots = page(c);
    if (slots) __atomic_store_n(&slots[c.slot], 0, __ATOMIC_RELEASE);
  }

  int64_t* page(const CounterSlot& c) {
    std::lock_guard<std::mutex> g(mu_);
    auto key = std::make_pair(c.pid, c.inode);
    auto it = pages_.find(key);
    if (it != pages_.end()) return it->second;
    std::string path = "/proc/" + std::to_string(c.pid) + "/fd/" + std::to_string(c.fd);
    int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
    int64_t* slots = nullptr;
    struct stat st {};
    // A sender that exited holds nothing any more: nothing to release.
    if (fd >= 0 && fstat(fd, &st) == 0 && static_cast<int64_t>(st.st_ino) == c.inode) slots = map_page(fd);
    if (fd >= 0) close(fd);
    if (slots) pages_[key] = slots;
    return slots;
  }

 private:
  std::mutex mu_;
  std::map<std::pair<int64_t, int64_t>, int64_t*> pages_;
};

Receiver& receiver() {
  static auto* r = new Receiver();
  return *r;
}

}  // namespace

CounterSlot hold_for_receiver(c10::Storage storage, musaEvent_t event) {
  return sender().hold(std::move(storage), event);
}

size_t collect() { return sender().collect(); }

void attach(const CounterSlot& slot) { (void)receiver().page(slot); }

void release(const CounterSlot& slot) { receiver().release(slot); }

}  // namespace torch_musa::ipc
