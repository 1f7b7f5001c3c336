#pragma once
// posenc's GGUF config reader, compiled once for the tests that call it
// (gguf_config_loader.cpp), like support/hf_config_loader.hpp. Each forwards to the posenc
// function of the same name and signature.

#include <posenc/gguf_config.hpp>

#include <cstddef>
#include <string>

namespace posenc_test {

posenc::HfModelConfig parse_gguf_config(const void* bytes, std::size_t size,
                                        std::string source = "<memory>",
                                        const posenc::GgufConfigOptions& options = {});
posenc::HfModelConfig load_gguf_config(const std::string& path,
                                       const posenc::GgufConfigOptions& options = {});

}  // namespace posenc_test
