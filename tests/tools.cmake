# rope-inspect tests (the tool is built by examples/CMakeLists.txt from examples/tools/).
#
# Two roles in one file:
#  - included from tests/CMakeLists.txt: registers the CTest entries below;
#  - run as `cmake -DEXE=... -DARGS=a|b -DEXPECT=x|y [-DEXPECT_RC=n] [-DFILE=f -DFILE_EXPECT=z]
#    [-DEMULATOR=e|f] -P tools.cmake`: runs EXE (under EMULATOR in a cross build) with ARGS
#    and fails unless it exits with EXPECT_RC (default 0) and its stdout+stderr contain every
#    literal fragment of EXPECT (and FILE contains FILE_EXPECT). Expected fragments come from the config files and hand formulas.
#    Optional: -DREJECT=x|y (fragments that must not appear), -DFILE_REJECT=z (not in FILE), and
#    -DJSON=p=v|p~re|p#n|p! checks of stdout read as JSON: p is a path of keys and array indices
#    joined by "/"; "=" the value as string(JSON GET) gives it (true = ON), "~" a regex it
#    matches, "#" the length of an array, "!" the key is absent. "\n" in a fragment is a newline.

if(CMAKE_SCRIPT_MODE_FILE)
  if(NOT DEFINED EXPECT_RC)
    set(EXPECT_RC 0)
  endif()
  foreach(var ARGS EXPECT FILE_EXPECT EMULATOR REJECT FILE_REJECT JSON)
    string(REPLACE "|" ";" ${var} "${${var}}")
  endforeach()
  foreach(var EXPECT FILE_EXPECT REJECT FILE_REJECT)
    string(REPLACE "\\n" "\n" ${var} "${${var}}")
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
  foreach(text IN LISTS REJECT)
    string(FIND "${all}" "${text}" at)
    if(NOT at EQUAL -1)
      message(SEND_ERROR "unexpected output: ${text}")
      math(EXPR missing "${missing} + 1")
    endif()
  endforeach()
  foreach(check IN LISTS JSON)
    if(NOT check MATCHES "^([^=~#!]*)([=~#!])(.*)$")
      message(FATAL_ERROR "bad JSON check: ${check}")
    endif()
    set(op "${CMAKE_MATCH_2}")
    set(want "${CMAKE_MATCH_3}")
    string(REPLACE "/" ";" path "${CMAKE_MATCH_1}")
    if(op STREQUAL "#")
      string(JSON got ERROR_VARIABLE jerr LENGTH "${out}" ${path})
    else()
      string(JSON got ERROR_VARIABLE jerr GET "${out}" ${path})
    endif()
    if(op STREQUAL "!")
      set(ok 0)
      if(jerr)
        set(ok 1)
      endif()
    elseif(jerr)
      set(ok 0)
    elseif(op STREQUAL "~")
      set(ok 0)
      if(got MATCHES "${want}")
        set(ok 1)
      endif()
    else()
      set(ok 0)
      if(got STREQUAL want)
        set(ok 1)
      endif()
    endif()
    if(NOT ok)
      message(SEND_ERROR "JSON check ${check} failed: got '${got}' ${jerr}")
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
    foreach(text IN LISTS FILE_REJECT)
      string(FIND "${content}" "${text}" at)
      if(NOT at EQUAL -1)
        message(SEND_ERROR "unexpected in ${FILE}: ${text}")
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
#                          [FILE <path> FILE_EXPECT <fragments...> [FILE_REJECT <fragments...>]]
#                          [REJECT <fragments...>] [JSON <checks...>])
function(posenc_rope_inspect_test name)
  cmake_parse_arguments(T "" "RC;FILE" "ARGS;EXPECT;FILE_EXPECT;FILE_REJECT;REJECT;JSON" ${ARGN})
  if(NOT DEFINED T_RC)
    set(T_RC 0)
  endif()
  if(T_JSON AND CMAKE_VERSION VERSION_LESS 3.19)
    return()  # string(JSON) is CMake 3.19+; the project accepts 3.16
  endif()
  # Lists travel through -D joined with "|" (a ";" would split the add_test argument).
  string(REPLACE ";" "|" args "${T_ARGS}")
  string(REPLACE ";" "|" expect "${T_EXPECT}")
  set(extra "")
  if(T_FILE)
    string(REPLACE ";" "|" file_expect "${T_FILE_EXPECT}")
    string(REPLACE ";" "|" file_reject "${T_FILE_REJECT}")
    set(extra "-DFILE=${T_FILE}" "-DFILE_EXPECT=${file_expect}" "-DFILE_REJECT=${file_reject}")
  endif()
  foreach(opt REJECT JSON)
    if(T_${opt})
      string(REPLACE ";" "|" value "${T_${opt}}")
      list(APPEND extra "-D${opt}=${value}")
    endif()
  endforeach()
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

# ---- Argument handling (exit status 2 for a usage error, as the tool's header says) --------

# --length is a decimal integer >= 1: a hex prefix (strtoll base 0 would read 256), trailing
# text and 0 are refused, not read as something else.
posenc_rope_inspect_test("a --length in hex is refused"
  ARGS "${_posenc_configs}/Llama-3.1-8B.json" --length 0x100 RC 2
  EXPECT "--length must be an integer in [1, 9223372036854775807], not 0x100")
posenc_rope_inspect_test("a --length with trailing text is refused"
  ARGS "${_posenc_configs}/Llama-3.1-8B.json" --length 12abc RC 2
  EXPECT "--length must be an integer in [1, 9223372036854775807], not 12abc")
posenc_rope_inspect_test("a --length of 0 is refused"
  ARGS "${_posenc_configs}/Llama-3.1-8B.json" --length 0 RC 2
  EXPECT "--length must be an integer in [1, 9223372036854775807], not 0")
posenc_rope_inspect_test("--layout interleaved overrides a half-split family"
  ARGS "${_posenc_configs}/Llama-3.1-8B.json" --layout interleaved
  EXPECT "layout               interleaved  (caller override)")
posenc_rope_inspect_test("an unknown --layout is a usage error"
  ARGS "${_posenc_configs}/Llama-3.1-8B.json" --layout diagonal RC 2
  EXPECT "--layout must be interleaved or half_split")
posenc_rope_inspect_test("an unknown option is a usage error, not a file name"
  ARGS --frobnicate RC 2
  EXPECT "unknown option --frobnicate")
posenc_rope_inspect_test("two config files are a usage error"
  ARGS "${_posenc_configs}/Llama-3.1-8B.json" "${_posenc_configs}/Llama-2-7b.json" RC 2
  EXPECT "more than one config file given")
posenc_rope_inspect_test("no config file is a usage error"
  ARGS RC 2
  EXPECT "no config.json or GGUF file given")
# Only the four bytes "GGUF" make a GGUF file (ggml docs/gguf.md): "GGUx" is read as JSON.
set(_posenc_not_gguf "${CMAKE_CURRENT_BINARY_DIR}/rope-inspect-not-gguf.json")
file(WRITE "${_posenc_not_gguf}" "GGUx")
posenc_rope_inspect_test("a file starting GGUx is read as JSON"
  ARGS "${_posenc_not_gguf}" RC 1
  EXPECT "malformed JSON")
posenc_rope_inspect_test("GGUF layout override"
  ARGS "${_posenc_gguf}/llama31.gguf" --length 131072 --layout half_split
  EXPECT "layout               half_split  (caller override)")
set_tests_properties("rope-inspect: GGUF layout override"
                     PROPERTIES FIXTURES_REQUIRED posenc_gguf_samples)

# ---- Scaling summaries, from the config files' keys ----------------------------------------

set(_posenc_tool_data "${CMAKE_CURRENT_LIST_DIR}/data/rope-inspect")
set(_posenc_corpus "${CMAKE_CURRENT_LIST_DIR}/fuzz/corpus")
# neox-dynamic.json: no original_max_position_embeddings, so L0 = max_position_embeddings =
# 2048 (transformers' fallback); no num_hidden_layers, so no layer count after the type.
posenc_rope_inspect_test("dynamic NTK without an original length"
  ARGS "${_posenc_corpus}/neox-dynamic.json"
  EXPECT "rope_type            dynamic (factor 2, L0 2048)" "== layer type all\\nrope_type")
posenc_rope_inspect_test("dynamic NTK with an original length"
  ARGS "${_posenc_tool_data}/dynamic-original.json"
  EXPECT "rope_type            dynamic (factor 4, L0 4096)")
# olmo3-yarn.json: beta_fast / beta_slow absent, HF's defaults 32 / 1; no mscale keys.
posenc_rope_inspect_test("yarn without mscale keys"
  ARGS "${_posenc_corpus}/olmo3-yarn.json"
  EXPECT "rope_type            yarn (factor 8, original 8192, beta_fast 32, beta_slow 1)\\n")
posenc_rope_inspect_test("yarn with mscale but no mscale_all_dim"
  ARGS "${_posenc_tool_data}/yarn-mscale.json"
  EXPECT "yarn (factor 4, original 4096, beta_fast 32, beta_slow 1, mscale 0.5, mscale_all_dim 0)")
posenc_rope_inspect_test("vLLM NTK with mixed_b and no lengths"
  ARGS "${_posenc_corpus}/vllm-ntk-mixed.json"
       --svg "${CMAKE_CURRENT_BINARY_DIR}/rope-inspect-ntk.svg"
  # No max_position_embeddings: the target defaults to 131072 (rope_inspect.cpp), nothing is
  # accepted or trained, so no pair is judged (grey in the strip) and no L0 line is drawn.
  EXPECT "vllm-ntk-mixed.json at length 131072" "model_type           (none)"
         "rope_type            vllm_ntk (factor 4, mixed_b 0.625)"
         "accepted by config (max_position_embeddings)  not given"
         "trained (L0)                                  0\\n"
  FILE "${CMAKE_CURRENT_BINARY_DIR}/rope-inspect-ntk.svg"
  # 64 pairs: x = 80 + 630 j / 63, cells 630 / 64 - 1 = 8.84375 wide, centred.
  FILE_EXPECT ">model - vllm_ntk RoPE, layer type all</text>"
              "<rect x=\"75.5781\" y=\"534\" width=\"8.84375\" height=\"10\" fill=\"#999999\"/>"
  FILE_REJECT "trained L0" "L0 x factor")

# ---- Text report --------------------------------------------------------------------------

# Llama-3.1 at 131072: the lengths block aligns its values at column 48; L0 = 8192 (original),
# covered 8192 x 8 = 65536, 2^53 = 9007199254740992. Pair 63: inv_freq 500000^(-126/128) =
# 2.45514e-06, its wavelength 2 pi / inv_freq = 2.5592e+06 > 8192 so Llama-3 divides it by 8
# (3.06893e-07, wavelength 2.04736e+07); periods 8192 / 2.5592e+06 = 0.003201; less than one
# period in training, so unseen. Pair 0: inv_freq 1, wavelength 2 pi, 8192 / 2 pi = 1304 periods.
posenc_rope_inspect_test("Llama-3.1 lengths block and pair rows"
  ARGS "${_posenc_configs}/Llama-3.1-8B.json" --length 131072
  EXPECT "\\n  accepted by config (max_position_embeddings)  131072\\n"
         "\\n  computable (positions exact in double, 2^53)  9007199254740992\\n"
         "\\n  trained (L0)                                  8192\\n"
         "\\n  covered by training (L0 x factor 8)           65536\\n"
         "\\n  target                                        131072\\n"
         "\\n    63   2.45514e-06   3.06893e-07    2.5592e+06   2.04736e+07    0.003201  "
         "    0.003201  interpolated  extrapolated (UNSEEN angles)\\n"
         "\\n     0             1             1       6.28319       6.28319        1304  "
         "        1304  kept          extrapolated (phases seen)\\n"
         "29 of 64 pairs reach angles never seen in training at length 131072"
  # Lines that only models with such keys get (a ";" would split a fragment: no summary here).
  REJECT "layer types" "logit soft cap" "layers without RoPE" "sliding layers" "heads per layer"
         "not rotated")
# Gemma-4 style: pairs past the 64 that turn have inv_freq 0 before and after: wavelength inf,
# 0 periods, not rotated, and their angles (all 0) within training.
posenc_rope_inspect_test("proportional RoPE rows that do not turn"
  ARGS "${_posenc_corpus}/gemma4-proportional.json" --length 131072
  EXPECT "\\n   255             0             0           inf           inf           0  "
         "           0  not rotated   within training\\n")
# gpt-j-6b.json: head 256 (n_embd 4096 / n_head 16), rotary_dim 64.
posenc_rope_inspect_test("gpt-j head_dim apart from rotary_dim"
  ARGS "${_posenc_configs}/gpt-j-6b.json" --length 4096
  EXPECT "gpt-j-6b.json at length 4096\\n" "head_dim             256\\n")
# escape.json: no heads, no scaling, target = L0 = 4096: no warnings, no notes; the first of
# two architectures is the model's.
posenc_rope_inspect_test("a config without heads, warnings or notes"
  ARGS "${_posenc_tool_data}/escape.json"
  EXPECT "model_type           a&b<c>\"d  (FirstForCausalLM)\\n"
         "\\nwarnings\\n  (none)\\n\\nnotes\\n  (none)\\n"
  REJECT "heads  ")
# gemma3-style.json: linear factor 8 on the full layers; its sliding_window is typed by
# layer_types, so no "without layer_types" note on the full layers.
posenc_rope_inspect_test("Gemma-3 style linear factor and typed windows"
  ARGS "${_posenc_corpus}/gemma3-style.json" --length 131072
  EXPECT "rope_type            linear (factor 8)\\n"
  REJECT "without layer_types")
# ModernBERT: window 65 on its sliding layers (see above): distances 0 .. 64 judged.
posenc_rope_inspect_test("ModernBERT sliding layers judged at their window"
  ARGS "${_posenc_corpus}/modernbert-base.json" --length 8192
  EXPECT "== layer type sliding_attention (14 layers)"
         "sliding window 65 (or attention chunk): q-k distances stay below 65"
         "judged at distance 64, not 8191"
  REJECT "without layer_types")
# Typed chunked_attention layers (transformers 5 rope_parameters keyed by layer type) attend
# within chunks of attention_chunk_size = 4096: distances 0 .. 4095.
posenc_rope_inspect_test("typed chunked_attention layers judged at the chunk"
  ARGS "${_posenc_tool_data}/chunked-typed.json"
  EXPECT "judged at distance 4095, not 32767")
# An untyped layer entry is chunked only when every RoPE layer is: here layer 1 is a full
# attention layer without NoPE, and chunk-no-types.json has no layer types at all.
posenc_rope_inspect_test("a full layer keeps the untyped entry unchunked"
  ARGS "${_posenc_tool_data}/chunked-untyped.json"
  EXPECT "chunked attention    4096 on 1 of 2 layers"
  REJECT "attend within chunks" "judged at distance")
posenc_rope_inspect_test("attention_chunk_size without layer types chunks nothing"
  ARGS "${_posenc_tool_data}/chunk-no-types.json"
  REJECT "attend within chunks" "judged at distance")
# Llama-4 Scout: at the chunk length itself no distance is cut off; 48 / 4 = 12 NoPE layers
# (no_rope_layer_interval 4); temperature 1 + 0.1 ln(1 + floor((pos + 1) / 8192)).
posenc_rope_inspect_test("Llama-4 at exactly its chunk size"
  ARGS "${_posenc_corpus}/llama4-scout.json" --length 8192
  EXPECT "layers without RoPE  12 of 48"
         "1 + 0.1 ln(1 + floor((pos + 1) / 8192)) on the NoPE layers"
  REJECT "attend within chunks")
# Qwen2.5-1M under DCA: distances up to chunk_size = 262144 are rotated, so 0 .. 262144.
posenc_rope_inspect_test("Qwen2.5-1M rotated distances end at chunk_size"
  ARGS "${_posenc_corpus}/qwen2.5-1m-dca.json" --length 1048576
  EXPECT "judged at distance 262144, not 1048575")
posenc_rope_inspect_test("Qwen2.5-1M at exactly chunk_size"
  ARGS "${_posenc_corpus}/qwen2.5-1m-dca.json" --length 262144
  REJECT "judged as vLLM runs it")
# Every layer slides (max_window_layers 0): the window, not DCA, bounds the distances.
posenc_rope_inspect_test("dual chunk attention on sliding layers"
  ARGS "${_posenc_tool_data}/dca-sliding.json"
  EXPECT "judged at distance 32767"
  REJECT "judged as vLLM runs it")
# Phi-3.5: all 32 layers slide with 262144, so the report judges the window, no note.
posenc_rope_inspect_test("Phi-3.5 past its window"
  ARGS "${_posenc_configs}/Phi-3.5-mini-instruct.json" --length 300000
  EXPECT "judged at distance 262143, not 299999"
  REJECT "without layer_types")
# Gemma-2 style untyped, 2 layers: layer 0 slides, layer 1 not (Gemma-2 alternates), so the
# one report is not windowed and notes the window; at a target of the window itself, no note.
posenc_rope_inspect_test("Gemma-2 untyped alternating windows"
  ARGS "${_posenc_tool_data}/gemma2-untyped.json" --length 8192
  EXPECT "sliding window       4096 on 1 of 2 layers" "logit soft cap       50\\n"
         "the config sets sliding_window = 4096 without layer_types")
posenc_rope_inspect_test("Gemma-2 untyped at the window length"
  ARGS "${_posenc_tool_data}/gemma2-untyped.json" --length 4096
  REJECT "without layer_types")
# No num_hidden_layers: no layer is known to slide, so the window is only noted.
posenc_rope_inspect_test("a sliding window without a layer count"
  ARGS "${_posenc_tool_data}/mistral-no-layers.json"
  EXPECT "the config sets sliding_window = 4096 without layer_types"
  REJECT "judged at distance")
# MPT: max_seq_len 2048, alibi_bias_max 8.
posenc_rope_inspect_test("MPT ALiBi at its length"
  ARGS "${_posenc_corpus}/mpt-alibi.json" --length 2048
  EXPECT "alibi max bias       8\\n" "\\nwarnings\\n  (none)\\n"
  REJECT "exceeds the configured length")
posenc_rope_inspect_test("MPT ALiBi past its length"
  ARGS "${_posenc_corpus}/mpt-alibi.json" --length 4096
  EXPECT "target length 4096 exceeds the configured length 2048")
posenc_rope_inspect_test("ALiBi without a length"
  ARGS "${_posenc_tool_data}/bloom-no-length.json"
  EXPECT "accepted length      not given\\n" "\\nnotes\\n  (none)\\n"
  REJECT "exceeds the configured length")
# gpt2.json names no heads: no heads, no softmax scale to print.
posenc_rope_inspect_test("GPT-2 learned positions without an offset"
  ARGS "${_posenc_tool_data}/gpt2.json"
  EXPECT "no RoPE or ALiBi: a learned absolute table (hard limit 1024)\\n"
  REJECT "softmax scale" "heads  ")
# ViT-MAE (224 / 16 = 14 patches a side, a class row) and M-2M-100 (fairseq's [sin | cos],
# positions from padding_idx + 1 = 2): the table's kind and formula, not RoPE.
posenc_rope_inspect_test("ViT-MAE sin-cos grid"
  ARGS "${_posenc_tool_data}/vit-mae.json"
  EXPECT "no RoPE or ALiBi: a fixed sin-cos 14 x 14 patch grid after 1 leading row, widths 768 "
         "attention mask       bidirectional"
  REJECT "rope_type")
posenc_rope_inspect_test("M2M-100 sinusoids at position + 2"
  ARGS "${_posenc_tool_data}/m2m100.json"
  # ("|" separates the fragments, so the layout's name is matched in two pieces)
  EXPECT "no RoPE or ALiBi: fixed sinusoids, layout sin"
         "cos, base 10000, position p encoded as p + 2 (any position here; "
         "max_position_embeddings 1024)\\n"
         "encoder self-attention bidirectional, decoder self-attention causal")
posenc_rope_inspect_test("Whisper's decoder table and encoder sinusoids"
  ARGS "${_posenc_tool_data}/whisper.json"
  EXPECT "a learned absolute table (hard limit 448); the encoder's: fixed sinusoids, layout sin"
         "cos, 1500 rows\\n")
# BEiT-B/16: 224 / 16 = 14 patches a side after the class token, a table of 27 x 27 + 3 = 732
# rows in every layer (the checkpoint's relative_position_bias_table is [732, 12]).
posenc_rope_inspect_test("BEiT relative position bias window"
  ARGS "${_posenc_tool_data}/beit.json"
  EXPECT "position scheme      relative_bias_2d\\n"
         "2-D relative bias    14 x 14 patch window after a class token, tables of 732 rows: "
         "one per layer"
         "attention mask       bidirectional"
  REJECT "rope_type" "no RoPE or ALiBi")
# Swin-T: 56, 28, 14, 7 patches a side, 7 x 7 windows (64, 16, 4, 1), the last stage one
# window and so never shifted; 13 x 13 = 169-row tables, heads of 96 / 3 = 32.
posenc_rope_inspect_test("Swin-T stages and shifted windows"
  ARGS "${_posenc_tool_data}/swin.json"
  EXPECT "position scheme      relative_bias_2d\n"
         "shifted windows      4 stages, window_size 7, every second block shifted; bias from "
         "each layer's table (swin_window_bias)\n"
         "  stage 0            2 blocks, 3 heads of 32, 56 x 56 patches, 7 x 7 windows (64), "
         "shift 3, tables of 169 rows\n"
         "  stage 3            2 blocks, 24 heads of 32, 7 x 7 patches, 7 x 7 windows (1), "
         "shift 0, tables of 169 rows\n"
         "attention mask       bidirectional"
  REJECT "rope_type" "no RoPE or ALiBi" "2-D relative bias")
# SAM ViT-B: 64 x 64 patches, global attention on layers 2, 5, 8, 11 (tables of 2 64 - 1 = 127
# rows), 14 x 14 windows elsewhere (27 rows), plus the learned 64 x 64 grid without a class row.
posenc_rope_inspect_test("SAM decomposed relative positions"
  ARGS "${_posenc_tool_data}/sam-vit-base.json"
  EXPECT "position scheme      decomposed_rel_pos\n"
         "decomposed rel pos   global over 64 x 64 patches on layers 2 5 8 11 (tables of 127 "
         "rows), 14 x 14 windows on the others (tables of 27 rows)"
         "also                 a learned 64 x 64 patch grid after 0 leading rows"
         "attention mask       bidirectional"
  REJECT "rope_type")
posenc_rope_inspect_test("json SAM decomposed relative positions"
  ARGS "${_posenc_tool_data}/sam-vit-base.json" --json
  JSON "scheme=decomposed_rel_pos" "model_type=sam_vision_model"
       "decomposed_rel_pos/grid_h=64" "decomposed_rel_pos/window_size=14"
       "decomposed_rel_pos/global_layers#4" "decomposed_rel_pos/global_layers/3=11"
       "decomposed_rel_pos/global_table_rows=127" "decomposed_rel_pos/window_table_rows=27"
       "absolute/grid_h=64" "absolute/leading_rows=0")
# Deformable DETR: the sine embedding of the padded map, 2 x 128 channels (d_model / 2 per
# axis), counts less 0.5 (DeformableDetrSinePositionEmbedding); heads of 256 / 8 = 32. (The
# fragments leave out "[y | x]": the lists travel "|"-joined, and CMake's list splitting counts
# square brackets.)
posenc_rope_inspect_test("Deformable DETR feature-map sine"
  ARGS "${_posenc_tool_data}/deformable-detr.json"
  EXPECT "position scheme      feature_map\n"
         "feature map          sine of the padded map, 2 x 128 channels "
         "temperature 10000, counts less 0.5 (sine_embedding_2d)\n"
         "softmax scale        0.176777  (q.k width 32)"
         "attention mask       bidirectional"
  REJECT "rope_type" "no RoPE or ALiBi")
posenc_rope_inspect_test("json Deformable DETR feature-map sine"
  ARGS "${_posenc_tool_data}/deformable-detr.json" --json
  JSON "scheme=feature_map" "feature_map/kind=sine" "feature_map/num_pos_feats=128"
       "feature_map/offset=0.5" "feature_map/temperature_width~^10000(\\.0)?$"
       "feature_map/order=yx")
# RT-DETR: the fixed table on level 2 (stride 32) only.
posenc_rope_inspect_test("RT-DETR feature-map table"
  ARGS "${_posenc_tool_data}/rt-detr.json"
  EXPECT "feature map          fixed "
         "sin-cos table, 256 channels, temperature 10000, levels 2 (sincos_grid_rt_detr)\n"
  REJECT "rope_type")
posenc_rope_inspect_test("M-RoPE sections t, h, w in order"
  ARGS "${_posenc_tool_data}/mrope-sections.json"
  EXPECT "M-RoPE sections      (t, h, w) = (16, 20, 28) pairs")
posenc_rope_inspect_test("MiMo-V2 sliding layer heads"
  ARGS "${_posenc_corpus}/mimo-v2-hub.json"
  EXPECT "sliding layers 64 query, 8 key/value\\n")

# ---- JSON report (checked by path, see the script part above) ------------------------------

posenc_rope_inspect_test("json ViT-MAE absolute grid"
  ARGS "${_posenc_tool_data}/vit-mae.json" --json
  JSON "scheme=absolute" "absolute/kind=sin-cos grid" "absolute/grid_h=14" "absolute/grid_w=14"
       "absolute/leading_rows=1" "absolute/embed_dim=768" "absolute/decoder_embed_dim=512"
       "absolute/position_offset=0" "mask=bidirectional")

posenc_rope_inspect_test("json BEiT relative position bias"
  ARGS "${_posenc_tool_data}/beit.json" --json
  JSON "scheme=relative_bias_2d" "relative_bias_2d/window_h=14" "relative_bias_2d/window_w=14"
       "relative_bias_2d/class_token=ON" "relative_bias_2d/table_rows=732"
       "relative_bias_2d/shared_table=OFF" "relative_bias_2d/per_layer_tables=ON"
       "mask=bidirectional")

# Swin-v2-B window 12 -> 24 at 384 px: stage 2 (24 x 24) one window, stage 3 (12 x 12) a window
# of 12 whose MLP was pretrained at 6; bias tables from the MLPs, none in the checkpoint.
posenc_rope_inspect_test("json Swin-v2 stages and pretrained windows"
  ARGS "${_posenc_tool_data}/swinv2-384.json" --json
  JSON "scheme=relative_bias_2d" "relative_bias_2d/per_layer_tables=OFF"
       "relative_bias_2d/per_layer_mlp=ON" "relative_bias_2d/class_token=OFF"
       "swin/rule=swinv2" "swin/window_size=24" "swin/stages#4"
       "swin/stages/0/height=96" "swin/stages/0/window=24" "swin/stages/0/shift=12"
       "swin/stages/0/num_windows=16" "swin/stages/2/depth=18" "swin/stages/2/shift=0"
       "swin/stages/3/window=12" "swin/stages/3/table_window=12"
       "swin/stages/3/pretrained_window=6" "swin/stages/3/num_heads=32"
       "swin/stages/3/hidden_size=1024" "mask=bidirectional")

# Llama-3.1 at 65536 = L0 x factor: pair 63 (see "Llama-3.1 lengths block and pair rows")
# interpolated, 65536 / 8 = 8192 = L0 positions: within training; pair 0 kept, 65536 > 8192
# positions but 1304 periods in L0: phases seen. No warning: 65536 <= 131072 accepted, not
# past the covered length, nothing unseen. With --svg the JSON on stdout stays one document.
set(_posenc_svg65536 "${CMAKE_CURRENT_BINARY_DIR}/rope-inspect-llama31-65536.svg")
posenc_rope_inspect_test("json Llama-3.1 at its covered length"
  ARGS "${_posenc_configs}/Llama-3.1-8B.json" --length 65536 --json --svg "${_posenc_svg65536}"
  JSON "source~Llama-3[.]1-8B[.]json$" "model_type=llama" "target_length=65536"
       "max_position_embeddings=131072" "num_attention_heads=32" "num_key_value_heads=8"
       "sliding_num_key_value_heads!" "attention_head_dim=128" "softmax_scale~^0[.]0883883"
       "layer_uses_rope#0" "sliding_layers#0" "chunked_layers#0" "notes/0~." "layers#1"
       "layers/0/layer_type=all" "layers/0/num_layers=32" "layers/0/layout=half_split"
       "layers/0/layout_reason~rotate_half" "layers/0/theta~^500000([.]0)?$"
       "layers/0/factor~^8([.]0)?$" "layers/0/lengths/accepted=131072"
       "layers/0/lengths/computable=9007199254740992" "layers/0/lengths/trained=8192"
       "layers/0/lengths/covered~^65536([.]0)?$" "layers/0/lengths/target=65536"
       "layers/0/pairs#64" "layers/0/pairs/63/j=63"
       "layers/0/pairs/63/inv_freq_before~^2[.]45514[0-9]*e-06$"
       "layers/0/pairs/63/inv_freq_after~^3[.]06892[0-9]*e-07$"
       "layers/0/pairs/63/wavelength_before~^2559195[.]5"
       "layers/0/pairs/63/wavelength_after~^20473564[.]1"
       "layers/0/pairs/63/periods_in_training~^0[.]0032010"
       "layers/0/pairs/63/rotated=ON" "layers/0/pairs/63/scaling=interpolated"
       "layers/0/pairs/63/at_target=within training"
       "layers/0/pairs/0/at_target=extrapolated (phases seen)" "layers/0/unseen_pairs=0"
       "layers/0/warnings#0"
  REJECT "wrote"
  FILE "${_posenc_svg65536}"
  # pair 63 within training: green at x = 80 + 630 - 8.84375 / 2
  FILE_EXPECT "<rect x=\"705.578\" y=\"534\" width=\"8.84375\" height=\"10\" fill=\"#2ca02c\"/>")
# gpt-j: head 256, rotary_dim 64; DeepSeek-V3: yarn with mscale = mscale_all_dim = 1, so the
# cos/sin factor is 1 and the softmax multiplier (0.1 ln 40 + 1)^2 = 1.87385; Phi-3.5: LongRoPE's
# factor is max_position_embeddings / L0 = 131072 / 4096 = 32, window 262144.
posenc_rope_inspect_test("json gpt-j rotary_dim"
  ARGS "${_posenc_configs}/gpt-j-6b.json" --json
  JSON "layers/0/head_dim=256" "layers/0/rotary_dim=64")
posenc_rope_inspect_test("json DeepSeek-V3 multipliers"
  ARGS "${_posenc_configs}/DeepSeek-V3.json" --json
  JSON "layers/0/attention_factor~^1([.]0)?$" "layers/0/softmax_scale_multiplier~^1[.]87385")
posenc_rope_inspect_test("json Phi-3.5 LongRoPE factor and window"
  ARGS "${_posenc_configs}/Phi-3.5-mini-instruct.json" --json
  JSON "layers/0/factor~^32([.]0)?$" "sliding_window=262144")
# Gemma-4 style: the full layer first (rope_parameters keys in order), pair 255 still.
posenc_rope_inspect_test("json proportional pairs that do not turn"
  ARGS "${_posenc_corpus}/gemma4-proportional.json" --json
  JSON "layers/0/layer_type=full_attention" "layers/0/pairs#256"
       "layers/0/pairs/255/rotated=OFF" "layers/0/pairs/255/wavelength_after=")
posenc_rope_inspect_test("json ModernBERT mask and sliding layers"
  ARGS "${_posenc_corpus}/modernbert-base.json" --json
  JSON "mask=bidirectional" "sliding_layers#14" "sliding_layers/0=1" "layers#2"
       "layers/1/layer_type=sliding_attention" "layers/1/num_layers=14")
posenc_rope_inspect_test("json MiMo-V2 sliding heads"
  ARGS "${_posenc_corpus}/mimo-v2-hub.json" --json
  JSON "sliding_num_attention_heads=64" "sliding_num_key_value_heads=8")
posenc_rope_inspect_test("json Llama-4 chunked layers"
  ARGS "${_posenc_corpus}/llama4-scout.json" --json
  JSON "chunked_layers#36" "layer_uses_rope#48" "attention_chunk_size=8192")
# Ministral-3: 1 + 0.1 ln(1 + floor(pos / 16384)): floor_scale 16384, attn_scale 0.1.
posenc_rope_inspect_test("json Ministral-3 query temperature"
  ARGS "${_posenc_corpus}/ministral3-temperature.json" --json
  JSON "attention_temperature/floor_scale~^16384([.]0)?$" "attention_temperature/attn_scale~^0[.]1")
posenc_rope_inspect_test("json Gemma-2 soft cap"
  ARGS "${_posenc_tool_data}/gemma2-untyped.json" --json
  JSON "attn_logit_softcapping~^50([.]0)?$")
posenc_rope_inspect_test("json M-RoPE sections"
  ARGS "${_posenc_tool_data}/mrope-sections.json" --json
  JSON "mrope/section_thw/0=16" "mrope/section_thw/1=20" "mrope/section_thw/2=28")
# Qwen2.5-1M at 2^20: 1 + 0.1 ln(2^20 / 262144) = 1.13863 (see the text test above).
posenc_rope_inspect_test("json Qwen2.5-1M dual chunk attention"
  ARGS "${_posenc_corpus}/qwen2.5-1m-dca.json" --length 1048576 --json
  JSON "dual_chunk_attention/chunk_size=262144" "dual_chunk_attention/local_size=8192"
       "dual_chunk_attention/length_scale_at_target~^1[.]13862")
posenc_rope_inspect_test("json T5 relative buckets"
  ARGS "${_posenc_corpus}/t5-small.json" --json
  JSON "relative_attention_num_buckets=32" "relative_attention_max_distance=128")
# MPT: 12 heads, so 12 slopes; alibi_bias_max 8; one warning past max_seq_len 2048.
posenc_rope_inspect_test("json MPT ALiBi"
  ARGS "${_posenc_corpus}/mpt-alibi.json" --length 4096 --json
  JSON "alibi_slopes#12" "alibi_max_bias~^8([.]0)?$" "warnings#1")
# LFM2 GGUF (see the text test above): layer 2 attends with 32 / 8 heads.
posenc_rope_inspect_test("json GGUF LFM2 heads per layer"
  ARGS "${_posenc_gguf}/lfm2-conv.gguf" --json
  JSON "layer_num_attention_heads/2=32" "layer_num_key_value_heads/2=8")
# Llama-3.1 GGUF: rope_freqs, 64 per-pair factors from 1 to 8.
posenc_rope_inspect_test("json GGUF Llama-3.1 freq_factors"
  ARGS "${_posenc_gguf}/llama31.gguf" --json
  JSON "layers/0/freq_factors#64")
set_tests_properties("rope-inspect: json GGUF LFM2 heads per layer"
                     "rope-inspect: json GGUF Llama-3.1 freq_factors"
                     PROPERTIES FIXTURES_REQUIRED posenc_gguf_samples)
# num_kv_shared_layers = 2 of 4: layers 2 and 3 read the KV cache of the last earlier layer of
# their type (Gemma-3n): 0 (sliding) and 1 (full).
posenc_rope_inspect_test("json shared KV layers"
  ARGS "${_posenc_tool_data}/kv-shared.json" --json
  JSON "layer_kv_source#4" "layer_kv_source/2=0" "layer_kv_source/3=1")

# ---- SVG plot: coordinates worked by hand --------------------------------------------------
# The plot: 900 x 600, plot area x 80 .. 710 (630 wide), y 60 .. 510 (450 high); log-scale y
# from 10^e_lo (floor of log10 of the smallest wavelength or reference length) to 10^e_hi
# (ceil of the largest): Y(v) = 510 - 450 (log10 v - e_lo) / (e_hi - e_lo); tick labels at
# Y + 4, x = 72; pair j at X = 80 + 630 j / (n - 1); labels of the reference lines at x = 716,
# moved 14 up when they would overlap the previous one; legend rows 16 apart from y = 400.
# Llama-3.1 at 131072: wavelengths 2 pi (pair 0) .. 8 x 2 pi 500000^(126/128) = 2.04736e+07
# (log10 7.31), so e_lo 0, e_hi 8: Y(v) = 510 - 56.25 log10 v; Y(2 pi) = 465.102,
# Y(2.04736e+07) = 98.7454. Pair 0 extrapolated with phases seen (yellow), 63 unseen (red).
set(_posenc_svg_coords "${CMAKE_CURRENT_BINARY_DIR}/rope-inspect-llama31-coords.svg")
posenc_rope_inspect_test("svg coordinates of Llama-3.1"
  ARGS "${_posenc_configs}/Llama-3.1-8B.json" --length 131072 --svg "${_posenc_svg_coords}"
  FILE "${_posenc_svg_coords}"
  FILE_EXPECT "<text x=\"72\" y=\"514\" text-anchor=\"end\">1</text>"
              "<text x=\"72\" y=\"289\" text-anchor=\"end\">10k</text>"
              "<text x=\"72\" y=\"64\" text-anchor=\"end\">100M</text>"
              "<text x=\"160\" y=\"526\" text-anchor=\"middle\">8</text>"
              ">llama - llama3 RoPE, layer type all</text>" ">L0 x factor = 65536</text>"
              "710,98.7454 \"/>\\n<circle cx=\"80\" cy=\"465.102\" r=\"2.5\" fill=\"#1f77b4\"/>"
              "<circle cx=\"710\" cy=\"98.7454\" r=\"2.5\" fill=\"#1f77b4\"/>"
              "<rect x=\"75.5781\" y=\"534\" width=\"8.84375\" height=\"10\" fill=\"#f2c300\"/>"
              "<rect x=\"705.578\" y=\"534\" width=\"8.84375\" height=\"10\" fill=\"#d62728\"/>"
              "<text x=\"734\" y=\"416\">after scaling</text>"
              "<rect x=\"716\" y=\"423\" width=\"12\" height=\"10\" fill=\"#2ca02c\"/>"
              "<rect x=\"716\" y=\"455\" width=\"12\" height=\"10\" fill=\"#d62728\"/>"
              "(29 of 64 pairs unseen)")
# Qwen2.5 yarn 4 at 131072: covered 32768 x 4 = 131072 = the target, so the target's label
# moves 14 above the covered one: Y(131072) + 4 = 510 - 56.25 x 5.11750 + 4 = 226.14.
set(_posenc_svg_qwen "${CMAKE_CURRENT_BINARY_DIR}/rope-inspect-qwen-yarn.svg")
posenc_rope_inspect_test("svg labels of equal lengths do not overlap"
  ARGS "${_posenc_configs}/Qwen2.5-7B+qwen-doc-yarn.json" --length 131072
       --svg "${_posenc_svg_qwen}"
  FILE "${_posenc_svg_qwen}"
  FILE_EXPECT "<text x=\"716\" y=\"226.14\" fill=\"#ff7f0e\">L0 x factor = 131072</text>"
              "<text x=\"716\" y=\"212.14\" fill=\"#2ca02c\">target = 131072</text>")
# gpt-j at 10^6: the longest wavelength 2 pi 10000^(62/64) = 4.7e4 is below the target, which
# sets e_hi = 6: the top line is the target at y = 60.
set(_posenc_svg_gptj "${CMAKE_CURRENT_BINARY_DIR}/rope-inspect-gptj.svg")
posenc_rope_inspect_test("svg range reaches the target"
  ARGS "${_posenc_configs}/gpt-j-6b.json" --length 1000000 --svg "${_posenc_svg_gptj}"
  FILE "${_posenc_svg_gptj}"
  FILE_EXPECT "<text x=\"72\" y=\"64\" text-anchor=\"end\">1M</text>"
              "<line x1=\"80\" y1=\"60\" x2=\"710\" y2=\"60\" stroke=\"#2ca02c\""
              "theta 10000, rotary_dim 64, target 1000000</text>")
# escape.json: theta 1e12, wavelengths up to 2 pi 1e12^(126/128) (log10 12.61): e_hi = 13,
# 10^9 at 510 - 450 x 9 / 13 + 4 = 202.462; no scaling, so no L0 x factor line; the
# model_type's XML characters escaped.
set(_posenc_svg_esc "${CMAKE_CURRENT_BINARY_DIR}/rope-inspect-escape.svg")
posenc_rope_inspect_test("svg escapes the title and labels large powers"
  ARGS "${_posenc_tool_data}/escape.json" --svg "${_posenc_svg_esc}"
  FILE "${_posenc_svg_esc}"
  # The title in pieces: a ";" separates list items, so each entity ends a fragment.
  FILE_EXPECT ">a&amp" "b&lt" "c&gt" "&quot" "d - default RoPE, layer type all</text>"
              "<text x=\"72\" y=\"202.462\" text-anchor=\"end\">1e9</text>"
  FILE_REJECT "L0 x factor" ">a&b" "b<c" "c>\"d")
# Gemma-3 style: linear 8 slows every pair, so pair 0's wavelength before (2 pi) sets e_lo = 0.
set(_posenc_svg_g3 "${CMAKE_CURRENT_BINARY_DIR}/rope-inspect-gemma3.svg")
posenc_rope_inspect_test("svg range starts at the unscaled wavelengths"
  ARGS "${_posenc_corpus}/gemma3-style.json" --svg "${_posenc_svg_g3}"
  FILE "${_posenc_svg_g3}"
  FILE_EXPECT "<text x=\"72\" y=\"514\" text-anchor=\"end\">1</text>"
              "RoPE, layer type full_attention</text>")
# Gemma-4 style: 256 pairs, cells at least 2 wide; the 192 still pairs (infinite wavelength)
# not drawn; reference lengths 131072 set e_hi = 6.
set(_posenc_svg_g4 "${CMAKE_CURRENT_BINARY_DIR}/rope-inspect-gemma4.svg")
posenc_rope_inspect_test("svg leaves out pairs that do not turn"
  ARGS "${_posenc_corpus}/gemma4-proportional.json" --svg "${_posenc_svg_g4}"
  FILE "${_posenc_svg_g4}"
  FILE_EXPECT "<text x=\"72\" y=\"64\" text-anchor=\"end\">1M</text>" "width=\"2\" height=\"10\""
  FILE_REJECT "inf" "nan")
# One pair: drawn in the middle, x = 80 + 630 / 2.
set(_posenc_svg_one "${CMAKE_CURRENT_BINARY_DIR}/rope-inspect-one-pair.svg")
posenc_rope_inspect_test("svg of a single pair"
  ARGS "${_posenc_tool_data}/one-pair.json" --svg "${_posenc_svg_one}"
  FILE "${_posenc_svg_one}"
  FILE_EXPECT "<circle cx=\"395\"")
# rope_parameters keyed by type come in key order: chunked_attention first; the plot is of
# the full_attention layers (theta 500000).
set(_posenc_svg_chunk "${CMAKE_CURRENT_BINARY_DIR}/rope-inspect-chunked.svg")
posenc_rope_inspect_test("svg plots the full attention layers"
  ARGS "${_posenc_tool_data}/chunked-typed.json" --svg "${_posenc_svg_chunk}"
  FILE "${_posenc_svg_chunk}"
  FILE_EXPECT "RoPE, layer type full_attention</text>" "theta 500000, rotary_dim 128")
posenc_rope_inspect_test("svg of an ALiBi model is refused"
  ARGS "${_posenc_configs}/bloom.json" --svg "${CMAKE_CURRENT_BINARY_DIR}/rope-inspect-bloom.svg"
  RC 1
  EXPECT "--svg needs a RoPE model")
posenc_rope_inspect_test("svg to an unwritable path"
  ARGS "${_posenc_configs}/Llama-3.1-8B.json"
       --svg "${CMAKE_CURRENT_BINARY_DIR}/rope-inspect-no-such-dir/plot.svg"
  RC 1
  EXPECT "cannot write")

# ---- Extremes the loaders accept -----------------------------------------------------------
# A linear factor of 1.23456e+100 makes the covered label 48 characters long: the value keeps
# one space after it (4096 x 1.23456e+100 = 5.05676e+103).
posenc_rope_inspect_test("a long covered-length label keeps a space"
  ARGS "${_posenc_tool_data}/huge-factor.json"
  EXPECT "\\n  covered by training (L0 x factor 1.23456e+100) 5.05676e+103\\n")
# theta 1e30, linear factor 1e300: pair 63's inv_freq 1e30^(-126/128) = 2.94e-30 divided by
# 1e300 underflows to 0 in double, so it does not rotate (wavelength null); pair 0's 1e-300
# does.
posenc_rope_inspect_test("json a frequency that underflows does not rotate"
  ARGS "${_posenc_tool_data}/underflow.json" --json
  JSON "layers/0/pairs/63/rotated=OFF" "layers/0/pairs/63/wavelength_after="
       "layers/0/pairs/0/rotated=ON")
