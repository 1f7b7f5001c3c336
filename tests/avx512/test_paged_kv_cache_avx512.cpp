// The paged KV-cache tests again, built for AVX-512 (see test_attention_avx512.cpp): paged
// decode with page-clipped key tiles on the 16-lane decode item (6-key QK blocks for GQA).

#include <catch2/catch.hpp>

#include "test_paged_kv_cache.cpp"
