#!/bin/bash
# docs/ARCHITECTURE.md's dependency arrows against the CMake links: every product target
# (add_library/add_executable outside tests/) and the project targets it names in
# target_link_libraries, PUBLIC and PRIVATE alike, composer::warnings left out. The arrows are
# the lines "TARGET -> LINKED, LINKED" in the first fenced block under "## Dependency
# direction"; names drop the composer:: and composer_ prefixes (composer::db is db).
# Usage: architecture_arrows.sh SOURCE_DIR
set -euo pipefail
src=${1:?usage: architecture_arrows.sh SOURCE_DIR}
doc=$src/docs/ARCHITECTURE.md
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The product CMake files, comments removed, each as one line.
mapfile -t files < <(cd "$src" && find . -name CMakeLists.txt -not -path './tests/*' \
  -not -path './build*' -not -path './obj-*' -not -path './debian/*' | sort)
for f in "${files[@]}"; do
  sed -E 's/#.*$//' "$src/$f" | tr '\n' ' '
  echo
done >"$tmp/cmake"

# Every target the project defines, by its short name.
declare -A defined=()
while read -r t; do
  defined[$t]=1
done < <(grep -oE '(add_library|add_executable)\( *[A-Za-z0-9_.:-]+' "$tmp/cmake" |
  sed -E 's/.*\( *//; s/^composer(::|_)//')
unset 'defined[warnings]'

# What each links: "TARGET -> a, b" with the linked names sorted; a target that links nothing
# of the project still has its line.
declare -A links=()
for t in "${!defined[@]}"; do links[$t]=; done
while read -r -a words; do
  target=${words[0]#composer::}
  target=${target#composer_}
  [[ -n ${defined[$target]:-} ]] || continue
  for w in "${words[@]:1}"; do
    d=${w#composer::}
    d=${d#composer_}
    if [[ -n ${defined[$d]:-} ]]; then links[$target]+=" $d"; fi
  done
done < <(grep -oE 'target_link_libraries\([^)]*\)' "$tmp/cmake" |
  sed -E 's/^target_link_libraries\(|\)$//g')
for t in "${!links[@]}"; do
  deps=$(tr ' ' '\n' <<<"${links[$t]}" | sed '/^$/d' | sort -u | paste -sd, - | sed 's/,/, /g')
  echo "$t -> $deps" | sed -E 's/ -> $/ ->/'
done | sort >"$tmp/links"

# The arrows as the document draws them, spacing made plain and the linked names sorted.
awk '/^## Dependency direction/ {in_section = 1; next}
     in_section && /^## / {exit}
     in_section && /^```/ {if (in_block) exit; in_block = 1; next}
     in_block && / -> | ->$/ {print}' "$doc" | while read -r line; do
  target=$(sed -E 's/ *->.*//' <<<"$line")
  deps=$(sed -E 's/^[^>]*->//' <<<"$line" | tr ',' '\n' | sed -E 's/^ +| +$//g' | sed '/^$/d' |
    sort -u | paste -sd, - | sed 's/,/, /g')
  echo "$target -> $deps" | sed -E 's/ -> $/ ->/'
done | sort >"$tmp/doc"

if [[ ! -s $tmp/doc ]]; then
  echo "architecture_arrows: no 'TARGET -> LINKED' lines under '## Dependency direction' in $doc" >&2
  exit 1
fi
if ! diff -u --label "docs/ARCHITECTURE.md" --label "CMake target_link_libraries" \
  "$tmp/doc" "$tmp/links"; then
  echo "architecture_arrows: docs/ARCHITECTURE.md's arrows differ from the CMake links" \
    "(lines starting with + are what CMake links; mend the document's block)" >&2
  exit 1
fi
echo "architecture_arrows: $(wc -l <"$tmp/links") targets, arrows match the CMake links"
