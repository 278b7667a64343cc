#!/usr/bin/env bash
# Checks that no CUDA library is a needed library (DT_NEEDED) of libkiln.so:
# kiln loads NVRTC (and, later, the CUDA driver, cuBLAS, NVML) at run time,
# so that it starts on a machine without them (Note [NVRTC is loaded at run
# time] in codegen/nvrtc_compiler.cpp). Usage: needed_libraries.sh LIBKILN
set -euo pipefail
lib=$1
needed=$(readelf -d "$lib" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
if [[ -z $needed ]]; then
  echo "no needed libraries read from $lib: is it a shared library?" >&2
  exit 1
fi
echo "needed libraries of $lib:"
echo "$needed" | sed 's/^/  /'
bad=$(echo "$needed" | grep -E '^lib(cuda|cudart|nvrtc|nvrtc-builtins|cublas|cublasLt|cudnn|nccl|nvidia-ml|nvJitLink)\.so' || true)
if [[ -n $bad ]]; then
  echo "libkiln.so must not need CUDA libraries (load them at run time instead):" >&2
  echo "$bad" | sed 's/^/  /' >&2
  exit 1
fi
