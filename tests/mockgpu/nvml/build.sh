#!/bin/sh
# Build the mock libnvidia-ml.so.1: build.sh OUTPUT_PATH (e.g. /tmp/x/libnvidia-ml.so.1).
# CC and EXTRA_CFLAGS (e.g. -fsanitize=address,undefined) may be set in the environment.
set -eu
out=${1:?usage: build.sh OUTPUT_PATH}
src=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$(dirname "$out")"
# Only the NVML entry points are exported (API macro); helpers stay hidden.
# EXTRA_CFLAGS is split into words on purpose.
# shellcheck disable=SC2086
${CC:-gcc} -std=gnu11 -Wall -Wextra -Werror -O2 -fPIC -shared -pthread \
    -fvisibility=hidden ${EXTRA_CFLAGS:-} -Wl,-soname,libnvidia-ml.so.1 -Wl,--no-undefined \
    -o "$out" "$src/nvml.c" "$src/holders.c" "$src/config.c" "$src/mjson.c"
