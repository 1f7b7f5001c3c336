#pragma once
/// \file posenc/kernel_instances.hpp
/// The attention kernel compiled once instead of in every translation unit.
///
/// posenc is header-only, so each translation unit that calls attention() (or a KV cache's
/// attend) compiles the fused kernel for its storage types: about 9 s per type at -O3 with
/// GCC 12. A build with many such units (posenc's own tests make about 90 of these
/// instantiations) can compile each once:
///   - define POSENC_EXTERN_KERNELS in every unit: the kernel's common instantiations
///     (posenc/detail/attention_instances.hpp) are then declared `extern template`;
///   - include this header in one unit, compiled with the same code-generation flags as the
///     others (-O, -m..., sanitizers): it holds their explicit instantiation definitions.
/// The machine code is the same as the header-only build's (run_attention is far too large to
/// be inlined into its callers). Do not mix targets: a unit built for AVX2 (-mavx2) that links
/// instances compiled without it runs their SSE code. posenc's CMake target
/// posenc_kernel_instances does this for the tests and examples that use the default flags.

#include "posenc/detail/attention_instances.hpp"
#include "posenc/detail/attention_kernel.hpp"

namespace posenc::detail {
POSENC_DETAIL_ATTENTION_INSTANCES(template)
}  // namespace posenc::detail
