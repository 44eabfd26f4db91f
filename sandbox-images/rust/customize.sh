# shellcheck shell=bash
# Runs on the host as root (bash -euo pipefail) after the packages are installed, with
# image.conf's variables set. $1 is the image's root file system (base's).
R="$1"
if [ "$RUST_FROM_HOST" = 1 ]; then
  src="$(readlink -f "$RUST_TOOLCHAIN")"
  mkdir -p "$R/usr/local/rust"
  # bin, lib (rustc's LLVM, the standard library), libexec; not share/ (the rust-docs
  # HTML book, manuals, shell completions) nor the docs' component manifest.
  for d in bin lib libexec etc; do
    [ -d "$src/$d" ] || continue
    tar -C "$src" --exclude='./lib/rustlib/manifest-rust-docs-*' -c "./$d" | tar -C "$R/usr/local/rust" -x --no-same-owner
  done
  chown -R 0:0 "$R/usr/local/rust"
  chmod -R go-w "$R/usr/local/rust"
  # (rustc finds its libraries through $ORIGIN, which needs /proc: the smoke test runs it.)
else
  test -x "$R/usr/bin/cargo"
fi
