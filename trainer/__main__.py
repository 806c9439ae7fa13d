"""`python -m trainer --out runs/NAME [--preset NAME] [--key=value ...]`; `--help`: all keys."""

from __future__ import annotations

import dataclasses
import sys
import textwrap
import typing

from .config import HINTS, SECTIONS, parse_args, presets
from .errors import TrainerError
from .train import train


def flag(field: dataclasses.Field) -> str:
    default = field.default_factory() if field.default is dataclasses.MISSING else field.default
    shown = ",".join(map(str, default)) if isinstance(default, list) else default
    return f"--{field.name.replace('_', '-')}={shown}"


def describe(field: dataclasses.Field) -> str:
    """`  --key=default   meaning (one of ...)`, wrapped to 100 columns."""
    meaning = field.metadata["help"]
    hint = HINTS[field.name]
    if typing.get_origin(hint) is typing.Literal:
        meaning += f" (one of {', '.join(typing.get_args(hint))})"
    head = f"  {flag(field):<30} "
    return textwrap.fill(meaning, 100, initial_indent=head.ljust(33),
                         subsequent_indent=" " * 33, break_on_hyphens=False)


def usage() -> str:
    """Every setting with its default and meaning, grouped by section, from the dataclasses."""
    lines = [
        f"usage: python -m trainer --out runs/NAME [--preset {'|'.join(presets())}] "
        "[--key=value ...]",
        "",
        "Settings are --key=value or --key value ('-' = '_'); precedence: defaults, then",
        "--preset (a TOML file in trainer/presets/), then the other flags.",
    ]
    for name, section in SECTIONS.items():
        lines += ["", f"{name}:"]
        for field in dataclasses.fields(section):
            lines.append(describe(field))
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if {"-h", "--help"} & set(argv):
        sys.stdout.write(usage())
        return 0
    try:
        train(parse_args(argv))
    except TrainerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
