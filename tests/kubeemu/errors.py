"""API errors rendered as ``Status`` objects, the way clients parse them."""

from __future__ import annotations

from typing import Any

REASONS: dict[int, str] = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    410: "Expired",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


def status_body(
    code: int,
    message: str,
    reason: str | None = None,
    details: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A ``Failure`` Status, as every API error body is."""
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason or REASONS.get(code, "Unknown"),
        "code": code,
    }
    if details:
        body["details"] = details
    return body


class ApiError(Exception):
    """An error that the server answers with a Status object and an HTTP code."""

    def __init__(
        self,
        code: int,
        message: str,
        reason: str | None = None,
        details: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason or REASONS.get(code, "Unknown")
        self.details = details
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        """The Status object for the response body."""
        return status_body(self.code, self.message, self.reason, self.details)

    @classmethod
    def not_found(cls, plural: str, name: str, group: str = "") -> ApiError:
        """``pods "x" not found``."""
        what = f"{plural}.{group}" if group else plural
        return cls(404, f'{what} "{name}" not found', "NotFound",
                   {"name": name, "group": group, "kind": plural})

    @classmethod
    def already_exists(cls, plural: str, name: str, group: str = "") -> ApiError:
        """``pods "x" already exists``."""
        what = f"{plural}.{group}" if group else plural
        return cls(409, f'{what} "{name}" already exists', "AlreadyExists",
                   {"name": name, "group": group, "kind": plural})

    @classmethod
    def conflict(cls, plural: str, name: str, why: str, group: str = "") -> ApiError:
        """``Operation cannot be fulfilled on pods "x": why``."""
        what = f"{plural}.{group}" if group else plural
        return cls(409, f'Operation cannot be fulfilled on {what} "{name}": {why}', "Conflict",
                   {"name": name, "group": group, "kind": plural})

    @classmethod
    def forbidden(cls, plural: str, name: str, why: str, group: str = "") -> ApiError:
        """``pods "x" is forbidden: why`` (admission refusals)."""
        what = f"{plural}.{group}" if group else plural
        return cls(403, f'{what} "{name}" is forbidden: {why}', "Forbidden",
                   {"name": name, "group": group, "kind": plural})

    @classmethod
    def stale(cls, plural: str, name: str, group: str = "") -> ApiError:
        """The optimistic-concurrency conflict."""
        return cls.conflict(plural, name, "the object has been modified; please apply your "
                            "changes to the latest version and try again", group)

    @classmethod
    def bad_request(cls, message: str) -> ApiError:
        """A malformed request."""
        return cls(400, message, "BadRequest")

    @classmethod
    def invalid(cls, kind: str, name: str, message: str | list[str],
                group: str = "") -> ApiError:
        """A semantically invalid object (422); several causes are listed in brackets."""
        causes = [message] if isinstance(message, str) else message
        text = causes[0] if len(causes) == 1 else "[" + ", ".join(causes) + "]"
        what = f"{kind}.{group}" if group else kind
        details: dict[str, Any] = {"name": name, "kind": kind, "causes": [
            {"reason": "FieldValueInvalid", "message": c, "field": c.split(":", 1)[0]}
            for c in causes]}
        if group:
            details["group"] = group
        return cls(422, f'{what} "{name}" is invalid: {text}', "Invalid", details)

    @classmethod
    def expired(cls, message: str) -> ApiError:
        """A resourceVersion or continue token older than the retained history (410)."""
        return cls(410, message, "Expired")
