"""Request and response bodies of the HTTP API (pydantic models; OpenAPI at /docs)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from reward_service.scorers.base import Status

__all__ = [
    "GetRewardRequest",
    "GetRewardResponse",
    "InfoResponse",
    "ItemResult",
    "ScoreItem",
    "ScoreRequest",
    "ScoreResponse",
    "SlimeRewardDetail",
    "SlimeRewardOptions",
    "SlimeRewardRequest",
]


class ScoreItem(BaseModel):
    """One response to score against its ground truth."""

    model_config = ConfigDict(extra="forbid")

    response: str = Field(description="The model's full response text.")
    ground_truth: str = Field(description="The reference answer (e.g. '18', '\\frac{1}{2}').")
    data_source: str | None = Field(
        None, max_length=256,
        description="Dataset name used for routing, e.g. 'openai/gsm8k' (verl style).",
    )
    scorer: str | None = Field(
        None, max_length=64,
        description="Scorer to use; overrides routing. See GET /v1/info for the list.",
    )
    id: str | None = Field(None, max_length=256, description="Echoed back in the result.")
    extra: dict[str, Any] | None = Field(
        None, description="Scorer options (numeric: rel_tol, abs_tol; choice: choices; math, gsm8k, "
        "choice, numeric: think, default true: judge only what follows </think>, an unclosed "
        "<think> is no_answer)."
    )


class ScoreRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    items: list[ScoreItem] = Field(description="Items to score; results come back in order.")
    # strict: a JSON number (integer or not); lax mode would take true as 1.0 and "5" as 5.0
    timeout_s: float | None = Field(
        None, gt=0, strict=True,
        description="Deadline per item, from the moment a worker starts it.",
    )


class ItemResult(BaseModel):
    id: str | None = None
    score: float = Field(description="1.0 when correct, else 0.0.")
    status: Status
    scorer: str
    scorer_version: str
    extracted: str | None = Field(None, description="Final answer taken from the response.")
    extracted_gold: str | None = Field(None, description="Answer taken from the ground truth.")
    reason: str | None = Field(None, description="Why, for no_answer/bad_ground_truth/timeout/error.")
    elapsed_s: float = Field(description="Scoring time on a worker (0 for cache hits).")
    cached: bool = Field(False, description="Answered from the verdict cache.")


class ScoreResponse(BaseModel):
    results: list[ItemResult]
    count: int
    statuses: dict[str, int] = Field(description="How many results have each status.")
    elapsed_s: float = Field(description="Wall time for the whole request on the server.")


class InfoResponse(BaseModel):
    version: str
    scorers: list[dict[str, Any]]
    default_scorer: str
    limits: dict[str, Any]
    workers: dict[str, Any]
    sandbox: dict[str, Any]
    auth: bool
    warnings: list[str] = Field(
        default_factory=list,
        description="What the operator should know, e.g. listening beyond loopback without "
        "a token.")


class GetRewardRequest(BaseModel):
    """OpenRLHF's remote reward request (``openrlhf/utils/remote_rm_utils.py``).

    Unknown keys (some forks add ``metadata`` or ``datasources``) are ignored.
    """

    model_config = ConfigDict(extra="ignore")

    query: list[str] = Field(
        description="Prompt + response per item, decoded with special tokens kept."
    )
    prompts: list[str] | None = Field(
        None, description="The templated prompt of each item; stripped from its query."
    )
    labels: list[Any] | None = Field(
        None, description="Ground truth per item (OpenRLHF's --label_key column)."
    )


class GetRewardOptions(BaseModel):
    """``/get_reward``'s options, in the URL (OpenRLHF posts only the body):
    ``--remote_rm_url 'http://HOST:PORT/get_reward?scorer=gsm8k&timeout_s=10'``."""

    scorer: str | None = Field(None, max_length=64, description="Scorer for every item.")
    data_source: str | None = Field(None, max_length=256, description="Route as verl does.")
    timeout_s: float | None = Field(None, gt=0, description="Deadline per item.")


class GetRewardResponse(BaseModel):
    """What OpenRLHF reads: ``rewards``, ``scores`` and ``extra_logs`` (numbers, one per item)."""

    rewards: list[float] = Field(description="1.0 correct, else 0.0; one per query, in order.")
    scores: list[float] = Field(description="Same as rewards (OpenRLHF's dynamic filtering).")
    extra_logs: dict[str, list[float]] = Field(
        description="Per-item 0/1 indicators logged by OpenRLHF: acc, no_answer, "
        "bad_ground_truth, timeout, error (an item not scored has reward 0 and a 1 here), "
        "and rule/<rule> for the scoring rule that decided the item (rule/hedged: the "
        "response offered more than one final answer)."
    )
    statuses: dict[str, int] = Field(description="How many results have each status.")
    results: list[ItemResult] = Field(description="The full result of each item, in order.")


class SlimeRewardRequest(BaseModel):
    """slime's remote reward request (``slime/rollout/rm_hub/__init__.py``: ``remote_rm``).

    Unknown keys are ignored; ``prompt`` is accepted in any form and not used (slime sends the
    response separately).
    """

    model_config = ConfigDict(extra="ignore")

    prompt: Any = Field(None, description="sample.prompt (unused).")
    response: str = Field(description="sample.response: the generated text alone.")
    label: Any = Field(None, description="sample.label: the ground truth (--label-key).")


class SlimeRewardOptions(BaseModel):
    """``/slime/reward``'s options, in the URL (slime posts only the body):
    ``--rm-url 'http://HOST:PORT/slime/reward?details=true&scorer=gsm8k'``."""

    details: bool = Field(False, description="Answer a dict (with --reward-key score) "
                                             "instead of a bare number.")
    scorer: str | None = Field(None, max_length=64, description="Scorer for the item.")
    data_source: str | None = Field(None, max_length=256, description="Route as verl does.")
    timeout_s: float | None = Field(None, gt=0, description="Deadline.")


class SlimeRewardDetail(BaseModel):
    """The reply with ``?details=true``: use with slime's ``--reward-key score``."""

    score: float
    acc: float = Field(description="1.0 when correct (slime's --eval-reward-key acc).")
    pred: str = Field(description="The extracted answer, '' when none.")
    status: Status
    reason: str | None = None
