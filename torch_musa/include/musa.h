// <musa.h>: the runtime for extension code (the driver API is not offered separately).
#pragma once
#include "musa_runtime.h"
