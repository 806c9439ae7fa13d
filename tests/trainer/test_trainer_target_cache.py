"""The cached target is keyed by the whole config it is built from, not by a list of fields."""

from __future__ import annotations

import dataclasses

import pytest

from trainer.config import Config, CorpusConfig, TargetConfig, make_config
from trainer.target import cache_path, load_target


def changed(value: object) -> object:
    return value * 2 if isinstance(value, float) else value + 1


def with_field(config: Config, section: str, name: str, value: object) -> Config:
    part = dataclasses.replace(getattr(config, section), **{name: value})
    return dataclasses.replace(config, **{section: part})


BUILT_FROM = [("run", "seed")] + [
    (section, f.name) for section, cls in (("corpus", CorpusConfig), ("target", TargetConfig))
    for f in dataclasses.fields(cls)
]  # fmt: skip


@pytest.mark.parametrize(("section", "name"), BUILT_FROM)
def test_every_field_the_target_is_built_from_keys_the_cache(section, name):
    config = make_config("tiny", out="runs/x")
    other = with_field(config, section, name, changed(getattr(getattr(config, section), name)))
    assert cache_path(other) != cache_path(config)


def test_training_settings_share_one_cached_target():
    config = make_config("tiny", out="runs/x")
    for section, name in [("run", "steps"), ("optimizer", "lr"), ("batch", "grad_accum"),
                          ("drafter", "drafter_dim"), ("checkpoint", "keep")]:  # fmt: skip
        other = with_field(config, section, name, changed(getattr(getattr(config, section), name)))
        assert cache_path(other) == cache_path(config), name


def test_a_new_target_field_keys_the_cache_without_touching_any_list(tmp_path):
    # A field someone adds to the target later (here: dropout), with nothing else edited:
    # a target built with one value must not load as the target of another.
    grown = dataclasses.make_dataclass("GrownTarget", [("dropout", float, 0.0)],
                                       bases=(TargetConfig,))  # fmt: skip
    base = make_config("tiny", out=str(tmp_path / "run"), target_pretrain_steps=2)
    first = dataclasses.replace(base, target=grown(**dataclasses.asdict(base.target)))
    second = with_field(first, "target", "dropout", 0.1)
    assert load_target(first)[1]["cached"] is False
    assert load_target(first)[1]["cached"] is True
    facts = load_target(second)[1]
    assert facts["cached"] is False and facts["path"] != str(cache_path(first))
