#pragma once
// posenc's HF config loader, compiled once for the loader tests (hf_config_loader.cpp) instead
// of in each of them: the loader is some 25 s of -O3 per translation unit that calls it. The
// tests call these; each forwards to the posenc function of the same name and signature.

#include <posenc/hf_config.hpp>

#include <string>
#include <string_view>

namespace posenc_test {

posenc::HfModelConfig parse_hf_config(std::string_view text, std::string source = "<string>",
                                      const posenc::HfConfigOptions& options = {});
posenc::HfModelConfig load_hf_config(const std::string& path,
                                     const posenc::HfConfigOptions& options = {});

}  // namespace posenc_test
