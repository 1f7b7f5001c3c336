#pragma once
/// \file posenc/version.hpp
/// Version of the posenc headers; CMake reads the numbers from here.

#define POSENC_VERSION_MAJOR 0
#define POSENC_VERSION_MINOR 1
#define POSENC_VERSION_PATCH 0

#define POSENC_VERSION_STRINGIFY_(x) #x
#define POSENC_VERSION_STRINGIFY(x) POSENC_VERSION_STRINGIFY_(x)
/// "major.minor.patch"
#define POSENC_VERSION                                                            \
  POSENC_VERSION_STRINGIFY(POSENC_VERSION_MAJOR)                                  \
  "." POSENC_VERSION_STRINGIFY(POSENC_VERSION_MINOR) "." POSENC_VERSION_STRINGIFY( \
      POSENC_VERSION_PATCH)
/// One integer that orders versions: major * 10000 + minor * 100 + patch.
#define POSENC_VERSION_NUMBER \
  (POSENC_VERSION_MAJOR * 10000 + POSENC_VERSION_MINOR * 100 + POSENC_VERSION_PATCH)
