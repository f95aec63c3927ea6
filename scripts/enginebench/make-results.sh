#!/usr/bin/env bash
# Assembles RESULTS.md from intro.md, the tables made by summarize.py, and conclusions.md.
set -euo pipefail
cd "$(dirname "$0")"
{
  cat intro.md
  echo "## Pass 2 (repetitions interleaved over all configurations) — main tables"
  echo
  python3 summarize.py results.jsonl
  echo
  echo "## Pass 1 (all repetitions of one configuration, then the next; lower machine load)"
  echo
  python3 summarize.py results-pass1.jsonl --no-builds
  cat conclusions.md
} > RESULTS.md
