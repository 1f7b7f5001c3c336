# Flags for posenc's own tests, benchmarks and examples. Never applied to the INTERFACE target:
# a consumer's warning policy is theirs (xtensor's global add_definitions is the anti-pattern).
function(posenc_target_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic)
  if(POSENC_WARNINGS_AS_ERRORS)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()

function(posenc_target_sanitize target)
  if(POSENC_SANITIZE)
    target_compile_options(${target} PRIVATE
      -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
    target_link_options(${target} PRIVATE -fsanitize=address,undefined)
  endif()
endfunction()
