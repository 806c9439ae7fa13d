"""The trainer's config: a typed dataclass per component, defaults, presets, `--key=value`.

    python -m trainer --out runs/demo --preset demo --steps=400 --shuffle=mixed

Presets are tiny TOML files in `trainer/presets/` that override a few fields. Unknown keys,
mistyped values and values outside a field's choices are errors (nanoGPT's configurator,
torchtitan's checked `Literal`s), so a typo never silently trains the wrong thing. Each field
carries its meaning (`setting(default, meaning)`), which `python -m trainer --help` prints.
"""

from __future__ import annotations

import dataclasses
import difflib
import tomllib
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from .errors import TrainerError

PRESET_DIR = Path(__file__).parent / "presets"


def setting(default: object, meaning: str) -> object:
    """A field with its default and its meaning, the one text `--help` shows (list fields
    spell out `field(default_factory=..., metadata={"help": ...})`)."""
    return field(default=default, metadata={"help": meaning})


@dataclass
class RunConfig:
    out: str = setting("", "run folder (required); its parent also holds .target-cache/")
    seed: int = setting(0, "one seed for corpus, model init, batch order, anchors and noise")
    steps: int = setting(300, "optimizer steps of the whole run (sets the LR and noise schedules)")
    stop_after: int = setting(
        0, "end this attempt after this step (a simulated preemption); 0 = never")
    threads: int = setting(
        0, "torch threads per process; 0 = cores / (processes * (1 + prefetch_workers))")
    device: Literal["auto", "cpu", "cuda"] = setting("auto", "auto = cuda when available")
    attn: Literal["auto", "flash", "sdpa"] = setting(
        "auto", "flash-attn on CUDA, else PyTorch SDPA")
    deterministic: bool = setting(
        False, "deterministic kernels (slower on a GPU): a resumed run then equals a straight "
        "one bit for bit on CUDA too (CPU runs always do)")


@dataclass
class CorpusConfig:
    """The synthetic "completions" (see corpus.py); with the seed, all the target learns from."""

    corpus_size: int = setting(4000, "completions; sets the epoch length")
    vocab_size: int = setting(256, "tokens, incl. 3 specials (pad, mask, bos)")
    min_len: int = setting(16, "tokens; must exceed block_size")
    max_len: int = setting(256, "tokens; the long tail is clipped here")
    phrases: int = setting(
        48, "distinct phrases the corpus is built from (its learnable structure)")


@dataclass
class BatchConfig:
    bucket_bounds: list[int] = field(default_factory=lambda: [24, 32, 40, 48, 64, 256], metadata={
        "help": "max length of each of the six buckets, ascending; the last must be >= "
        "max_len. The wide last bucket holds half the tokens, so ~55% of batches come from "
        "it (seed: 52%)"})
    token_budget: int = setting(2048, "padded tokens per micro-batch (seed: 49152 on a GPU)")
    max_batch_size: int = setting(64, "sequences per micro-batch at most (seed: 64)")
    grad_accum: int = setting(4, "micro-batches per optimizer step (seed: 4)")
    shuffle: Literal["bucketed", "mixed"] = setting(
        "bucketed", "order of an epoch's batches; mixed = the fix, see buckets.py")
    prefetch_workers: int = setting(1, "threads running the target forward ahead of the loop")
    queue_size: int = setting(
        4, "hidden-state queue bound (micro-batches); hs_queue_depth <= this")


@dataclass
class TargetConfig:
    """The frozen target LM, pre-trained once and cached under a hash of this whole section
    (plus the seed and the corpus section): a field added here keys the cache by itself."""

    target_dim: int = setting(96, "target model width")
    target_layers: int = setting(4, "target transformer blocks")
    target_heads: int = setting(4, "target attention heads")
    target_pretrain_steps: int = setting(
        300, "optimizer steps of the target's one-off pre-training")
    target_lr: float = setting(3e-3, "the target's pre-training learning rate")


@dataclass
class DrafterConfig:
    hidden_layers: list[int] = field(default_factory=lambda: [1, 2, 4], metadata={
        "help": "target layers (1-based block outputs) whose hidden states the drafter sees"})
    block_size: int = setting(
        8, "tokens per drafted block: the anchor then block_size-1 masks")
    anchors: int = setting(4, "blocks (anchor positions) sampled per sequence")
    drafter_dim: int = setting(96, "drafter model width")
    drafter_layers: int = setting(2, "drafter transformer blocks")
    drafter_heads: int = setting(4, "drafter attention heads")


@dataclass
class OptimizerConfig:
    lr: float = setting(2e-3, "peak learning rate (AdamW)")
    min_lr_ratio: float = setting(0.1, "cosine decays to lr * this")
    warmup_steps: int = setting(20, "linear warm-up, optimizer steps")
    weight_decay: float = setting(0.01, "AdamW weight decay")
    grad_clip: float = setting(1.0, "max global grad norm; 0 = off")


@dataclass
class LossConfig:
    kl_weight: float = setting(1.0, "weight of KL(target soft labels || drafter)")
    ce_weight: float = setting(0.5, "weight of cross-entropy to the target's top token")
    decay: float = setting(
        0.8, "position weight = decay ** (i-1) along the block (later = less sure)")
    streak_alpha: float = setting(
        0.0, "0..1: share of weight given by the drafter's acceptance odds")
    noise_start: float = setting(
        0.1, "noise_std at step 0 (uniform noise on target hidden states)")
    noise_end: float = setting(0.0, "noise_std at the last step (linear schedule)")


@dataclass
class CheckpointConfig:
    ckpt_every: int = setting(0, "optimizer steps between saves; 0 = no checkpoints")
    ckpt_mode: Literal["blocking", "async"] = setting(
        "blocking", "async = copy, then write in a thread")
    keep: int = setting(2, "checkpoints kept on disk; older ones are deleted")
    storage_mbps: float = setting(
        0.0, "simulated storage speed in MB/s (10^6 bytes/s); 0 = full speed")
    resume: str = setting("", 'checkpoint file, run folder or "latest" (= newest in --out/ckpt)')


@dataclass
class LoggingConfig:
    log_every_s: float = setting(2.0, "a metrics line every this many seconds (the seed: 10 s)")
    log_every_steps: int = setting(
        0, "if > 0: a line every this many steps instead (exact, for tests)")
    fault: str = setting(
        "", "injected faults, comma-separated: nan@STEP, stall@STEP:S, lr-spike@STEP:F")
    progress: Literal["auto", "on", "off"] = setting(
        "auto", "tqdm bar on stderr; auto = only on a TTY")
    system_metrics: bool = setting(
        True, "sample CPU, memory, disk, network and GPUs into system.jsonl every 2 s "
        "(needs psutil; nvidia-ml-py for GPUs)")


@dataclass
class Config:
    """One config composed of a section per component (torchtitan's JobConfig). Field names
    are unique across sections, so every setting keeps one flat flag: `--ckpt-every`."""

    run: RunConfig = field(default_factory=RunConfig)
    corpus: CorpusConfig = field(default_factory=CorpusConfig)
    batch: BatchConfig = field(default_factory=BatchConfig)
    target: TargetConfig = field(default_factory=TargetConfig)
    drafter: DrafterConfig = field(default_factory=DrafterConfig)
    optimizer: OptimizerConfig = field(default_factory=OptimizerConfig)
    loss: LossConfig = field(default_factory=LossConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    logging: LoggingConfig = field(default_factory=LoggingConfig)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


SECTIONS: dict[str, type] = {f.name: f.default_factory for f in dataclasses.fields(Config)}
SECTION_OF = {f.name: name for name, cls in SECTIONS.items() for f in dataclasses.fields(cls)}
FIELDS = {f.name: f for cls in SECTIONS.values() for f in dataclasses.fields(cls)}
HINTS = {k: v for cls in SECTIONS.values() for k, v in typing.get_type_hints(cls).items()}


def coerce(key: str, value: object) -> object:
    """`value` (a CLI string or a TOML value) as the type of field `key`, or a TrainerError."""
    hint = HINTS[key]
    try:
        return _coerce(hint, value)
    except (TypeError, ValueError) as exc:
        raise TrainerError(f"--{key.replace('_', '-')}: {exc}") from None


def _coerce(hint: object, value: object) -> object:
    origin = typing.get_origin(hint)
    if origin is Literal:
        choices = typing.get_args(hint)
        if value not in choices:
            raise ValueError(f"got {value!r}, expected one of {', '.join(choices)}")
        return value
    if origin is list:
        (item,) = typing.get_args(hint)
        items = value.split(",") if isinstance(value, str) else value
        if not isinstance(items, list):
            raise TypeError(f"expected a list, got {value!r}")
        return [_coerce(item, v.strip() if isinstance(v, str) else v) for v in items]
    if hint is bool:
        if isinstance(value, bool):
            return value
        if str(value).lower() in ("1", "true", "yes", "on"):
            return True
        if str(value).lower() in ("0", "false", "no", "off"):
            return False
        raise ValueError(f"expected true or false, got {value!r}")
    if isinstance(value, bool) or (hint is int and isinstance(value, float)):
        raise TypeError(f"expected {hint.__name__}, got {value!r}")
    if hint in (int, float):
        try:
            return hint(value)
        except ValueError:
            raise ValueError(f"expected {hint.__name__}, got {value!r}") from None
    if hint is str:
        if not isinstance(value, str):
            raise TypeError(f"expected a string, got {value!r}")
        return value
    raise TypeError(f"unsupported field type {hint}")


def check_key(key: str) -> str:
    name = key.replace("-", "_")
    if name not in FIELDS:
        close = difflib.get_close_matches(name, FIELDS, n=1)
        hint = f"; did you mean --{close[0].replace('_', '-')}?" if close else ""
        raise TrainerError(
            f"unknown setting --{key}{hint} (python -m trainer --help lists them all)")
    return name


def presets() -> list[str]:
    return sorted(p.stem for p in PRESET_DIR.glob("*.toml"))


def load_preset(name: str) -> dict:
    path = PRESET_DIR / f"{name}.toml"
    if not path.is_file():
        raise TrainerError(f"unknown preset {name!r}; choose one of: {', '.join(presets())}")
    with path.open("rb") as handle:
        table = tomllib.load(handle)
    return {check_key(k): coerce(check_key(k), v) for k, v in table.items()}


def make_config(preset: str | None = None, **overrides: object) -> Config:
    """A checked Config: defaults, then the preset, then overrides (Python values or strings)."""
    values = load_preset(preset) if preset else {}
    for key, value in overrides.items():
        name = check_key(key)
        values[name] = coerce(name, value)
    grouped: dict[str, dict] = {name: {} for name in SECTIONS}
    for name, value in values.items():
        grouped[SECTION_OF[name]][name] = value
    config = Config(**{name: cls(**grouped[name]) for name, cls in SECTIONS.items()})
    validate(config)
    return config


def parse_args(argv: list[str]) -> Config:
    """`--out DIR --preset NAME --key=value --key value ...` as a checked Config."""
    pairs, i = [], 0
    while i < len(argv):
        arg = argv[i]
        if not arg.startswith("--"):
            raise TrainerError(f"unexpected argument {arg!r}; settings look like --key=value")
        key, eq, value = arg[2:].partition("=")
        if not eq:
            if i + 1 >= len(argv):
                raise TrainerError(f"--{key} needs a value: --{key}=VALUE")
            value, i = argv[i + 1], i + 1
        pairs.append((key, value))
        i += 1
    preset = next((v for k, v in reversed(pairs) if k == "preset"), None)  # the last one wins
    overrides = {k: v for k, v in pairs if k != "preset"}
    return make_config(preset, **overrides)


def validate(config: Config) -> None:
    """Cross-field checks, each naming the setting to change."""
    run, corpus, batch, target, drafter = (
        config.run, config.corpus, config.batch, config.target, config.drafter)
    if not run.out:
        raise TrainerError("no run folder given; pass --out runs/NAME")
    bounds = batch.bucket_bounds
    if len(bounds) != 6 or sorted(bounds) != bounds:
        raise TrainerError("--bucket-bounds needs six ascending lengths, e.g. 24,32,48,64,128,256")
    if bounds[-1] < corpus.max_len:
        raise TrainerError("--bucket-bounds: the last bound must be >= --max-len")
    if corpus.min_len <= drafter.block_size:
        raise TrainerError("--min-len must exceed --block-size (a block needs room after it)")
    if batch.token_budget < corpus.max_len:
        raise TrainerError("--token-budget must hold one sequence of --max-len tokens")
    if not all(1 <= h <= target.target_layers for h in drafter.hidden_layers):
        raise TrainerError(
            f"--hidden-layers must lie in 1..{target.target_layers} (--target-layers)")
    if target.target_dim % target.target_heads or drafter.drafter_dim % drafter.drafter_heads:
        raise TrainerError("model widths must be divisible by their head counts")
    positive = ("steps", "grad_accum", "max_batch_size", "queue_size", "keep", "anchors")
    for name in (*positive, "prefetch_workers"):
        if value_of(config, name) < 1:
            raise TrainerError(f"--{name.replace('_', '-')} must be at least 1")
    if not 0.0 <= config.loss.streak_alpha <= 1.0:
        raise TrainerError("--streak-alpha must lie in 0..1")


def value_of(config: Config, name: str) -> object:
    """The value of the setting `name`, wherever its section is."""
    return getattr(getattr(config, SECTION_OF[name]), name)
