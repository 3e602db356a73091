#!/usr/bin/env bash
# Renders every SVG chart the project draws with headless Chromium (Debian's chromium) into a
# PNG of the chart's own size and checks that the picture is not blank: it must have contrast
# (the grey levels' standard deviation) and no one colour may cover nearly all of it. The
# charts: composerd's utilisation report (chart_samples) and composerctl simulate's comparison
# on the Philly trace. Exits 77 (skipped) where chromium or Python's PIL is missing.
# Usage: check_chart_render.sh CHART_SAMPLES COMPOSERCTL TRACE CLUSTER...
set -euo pipefail
samples=$1 composerctl=$2 trace=$3
shift 3
chromium=$(command -v chromium || true)
if [[ -z $chromium ]] || ! /usr/bin/python3 -c 'import PIL' 2>/dev/null; then
  echo "chart render: skipped: needs Debian's chromium and python3-pil" >&2
  exit 77
fi
dir=$(mktemp -d /tmp/composer-charts.XXXXXX)
trap 'rm -rf "$dir"' EXIT
"$samples" "$dir"
"$composerctl" simulate --trace "$trace" --svg "$dir/simulate" compare "$@" >/dev/null
n=0
for svg in "$dir"/*.svg; do
  size=$(grep -o -m1 '<svg [^>]*' "$svg" | sed -nE 's/.* width="([0-9]+)" height="([0-9]+)".*/\1,\2/p')
  [[ -n $size ]] || { echo "chart render: $svg has no width and height" >&2; exit 1; }
  png=${svg%.svg}.png
  # Chromium's headless screenshot of the file itself, in a profile of its own.
  timeout 120 "$chromium" --headless --no-sandbox --disable-gpu --hide-scrollbars \
    --user-data-dir="$dir/profile" --window-size="$size" --screenshot="$png" "file://$svg" \
    >"$dir/chromium.log" 2>&1 || { cat "$dir/chromium.log" >&2; exit 1; }
  /usr/bin/python3 - "$png" "$(basename "$svg")" <<'PY'
import sys
from PIL import Image, ImageStat

path, name = sys.argv[1], sys.argv[2]
img = Image.open(path).convert("RGB")
w, h = img.size
grey = ImageStat.Stat(img.convert("L"))
colours = img.getcolors(maxcolors=w * h)
top = max(count for count, _ in colours) / (w * h)
print(f"chart render: {name}: {w}x{h}, grey stddev {grey.stddev[0]:.1f}, "
      f"{len(colours)} colours, the commonest covers {top:.1%}")
if grey.stddev[0] < 20 or top > 0.97 or len(colours) < 8:
    sys.exit(f"chart render: {name} renders blank or nearly so")
PY
  n=$((n + 1))
done
((n == 2 + $#)) || { echo "chart render: $n charts rendered, expected $((2 + $#))" >&2; exit 1; }
echo "chart render: all $n charts render with content"
