"""core/v1 Secret defaulting and validation.

Upstream (kubernetes/kubernetes):
- pkg/apis/core/v1/conversion.go, Convert_v1_Secret_To_core_Secret:
  stringData is merged into data (stringData wins) and never stored;
- pkg/apis/core/v1/defaults.go, SetDefaults_Secret: an empty type is Opaque;
- pkg/apis/core/validation/validation.go, ValidateSecret: every data key is a
  ConfigMap key (IsConfigMapKey: [-._a-zA-Z0-9]+, at most 253 characters,
  not "." or ".." nor starting with ".."); the data together at most
  MaxSecretSize (1 MiB); type kubernetes.io/tls requires the keys tls.crt and
  tls.key (the values are not checked, "TODO: Verify that the key matches the
  cert"); ValidateSecretUpdate: type is immutable, and so are data and
  immutable itself once immutable is true.
A data value that is not base64 fails decoding (400 BadRequest), as the
JSON decoding of a []byte field does.
"""

import base64
import binascii
import re

from apierrors import ApiError, FieldError

MAX_SECRET_SIZE = 1024 * 1024
TLS = "kubernetes.io/tls"
_KEY = re.compile(r"[-._a-zA-Z0-9]+")


def prepare(secret):
    """Decoding and defaulting: stringData folded into data, type defaulted."""
    data = secret.get("data") or {}
    for key, value in (secret.pop("stringData", None) or {}).items():
        data[key] = base64.b64encode(str(value).encode()).decode()
    if data:
        secret["data"] = data
    if not secret.get("type"):
        secret["type"] = "Opaque"


def _size(secret):
    total = 0
    for key, value in (secret.get("data") or {}).items():
        try:
            total += len(base64.b64decode(value or "", validate=True))
        except (binascii.Error, ValueError, TypeError):
            raise ApiError(400, "BadRequest", f"illegal base64 data in Secret data[{key}]")
    return total


def _key_errors(key):
    msgs = []
    if len(key) > 253:
        msgs.append("must be no more than 253 characters")
    if not _KEY.fullmatch(key):
        msgs.append("a valid config key must consist of alphanumeric characters, '-', '_' or '.' "
                    "(e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is "
                    "'[-._a-zA-Z0-9]+')")
    if key == ".":
        msgs.append("must not be '.'")
    elif key == "..":
        msgs.append("must not be '..'")
    elif key.startswith(".."):
        msgs.append("must not start with '..'")
    return msgs


def validate(secret):
    errs = []
    data = secret.get("data") or {}
    for key in data:
        for msg in _key_errors(key):
            errs.append(FieldError("invalid", f"data[{key}]", msg, key))
    if _size(secret) > MAX_SECRET_SIZE:
        errs.append(FieldError("toolong", "data", f"must have at most {MAX_SECRET_SIZE} bytes"))
    if secret.get("type") == TLS:
        for key in ("tls.crt", "tls.key"):
            if key not in data:
                errs.append(FieldError("required", f"data[{key}]", ""))
    return errs


def validate_update(new, old):
    errs = validate(new)
    if new.get("type") != old.get("type"):
        errs.append(FieldError("invalid", "type", "field is immutable", new.get("type")))
    if old.get("immutable"):
        if not new.get("immutable"):
            errs.append(FieldError("forbidden", "immutable", "field is immutable when `immutable` is set"))
        if (new.get("data") or {}) != (old.get("data") or {}):
            errs.append(FieldError("forbidden", "data", "field is immutable when `immutable` is set"))
    return errs
