# shellcheck shell=bash
# Runs on the host as root (bash -euo pipefail) after the packages are installed, with
# image.conf's variables set. $1 is the image's root file system (base's).
R="$1"
test -s "$R/etc/ssl/certs/java/cacerts" || { echo "customize: no /etc/ssl/certs/java/cacerts (ca-certificates-java)" >&2; exit 1; }
if [ -n "$JDK_FROM" ]; then
  src="$(readlink -f "$JDK_FROM")"
  mkdir -p "$R/usr/lib/jvm/temurin"
  # Not the JDK's sources (lib/src.zip, ~50 MB), manuals or demos.
  tar -C "$src" --exclude=./lib/src.zip --exclude=./man --exclude=./demo --exclude=./sample -c . |
    tar -C "$R/usr/lib/jvm/temurin" -x --no-same-owner
  chown -R 0:0 "$R/usr/lib/jvm/temurin"
  # The system's Java trust store (ca-certificates-java): Debian's CAs and the extra ones.
  rm -f "$R/usr/lib/jvm/temurin/lib/security/cacerts"
  ln -s /etc/ssl/certs/java/cacerts "$R/usr/lib/jvm/temurin/lib/security/cacerts"
fi
# `gradle`: Debian's Gradle 4.4.1 on JDK 17 whatever JAVA_HOME says (it cannot run on
# later Java); /usr/local/bin comes before /usr/bin on PATH.
cat >"$R/usr/local/bin/gradle" <<'SH'
#!/bin/sh
# Debian's Gradle 4.4.1 runs on JDK 17 only (GRADLE_JAVA_HOME), whatever JAVA_HOME is.
JAVA_HOME="${GRADLE_JAVA_HOME:-/usr/lib/jvm/java-17-openjdk-amd64}" exec /usr/bin/gradle "$@"
SH
chmod 755 "$R/usr/local/bin/gradle"
find "$R/usr/share/doc" -mindepth 1 ! -type d ! -name copyright -delete
find "$R/usr/share/doc" -mindepth 1 -type d -empty -delete
