#!/usr/bin/env bash
# Unit, property, integration and doc tests, with and without std.
set -euo pipefail
cargo test
cargo test --features std
