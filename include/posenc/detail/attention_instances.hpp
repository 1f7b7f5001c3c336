#pragma once
/// \file posenc/detail/attention_instances.hpp
/// The storage types for which posenc/kernel_instances.hpp compiles the attention kernel once:
/// (accumulator, query, K / V, output) as attention(), attention_mla(), the KV caches and the
/// FP8 caches call it. Any other combination is instantiated where it is used, as without
/// POSENC_EXTERN_KERNELS. The list is expanded at the end of posenc/detail/attention_kernel.hpp
/// (the declarations) and in posenc/kernel_instances.hpp (the definitions), where run_attention
/// and its types are defined.

#include "posenc/float8.hpp"

/// One explicit instantiation of detail::run_attention: `extern template` (declaration) or
/// `template` (definition). Written once so the two lists cannot drift apart.
#define POSENC_DETAIL_ATTENTION_INSTANCE(keyword, Acc, TQ, TKV, TO)                       \
  keyword void run_attention<Acc, TQ, TKV, TO>(const AttentionProblem<Acc, TQ, TKV, TO>&, \
                                               std::vector<AttentionTileBuffers<Acc>>&, int);

#define POSENC_DETAIL_ATTENTION_INSTANCES(keyword)                                        \
  POSENC_DETAIL_ATTENTION_INSTANCE(keyword, float, float, float, float)                   \
  POSENC_DETAIL_ATTENTION_INSTANCE(keyword, double, double, double, double)               \
  POSENC_DETAIL_ATTENTION_INSTANCE(keyword, float, Eigen::bfloat16, Eigen::bfloat16,      \
                                   Eigen::bfloat16)                                       \
  POSENC_DETAIL_ATTENTION_INSTANCE(keyword, float, Eigen::half, Eigen::half, Eigen::half) \
  POSENC_DETAIL_ATTENTION_INSTANCE(keyword, float, float, Eigen::bfloat16, float)         \
  POSENC_DETAIL_ATTENTION_INSTANCE(keyword, float, float, Eigen::half, float)             \
  POSENC_DETAIL_ATTENTION_INSTANCE(keyword, float, float, float8_e4m3, float)             \
  POSENC_DETAIL_ATTENTION_INSTANCE(keyword, float, float, float8_e4m3_finite, float)      \
  POSENC_DETAIL_ATTENTION_INSTANCE(keyword, float, float, float8_e5m2, float)
