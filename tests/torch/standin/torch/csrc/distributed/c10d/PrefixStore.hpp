#pragma once
#include <torch/csrc/distributed/c10d/Store.hpp>

namespace c10d {
class PrefixStore : public Store {
 public:
  c10::intrusive_ptr<Store> getUnderlyingStore();

 protected:
  c10::intrusive_ptr<Store> store_;
};
}  // namespace c10d
