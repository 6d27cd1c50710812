#!/usr/bin/env bash
# Install every Debian package ostack needs to build, test, bench and demo.
# Idempotent: packages already installed are skipped; apt-get runs only when something is missing.
set -euo pipefail

packages=(
  pkg-config
  libsqlcipher-dev
  sqlcipher
  libsecret-1-dev
  libsodium-dev
  libcurl4-openssl-dev
  curl
  openssl
  dbus
  gnome-keyring
  libsecret-tools
  python3
  python3-dbus
  libkf5wallet-bin
  libqca-qt5-2-plugins
  keepassxc
  jq
  man-db
  gcc
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "deps: installing ${missing[*]}"
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
