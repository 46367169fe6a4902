"""A word-level tokenizer for every model's card, so TransformerLens's string habits work.

``model.to_tokens("0 1 1")``, ``model.to_str_tokens(tokens)``, ``model.to_string`` and
``model("0 1 1")`` take the card's token names (``card.input_tokens``: ``BOS``, the alphabet's
symbols, brackets, FFL's ``w r i 0 1``), separated by spaces or not; the tokenizer adds the card's
prefix (BOS, and any padding a construction reads before the word) itself, so the tokens are exactly
``card.io.encode(word)``. A name the model does not know, or strings of different lengths in one
batch (there is no padding token), is refused with one line naming the model's tokens.

``generate`` samples the model's *output* as the next *input*: that is meaningful only when the two
vocabularies are the same (the flip-flop language). Other models predict a state or a stack top, so
their ``generate`` refuses and points at :func:`sandbox_lens.interp.model.run.predict`.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from transformers import PreTrainedTokenizerFast  # TransformerLens imports it too: no extra cost

from sandbox_lens.interp.errors import ModelKindError, VocabularyError

__all__ = ["tokenizer_for", "attach_tokenizer"]


def _pattern(names: list[str]) -> str:
    # longest first, so "10" is not read as "1" then "0" and "(0 1 2)" not as "(0 1)"
    return "|".join(re.escape(n) for n in sorted(set(names), key=len, reverse=True))


def tokenizer_for(card: Any):
    """A Hugging Face fast tokenizer over ``card.input_tokens`` that prepends ``card.io.prefix``."""
    from tokenizers import Regex, Tokenizer, pre_tokenizers, processors
    from tokenizers.models import WordLevel

    names = list(card.input_tokens)
    if len(set(names)) != len(names) or any(not n or n != n.strip() for n in names):
        raise VocabularyError(f"token names must be distinct and not blank: {names}")
    vocab = {n: i for i, n in enumerate(names)}
    pattern = _pattern(names)
    core = Tokenizer(WordLevel(vocab, unk_token=None))
    core.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(pattern), behavior="isolated"),
            pre_tokenizers.Split(Regex(r"^\s+$"), behavior="removed"),
        ]
    )
    prefix = [names[i] for i in card.io.prefix]
    if prefix:
        core.post_processor = processors.TemplateProcessing(
            single=[*prefix, "$A"], special_tokens=[(n, vocab[n]) for n in dict.fromkeys(prefix)]
        )
    # Hugging Face wants a pad token before it will tokenize a batch; ragged batches are refused, so it never
    # pads (without a prefix, an id past the model's vocabulary: no symbol may be special, decoding skips those)
    tok = _CardTokenizer(
        tokenizer_object=core,
        bos_token=prefix[0] if prefix else None,
        pad_token=prefix[0] if prefix else "<unused pad>",
        model_max_length=10**9,
        clean_up_tokenization_spaces=False,
    )
    tok.check = re.compile(rf"(?:\s*(?:{pattern}))*\s*")
    tok.piece = re.compile(rf"\s*(?:{pattern})")
    tok.names = names
    tok.prefix_length = len(prefix)
    return tok


class _CardTokenizer(PreTrainedTokenizerFast):
    """Refuses names outside the card and ragged batches in one line, before Hugging Face sees them."""

    def __call__(self, text, *args, **kwargs):
        texts = [text] if isinstance(text, str) else list(text) if isinstance(text, (list, tuple)) else None
        if texts is not None and all(isinstance(t, str) for t in texts):
            lengths = {self._length(t) for t in texts}
            if len(lengths) > 1 and kwargs.get("padding"):
                raise VocabularyError(
                    f"strings of {sorted(lengths)} tokens in one batch: these models have no "
                    "padding token; tokenize words of one length together"
                )
        return super().__call__(text, *args, **kwargs)

    def _length(self, text: str) -> int:
        if not self.check.fullmatch(text):
            at = 0
            while (m := self.piece.match(text, at)) is not None:
                at = m.end()
            rest = text[at:].strip()
            raise VocabularyError(
                f"{rest.split()[0] if rest else rest!r} is not a token of this model; its tokens are "
                f"{', '.join(self.names)} (separated by spaces or not)"
            )
        return len(self.piece.findall(text))


def _refuse_generate(card: Any):
    def generate(*args: Any, **kwargs: Any):
        raise ModelKindError(
            f"generate() feeds the model's output back as its next input, but this {card.construction} "
            f"model outputs {', '.join(card.output_names[:6])}{' …' if len(card.output_names) > 6 else ''} "
            f"and reads {', '.join(card.input_tokens[:6])}{' …' if len(card.input_tokens) > 6 else ''}; "
            "use sandbox_lens.interp.model.run.predict(model, words) for its outputs"
        )

    return generate


def attach_tokenizer(model: Any) -> Any:
    """Give ``model`` (with a ``card``) the card's tokenizer; refuse ``generate`` where outputs are not inputs."""
    if not hasattr(type(model), "to_tokens"):  # the LSTM baseline: no TransformerLens string methods to serve
        return model
    card = model.card
    # a TransformerBridge treats a second assignment as a new tokenizer for its cfg: it re-runs its own BOS set-up
    # and rewrites d_vocab and d_vocab_out from the vocabulary. A model adopted or re-carded twice would lose its
    # output size, so any earlier tokenizer is taken off first and the card's is always a first assignment.
    model.tokenizer = None
    model.tokenizer = tokenizer_for(card)
    model.tokenizer.padding_side = "right"
    # the tokenizer prepends the card's whole prefix; TransformerLens must not add a BOS of its own
    model.cfg.tokenizer_prepends_bos = bool(card.io.prefix)
    model.cfg.default_prepend_bos = bool(card.io.prefix)
    if list(card.output_names) != list(card.input_tokens):
        model.generate = _refuse_generate(card)
    else:  # the language has no end-of-string token: generate the requested number of tokens
        model.generate = functools.partial(type(model).generate, model, stop_at_eos=False)
    return model
