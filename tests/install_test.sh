#!/usr/bin/env bash
# install_test.sh SOURCE_DIR BUILD_DIR WORK_DIR: `cmake --install` of this build into a temporary prefix, then a
# separate project (examples/consumer) that finds it with find_package(systolic) and a plain C compile that
# finds it with pkg-config, both run on a real Keras file; their predictions must be Keras's (the committed
# fixture) and the installed command's. A broken install, config or C API fails here.
set -euo pipefail
src=$1 build=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
prefix=$work/prefix
fail() { echo "install_test: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$prefix" >/dev/null
libdir=$prefix/lib
[ -d "$libdir" ] || libdir=$(dirname "$(find "$prefix" -name 'libsystolic.*' | head -1)")
for f in include/systolic/systolic.h include/systolic/c_api.h bin/systolic share/doc/systolic/LICENSE \
         share/doc/systolic/cli.md; do
  [ -e "$prefix/$f" ] || fail "missing $f"
done
config=$(find "$prefix" -name systolicConfig.cmake | head -1)
[ -n "$config" ] || fail "no systolicConfig.cmake installed"
pc=$(find "$prefix" -name systolic.pc | head -1)
[ -n "$pc" ] || fail "no systolic.pc installed"
if [ -e "$libdir/libsystolic.so" ]; then
  soname=$(readelf -d "$libdir/libsystolic.so" | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')
  [ "$soname" = "libsystolic.so.0.1" ] || fail "SONAME is '$soname', expected libsystolic.so.0.1"
  [ -e "$libdir/libsystolic.so.0.1" ] || fail "no libsystolic.so.0.1 link"
fi

# The installed command runs (it finds its library beside it).
"$prefix/bin/systolic" info >/dev/null || fail "the installed systolic info failed"

# find_package from a separate project.
model=$src/tests/fixtures/keras/seed.keras3.full.h5
cmake -S "$src/examples/consumer" -B "$work/consumer" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release \
  >"$work/configure.log" 2>&1 || { cat "$work/configure.log"; fail "the consumer project does not configure"; }
cmake --build "$work/consumer" -j 2 >"$work/build.log" 2>&1 || { cat "$work/build.log"; fail "the consumer does not build"; }

# C API on Keras's inputs: Keras's own predictions (float32 text, 1e-5).
"$work/consumer/classify_c" "$model" "$src/tests/fixtures/keras/seed.inputs.bin" >"$work/c.txt"
od -An -v -f "$src/tests/fixtures/keras/seed.keras3.full.predictions.bin" | tr -s ' ' '\n' | sed '/^$/d' >"$work/keras.txt"
cut -d: -f2 "$work/c.txt" | tr -s ' ' '\n' | sed '/^$/d' >"$work/c_values.txt"
[ "$(wc -l <"$work/keras.txt")" -eq 40 ] || fail "the Keras fixture should hold 4 x 10 values"
paste "$work/keras.txt" "$work/c_values.txt" | awk '
  { d = $1 - $2; if (d < 0) d = -d; if (NF != 2 || d > 1e-5) { bad = 1; print "value " NR ": keras " $1 " c_api " $2 } }
  END { exit bad }' || fail "classify_c differs from Keras"

# pkg-config and a plain C11 compile give the same program.
PKG_CONFIG_PATH=$(dirname "$pc") cc -std=c11 -Wall -Werror "$src/examples/consumer/classify_c.c" -o "$work/classify_pc" \
  $(PKG_CONFIG_PATH=$(dirname "$pc") pkg-config --cflags --libs systolic) -Wl,-rpath,"$libdir" ||
  fail "pkg-config compile failed"
"$work/classify_pc" "$model" "$src/tests/fixtures/keras/seed.inputs.bin" | cmp - "$work/c.txt" ||
  fail "the pkg-config build predicts differently"

# The C++ consumer on an image agrees with the installed command.
if [ -d /usr/share/datasets/fashion-mnist ] || [ -d "${SYSTOLIC_HOME:-$HOME/.systolic}/datasets/fashion_mnist" ]; then
  "$prefix/bin/systolic" show --dataset fashion_mnist --index 3 --scale 1 -o "$work/img.png" >/dev/null
  got=$("$work/consumer/classify" "$model" "$work/img.png" 0.00392156862745098 | cut -d: -f2)
  want=$("$prefix/bin/systolic" predict --model "$model" --rescale 0.00392156862745098 --json "$work/img.png" |
         sed 's/.*"probabilities":\[\([^]]*\)\].*/\1/' | tr ',' ' ')
  paste <(echo "$got" | tr -s ' ' '\n' | sed '/^$/d') <(echo "$want" | tr -s ' ' '\n' | sed '/^$/d') | awk '
    { d = $1 - $2; if (d < 0) d = -d; if (NF != 2 || d > 1e-6) { bad = 1; print "class " NR-1 ": classify " $1 " systolic " $2 } }
    END { exit bad || NR != 10 }' || fail "classify differs from systolic predict"
else
  echo "install_test: Fashion-MNIST absent: the image check of the C++ consumer did not run" >&2
fi
rm -rf "$work"
echo "install_test: OK (prefix, find_package, pkg-config, C API = Keras to 1e-5)"
