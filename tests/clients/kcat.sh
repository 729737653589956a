#!/usr/bin/env bash
# Debian bookworm's kcat (1.7.1, on Debian's librdkafka 2.0.2), unpacked
# into tests/.cache/kcat without installing anything: the test that old
# librdkafka builds compress against rutomq (before 2.11 they need Produce
# v0-2 in ApiVersions, KAFKA-18659). Prints the directory; run
# "$dir/kcat" (a wrapper that sets the library path).
set -euo pipefail
cache="$(cd "$(dirname "$0")/.." && pwd)/.cache"
out="$cache/kcat"
if [ -x "$out/kcat" ]; then
    echo "$out"
    exit 0
fi
mkdir -p "$cache"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
debs=(kcat librdkafka1 libyajl2)
if ! apt-get download "${debs[@]}" >/dev/null 2>&1; then
    # A fresh machine may have no package lists yet.
    apt-get update -qq >/dev/null
    apt-get download "${debs[@]}" >/dev/null 2>&1
fi
rm -rf "$out.tmp"
mkdir -p "$out.tmp/root"
for d in ./*.deb; do
    dpkg-deb -x "$d" "$out.tmp/root"
done
libdir="$(cd "$out.tmp/root/usr/lib" && ls -d ./*-linux-gnu | head -1)"
cat > "$out.tmp/kcat" <<WRAP
#!/usr/bin/env bash
here="\$(cd "\$(dirname "\$0")" && pwd)"
LD_LIBRARY_PATH="\$here/root/usr/lib/${libdir#./}\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" exec "\$here/root/usr/bin/kcat" "\$@"
WRAP
chmod +x "$out.tmp/kcat"
"$out.tmp/kcat" -V >/dev/null
rm -rf "$out"
mv "$out.tmp" "$out"
echo "$out"
