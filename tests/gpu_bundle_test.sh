#!/usr/bin/env bash
# CTest's gpu_bundle (label bundle): the GPU bundle (scripts/gpu-bundle) made from this build is self-contained
# (DIR/run --check: ldd finds every library other than the NVIDIA ones and the C/C++ runtime in the bundle's lib/),
# at most 60 MiB, and its CPU run passes (DIR/run --cpu-only: a few of its CPU tests, which load every bundled
# library, and a 1-epoch seed workflow on the CPU).
# It bundles the build the suite runs in (no second build), packs fast (xz -1) and leaves Fashion-MNIST out (the
# CPU run then uses Debian's). Skipped (exit 77, "Not Run (Skipped)") when the build has no CUDA backend.
#   tests/gpu_bundle_test.sh SOURCE_DIR BUILD_DIR WORK_DIR
set -euo pipefail
[ $# -eq 3 ] || { echo "usage: $0 SOURCE_DIR BUILD_DIR WORK_DIR" >&2; exit 2; }
src=$1
build=$2
work=$3
if ! "$build/systolic" info | grep -q '^Build: .*CUDA on'; then
  echo "gpu_bundle: skipped: $build has no CUDA backend, and a GPU bundle is made of a CUDA build"
  exit 77
fi
rm -rf "$work"
mkdir -p "$work"
"$src/scripts/gpu-bundle" --build-dir "$build" --no-dataset --fast --jobs 2 "$work/bundle"
size=$(du -sb "$work/bundle" | cut -f1)
if [ "$size" -gt $((60 * 1048576)) ]; then
  echo "gpu_bundle: the bundle is $size bytes, over 60 MiB" >&2
  exit 1
fi
"$work/bundle/run" --check
# The CPU tests of the bundled programs run in the suite already: here a few that load every bundled library
# (oneDNN, HDF5 through the seed workflow, zlib, libcurl, libarchive, OpenSSL) are enough.
quick='^(Shape\.|Tensor\.|Random\.PhiloxKnownAnswer|CpuBackend\.OneDnnVersionAndIsa|EveryOp/CpuOps\.MatchFloat64/conv2d_forward( |$)'
quick+='|FashionMnist\.RealDataShapesClassesAndPixels|Mnist\.NpzInTheCacheAndDownloadWithWrongSha256'
quick+='|Cifar10Download\.DownloadVerifyExtractLoadThenCacheOnly)'
SYSTOLIC_BUNDLE_UNPACK="$work" "$work/bundle/run" --cpu-only --tests "$quick" --out "$work/results"
summary="$work/results/summary.txt"
grep -qE '^cpu-tests +pass .* ([0-9]+) tests: \1 passed, 0 failed, 0 skipped' "$summary" || {
  echo "gpu_bundle: the bundle's CPU tests did not run as selected:" >&2
  cat "$summary" >&2
  exit 1
}
