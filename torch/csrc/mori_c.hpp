// mori_c.hpp - mori-symm's C API as the C++ adapter includes it (the C
// headers are valid C++; their ABI checks use static_assert there).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <sys/socket.h>
#include <sys/types.h>

#include "mori/hip_shim.h"
#include "mori/store.h"
#include "mori/symm.h"
