#include "support/gguf_config_loader.hpp"

#include <utility>

namespace posenc_test {

posenc::HfModelConfig parse_gguf_config(const void* bytes, std::size_t size, std::string source,
                                        const posenc::GgufConfigOptions& options) {
  return posenc::parse_gguf_config(bytes, size, std::move(source), options);
}

posenc::HfModelConfig load_gguf_config(const std::string& path,
                                       const posenc::GgufConfigOptions& options) {
  return posenc::load_gguf_config(path, options);
}

}  // namespace posenc_test
