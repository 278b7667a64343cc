#!/usr/bin/env bash
# The install test: installs kiln from the build tree into a fresh prefix,
# builds examples/ against that prefix as a user would (find_package(kiln),
# kiln::kiln), runs the quickstart and checks that compiled equals eager.
# It also checks that README.md shows the quickstart as it is.
#
#   install_test.sh SOURCE_DIR BUILD_DIR [CMAKE]
set -euo pipefail
src=$(cd "$1" && pwd)
build=$(cd "$2" && pwd)
cmake=${3:-cmake}
work=$build/tests/install
prefix=$work/prefix
examples=$work/examples-build

fail() {
  echo "install test: FAILED: $*" >&2
  exit 1
}
step() { echo "== install test: $*"; }

step "README.md shows examples/quickstart.cpp as it is"
# shellcheck disable=SC2016  # $ ends a regex here
# The first ```cpp block of the README is the quickstart.
sed -n '/^```cpp$/,/^```$/{p;/^```$/q}' "$src/README.md" | sed '1d;$d' | diff -u - "$src/examples/quickstart.cpp" ||
  fail "the C++ example in README.md differs from examples/quickstart.cpp"

rm -rf "$prefix" "$examples"
mkdir -p "$work"

step "cmake --install $build --prefix $prefix"
"$cmake" --install "$build" --prefix "$prefix" >"$work/install.log" || {
  cat "$work/install.log"
  fail "cmake --install"
}

step "checking the installed package"
for f in lib/cmake/kiln/kilnConfig.cmake lib/cmake/kiln/kilnConfigVersion.cmake lib/cmake/kiln/kilnTargets.cmake \
  include/kiln/frontend/kiln.h include/kiln/ir/Ops.def include/kiln/runtime/runtime.h include/kiln/passes/passes.h \
  include/kiln/codegen/codegen.h; do
  [[ -e $prefix/$f ]] || fail "$f is not installed"
done
lib=$prefix/lib/libkiln.so
[[ -e $lib ]] || fail "lib/libkiln.so is not installed"
# The installed package must not point back into the source or build tree.
if grep -rlF -e "$src/" -e "$build/" "$prefix/lib/cmake/kiln"; then
  fail "the installed CMake package refers to the source or build tree"
fi
# Every library libkiln.so needs must load from where it is installed.
if ldd "$lib" | grep 'not found'; then
  fail "$lib: libraries not found at run time"
fi

step "configuring examples/ against $prefix"
"$cmake" -G Ninja -S "$src/examples" -B "$examples" -DCMAKE_BUILD_TYPE=Release \
  -Dkiln_DIR="$prefix/lib/cmake/kiln" || fail "configuring examples/"

step "building examples/"
"$cmake" --build "$examples" || fail "building examples/"

step "running quickstart"
rc=0
out=$("$examples/quickstart") || rc=$?
echo "$out"
((rc == 0)) || fail "quickstart exited with status $rc"
grep -qx 'compiled == eager: yes' <<<"$out" || fail "quickstart did not report that compiled equals eager"
echo "install test: passed"
