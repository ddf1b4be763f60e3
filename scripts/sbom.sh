#!/usr/bin/env bash
# A CycloneDX SBOM (JSON) of kinac's installed set: kinac and exactly what `pip install .`
# brings in under constraints.txt, installed into a throwaway venv so nothing else of this
# machine's environment is listed. Needs cyclonedx-bom (in the `test` extra).
#
#   bash scripts/sbom.sh                # runtime set  -> build/sbom/kinac-runtime.cdx.json
#   bash scripts/sbom.sh test           # with the test extra -> build/sbom/kinac-test.cdx.json
#   bash scripts/sbom.sh --python PY    # the environment of interpreter PY as it is
#
# The venv is kept in build/sbom/venv-SET and reused while constraints.txt is unchanged.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p build/sbom
if [[ "${1:-}" == "--python" ]]; then
  python="$(command -v "$2")"
  out=build/sbom/environment.cdx.json
else
  set_name="${1:-runtime}"
  case "$set_name" in
    runtime) spec="." ;;
    test) spec=".[test]" ;;
    *) echo "sbom: unknown set '$set_name' (runtime or test)" >&2; exit 2 ;;
  esac
  venv="build/sbom/venv-$set_name"
  stamp="$venv/.constraints"
  if [[ ! -f "$stamp" ]] || ! cmp -s "$stamp" constraints.txt; then
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip install -q --disable-pip-version-check -c constraints.txt "$spec"
    cp constraints.txt "$stamp"
  else  # kinac itself may have changed: reinstall it alone
    "$venv/bin/python" -m pip install -q --disable-pip-version-check --no-deps --force-reinstall .
  fi
  python="$venv/bin/python"
  out="build/sbom/kinac-$set_name.cdx.json"
fi
python3 -m cyclonedx_py environment "$python" --pyproject pyproject.toml --output-reproducible \
  --of JSON -o "$out"
python3 - "$out" <<'PY'
import json, sys
bom = json.load(open(sys.argv[1]))
names = sorted(c["name"] for c in bom.get("components", []))
print(f"sbom: {sys.argv[1]}: {len(names)} components (CycloneDX {bom['specVersion']})")
PY
