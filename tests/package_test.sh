#!/usr/bin/env bash
# package_test.sh BUILD_DIR WORK_DIR: `cpack -G DEB` in this build writes libsystolicX.Y (Depends naming oneDNN and
# HDF5, computed by dpkg-shlibdeps), libsystolic-dev (the headers, the CMake package, systolic.pc) and systolic (the
# command), each with its copyright file. Installing them is checked by hand (docs/packaging.md); this checks
# what CPack makes.
set -euo pipefail
build=$1 work=$2
rm -rf "$work" && mkdir -p "$work"
fail() { echo "package_test: $*" >&2; exit 1; }
(cd "$build" && cpack -G DEB -B "$work" >"$work/cpack.log" 2>&1) || { cat "$work/cpack.log"; fail "cpack -G DEB failed"; }
lib=$(ls "$work"/libsystolic0*.deb 2>/dev/null | head -1)
dev=$(ls "$work"/libsystolic-dev_*.deb 2>/dev/null | head -1)
cli=$(ls "$work"/systolic_*.deb 2>/dev/null | head -1)
[ -n "$lib" ] && [ -n "$dev" ] && [ -n "$cli" ] || fail "expected three packages, got: $(ls "$work")"
depends=$(dpkg-deb -f "$lib" Depends)
for want in libdnnl libhdf5 libc6; do
  [[ $depends == *$want* ]] || fail "$(basename "$lib") Depends lacks $want: $depends"
done
[[ $(dpkg-deb -f "$dev" Depends) == *libsystolic0* ]] || fail "libsystolic-dev does not depend on the library"
has() { dpkg-deb -c "$1" | awk '{print $6}' | grep -q -- "$2" || fail "$(basename "$1") lacks $2"; }
has "$lib" 'libsystolic\.so\.[0-9.]*$'
has "$lib" 'usr/share/doc/libsystolic0.*/copyright'
has "$dev" 'usr/include/systolic/c_api.h'
has "$dev" 'usr/include/systolic/version.h'
has "$dev" 'systolicConfig.cmake'
has "$dev" 'pkgconfig/systolic.pc'
has "$cli" 'usr/bin/systolic$'
has "$cli" 'usr/share/doc/systolic/copyright'
echo "package_test: OK: $(basename "$lib") $(basename "$dev") $(basename "$cli"); Depends: $depends"
rm -rf "$work"
