"""Writes the fixtures of this folder (run once; they are committed): python make.py

- two-writers/train_log.jsonl: two processes print every step, each a second or so after the
  other and each with its own elapsed clock (B started 4.3 s after A); both pause 60 s before
  step 200 (a real stall) and restart from a checkpoint at step 300 (the step back 210 to 91,
  the clocks reset).
- duplicate/train_log.jsonl: steps 1-100, step 50's line logged twice.
- out-of-order/train_log.jsonl: every 10 steps, the lines of steps 490 and 500 swapped at the
  epoch boundary (step 500 is epoch 1.0).
- epoch-reset/trainer_state.json: a Hugging Face state whose epoch falls back to about 0 twice
  while the step keeps rising (the run restarted with its global step kept).
"""

import json
import random
from pathlib import Path

HERE = Path(__file__).parent


def jsonl(name: str, lines: list[dict]) -> None:
    (HERE / name).mkdir(exist_ok=True)
    (HERE / name / "train_log.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))


def two_writers(rng: random.Random) -> list[dict]:
    lines, t = [], 0.0
    steps = list(range(1, 301)) + list(range(91, 401))
    for i, step in enumerate(steps):
        if i == 300:
            t = 0.0  # the restart: both processes start their clocks again
        t += 60.0 if step == 200 and i < 300 else 2.0 * rng.uniform(0.95, 1.05)
        loss = round(2.0 - step / 1000 + rng.uniform(-0.01, 0.01), 4)  # slow: the restart
        # takes it back 0.2, no spike
        lines.append({"step": step, "loss": loss, "elapsed_s": round(t + 4.3, 3)})
        lines.append({"step": step, "loss": loss, "elapsed_s": round(t + rng.uniform(0.8, 1.2),
                                                                     3)})
    return lines


def plain(steps: list[int], rng: random.Random, per_epoch: int | None = None) -> list[dict]:
    lines = []
    for step in steps:
        line = {"step": step, "loss": round(3.0 / (1 + step / 100) + rng.uniform(-0.01, 0.01), 4),
                "elapsed_s": round(step * 0.5, 2)}
        if per_epoch:
            line["epoch"] = round(step / per_epoch, 3)
        lines.append(line)
    return lines


def epoch_reset(rng: random.Random) -> dict:
    history, epoch = [], 0.0
    for step in range(10, 1510, 10):
        epoch = 0.02 if step in (510, 1010) else epoch + 0.02
        history.append({"epoch": round(epoch, 2), "grad_norm": round(rng.uniform(0.9, 1.1), 3),
                        "learning_rate": 5e-05, "loss": round(2.0 - step / 2000, 4), "step": step})
    return {"global_step": 1500, "max_steps": 1500, "log_history": history,
            "logging_steps": 10, "save_steps": 10000, "num_train_epochs": 3}


def main() -> None:
    rng = random.Random(19)
    jsonl("two-writers", two_writers(rng))
    dup = plain(list(range(1, 101)), rng)
    jsonl("duplicate", [*dup[:50], dup[49], *dup[50:]])
    steps = list(range(10, 1010, 10))
    steps[48], steps[49] = steps[49], steps[48]
    jsonl("out-of-order", plain(steps, rng, per_epoch=500))
    (HERE / "epoch-reset").mkdir(exist_ok=True)
    (HERE / "epoch-reset" / "trainer_state.json").write_text(
        json.dumps(epoch_reset(rng), indent=2) + "\n")


if __name__ == "__main__":
    main()
