#!/usr/bin/env bash
# Makes the bundle the GPU check runs from (scripts/gpu-check.sh): the GPU
# machines have the NVIDIA driver and CUDA toolkit but none of kiln's Debian
# dependencies and no package registry, and only the working tree plus a few
# ignored folders (64 MiB in all) travel to them (DEVICE_NOTES, "The GPU
# machines kiln can be checked on"). So the test binaries and tools are
# built here, Release, and packed with every shared library they load that
# a base Debian/Ubuntu system lacks, into one zstd-compressed tarball.
#
#   scripts/gpu-bundle.sh [BINARY...]   (default: device_tests gpu_tests kiln-bench kiln-env)
#
# Each BINARY is a CMake target that lands in build/bin/; a missing one is an
# error. Writes, in the ignored folder gpu-bundle/:
#   kiln-gpu.tar.zst   kiln-gpu/bin/<binaries, stripped>, kiln-gpu/lib/<libkiln.so and the libraries
#                      ldd lists, glibc's and the C++ runtime's excepted>, kiln-gpu/MANIFEST
#   MANIFEST           the same manifest, readable without unpacking
#   zstd/              a zstd to unpack with where the machine has none (with its libraries)
# Never bundled: any CUDA library or the driver's (libcuda, libnvidia-*):
# the machine's own are found at run time. Over KILN_BUNDLE_LIMIT_MIB
# (default 60) is an error.
#
# KILN_BUNDLE_BUILD=1 (default) builds the binaries with scripts/setup.sh
# first; 0 packs what build/ holds.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

binaries=("$@")
if ((${#binaries[@]} == 0)); then binaries=(device_tests gpu_tests kiln-bench kiln-env); fi
build=build
out=gpu-bundle
limit_mib=${KILN_BUNDLE_LIMIT_MIB:-60}
carry_limit_mib=64 # what travels to the GPU machine: the working tree plus the bundle

die() {
  echo "gpu-bundle: error: $*" >&2
  exit 1
}

# glibc, libstdc++ and libgcc_s: on every Debian/Ubuntu (and newer there than
# here is fine: both stay backward compatible). The bundle's MANIFEST states
# the newest symbol versions the binaries need, and gpu-check.sh checks them.
base_libs='^(linux-vdso|linux-gate|ld-linux[-.a-z0-9_]*|libc|libm|libdl|libpthread|librt|libresolv|libutil|libanl|libstdc\+\+|libgcc_s)\.so'
# NVIDIA's libraries come from the GPU machine; one in ldd's output means a
# binary links a CUDA library, which kiln must not (tests/needed_libraries.sh).
cuda_libs='^lib(cuda|cudart|nvrtc|nvrtc-builtins|nvJitLink|cublas|cublasLt|cudnn[_a-z]*|nccl|nvidia-[-a-z]*|cufft|curand|cusparse|cusolver|nvToolsExt)\.so'

if [[ ${KILN_BUNDLE_BUILD:-1} != 0 ]]; then
  if [[ -n ${KILN_SANITIZE:-} ]]; then die "unset KILN_SANITIZE: the bundle is the Release build in build/"; fi
  scripts/setup.sh kiln # configures build/ (Release) and builds libkiln.so
  for b in "${binaries[@]}"; do
    ninja -C "$build" -t query "$b" >/dev/null 2>&1 \
      || die "$build/ has no target '$b' (is it written yet? name the binaries to bundle: $0 gpu_tests kiln-env ...)"
  done
  scripts/setup.sh "${binaries[@]}"
fi
grep -qs '^CMAKE_BUILD_TYPE:STRING=Release$' "$build/CMakeCache.txt" || die "$build/ is not a Release build"
grep -qs '^KILN_SANITIZE:STRING=$' "$build/CMakeCache.txt" || die "$build/ is built with sanitizers"
for b in "${binaries[@]}"; do
  [[ -x $build/bin/$b ]] || die "$build/bin/$b is missing (build it, or leave it out of the list)"
done
libkiln=$(readlink -f "$build/lib/libkiln.so")
[[ -f $libkiln ]] || die "$build/lib/libkiln.so is missing"

stage=$out/stage/kiln-gpu
rm -rf "$out/stage" "$out/kiln-gpu.tar.zst" "$out/MANIFEST" "$out/zstd"
mkdir -p "$stage/bin" "$stage/lib"

# The binaries, and libkiln.so under its soname, stripped (a Release build
# has no debug info, but symbol tables are still a few MB).
for b in "${binaries[@]}"; do
  cp "$build/bin/$b" "$stage/bin/$b"
  strip --strip-unneeded "$stage/bin/$b"
done
soname=$(readelf -d "$libkiln" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
cp "$libkiln" "$stage/lib/$soname"
strip --strip-unneeded "$stage/lib/$soname"

# Every library the binaries load, found through ldd (which follows needed
# libraries transitively), copied under the name the loader asks for.
# libkiln.so is resolved through build/ (the binaries' RUNPATH).
copy_libraries() { # into $2 the libraries $1 loads, bar the base ones
  local line name path
  while read -r line; do
    name=${line%% *}
    [[ $name == /* ]] && continue # the program interpreter, /lib64/ld-linux-x86-64.so.2
    [[ $name =~ $base_libs ]] && continue
    [[ $name =~ $cuda_libs ]] && die "$1 needs $name: CUDA libraries must be loaded at run time, never linked"
    [[ $name == "$soname" ]] && continue
    [[ $line == *"=> not found"* ]] && die "$1 needs $name, which is not found here"
    path=$(sed -n 's/.*=> \(\/[^ ]*\) (.*/\1/p' <<<"$line")
    [[ -n $path ]] || continue
    [[ -e $2/$name ]] || cp -L "$path" "$2/$name"
  done < <(ldd "$1" | sed 's/^[[:space:]]*//')
}
for b in "${binaries[@]}"; do copy_libraries "$build/bin/$b" "$stage/lib"; done

# The newest glibc and libstdc++ symbol versions anything in the bundle
# needs, for gpu-check.sh to compare with the machine's.
newest() { # the highest version of symbols tagged $1 (GLIBC, GLIBCXX) among the bundle's files
  for f in "$stage"/bin/* "$stage"/lib/*; do objdump -T "$f" 2>/dev/null; done \
    | grep -o "$1_[0-9][0-9.]*" | sed "s/^$1_//" | sort -uV | tail -1
}
{
  echo "kiln GPU bundle"
  echo "commit: $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':!gpu-bundle' 2>/dev/null || echo '-dirty')"
  echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(sed -n 's/^PRETTY_NAME="\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' /etc/os-release)"
  echo "compiler: $(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$build/CMakeCache.txt") $(c++ -dumpfullversion 2>/dev/null || true)"
  echo "build type: Release"
  echo "binaries: ${binaries[*]}"
  echo "needs glibc: $(newest GLIBC)"
  echo "needs libstdc++: GLIBCXX_$(newest GLIBCXX)"
  echo "files (bytes):"
  (cd "$stage" && find bin lib -type f -printf '  %p %s\n' | sort)
} >"$stage/MANIFEST"
cp "$stage/MANIFEST" "$out/MANIFEST"

echo "gpu-bundle: compressing $(du -sh "$stage" | cut -f1) with zstd -19"
tar -C "$out/stage" -cf - kiln-gpu | zstd -q -19 -T0 -o "$out/kiln-gpu.tar.zst"
rm -rf "$out/stage"

# A zstd for machines without one, and the libraries it loads (tar is on
# every system; zstd is not).
mkdir -p "$out/zstd/lib"
cp -L "$(command -v zstd)" "$out/zstd/zstd"
copy_libraries "$out/zstd/zstd" "$out/zstd/lib"

total=$(du -sb "$out" | cut -f1)
tree=$(git ls-files -co --exclude-standard -z | du -cb --files0-from=- 2>/dev/null | tail -1 | cut -f1)
mib() { echo "$(($1 / 1048576)).$(($1 % 1048576 * 10 / 1048576))"; }
echo "gpu-bundle: $out/ is $(mib "$total") MiB (limit ${limit_mib} MiB); with the working tree ($(mib "$tree") MiB) $(mib $((total + tree))) MiB of the ${carry_limit_mib} MiB that travel"
if ((total > limit_mib * 1048576)); then
  ls -lS "$out" >&2
  die "the bundle is $(mib "$total") MiB, over ${limit_mib} MiB: leave out a binary, or see MANIFEST for the largest libraries"
fi
if ((total + tree > carry_limit_mib * 1048576)); then
  die "the bundle and the working tree are $(mib $((total + tree))) MiB, over the ${carry_limit_mib} MiB that travel"
fi
echo "gpu-bundle: wrote $out/kiln-gpu.tar.zst ($(mib "$(stat -c %s "$out/kiln-gpu.tar.zst")") MiB): ${binaries[*]}"
