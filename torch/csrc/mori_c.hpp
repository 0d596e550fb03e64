// mori_c.hpp - mori-symm's public C API as the C++ adapter includes it:
// the installed headers only (valid C++, and free of HIP and CUDA names).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>

#include "mori/shim.h"
#include "mori/store.h"
#include "mori/symm.h"
