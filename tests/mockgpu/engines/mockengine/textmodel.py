# -*- coding: utf-8 -*-
# Copyright (c) 2026, llmops.specdec developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fake tokenizer and fake text: words are tokens, everything derives from the prompt."""
import hashlib
import random
import re

_TOKEN_RE = re.compile(r"\w+|[^\w\s]")
_WORD_RE = re.compile(r"[a-z0-9']+")

# Output vocabulary: each emitted token is " <word>", so a client that retokenizes
# the text by words counts exactly the tokens the engine reports in `usage`.
VOCAB = (
    "the of and to in is that for it as with was on be by this are from at or an "
    "which one all we can there their has more its about also than into only other "
    "new some could these two may first then do any like my now over such our man me "
    "even most made after well way many back just value step result model token data"
).split()


def count_tokens(text):
    return max(1, len(_TOKEN_RE.findall(text or "")))


def repetitiveness(text, n=3):
    """Fraction of word n-grams that already occurred earlier in the same text, in [0, 1].

    N-gram lookup can only propose a continuation it has seen in the context, so a
    prompt whose text repeats itself (logs, code to edit, a document to quote) gets
    high acceptance while a fresh question gets almost none.
    """
    words = _WORD_RE.findall((text or "").lower())
    if len(words) < n + 1:
        return 0.0
    seen = set()
    repeated = 0
    total = 0
    for i in range(len(words) - n + 1):
        gram = tuple(words[i:i + n])
        total += 1
        if gram in seen:
            repeated += 1
        seen.add(gram)
    return repeated / total


def request_rng(text, seed=None):
    """Deterministic PRNG per prompt (and optional request seed)."""
    digest = hashlib.sha256(("%s\x00%s" % (seed, text)).encode("utf-8", "replace")).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def eos_position(text, lo, hi):
    """Where the fake model would emit EOS for this prompt (used unless ignore_eos)."""
    rng = request_rng(text, seed="eos")
    return rng.randint(int(lo), max(int(lo), int(hi)))


def words(rng, count):
    return [" " + VOCAB[rng.randrange(len(VOCAB))] for _i in range(count)]


def prompt_share(text):
    """A number in [0, 1) fixed by the prompt: picks the prompts a share-limited fault applies to."""
    digest = hashlib.sha256(("share\x00%s" % text).encode("utf-8", "replace")).digest()
    return int.from_bytes(digest[:4], "big") / float(1 << 32)


def other_word(word, rng):
    """A word of the vocabulary other than ``word`` (a diverging token)."""
    index = VOCAB.index(word.strip()) if word.strip() in VOCAB else 0
    return " " + VOCAB[(index + 1 + rng.randrange(len(VOCAB) - 1)) % len(VOCAB)]
