#!/usr/bin/env bash
# scripts/check-layers on a copy of the tree: the checkout passes; each kind of break planted in the copy (an
# include of a floor above, one of a floor beside, one of a private floor, a file in no floor) fails it, named.
#   tests/check_layers_test.sh SOURCE_DIR
set -euo pipefail
src=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/docs" "$work/scripts"
cp "$src/docs/architecture.md" "$work/docs/"
cp "$src/scripts/check-layers" "$work/scripts/"
cp -r "$src/src" "$work/src"

"$work/scripts/check-layers" "$work" || { echo "FAIL: the checkout breaks its floors (above)"; exit 1; }

# expect_break DESCRIPTION PATTERN: check-layers must fail, and its report must match PATTERN.
expect_break() {
  local out rc=0
  out=$("$work/scripts/check-layers" "$work" 2>&1) || rc=$?
  if [ "$rc" -ne 1 ] || ! grep -q -- "$2" <<<"$out"; then
    echo "FAIL: $1: check-layers exited $rc and said:"
    echo "$out"
    exit 1
  fi
  echo "ok: $1: $(grep -- "$2" <<<"$out" | head -1)"
}

cp "$work/src/io/files.cc" "$work/files.cc.orig"
echo '#include "model/model_state.h"' >>"$work/src/io/files.cc"
expect_break "an include of a floor above" 'src/io/files.cc:[0-9]*: includes "model/model_state.h": floor .model. (level 8) is above .io. (level 2)'
cp "$work/files.cc.orig" "$work/src/io/files.cc"

cp "$work/src/optimizers/optimizer.cc" "$work/optimizer.cc.orig"
echo '#include "layers/config.h"' >>"$work/src/optimizers/optimizer.cc"
expect_break "an include of a floor beside" 'src/optimizers/optimizer.cc:[0-9]*: includes "layers/config.h": floor .layers. is beside .optimizers.'
cp "$work/optimizer.cc.orig" "$work/src/optimizers/optimizer.cc"

cp "$work/src/layers/dense.cc" "$work/dense.cc.orig"
echo '#include "ops/cpu/cpu_backend.h"' >>"$work/src/layers/dense.cc"
expect_break "an include of a private floor" 'src/layers/dense.cc:[0-9]*: includes "ops/cpu/cpu_backend.h": floor .cpu backend. is private to ops'
cp "$work/dense.cc.orig" "$work/src/layers/dense.cc"

mkdir -p "$work/src/newfloor"
echo '// nothing' >"$work/src/newfloor/thing.cc"
expect_break "a file in no floor" 'src/newfloor/thing.cc: in no floor'
rm -r "$work/src/newfloor"

"$work/scripts/check-layers" "$work" || { echo "FAIL: the restored copy should pass again"; exit 1; }
echo "check-layers: passes on the checkout, fails on each planted break"
