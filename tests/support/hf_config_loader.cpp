#include "support/hf_config_loader.hpp"

#include <utility>

namespace posenc_test {

posenc::HfModelConfig parse_hf_config(std::string_view text, std::string source,
                                      const posenc::HfConfigOptions& options) {
  return posenc::parse_hf_config(text, std::move(source), options);
}

posenc::HfModelConfig load_hf_config(const std::string& path,
                                     const posenc::HfConfigOptions& options) {
  return posenc::load_hf_config(path, options);
}

}  // namespace posenc_test
