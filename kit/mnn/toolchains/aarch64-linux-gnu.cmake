# CMake toolchain file of the MobileKernelBench kit: 64-bit ARM Linux with Debian's cross compilers
# (apt-get install g++-aarch64-linux-gnu), their sysroot under /usr/aarch64-linux-gnu.
# The kit passes it as -DCMAKE_TOOLCHAIN_FILE for cross builds (kit/mnn/toolchain.py).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)

# headers and libraries from the target's sysroot only; programs (protoc, python) from the build host
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
