# rope-inspect tests (the tool is built by examples/CMakeLists.txt from examples/tools/).
#
# Two roles in one file:
#  - included from tests/CMakeLists.txt: registers the CTest entries below;
#  - run as `cmake -DEXE=... -DARGS=a|b -DEXPECT=x|y [-DEXPECT_RC=n] [-DFILE=f -DFILE_EXPECT=z]
#    [-DEMULATOR=e|f] -P tools.cmake`: runs EXE (under EMULATOR in a cross build) with ARGS
#    and fails unless it exits with EXPECT_RC (default 0) and its stdout+stderr contain every
#    literal fragment of EXPECT (and FILE contains FILE_EXPECT). Expected fragments come from the config files and hand formulas.

if(CMAKE_SCRIPT_MODE_FILE)
  if(NOT DEFINED EXPECT_RC)
    set(EXPECT_RC 0)
  endif()
  foreach(var ARGS EXPECT FILE_EXPECT EMULATOR)
    string(REPLACE "|" ";" ${var} "${${var}}")
  endforeach()
  execute_process(COMMAND ${EMULATOR} "${EXE}" ${ARGS} OUTPUT_VARIABLE out ERROR_VARIABLE err
                  RESULT_VARIABLE rc)
  set(all "${out}${err}")
  message("${all}")
  if(NOT rc STREQUAL "${EXPECT_RC}")
    message(FATAL_ERROR "${EXE} exited with ${rc}, expected ${EXPECT_RC}")
  endif()
  set(missing 0)
  foreach(text IN LISTS EXPECT)
    string(FIND "${all}" "${text}" at)
    if(at EQUAL -1)
      message(SEND_ERROR "missing expected output: ${text}")
      math(EXPR missing "${missing} + 1")
    endif()
  endforeach()
  if(DEFINED FILE)
    if(NOT EXISTS "${FILE}")
      message(FATAL_ERROR "${FILE} was not written")
    endif()
    file(READ "${FILE}" content)
    foreach(text IN LISTS FILE_EXPECT)
      string(FIND "${content}" "${text}" at)
      if(at EQUAL -1)
        message(SEND_ERROR "missing in ${FILE}: ${text}")
        math(EXPR missing "${missing} + 1")
      endif()
    endforeach()
  endif()
  if(missing GREATER 0)
    message(FATAL_ERROR "${missing} expected fragment(s) missing")
  endif()
  return()
endif()

if(NOT (nlohmann_json_FOUND AND POSENC_BUILD_EXAMPLES))
  return()
endif()

set(_posenc_configs "${CMAKE_CURRENT_LIST_DIR}/data/hf-configs")
set(_posenc_bad "${CMAKE_CURRENT_LIST_DIR}/data/bad-configs")
set(_posenc_tools_script "${CMAKE_CURRENT_LIST_FILE}")
string(REPLACE ";" "|" _posenc_emulator "${CMAKE_CROSSCOMPILING_EMULATOR}")

# posenc_rope_inspect_test(<name> ARGS <args...> EXPECT <fragments...> [RC <n>]
#                          [FILE <path> FILE_EXPECT <fragments...>])
function(posenc_rope_inspect_test name)
  cmake_parse_arguments(T "" "RC;FILE" "ARGS;EXPECT;FILE_EXPECT" ${ARGN})
  if(NOT DEFINED T_RC)
    set(T_RC 0)
  endif()
  # Lists travel through -D joined with "|" (a ";" would split the add_test argument).
  string(REPLACE ";" "|" args "${T_ARGS}")
  string(REPLACE ";" "|" expect "${T_EXPECT}")
  set(extra "")
  if(T_FILE)
    string(REPLACE ";" "|" file_expect "${T_FILE_EXPECT}")
    set(extra "-DFILE=${T_FILE}" "-DFILE_EXPECT=${file_expect}")
  endif()
  add_test(NAME "rope-inspect: ${name}"
           COMMAND "${CMAKE_COMMAND}" "-DEXE=$<TARGET_FILE:rope-inspect>" "-DARGS=${args}"
                   "-DEXPECT=${expect}" "-DEXPECT_RC=${T_RC}" "-DEMULATOR=${_posenc_emulator}"
                   ${extra}
                   -P "${_posenc_tools_script}")
endfunction()

# Llama-3.1: llama3 factor 8, band edges 2048 / 8192 tokens (hand: 29 pairs with wavelength
# < 2048, 6 between, 29 above 8192), covered = 8192 x 8 = 65536 < 131072.
posenc_rope_inspect_test("Llama-3.1 llama3 bands and lengths"
  ARGS "${_posenc_configs}/Llama-3.1-8B.json" --length 131072
  EXPECT "llama3 (factor 8, low_freq_factor 1, high_freq_factor 4, original 8192)"
         "layout               half_split" "rotary_dim           128 (64 pairs)"
         "theta                500000"
         "accepted by config (max_position_embeddings)  131072" "65536"
         "29 kept, 6 blended, 29 interpolated"
         "exceeds the length covered by training")

# DeepSeek-V3: interleaved MLA rope head of 64, yarn 40 with mscale_all_dim 1: softmax
# multiplier (0.1 ln 40 + 1)^2 = 1.87385, covered 4096 x 40 = 163840.
posenc_rope_inspect_test("DeepSeek-V3 yarn, interleaved, softmax multiplier"
  ARGS "${_posenc_configs}/DeepSeek-V3.json" --length 131072
  EXPECT "layout               interleaved" "rotary_dim           64 (32 pairs)"
         "softmax multiplier   1.87385" "163840" "0 of 32 pairs reach angles never seen")
posenc_rope_inspect_test("DeepSeek-V3 at exactly its covered length"
  ARGS "${_posenc_configs}/DeepSeek-V3.json" --length 163840
  EXPECT "0 of 32 pairs reach angles never seen")

# Phi-3.5: longrope, attention factor sqrt(1 + ln 32 / ln 4096) = 1.19024, table switch.
posenc_rope_inspect_test("Phi-3.5 longrope switch warning"
  ARGS "${_posenc_configs}/Phi-3.5-mini-instruct.json" --length 131072
  EXPECT "longrope (48-entry short/long factor lists, original 4096)"
         "attention factor     1.19024" "short_factor to long_factor"
         "sliding window       262144 on 32 of 32 layers")

# Qwen2.5 + yarn 4: attention factor 0.1 ln 4 + 1 = 1.13863; covered 32768 x 4 = 131072, so
# at 131072 the interpolated pairs (n w / 4 = L0 w) are within training, one token more not.
posenc_rope_inspect_test("Qwen2.5 yarn from the legacy type key"
  ARGS "${_posenc_configs}/Qwen2.5-7B+qwen-doc-yarn.json" --length 131072
  EXPECT "yarn (factor 4, original 32768" "attention factor     1.13863"
         "legacy key for rope_type" "0 of 64 pairs reach angles never seen")
posenc_rope_inspect_test("Qwen2.5 yarn one token past the covered length"
  ARGS "${_posenc_configs}/Qwen2.5-7B+qwen-doc-yarn.json" --length 131073
  EXPECT "24 of 64 pairs reach angles never seen" "exceeds the length covered by training")

# GPT-J: interleaved family, overridden by the caller; rotary_dim 64 of head 256; unscaled
# at 4096 > n_positions 2048.
posenc_rope_inspect_test("gpt-j layout override"
  ARGS "${_posenc_configs}/gpt-j-6b.json" --length 4096 --layout half_split
  EXPECT "half_split  (caller override)" "rotary_dim           64 (32 pairs)"
         "exceeds max_position_embeddings = 2048")

# Gemma-4 style (a synthetic config with Gemma-4's keys): the full_attention layers rotate
# heads of global_head_dim 512, proportional with f = 0.25: int(0.25 * 512 // 2) = 64 of 256
# pairs turn, 192 have inv_freq 0.
posenc_rope_inspect_test("proportional RoPE on global_head_dim heads"
  ARGS "${CMAKE_CURRENT_LIST_DIR}/fuzz/corpus/gemma4-proportional.json" --length 131072
  EXPECT "proportional (partial_rotary_factor 0.25: 64 of 256 pairs turn, factor 1)"
         "rotary_dim           512 (256 pairs)"
         "64 kept, 0 blended, 0 interpolated, 192 not rotated (inv_freq 0)")

# BLOOM: ALiBi, 16 heads: slopes 2^(-h/2), h = 1..16.
posenc_rope_inspect_test("bloom ALiBi slopes"
  ARGS "${_posenc_configs}/bloom.json" --length 2048
  EXPECT "position scheme      alibi" "alibi slopes         0.707107 0.5 0.353553 0.25"
         "0.00390625")

posenc_rope_inspect_test("json output"
  ARGS "${_posenc_configs}/Llama-3.1-8B.json" --length 131072 --json
  EXPECT "\"rope_type\": \"llama3\"" "\"covered\": 65536.0" "\"unseen_pairs\": 29"
         "\"scheme\": \"rope\"")

set(_posenc_svg "${CMAKE_CURRENT_BINARY_DIR}/rope-inspect-llama31.svg")
posenc_rope_inspect_test("svg output"
  ARGS "${_posenc_configs}/Llama-3.1-8B.json" --length 131072 --svg "${_posenc_svg}"
  EXPECT "wrote"
  FILE "${_posenc_svg}"
  FILE_EXPECT "<svg xmlns=\"http://www.w3.org/2000/svg\"" "<polyline" "trained L0 = 8192"
              "target = 131072" "</svg>")
set_tests_properties("rope-inspect: svg output" PROPERTIES FIXTURES_SETUP posenc_rope_svg)

# Renders the SVG in headless Chromium; skipped (exit 77) when chromium is not installed.
add_test(NAME "rope-inspect: svg renders in chromium"
         COMMAND bash "${CMAKE_CURRENT_LIST_DIR}/svg_render_test.sh" "${_posenc_svg}"
                 "${CMAKE_CURRENT_BINARY_DIR}/rope-inspect-llama31.png")
set_tests_properties("rope-inspect: svg renders in chromium" PROPERTIES
                     FIXTURES_REQUIRED posenc_rope_svg SKIP_RETURN_CODE 77 TIMEOUT 120)

posenc_rope_inspect_test("negative theta is rejected by key and file"
  ARGS "${_posenc_bad}/negative-theta.json" RC 1
  EXPECT "negative-theta.json" "key \"rope_theta\"" "-10000")
posenc_rope_inspect_test("unknown rope_type is rejected"
  ARGS "${_posenc_bad}/unknown-rope-type.json" RC 1
  EXPECT "unknown-rope-type.json" "rope_scaling.rope_type" "magic")
posenc_rope_inspect_test("malformed JSON is rejected"
  ARGS "${_posenc_bad}/malformed.json" RC 1
  EXPECT "malformed.json" "malformed JSON")
posenc_rope_inspect_test("usage error"
  ARGS --length RC 2
  EXPECT "usage: rope-inspect")
posenc_rope_inspect_test("a --length past int64 is refused, not clamped"
  ARGS "${_posenc_configs}/Llama-3.1-8B.json" --length 99999999999999999999 RC 2
  EXPECT "--length must be an integer in [1, 9223372036854775807], not 99999999999999999999")

# Llama-4 Scout (tests/fuzz/corpus/llama4-scout.json: its text_config's position keys): every
# RoPE layer attends within chunks of 8192 = L0, so at 2^20 tokens no pair sees an angle beyond
# training; 48 - 48 / 4 = 36 chunked layers; NoPE temperature 1 + 0.1 ln(1 + 128) = 1.48598.
posenc_rope_inspect_test("Llama-4 chunked RoPE layers judged at the chunk"
  ARGS "${CMAKE_CURRENT_LIST_DIR}/fuzz/corpus/llama4-scout.json" --length 1048576
  EXPECT "chunked attention    8192 on 36 of 48 layers" "layout               interleaved"
         "0 of 64 pairs reach angles never seen" "1.48598 at the target's last position")

# Ministral-3 (tests/fuzz/corpus/ministral3-temperature.json): every layer's queries times
# 1 + 0.1 ln(1 + floor(pos / 16384)); at position 262143, floor = 15: 1 + 0.1 ln 16 = 1.27726.
posenc_rope_inspect_test("Ministral-3 query temperature on every layer"
  ARGS "${CMAKE_CURRENT_LIST_DIR}/fuzz/corpus/ministral3-temperature.json" --length 262144
  EXPECT "1 + 0.1 ln(1 + floor(pos / 16384)) on every layer, 1.27726 at the target's last position")

# ModernBERT-base (tests/fuzz/corpus/modernbert-base.json): an encoder; layers 0, 3, ..., 21
# global (8), the other 14 local with |i - j| <= 128 / 2, posenc's window 65.
posenc_rope_inspect_test("ModernBERT bidirectional with local layers"
  ARGS "${CMAKE_CURRENT_LIST_DIR}/fuzz/corpus/modernbert-base.json" --length 8192
  EXPECT "attention mask       bidirectional" "sliding window       65 on 14 of 22 layers"
         "layer types          22 layers: 8 full_attention 14 sliding_attention")

# DeepSeek-V3.2 (tests/fuzz/corpus/deepseek-v32-indexer.json): the MLA heads interleaved, the
# sparse-attention indexer's half-split on the first 64 of its 128 dims.
posenc_rope_inspect_test("DeepSeek-V3.2 indexer layout apart from the MLA heads"
  ARGS "${CMAKE_CURRENT_LIST_DIR}/fuzz/corpus/deepseek-v32-indexer.json" --length 131072
  EXPECT "layout               interleaved"
         "heads of index_head_dim = 128 rotate their first 64 dims"
         "half-split (indexer_rope_interleave = false or absent")

# T5-small (tests/fuzz/corpus/t5-small.json): relative bias, not RoPE; no q.k scaling.
posenc_rope_inspect_test("T5 relative attention bias"
  ARGS "${CMAKE_CURRENT_LIST_DIR}/fuzz/corpus/t5-small.json" --length 1024
  EXPECT "position scheme      relative_bias" "softmax scale        1  (q.k width 64)"
         "relative buckets     32 up to distance 128")

# OPT-125m (tests/fuzz/corpus/opt-125m.json): a learned table read at position + 2, no RoPE
# (its config names no position scheme; it was read as default RoPE before).
posenc_rope_inspect_test("OPT learned absolute positions with their offset"
  ARGS "${CMAKE_CURRENT_LIST_DIR}/fuzz/corpus/opt-125m.json"
  EXPECT "position scheme      absolute" "hard limit 2048), rows read at position + 2")

# Grok-2 (tests/fuzz/corpus/grok2-temperature.json): log2(4096) / log2(1024) = 12 / 10 at the
# last position of 4097 tokens.
posenc_rope_inspect_test("Grok-2 query temperature on every layer"
  ARGS "${CMAKE_CURRENT_LIST_DIR}/fuzz/corpus/grok2-temperature.json" --length 4097
  EXPECT "log2(pos) / log2(1024) past 1024 on every layer, 1.2 at the target's last position")

# Qwen2.5-7B-Instruct-1M (tests/fuzz/corpus/qwen2.5-1m-dca.json): vLLM runs it with dual chunk
# attention, so no rotated distance exceeds chunk_size = 262144; at 2^20 tokens the length
# scale is 1 + 0.1 ln(2^20 / 262144) = 1 + 0.1 ln 4 = 1.13863.
posenc_rope_inspect_test("Qwen2.5-1M judged under dual chunk attention"
  ARGS "${CMAKE_CURRENT_LIST_DIR}/fuzz/corpus/qwen2.5-1m-dca.json" --length 1048576
  EXPECT "dual chunk attention chunk_size 262144, local_size 8192 (vLLM); length scale 1.13863"
         "rotates no distance beyond chunk_size = 262144"
         "sparse (MInference) prefill keys are not applied")

# ERNIE-4.5-VL in Baidu's original keys (tests/fuzz/corpus/ernie45-vl-baidu.json): interleaved
# pairs, freq_allocation = 20 t pairs and (64 - 20) / 2 = 22 pairs each for h and w, alternating.
posenc_rope_inspect_test("ERNIE-4.5-VL sections and layout"
  ARGS "${CMAKE_CURRENT_LIST_DIR}/fuzz/corpus/ernie45-vl-baidu.json"
  EXPECT "M-RoPE sections      (t, h, w) = (20, 22, 22) pairs, alternating_hw"
         "layout               interleaved")

# The GGUF samples (_posenc_gguf, fixture posenc_gguf_samples): tests/CMakeLists.txt.

# Llama-3.1-8B as GGUF: NORM pairs, and rope_freqs read like the llama3 recipe (29 kept, 6
# blended, 29 interpolated, as the config.json test above); the file has no L0, so the report
# says what it assumed: 131072 / 8 = 16384.
posenc_rope_inspect_test("GGUF Llama-3.1 rope_freqs"
  ARGS "${_posenc_gguf}/llama31.gguf" --length 131072
  EXPECT "layout               interleaved  (ggml rope type of llama: NORM)"
         "default + per-pair freq_factors (ggml rope_freqs, 64 pairs, 1 to 8)"
         "29 kept, 6 blended, 29 interpolated"
         "pre-training was about 16384 (max / factor)")
# DeepSeek-2 as GGUF: yarn_log_multiplier 0.1 = 0.1 mscale_all_dim, softmax multiplier
# (0.1 ln 40 + 1)^2 = 1.87385.
posenc_rope_inspect_test("GGUF DeepSeek-2 yarn_log_multiplier"
  ARGS "${_posenc_gguf}/deepseek2.gguf"
  EXPECT "ggml rope type of deepseek2: NORM" "softmax multiplier   1.87385")
# LFM2 as GGUF: head_count_kv 0 on the convolution layers (the file failed to load before);
# heads per layer as query/kv, the first attention layer's counts as the model's.
posenc_rope_inspect_test("GGUF LFM2 convolution layers"
  ARGS "${_posenc_gguf}/lfm2-conv.gguf"
  EXPECT "heads                32 query, 8 key/value"
         "heads per layer      0/0 0/0 32/8 0/0 0/0 32/8 0/0 32/8  (query/key-value)"
         "5 layers without attention")
posenc_rope_inspect_test("GGUF truncated file is rejected"
  ARGS "${_posenc_gguf}/truncated.gguf" RC 1
  EXPECT "posenc::load_gguf: " "truncated: kv_count")
set_tests_properties("rope-inspect: GGUF Llama-3.1 rope_freqs"
                     "rope-inspect: GGUF DeepSeek-2 yarn_log_multiplier"
                     "rope-inspect: GGUF LFM2 convolution layers"
                     "rope-inspect: GGUF truncated file is rejected"
                     PROPERTIES FIXTURES_REQUIRED posenc_gguf_samples)
