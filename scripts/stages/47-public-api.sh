#!/usr/bin/env bash
# Every crate's public surface equals its committed list (docs/api/).
set -euo pipefail
bash "$(dirname "$0")/../public-api.sh"
