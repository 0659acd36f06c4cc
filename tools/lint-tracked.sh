#!/usr/bin/env bash
# Lint exactly what is committed-to-be: tracked files plus staged ones (helper for busy work trees).
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files --cached '*.py' '*.md' '*.pyi' | sort -u)
.venv/bin/ruff check "${files[@]}"
.venv/bin/ruff format --check "${files[@]}"
