"""`nsys` stand-in command line: profile (and `profile --help`), launch/start/stop (sessions), export --type sqlite,
--version; `stats` and the rest unsupported. Like nsys, `profile` refuses an option it does not know (profile_help)."""

from __future__ import annotations

import sys
from pathlib import Path

VERSION = "NVIDIA Nsight Systems version 2025.3.1.90-fake"


def export(argv: list[str]) -> int:
    from nsys_standin.report import export_sqlite

    values: dict[str, str] = {}
    inputs: list[str] = []
    words = list(argv)
    short = {"-t": "type", "-o": "output", "-f": "force-overwrite"}
    while words:
        word = words.pop(0)
        if word.startswith("--"):
            name, has_value, value = word[2:].partition("=")
            values[name] = value if has_value else (words.pop(0) if words else "")
        elif word in short:
            values[short[word]] = words.pop(0) if words else ""
        else:
            inputs.append(word)
    if values.get("type", "sqlite") != "sqlite":
        print(f"nsys stand-in: export --type {values['type']} is not supported (only sqlite)", file=sys.stderr)
        return 1
    if len(inputs) != 1:
        print("usage: nsys export --type sqlite [-o OUT.sqlite] [--force-overwrite true] REPORT.nsys-rep",
              file=sys.stderr)  # fmt: skip
        return 1
    report = Path(inputs[0])
    output = Path(values.get("output") or report.with_suffix(".sqlite"))
    if output.exists() and values.get("force-overwrite", "false").lower() not in ("true", "1"):
        print(f"ERROR: {output} already exists. Use --force-overwrite true to overwrite it.", file=sys.stderr)
        return 1
    try:
        export_sqlite(report, output)
    except (OSError, ValueError) as error:
        print(f"nsys stand-in: cannot export {report}: {error}", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] in (["--version"], ["-v"]):
        print(VERSION)
        return 0
    if argv[:1] == ["profile"]:
        from nsys_standin.capture import CaptureSession
        from nsys_standin.options import LONG_WITH_VALUE, UsageError, split_profile
        from nsys_standin.profile_help import profile_help, refusal, unknown_option

        if argv[1:2] in (["--help"], ["-h"]) or (argv[1:2] and argv[1].startswith("--help=")):
            print(profile_help(), end="")
            return 0
        try:
            options = split_profile(argv[1:])
        except UsageError as error:
            print(f"nsys stand-in: {error}", file=sys.stderr)
            return 1
        unknown = unknown_option(options.options, LONG_WITH_VALUE)
        if unknown is not None:
            print(refusal(unknown), end="", file=sys.stderr)
            return 1
        try:
            session = CaptureSession(options, VERSION)
        except UsageError as error:
            print(f"nsys stand-in: {error}", file=sys.stderr)
            return 1
        return session.run()
    if argv[:1] == ["export"]:
        return export(argv[1:])
    if argv[:1] == ["launch"]:
        from nsys_standin.sessions import launch

        return launch(argv[1:], VERSION)
    if argv[:1] in (["start"], ["stop"], ["shutdown"]):
        from nsys_standin.sessions import control

        return control(argv[0], argv[1:])
    if argv[:2] == ["sessions", "list"]:
        from nsys_standin.sessions import list_sessions

        return list_sessions(argv[2:])
    supported = "profile, launch, start, stop, shutdown, sessions list, export, --version"
    print(f"nsys stand-in: {' '.join(argv[:1]) or 'no command'} is not supported ({supported})", file=sys.stderr)
    return 1
