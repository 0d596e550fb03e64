#pragma once
#include <torch/csrc/distributed/c10d/Store.hpp>

namespace c10d {
// Only the type: the stand-in's stores derive from it to take FileStore's path.
class FileStore : public Store {};
}  // namespace c10d
