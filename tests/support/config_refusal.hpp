#pragma once
// A config the loader must refuse: std::invalid_argument, its message holding `fragment`.

#include <catch2/catch.hpp>
#include <posenc/hf_config.hpp>

#include <stdexcept>
#include <string>

#include "support/hf_config_loader.hpp"

namespace posenc_test {

inline void check_refused(const std::string& json, const std::string& fragment) {
  CAPTURE(json);
  CHECK_THROWS_WITH(posenc_test::parse_hf_config(json), Catch::Matchers::Contains(fragment));
  CHECK_THROWS_AS(posenc_test::parse_hf_config(json), std::invalid_argument);
}

}  // namespace posenc_test
