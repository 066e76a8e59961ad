#!/usr/bin/env bash
# The style gate: every Swift file of ours (generated protobuf code aside) is as swift-format, configured by the
# .swift-format at the root (Hummingbird's style), would write it, and breaks none of its lint rules.
# Fix a failure with: swift format format --in-place --parallel FILE…
set -euo pipefail
cd "$(dirname "$0")/../.."
files=()
while IFS= read -r -d '' file; do files+=("$file"); done < <(
  git ls-files -z --cached --others --exclude-standard -- '*.swift' | grep -zv '/Generated/')
if [ ${#files[@]} -eq 0 ]; then echo "style: no Swift files found" >&2; exit 1; fi
if ! swift format lint --strict --parallel "${files[@]}"; then
  echo "style: the files above are not formatted; run: swift format format --in-place --parallel FILE…" >&2
  exit 1
fi
echo "style: ${#files[@]} Swift files formatted as .swift-format says"
