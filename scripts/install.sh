#!/usr/bin/env bash
# make install / make uninstall: the ostack binary, its man page and its bash, zsh and fish
# completions under PREFIX, where shells and man(1) look for them.
#   scripts/install.sh PREFIX BINARY      install BINARY as PREFIX/bin/ostack, and the rest
#   scripts/install.sh --uninstall PREFIX remove exactly those files
set -euo pipefail
cd "$(dirname "$0")/.."
files=(bin/ostack share/man/man1/ostack.1 share/bash-completion/completions/ostack
  share/zsh/site-functions/_ostack share/fish/vendor_completions.d/ostack.fish)
if [[ "${1:-}" == "--uninstall" ]]; then
  prefix="${2:?usage: install.sh --uninstall PREFIX}"
  for f in "${files[@]}"; do rm -f "$prefix/$f"; done
  echo "removed ostack from $prefix"
  exit 0
fi
prefix="${1:?usage: install.sh PREFIX BINARY}"
binary="${2:?usage: install.sh PREFIX BINARY}"
install -d -m 0755 "$prefix/bin" "$prefix/share/man/man1" "$prefix/share/bash-completion/completions" \
  "$prefix/share/zsh/site-functions" "$prefix/share/fish/vendor_completions.d"
install -m 0755 "$binary" "$prefix/bin/ostack"
install -m 0644 docs/man/ostack.1 "$prefix/share/man/man1/ostack.1"
# The scripts come from the binary being installed, so they match its commands.
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
"$binary" completion bash > "$scratch/ostack"
"$binary" completion zsh > "$scratch/_ostack"
"$binary" completion fish > "$scratch/ostack.fish"
install -m 0644 "$scratch/ostack" "$prefix/share/bash-completion/completions/ostack"
install -m 0644 "$scratch/_ostack" "$prefix/share/zsh/site-functions/_ostack"
install -m 0644 "$scratch/ostack.fish" "$prefix/share/fish/vendor_completions.d/ostack.fish"
echo "installed ostack in $prefix (bin, man page, bash/zsh/fish completions)"
