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

# The attention kernel compiled once (posenc/kernel_instances.hpp) for the tests, fuzz drivers
# and examples built with the default code-generation flags: linking this library defines
# POSENC_EXTERN_KERNELS in them, so they declare its common instantiations instead of compiling
# them again (about 9 s per storage type per unit at -O3; the tests made some 90 of them). It
# gets the sanitizer flags of the pass it is built in. Targets with their own -m flags
# (tests/*_simd, tests/avx512) must not link it: they would run its portable code.
function(posenc_use_kernel_instances target)
  if(NOT TARGET posenc_kernel_instances)
    set(tu "${PROJECT_BINARY_DIR}/kernel_instances/kernel_instances.cpp")
    file(CONFIGURE OUTPUT "${tu}" CONTENT "#include \"posenc/kernel_instances.hpp\"\n")
    add_library(posenc_kernel_instances STATIC "${tu}")
    target_link_libraries(posenc_kernel_instances PUBLIC posenc::posenc)
    target_compile_definitions(posenc_kernel_instances PUBLIC POSENC_EXTERN_KERNELS)
    posenc_target_warnings(posenc_kernel_instances)
    posenc_target_sanitize(posenc_kernel_instances)
  endif()
  target_link_libraries(${target} PRIVATE posenc_kernel_instances)
endfunction()
