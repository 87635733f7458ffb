#!/usr/bin/env bash
# Run the data-apis array-api-tests suite against xpkit.Backend(name).xp for
# numpy, torch (CPU), array_api_strict and ndonnx, with the known xfails/skips
# that array-api-compat's CI (numpy, torch), array-api-strict's CI and
# ndonnx's CI use.
#
# Usage:
#   run.sh ARRAY_API_TESTS_DIR ARRAY_API_COMPAT_DIR [ARRAY_API_STRICT_DIR [NDONNX_DIR]]
#
# The directories are checkouts of data-apis/array-api-tests (with its
# array-api submodule), data-apis/array-api-compat (for numpy-xfails.txt,
# torch-xfails.txt, ...), data-apis/array-api-strict (for
# array-api-tests-xfails.txt) and ndonnx's source (for skips.txt, e.g. its
# sdist).  They may also be given as the environment variables of the same
# names.
#
# Other environment variables:
#   PYTHON        interpreter with xpkit, pytest, hypothesis, ndindex installed
#                 (default: python3)
#   MAX_EXAMPLES  hypothesis examples per test (default: 500)
#   SEED          hypothesis seed (default: 0)
#   LIBS          libraries to test (default: "numpy torch array_api_strict")
#   BASELINE=1    test array_api_compat.numpy, array_api_compat.torch,
#                 array_api_strict and ndonnx directly instead of xpkit (for
#                 comparison)
#   OUT_DIR       where logs and JUnit XML go (default: a new temp dir)
#   extra arguments to pytest can be passed in PYTEST_EXTRA (word-split).
set -euo pipefail

AAT_DIR=${1:-${ARRAY_API_TESTS_DIR:-}}
COMPAT_DIR=${2:-${ARRAY_API_COMPAT_DIR:-}}
STRICT_DIR=${3:-${ARRAY_API_STRICT_DIR:-}}
NDONNX_DIR=${4:-${NDONNX_DIR:-}}
PYTHON=${PYTHON:-python3}
MAX_EXAMPLES=${MAX_EXAMPLES:-500}
SEED=${SEED:-0}
LIBS=${LIBS:-numpy torch array_api_strict}
BASELINE=${BASELINE:-0}
PYTEST_EXTRA=${PYTEST_EXTRA:-}

if [[ -z "$AAT_DIR" || -z "$COMPAT_DIR" ]]; then
    echo "usage: $0 ARRAY_API_TESTS_DIR ARRAY_API_COMPAT_DIR [ARRAY_API_STRICT_DIR]" >&2
    exit 2
fi
AAT_DIR=$(cd "$AAT_DIR" && pwd)
COMPAT_DIR=$(cd "$COMPAT_DIR" && pwd)
if [[ -n "$STRICT_DIR" ]]; then
    STRICT_DIR=$(cd "$STRICT_DIR" && pwd)
fi
if [[ -n "$NDONNX_DIR" ]]; then
    NDONNX_DIR=$(cd "$NDONNX_DIR" && pwd)
fi
if [[ ! -d "$AAT_DIR/array_api_tests" || ! -d "$AAT_DIR/array-api/spec" ]]; then
    echo "$AAT_DIR is not an array-api-tests checkout with its array-api submodule" >&2
    exit 2
fi

OUT_DIR=${OUT_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/xpkit-aat.XXXXXX")}
mkdir -p "$OUT_DIR"
OUT_DIR=$(cd "$OUT_DIR" && pwd)
SHIM_DIR=$(mktemp -d "${TMPDIR:-/tmp}/xpkit-aat-shims.XXXXXX")
trap 'rm -rf "$SHIM_DIR"' EXIT

# Shim modules: importing xpkit_ns_<lib> yields Backend(<lib>).xp itself.
write_shim() {
    printf 'import sys\n\nfrom xpkit import Backend\n\nsys.modules[__name__] = %s.xp\n' \
        "$2" >"$SHIM_DIR/xpkit_ns_$1.py"
}
write_shim numpy 'Backend("numpy")'
write_shim torch 'Backend("torch", device="cpu")'
write_shim array_api_strict 'Backend("array_api_strict")'
write_shim ndonnx 'Backend("ndonnx")'

status=0
for lib in $LIBS; do
    env_args=(ARRAY_API_TESTS_XFAIL_MARK=skip)
    list_args=()
    case "$lib" in
        numpy)
            upstream=array_api_compat.numpy
            env_args+=(ARRAY_API_TESTS_VERSION=2025.12 NPY_PROMOTION_STATE=weak)
            list_args=(--xfails-file "$COMPAT_DIR/numpy-xfails.txt")
            if [[ -f "$COMPAT_DIR/numpy-skips.txt" ]]; then
                list_args+=(--skips-file "$COMPAT_DIR/numpy-skips.txt")
            fi
            ;;
        torch)
            upstream=array_api_compat.torch
            env_args+=(ARRAY_API_TESTS_VERSION=2025.12
                "ARRAY_API_TESTS_SKIP_DTYPES=uint16,uint32,uint64")
            list_args=(--xfails-file "$COMPAT_DIR/torch-xfails.txt")
            if [[ -f "$COMPAT_DIR/torch-skips.txt" ]]; then
                list_args+=(--skips-file "$COMPAT_DIR/torch-skips.txt")
            fi
            ;;
        array_api_strict)
            upstream=array_api_strict
            env_args+=(ARRAY_API_STRICT_API_VERSION=2025.12)
            if [[ -n "$STRICT_DIR" ]]; then
                # array-api-strict's CI passes this file as --skips-file.
                list_args=(--skips-file "$STRICT_DIR/array-api-tests-xfails.txt")
            else
                echo "warning: no ARRAY_API_STRICT_DIR, running $lib without known xfails" >&2
            fi
            ;;
        ndonnx)
            # As ndonnx's own CI (its pixi.toml task arrayapitests): no
            # complex dtypes, no linalg and fft extensions, its skips.txt.
            upstream=ndonnx
            env_args+=(ARRAY_API_TESTS_VERSION=2024.12
                "ARRAY_API_TESTS_SKIP_DTYPES=complex64,complex128"
                "PYTHONWARNINGS=ignore::UserWarning:ndonnx._typed_array.ort_compat,ignore:case for:UserWarning,ignore:Special cases found for:UserWarning")
            list_args=(--disable-extension linalg fft)
            if [[ -n "$NDONNX_DIR" ]]; then
                list_args+=(--skips-file "$NDONNX_DIR/skips.txt")
            else
                echo "warning: no NDONNX_DIR, running $lib without known failures" >&2
            fi
            ;;
        *)
            echo "unknown library: $lib" >&2
            exit 2
            ;;
    esac
    if [[ "$BASELINE" == 1 ]]; then
        module=$upstream
        tag=baseline-$lib
    else
        module=xpkit_ns_$lib
        tag=xpkit-$lib
    fi
    echo "=== $tag (ARRAY_API_TESTS_MODULE=$module) -> $OUT_DIR/$tag.log"
    # shellcheck disable=SC2086  # PYTEST_EXTRA is meant to be word-split
    if (cd "$AAT_DIR" && env "${env_args[@]}" \
            ARRAY_API_TESTS_MODULE="$module" \
            PYTHONPATH="$SHIM_DIR${PYTHONPATH:+:$PYTHONPATH}" \
            "$PYTHON" -m pytest array_api_tests/ "${list_args[@]}" \
            --max-examples "$MAX_EXAMPLES" --hypothesis-seed "$SEED" \
            --hypothesis-disable-deadline -p no:cacheprovider \
            -q -rfE --junitxml "$OUT_DIR/$tag.xml" $PYTEST_EXTRA \
            >"$OUT_DIR/$tag.log" 2>&1); then
        :
    else
        status=1
    fi
    tail -n 1 "$OUT_DIR/$tag.log"
done
echo "logs and JUnit XML in $OUT_DIR"
exit "$status"
