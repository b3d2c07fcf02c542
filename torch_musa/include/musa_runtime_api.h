#pragma once
#include "musa_runtime.h"
