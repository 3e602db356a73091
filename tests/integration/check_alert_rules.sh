#!/bin/sh
# promtool check rules and promtool test rules on contrib/prometheus/composer-alerts.yml.
# Usage: check_alert_rules.sh DIR (the directory holding composer-alerts.yml and its tests).
# Exit 77 (skipped) when promtool is not installed: Debian's prometheus package has it
# (contrib/install-deps.sh installs it).
set -eu
dir=$1
if ! command -v promtool >/dev/null 2>&1; then
  echo "promtool not found: install Debian's prometheus package (contrib/install-deps.sh); rules not checked"
  exit 77
fi
cd "$dir"
promtool check rules composer-alerts.yml
promtool test rules composer-alerts.test.yml
