#!/usr/bin/env bash
# The first hour of a new user, as a test (issue 37): in a fresh virtual environment, the README's
# commands in order -- install, ingest a folder, search, status, doctor -- with no settings beyond
# the README's. Each must exit 0 and fit one screen (at most 40 lines, no traceback, no Python
# warning); the search must answer from the folder just ingested. The folder is removed again with
# `osrag delete --collection`, so a rerun starts the same way.
#
#   tests/newuser/run.sh [VENV]   # VENV: a fresh venv with osrag installed (CI passes the wheel's);
#                                 # without it one is made here from this checkout ('.[demo]')
#
# Needs a running node at the default URL (`osrag dev up`). Not part of the pytest run (.ci/run
# calls it after the wheel step).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

venv=${1:-}
if [ -z "$venv" ]; then
  python3 -m venv "$work/venv"
  "$work/venv/bin/pip" install -q --disable-pip-version-check "$root[demo]"
  venv=$work/venv
fi
osrag=$venv/bin/osrag

# No settings beyond the README's: whatever OSRAG_* the calling shell has is dropped.
for name in $(env | sed -n 's/^\(OSRAG_[A-Z0-9_]*\)=.*/\1/p'); do
  unset "$name"
done
# A local run may keep off the default alias (the CI run uses the default).
if [ -n "${NEWUSER_ALIAS:-}" ]; then export OSRAG_ALIAS=$NEWUSER_ALIAS; fi

# A folder a user would have: a few Russian help pages, named for this run.
kb=$work/kb-newuser-$$
mkdir -p "$kb"
cat >"$kb/vozvrat.md" <<'MD'
# Возврат товара

Нераспечатанный товар можно вернуть в течение четырнадцати дней после получения.
Деньги возвращаются на карту покупателя за десять рабочих дней.

## Как оформить возврат

Напишите в поддержку номер заказа и причину возврата; курьер заберёт товар бесплатно.
MD
cat >"$kb/dostavka.md" <<'MD'
# Доставка

Курьер доставляет заказы по городу за один-два дня. Доставка стоит 300 рублей,
при заказе от 3000 рублей она бесплатна.
MD
cat >"$kb/oplata.md" <<'MD'
# Оплата

Заказ можно оплатить картой на сайте или наличными курьеру при получении.
MD

cd "$work"  # outside the checkout: nothing is read from it by accident
fails=0
run() {
  local name=$1
  shift
  local out=$work/$name.out rc=0
  "$osrag" "$@" >"$out" 2>&1 || rc=$?
  local lines
  lines=$(wc -l <"$out")
  printf '\n--- osrag %s (exit %s, %s lines)\n' "$*" "$rc" "$lines"
  head -n 60 "$out"
  if [ "$rc" -ne 0 ]; then
    echo "NEWUSER: osrag $name exited $rc" >&2
    fails=$((fails + 1))
  fi
  if [ "$lines" -gt 40 ]; then
    echo "NEWUSER: osrag $name printed $lines lines (more than one screen)" >&2
    fails=$((fails + 1))
  fi
  if grep -qE 'Traceback|Warning:|warnings.warn' "$out"; then
    echo "NEWUSER: osrag $name printed a traceback or a Python warning" >&2
    fails=$((fails + 1))
  fi
}

collection=$(basename "$kb")
run install install
run ingest ingest "$kb"
run search search "за сколько дней можно вернуть товар?" --public-only
if ! grep -q "$collection/vozvrat" "$work/search.out"; then
  echo "NEWUSER: the search did not answer from the folder just ingested ($collection/vozvrat)" >&2
  fails=$((fails + 1))
fi
run status status
run doctor doctor
run delete delete --collection "$collection"

if [ "$fails" -ne 0 ]; then
  echo "NEWUSER: $fails problem(s)" >&2
  exit 1
fi
echo "NEWUSER: install, ingest, search, status, doctor: each exit 0, one screen"
