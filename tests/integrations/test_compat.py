"""reward_service.server.compat: OpenRLHF/slime requests → items (pure, no server)."""

from __future__ import annotations

import pytest

from reward_service.server.compat import (
    END_TOKENS,
    LEADING_TOKENS,
    CompatError,
    extract_response,
    label_text,
    locate_response,
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
    assert locate_response(query, QWEN_PROMPT) == (ANSWER, "assistant_marker")
    assert "assistant-turn marker" in (extract_response(query, QWEN_PROMPT)[1] or "")


def test_without_prompts_the_assistant_marker_is_used() -> None:
    assert locate_response(LLAMA3_PROMPT + ANSWER + "<|eot_id|>", None) == (
        ANSWER, "assistant_marker")


# The reproduction: OpenRLHF >= 0.9.1 cut the plain prompt from the left to fit
# max_len; the query starts in the middle of the prompt, and there is no template marker.
CUT_PROMPT = "Question: Some context. Some context. What is 6*7?\nAnswer: "
CUT_QUERY = "context. What is 6*7?\nAnswer: The answer is 42.<|im_end|>"


def test_a_prompt_cut_from_the_left_is_stripped_by_its_surviving_suffix() -> None:
    assert locate_response(CUT_QUERY, CUT_PROMPT) == ("The answer is 42.", "prompt_suffix")
    # a garbled first token (a byte-level BPE token cut mid-character) is tolerated
    garbled = "\ufffd" + CUT_QUERY[1:]
    assert locate_response(garbled, CUT_PROMPT) == ("The answer is 42.", "prompt_suffix")
    # the longest surviving suffix wins where the prompt repeats itself
    assert locate_response("ome context. Some context. What is 6*7?\nAnswer: 42", CUT_PROMPT) \
        == ("42", "prompt_suffix")


def test_no_prompt_and_no_marker_scores_the_whole_query_and_says_so() -> None:
    response, note = extract_response("<s>just some text \\boxed{1}</s>", "a prompt not in it")
    assert response == "just some text \\boxed{1}"
    assert note is not None and "whole query was scored" in note


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
    q = [QWEN_PROMPT + "\\boxed{42}<|im_end|>", "garbage without marker", CUT_QUERY, "x"]
    items = openrlhf_items(q, [QWEN_PROMPT, "not there", CUT_PROMPT, "p"], ["42", 7, "42", [1]])
    assert [(e.response, e.ground_truth, e.how) for e in items] == [
        ("\\boxed{42}", "42", "prompt"), ("garbage without marker", "7", "whole_query"),
        ("The answer is 42.", "42", "prompt_suffix"), (None, "", "")]
    assert items[0].reason is None and items[1].reason and items[2].reason
    assert "labels[3] is a list" in (items[3].reason or "")  # its own item, not the request


def test_one_null_label_is_its_own_item_not_the_whole_request() -> None:
    """OpenRLHF >= 0.9.1 sends one sample per request: refusing it is a None reward."""
    (item,) = openrlhf_items([QWEN_PROMPT + "\\boxed{1}"], [QWEN_PROMPT], [None])
    assert (item.response, item.ground_truth) == ("\\boxed{1}", "")  # → bad_ground_truth


@pytest.mark.parametrize(
    ("prompts", "labels", "match", "reason"),
    [
        ([QWEN_PROMPT], None, "'labels' is missing.*--label_key", "labels_missing"),
        ([QWEN_PROMPT], ["1", "2"], "'labels' has 2 entries but 'query' has 1",
         "length_mismatch"),
        ([QWEN_PROMPT, QWEN_PROMPT], ["1"], "'prompts' has 2 entries but 'query' has 1",
         "length_mismatch"),
        # what OpenRLHF sends without --label_key: "" for every sample
        ([QWEN_PROMPT], [""], "every label is empty.*--label_key", "labels_empty"),
    ],
)
def test_openrlhf_whole_request_errors(prompts, labels, match, reason) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(CompatError, match=match) as info:
        openrlhf_items([QWEN_PROMPT + "\\boxed{1}<|im_end|>"], prompts, labels)
    assert info.value.reason == reason


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
