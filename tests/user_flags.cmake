# posenc's headers are compiled in the user's translation units, with the user's flags. Two
# kinds are checked here, both with -fsyntax-only (no object code: seconds per entry):
#  1. warnings (POSENC_STRICT_WARNINGS): the headers raise none under a strict set;
#  2. floating-point flags: -ffast-math and the parts of it that change posenc's results are
#     refused at compile time (posenc/detail/fast_math_guard.hpp), with the reason.
# Eigen, Catch2 and nlohmann/json come in as system headers, as an imported target's
# directories do in a user's build (the compiler's own directories are left out: -isystem
# /usr/include breaks #include_next).

set(_posenc_system_includes "")
foreach(dep IN ITEMS Eigen3::Eigen Catch2::Catch2 nlohmann_json::nlohmann_json)
  if(TARGET ${dep})
    get_target_property(dirs ${dep} INTERFACE_INCLUDE_DIRECTORIES)
    foreach(dir IN LISTS dirs)
      if(NOT dir IN_LIST CMAKE_CXX_IMPLICIT_INCLUDE_DIRECTORIES
         AND NOT "-isystem;${dir}" IN_LIST _posenc_system_includes)
        list(APPEND _posenc_system_includes -isystem "${dir}")
      endif()
    endforeach()
  endif()
endforeach()

# --- 1. Strict warnings ----------------------------------------------------------------------
# An engine built with -Wconversion -Wsign-conversion -Wshadow ... and -Werror (or a vendored
# copy pulled in with add_subdirectory, whose include directory is not a system one) must see none
# from posenc. Each test translation unit, which instantiates the headers for its storage types
# and SIMD targets, is compiled once more with -fsyntax-only (no object code: seconds each) and
# the strict set below; the check fails on any warning whose location is under include/posenc/.
# Warnings in the tests themselves are not counted.
#
# Not in the set: -Wuseless-cast (GCC) flags a cast that is needed for another template
# argument or on a platform where int64_t is another type; -Wnull-dereference needs the
# optimiser, which a syntax-only pass does not run.
#
# In posenc's code the rule shows as array bounds written std::size_t{N}: GCC 12 reports an int
# template parameter used as a bound (T a[N]) under -Wsign-conversion, though N is a constant.

# posenc_add_user_flag_checks(<compiler> <GNU|Clang> <label>) registers both kinds for one
# compiler. The build's own compiler always; in a GCC build also Clang when it is installed
# (POSENC_CLANG_CHECKS), so one pass covers both compilers' front ends: Clang refuses code GCC
# accepts (a sized aligned delete posenc's KV cache called, which Clang before 19 does not
# declare, was found this way), and their warning sets differ.
function(posenc_add_user_flag_checks compiler id label)
  # GCC compiles at posenc's C++17, Clang at C++20: engines on the newer standard meet what it
  # changed (implicit `this` in [=] deprecated, rewritten comparison operators, char8_t, removed
  # library names such as std::result_of), so the checks cover both standards.
  set(strict_std c++17)
  if(id STREQUAL "Clang")
    set(strict_std c++20)
  endif()
  set(strict_flags
      -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wsign-conversion -Wdouble-promotion
      -Wold-style-cast -Wcast-qual -Wextra-semi -Wzero-as-null-pointer-constant
      -Wnon-virtual-dtor -Woverloaded-virtual -Wformat=2 -Wundef)
  if(id STREQUAL "GNU")
    list(APPEND strict_flags -Wduplicated-cond -Wduplicated-branches -Wlogical-op)
  else()
    # -Wno-unknown-warning-option: the targets' GCC-only options (tests/avx512's
    # -Wno-maybe-uninitialized) come along.
    list(APPEND strict_flags
         -Wshadow-all -Wshorten-64-to-32 -Wimplicit-int-conversion -Wimplicit-float-conversion
         -Wcomma -Wextra-semi-stmt -Wunreachable-code-aggressive -Wdocumentation -Wnewline-eof
         -Wmissing-noreturn -Wunused-template -Wno-unknown-warning-option)
  endif()

  if(POSENC_STRICT_WARNINGS)
    get_property(targets DIRECTORY PROPERTY BUILDSYSTEM_TARGETS)
    list(FILTER targets INCLUDE REGEX "^posenc_test_")
    foreach(target IN LISTS targets)
      get_target_property(source ${target} SOURCES)
      get_filename_component(name "${source}" NAME_WE)
      set(test "strict warnings (${label}${strict_std}): posenc headers as ${name} uses them")
      # The target's own options (its -mavx2 / -mavx512* flags pick the SIMD paths to
      # instantiate); -Wno-error after them: the tests' own warnings are not what this counts.
      # The target's definitions leave out POSENC_EXTERN_KERNELS (it comes with the kernel
      # instance library), so every kernel the test calls is instantiated and checked here.
      add_test(NAME "${test}"
               COMMAND "${compiler}" -std=${strict_std} -fsyntax-only
                       "$<TARGET_PROPERTY:${target},COMPILE_OPTIONS>" -Wno-error ${strict_flags}
                       "-D$<JOIN:$<TARGET_PROPERTY:${target},COMPILE_DEFINITIONS>,;-D>"
                       ${_posenc_system_includes}
                       -I "${PROJECT_SOURCE_DIR}/include" -I "${CMAKE_CURRENT_SOURCE_DIR}"
                       "${source}"
               COMMAND_EXPAND_LISTS)
      set_tests_properties("${test}" PROPERTIES FAIL_REGULAR_EXPRESSION
                           "/include/posenc/[^:\n]*:[0-9]+:[0-9]+: warning")
    endforeach()
  endif()

  # --- 2. -ffast-math and its parts --------------------------------------------------------------
  # Refused: each flag set must stop the compile with posenc's message. Clang names only
  # -ffast-math and -ffinite-math-only with a macro, so the single parts are checked with GCC.
  # Accepted: the opt-out macro, -fno-fast-math after -ffast-math (a user's way to exempt the
  # files that include posenc), and -freciprocal-math alone (last bits only).
  set(fm_label "")
  if(label)
    set(fm_label " (clang)")
  endif()
  set(refused "-ffast-math" "-Ofast" "-ffinite-math-only")
  if(id STREQUAL "GNU")
    list(APPEND refused "-fassociative-math -fno-signed-zeros -fno-trapping-math"
         "-fno-signed-zeros")
  endif()
  set(accepted "-ffast-math -DPOSENC_ALLOW_FAST_MATH" "-ffast-math -fno-fast-math"
      "-freciprocal-math")
  set(fast_math_tu "${CMAKE_CURRENT_SOURCE_DIR}/cmake/fast_math.cpp")
  foreach(flags IN LISTS refused accepted)
    separate_arguments(flag_list UNIX_COMMAND "${flags}")
    if(flags IN_LIST refused)
      # The message is printed only by the #error, which also fails the compile.
      set(test "fast-math${fm_label}: ${flags} is refused at compile time, with the reason")
      set(expect PASS_REGULAR_EXPRESSION "posenc: compiled with -ffast-math")
    else()
      # Any diagnostic from posenc's headers (the compiler driver may warn about the flags).
      set(test "fast-math${fm_label}: ${flags} compiles")
      set(expect FAIL_REGULAR_EXPRESSION "/include/posenc/|posenc: ")
    endif()
    add_test(NAME "${test}"
             COMMAND "${compiler}" -std=c++17 -fsyntax-only -Wall -Wextra -Wpedantic
                     ${flag_list} ${_posenc_system_includes} -I "${PROJECT_SOURCE_DIR}/include"
                     "${fast_math_tu}")
    set_tests_properties("${test}" PROPERTIES ${expect})
  endforeach()
endfunction()

posenc_add_user_flag_checks("${CMAKE_CXX_COMPILER}" "${CMAKE_CXX_COMPILER_ID}" "")
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  find_program(POSENC_CLANG_CHECKS NAMES clang++ clang++-19 clang++-16 clang++-15 clang++-14
               DOC "Clang for the strict-warning and fast-math checks of a GCC build")
  if(POSENC_CLANG_CHECKS)
    message(STATUS "posenc: strict-warning and fast-math checks with ${POSENC_CLANG_CHECKS} too")
    posenc_add_user_flag_checks("${POSENC_CLANG_CHECKS}" Clang "clang, ")
  else()
    message(STATUS "posenc: no clang++: the Clang front-end checks are not registered")
  endif()
endif()
