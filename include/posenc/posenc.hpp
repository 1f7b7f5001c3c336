#pragma once
/// \file posenc/posenc.hpp
/// Umbrella header: every public posenc header, nothing else.

#include "posenc/error.hpp"
#include "posenc/learned.hpp"
#include "posenc/sinusoidal.hpp"
#include "posenc/tensor.hpp"
#include "posenc/version.hpp"
