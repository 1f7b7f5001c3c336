#!/usr/bin/env bash
# svg_render_test.sh <file.svg> [out.png]
# Opens an SVG written by rope-inspect in headless Chromium, screenshots it, and checks the PNG
# is a real picture: a valid PNG of the window size, larger than a blank page compresses to,
# and (when python3 is present) with enough non-white pixels and several distinct colours.
# Exit 0 = rendered, 1 = failed, 77 = skipped (no chromium; CTest SKIP_RETURN_CODE).
set -euo pipefail

svg=${1:?usage: svg_render_test.sh file.svg [out.png]}
png=${2:-$(mktemp --suffix=.png)}

browser=""
for candidate in /usr/bin/chromium /usr/bin/chromium-browser /usr/bin/google-chrome; do
  if [[ -x $candidate ]]; then browser=$candidate; break; fi
done
if [[ -z $browser ]]; then
  echo "svg_render_test: no chromium installed (apt-get install chromium); skipping"
  exit 77
fi
[[ -s $svg ]] || { echo "svg_render_test: $svg missing or empty"; exit 1; }

profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
rm -f "$png"
# Flags: no sandbox (CI containers run as root), no network or update traffic, a throw-away
# profile so parallel runs do not share state.
timeout 90 "$browser" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
  --disable-background-networking --disable-component-update --disable-sync \
  --user-data-dir="$profile" --screenshot="$png" --window-size=900,600 \
  "file://$(readlink -f "$svg")" >/dev/null 2>&1 || true

[[ -s $png ]] || { echo "svg_render_test: chromium wrote no screenshot"; exit 1; }
# PNG signature and IHDR size (bytes 16..23: width, height big-endian).
sig=$(head -c 8 "$png" | od -An -tx1 | tr -d ' \n')
[[ $sig == 89504e470d0a1a0a ]] || { echo "svg_render_test: $png is not a PNG"; exit 1; }
w=$((16#$(dd if="$png" bs=1 skip=16 count=4 2>/dev/null | od -An -tx1 | tr -d ' \n')))
h=$((16#$(dd if="$png" bs=1 skip=20 count=4 2>/dev/null | od -An -tx1 | tr -d ' \n')))
size=$(stat -c %s "$png")
echo "svg_render_test: $png ${w}x${h}, $size bytes"
[[ $w -ge 600 && $h -ge 400 ]] || { echo "svg_render_test: screenshot too small"; exit 1; }
# A blank 900x600 page compresses to a few kB; the plot has text, lines and markers.
[[ $size -gt 8000 ]] || { echo "svg_render_test: screenshot looks blank ($size bytes)"; exit 1; }

if command -v python3 >/dev/null; then
  python3 - "$png" <<'EOF'
import struct, sys, zlib
data = open(sys.argv[1], "rb").read()
pos, idat, w, h, ctype = 8, b"", 0, 0, 0
while pos < len(data):
    n, kind = struct.unpack(">I4s", data[pos:pos + 8])
    body = data[pos + 8:pos + 8 + n]
    if kind == b"IHDR":
        w, h, depth, ctype = struct.unpack(">IIBB", body[:10])
    elif kind == b"IDAT":
        idat += body
    pos += 12 + n
bpp = {2: 3, 6: 4}.get(ctype)
if bpp is None:
    print("svg_render_test: colour type", ctype, "not checked"); sys.exit(0)
raw, stride = zlib.decompress(idat), w * bpp
prev, rows, i = bytearray(stride), [], 0
for _ in range(h):
    f, line = raw[i], bytearray(raw[i + 1:i + 1 + stride]); i += 1 + stride
    for x in range(stride):
        a = line[x - bpp] if x >= bpp else 0
        b, c = prev[x], (prev[x - bpp] if x >= bpp else 0)
        if f == 1: line[x] = (line[x] + a) & 255
        elif f == 2: line[x] = (line[x] + b) & 255
        elif f == 3: line[x] = (line[x] + (a + b) // 2) & 255
        elif f == 4:
            p = a + b - c; pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    rows.append(bytes(line)); prev = line
ink, colours = 0, set()
for r in rows:
    for x in range(0, stride, bpp):
        px = r[x:x + 3]
        if px != b"\xff\xff\xff":
            ink += 1
            colours.add(px)
frac = ink / (w * h)
print(f"svg_render_test: {frac:.1%} non-white pixels, {len(colours)} colours")
sys.exit(0 if frac > 0.01 and len(colours) >= 5 else 1)
EOF
fi
echo "svg_render_test: rendered"
