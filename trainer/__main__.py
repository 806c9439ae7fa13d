"""`python -m trainer --out runs/NAME [--preset NAME] [--key=value ...]` (see docs/trainer.md)."""

from __future__ import annotations

import sys

from trainer.config import parse_args
from trainer.errors import TrainerError
from trainer.train import train


def main(argv: list[str] | None = None) -> int:
    try:
        train(parse_args(sys.argv[1:] if argv is None else argv))
    except TrainerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
