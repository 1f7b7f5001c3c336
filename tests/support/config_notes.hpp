#pragma once
// The config readers explain their choices in HfModelConfig::notes; tests look for a fragment.

#include <posenc/model_config.hpp>

#include <string>

namespace posenc_test {

inline bool has_note(const posenc::HfModelConfig& c, const std::string& fragment) {
  for (const auto& n : c.notes) {
    if (n.find(fragment) != std::string::npos) return true;
  }
  return false;
}

}  // namespace posenc_test
