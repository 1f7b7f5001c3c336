# Flags for posenc's own tests, benchmarks and examples. Never applied to the INTERFACE target:
# a consumer's warning policy is theirs (xtensor's global add_definitions is the anti-pattern).
function(posenc_target_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic)
  if(POSENC_WARNINGS_AS_ERRORS)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()

# float-cast-overflow: a double outside the integer type's range converted to it (a row index
# from a scale factor, a rotary width from a head_dim) is undefined, and GCC's "undefined" group
# leaves this check out (Clang's includes it).
function(posenc_target_sanitize target)
  if(POSENC_SANITIZE)
    target_compile_options(${target} PRIVATE
      -fsanitize=address,undefined,float-cast-overflow -fno-sanitize-recover=all
      -fno-omit-frame-pointer)
    target_link_options(${target} PRIVATE -fsanitize=address,undefined,float-cast-overflow)
  endif()
endfunction()

# GCC before 12.3 warns inside its own AVX-512 intrinsics wherever they are inlined (their
# _mm512_undefined_* pass-through operands, GCC bug 105593): Eigen's AVX-512 packets and
# posenc's 512-bit kernels alike. For targets built for AVX-512 only (the native benchmarks on
# such a machine, tests/avx512).
function(posenc_target_avx512_warnings target)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 12.3)
    target_compile_options(${target} PRIVATE -Wno-maybe-uninitialized -Wno-uninitialized)
  endif()
endfunction()
