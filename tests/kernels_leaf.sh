#!/bin/sh
# kernels_leaf.sh: kernels/ is a leaf of the include graph. Every #include in a file under kernels/
# names a header of kernels/ (from kernels/ or from the including file's directory) or a system
# header, never one of harness/; the one exception is util/err.h, the project's error type, which
# itself includes no project header.
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/tests/tap.shlib"
cd "$root" || exit 2

allowed=util/err.h
files=$(find kernels -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' -o -name '*.def' \) | sort)
ok $([ -n "$files" ] && echo 0 || echo 1) "kernels/ has source files"
for f in $files; do
    bad=$(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*\([<"]\)\([^>"]*\)[>"].*/\1 \2/p' "$f" |
        while read -r quote inc; do
            if [ "$quote" = '"' ] && { [ -f "kernels/$inc" ] || [ -f "$(dirname "$f")/$inc" ]; }; then
                continue
            fi
            if [ "$inc" = "$allowed" ]; then
                continue
            fi
            # a quoted header not in kernels/, or a system-style include that harness/ would answer
            if [ "$quote" = '"' ] || [ -e "harness/$inc" ]; then
                echo "$f:$(grep -n "include[[:space:]]*[<\"]$inc[>\"]" "$f" | head -n 1 | cut -d: -f1): $inc"
            fi
        done | tr '\n' ' ' | sed 's/ $//')
    ok $([ -z "$bad" ] && echo 0 || echo 1) "$f includes only kernels/ and system headers${bad:+: $bad}"
done
ok $(grep -q '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "harness/$allowed" && echo 1 || echo 0) \
    "harness/$allowed, the one harness header kernels/ may include, includes no project header"
done_testing
