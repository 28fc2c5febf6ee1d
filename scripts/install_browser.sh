#!/usr/bin/env bash
# Debian's Chromium for the explorer's browser test (Playwright drives it; no browser download).
set -euo pipefail
if command -v chromium >/dev/null 2>&1; then exit 0; fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "setup: installing Debian's chromium for the browser test"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
else
  echo "setup: chromium is not installed and cannot be installed here (needs root and apt-get): the browser test will be skipped"
fi
