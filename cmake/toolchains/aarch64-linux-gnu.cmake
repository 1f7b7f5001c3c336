# Cross-build for 64-bit Arm Linux with Debian's cross compiler, tests run under qemu-user:
#   apt-get install g++-aarch64-linux-gnu qemu-user
#   cmake --workflow --preset aarch64
# posenc's hand-written SIMD is x86 only; on Arm the portable loops and Eigen's NEON packets
# run, long double is IEEE binary128 and Eigen::half is the hardware __fp16, so the suite checks
# code paths an x86 build never compiles.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64 -L /usr/aarch64-linux-gnu)

# Libraries and programs come from the target's root; Eigen, Catch2 and nlohmann_json are
# header-only packages found on the build machine.
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
