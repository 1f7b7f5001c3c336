#pragma once
/// \file posenc/posenc.hpp
/// Umbrella header: every public posenc header, nothing else.

#include "posenc/alibi.hpp"
#include "posenc/attention.hpp"
#include "posenc/attention_merge.hpp"
#include "posenc/attention_paged.hpp"
#include "posenc/attention_rope.hpp"
#include "posenc/attention_types.hpp"
#include "posenc/attention_varlen.hpp"
#include "posenc/diagnostics.hpp"
#include "posenc/error.hpp"
#include "posenc/kv_cache.hpp"
#include "posenc/learned.hpp"
#include "posenc/mrope.hpp"
#include "posenc/paged_kv_cache.hpp"
#include "posenc/rope.hpp"
#include "posenc/rope_frequencies.hpp"
#include "posenc/rope_params.hpp"
#include "posenc/sinusoidal.hpp"
#include "posenc/tensor.hpp"
#include "posenc/version.hpp"
#include "posenc/vision_rope.hpp"
