#pragma once
#include <torch/csrc/distributed/c10d/Store.hpp>

namespace c10d {
class ProcessGroup : public c10::intrusive_ptr_target {
 public:
  ProcessGroup(c10::intrusive_ptr<Store> store, int rank, int size)
      : store_(std::move(store)), rank_(rank), size_(size) {}
  int getRank() const { return rank_; }
  int getSize() const { return size_; }
  c10::intrusive_ptr<c10d::Store>& getStore() { return store_; }

 private:
  c10::intrusive_ptr<Store> store_;
  int rank_, size_;
};
}  // namespace c10d
