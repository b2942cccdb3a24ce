/* The CUDA driver API, loaded with dlopen("libcuda.so.1") and resolved via
 * cuGetProcAddress: libtk never links libcuda, so it starts on machines
 * without a driver. <cuda.h> is used for types and enums only. */
#ifndef TK_JIT_CUDA_H
#define TK_JIT_CUDA_H

#include <cuda.h>
#include <stdatomic.h>
#include <stddef.h>

#include "ir/diag.h"
#include "tk/tk.h"

/* Our own prototypes (cuda.h's names are macros for versioned symbols). */
typedef CUresult (*tk_cuInit_fn)(unsigned int);
typedef CUresult (*tk_cuDriverGetVersion_fn)(int *);
typedef CUresult (*tk_cuDeviceGetCount_fn)(int *);
typedef CUresult (*tk_cuDeviceGet_fn)(CUdevice *, int);
typedef CUresult (*tk_cuDeviceGetAttribute_fn)(int *, CUdevice_attribute, CUdevice);
typedef CUresult (*tk_cuDevicePrimaryCtxRetain_fn)(CUcontext *, CUdevice);
typedef CUresult (*tk_cuDevicePrimaryCtxRelease_fn)(CUdevice);
typedef CUresult (*tk_cuCtxSetCurrent_fn)(CUcontext);
typedef CUresult (*tk_cuCtxSynchronize_fn)(void);
typedef CUresult (*tk_cuMemAlloc_fn)(CUdeviceptr *, size_t);
typedef CUresult (*tk_cuMemFree_fn)(CUdeviceptr);
typedef CUresult (*tk_cuMemcpyHtoD_fn)(CUdeviceptr, const void *, size_t);
typedef CUresult (*tk_cuMemcpyDtoH_fn)(void *, CUdeviceptr, size_t);
typedef CUresult (*tk_cuMemsetD8_fn)(CUdeviceptr, unsigned char, size_t);
typedef CUresult (*tk_cuLinkCreate_fn)(unsigned int, CUjit_option *, void **, CUlinkState *);
typedef CUresult (*tk_cuLinkAddData_fn)(CUlinkState, CUjitInputType, void *, size_t, const char *,
                                        unsigned int, CUjit_option *, void **);
typedef CUresult (*tk_cuLinkComplete_fn)(CUlinkState, void **, size_t *);
typedef CUresult (*tk_cuLinkDestroy_fn)(CUlinkState);
typedef CUresult (*tk_cuModuleLoadData_fn)(CUmodule *, const void *);
typedef CUresult (*tk_cuModuleLoadDataEx_fn)(CUmodule *, const void *, unsigned int, CUjit_option *,
                                             void **);
typedef CUresult (*tk_cuModuleUnload_fn)(CUmodule);
typedef CUresult (*tk_cuModuleGetFunction_fn)(CUfunction *, CUmodule, const char *);
typedef CUresult (*tk_cuFuncSetAttribute_fn)(CUfunction, CUfunction_attribute, int);
typedef CUresult (*tk_cuOccupancyMaxActiveBlocksPerMultiprocessor_fn)(int *, CUfunction, int,
                                                                      size_t);
typedef CUresult (*tk_cuOccupancyMaxActiveClusters_fn)(int *, CUfunction, const CUlaunchConfig *);
typedef CUresult (*tk_cuLaunchKernel_fn)(CUfunction, unsigned, unsigned, unsigned, unsigned,
                                         unsigned, unsigned, unsigned, CUstream, void **, void **);
typedef CUresult (*tk_cuLaunchKernelEx_fn)(const CUlaunchConfig *, CUfunction, void **, void **);
typedef CUresult (*tk_cuGetErrorString_fn)(CUresult, const char **);
typedef CUresult (*tk_cuTensorMapEncodeTiled_fn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t,
                                                 void *, const cuuint64_t *, const cuuint64_t *,
                                                 const cuuint32_t *, const cuuint32_t *,
                                                 CUtensorMapInterleave, CUtensorMapSwizzle,
                                                 CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

/* The driver table plus the device state (one device, its primary context:
 * the one the CUDA runtime uses too, so NCCL and the like share it). It is
 * refcounted: the JIT state holds one reference and every program holding a
 * module another, so a program can be released after its context is gone. */
typedef struct tk_cuda {
    atomic_int refs;
    void *dl;
    int ordinal; /* the driver's device number (tk_gpu_set_device)  */
    CUdevice dev;
    CUcontext pctx; /* retained primary context                     */
    int cc_major, cc_minor;
    int driver_version; /* e.g. 12080                                    */
    int max_smem_optin; /* per-block dynamic shared memory limit         */
    int sm_count;       /* streaming multiprocessors                     */
    char arch[16];      /* "sm_90a", "sm_86", ...                        */

    tk_cuInit_fn cuInit;
    tk_cuDriverGetVersion_fn cuDriverGetVersion;
    tk_cuDeviceGetCount_fn cuDeviceGetCount;
    tk_cuDeviceGet_fn cuDeviceGet;
    tk_cuDeviceGetAttribute_fn cuDeviceGetAttribute;
    tk_cuDevicePrimaryCtxRetain_fn cuDevicePrimaryCtxRetain;
    tk_cuDevicePrimaryCtxRelease_fn cuDevicePrimaryCtxRelease;
    tk_cuCtxSetCurrent_fn cuCtxSetCurrent;
    tk_cuCtxSynchronize_fn cuCtxSynchronize;
    tk_cuMemAlloc_fn cuMemAlloc;
    tk_cuMemFree_fn cuMemFree;
    tk_cuMemcpyHtoD_fn cuMemcpyHtoD;
    tk_cuMemcpyDtoH_fn cuMemcpyDtoH;
    tk_cuMemsetD8_fn cuMemsetD8;
    tk_cuLinkCreate_fn cuLinkCreate;
    tk_cuLinkAddData_fn cuLinkAddData;
    tk_cuLinkComplete_fn cuLinkComplete;
    tk_cuLinkDestroy_fn cuLinkDestroy;
    tk_cuModuleLoadData_fn cuModuleLoadData;
    tk_cuModuleLoadDataEx_fn cuModuleLoadDataEx;
    tk_cuModuleUnload_fn cuModuleUnload;
    tk_cuModuleGetFunction_fn cuModuleGetFunction;
    tk_cuFuncSetAttribute_fn cuFuncSetAttribute;
    tk_cuOccupancyMaxActiveBlocksPerMultiprocessor_fn cuOccupancyMaxActiveBlocksPerMultiprocessor;
    tk_cuOccupancyMaxActiveClusters_fn cuOccupancyMaxActiveClusters;
    tk_cuLaunchKernel_fn cuLaunchKernel;
    tk_cuLaunchKernelEx_fn cuLaunchKernelEx;
    tk_cuGetErrorString_fn cuGetErrorString;
    tk_cuTensorMapEncodeTiled_fn cuTensorMapEncodeTiled;
} tk_cuda;

/* Loads the driver, initializes it and retains the primary context of device
 * `ordinal` (>= 0). TK_ERR_NO_DRIVER (no libcuda.so.1 / no cuGetProcAddress),
 * TK_ERR_INVALID_ARG (no such device: the message says how many there are)
 * or TK_ERR_CUDA. */
tk_status tk_cuda_open(tk_cuda **out, int ordinal, tk_diag *dg);
tk_cuda *tk_cuda_ref(tk_cuda *cu);
/* Drops a reference; the last releases the context and dlcloses. NULL-safe. */
void tk_cuda_unref(tk_cuda *cu);
/* Turns a failed call into TK_ERR_CUDA: "<call>: <cuGetErrorString> (code)". */
tk_status tk_cuda_check(const tk_cuda *cu, CUresult r, const char *call, tk_diag *dg);
/* Makes the primary context current on the calling thread (cheap; done by
 * every entry point because CUDA's current context is per thread). */
tk_status tk_cuda_enter(const tk_cuda *cu, tk_diag *dg);
/* Target name for a compute capability: 9.0 -> "sm_90a", 8.6 -> "sm_86". */
void tk_cuda_arch_name(int major, int minor, char *buf, size_t n);

#endif
