#!/usr/bin/env bash
# The tour's picture: regenerate docs/tour.svg into a temporary directory,
# fail if the committed copy differs (the picture in the README must be what
# the example draws today), check its text (at least 12 px, inside the
# canvas), and render it to PNG with rsvg-convert so a picture that does not
# render fails here. The PNG is checked and thrown away; only the SVG is kept
# in the repository, because a PNG's bytes vary with the renderer's version.
set -euo pipefail
cd "$(dirname "$0")/../.."

if ! command -v rsvg-convert >/dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get -o DPkg::Lock::Timeout=600 update >/dev/null
    apt-get -o DPkg::Lock::Timeout=600 install -y --no-install-recommends \
        librsvg2-bin fonts-dejavu-core >/dev/null
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
svg=$work/tour.svg
png=$work/tour.png

cargo run --quiet --example tour -- "$svg" >"$work/table.txt"

if ! cmp -s docs/tour.svg "$svg"; then
    diff docs/tour.svg "$svg" | head -n 20 || true
    echo "FAIL: docs/tour.svg differs from what the example draws;"
    echo "      regenerate it with: cargo run --example tour -- docs/tour.svg"
    exit 1
fi

read -r width height < <(sed -n 's/^<svg width="\([0-9]*\)" height="\([0-9]*\)".*/\1 \2/p' "$svg")
[[ -n ${width:-} && -n ${height:-} ]] || { echo "FAIL: no <svg width height> in $svg"; exit 1; }

# Every text: at least 12 px, and its estimated extent inside the canvas.
# Widths are estimated generously (0.62 em a character, 0.68 in bold; DejaVu
# Sans averages under 0.6), so a label at an edge (a "16000" that reads
# "1600(") fails.
awk -v W="$width" -v H="$height" '
    function attr(name,   m) {
        if (match($0, name "=\"[^\"]*\"")) {
            m = substr($0, RSTART, RLENGTH); sub(/^[^"]*"/, "", m); sub(/"$/, "", m); return m
        }
        return ""
    }
    /^<text / { x = attr("x"); y = attr("y"); size = attr("font-size") + 0
        anchor = attr("text-anchor"); em = ($0 ~ /font-weight="bold"/) ? 0.68 : 0.62
        dy = attr("dy"); shift = (dy ~ /em$/) ? dy * size : dy * size / 2 # 1 ex ~ 0.5 em
        getline content; n++
        w = length(content) * size * em
        left = (anchor == "end") ? x - w : (anchor == "middle") ? x - w / 2 : x
        base = y + shift
        if (size < 12) { printf "FAIL: %s px text: %s\n", size, content; bad++ }
        if (left < 0 || left + w > W || base - 0.8 * size < 0 || base + 0.25 * size > H) {
            printf "FAIL: text may be clipped (x %s, y %s): %s\n", x, y, content; bad++
        }
    }
    END { if (n < 20) { print "FAIL: only " n " texts in the picture"; bad++ }; exit bad > 0 }
' "$svg"

rsvg-convert --format png --output "$png" "$svg"
# A PNG of the SVG's size, with more than a few bytes of content.
sig=$(od -An -tx1 -N8 "$png" | tr -d ' \n')
[[ $sig == 89504e470d0a1a0a ]] || { echo "FAIL: rsvg-convert did not write a PNG"; exit 1; }
read -r pw ph < <(od -An -tu1 -j16 -N8 "$png" |
    awk '{ print ($1 * 16777216 + $2 * 65536 + $3 * 256 + $4), ($5 * 16777216 + $6 * 65536 + $7 * 256 + $8) }')
bytes=$(wc -c <"$png")
if [[ $pw != "$width" || $ph != "$height" ]]; then
    echo "FAIL: the PNG is ${pw}x${ph}, the SVG ${width}x${height}"
    exit 1
fi
if ((bytes < 50000)); then
    echo "FAIL: the PNG is only $bytes bytes for ${width}x${height}: an empty picture?"
    exit 1
fi
echo "docs/tour.svg is current; rendered to a ${pw}x${ph} PNG of $bytes bytes"
