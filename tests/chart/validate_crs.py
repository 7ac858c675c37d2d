"""Validates custom resources against the openAPIV3Schema of their CRDs.

usage: validate_crs.py CRD_DIR MANIFEST...

Each object's apiVersion and kind select the CRD version; the object is checked
with JSON Schema (the Kubernetes extensions x-kubernetes-* are not JSON Schema
keywords and are ignored, CEL rules included: the API test server and
crds/tests check those). Prints one line per object; exits 1 on any failure.
"""
import sys

import jsonschema
import yaml


def schemas(crd_dir):
    import glob
    import os
    out = {}
    for path in glob.glob(os.path.join(crd_dir, "*.yaml")):
        with open(path) as f:
            for crd in yaml.safe_load_all(f):
                if not crd or crd.get("kind") != "CustomResourceDefinition":
                    continue
                group = crd["spec"]["group"]
                kind = crd["spec"]["names"]["kind"]
                for v in crd["spec"]["versions"]:
                    out[(f"{group}/{v['name']}", kind)] = v["schema"]["openAPIV3Schema"]
    return out


def main():
    known = schemas(sys.argv[1])
    failed = 0
    for path in sys.argv[2:]:
        with open(path) as f:
            for obj in yaml.safe_load_all(f):
                if not obj:
                    continue
                key = (obj.get("apiVersion"), obj.get("kind"))
                name = f"{path}: {key[1]} {obj.get('metadata', {}).get('name')}"
                if key not in known:
                    print(f"FAIL {name}: no CRD for {key}")
                    failed += 1
                    continue
                errors = sorted(jsonschema.Draft7Validator(known[key]).iter_errors(obj), key=str)
                if errors:
                    failed += 1
                    for e in errors:
                        print(f"FAIL {name}: {'/'.join(map(str, e.absolute_path))}: {e.message}")
                else:
                    print(f"ok {name}")
    sys.exit(1 if failed else 0)


main()
