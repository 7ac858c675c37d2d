"""metav1.Status errors as the real API server writes them.

Field errors follow k8s.io/apimachinery/pkg/util/validation/field: each has a
type (the `reason` of its cause), a dotted field path and a detail; a 422
Invalid names the object and lists the causes.
"""

import json


class ApiError(Exception):
    def __init__(self, code, reason, message, details=None, headers=None):
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details or {}
        self.headers = headers or {}

    def status(self):
        return {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "details": self.details,
            "code": self.code,
        }


# field.ErrorType → (cause reason, the words the error string uses)
_TYPES = {
    "invalid": ("FieldValueInvalid", "Invalid value"),
    "required": ("FieldValueRequired", "Required value"),
    "forbidden": ("FieldValueForbidden", "Forbidden"),
    "unsupported": ("FieldValueNotSupported", "Unsupported value"),
    "toolong": ("FieldValueTooLong", "Too long"),
    "toomany": ("FieldValueTooMany", "Too many"),
    "typeinvalid": ("FieldValueTypeInvalid", "Invalid value"),
    "duplicate": ("FieldValueDuplicate", "Duplicate value"),
}

OMIT = object()  # field.OmitValueType: the value is left out of the message


class FieldError:
    def __init__(self, kind, path, detail, value=OMIT):
        self.kind = kind
        self.path = path
        self.detail = detail
        self.value = value

    def text(self):
        reason, words = _TYPES[self.kind]
        if self.kind in ("required", "forbidden", "toolong", "toomany") or self.value is OMIT:
            body = f"{words}: {self.detail}" if self.detail else words
        else:
            body = f"{words}: {json.dumps(self.value)}"
            if self.detail:
                body += f": {self.detail}"
        return f"{self.path}: {body}"

    def cause(self):
        reason, _ = _TYPES[self.kind]
        return {"reason": reason, "message": self.text().split(": ", 1)[1], "field": self.path}

    def __repr__(self):
        return self.text()


def invalid(kind, group, name, errors):
    """A 422 Invalid for `errors` (FieldError list) on object `name`."""
    qualified = f"{kind}.{group}" if group else kind
    texts = [e.text() for e in errors]
    listed = texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"
    return ApiError(422, "Invalid", f'{qualified} "{name}" is invalid: {listed}',
                    {"name": name, "group": group, "kind": kind, "causes": [e.cause() for e in errors]})
