"""A deterministic synthetic corpus of "completions" with learnable structure.

Each completion is a BOS token followed by phrases (fixed token strings) chained by a sparse
Markov chain: inside a phrase the next token is certain, at a phrase end one of two successors
follows (75/25), and 2% of tokens are noise. So a language model can learn it, a drafter can
guess several tokens ahead, and accuracy rises as it learns. Lengths are long-tailed
(log-normal, clipped), like real completions, which is what makes length buckets uneven:

    >>> corpus = make_corpus(make_config(out="x", corpus_size=3))
    >>> [len(c) for c in corpus]
    [55, 125, 67]
"""

from __future__ import annotations

import numpy as np

from .config import Config

PAD, MASK, BOS = 0, 1, 2  # special token ids; ordinary tokens start at 3
NOISE = 0.02  # share of tokens replaced by a random token
FOLLOW = 0.75  # probability of a phrase's main successor


def make_phrases(config: Config, rng: np.random.Generator) -> list[np.ndarray]:
    sizes = rng.integers(2, 7, size=config.corpus.phrases)
    return [rng.integers(3, config.corpus.vocab_size, size=int(n)) for n in sizes]


def make_lengths(config: Config, rng: np.random.Generator) -> np.ndarray:
    # log-normal: median ~e^3.6 = 37 tokens, a tail reaching max_len (cf. the seed's bucket 5)
    raw = rng.lognormal(mean=3.6, sigma=0.75, size=config.corpus.corpus_size)
    return np.clip(raw.astype(np.int64), config.corpus.min_len, config.corpus.max_len)


def make_corpus(config: Config) -> list[np.ndarray]:
    """`corpus_size` int64 token arrays, the same for the same seed and corpus fields."""
    rng = np.random.default_rng([config.run.seed, 1234])
    phrases = make_phrases(config, rng)
    successors = rng.integers(0, config.corpus.phrases, size=(config.corpus.phrases, 2))
    corpus = []
    for length in make_lengths(config, rng):
        tokens = [BOS]
        phrase = int(rng.integers(config.corpus.phrases))
        while len(tokens) < length:
            tokens.extend(int(t) for t in phrases[phrase])
            phrase = int(successors[phrase, 0 if rng.random() < FOLLOW else 1])
        seq = np.array(tokens[:length], dtype=np.int64)
        noisy = rng.random(length) < NOISE
        noisy[0] = False
        seq[noisy] = rng.integers(3, config.corpus.vocab_size, size=int(noisy.sum()))
        corpus.append(seq)
    return corpus
