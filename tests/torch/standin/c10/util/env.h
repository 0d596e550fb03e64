#pragma once
#include <optional>

namespace c10::utils {
// "1" -> true, "0" -> false, unset or anything else -> nullopt.
std::optional<bool> check_env(const char* name);
}  // namespace c10::utils
