"""The one exception users see for bad profiling configuration."""


class ConfigError(ValueError):
    """Invalid profiling configuration: names the input, the value and the expected form."""

    def __init__(self, source: str, value: object, expected: str, detail: str = "") -> None:
        self.source = source
        self.value = value
        self.expected = expected
        reason = f": {detail}" if detail else ""
        super().__init__(f"{source}={value!r} is invalid{reason}. Expected {expected}.")
