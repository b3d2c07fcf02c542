// The cuda driver's runtime for extension code: musa memory is CUDA memory and musa
// streams are CUDA streams, so the musa names are CUDA's.
#pragma once

#include <cuda_runtime.h>

#define TORCH_MUSA_EXT_CUDA 1

using musaError_t = cudaError_t;
using musaStream_t = cudaStream_t;
using musaEvent_t = cudaEvent_t;
using musaDeviceProp = cudaDeviceProp;
using musaMemcpyKind = cudaMemcpyKind;
using musaFuncAttribute = cudaFuncAttribute;

#define musaSuccess cudaSuccess
#define musaErrorInvalidValue cudaErrorInvalidValue
#define musaErrorMemoryAllocation cudaErrorMemoryAllocation
#define musaErrorInvalidConfiguration cudaErrorInvalidConfiguration
#define musaErrorIllegalAddress cudaErrorIllegalAddress
#define musaErrorLaunchFailure cudaErrorLaunchFailure
#define musaErrorNotReady cudaErrorNotReady
#define musaErrorNotSupported cudaErrorNotSupported
#define musaErrorInvalidDevice cudaErrorInvalidDevice
#define musaMemcpyHostToHost cudaMemcpyHostToHost
#define musaMemcpyHostToDevice cudaMemcpyHostToDevice
#define musaMemcpyDeviceToHost cudaMemcpyDeviceToHost
#define musaMemcpyDeviceToDevice cudaMemcpyDeviceToDevice
#define musaMemcpyDefault cudaMemcpyDefault
#define musaStreamDefault cudaStreamDefault
#define musaStreamNonBlocking cudaStreamNonBlocking
#define musaEventDefault cudaEventDefault
#define musaEventDisableTiming cudaEventDisableTiming
#define musaFuncAttributeMaxDynamicSharedMemorySize cudaFuncAttributeMaxDynamicSharedMemorySize

#define musaGetLastError cudaGetLastError
#define musaPeekAtLastError cudaPeekAtLastError
#define musaGetErrorString cudaGetErrorString
#define musaGetErrorName cudaGetErrorName
#define musaGetDevice cudaGetDevice
#define musaSetDevice cudaSetDevice
#define musaGetDeviceCount cudaGetDeviceCount
#define musaGetDeviceProperties cudaGetDeviceProperties
#define musaDeviceSynchronize cudaDeviceSynchronize
#define musaMalloc cudaMalloc
#define musaFree cudaFree
#define musaMemcpy cudaMemcpy
#define musaMemcpyAsync cudaMemcpyAsync
#define musaMemset cudaMemset
#define musaMemsetAsync cudaMemsetAsync
#define musaStreamSynchronize cudaStreamSynchronize
#define musaStreamWaitEvent cudaStreamWaitEvent
#define musaStreamQuery cudaStreamQuery
#define musaEventCreate cudaEventCreate
#define musaEventCreateWithFlags cudaEventCreateWithFlags
#define musaEventDestroy cudaEventDestroy
#define musaEventRecord cudaEventRecord
#define musaEventSynchronize cudaEventSynchronize
#define musaEventQuery cudaEventQuery
#define musaEventElapsedTime cudaEventElapsedTime
#define musaFuncSetAttribute cudaFuncSetAttribute
#define musaLaunchHostFunc cudaLaunchHostFunc

// What CUDA calls the last error's detail: its error string.
inline const char* musaGetLastErrorMessage() { return ""; }
