"""Token log-probabilities of in-process `generate`, from the model's raw logits, one step at a time.

A forward hook on the causal LM (the innermost model under a peft wrapper, so a final-logit
soft-cap such as Gemma's is included) keeps the log-softmax of the last position's logits of
each forward pass and its top-k; after each decoding step the stopping criterion hands over the
token just chosen, whose log-probability is then read from that row. Memory stays one
(batch × vocab) row, not the whole `output_logits` history. The logits are the raw ones, before
temperature, top-p or repetition penalty: what vLLM reports by default (`raw_logprobs`).
"""
from __future__ import annotations

from lab.engines.logprobs import TokenLogprobs


def _causal_lm(model):
    """The module whose forward returns the final logits (peft's base model when wrapped)."""
    getter = getattr(model, "get_base_model", None)
    return getter() if callable(getter) else model


class LogprobRecorder:
    """Records, per decoding step, every row's chosen-token log-probability and top-k alternatives."""

    def __init__(self, model, k: int) -> None:
        self.k = k
        self._row = None
        self._top = None
        self.chosen: list = []  # per step: (batch,) log-probabilities of the chosen tokens
        self.top: list = []  # per step: ((batch, k) values, (batch, k) ids)
        self._handle = _causal_lm(model).register_forward_hook(self._hook)

    def _hook(self, module, inputs, output) -> None:
        import torch

        logits = getattr(output, "logits", None)
        if logits is None and isinstance(output, tuple):
            logits = output[0]
        if logits is None:
            return
        row = torch.log_softmax(logits[:, -1, :].float(), dim=-1)
        self._row = row
        self._top = torch.topk(row, self.k, dim=-1) if self.k > 0 else None

    def note(self, input_ids) -> None:
        """After a decoding step: the chosen tokens are the last column of `input_ids`."""
        if self._row is None:
            return
        chosen = self._row.gather(1, input_ids[:, -1:]).squeeze(1)
        self.chosen.append(chosen.cpu())
        if self._top is not None:
            self.top.append((self._top.values.cpu(), self._top.indices.cpu()))
        self._row = self._top = None

    def close(self) -> None:
        self._handle.remove()

    def for_row(self, b: int, ids: list[int], tokenizer) -> TokenLogprobs | None:
        """Row `b`'s generated tokens `ids` (already cut at EOS) as TokenLogprobs."""
        n = min(len(ids), len(self.chosen))
        if n == 0 and ids:
            return None

        def text(token_id: int) -> str:
            return tokenizer.decode([int(token_id)], skip_special_tokens=False)

        out = TokenLogprobs(k=self.k)
        out.extend(
            [text(t) for t in ids[:n]],
            [float(self.chosen[t][b]) for t in range(n)],
            [{text(i): float(v) for v, i in zip(self.top[t][0][b].tolist(), self.top[t][1][b].tolist())}
             if self.top else None for t in range(n)],
        )
        return out
