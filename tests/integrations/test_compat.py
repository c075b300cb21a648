"""reward_service.compat: OpenRLHF/slime requests → items (pure, no server)."""

from __future__ import annotations

import pytest

from reward_service.compat import (
    END_TOKENS,
    LEADING_TOKENS,
    CompatError,
    extract_response,
    label_text,
    openrlhf_items,
    slime_item,
    strip_leading_tokens,
    strip_trailing_tokens,
)

# Prompts as each template renders them (add_generation_prompt=True), and how OpenRLHF's
# tokenizer.batch_decode(..., skip_special_tokens=False) renders prompt + response.
QWEN_PROMPT = (
    "<|im_start|>system\nPlease reason step by step.<|im_end|>\n"
    "<|im_start|>user\nWhat is 7*6?<|im_end|>\n<|im_start|>assistant\n"
)
LLAMA3_PROMPT = (
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nWhat is 7*6?<|eot_id|>"
    "<|start_header_id|>assistant<|end_header_id|>\n\n"
)
MISTRAL_PROMPT = "<s>[INST] What is 7*6? [/INST]"
GEMMA_PROMPT = "<bos><start_of_turn>user\nWhat is 7*6?<end_of_turn>\n<start_of_turn>model\n"
DEEPSEEK_PROMPT = "<｜begin▁of▁sentence｜><｜User｜>What is 7*6?<｜Assistant｜>"  # noqa: RUF001
ANSWER = "6*7 = 42, so \\boxed{42}"


@pytest.mark.parametrize(
    ("prompt", "query"),
    [
        (QWEN_PROMPT, QWEN_PROMPT + ANSWER + "<|im_end|>"),
        (QWEN_PROMPT, QWEN_PROMPT + ANSWER + "<|im_end|>\n<|endoftext|><|endoftext|>"),
        # older OpenRLHF decodes the padded sequence: Qwen pads with <|endoftext|> on the left
        (QWEN_PROMPT, "<|endoftext|>" * 3 + QWEN_PROMPT + ANSWER + "<|im_end|><|endoftext|>"),
        (LLAMA3_PROMPT, LLAMA3_PROMPT + ANSWER + "<|eot_id|>"),
        # the tokenizer adds a BOS the template already wrote: a doubled BOS in the query
        (LLAMA3_PROMPT, "<|begin_of_text|>" + LLAMA3_PROMPT + ANSWER + "<|eot_id|>"),
        (LLAMA3_PROMPT, LLAMA3_PROMPT + ANSWER + "<|eot_id|><|finetune_right_pad_id|>"),
        (MISTRAL_PROMPT, MISTRAL_PROMPT + " " + ANSWER + "</s>"),
        (GEMMA_PROMPT, GEMMA_PROMPT + ANSWER + "<end_of_turn>\n<eos>"),
        (DEEPSEEK_PROMPT, DEEPSEEK_PROMPT + ANSWER + "<｜end▁of▁sentence｜>"),  # noqa: RUF001
        ("Human: What is 7*6?\nAssistant: ", "Human: What is 7*6?\nAssistant: " + ANSWER + "</s>"),
    ],
)
def test_response_is_found_and_trailing_tokens_dropped(prompt: str, query: str) -> None:
    response, reason = extract_response(query, prompt)
    assert reason is None
    assert response is not None and response.strip() == ANSWER


def test_prompt_changed_by_the_tokenizer_falls_back_to_the_last_assistant_marker() -> None:
    # decode() can normalise spaces, so the prompt text is not in the query: use the template
    query = QWEN_PROMPT.replace("step by step", "step  by step") + ANSWER + "<|im_end|>"
    assert extract_response(query, QWEN_PROMPT) == (ANSWER, None)


def test_without_prompts_the_assistant_marker_is_used() -> None:
    assert extract_response(LLAMA3_PROMPT + ANSWER + "<|eot_id|>", None) == (ANSWER, None)


def test_no_prompt_and_no_marker_is_an_item_error_with_a_reason() -> None:
    response, reason = extract_response("just some text \\boxed{1}", "a prompt not in it")
    assert response is None
    assert reason is not None and "prompt does not occur" in reason


def test_the_response_mentioning_the_prompt_keeps_its_own_text() -> None:
    query = QWEN_PROMPT + "Repeat: What is 7*6? It is \\boxed{42}<|im_end|>"
    assert extract_response(query, QWEN_PROMPT)[0] == "Repeat: What is 7*6? It is \\boxed{42}"


def test_strip_helpers() -> None:
    assert strip_trailing_tokens("x <|im_end|> \n<|endoftext|>\n") == "x"
    assert strip_trailing_tokens("</s>") == ""
    assert strip_trailing_tokens("a<|im_end|>b") == "a<|im_end|>b"  # only at the end
    assert strip_leading_tokens("<pad><pad><s>[INST]") == "[INST]"
    assert strip_leading_tokens(" <s>x") == " <s>x"  # only at the start, nothing else moved


def test_labels() -> None:
    assert label_text("18", "l") == "18"
    assert label_text(18, "l") == "18"
    assert label_text(0.5, "l") == "0.5"
    assert label_text(None, "l") == ""
    with pytest.raises(CompatError, match="labels\\[2\\] is a list"):
        label_text(["1", "2"], "labels[2]")
    with pytest.raises(CompatError, match="boolean"):
        label_text(True, "l")


def test_openrlhf_items_in_order() -> None:
    q = [QWEN_PROMPT + "\\boxed{42}<|im_end|>", "garbage without marker"]
    items = openrlhf_items(q, [QWEN_PROMPT, "not there"], ["42", 7])
    assert [(e.response, e.ground_truth) for e in items] == [("\\boxed{42}", "42"), (None, "7")]
    assert items[1].reason is not None


@pytest.mark.parametrize(
    ("prompts", "labels", "match"),
    [
        ([QWEN_PROMPT], None, "'labels' is missing.*--label_key"),
        ([QWEN_PROMPT], ["1", "2"], "'labels' has 2 entries but 'query' has 1"),
        ([QWEN_PROMPT, QWEN_PROMPT], ["1"], "'prompts' has 2 entries but 'query' has 1"),
        ([QWEN_PROMPT], [""], "every label is empty.*--label_key"),
        ([QWEN_PROMPT], [None], "every label is empty"),
        (["elsewhere"], ["1"], "no response could be located"),
    ],
)
def test_openrlhf_whole_request_errors(prompts, labels, match) -> None:  # type: ignore[no-untyped-def]
    query = [QWEN_PROMPT + "\\boxed{1}<|im_end|>"] if prompts != ["elsewhere"] else ["plain text"]
    with pytest.raises(CompatError, match=match):
        openrlhf_items(query, prompts, labels)


def test_openrlhf_empty_request_is_empty() -> None:
    assert openrlhf_items([], [], []) == []


def test_slime_item() -> None:
    e = slime_item("so \\boxed{3}<|im_end|>", 3)
    assert (e.response, e.ground_truth) == ("so \\boxed{3}", "3")
    with pytest.raises(CompatError, match="--label-key"):
        slime_item("x", None)


def _best_of(fn, repeat: int = 5) -> float:  # type: ignore[no-untyped-def]
    import time

    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


@pytest.mark.parametrize("side", ["trailing", "leading"])
def test_token_stripping_is_linear_in_the_text(side: str) -> None:
    """Stripping 16,000 tokens costs a small multiple of one regex scan of the same text.

    Removing a token at a time copied the string once per token (quadratic): a 1.9 MB
    response of ``</s>`` froze the server 15 s. Measured here, best of 5 each: one pass is
    ~30-50x a bare ``[^\\x00]*`` scan; the token-at-a-time loop was 1,300-2,300x at this size
    (and grows with the size). The bound sits between them with a wide margin both ways."""
    import re

    k = 16000
    text = "\\boxed{5}" + "</s>\n" * k if side == "trailing" else "<pad>" * k + "<s>x"
    scan = re.compile(r"[^\x00]*")
    strip = strip_trailing_tokens if side == "trailing" else strip_leading_tokens
    assert strip(text) in ("\\boxed{5}", "x")
    baseline = _best_of(lambda: scan.match(text))
    stripping = _best_of(lambda: strip(text))
    assert stripping / baseline < 300, (stripping, baseline)


def test_stripping_matches_token_at_a_time_removal() -> None:
    """The one-pass strip gives what removing the listed tokens one at a time gives."""
    import random

    def slow_trailing(text: str) -> str:
        out, changed = text.rstrip(), True
        while changed:
            changed = False
            for tok in END_TOKENS:
                if out.endswith(tok):
                    out, changed = out[: -len(tok)].rstrip(), True
        return out

    def slow_leading(text: str) -> str:
        out, changed = text, True
        while changed:
            changed = False
            for tok in LEADING_TOKENS:
                if out.startswith(tok):
                    out, changed = out[len(tok):], True
        return out

    rng = random.Random(0)
    parts = [*END_TOKENS, *LEADING_TOKENS, " ", "\n", "x", "\\boxed{5}", "<", "|>", "s>"]
    for _ in range(5000):
        text = "".join(rng.choice(parts) for _ in range(rng.randint(0, 8)))
        assert strip_trailing_tokens(text) == slow_trailing(text), repr(text)
        assert strip_leading_tokens(text) == slow_leading(text), repr(text)
