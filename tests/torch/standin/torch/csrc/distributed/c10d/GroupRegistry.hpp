#pragma once
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

namespace c10d {
c10::intrusive_ptr<ProcessGroup> resolve_process_group(const std::string& group_name);
}  // namespace c10d
