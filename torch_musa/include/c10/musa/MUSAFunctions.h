// The spelling musa-converter gives CUDA code's include: the same as "torch_musa/csrc/core/MUSAStream.h".
#pragma once
#include "torch_musa/csrc/core/MUSAStream.h"
