"""`python -m trainer --out runs/NAME [--preset NAME] [--key=value ...]` (see docs/trainer.md)."""

from __future__ import annotations

import dataclasses
import sys

from trainer.config import Config, parse_args, presets
from trainer.errors import TrainerError
from trainer.train import train


def usage() -> str:
    fields = "\n".join(f"  --{f.name.replace('_', '-')}={f.default!r}"
                       for f in dataclasses.fields(Config)
                       if f.default is not dataclasses.MISSING)
    return (f"usage: python -m trainer --out runs/NAME [--preset {'|'.join(presets())}] "
            f"[--key=value ...]\n\nsettings and their defaults (units and meaning: "
            f"docs/trainer.md):\n{fields}\n")


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
