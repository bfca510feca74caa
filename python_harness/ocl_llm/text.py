"""Text: the character tokenizer, the corpus reader and TextData, which cuts the encoded corpus
into reproducible training and validation batches."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from .config import BUNDLED_CORPUS, DEFAULT_CONFIG, IDX_TYPE

TOKENIZER_CHARS = list("abcdefghijklmnopqrstuvwxyz0123456789 .,!?'\"-()\n") + list("äöüß")
UNK_DISPLAY = "_"


class TinyTokenizer:
    """Lower-cased characters: <pad> = 0, the 51 documented characters = 1..51, <unk> = 52."""

    def __init__(self, vocab: Optional[Dict[str, int]] = None,
                 inv_vocab: Optional[Dict[int, str]] = None):
        if vocab is None:
            vocab = {"<pad>": 0}
            for ch in TOKENIZER_CHARS:
                vocab[ch] = len(vocab)
            vocab["<unk>"] = len(vocab)
        self.vocab = dict(vocab)
        self.inv_vocab = {int(k): v for k, v in (inv_vocab or
                                                 {i: c for c, i in self.vocab.items()}).items()}
        self.pad_id = self.vocab["<pad>"]
        self.unk_id = self.vocab["<unk>"]
        self.vocab_size = len(self.vocab)

    def encode(self, text: str, max_len: Optional[int] = None) -> List[int]:
        ids = [self.vocab.get(ch, self.unk_id) for ch in text.lower()]
        if max_len is not None:
            ids = ids[:max_len] + [self.pad_id] * max(0, max_len - len(ids))
        return ids

    def decode(self, ids: Sequence[int]) -> str:
        out = []
        for i in ids:
            i = int(i)
            if i == self.pad_id:
                continue
            out.append(UNK_DISPLAY if i == self.unk_id else self.inv_vocab.get(i, UNK_DISPLAY))
        return "".join(out)

    def get_vocab(self) -> Dict[str, int]:
        return dict(self.vocab)

    def get_inv_vocab(self) -> Dict[int, str]:
        return dict(self.inv_vocab)


def read_corpus(data_file: str) -> Tuple[str, str]:
    """(text, path actually read); the default data file falls back to the bundled corpus."""
    path = Path(data_file)
    if not path.is_file():
        if data_file == DEFAULT_CONFIG["data_file"] and BUNDLED_CORPUS.is_file():
            print(f"[ocl] {data_file} not found; using the bundled corpus {BUNDLED_CORPUS}")
            path = BUNDLED_CORPUS
        else:
            raise FileNotFoundError(f"data file {data_file} not found")
    return path.read_text(encoding="utf-8"), str(path)


class TextData:
    """The encoded corpus cut into blocks; every k-th block (k = 1/val_split) is held out for
    validation, so both parts sample the whole corpus. Training windows start at every position of
    the training text; the order of epoch e is a permutation seeded by (seed, e), so any step's
    batch can be recomputed (which makes resuming exact)."""

    def __init__(self, ids: np.ndarray, seq_len: int, batch_size: int, val_split: float,
                 seed: int):
        ids = np.asarray(ids, IDX_TYPE)
        block = max(16 * (seq_len + 1), 1024)
        period = max(2, int(round(1.0 / val_split))) if val_split > 0 else 0
        blocks = [ids[i:i + block] for i in range(0, len(ids), block)]
        held = [i for i in range(len(blocks)) if period and i % period == period - 1]
        if period and not held and len(blocks) > 1:
            held = [len(blocks) - 1]
        self.train_ids = np.concatenate([b for i, b in enumerate(blocks) if i not in held])
        self.val_ids = (np.concatenate([blocks[i] for i in held]) if held
                        else np.zeros(0, IDX_TYPE))
        self.seq_len, self.batch_size, self.seed = seq_len, batch_size, seed
        self.num_windows = len(self.train_ids) - seq_len
        if self.num_windows < batch_size or len(self.val_ids) < seq_len + 1:
            raise ValueError(f"corpus of {len(ids)} tokens is too small for windows of {seq_len}")
        self.steps_per_epoch = math.ceil(self.num_windows / batch_size)
        self._order_epoch, self._order = -1, None

    def _windows(self, source: np.ndarray, starts: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        idx = starts[:, None] + np.arange(self.seq_len + 1)[None, :]
        block = source[idx]
        return np.ascontiguousarray(block[:, :-1]), np.ascontiguousarray(block[:, 1:])

    def train_batch(self, epoch: int, step: int) -> Tuple[np.ndarray, np.ndarray]:
        if self._order_epoch != epoch:
            rng = np.random.default_rng([self.seed, epoch])
            self._order, self._order_epoch = rng.permutation(self.num_windows), epoch
        starts = self._order[step * self.batch_size:(step + 1) * self.batch_size]
        return self._windows(self.train_ids, starts)

    def val_batches(self, max_batches: int) -> List[Tuple[np.ndarray, np.ndarray]]:
        """Fixed validation batches of non-overlapping windows spread over the held-out text."""
        count = (len(self.val_ids) - 1) // self.seq_len
        starts = np.arange(count) * self.seq_len
        want = min(len(starts), max_batches * self.batch_size)
        starts = starts[np.linspace(0, len(starts) - 1, want).astype(np.int64)]
        return [self._windows(self.val_ids, starts[i:i + self.batch_size])
                for i in range(0, len(starts), self.batch_size)]
