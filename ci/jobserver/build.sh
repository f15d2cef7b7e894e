#!/usr/bin/env bash
# Builds a Beam portable job server jar (see README.md beside this file) into
# a cache outside the repository and prints the jar's path on stdout (only that
# line; Maven's output goes to stderr). With the jar already cached, it prints
# the path and builds nothing.
#
#   bash ci/jobserver/build.sh flink-1.20|spark-3
#
# Cache: ${BTR_TOOLS:-$HOME/.cache/beam-tfrecords-tools}/jobserver/ENGINE-HASH/jobserver.jar,
# HASH being the first 16 hex digits of the sha256 of ENGINE/pom.xml; Maven's
# local repository is ${BTR_TOOLS:-...}/m2.
set -euo pipefail

die() { echo "build.sh: $*" >&2; exit 1; }

[ $# -eq 1 ] || die "usage: build.sh flink-1.20|spark-3"
ENGINE=$1
case "$ENGINE" in
  flink-1.20|spark-3) ;;
  *) die "unknown engine '$ENGINE' (expected flink-1.20 or spark-3)" ;;
esac

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PROJECT=$HERE/$ENGINE
[ -f "$PROJECT/pom.xml" ] || die "no $PROJECT/pom.xml"

TOOLS=${BTR_TOOLS:-$HOME/.cache/beam-tfrecords-tools}
if command -v sha256sum >/dev/null 2>&1; then
  HASH=$(sha256sum "$PROJECT/pom.xml" | cut -c1-16)
else
  HASH=$(shasum -a 256 "$PROJECT/pom.xml" | cut -c1-16)
fi
OUT_DIR=$TOOLS/jobserver/$ENGINE-$HASH
JAR=$OUT_DIR/jobserver.jar

if [ -f "$JAR" ]; then
  echo "$JAR"
  exit 0
fi

command -v mvn >/dev/null 2>&1 || die "mvn not found (Debian: apt-get install maven; needs a JDK 17)"
command -v java >/dev/null 2>&1 || die "java not found (needs a JDK 17)"

# Build in a temporary copy, so that target/ never lands in the repository.
WORK=$(mktemp -d "${TMPDIR:-/tmp}/btr-jobserver-$ENGINE.XXXXXX") \
  || die "cannot make a temporary directory"
TMP_JAR=""
cleanup() {
  rm -rf "$WORK"
  if [ -n "$TMP_JAR" ]; then rm -f "$TMP_JAR"; fi
}
trap cleanup EXIT
cp -R "$PROJECT/." "$WORK/" || die "cannot copy $PROJECT into $WORK"
rm -rf "$WORK/target"

mkdir -p "$TOOLS/m2" || die "cannot make $TOOLS/m2"
echo "build.sh: building the $ENGINE job server into $JAR (Maven repository $TOOLS/m2)" >&2
start=$(date +%s)
# (sed drops the bare colour resets that Debian's Maven 3.8 prints even with -B.)
if ! (cd "$WORK" && mvn -B -q -Dmaven.repo.local="$TOOLS/m2" package 2>&1 \
      | sed -u 's/\x1b\[[0-9;]*m//g') >&2; then
  die "mvn package failed for $ENGINE (Maven's output above)"
fi
BUILT=$WORK/target/jobserver.jar
[ -s "$BUILT" ] || die "mvn package made no $BUILT"

# Atomic: copy to a temporary name beside the jar, then rename.
mkdir -p "$OUT_DIR" || die "cannot make $OUT_DIR"
TMP_JAR=$(mktemp "$OUT_DIR/.jobserver.jar.XXXXXX") || die "cannot write in $OUT_DIR"
cp "$BUILT" "$TMP_JAR" || die "cannot copy the jar into $OUT_DIR"
chmod 644 "$TMP_JAR"  # mktemp makes it 0600
mv -f "$TMP_JAR" "$JAR" || die "cannot rename the jar to $JAR"
TMP_JAR=""
echo "build.sh: built $ENGINE in $(( $(date +%s) - start )) s" >&2
echo "$JAR"
