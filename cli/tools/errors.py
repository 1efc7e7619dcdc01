"""The one error type of the operator tools."""


class ToolError(Exception):
    """Something the operator must fix or know (unknown topic, broker unreachable): one line, non-zero exit."""
