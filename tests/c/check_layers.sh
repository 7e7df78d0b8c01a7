#!/bin/sh
# Layers call downward only (shared/DESIGN.md): no object file of a layer
# may use a symbol defined in a layer above it. Top to bottom: ops,
# runtime, hlo, pjrt, common. Argument: the folder holding the library's
# object files (<build>/CMakeFiles/tpuc_objects.dir/src).
set -eu
dir=$1
order="ops runtime hlo pjrt common"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for l in $order; do
  [ -d "$dir/$l" ] || { echo "no object files for layer $l in $dir"; exit 1; }
  nm --defined-only "$dir/$l"/*.o | awk 'NF == 3 && $2 ~ /[TDBR]/ {print $3}' |
    sort -u >"$tmp/def.$l"
done
bad=0
above=""
for l in $order; do
  for u in $above; do
    for o in "$dir/$l"/*.o; do
      nm -u "$o" | awk '{print $2}' | sort -u >"$tmp/undef"
      for s in $(comm -12 "$tmp/undef" "$tmp/def.$u"); do
        echo "layer $l calls up into $u: $(basename "$o") uses $s"
        bad=1
      done
    done
  done
  above="$above $l"
done
[ $bad -eq 0 ] && echo "layers call downward only ($order)"
exit $bad
