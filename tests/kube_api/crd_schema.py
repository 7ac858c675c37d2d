"""Custom resources: structural-schema pruning, defaulting and validation, and
`x-kubernetes-validations` CEL rules, as apiextensions-apiserver applies them.

Upstream (kubernetes/kubernetes, staging/src/k8s.io/apiextensions-apiserver):
- pkg/apiserver/schema/pruning/algorithm.go: unknown fields are dropped
  unless x-kubernetes-preserve-unknown-fields; apiVersion, kind and metadata
  at the root are kept (with ?fieldValidation=Strict an unknown field is a
  400 BadRequest instead, as pkg/registry/customresource does);
- pkg/apiserver/schema/defaulting/algorithm.go and prunenulls.go: a null in a
  field that is not nullable is dropped, then `default` fills missing fields;
- pkg/apiserver/validation (kube-openapi's validator): type, enum, format,
  pattern, minimum/maximum (exclusive too), multipleOf, min/maxLength,
  min/maxItems, min/maxProperties, required, nullable,
  x-kubernetes-int-or-string, allOf/anyOf/oneOf/not;
- pkg/apiserver/schema/cel/validation.go: every rule is compiled and run with
  `self` bound to the node; a rule that mentions `oldSelf` is a transition
  rule and runs only on update when the node has an old value (objects
  correlate by field name, lists only when x-kubernetes-list-type is map, by
  their x-kubernetes-list-map-keys); `fieldPath` and `reason` shape the
  error; at the root `self.metadata` holds only name and generateName;
- CRDValidationRatcheting (GA in 1.33): on update a node whose value equals
  its old value is not validated again.
CEL is cel-python (`celpy`) with the Kubernetes quantity library
(k8s.io/apiserver/pkg/cel/library/quantity.go) the regex library's
`find` and `findAll` (k8s.io/apiserver/pkg/cel/library/regex.go) and the
strings extension's `split`, `lowerAscii`, `upperAscii` (cel-go
ext/strings.go) added.
"""

import copy
import re
from datetime import datetime
from fractions import Fraction

from apierrors import FieldError, invalid, ApiError

_celpy = None


def _cel():
    global _celpy
    if _celpy is None:
        import celpy  # imported on first use: keeps the server's start fast
        _celpy = celpy
    return _celpy


# ---------------------------------------------------------------- quantity library

_QTY = re.compile(r"^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?[0-9]+)?$")
_SUFFIX = {"n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 1000), "": Fraction(1),
           "k": Fraction(10**3), "M": Fraction(10**6), "G": Fraction(10**9), "T": Fraction(10**12),
           "P": Fraction(10**15), "E": Fraction(10**18), "Ki": Fraction(2**10), "Mi": Fraction(2**20),
           "Gi": Fraction(2**30), "Ti": Fraction(2**40), "Pi": Fraction(2**50), "Ei": Fraction(2**60)}


def parse_quantity(text):
    m = _QTY.match(str(text).strip())
    if not m:
        return None
    num, suffix = Fraction(m.group(1)), m.group(2) or ""
    if suffix[:1] in ("e", "E"):
        return num * Fraction(10) ** int(suffix[1:])
    return num * _SUFFIX[suffix]


class Quantity:
    def __init__(self, value):
        self.value = value


def _cel_functions():
    celtypes = _cel().celtypes

    def quantity(s):
        v = parse_quantity(s)
        if v is None:
            raise ValueError(f"quantities must match the regular expression: {s}")
        return Quantity(v)

    def cmp(a, b):
        return (a.value > b.value) - (a.value < b.value)

    return {
        "quantity": quantity,
        "isQuantity": lambda s: celtypes.BoolType(parse_quantity(s) is not None),
        "compareTo": lambda a, b: celtypes.IntType(cmp(a, b)),
        "isGreaterThan": lambda a, b: celtypes.BoolType(cmp(a, b) > 0),
        "isLessThan": lambda a, b: celtypes.BoolType(cmp(a, b) < 0),
        "asInteger": lambda a: celtypes.IntType(int(a.value)),
        "asApproximateFloat": lambda a: celtypes.DoubleType(float(a.value)),
        "isInteger": lambda a: celtypes.BoolType(a.value.denominator == 1),
        "sign": lambda a: celtypes.IntType((a.value > 0) - (a.value < 0)),
        "add": lambda a, b: Quantity(a.value + (b.value if isinstance(b, Quantity) else Fraction(int(b)))),
        "sub": lambda a, b: Quantity(a.value - (b.value if isinstance(b, Quantity) else Fraction(int(b)))),
        # the regex library (k8s.io/apiserver/pkg/cel/library/regex.go): the
        # first match, or "" (Karpenter's CRDs use it on label keys)
        "find": lambda s, pattern: celtypes.StringType(_first_match(pattern, s)),
        # the strings extension (cel-go ext/strings.go, on in kube-apiserver)
        "split": lambda s, sep, *n: celtypes.ListType(
            [celtypes.StringType(x) for x in (str(s).split(str(sep), int(n[0]) - 1) if n and int(n[0]) > 0
                                              else [] if n and int(n[0]) == 0 else str(s).split(str(sep)))]),
        "lowerAscii": lambda s: celtypes.StringType(str(s).lower()),
        "upperAscii": lambda s: celtypes.StringType(str(s).upper()),
        "findAll": lambda s, pattern, *limit: celtypes.ListType(
            [celtypes.StringType(m.group(0)) for m in re.finditer(str(pattern), str(s))][:int(limit[0]) if limit and int(limit[0]) >= 0 else None]),
    }


def _first_match(pattern, s):
    m = re.search(str(pattern), str(s))
    return m.group(0) if m else ""


class Rules:
    """Compiled CEL programs, cached by rule text (shared by every CRD)."""

    def __init__(self):
        self.programs = {}
        self.functions = None

    def program(self, text):
        p = self.programs.get(text)
        if p is None:
            celpy = _cel()
            if self.functions is None:
                self.functions = _cel_functions()
            env = celpy.Environment()
            p = env.program(env.compile(text), functions=self.functions)
            self.programs[text] = p
        return p

    def run(self, text, self_value, old_value):
        celpy = _cel()
        act = {"self": celpy.json_to_cel(self_value)}
        if old_value is not _MISSING:
            act["oldSelf"] = celpy.json_to_cel(old_value)
        try:
            result = self.program(text).evaluate(act)
        except Exception as e:  # compile or evaluation error
            return f"rule evaluation error: {e}"
        if isinstance(result, Exception) or not isinstance(result, (bool, int)):
            return f"rule evaluation error: {result}"
        return bool(result)


RULES = Rules()
_MISSING = object()
_OLDSELF = re.compile(r"\boldSelf\b")

_REASONS = {"FieldValueInvalid": "invalid", "FieldValueForbidden": "forbidden",
            "FieldValueRequired": "required", "FieldValueDuplicate": "duplicate"}


def _join(path, key):
    return f"{path}.{key}" if path else key


def _type_name(v):
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    if isinstance(v, dict):
        return "object"
    return "null"


# ---------------------------------------------------------------- pruning and defaulting

def prune(value, schema, path, pruned, root=False):
    """Drops unknown fields (recording their paths) and non-nullable nulls."""
    if not isinstance(schema, dict):
        return value
    if isinstance(value, dict) and (root or schema.get("type") == "object"):
        props = schema.get("properties") or {}
        addl = schema.get("additionalProperties")
        keep = schema.get("x-kubernetes-preserve-unknown-fields") or schema.get("x-kubernetes-embedded-resource")
        out = {}
        for k, v in value.items():
            if root and k in ("apiVersion", "kind", "metadata"):
                out[k] = v
                continue
            sub = props.get(k) if k in props else (addl if isinstance(addl, dict) else None)
            if sub is None:
                if addl is True or keep:
                    out[k] = v
                else:
                    pruned.append(_join(path, k))
                continue
            if v is None and not sub.get("nullable"):
                continue
            out[k] = prune(v, sub, _join(path, k), pruned)
        return out
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [prune(v, schema["items"], f"{path}[{i}]", pruned) for i, v in enumerate(value)]
    return value


def apply_defaults(value, schema):
    if not isinstance(schema, dict):
        return value
    if isinstance(value, dict):
        for k, sub in (schema.get("properties") or {}).items():
            if k not in value and "default" in sub:
                value[k] = copy.deepcopy(sub["default"])
            if k in value:
                value[k] = apply_defaults(value[k], sub)
        addl = schema.get("additionalProperties")
        if isinstance(addl, dict):
            for k in value:
                if not (schema.get("properties") or {}).get(k):
                    value[k] = apply_defaults(value[k], addl)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [apply_defaults(v, schema["items"]) for v in value]
    return value


# ---------------------------------------------------------------- validation

_INT_RANGES = {"int32": (-2**31, 2**31 - 1), "int64": (-2**63, 2**63 - 1)}


def _valid_format(fmt, v):
    if fmt in _INT_RANGES and isinstance(v, int):
        lo, hi = _INT_RANGES[fmt]
        return lo <= v <= hi
    if not isinstance(v, str):
        return True
    if fmt == "date-time":
        try:
            datetime.fromisoformat(v.replace("Z", "+00:00"))
            return "T" in v or "t" in v
        except ValueError:
            return False
    if fmt == "date":
        return re.fullmatch(r"\d{4}-\d{2}-\d{2}", v) is not None
    if fmt == "uuid":
        return re.fullmatch(r"[0-9a-fA-F]{8}-([0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}", v) is not None
    if fmt == "byte":
        return re.fullmatch(r"[A-Za-z0-9+/]*={0,2}", v) is not None
    return True


def _type_ok(schema, v):
    t = schema.get("type")
    if schema.get("x-kubernetes-int-or-string"):
        return (isinstance(v, int) and not isinstance(v, bool)) or isinstance(v, str)
    if t is None:
        return True
    return {"object": lambda: isinstance(v, dict),
            "array": lambda: isinstance(v, list),
            "string": lambda: isinstance(v, str),
            # a float with an integral value is an integer (kube-openapi's IsFloat64AJSONInteger)
            "integer": lambda: (isinstance(v, int) and not isinstance(v, bool)) or (
                isinstance(v, float) and v.is_integer()),
            "number": lambda: isinstance(v, (int, float)) and not isinstance(v, bool),
            "boolean": lambda: isinstance(v, bool)}.get(t, lambda: True)()


def _shown(path):
    return path or "<nil>"


def validate_value(v, schema, path, errs):
    """The OpenAPI value validations of one node (not its children)."""
    p = _shown(path)
    if v is None:
        if not schema.get("nullable"):
            errs.append(FieldError("typeinvalid", p, f'{p} in body must be of type {schema.get("type", "object")}: "null"', "null"))
        return False
    if not _type_ok(schema, v):
        want = "integer-or-string" if schema.get("x-kubernetes-int-or-string") else schema.get("type")
        errs.append(FieldError("typeinvalid", p, f'{p} in body must be of type {want}: "{_type_name(v)}"', _type_name(v)))
        return False
    if "enum" in schema and v not in schema["enum"]:
        errs.append(FieldError("unsupported", p, "supported values: " + ", ".join(
            f'"{e}"' if isinstance(e, str) else str(e) for e in schema["enum"]), v))
    fmt = schema.get("format")
    if fmt and not _valid_format(fmt, v):
        errs.append(FieldError("invalid", p, f"{p} in body must be of type {fmt}: {v!r}", v))
    if isinstance(v, str):
        if schema.get("pattern") and re.search(schema["pattern"], v) is None:
            errs.append(FieldError("invalid", p, f"{p} in body should match '{schema['pattern']}'", v))
        if schema.get("maxLength") is not None and len(v) > schema["maxLength"]:
            errs.append(FieldError("toolong", p, f"may not be more than {schema['maxLength']} bytes", v))
        if schema.get("minLength") is not None and len(v) < schema["minLength"]:
            errs.append(FieldError("invalid", p, f"{p} in body should be at least {schema['minLength']} chars long", v))
    if isinstance(v, (int, float)) and not isinstance(v, bool) and schema.get("type") in ("integer", "number"):
        lo, hi = schema.get("minimum"), schema.get("maximum")
        if lo is not None and (v < lo or (schema.get("exclusiveMinimum") and v == lo)):
            word = "greater than" if schema.get("exclusiveMinimum") else "greater than or equal to"
            errs.append(FieldError("invalid", p, f"{p} in body should be {word} {lo}", v))
        if hi is not None and (v > hi or (schema.get("exclusiveMaximum") and v == hi)):
            word = "less than" if schema.get("exclusiveMaximum") else "less than or equal to"
            errs.append(FieldError("invalid", p, f"{p} in body should be {word} {hi}", v))
        if schema.get("multipleOf") and Fraction(str(v)) % Fraction(str(schema["multipleOf"])) != 0:
            errs.append(FieldError("invalid", p, f"{p} in body should be a multiple of {schema['multipleOf']}", v))
    if isinstance(v, list):
        if schema.get("maxItems") is not None and len(v) > schema["maxItems"]:
            errs.append(FieldError("toomany", p, f"{len(v)}: must have at most {schema['maxItems']} items"))
        if schema.get("minItems") is not None and len(v) < schema["minItems"]:
            errs.append(FieldError("invalid", p, f"{p} in body should have at least {schema['minItems']} items", len(v)))
        lt = schema.get("x-kubernetes-list-type")
        if lt == "set":
            seen = []
            for i, x in enumerate(v):
                if x in seen:
                    errs.append(FieldError("duplicate", f"{path}[{i}]", "", x))
                seen.append(x)
        elif lt == "map":
            keys = schema.get("x-kubernetes-list-map-keys") or []
            seen = []
            for i, x in enumerate(v):
                k = tuple((x or {}).get(kk) for kk in keys) if isinstance(x, dict) else x
                if k in seen:
                    errs.append(FieldError("duplicate", f"{path}[{i}]", "", dict(zip(keys, k)) if isinstance(k, tuple) else k))
                seen.append(k)
    if isinstance(v, dict):
        for r in schema.get("required") or []:
            if r not in v:
                errs.append(FieldError("required", _join(path, r), ""))
        if schema.get("maxProperties") is not None and len(v) > schema["maxProperties"]:
            errs.append(FieldError("toomany", p, f"{len(v)}: must have at most {schema['maxProperties']} items"))
        if schema.get("minProperties") is not None and len(v) < schema["minProperties"]:
            errs.append(FieldError("invalid", p, f"{p} in body should have at least {schema['minProperties']} properties", len(v)))
    for sub in schema.get("allOf") or []:
        validate_value(v, dict(sub, type=sub.get("type")), path, errs)
    if schema.get("anyOf"):
        if not any(not _collect(v, sub, path) for sub in schema["anyOf"]):
            errs.append(FieldError("invalid", p, f"{p} in body must match at least one schema in anyOf", _type_name(v)))
    if schema.get("oneOf"):
        n = sum(1 for sub in schema["oneOf"] if not _collect(v, sub, path))
        if n != 1:
            errs.append(FieldError("invalid", p, f"{p} in body must match exactly one schema in oneOf", _type_name(v)))
    if schema.get("not") and not _collect(v, schema["not"], path):
        errs.append(FieldError("invalid", p, f"{p} in body should not match the schema in not", _type_name(v)))
    return True


def _collect(v, schema, path):
    errs = []
    validate_value(v, dict(schema, nullable=True), path, errs)
    return errs


def _old_item(old_list, item, schema):
    """Correlates a list item with its old value (map lists only)."""
    if schema.get("x-kubernetes-list-type") != "map" or not isinstance(old_list, list) or not isinstance(item, dict):
        return _MISSING
    keys = schema.get("x-kubernetes-list-map-keys") or []
    for o in old_list:
        if isinstance(o, dict) and all(o.get(k) == item.get(k) for k in keys):
            return o
    return _MISSING


def validate(v, old, schema, path, errs, root=False):
    """Schema and CEL validation of `v` (old is its correlated old value or _MISSING)."""
    if schema is None:
        return
    if old is not _MISSING and v == old:
        return  # ratcheting: an unchanged value is not validated again
    if root:
        if not isinstance(v, dict):
            errs.append(FieldError("typeinvalid", "<nil>", "must be of type object", _type_name(v)))
            return
        for r in schema.get("required") or []:
            if r not in v:
                errs.append(FieldError("required", r, ""))
    elif not validate_value(v, schema, path, errs) or v is None:
        return
    if isinstance(v, dict):
        props = schema.get("properties") or {}
        addl = schema.get("additionalProperties")
        for k, x in v.items():
            if root and k in ("apiVersion", "kind", "metadata"):
                continue
            sub = props.get(k) if k in props else (addl if isinstance(addl, dict) else None)
            o = old.get(k, _MISSING) if isinstance(old, dict) else _MISSING
            validate(x, o, sub, _join(path, k), errs)
    elif isinstance(v, list) and isinstance(schema.get("items"), dict):
        for i, x in enumerate(v):
            validate(x, _old_item(old, x, schema), schema["items"], f"{path}[{i}]", errs)
    run_rules(v, old, schema, path, errs, root)


def run_rules(v, old, schema, path, errs, root):
    rules = schema.get("x-kubernetes-validations") or []
    if not rules:
        return
    self_value = v
    if root and isinstance(v, dict):
        meta = v.get("metadata") or {}
        self_value = dict(v, metadata={k: meta[k] for k in ("name", "generateName") if k in meta})
    old_value = old
    if root and isinstance(old, dict):
        ometa = old.get("metadata") or {}
        old_value = dict(old, metadata={k: ometa[k] for k in ("name", "generateName") if k in ometa})
    for rule in rules:
        text = rule.get("rule", "")
        transition = _OLDSELF.search(text) is not None
        if transition and old is _MISSING:
            continue
        ok = RULES.run(text, self_value, old_value if transition else _MISSING)
        if ok is True:
            continue
        message = rule.get("message") or f"failed rule: {text}"
        if ok is not False:
            message = ok
        fpath = path
        if rule.get("fieldPath"):
            fp = rule["fieldPath"]
            fpath = (path + fp) if fp.startswith(("[", ".")) and path else fp.lstrip(".")
        kind = _REASONS.get(rule.get("reason") or "FieldValueInvalid", "invalid")
        shown = _shown(fpath)
        if kind == "invalid":
            errs.append(FieldError("invalid", shown, message, schema.get("type", "object")))
        else:
            errs.append(FieldError(kind, shown, message))


class CrdVersion:
    """One served version of a CRD, with its schema."""

    def __init__(self, kind, group, schema):
        self.pruned = []  # the unknown fields the last admit dropped
        self.kind = kind
        self.group = group
        self.schema = schema or {}

    def admit(self, obj, old, strict):
        """Prunes, defaults and validates `obj` (old: the stored object on update)."""
        pruned = []
        obj = prune(obj, self.schema, "", pruned, root=True)
        if pruned and strict:
            raise ApiError(400, "BadRequest", "strict decoding error: " + ", ".join(
                f'unknown field "{p}"' for p in pruned))
        self.pruned = pruned
        obj = apply_defaults(obj, self.schema)
        errs = []
        validate(obj, old if old is not None else _MISSING, self.schema, "", errs, root=True)
        if errs:
            raise invalid(self.kind, self.group, (obj.get("metadata") or {}).get("name", ""), errs)
        return obj
