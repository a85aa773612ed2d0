"""JSON Schema validation for the server_it scripts: python3-jsonschema (Draft 2020-12 with its
format checker) where it is installed; where it is not (the GPU machine), `--record FILE` on the
script's command line writes each (instance, schema) pair to FILE instead, and
`python3 schema_check.py FILE` validates them later on a machine that has it."""
import atexit
import json
import sys

try:
    import jsonschema
except ImportError:
    jsonschema = None

_records = []
_record_to = sys.argv[sys.argv.index("--record") + 1] if "--record" in sys.argv else None


def available():
    return jsonschema is not None or _record_to is not None


def validate(instance, schema):
    if _record_to is not None and jsonschema is None:
        _records.append({"instance": instance, "schema": schema})
        return
    jsonschema.validate(instance, schema, cls=jsonschema.Draft202012Validator,
                        format_checker=jsonschema.FormatChecker())


@atexit.register
def _write():
    if _record_to is not None and jsonschema is None:
        with open(_record_to, "w") as f:
            json.dump(_records, f)


if __name__ == "__main__":
    bad = 0
    records = json.load(open(sys.argv[1]))
    for i, r in enumerate(records):
        try:
            validate(r["instance"], r["schema"])
        except jsonschema.ValidationError as e:
            bad += 1
            print(f"record {i}: {e.message}\n    instance {json.dumps(r['instance'])[:200]}")
    print(f"{len(records)} records, {bad} invalid")
    sys.exit(1 if bad else 0)
